"""Scratch folders that do not pile up when the process that made them is killed.

A Spark task that fails or is cancelled has its Python worker killed outright, and an upload or a worker
may be stopped with SIGKILL: ``finally`` blocks never run and their temporary folders stay behind, each
holding pickled tasks, logs or half-written zips. :func:`scratch_folder` writes the owner's process id and
host into each folder it makes; before making one it removes the folders of the same prefix whose owner,
on this host, is no longer running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

OWNER_FILE = ".alexnet-owner"
#: How long what a killed process left where its owner cannot be known stays (:func:`sweep_unchanged`): a day, far
#: beyond any write's pause.
UNCHANGED_SECONDS = 24 * 3600.0


def process_alive(pid: int) -> bool:
    """Whether the process ``pid`` is running. A zombie is not: a process killed but not yet waited for by its
    parent (an upload killed by ``timeout -s KILL`` goes to the first process of the machine, which collects it
    only later, or never in a container whose first process does not; an upload started in between kept the
    killed one's zips)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (not Linux), or it has just ended
        return True
    # "pid (command) state ...": the command may hold spaces and parentheses, the state follows the last ")"
    return stat[stat.rfind(")") + 2:][:1] != "Z"


def pid_namespace() -> str:
    """This process's pid namespace ("" where it cannot be read): two containers of one host name (host networking)
    number their processes apart, and one's process ids say nothing of the other's."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def owner(folder: str | os.PathLike) -> tuple[str, int, str] | None:
    """The host, process id and pid namespace (:func:`pid_namespace`; "" when not recorded) a folder made by
    :func:`make_scratch` records, None when it records none that can be read."""
    try:
        lines = (Path(folder) / OWNER_FILE).read_text().split("\n")
        return lines[0], int(lines[1]), lines[2] if len(lines) > 2 else ""
    except (OSError, ValueError, IndexError):
        return None


def owned_here(made_by: tuple[str, int, str]) -> bool:
    """Whether an :func:`owner` record names a process that this one can see: the same host, and the same pid
    namespace where both are known (a record without one is of this host's)."""
    host, _, namespace = made_by
    here = pid_namespace()
    return host == socket.gethostname() and (not namespace or not here or namespace == here)


def sweep_stale(prefix: str, parent: str | os.PathLike | None = None) -> list[str]:
    """Remove the folders ``<parent>/<prefix>*`` whose owner process (on this host) has ended.

    Only folders made by :func:`scratch_folder` are considered (they carry an owner file); folders of
    other hosts or other pid namespaces sharing ``parent`` (:func:`owned_here`) and folders whose owner file cannot
    be read are left alone. Returns the folders removed.
    """
    root = Path(parent if parent is not None else tempfile.gettempdir())
    removed = []
    for folder in root.glob(f"{prefix}*"):
        made_by = owner(folder)
        if made_by is None or not owned_here(made_by) or process_alive(made_by[1]):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    if removed:
        logger.info("Removed %d scratch folder(s) left by processes that were killed: %s", len(removed),
                    ", ".join(removed))
    return removed


def _newest_change(entry: os.DirEntry[str]) -> float:
    """When ``entry``, or a file directly inside it, last changed: a process at work writes into its folder."""
    newest = entry.stat(follow_symlinks=False).st_mtime
    if entry.is_dir(follow_symlinks=False):
        with os.scandir(entry.path) as inside:
            for item in inside:
                with contextlib.suppress(OSError):
                    newest = max(newest, item.stat(follow_symlinks=False).st_mtime)
    return newest


def sweep_unchanged(parent: str, seconds: float = UNCHANGED_SECONDS,
                    prefixes: tuple[str, ...] = ("",)) -> list[str]:
    """Remove the files and folders in ``parent`` whose name begins with one of ``prefixes`` and that have not changed
    (a folder: nor any file directly in it) for ``seconds``: what a killed process left where its owner cannot be
    known (another host's or container's, or a process id since given to another process). Returns what was
    removed."""
    now, removed = time.time(), []
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if not entry.name.startswith(prefixes):
                continue
            with contextlib.suppress(OSError):
                if now - _newest_change(entry) > seconds:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.remove(entry.path)
                    removed.append(entry.path)
    if removed:
        logger.info("Removed %d file(s) or folder(s) left unchanged for %.0f hours in %s: %s", len(removed),
                    seconds / 3600, parent, ", ".join(removed))
    return removed


def make_scratch(prefix: str, parent: str | os.PathLike | None = None, *, family: str | None = None) -> str:
    """A new temporary folder named ``<prefix>...`` that records its owner.

    Stale folders of the ``family`` prefix (default: ``prefix``) are swept first (:func:`sweep_stale`).
    """
    sweep_stale(family or prefix, parent)
    folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
    Path(folder, OWNER_FILE).write_text(f"{socket.gethostname()}\n{os.getpid()}\n{pid_namespace()}\n")
    return folder


@contextlib.contextmanager
def scratch_folder(
    prefix: str, parent: str | os.PathLike | None = None, *, family: str | None = None
) -> Iterator[str]:
    """A context manager version of :func:`make_scratch`: the folder is removed on the way out."""
    folder = make_scratch(prefix, parent, family=family)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: The prefix of the folder a command of the command line keeps its temporary files in (:func:`own_temporary_folder`).
COMMAND_PREFIX = "alexnet-command-"


@contextlib.contextmanager
def own_temporary_folder(prefix: str = COMMAND_PREFIX) -> Iterator[str]:
    """This process's temporary files in a scratch folder of its own for the block (``tempfile``'s folder, and so
    where TensorFlow's autograph writes the source of each function it converts, a few dozen files a training),
    removed on the way out. A process killed with SIGKILL cannot remove it: the next one that enters this block
    removes the folders of ``prefix`` whose process has ended (:func:`sweep_stale`), where the files of the killed
    one stayed in the temporary folder with nothing to tell whose they were. The command line's commands run so
    (:func:`alexnet.cli.main`); a caller's own Python (a notebook, R) keeps its temporary folder."""
    global _OUTER
    before, outer = tempfile.tempdir, _OUTER
    _OUTER = tempfile.gettempdir()
    with scratch_folder(prefix) as folder:
        tempfile.tempdir = folder
        try:
            yield folder
        finally:
            tempfile.tempdir, _OUTER = before, outer


#: The temporary folder of the process before :func:`own_temporary_folder` took one of its own (None: it did not).
_OUTER: str | None = None


def outer_temporary_folder() -> str:
    """The temporary folder of this process's user and system: what ``tempfile`` gives, outside the block of
    :func:`own_temporary_folder`. For what must outlive the command that writes it there (a benchmark's results
    when no folder is given, the workers' logs)."""
    return _OUTER or tempfile.gettempdir()

