"""What a board holds, in one place: the pin names, the tables' columns, and how to read them (writing pins is
:mod:`alexnet.storage.publish`'s job).

All pins are pins-python versioned pins, readable by R's pins too:

* ``<wnid>``: one pin per category holding ``<wnid>.zip``: the category's good training images under their
  own file names, stored uncompressed (JPEGs don't compress) with fixed timestamps, so the same images
  always give the same bytes and the same sha256. The pin's metadata records the image count, size,
  sha256, the images left out and a fingerprint of the source files and options.
* ``val-<wnid>``: the category's validation images, zipped the same way; their label is the category.
* ``bad_images``: a csv table (:data:`BAD_IMAGE_COLUMNS`) of every file left out at upload.
* ``categories``: a csv table, one row per category (:data:`CATEGORY_COLUMNS`): ``id``, ``name``, ``index``
  (global 0-based label, sorted by id), ``images``, ``bytes``, ``sha256`` (of the zip), ``version`` (its pin
  version), and ``val_images``, ``val_bytes``, ``val_sha256``, ``val_version`` (0/empty without validation
  images). It is written after every category is on the board, so a board with a ``categories`` pin is
  complete.
* ``_pins.yaml``: a manifest of the current pin versions, so the board can be read over https://.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import BoardError
from .board import Board

#: Version of this layout, recorded in every pin's metadata (``alexnet``).
FORMAT_VERSION = 1
CATEGORIES_PIN = "categories"
BAD_IMAGES_PIN = "bad_images"
VAL_PREFIX = "val-"
#: Columns of the ``categories`` table, in order.
CATEGORY_COLUMNS = (
    "id", "name", "index", "images", "bytes", "sha256", "version",
    "val_images", "val_bytes", "val_sha256", "val_version",
)
#: Columns every ``categories`` table has (the ``val_`` ones and ``version`` may be absent in older ones).
REQUIRED_CATEGORY_COLUMNS = ("id", "name", "index", "images", "bytes", "sha256")
_INTEGER_COLUMNS = frozenset({"index", "images", "bytes", "val_images", "val_bytes"})
#: Columns of the ``bad_images`` table.
BAD_IMAGE_COLUMNS = ("category", "split", "file", "reason")


def board_own_pin(name: str) -> bool:
    """Whether ``name`` is one of a data board's own pins besides the categories' (the ``categories`` and
    ``bad_images`` tables, a ``val-<id>`` category's validation images): no category or model may be called so."""
    return name in (CATEGORIES_PIN, BAD_IMAGES_PIN) or name.startswith(VAL_PREFIX)


def is_file_name(name: str) -> bool:
    """Whether ``name`` names one file or folder, nothing above or below it: what a board's tables and metadata may
    give as a category id or a file name that becomes part of a local path (a board read, a public one perhaps, must
    not name ``../..`` and have a fetch write or replace files outside its cache)."""
    return name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def val_pin_name(wnid: str) -> str:
    """The pin holding category ``wnid``'s validation images."""
    return f"{VAL_PREFIX}{wnid}"


def zip_name(pin: str) -> str:
    """The file a category pin holds."""
    return f"{pin}.zip"


def zip_path(board: Board, pin: str, version: str) -> str:
    """Where version ``version`` of pin ``pin`` keeps its zip, on ``board.fs``."""
    return board.path(pin, version, zip_name(pin))


def read_categories(board: Board) -> list[dict[str, Any]]:
    """The ``categories`` table of ``board``: one dict per category with every column of :data:`CATEGORY_COLUMNS`,
    sorted by ``index``. ``BoardError`` when the board has no such table (its upload has not finished)."""
    from pins.errors import PinsError

    try:
        frame = board.pins.pin_read(CATEGORIES_PIN)
    except (PinsError, FileNotFoundError, KeyError):
        raise BoardError(
            f"board {board.location} has no categories pin: its upload has not finished (or never started); "
            "run imagenet_upload() to this board"
        ) from None
    except Exception as err:
        raise BoardError(
            f"cannot read the categories pin of {board.location}: {type(err).__name__}: {err}"
        ) from None
    missing = [c for c in REQUIRED_CATEGORY_COLUMNS if c not in frame.columns]
    if missing:
        raise BoardError(
            f"the categories pin of {board.location} lacks the columns {missing}: it was not written by "
            "imagenet_upload; upload the data again"
        )

    def cell(column: str, value: Any) -> Any:
        empty = value is None or (isinstance(value, float) and math.isnan(value))
        if column in _INTEGER_COLUMNS:
            return 0 if empty else int(value)
        return "" if empty else str(value)

    rows = [{column: cell(column, record.get(column)) for column in CATEGORY_COLUMNS}
            for record in frame.to_dict(orient="records")]
    odd = [r["id"] for r in rows if not is_file_name(r["id"])]
    if odd:
        raise BoardError(
            f"the categories pin of {board.location} names categories that are not folder names ({odd[0]!r}"
            f"{f' and {len(odd) - 1} more' if len(odd) > 1 else ''}): it was not written by imagenet_upload, and "
            "nothing is fetched from it; upload the data again"
        )
    return sorted(rows, key=lambda r: r["index"])
