"""Where outputs go: a location proven writable before any work (:func:`writable_location`: a folder, ``file://``,
``gs://``, ``s3://``), a local folder only (:func:`local_location`), a local folder made and checked
(:func:`made_folder`), each refused with one error naming its argument; a folder made only to prove it writable is
taken away again where its writer makes it when it writes."""

from __future__ import annotations

import os
import stat
from typing import Any

from ..errors import AlexnetError, BoardError, reason
from .location import LOCAL, WRITABLE, check_bucket, fs_path, location_kind, open_filesystem, resolve_location
from .transfer import inside


def local_location(location: str | os.PathLike, what: str, holds: str) -> str:
    """``location`` resolved (:func:`resolve_location`) when it is a local folder (a path or ``file://``), where
    ``holds`` is written; a ``BoardError`` naming ``what`` for a bucket's or a server's URL, or a file."""
    resolved = resolve_location(location, what, takes=LOCAL)
    kind = location_kind(resolved)
    if kind != "file":
        raise BoardError(f"`{what}` = {resolved}: {holds} is written to a local folder, not to a {kind}:// location; "
                         "give a folder path (and copy it there after)")
    if _a_file_on_the_way(resolved):
        raise BoardError(f"`{what}` = {resolved}: it, or a folder above it, is a file, not a folder: give a folder")
    return resolved


def _a_file_on_the_way(path: str) -> bool:
    """Is the local ``path``, or the nearest of its parents that exists, something else than a folder?"""
    found = nearest_existing(path)
    try:  # one look: another process proving the same new folder may take it away between two
        return not stat.S_ISDIR(os.stat(found).st_mode)
    except FileNotFoundError:  # taken away meanwhile: nothing on the way, and making it again is the writer's job
        return False


def writable_location(location: str | os.PathLike, what: str, *, keep: bool = True) -> tuple[str, Any]:
    """``location`` resolved and checked to be writable, with its file system; a ``BoardError`` naming ``what``
    (``"checkpoint_dir"``, ``"model_dir"``, ...) otherwise.

    A local folder is created (and removed again with its parents made for it, unless ``keep``: for a writer that
    makes its folder when it writes, so that a run refused before then leaves nothing); a bucket must exist and the
    credentials must allow writing; ``https://`` is read only. A small object is written and deleted to prove it, so
    that a run fails here, before any work, and not when its first checkpoint is due.
    """
    resolved = resolve_location(location, what, takes=WRITABLE)
    kind = location_kind(resolved)
    if kind == "http":
        raise BoardError(f"`{what}` = {resolved} cannot be written: an https:// location is read only; write to the "
                         "folder, gs:// or s3:// location that this URL serves")
    if kind == "file" and _a_file_on_the_way(resolved):
        raise BoardError(f"`{what}` = {resolved}: it, or a folder above it, is a file, not a folder: give a folder")
    try:
        fs = open_filesystem(resolved, write=True, what=f"`{what}`")
    except BoardError as err:
        raise BoardError(f"`{what}` = {resolved} cannot be written: {err}") from None
    path = fs_path(resolved)
    probe = f"{path}/.alexnet-write-test-{os.getpid()}"
    made: list[str] = []
    try:
        if kind != "file":
            check_bucket(fs, resolved, True, empty_hint="", what=f"`{what}`")
            fs.pipe_file(probe, b"")
        else:
            for attempt in range(PROBE_ATTEMPTS):
                # another process proving the same new folder may take it away meanwhile: made anew, then
                made = made or missing_folders(path)
                try:
                    os.makedirs(path, exist_ok=True)
                    fs.pipe_file(probe, b"")
                    break
                except (FileNotFoundError, FileExistsError):  # taken away after the folder was made, or after
                    if attempt == PROBE_ATTEMPTS - 1:       # makedirs found it there (a file on the way is said above)
                        raise
        fs.rm_file(probe)
    except BoardError as err:
        raise BoardError(f"`{what}` = {resolved} cannot be written: {err}") from None
    except Exception as err:
        raise BoardError(f"`{what}` = {resolved} cannot be written: {reason(err)}") from None
    finally:
        if not keep:
            remove_empty(made)
    return resolved, fs


#: Times a new local folder is made and proven writable before a folder taken away meanwhile is an error.
PROBE_ATTEMPTS = 5


def missing_folders(path: str) -> list[str]:
    """The folders of the local ``path`` that do not exist yet, itself first, then its parents."""
    missing: list[str] = []
    folder = os.path.abspath(path)
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


def nearest_existing(path: str) -> str:
    """The local ``path`` (absolute) when it exists, else the nearest of its parents that does."""
    missing = missing_folders(path)
    return os.path.dirname(missing[-1]) if missing else os.path.abspath(path)


def remove_empty(folders: list[str]) -> None:
    """Remove ``folders`` (deepest first) as long as they are empty."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return


def made_folder(folder: str, setting: str, unset: str, *, holds: str, root: str | None = None,
                advice: str | None = None) -> str:
    """The local ``folder`` made if missing and checked writable: the value of the setting ``setting`` (or a folder
    in it, its value ``root``), where ``holds`` is to be kept; an :class:`AlexnetError` saying to give a folder this
    process may write, or to leave the setting unset for ``unset`` (or else what ``advice`` says), when it cannot
    be."""
    try:
        os.makedirs(folder, exist_ok=True)
        problem = "" if os.access(folder, os.W_OK | os.X_OK) else "it cannot be written"
    except (FileExistsError, NotADirectoryError):
        problem = "it, or a folder above it, is a file, not a folder"
        found = nearest_existing(folder)
        if root is not None and inside(found, root) and found != os.path.abspath(root):
            problem = f"{found}, a folder it keeps, is a file: remove that file"
    except OSError as error:
        problem = reason(error)
    if problem:
        advice = advice or f"give a folder this process may write, or leave `{setting}` unset for {unset}."
        given = folder if root is None else root
        raise AlexnetError(f"`{setting}` = {given} cannot hold {holds} ({problem}): {advice}")
    return folder
