"""An exclusive lock on a file, taken in turn by processes of one machine (and by those of several where the file
system passes locks on): the writers of a folder board's manifest, the fetches of one category into one cache."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


@contextlib.contextmanager
def file_lock(path: str, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (made, with its folder, if missing, and kept) while the block runs,
    waiting while another process holds it (``waiting`` is called first, to say so). The lock goes with the process
    however it ends. Where the system or the file system takes no locks, the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:  # a file system that takes no locks (some network ones)
            log.debug("no lock on %s (%s): going on without one", path, err)
        yield
    finally:
        os.close(fd)  # and the lock with it
