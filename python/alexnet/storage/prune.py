"""Pruning a board's pins once an upload is complete: all but the newest versions of each pin the upload wrote are
deleted (``keep_versions``), except those the board's newest ``categories`` table names and those another upload at
the same time wrote (:func:`board_versions` when the upload began).

The versions to delete are chosen first, from one listing of the board (:func:`versions_to_delete`), so that the
board's manifest, written next, leaves them out, and deleted after (:func:`delete_versions`): the manifest never names
a version pruning deleted.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Mapping

from ..errors import BoardError
from .board import Board, board_files
from .layout import CATEGORIES_PIN, categories_and_version, val_pin_name
from .publish import quiet_pins
from .transfer import retry

log = logging.getLogger("alexnet.storage.publish")  # its lines keep the logger they had in publish.py


def board_versions(board: Board) -> dict[str, set[str]]:
    """Every pin on ``board`` and its versions (the folders below it), from one listing of the board
    (:func:`~alexnet.storage.board.board_files`): what was there before an upload, for :func:`prune`."""
    return {name: set(versions) for name, versions in board_files(board).items()}


def versions_to_delete(board: Board, current: Mapping[str, str], keep: int, *,
                       before: Mapping[str, set[str]] | None = None) -> dict[str, list[str]]:
    """The versions :func:`prune` deletes, pin -> versions, all but the ``keep`` newest versions of each pin in
    ``current`` (pin -> version just written), from one listing of the board.

    A pin whose newest version is not the one in ``current`` (another writer came after) is left alone. Of the older
    versions, none that the board's newest ``categories`` table names (read just before) is deleted, nor, when
    ``before`` (:func:`board_versions` when the upload began) is given, any that was not on the board then: an
    upload at the same time wrote it, and its categories table, still to come, may name it.
    """
    try:
        rows, table = categories_and_version(board)
    except BoardError as err:
        log.warning("no old pin versions deleted: the categories table of %s cannot be read (%s)", board.location, err)
        return {}
    named = {(CATEGORIES_PIN, table)} | {(row["id"], row["version"]) for row in rows} | \
        {(val_pin_name(row["id"]), row["val_version"]) for row in rows if row["val_version"]}
    on_board = board_versions(board)
    doomed: dict[str, list[str]] = {}
    spared = 0
    for name, version in sorted(current.items()):
        versions = sorted(on_board.get(name, ()))  # pins' order: the newest last
        if len(versions) <= keep:
            continue
        if versions[-1] != version:
            log.warning("pin %s has a version newer than this upload's (%s); its old versions are kept",
                        name, version)
            continue
        old = [v for v in versions[:-keep] if (name, v) not in named
               and (before is None or v in before.get(name, ()))]
        spared += len(versions) - keep - len(old)
        if old:
            doomed[name] = old
    if spared:
        log.info("kept %d old pin version(s) that the newest categories table names or another upload wrote",
                 spared)
    return doomed


def delete_versions(board: Board, doomed: Mapping[str, list[str]], keep: int, retries: int) -> int:
    """Delete the versions ``doomed`` (:func:`versions_to_delete`, which kept ``keep`` per pin); their number."""
    deleted = 0
    with quiet_pins():
        for name, old in sorted(doomed.items()):
            for old_version in old:
                retry(f"deleting version {old_version} of {name}",
                      functools.partial(_delete_version, board, name, old_version), retries)
            deleted += len(old)
    if deleted:
        log.info("deleted %d old pin version(s), keeping %d per pin", deleted, keep)
    return deleted


def prune(board: Board, current: Mapping[str, str], keep: int, retries: int, *,
          before: Mapping[str, set[str]] | None = None) -> int:
    """Delete all but the ``keep`` newest versions of each pin in ``current`` (pin -> version just written), but those
    :func:`versions_to_delete` keeps; the number of versions deleted. The board's manifest is not written: an upload
    writes it between the choice and the deletions (:func:`alexnet.data.upload.imagenet_upload`)."""
    return delete_versions(board, versions_to_delete(board, current, keep, before=before), keep, retries)


def _delete_version(board: Board, name: str, version: str) -> None:
    with contextlib.suppress(FileNotFoundError):  # deleted by another upload's pruning
        board.pins.pin_version_delete(name, version)
