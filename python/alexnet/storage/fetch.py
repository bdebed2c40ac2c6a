"""Bring zips from a board into the local cache: in parallel, each verified against its sha256, never half-written.

Each zip is downloaded to a temporary name (:func:`alexnet.storage.transfer.download_verified`: retried on
transient errors, fetched again once on a sha256 mismatch), extracted into a staging folder in the fetch's own folder
under the cache's ``.tmp`` (which names its process, so that the next fetch removes what a killed one left), described
by its marker and only then renamed into place. Zips already in the cache are not
downloaded; a second call with an intact cache moves no bytes. Where things live in the cache and what makes
an extraction complete is :mod:`alexnet.storage.cache`'s.

Processes fetching into one cache (the workers of one machine share the default one) take turns per category: each
holds the category's lock (:func:`category_lock`) while it brings it in, and one that waited for another uses the
copy that other installed. A complete extraction in place is never replaced by another copy of the same zip, so
that files another process has been handed stay where they are.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from ..checks import count_text, some_names
from ..errors import BoardError, IntegrityError
from ..progress import progress_bar
from . import cache
from .board import Board
from .fetch_room import disk_failed, warn_of_room, work_folder
from .locking import file_lock, holder_of
from .stalls import Stalls
from .transfer import Stopped, brief, disk_error, download_verified, extract_zip, unreachable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZipItem:
    """One zip to bring into the cache: where it is on the board, what it must hash to, where it goes."""

    key: str  # the caller's name for it
    remote: str  # object path on the board's file system
    sha256: str
    size: int
    dest: str  # final folder in the cache
    what: str  # how errors and logs name it ("category n01440764")
    images: int | None = None  # the files it holds, as the board's table says (None: it does not say)


@dataclass
class Fetched:
    """The result of :func:`fetch_zips`: the file names of each item (by key), and what was moved: the keys of the
    items downloaded (not those another process brought in meanwhile), their bytes and the seconds it took."""

    files: dict[str, list[str]]
    downloaded: list[str]
    bytes: int
    seconds: float


def _staging_folder(work: str, name: str) -> str:
    """A new, empty folder in the fetch's work folder (:func:`.fetch_room.work_folder`) for an extraction under way."""
    folder = os.path.join(work, f"{name}-{uuid.uuid4().hex[:8]}")
    os.makedirs(folder)
    return folder


def category_lock(root: str, dest: str, what: str, check: Callable[[], None] | None = None,
                  say: Callable[[str], None] | None = None) -> contextlib.AbstractContextManager[None]:
    """The lock of the cache folder ``dest`` of the cache ``root`` (:func:`~alexnet.storage.locking.file_lock` on a
    file of the cache's ``.locks`` folder), held while a process brings the category in, which it names in the file;
    another waits, and says for whom (logged, or handed to ``say``; ``check`` is called while it waits: what it
    raises ends the wait)."""
    path = os.path.join(root, cache.LOCKS, os.path.relpath(dest, root).replace(os.sep, "-") + ".lock")
    def note() -> str:  # once the lock is taken
        return f"process {os.getpid()} on {socket.gethostname()}, fetching since {time.strftime('%Y-%m-%d %H:%M:%S')}"

    def waiting() -> None:
        (say or log.info)(f"{what}: another process ({holder_of(path) or 'which, unknown'}) is fetching it into "
                          f"{root}; waiting for it")

    return file_lock(path, waiting, note=note, check=check)


def install_extraction(staging: str, dest: str, sha256: str, seen: cache.Stamp) -> None:
    """Move a finished extraction into place at ``dest``, replacing a stale, partial or damaged one. A complete
    extraction of the same zip that another process installed since the first look (``seen``: its marker's
    :func:`~alexnet.storage.cache.marker_stamp` then) is kept, its files perhaps being read, and ``staging`` is
    discarded."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if cache.marker_stamp(dest) != seen and cache.cached_files(dest, sha256) is not None:
        log.debug("%s was installed by another process meanwhile: keeping it", dest)
        shutil.rmtree(staging, ignore_errors=True)
        return
    if os.path.lexists(dest):
        old = os.path.join(os.path.dirname(staging), f"old-{uuid.uuid4().hex}")
        with contextlib.suppress(FileNotFoundError):
            os.rename(dest, old)
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(staging, dest)
    except OSError as error:
        # another process installed the same zip meanwhile: keep theirs if it is complete
        if cache.cached_files(dest, sha256) is None:
            raise
        log.debug("%s was installed by another process meanwhile (%s): keeping it.", dest, error)
        shutil.rmtree(staging, ignore_errors=True)


def _check_extracted(item: ZipItem, names: list[str]) -> None:
    """Refuse what no upload writes (the zip was changed by hand, or damaged before its SHA-256 was taken): a file
    named as the cache's own record of the extraction, which would be overwritten by it, or another number of files
    than the table says."""
    again = (f"delete {item.remote} (an upload keeps a file that is there), then upload the category again: run "
             "imagenet_upload() to this board again")
    kept = sorted(set(names) & cache.RESERVED)
    if kept:
        raise IntegrityError(f"{item.what}: its zip {item.remote} holds a file named {kept[0]!r}, the name the cache "
                             f"keeps for its own record: it was not written by imagenet_upload, and is not used; "
                             f"{again}")
    if item.images is not None and len(names) != item.images:
        raise IntegrityError(f"{item.what}: its zip {item.remote} holds {count_text(len(names), 'file')}, but the "
                             f"categories pin says {count_text(item.images, 'image')}: it was changed by hand or "
                             f"damaged, and is not used; {again}")


def _fetch_one(item: ZipItem, board: Board, root: str, *, work: str, seen: cache.Stamp, retries: int,
               progress: Any, check: Callable[[], None] | None = None, say: Callable[[str], None] | None = None,
               downloading: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
               ) -> tuple[list[str], bool]:
    """Download, verify and extract one zip into ``item.dest`` of the cache ``root`` (through the folder ``work``),
    holding its lock; return its file names and whether it was downloaded. ``seen`` is what the first look found of
    its marker (:func:`~alexnet.storage.cache.marker_stamp`): a marker changed since then was written by another
    process, whose copy is used when it is complete. ``check`` is called while another process holds the category's
    lock: what it raises ends the wait; ``say`` says that it waits (see :func:`category_lock`); ``downloading()``
    holds the download itself."""
    with category_lock(root, item.dest, item.what, check, say):
        if cache.marker_stamp(item.dest) != seen:
            ready = cache.cached_files(item.dest, item.sha256)
            if ready is not None:
                log.debug("%s: another process fetched it into the cache meanwhile: using its copy", item.what)
                return ready, False
        staging = _staging_folder(work, os.path.basename(item.dest))
        archive = f"{staging}.zip"
        try:
            with downloading():
                download_verified(board.fs, item.remote, archive, item.sha256, what=item.what, retries=retries,
                                  progress=progress)
            files = extract_zip(archive, staging, label=item.what)
            _check_extracted(item, [name for name, _, _ in files])
            cache.write_marker(staging, item.sha256, files, item=item.key)
            install_extraction(staging, item.dest, item.sha256, seen)
            return [name for name, _, _ in files], True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(archive)
            if os.path.isdir(staging):
                shutil.rmtree(staging, ignore_errors=True)


class _NotStarted(Exception):
    """A download not started, the board having stopped answering or the cache's disk having failed."""


def _say_why_fetched_again(item: ZipItem) -> None:
    """Say why ``item``, of which the cache holds a copy (its marker), is fetched: the board holds another zip of it
    (a category uploaded again), or the copy is damaged or incomplete. Nothing when the cache holds none."""
    marker = cache.read_marker(item.dest)
    if marker is None:
        return
    if marker.get("sha256") != item.sha256:
        log.info("%s: the board holds another version of it than the cache's copy (uploaded again since): fetching "
                 "it in place of that copy", item.what)
    else:
        log.warning("%s: the cached copy is damaged or incomplete (a file missing or of another size, or a CRC-32 "
                    "that differs); fetching it again", item.what)


def fetch_zips(board: Board, items: Sequence[ZipItem], root: str, *, workers: int, retries: int,
               verify: bool = False, desc: str = "fetch") -> Fetched:
    """Make every item's files present in the cache folder ``root``; ``workers`` downloads at a time.

    Items already cached (see :func:`alexnet.storage.cache.cached_files`, with ``verify`` checking every
    file's CRC-32) are not downloaded. The first error is raised once every download has ended; the others
    are logged, a few by name. A board that stops answering (see :func:`alexnet.storage.transfer.retry` for how long
    a download tries) starts no other download: the ones under way end, and one ``BoardError`` names the board and
    how many zips are in the cache, which a fetch again does not download.
    """
    files: dict[str, list[str]] = {}
    todo: list[ZipItem] = []
    seen: dict[str, cache.Stamp] = {}
    for item in items:
        seen[item.key] = cache.marker_stamp(item.dest)
        cached = cache.cached_files(item.dest, item.sha256, verify=verify)
        if cached is None:
            _say_why_fetched_again(item)
            todo.append(item)
        else:
            files[item.key] = cached
    start = time.monotonic()
    moved = 0
    downloaded: list[str] = []
    lock = threading.Lock()
    if todo:
        size = sum(i.size for i in todo)
        log.info("%s: fetching %s (%.1f MB) from %s, %d in the cache", desc, count_text(len(todo), "zip"),
                 size / 1e6, board.location, len(items) - len(todo))
        warn_of_room(root, todo, workers, desc)
        with work_folder(root, todo, len(files), len(items), workers) as work, \
                progress_bar(size, desc, unit="B", unit_scale=True, unit_divisor=1000) as bar, \
                contextlib.closing(Stalls(desc, board.location)) as stalls:

            # set by Ctrl-C: the downloads under way stop at their next bytes (what they wrote is a part file, removed)
            interrupted = threading.Event()

            shown: dict[str, int] = {}  # the bar's bytes of each zip: up to its size, also when fetched twice

            def advance(item: ZipItem, n: int) -> None:
                with lock:
                    step = max(0, min(n, item.size - shown.get(item.key, 0)))
                    shown[item.key] = shown.get(item.key, 0) + step
                    bar.update(step)

            def progress_of(item: ZipItem) -> Callable[[int], None]:
                def progress(n: int) -> None:
                    nonlocal moved
                    if interrupted.is_set():
                        raise Stopped
                    with lock:
                        moved += n
                    if n:
                        stalls.moved()
                    advance(item, n)
                return progress

            waits = 0

            def say_wait(text: str) -> None:  # the first wait for another process said, the others logged below
                nonlocal waits
                with lock:
                    waits += 1
                    first = waits == 1
                log.log(logging.INFO if first else logging.DEBUG, "%s%s", text,
                        " (other zips of this fetch may wait for it too)" if first else "")

            errors: dict[str, BaseException] = {}
            stopped: BaseException | None = None
            # set by the first download that finds the board not answering, or the cache's disk failing
            stop = threading.Event()

            def stops(error: BaseException) -> bool:
                return unreachable(error) is not None or disk_error(error, root) is not None

            def still_wanted() -> None:  # a wait for another process's category ends with Ctrl-C here
                if interrupted.is_set():
                    raise Stopped

            def fetch_one(item: ZipItem) -> tuple[list[str], bool]:
                if stop.is_set():
                    raise _NotStarted
                try:
                    found = _fetch_one(item, board, root, work=work, seen=seen[item.key], retries=retries,
                                       progress=progress_of(item), check=still_wanted, say=say_wait,
                                       downloading=stalls.downloading)
                    advance(item, item.size)  # brought in by another process, or the bar short of a zip's size
                    return found
                except Exception as error:
                    if stops(error):
                        stop.set()
                    raise

            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="alexnet-fetch") as pool:
                futures = {pool.submit(fetch_one, item): item for item in todo}
                try:
                    for future in as_completed(futures):
                        if future.cancelled() or isinstance(future.exception(), _NotStarted):
                            continue
                        error = future.exception()
                        if error is None:
                            key = futures[future].key
                            files[key], fetched = future.result()
                            if fetched:
                                downloaded.append(key)
                            continue
                        errors[futures[future].what] = error
                        if stopped is None and stops(error):
                            # the board stopped answering, or the disk failed: no other download starts
                            stopped = error
                            for waiting in futures:
                                waiting.cancel()
                except BaseException:
                    # Ctrl-C (KeyboardInterrupt) while waiting: no other download starts, and those under way stop
                    # at their next bytes (what finished is in the cache; a fetch again resumes)
                    stop.set()
                    interrupted.set()
                    for waiting in futures:
                        waiting.cancel()
                    under_way = sum(1 for future in futures if future.running())
                    if under_way:  # downloading, or waiting for another process that fetches the same
                        log.info("%s: stopping the %s under way.", desc, count_text(under_way, "zip"))
                    raise
            disk = disk_error(stopped, root)
            if disk is not None:
                raise disk_failed(root, disk, [i for i in items if i.key not in files], len(files),
                                   len(items), workers) from stopped
            if stopped is not None:
                raise BoardError(
                    f"the board {board.location} stopped answering ({brief(unreachable(stopped) or stopped)}): "
                    f"fetching again resumes; {len(files)} of {count_text(len(items), 'zip')} are in the cache"
                ) from stopped
            if errors:
                if len(errors) > 1:
                    names = sorted(errors)
                    log.error("%d zips failed: %s", len(errors), some_names(names))
                raise next(iter(errors.values()))
    seconds = time.monotonic() - start
    if todo:
        others = len(todo) - len(downloaded)
        log.info("%s: %.1f MB in %.1f s (%.1f MB/s)%s", desc, moved / 1e6, seconds,
                 moved / 1e6 / seconds if seconds > 0 else float("nan"),
                 f"; {count_text(others, 'zip')} brought in by another process meanwhile" if others else "")
    return Fetched(files, [i.key for i in todo if i.key in downloaded], moved, seconds)
