"""Reading archives in place, from a local path or a bucket (through fsspec): byte ranges, read ahead.

An index (:mod:`alexnet.data.tar_io`, :mod:`alexnet.data.zip_io`) lists where each member's bytes lie in the
archive, so that a part of an upload reads exactly its own bytes (one range for a category's tar inside the
training tar or a category's run of a zip; a few ranges for validation images spread over their archive), from any
thread, and a finished category is not read at all. Reading an index touches only headers: tar headers are spread
through the file (from a bucket they are read in blocks), a zip's central directory sits at its end.
"""

from __future__ import annotations

import io
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..errors import LayoutError
from ..storage.location import fs_path, location_kind, open_filesystem, refused, resolve_location

log = logging.getLogger(__name__)

#: Bytes fetched at a time while reading headers from a bucket, by how large the members are.
SMALL_MEMBERS_BLOCK = 8 << 20
LARGE_MEMBERS_BLOCK = 64 << 10
#: Requests in flight ahead of a bucket's file read front to back (:class:`BlocksAhead`).
REQUESTS_AHEAD = 4

#: Bytes of a source: read (``bytes``) or a view of a local file mapped in memory.
Buffer: TypeAlias = bytes | memoryview


@dataclass(frozen=True)
class Files:
    """Where a source lives: a file system and the resolved location (a local path or a bucket URL)."""

    fs: Any
    location: str

    @classmethod
    def at(cls, source: str | os.PathLike) -> Files:
        location = resolve_location(source, "ImageNet source")
        if location_kind(location) == "http":
            raise LayoutError(f"ImageNet source {location}: read from a local path, gs:// or s3://, not https://")
        return cls(open_filesystem(location, what="ImageNet source"), location)

    @property
    def local(self) -> bool:
        return location_kind(self.location) == "file"

    def path(self, name: str = "") -> str:
        """The file system path of ``name`` under the location (the location itself for ``""``)."""
        base = fs_path(self.location)
        return f"{base.rstrip('/')}/{name}" if name else base

    def url(self, path: str) -> str:
        """``path`` as the user names it: a local path, or ``gs://``/``s3://`` plus the path."""
        return path if self.local else f"{self.location.split('://', 1)[0]}://{path}"

    def names(self, path: str) -> list[str]:
        """The names directly in the folder ``path`` (empty when it is not a folder; a bucket folder's own marker
        object, ``path/``, is not one of them)."""
        try:
            listed = self.fs.ls(path, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError as err:
            raise refused(self.fs, self.url(path), err) from None
        return sorted(os.path.basename(p.rstrip("/")) for p in listed if p.rstrip("/") != path.rstrip("/"))

    def isfile(self, path: str) -> bool:
        return bool(self.fs.isfile(path))

    def size(self, path: str) -> int:
        return int(self.fs.size(path))

    def open(self, path: str, block_size: int) -> Any:
        """A seekable binary file; from a bucket, fetched ``block_size`` bytes at a time ahead of reads."""
        if self.local:
            return open(path, "rb")
        return self.fs.open(path, "rb", block_size=block_size, cache_type="readahead")

    def open_stream(self, path: str) -> Any:
        """A binary file to read front to back (a tar.gz): a local one asks the kernel for the next
        :data:`STREAM_AHEAD` bytes before they are read (:class:`StreamAhead`), a bucket's is fetched in
        :data:`SMALL_MEMBERS_BLOCK` blocks, :data:`REQUESTS_AHEAD` at a time ahead of reads (:class:`BlocksAhead`)."""
        if self.local:
            return io.BufferedReader(StreamAhead(path))
        return io.BufferedReader(BlocksAhead(self.fs, path, self.size(path)), 1 << 20)

    def open_headers(self, path: str) -> Any:
        """A seekable binary file whose small members' headers are read front to back, skipping the members (a
        validation tar's index): a local one reads only the headers; a bucket's is all fetched, as a stream
        (:class:`BlocksAhead`), since a request for each header would take longer than its bytes."""
        if self.local:
            return open(path, "rb")
        return io.BufferedReader(BlocksAhead(self.fs, path, self.size(path)))

    def read(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of ``path`` (one request from a bucket)."""
        return bytes(self.fs.cat_file(path, start=start, end=end))

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[Buffer]:
        """Several byte ranges of ``path``: from a bucket, requested together; from a local file, views of the file
        mapped in memory (see :func:`mapped_ranges`), or its bytes read where it cannot be mapped."""
        if not ranges:
            return []
        if self.local:
            views = mapped_ranges(path, ranges)
            if views is not None:
                return views
            out: list[Buffer] = []
            with open(path, "rb") as f:
                for start, end in ranges:
                    f.seek(start)
                    out.append(f.read(end - start))
            return out
        n = len(ranges)
        got = self.fs.cat_ranges([path] * n, [s for s, _ in ranges], [e for _, e in ranges])
        for part in got:  # a range that failed comes back as its error
            if isinstance(part, BaseException):
                if isinstance(part, PermissionError):
                    raise refused(self.fs, self.url(path), part) from None
                raise part
        return [bytes(b) for b in got]

    def read_ranges_ahead(self, path: str, ranges: Sequence[tuple[int, int]]) -> Callable[[], list[Buffer]]:
        """:meth:`read_ranges` in two steps, for a part opened (by the thread that reads the source in order) before
        it is packed: a local file is mapped and asked of the kernel now, so that the disk reads it while the parts
        before it are packed, and the call returned waits for the mapped bytes (:func:`await_ranges`); a bucket's
        ranges are fetched only when the call returned is made, by the thread that packs the part."""
        if not self.local:
            return lambda: self.read_ranges(path, ranges)
        views = self.read_ranges(path, ranges)
        if not any(isinstance(view, memoryview) for view in views):
            return lambda: views  # read already: nothing left to wait for

        def mapped() -> list[Buffer]:
            await_ranges(path, ranges)
            return views

        return mapped


def _begun(fetch: Callable[[Any], Any], window: Any) -> Future[Any]:
    """``fetch(window)`` begun in a thread of its own (one that ends with it: nothing to shut down)."""
    future: Future[Any] = Future()

    def run() -> None:
        try:
            future.set_result(fetch(window))
        except BaseException as error:  # handed to the caller, who raises it
            future.set_exception(error)

    threading.Thread(target=run, name="alexnet-ahead", daemon=True).start()
    return future


def fetched_ahead(windows: list[Any], fetch: Callable[[Any], Any]) -> Iterator[tuple[Any, Any]]:
    """Each of ``windows`` with what ``fetch`` made of it, the next one fetched (in a thread) while the caller uses
    this one. The first is begun at once, when this is called, not when the caller first asks for it."""
    ahead = _begun(fetch, windows[0]) if windows else None

    def each() -> Iterator[tuple[Any, Any]]:
        nonlocal ahead
        for k, window in enumerate(windows):
            assert ahead is not None
            fetched = ahead.result()
            ahead = _begun(fetch, windows[k + 1]) if k + 1 < len(windows) else None
            yield window, fetched

    return each()


class AtPosition:
    """What a readable, seekable file read from its attribute ``pos`` says of itself."""

    pos: int

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos


class BlocksAhead(AtPosition, io.RawIOBase):
    """The file ``path`` (``size`` bytes) of the bucket file system ``fs``, read front to back (a seek elsewhere
    starts again from there): its ``block``-byte blocks are fetched ``depth`` at a time ahead of the reads, each by
    a request of its own, so that a stream is not read one request after another, each waiting for its first byte
    (``tools/measure-bucket-reads.py``: through a round trip of 30 ms to a local S3 server, a 128 MB stream took
    1.68 s one 8 MB request at a time and 1.16 s with 4 ahead, a 68 MB validation tar's index 0.77 and 0.43 s).
    At most ``depth`` blocks are held."""

    def __init__(self, fs: Any, path: str, size: int, block: int = SMALL_MEMBERS_BLOCK, depth: int = REQUESTS_AHEAD):
        super().__init__()
        self.fs, self.path, self.size, self.block, self.depth = fs, path, size, block, depth
        self.pos = 0
        self.blocks: dict[int, Future[bytes]] = {}
        self.pool = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="alexnet-ahead")

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self.pos = base + offset
        return self.pos

    def _fetch(self, index: int) -> bytes:
        start = index * self.block
        return bytes(self.fs.cat_file(self.path, start=start, end=min(self.size, start + self.block)))

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError("read of a closed file")
        if self.pos >= self.size:
            return 0
        index = self.pos // self.block
        ahead = range(index, min(index + self.depth, -(-self.size // self.block)))
        for stale in [i for i in self.blocks if i not in ahead]:
            self.blocks.pop(stale).cancel()
        for i in ahead:
            if i not in self.blocks:
                self.blocks[i] = self.pool.submit(self._fetch, i)
        data = self.blocks[index].result()
        at = self.pos - index * self.block
        count = min(len(buffer), len(data) - at)
        if count <= 0:
            return 0  # the object is shorter than it was (replaced while read): it ends here, as a file cut short
        memoryview(buffer).cast("B")[:count] = data[at:at + count]
        self.pos += count
        return count

    def close(self) -> None:
        if not self.closed:
            for future in self.blocks.values():
                future.cancel()
            self.blocks.clear()
            self.pool.shutdown(wait=False, cancel_futures=True)
        super().close()


#: One request to read ahead makes the kernel read at most its read-ahead window (``read_ahead_kb``, 128 KB unless
#: raised) or the device's largest request, whichever is larger: a longer range is asked for in pieces this long.
READ_AHEAD_PIECE = 128 << 10


def read_ahead(fd: int, start: int, end: int) -> None:
    """Ask the kernel to read bytes ``start`` to ``end`` of the open file ``fd`` into the page cache now, without
    waiting for them (``posix_fadvise``, where the system has it; a file system that refuses is left alone)."""
    if not hasattr(os, "posix_fadvise"):  # not on Windows or macOS
        return
    try:
        for at in range(start, end, READ_AHEAD_PIECE):
            os.posix_fadvise(fd, at, min(READ_AHEAD_PIECE, end - at), os.POSIX_FADV_WILLNEED)
    except OSError:
        pass


def await_ranges(path: str, ranges: Sequence[tuple[int, int]]) -> None:
    """Wait until the kernel holds the byte ranges of ``path`` asked for by :func:`read_ahead`, reading one byte at
    the end of each of its pieces.

    The thread that touches a page of a mapped file that the disk has not read yet waits for it holding Python's
    GIL, and every other thread of the upload with it, the one that reads the source among them; a read waits
    without it. From a disk limited to 125 MiB/s and 3000 reads a second (3 rounds taking turns, 735 MB, 8
    workers), the official archives took 6.84 s without this wait and 6.19 s with it, the extracted tree 6.1-6.2 s;
    from the page cache it costs 5 ms for 640 MB."""
    if not hasattr(os, "pread"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # said when the bytes are used
    try:
        for start, end in ranges:
            for at in range(start, end, READ_AHEAD_PIECE):
                os.pread(fd, 1, min(at + READ_AHEAD_PIECE, end) - 1)
    except OSError:
        pass
    finally:
        os.close(fd)


#: How far ahead of where a stream is read the kernel is asked to read it (see :class:`StreamAhead`).
STREAM_AHEAD = 16 << 20


class StreamAhead(io.FileIO):
    """A local file read front to back (a gzip stream, decompressed as it is read) that asks the kernel for the next
    :data:`STREAM_AHEAD` bytes (:func:`read_ahead`) each time half of them have been read: the disk reads them while
    the bytes before are decompressed, instead of each read waiting for its own (the upload of a 735 MB tar.gz from
    the disk took 6.19 s without it and 5.11 s with it). A seek elsewhere asks again from there."""

    def __init__(self, path: str):
        super().__init__(path, "r")
        self.asked = (0, 0)  # the bytes asked for last

    def readinto(self, buffer: Any) -> int | None:
        at = self.tell()
        start, end = self.asked
        if not start <= at <= end - STREAM_AHEAD // 2:
            read_ahead(self.fileno(), max(at, end) if start <= at <= end else at, at + STREAM_AHEAD)
            self.asked = (at, at + STREAM_AHEAD)
        return super().readinto(buffer)


def read_files_ahead(paths: Iterable[str]) -> None:
    """:func:`read_ahead` for whole files (an extracted tree's category), each opened only to ask for it."""
    if not hasattr(os, "posix_fadvise"):  # nothing to ask for: no file is opened
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # said when the file is read
        try:
            read_ahead(fd, 0, os.fstat(fd).st_size)
        finally:
            os.close(fd)


def mapped_ranges(path: str, ranges: Sequence[tuple[int, int]]) -> list[Buffer] | None:
    """Views of byte ranges of the local file ``path``, mapped in memory; None when it cannot be mapped.

    A category's bytes are then used where the kernel holds them (no copy into a buffer of their own, no fresh
    memory to fault in), the kernel is asked to read the whole of each range ahead at once (:func:`read_ahead`, so
    that packing starts on the first images while the others come from the disk), and each image is copied out
    only when it is packed. A range past the end of the file gives a shorter view, as a read would. The file must
    not shrink while a view is used.
    """
    low = min(start for start, _ in ranges)
    base = low - low % mmap.ALLOCATIONGRANULARITY
    try:
        with open(path, "rb") as f:
            high = min(max(end for _, end in ranges), os.fstat(f.fileno()).st_size)
            if high <= base:
                return None
            mapped = mmap.mmap(f.fileno(), high - base, access=mmap.ACCESS_READ, offset=base)
            for start, end in ranges:
                read_ahead(f.fileno(), start, min(end, high))
    except (OSError, ValueError):
        return None
    whole = memoryview(mapped)
    return [whole[start - base:end - base] for start, end in ranges]
