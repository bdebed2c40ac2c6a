"""An exclusive lock on a file, taken in turn by processes of one machine (and by those of several where the file
system passes locks on): the writers of a folder board's manifest, the fetches of one category into one cache."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


#: Seconds between two tries of a lock that is waited for with a ``check`` (:func:`hold_lock`).
LOCK_POLL = 0.2


@contextlib.contextmanager
def file_lock(path: str, waiting: Callable[[], None] | None = None, *, note: str | Callable[[], str] = "",
              check: Callable[[], None] | None = None, remove: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (made, with its folder, if missing, and kept unless ``remove``)
    while the block runs, waiting while another process holds it (``waiting`` is called first, to say so; ``check``,
    if given, while it waits, and what it raises ends the wait). The lock goes with the process however it ends. Where
    the system or the file system takes no locks, the block runs unlocked."""
    release = hold_lock(path, patience=None, note=note, waiting=waiting, check=check, remove=remove)
    try:
        yield
    finally:
        release()


def holder_of(path: str) -> str:
    """What the holder of the lock on ``path`` wrote in it (``note``), or "" when it wrote nothing or it is gone."""
    try:
        with open(path, "rb") as file:
            return file.read(4096).decode(errors="replace").strip()
    except OSError:
        return ""


class Busy(Exception):
    """The lock of :func:`hold_lock` stayed with another holder: ``holder`` is what that holder wrote in the file
    (empty when it wrote nothing)."""

    def __init__(self, path: str, holder: str):
        super().__init__(f"{path} is locked by {holder or 'another process'}")
        self.path, self.holder = path, holder


def hold_lock(path: str, *, patience: float | None, note: str | Callable[[], str] = "",
              waiting: Callable[[], None] | None = None,
              check: Callable[[], None] | None = None, remove: bool = False) -> Callable[[], None]:
    """Take an exclusive lock on the file ``path`` (made, with its folder, if missing) and keep it until the
    function returned is called (or the process ends), writing ``note`` (when given; a function: what it returns once
    the lock is taken) in the file for whoever finds it taken, and removing it when the lock is let go. A lock held
    elsewhere is waited for (``waiting`` is called first, to say so): for as long as it takes with ``patience`` None,
    else up to ``patience`` seconds, then :class:`Busy` is raised; ``check``, if given, is called
    every :data:`LOCK_POLL` seconds of the wait, and what it raises ends it (a thread cannot be interrupted while it
    waits for a lock: Ctrl-C in the main thread sets what ``check`` looks at). Where the system or the file system takes
    no locks, nothing is held.

    The file stays when the lock is let go, unless ``remove``: then the holder deletes it first (a folder whose
    readers list every file, as Python's pins lists a board's root, is left as it was). A lock taken on a file that
    was deleted or replaced meanwhile is no lock on ``path``: it is let go, and ``path`` opened and locked again.
    Each hold opens the file anew, so that a second hold of the same file in the same process waits as well."""
    try:
        import fcntl  # noqa: F401 - whether the system has it
    except ImportError:  # not a POSIX system
        return lambda: None
    import time

    deadline = None if patience is None else time.monotonic() + patience
    told = False

    def wait() -> None:
        nonlocal told
        if not told and waiting is not None:
            waiting()
        told = True

    while True:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            release = _held(fd, path, deadline, note, wait, check, remove)
        except BaseException:  # Ctrl-C while waiting, a disk too full for the note: neither the file nor its lock kept
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        if release is not None:
            return release
        os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not deleted, nor replaced by another)."""
    try:
        named, opened = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _held(fd: int, path: str, deadline: float | None, note: str | Callable[[], str], wait: Callable[[], None],
          check: Callable[[], None] | None, remove: bool) -> Callable[[], None] | None:
    """:func:`hold_lock` on the file ``path`` opened as ``fd``, which the caller closes when this raises or returns
    None (the lock was taken on a file no longer at ``path``: to be taken again)."""
    import fcntl
    import time

    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if deadline is not None and time.monotonic() >= deadline:
                raise Busy(path, holder_of(path)) from None
            wait()
            if check is not None:
                check()
            if deadline is None and check is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                break
            time.sleep(LOCK_POLL if deadline is None else min(0.5, max(0.0, deadline - time.monotonic())))
        except OSError as err:  # a file system that takes no locks (some network ones)
            log.debug("no lock on %s (%s): going on without one", path, err)
            os.close(fd)
            return lambda: None
    if not _same_file(fd, path):  # its holder deleted it as it let go: this lock is on no file of that name
        return None
    said = note() if callable(note) else note
    if said:
        os.ftruncate(fd, 0)
        os.pwrite(fd, said.encode(), 0)
    closed = False

    def release() -> None:
        nonlocal closed
        if not closed:
            closed = True
            if remove:  # while held: whoever waits for it finds it gone, and takes a new one
                with contextlib.suppress(OSError):
                    os.remove(path)
            elif said:  # the next holder is not named after this one, while it has yet to write its note
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)  # and the lock with it

    return release
