"""Bring zips from a board into the local cache: in parallel, each verified against its sha256, never half-written.

Each zip is downloaded to a temporary name (:func:`alexnet.storage.transfer.download_verified`: retried on
transient errors, fetched again once on a sha256 mismatch), extracted into a staging folder under the cache's
``.tmp``, described by its marker and only then renamed into place. Zips already in the cache are not
downloaded; a second call with an intact cache moves no bytes. Where things live in the cache and what makes
an extraction complete is :mod:`alexnet.storage.cache`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from ..checks import count_text, some_names
from ..errors import BoardError
from ..progress import progress_bar
from . import cache
from .board import Board
from .transfer import brief, download_verified, extract_zip, unreachable

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


@dataclass
class Fetched:
    """The result of :func:`fetch_zips`: the file names of each item (by key), and what was moved."""

    files: dict[str, list[str]]
    downloaded: list[str]
    bytes: int
    seconds: float


def _staging_folder(root: str, name: str) -> str:
    """A new, empty folder under the cache's ``.tmp`` for an extraction in progress."""
    folder = os.path.join(root, cache.TMP, f"{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.makedirs(folder)
    return folder


def _install(staging: str, dest: str, sha256: str) -> None:
    """Move a finished extraction into place at ``dest``, replacing a stale or partial one."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
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


def _fetch_one(item: ZipItem, board: Board, root: str, *, retries: int, progress: Any) -> list[str]:
    """Download, verify and extract one zip into ``item.dest``; return its file names."""
    staging = _staging_folder(root, os.path.basename(item.dest))
    archive = f"{staging}.zip"
    try:
        download_verified(board.fs, item.remote, archive, item.sha256, what=item.what, retries=retries,
                          progress=progress)
        files = extract_zip(archive, staging, label=item.what)
        cache.write_marker(staging, item.sha256, files, item=item.key)
        _install(staging, item.dest, item.sha256)
        return [name for name, _, _ in files]
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(archive)
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


class _NotStarted(Exception):
    """A download not started, the board having stopped answering."""


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
    for item in items:
        cached = cache.cached_files(item.dest, item.sha256, verify=verify)
        if cached is None:
            if verify and cache.read_marker(item.dest) is not None:
                log.warning("%s: the cached copy is damaged or incomplete; fetching it again", item.what)
            todo.append(item)
        else:
            files[item.key] = cached
    start = time.monotonic()
    moved = 0
    lock = threading.Lock()
    if todo:
        size = sum(i.size for i in todo)
        log.info("%s: fetching %d zips (%.1f MB) from %s, %d in the cache", desc, len(todo), size / 1e6,
                 board.location, len(items) - len(todo))
        with progress_bar(size, desc, unit="B", unit_scale=True, unit_divisor=1024) as bar:

            def progress(n: int) -> None:
                nonlocal moved
                with lock:
                    moved += n
                    bar.update(n)

            errors: dict[str, BaseException] = {}
            stopped: BaseException | None = None
            stop = threading.Event()  # set by the first download that finds the board not answering

            def fetch_one(item: ZipItem) -> list[str]:
                if stop.is_set():
                    raise _NotStarted
                try:
                    return _fetch_one(item, board, root, retries=retries, progress=progress)
                except Exception as error:
                    if unreachable(error) is not None:
                        stop.set()
                    raise

            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="alexnet-fetch") as pool:
                futures = {pool.submit(fetch_one, item): item for item in todo}
                for future in as_completed(futures):
                    if future.cancelled() or isinstance(future.exception(), _NotStarted):
                        continue
                    error = future.exception()
                    if error is None:
                        files[futures[future].key] = future.result()
                        continue
                    errors[futures[future].what] = error
                    if stopped is None and unreachable(error) is not None:
                        stopped = error  # the board stopped answering: no other download starts
                        for waiting in futures:
                            waiting.cancel()
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
        log.info("%s: %.1f MB in %.1f s (%.1f MB/s)", desc, moved / 1e6, seconds,
                 moved / 1e6 / seconds if seconds > 0 else float("nan"))
    return Fetched(files, [i.key for i in todo], moved, seconds)
