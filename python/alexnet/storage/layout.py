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
* ``_pins.yaml``: a manifest of every complete version of every pin, as R pins writes it, so the board can be read
  over https:// (:meth:`alexnet.storage.board.Board.write_manifest`).

A version is complete when its ``data.txt`` reads as pins' metadata and every file it lists is there with the size
it records (:func:`complete_meta`). The tables are read from their newest complete version: a write cut short (a
full disk, a killed upload) or still under way is passed over.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Collection
from typing import Any

from ..errors import BoardError
from .board import Board

log = logging.getLogger(__name__)

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


def complete_meta(board: Board, name: str, version: str) -> Any | None:
    """pins' metadata of version ``version`` of pin ``name`` if that version is complete on ``board``: its
    ``data.txt`` reads as pins' metadata and each file it lists is there with the size it records; else None (a
    version whose write was cut short, or is still under way on a bucket, or one deleted meanwhile)."""
    import yaml
    from pins.errors import PinsError

    pins = board.pins
    try:
        meta = pins.pin_meta(name, version)
    except (FileNotFoundError, PinsError, yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError):
        return None  # no data.txt, or one cut short (pins reads an empty one as None)
    files = meta.file if isinstance(meta.file, (list, tuple)) else [meta.file]
    sizes = meta.file_size if isinstance(meta.file_size, (list, tuple)) else [meta.file_size]
    if len(files) != len(sizes):
        return None
    for file, size in zip(files, sizes, strict=True):
        try:
            if int(board.fs.info(pins.construct_path([name, version, file]))["size"]) != int(size):
                return None
        except (FileNotFoundError, TypeError, ValueError):
            return None
    return meta


def table_versions(board: Board, name: str) -> list[str]:
    """The versions of pin ``name`` on ``board``, the newest last; none when the pin is not there."""
    from pins.errors import PinsError

    try:
        return [str(v.version) for v in board.pins.pin_versions(name, as_df=False)]
    except (PinsError, FileNotFoundError, KeyError):
        return []


def _read_table(board: Board, name: str, version: str | None = None) -> Any:
    """Version ``version`` (None: the newest) of the csv pin ``name``, every cell read as text ("" when empty), as
    pins opens the file. Not through pins' own reading, which lets pandas guess each column's type from its first
    value: a SHA-256 such as ``80e9090399187286c...`` reads as a number with an exponent of 909 billion, which
    pandas 2's parser overflows on and crashes the process (pandas-dev/pandas#62617)."""
    import pandas as pd
    from pins.drivers import load_file

    meta = board.pins.pin_fetch(name, version)
    folder = board.pins.construct_path([board.pins.path_to_pin(name), meta.version.version])
    with load_file(meta.file, board.pins.fs, folder, meta.type) as f:
        return pd.read_csv(f, dtype=str, keep_default_na=False)


def _newest_complete_table(board: Board, name: str) -> tuple[Any, str | None]:
    """The newest complete version of the csv pin ``name`` (:func:`complete_meta`) as read by pins, and its version;
    ``(None, None)`` when there is none. An https:// board says its one version through its manifest."""
    from pins.boards import BoardManual
    from pins.errors import PinsError

    if isinstance(board.pins, BoardManual):
        return _read_table(board, name), None
    passed = []
    for version in reversed(table_versions(board, name)):
        if complete_meta(board, name, version) is None:
            passed.append(version)
            continue
        try:
            frame = _read_table(board, name, version)
        except (FileNotFoundError, PinsError):  # deleted since (an upload's pruning)
            passed.append(version)
            continue
        if passed:
            log.warning("the %s pin of board %s has incomplete versions newer than %s (%s: a write cut short, or "
                        "under way): read %s", name, board.location, version, ", ".join(passed), version)
        return frame, version
    return None, None


def read_categories(board: Board) -> list[dict[str, Any]]:
    """The ``categories`` table of ``board``: one dict per category with every column of :data:`CATEGORY_COLUMNS`,
    sorted by ``index``, from the newest complete version of the pin. ``BoardError`` when the board has no such table
    (its upload has not finished)."""
    return categories_and_version(board)[0]


def left_out_at_upload(board: Board, split: str, categories: Collection[str]) -> int | None:
    """How many images of ``split`` (``"train"`` or ``"val"``) of ``categories`` the upload left out, as the board's
    ``bad_images`` table records them; None when the board has no such table or it cannot be read (an older board,
    an https:// one that does not serve it): nothing is known."""
    try:
        frame, _ = _newest_complete_table(board, BAD_IMAGES_PIN)
    except Exception as error:  # what an evaluation says of it, never what stops it
        log.debug("cannot read the bad_images pin of %s: %s", board.location, error)
        return None
    if frame is None or not {"category", "split"} <= set(frame.columns):
        return None
    wanted = set(categories)
    return sum(1 for category, in_split in zip(frame["category"], frame["split"], strict=True)
               if str(in_split) == split and str(category) in wanted)


def stored_resize(board: Board, version: str | None) -> int | None:
    """The short side ``resize`` that version ``version`` of ``board``'s ``categories`` pin (None: its newest) says
    the upload stored the images at, as its metadata records the upload's summary; None when they were stored as
    they are, or when the metadata does not say (a board of an older upload, one that cannot be read)."""
    try:
        meta = board.pins.pin_meta(CATEGORIES_PIN, version)
        value = dict(meta.user or {}).get("resize")
        return None if value is None else int(value)
    except Exception as error:  # what training and evaluation say of it, never what stops them
        log.debug("cannot read the stored side of the categories pin of %s: %s", board.location, error)
        return None


def categories_and_version(board: Board) -> tuple[list[dict[str, Any]], str | None]:
    """:func:`read_categories` and the version of the ``categories`` pin it read (None on an https:// board)."""
    from pins.errors import PinsError

    try:
        frame, version = _newest_complete_table(board, CATEGORIES_PIN)
    except (PinsError, FileNotFoundError, KeyError):
        frame = None
    except Exception as err:
        raise BoardError(
            f"cannot read the categories pin of {board.location}: {type(err).__name__}: {err}"
        ) from None
    if frame is None:
        raise BoardError(
            f"board {board.location} has no categories pin: its upload has not finished (or never started); "
            "run imagenet_upload() to this board"
        )
    missing = [c for c in REQUIRED_CATEGORY_COLUMNS if c not in frame.columns]
    if missing:
        raise BoardError(
            f"the categories pin of {board.location} lacks the columns {missing}: it was not written by "
            "imagenet_upload; upload the data again"
        )

    def cell(column: str, value: Any) -> Any:
        empty = value is None or value == "" or (isinstance(value, float) and math.isnan(value))
        if column in _INTEGER_COLUMNS:
            return 0 if empty else _whole(column, value, board)
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
    elsewhere = [(r["id"], column, r[column]) for r in rows for column in ("version", "val_version")
                 if r[column] and not is_file_name(r[column])]
    if elsewhere:
        wnid, column, value = elsewhere[0]
        raise BoardError(
            f"the categories pin of {board.location} gives category {wnid} the {column} {value!r}, which is not a "
            "version's folder name (it would read a file outside the pin): it was not written by imagenet_upload, "
            "and nothing is fetched from it; upload the data again"
        )
    _check_labels(board, rows)
    return sorted(rows, key=lambda r: r["index"]), version


def _whole(column: str, value: str, board: Board) -> int:
    """The count ``value`` of a categories table's ``column`` (written ``12``, or ``12.0`` by a table that had an
    empty cell in that column); ``BoardError`` for anything else."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not number.is_integer():
        raise BoardError(f"the categories pin of {board.location} gives {column} = {value!r}, not a whole number: it "
                         "was not written by imagenet_upload; upload the data again")
    return int(value) if value.isdigit() else int(number)


def _check_labels(board: Board, rows: list[dict[str, Any]]) -> None:
    """``BoardError`` when the categories table does not give each of its categories once and a label of its own in
    ``0 .. n-1`` (a table edited by hand): two categories under one label would train as one class."""
    ids = Counter(r["id"] for r in rows)
    twice = sorted(wnid for wnid, count in ids.items() if count > 1)
    labels = Counter(r["index"] for r in rows)
    shared = sorted(label for label, count in labels.items() if count > 1)
    outside = sorted(label for label in labels if not 0 <= label < len(rows))
    problem = (f"names category {twice[0]} {ids[twice[0]]} times" if twice else
               f"gives label {shared[0]} to {labels[shared[0]]} categories" if shared else
               f"gives label {outside[0]}, outside 0..{len(rows) - 1} for its {len(rows)} categories" if outside
               else None)
    if problem is not None:
        raise BoardError(f"the categories pin of {board.location} {problem}: each category is listed once with a label "
                         "of its own, as imagenet_upload writes it; upload the data again")
