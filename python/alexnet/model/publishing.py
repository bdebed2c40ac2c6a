"""A model pin written: the board it goes to checked before any work (:func:`check_model_board`,
:func:`check_pin_holds_models`), a new version published with the model's card as its metadata
(:func:`publish_model`), or the newest version taken again when it already holds these weights
(:func:`published_with`). Its layout and reading: :mod:`.pin`."""

from __future__ import annotations

import logging
import os
from typing import Any

from ..checks import some_names
from ..declare.kinds import given_as
from ..errors import AlexnetError, BoardError
from ..storage.board import Board, open_board
from ..storage.location import WRITABLE, resolve_location
from ..storage.transfer import retry, sha256_file
from .card import ModelCard
from .options import EXPORT_FILES
from .pin import MODEL_PIN_KIND, latest_metadata

logger = logging.getLogger(__name__)


def check_model_board(model_board: str | os.PathLike | None, data_board: str | None,
                      setting: str = "model_board", pin: str | None = None) -> str:
    """The board a model pin goes to (``model_board``, given as the argument ``setting``, else the data's board),
    opened for writing to prove it can be; an :class:`AlexnetError` saying what to pass when there is none, a
    ``BoardError`` naming the argument when it cannot be written. A ``model_board`` that holds no pins is said to
    become a new board by the model pin ``pin``."""
    board = model_board if model_board is not None else data_board
    if board is None:
        raise AlexnetError(
            f"`model_pin` needs a board to write the model to, and `data` comes from no board: pass `{setting}` "
            "(a folder, gs:// or s3:// board)."
        )
    if model_board is not None:  # a mistyped location named as the argument that gave it, once
        resolve_location(model_board, setting, takes=WRITABLE)
    try:
        opened = open_board(board, write=True)
    except BoardError as err:
        which = (f"`{setting}`" if model_board is not None else
                 f"the data's board, where `model_pin` publishes without a `{setting}`")
        raise BoardError(f"{which}: {err}") from None
    if model_board is not None:  # said before the work, not once a run of days has ended
        _say_if_new(opened, f"model pin {pin}" if pin else "the model pin")
    return opened.location


#: The boards said to be made new by a model pin (once each in a process: before a run, not again when it publishes).
_SAID_NEW: set[str] = set()


def _say_if_new(opened: Board, pin: str, names: list[str] | None = None) -> None:
    """Warn that ``pin`` makes the board ``opened`` a new board when it holds no pins (``names``, when read): a
    mistyped location would otherwise go unnoticed (reading from a board that is not there is an error)."""
    if opened.location in _SAID_NEW or (names if names is not None else opened.pin_names()):
        return
    _SAID_NEW.add(opened.location)
    logger.warning("Board %s holds no pins: %s makes it a new board. If you meant an existing board, its location is "
                   "mistyped.", opened.location, pin)


def model_pin_metadata(card: ModelCard, sha256: str, size: int, export: dict[str, Any] | None = None
                       ) -> dict[str, Any]:
    """The pins metadata of a model pin: the card, the kind, the SHA-256 and size of its model file and, when it
    carries one, its ``export`` (``format``, ``file``, ``sha256``, ``bytes``)."""
    from ..storage.layout import FORMAT_VERSION

    extra = {"export": export} if export else {}
    return {"alexnet": FORMAT_VERSION, "kind": MODEL_PIN_KIND, "sha256": sha256, "bytes": int(size),
            **card.to_dict(), **extra}


def publish_model(board: str | None, name: str, model_file: str, card: ModelCard, *, retries: int = 3,
                  export_file: str | None = None, export_format: str | None = None,
                  export_top: int | None = None) -> dict[str, str]:
    """Upload ``model_file`` (an ``alexnet.keras`` saved for inference) as a new version of pin ``name`` on ``board``,
    with ``export_file`` beside it when given (named :data:`EXPORT_FILES` ``[export_format]``, returning the
    ``export_top`` classes per image, which its metadata records).

    The pin's metadata is :func:`model_pin_metadata`; the board's manifest is written again, listing the new version
    beside the older ones, so the pin can also be read over https://. A board that holds no pins yet gets a warning
    that the pin makes it a new board (a mistyped location would otherwise go unnoticed). Returns ``board``
    (resolved), ``name`` and ``version``.
    """
    from ..storage.publish import publish_file, quiet_pins

    opened = open_board(board, write=True)
    files, export = [model_file], None
    if export_file is not None:
        wanted = EXPORT_FILES[str(export_format)]
        if os.path.basename(export_file) != wanted:
            raise AlexnetError(f"internal: a {export_format} export is pinned as {wanted}, not {export_file}")
        files.append(export_file)
        export = {"format": export_format, "file": wanted, "sha256": sha256_file(export_file),
                  "bytes": os.path.getsize(export_file), **({"top": int(export_top)} if export_top else {})}
    metadata = model_pin_metadata(card, sha256_file(model_file), os.path.getsize(model_file), export)
    names = opened.pin_names()
    exists = name in names
    if exists:
        _warn_of_other_classes(opened, name, card)
    else:
        _say_if_new(opened, f"model pin {name}", names)
    with quiet_pins():
        version = publish_file(opened, files, name, title=f"AlexNet, {card.num_classes} classes",
                               metadata=metadata, exists=exists, retries=retries)
    retry("writing the board manifest", lambda: opened.write_manifest({name: version}), retries)
    return {"board": opened.location, "name": name, "version": version}


def published_with(board: str | None, name: str, weights_sha256: str | None, export_format: str | None = None,
                   export_top: int | None = None) -> dict[str, str] | None:
    """``board`` (resolved), ``name`` and ``version`` of the newest version of model pin ``name`` when it holds a
    model of these weights (its card's ``weights_sha256``) with what is asked: the Keras file, which every version
    holds, when ``export_format`` is None (an export pinned beside it since stays the newest version's), else an
    export of that format returning ``export_top`` classes per image too. ``None`` when the pin is not there, holds
    other weights or another export, or the card does not know its weights' SHA-256. Opened as it is to be written
    next (a new board, an empty bucket prefix, holds no pin yet)."""
    opened = open_board(board, write=True)
    if not weights_sha256 or name not in opened.pin_names():
        return None
    user, version = latest_metadata(opened, name)
    if user.get("kind") != MODEL_PIN_KIND or user.get("weights_sha256") != weights_sha256:
        return None
    carried = dict(user.get("export") or {})
    if export_format is not None and (carried.get("format") != export_format or carried.get("top") != export_top):
        return None
    return {"board": opened.location, "name": name, "version": version}


def _warn_of_other_classes(opened: Board, name: str, card: ModelCard) -> None:
    """Warn when the latest version of model pin ``name`` is a model of other classes than ``card``'s: the new version
    replaces it as the one read by default."""
    user, version = latest_metadata(opened, name)
    if user.get("kind") != MODEL_PIN_KIND:
        return
    theirs = [str(v) for v in user.get("class_ids") or []]
    if theirs and theirs != list(card.class_ids):
        logger.warning("Model pin %s on %s held a model of other classes (%d: %s) in its version %s; the new version, "
                       "of %d classes (%s), is now the one read by default: give another name to keep both in reach.",
                       name, opened.location, len(theirs), some_names(theirs), version, card.num_classes,
                       some_names(card.class_ids))


def check_pin_holds_models(board: str, name: str, setting: str = "model_pin") -> None:
    """Raise when pin ``name`` of ``board`` (resolved) is there and holds something else than models (a category's
    images, one of the board's tables): a model published as ``name`` would be a version of it. The board is opened
    for writing, as the model goes there: a prefix of a bucket that holds nothing yet is a board to write to."""
    opened = open_board(board, write=True)
    if name in opened.pin_names() and latest_metadata(opened, name)[0].get("kind") != MODEL_PIN_KIND:
        raise AlexnetError(f"{given_as(f'`{setting}`', repr(name))}: board {opened.location} has a pin {name!r} that "
                           "holds no model (a category's images or one of the board's tables): choose another name, "
                           f"e.g. {given_as(setting, repr(name + '-model'))}.")
