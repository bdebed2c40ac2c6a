"""The room a fetch takes in the cache: its own folder there for its downloads and extractions (:func:`work_folder`),
the room the zips left need, said before any download when the disk has less free (:func:`warn_of_room`), and a disk
that fills up or refuses writing said with what to do (:func:`disk_failed`)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from typing import Protocol

from ..checks import count_text
from ..errors import AlexnetError, reason
from ..scratch import make_scratch
from . import cache
from .outputs import nearest_existing
from .transfer import DISK_FULL, disk_error, inside


class Zip(Protocol):
    """A zip to fetch as its room is told (:class:`.fetch.ZipItem` is one): its size in bytes."""

    @property
    def size(self) -> int: ...


log = logging.getLogger("alexnet.storage.fetch")  # said as the fetch's own lines


#: What to give for fewer downloads at once, as each function that fetches names it.
FEWER_AT_ONCE = "fetch fewer zips at once (`workers`; an evaluation's or a Spark job's `fetch_workers`)"


def room_needed(left: Sequence[Zip], workers: int) -> tuple[int, int]:
    """The bytes the zips ``left`` take in the cache once extracted (about their own size: JPEG images do not
    compress), and the bytes more while ``workers`` of them are fetched at once: each download's zip lies beside its
    extraction until that is in place."""
    return sum(item.size for item in left), sum(sorted((item.size for item in left), reverse=True)[:max(1, workers)])


def room_text(left: Sequence[Zip], workers: int) -> str:
    size, more = room_needed(left, workers)
    return (f"{count_text(len(left), 'zip')} more ({size / 1e6:.1f} MB), and {more / 1e6:.1f} MB more while they are "
            f"fetched ({count_text(min(workers, len(left)), 'download')} at once, each zip beside its extraction)")


def refusing_folder(path: str, root: str) -> str:
    """The folder that refused the write of ``path`` in the cache ``root``: the nearest that exists, the cache itself
    for the fetch's own folders in its ``.tmp``."""
    folder = nearest_existing(path)
    return root if inside(folder, os.path.join(root, cache.TMP)) else folder


def disk_failed(root: str, error: OSError, left: Sequence[Zip], cached: int, total: int,
                 workers: int) -> AlexnetError:
    """What to do when the cache ``root`` cannot take the zips ``left`` (fetched ``workers`` at once): its disk is
    full, or refuses writing."""
    if error.errno in DISK_FULL:
        what = (f"its disk is full ({reason(error)}): give `cache_dir` a folder on a disk with room for "
                f"{room_text(left, workers)}, or free some space, or {FEWER_AT_ONCE}")
    else:
        where = os.fspath(error.filename or root)
        if error.filename2 and inside(where, os.path.join(root, cache.TMP)):
            # a finished extraction moved into place from the fetch's own folder: the folder it goes to refused it
            where = os.path.dirname(os.fspath(error.filename2))
        what = (f"{refusing_folder(where, root)} cannot be written ({reason(error)}): give `cache_dir` a folder this "
                "process may write (or leave `cache_dir` unset for the user cache)")
    return AlexnetError(f"fetching into the cache {root} stopped: {what}; then fetching again resumes, {cached} of "
                        f"{count_text(total, 'zip')} are in the cache")


def warn_of_room(root: str, left: Sequence[Zip], workers: int, desc: str) -> None:
    """Say before any download when the disk of the cache ``root`` has less room free than the zips ``left`` need."""
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        return
    size, more = room_needed(left, workers)
    if free < size + more:
        log.warning("%s: the disk of the cache %s has %.1f MB free, and it takes %s: it may fill up (give `cache_dir` "
                    "a folder on a larger disk, or free some space, or %s)", desc, root, free / 1e6,
                    room_text(left, workers), FEWER_AT_ONCE)


@contextlib.contextmanager
def work_folder(root: str, left: Sequence[Zip], cached: int, total: int, workers: int) -> Iterator[str]:
    """The fetch's own folder in the cache's ``.tmp``, for its downloads and extractions: it records its owner, and
    is removed when the fetch ends, or by the next fetch into the cache if this one's process was killed
    (:func:`alexnet.scratch.sweep_stale`)."""
    try:
        folder = make_scratch(cache.FETCH_PREFIX, os.path.join(root, cache.TMP))
    except OSError as error:
        disk = disk_error(error, root)
        if disk is None and isinstance(error, FileNotFoundError) and not os.access(root, os.W_OK):
            # a cache opened as it is, read-only, that has no .tmp: the cache refuses the fetch's folder
            code = errno.EROFS if os.statvfs(root).f_flag & os.ST_RDONLY else errno.EACCES
            disk = OSError(code, os.strerror(code), root)
        if disk is None:
            raise
        raise disk_failed(root, disk, left, cached, total, workers) from error
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
