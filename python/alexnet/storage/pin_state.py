"""A pin an upload finds on the board: its latest complete version's metadata (:func:`pin_state`), and the source a
later upload records in it (:func:`record_source`). Writing versions is :mod:`alexnet.storage.publish`'s."""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

from ..checks import some_names
from ..errors import BoardError
from .board import Board
from .layout import FORMAT_VERSION

log = logging.getLogger(__name__)


def pin_state(board: Board, name: str) -> dict[str, Any] | None:
    """The metadata of pin ``name`` (with its ``version``) if its latest version is complete on the board, else None.

    An upload killed while copying leaves a version folder without ``data.txt`` or with a missing or
    short file; such a version is deleted (the whole pin if it was the only one) so that it is written
    again. A version not written by this package (no ``alexnet`` format in its metadata) is left alone:
    None, and a new version goes on top. A folder ``name`` that holds anything else than versions is no pin: a
    ``BoardError``, and nothing deleted.
    """
    from pins.versions import Version

    pins = board.pins
    versions = pins.pin_versions(name, as_df=False)
    others = sorted(v.version for v in versions if not isinstance(v, Version))
    if others:  # a folder of the user's by a category's name: no pin's, and nothing of it is deleted
        raise BoardError(f"board {board.location} holds {name}/ that is no pin (it holds {some_names(others)}, no "
                         "version of one): the upload writes a pin of that name there, and would replace it; give a "
                         "board of its own (a new or empty folder or bucket prefix, or one this package uploaded to).")
    if not versions:
        log.warning("pin %s has no versions on the board (upload interrupted?); writing it again", name)
        pins.pin_delete(name)
        return None
    version = versions[-1].version
    try:
        meta = pins.pin_meta(name, version)
    except FileNotFoundError:  # killed before data.txt was written
        meta = None
    user = dict(meta.user or {}) if meta is not None else {}
    if meta is not None and (user.get("alexnet") != FORMAT_VERSION or not user.get("sha256")):
        return None
    try:
        size = int(board.fs.info(pins.construct_path([name, version, meta.file]))["size"]) if meta else -1
    except FileNotFoundError:
        size = -1
    if size != int(user.get("bytes", -2)):
        log.warning("pin %s version %s is incomplete on the board (upload interrupted?); writing it again",
                    name, version)
        if len(versions) == 1:
            pins.pin_delete(name)
        else:
            pins.pin_version_delete(name, version)
        return None
    user["version"] = version
    return user


def record_source(board: Board, name: str, version: str, old: str, new: str) -> bool:
    """Record in version ``version`` of pin ``name`` (its ``data.txt``) that it was made from the source whose
    fingerprint is ``new``, where it says ``old``: the upload found the same zip made from a source of another
    fingerprint (the same images copied elsewhere, another layout, objects written again). Unrecorded, every later
    upload read and packed the category again to find the zip unchanged. Only that line changes, in place (a folder
    board's file replaced by a whole one, a bucket's object written whole); whether it was."""
    path = board.pins.construct_path([name, version, "data.txt"])
    text = bytes(board.fs.cat_file(path)).decode()
    line, replaced = f"\n  source: {old}\n", f"\n  source: {new}\n"
    if text.count(line) != 1:
        return False
    written = text.replace(line, replaced).encode()
    if board.kind == "file":
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        with open(temporary, "wb") as f:
            f.write(written)
        os.replace(temporary, path)
    else:
        board.fs.pipe_file(path, written)
    return True


__all__ = ["pin_state", "record_source"]
