"""Writing pins so that an interrupted upload can be run again: complete versions only, in time order, pruned.

- :func:`alexnet.storage.pin_state.pin_state` reads the metadata of a pin's latest version when that version is
  complete on the board, and deletes a version a killed upload left half-written.
- :func:`publish_file` writes a file as a new version of a pin, named after the pin's latest version, and
  :func:`write_table` a table (the board's ``categories`` and ``bad_images``, whose columns
  :mod:`alexnet.storage.layout` names) as a csv pin, likewise.
- :func:`alexnet.storage.prune.prune` keeps only the newest versions of pins once an upload is complete.

On a folder board a version appears whole or not at all: it is made in a folder of its own, on the board's file
system, then renamed into place (:func:`_install_version`). A write that fails leaves neither a version folder nor an
empty pin folder behind, and one that fails for a full disk says so, naming the board's folder
(:func:`~alexnet.storage.board.full_board`). On a bucket a version's files are separate objects; one whose copy
failed is deleted, and readers pass over a version that is not complete
(:func:`alexnet.storage.layout.complete_meta`).

A write is retried as the same version: its name (pins': creation time to the second and hash) is fixed by the first
attempt (:func:`_created`), so that a retry in a later second deletes and writes again the version a dropped
connection cut off, instead of writing another one beside it.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import functools
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .board import OWN_PREFIX, Board, full_board
from .layout import complete_meta, table_versions
from .transfer import DISK_FULL, retry, unreachable

log = logging.getLogger(__name__)

#: A version of a table on a bucket, not complete, that is older than this many seconds is one whose write was cut off
#: (not one under way): the next write of the table deletes it.
STALE_SECONDS = 3600.0


@contextlib.contextmanager
def quiet_pins() -> Iterator[None]:
    """pins prints a line per pin written; keep stderr for the progress bar (pins still logs it)."""
    from pins.config import pins_options

    before = pins_options.quiet
    pins_options.quiet = True
    try:
        yield
    finally:
        pins_options.quiet = before


def _next_created(board: Board, name: str, *, exists: bool | None = None) -> datetime.datetime:
    """Now, or one second after the pin's latest version if that is not earlier.

    pins names versions by creation time to the second and reads the last one in name order; two
    versions within a second would be ordered by their hash instead, so a quick re-upload could leave
    the older version looking current.
    """
    from pins.errors import PinsError
    from pins.versions import Version

    now = datetime.datetime.now().replace(microsecond=0)
    if not (exists if exists is not None else name in board.pin_names()):
        return now
    try:
        versions = [v for v in board.pins.pin_versions(name, as_df=False) if isinstance(v, Version)]
    except (PinsError, FileNotFoundError) as error:  # the pin was removed (an incomplete upload)
        log.debug("Pin %s has no version to come after (%s).", name, error)
        return now
    if not versions:
        return now
    return max(now, max(v.created for v in versions) + datetime.timedelta(seconds=1))


def _created(board: Board, name: str, exists: bool | None = None) -> Callable[[], datetime.datetime]:
    """The creation time of the version one write of pin ``name`` makes: :func:`_next_created`, taken by the write's
    first attempt (reading the board inside :func:`~alexnet.storage.transfer.retry`) and kept for its retries, which
    thus write the same version (pins names it by that time and the hash of its files)."""
    return functools.cache(functools.partial(_next_created, board, name, exists=exists))


def publish_file(board: Board, path: str | Sequence[str], name: str, *, title: str, metadata: Mapping[str, Any],
                 exists: bool, retries: int, move: bool = False) -> str:
    """Upload the local file ``path`` (or files, each by its name) as a new version of pin ``name`` (retried); its
    version name.

    ``exists`` says whether the pin is already on the board, whose latest version this one must follow. With
    ``move=False`` the files are left as they are and copied into the new version (:func:`_copy_version`). With
    ``move=True``, ``path`` is one file of the caller's scratch space, gone afterwards: the version folder is made
    around it where it lies (:func:`_version_folder`) and, on a folder board on the same file system, renamed into
    place, so that the file is written once (pins' way, a zip of an upload was written three times: packed, copied
    into the system's temporary folder, copied onto the board).

    Every attempt writes the same version (:func:`_created`): one a dropped connection cut off is written again.
    """
    created = _created(board, name, exists)
    if not move:
        files = [path] if isinstance(path, str) else list(path)
        return retry(f"uploading {name}",
                     lambda: _copy_version(board, files, name, title, metadata, exists, created()), retries)
    if not isinstance(path, str):
        raise TypeError("publish_file(move=True) takes one file")
    with _version_folder(path) as (folder, moved):
        return retry(f"uploading {name}",
                     lambda: _put_version(board, folder, moved, name, title, metadata, created()), retries)


@contextlib.contextmanager
def _version_folder(path: str) -> Iterator[tuple[str, str]]:
    """A new folder beside the file ``path`` with the file moved into it, and the file's new path; removed at the end
    with whatever is still in it.

    The folder is made with the mode of the folders pins makes on a board (``mkdir`` under the umask, not
    ``mkdtemp``'s owner-only mode): on a folder board it becomes the version's folder."""
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), f".pin-{uuid.uuid4().hex[:16]}")
    os.mkdir(folder)
    try:
        moved = os.path.join(folder, os.path.basename(path))
        os.rename(path, moved)
        yield folder, moved
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: Version folders whose copy a dropped connection cut off, deleted before the copy is tried again.
_LEFT: set[str] = set()


def _copy_version(board: Board, files: Sequence[str], name: str, title: str, metadata: Mapping[str, Any],
                  exists: bool, created: datetime.datetime) -> str:
    """Copy ``files`` into a version of pin ``name`` made whole in a folder of its own (:func:`_staging`) and put it on
    the board (:func:`_install_version`), so that a write cut short leaves no version that names files it lacks; the
    version's name. The version folder and its ``data.txt`` are those of pins' ``pin_upload()``, made by the same pins
    functions, created at ``created``; when the pin's newest version holds the same files (pins' hash), none is
    written and that version's name is returned, as ``pin_upload()`` does (unless it is the very version being
    written, which an earlier attempt left: that one is written again)."""
    pins = board.pins
    name = pins.path_to_pin(name)
    bases = [os.path.basename(file) for file in files]
    # pins names one file's object after its stem, several files after their names
    object_name: str | list[str] = bases if len(bases) > 1 else \
        bases[0][:len(bases[0]) - len("".join(Path(bases[0]).suffixes))]
    _drop_empty_pin(board, name)
    with _staging(board) as folder:
        meta = pins.prepare_pin_version(folder, files[0] if len(files) == 1 else list(files), name, "file", title,
                                        None, dict(metadata), None, created, object_name=object_name)
        version = str(meta.version.version)
        newest = None
        if exists:
            with contextlib.suppress(Exception):  # no newest version to compare with: this one is written
                newest = pins.pin_meta(name)
        if newest is not None and newest.pin_hash == meta.pin_hash and str(newest.version.version) != version:
            return str(newest.version.version)
        _install_version(board, folder, name, version)
    return version


def _put_version(board: Board, folder: str, file: str, name: str, title: str, metadata: Mapping[str, Any],
                 created: datetime.datetime) -> str:
    """Write pins' ``data.txt`` for ``file`` into ``folder`` (which holds it and nothing else) and put the folder on
    the board as the pin's new version, created at ``created`` (:func:`_install_version`); the version's name.

    The version folder and its ``data.txt`` are those of pins' ``pin_upload()``, made by the same pins functions;
    only the copy of the file into a folder of pins' own is left out, since it lies in one already.
    """
    pins = board.pins
    name = pins.path_to_pin(name)
    base = os.path.basename(file)
    stem = base[:len(base) - len("".join(Path(base).suffixes))]  # pins names a file pin's object so
    _drop_empty_pin(board, name)
    meta = pins.prepare_pin_version(folder, file, name, "file", title, None, dict(metadata), None, created,
                                    object_name=stem)
    version = str(meta.version.version)
    _install_version(board, folder, name, version)
    return version


def _drop_empty_pin(board: Board, name: str) -> None:
    """Remove the folder of pin ``name`` on a folder board when it holds no version (a write killed after making it):
    pins cannot name a version after none (``KeyError: 'version'``)."""
    if board.kind == "file":
        with contextlib.suppress(OSError):  # not there, or not empty: a version is in it
            os.rmdir(board.pins.construct_path([name]))


def _install_version(board: Board, folder: str, name: str, version: str) -> None:
    """Put the local folder ``folder`` (a version's files and ``data.txt``, nothing else) on the board as version
    ``version`` of pin ``name``: on a folder board renamed into place (when ``folder`` lies on another file system,
    copied to a hidden folder on the board's first, then renamed), so that the version appears whole or not at all;
    on a bucket copied, and deleted again when the copy fails.

    ``folder`` is gone afterwards on a folder board, whatever happened. A pin folder made for a version that failed
    is removed again, so that the next attempt starts as the first did. A version whose copy a dropped connection cut
    off is deleted by the next attempt, which writes the same version (:func:`_created`). A disk that is full raises
    :func:`~alexnet.storage.board.full_board`'s ``BoardError``."""
    pins, fs = board.pins, board.fs
    pin_path, version_path = pins.construct_path([name]), pins.path_to_deploy_version(name, version)
    if version_path in _LEFT:  # this process's copy cut off: deleted once the board answers again (else retried)
        if fs.exists(version_path):
            with contextlib.suppress(FileNotFoundError):
                fs.rm(version_path, recursive=True)
        _LEFT.discard(version_path)
    if fs.exists(version_path):
        from pins.errors import PinsError

        raise PinsError(f"version {version} of pin {name} is already on the board")
    if board.kind == "file":
        _rename_version(board, folder, pin_path, version_path)
        return
    if not fs.exists(pin_path):
        with contextlib.suppress(FileExistsError):
            fs.mkdir(pin_path)
    try:
        fs.put(folder, version_path, recursive=True)
    except BaseException as err:  # the retry, which writes this version again, finds none half-written
        if unreachable(err) is None:
            with contextlib.suppress(Exception):
                fs.rm(version_path, recursive=True)
        else:  # a board that does not answer is not asked, for another half minute, to delete it: the retry does
            _LEFT.add(version_path)
        raise


def _rename_version(board: Board, folder: str, pin_path: str, version_path: str) -> None:
    """:func:`_install_version` on a folder board."""
    staged = None
    try:
        try:
            _rename_into(folder, pin_path, version_path)
            return
        except OSError as err:
            if err.errno != errno.EXDEV:
                raise
        staged = os.path.join(board.location, f"{OWN_PREFIX}version-{uuid.uuid4().hex[:16]}")
        os.mkdir(staged)  # the mode of the folders pins makes (the umask's)
        for entry in os.scandir(folder):
            shutil.copyfile(entry.path, os.path.join(staged, entry.name))
        _rename_into(staged, pin_path, version_path)
        staged = None
    except OSError as err:
        with contextlib.suppress(OSError):  # not empty: another writer's version is in it
            os.rmdir(pin_path)
        if err.errno in DISK_FULL:
            raise full_board(board.location, err) from err
        if err.errno in (errno.EEXIST, errno.ENOTEMPTY) and os.path.isdir(version_path):
            from pins.errors import PinsError

            raise PinsError(f"version {os.path.basename(version_path)} of pin {os.path.basename(pin_path)} is "
                            "already on the board") from err
        raise
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)


def _rename_into(folder: str, pin_path: str, version_path: str) -> None:
    """Rename ``folder`` to ``version_path`` in the pin folder ``pin_path``, made when missing (again, should a writer
    of the same pin remove it as empty in between)."""
    for attempt in range(3):
        os.makedirs(pin_path, exist_ok=True)
        try:
            os.rename(folder, version_path)
            return
        except FileNotFoundError:
            if attempt == 2 or not os.path.isdir(folder):
                raise


def write_table(board: Board, rows: Sequence[dict[str, Any]], columns: Sequence[str], name: str, title: str,
                metadata: dict[str, Any] | None = None, *, retries: int = 0) -> Any:
    """Write ``rows`` as the csv pin ``name`` (a new version named after the pin's latest), attempted up to
    ``retries + 1`` times (:func:`~alexnet.storage.transfer.retry`); its pins metadata.

    The version is pins' ``pin_write()``'s, made in a folder of its own and put on the board whole
    (:func:`_install_version`); every attempt writes the same version (:func:`_created`). Versions newer than the
    newest complete one that are not complete (a write cut short) are deleted first: on a folder board all of them,
    on a bucket those older than :data:`STALE_SECONDS`. When the newest complete version holds the same table,
    nothing is written and its metadata is returned (as ``pin_write()`` does)."""
    import pandas as pd

    frame = pd.DataFrame(list(rows), columns=list(columns))
    created = _created(board, name)
    return retry(f"writing the {name} pin", lambda: _write_table(board, frame, name, title, metadata, created()),
                 retries)


def _write_table(board: Board, frame: Any, name: str, title: str, metadata: dict[str, Any] | None,
                 created: datetime.datetime) -> Any:
    """One attempt of :func:`write_table`: the version created at ``created``."""
    pins = board.pins
    newest = _drop_incomplete(board, name)
    _drop_empty_pin(board, name)
    with _staging(board) as folder:
        meta = pins.prepare_pin_version(folder, frame, name, "csv", title, None, metadata, None, created)
        if newest is not None and newest.pin_hash == meta.pin_hash:
            log.debug("pin %s holds this table already (version %s)", name, newest.version.version)
            return newest
        _install_version(board, folder, name, str(meta.version.version))
    return meta


@contextlib.contextmanager
def _staging(board: Board) -> Iterator[str]:
    """An empty folder to make a version in, removed at the end with whatever is still in it: on a folder board a
    hidden one at its root, on its file system (so that it is renamed into place), else a local temporary one."""
    if board.kind != "file":
        with tempfile.TemporaryDirectory(prefix="alexnet-pin-") as folder:
            yield folder
        return
    folder = os.path.join(board.location, f"{OWN_PREFIX}version-{uuid.uuid4().hex[:16]}")
    try:
        os.mkdir(folder)
    except OSError as err:
        if err.errno in DISK_FULL:
            raise full_board(board.location, err) from err
        raise
    try:
        yield folder
    except OSError as err:
        if err.errno in DISK_FULL:
            raise full_board(board.location, err) from err
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _drop_incomplete(board: Board, name: str) -> Any | None:
    """Delete the versions of pin ``name`` newer than its newest complete one that are not complete (see
    :func:`write_table`); the newest complete version's metadata, or None."""
    from pins.versions import Version

    now = datetime.datetime.now()
    for version in reversed(table_versions(board, name)):
        meta = complete_meta(board, name, version)
        if meta is not None:
            return meta
        parsed = _parsed_version(version)
        stale = parsed is not None and isinstance(parsed, Version) and \
            (now - parsed.created).total_seconds() > STALE_SECONDS
        if board.kind == "file" or stale:
            log.warning("pin %s version %s is incomplete on the board (a write cut short); deleting it", name, version)
            with contextlib.suppress(FileNotFoundError):
                board.pins.pin_version_delete(name, version)
    return None


def _parsed_version(version: str) -> Any | None:
    from pins.versions import guess_version

    try:
        return guess_version(version)
    except Exception:
        return None
