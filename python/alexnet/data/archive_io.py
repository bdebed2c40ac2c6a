"""Reading archives in place, from a local path or a bucket (through fsspec): tar and zip indexes, byte ranges.

An index lists where each member's bytes lie in the archive, so that a part of an upload reads exactly its own
bytes (one range for a category's tar inside the training tar or a category's run of a zip; a few ranges for
validation images spread over their archive), from any thread, and a finished category is not read at all.
Reading an index touches only headers: tar headers are spread through the file (from a bucket they are read
in blocks), a zip's central directory sits at its end.
"""

from __future__ import annotations

import contextlib
import io
import logging
import mmap
import os
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

from ..errors import LayoutError
from ..storage.location import fs_path, location_kind, open_filesystem, resolve_location
from ..storage.zipformat import INFLATE_ERRORS, crc32, inflate_raw, inflater
from .parts import CRC_MISMATCH, Member, in_name_order, is_image_name, not_an_image

log = logging.getLogger(__name__)

#: Bytes fetched at a time while reading headers from a bucket, by how large the members are.
SMALL_MEMBERS_BLOCK = 8 << 20
LARGE_MEMBERS_BLOCK = 64 << 10
_TAR_BLOCK = 512
_ZIP_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the zip format's local file header (30 bytes)

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
        """The names directly in the folder ``path`` (empty when it is not a folder)."""
        try:
            return sorted(os.path.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def isfile(self, path: str) -> bool:
        return bool(self.fs.isfile(path))

    def size(self, path: str) -> int:
        return int(self.fs.size(path))

    def open(self, path: str, block_size: int) -> Any:
        """A seekable binary file; from a bucket, fetched ``block_size`` bytes at a time ahead of reads."""
        if self.local:
            return open(path, "rb")
        return self.fs.open(path, "rb", block_size=block_size, cache_type="readahead")

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
        return [bytes(b) for b in self.fs.cat_ranges([path] * n, [s for s, _ in ranges], [e for _, e in ranges])]

    def read_ranges_ahead(self, path: str, ranges: Sequence[tuple[int, int]]) -> Callable[[], list[Buffer]]:
        """:meth:`read_ranges` in two steps, for a part opened (by the thread that reads the source in order) before
        it is packed: a local file is mapped and asked of the kernel now, so that the disk reads it while the parts
        before it are packed; a bucket's ranges are fetched only when the call returned is made, by the thread that
        packs the part."""
        if self.local:
            views = self.read_ranges(path, ranges)
            return lambda: views
        return lambda: self.read_ranges(path, ranges)


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


class _ViewFile(io.RawIOBase):
    """A read-only, seekable file over a buffer, so that tarfile reads headers out of a mapped file without a copy."""

    def __init__(self, data: Buffer):
        super().__init__()
        self.data, self.pos = memoryview(data), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self.data[self.pos:self.pos + len(buffer)]
        buffer[:len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = max(0, offset + (0, self.pos, len(self.data))[whence])
        return self.pos

    def tell(self) -> int:
        return self.pos


@dataclass(frozen=True)
class TarEntry:
    """A regular file in a tar: its name, where its bytes start, their size, its modification time."""

    name: str
    offset: int
    size: int
    mtime: int


#: The header types read without ``tarfile`` (:func:`plain_tar_entries`): regular files and folders.
_PLAIN_TYPES = (b"0", b"\0", b"7", b"5")
_ZERO_BLOCK = bytes(_TAR_BLOCK)


def _octal(field: bytes) -> int:
    """A number field of a tar header written in octal digits (``ValueError`` for anything else)."""
    return int(field.split(b"\0", 1)[0].strip() or b"0", 8)


def plain_tar_entries(block: Callable[[int], bytes], end: int) -> list[TarEntry] | None:
    """The regular files of a tar ``end`` bytes long whose headers are all plain ones, as ``tarfile`` reads them;
    ``block(offset)`` gives the 512 bytes of the header at ``offset``.

    A tar of plain headers (ustar or GNU, short names, numbers in octal: what GNU tar and Python write for
    ImageNet's files) is read here, several times faster than by ``tarfile``, which matters for a million images.
    None for anything else (long names, pax records, sparse files, links, a bad checksum, a tar cut short): the
    caller reads that tar with ``tarfile``, which also words the error.
    """
    entries: list[TarEntry] = []
    at = 0
    while at < end:
        header = block(at)
        if header == _ZERO_BLOCK:  # the end of the archive
            return entries if entries else None
        kind = header[156:157]
        if len(header) < _TAR_BLOCK or kind not in _PLAIN_TYPES:
            return None
        try:
            recorded, size, mtime = _octal(header[148:156]), _octal(header[124:136]), _octal(header[136:148])
        except ValueError:
            return None
        if recorded != 256 + sum(header) - sum(header[148:156]):  # the checksum field counts as 8 spaces
            return None
        name = os.fsdecode(header[:100].split(b"\0", 1)[0])
        prefix = header[345:500].split(b"\0", 1)[0]
        if kind == b"5" or (kind == b"\0" and name.endswith("/")):  # a folder: no data follows
            at += _TAR_BLOCK
            continue
        entries.append(TarEntry(f"{os.fsdecode(prefix)}/{name}" if prefix else name, at + _TAR_BLOCK, size, mtime))
        at += _TAR_BLOCK + -(-size // _TAR_BLOCK) * _TAR_BLOCK
    return entries if at == end and entries else None


def _check_stop(block: bytes, offset: int) -> None:
    """``tarfile`` ends a tar quietly at a header it cannot read: ``block``, where it stopped, must be the zero block
    that ends a tar (or nothing, at the end of the file); ``tarfile.ReadError`` otherwise."""
    if block.strip(b"\0"):
        raise tarfile.ReadError(f"a damaged header at byte {offset}")


def tar_index(f: Any, label: str, total: int) -> list[TarEntry]:
    """The regular files of the tar ``f`` (seekable; ``total`` bytes long), read from their headers only
    (:func:`plain_tar_entries`, or ``tarfile`` for other headers).

    ``LayoutError`` naming ``label`` when it is not a tar or ends before its last member does.
    """

    def block(at: int) -> bytes:
        f.seek(at)
        return bytes(f.read(_TAR_BLOCK))

    plain = plain_tar_entries(block, total)
    entries: list[TarEntry] = []
    try:
        if plain is not None:
            entries = plain
        else:
            f.seek(0)
            with tarfile.open(fileobj=f, mode="r:") as tar:
                for member in tar:
                    if member.isfile():
                        entries.append(TarEntry(member.name, member.offset_data, member.size, int(member.mtime)))
            _check_stop(block(tar.offset), tar.offset)
    except (tarfile.TarError, EOFError) as err:
        cut = f" after {entries[-1].name}" if entries else ""
        raise LayoutError(f"{label} cannot be read as a tar{cut} ({err}): it is damaged or cut short; download it "
                          "again") from None
    end = max((e.offset + e.size for e in entries), default=0)
    # a complete tar ends with two zero blocks after its last member's padded data
    if total < -(-end // _TAR_BLOCK) * _TAR_BLOCK + 2 * _TAR_BLOCK:
        last = max(entries, key=lambda e: e.offset).name if entries else "its first member"
        raise LayoutError(f"{label} is cut short: it ends inside or right after {last} ({total} bytes); download it "
                          "again")
    return entries


def _member(name: str, view: memoryview, at: int, size: int, label: str) -> tuple[str, Callable[[], Member]]:
    """A file of a category's tar held in ``view``, its bytes from ``at``, as :func:`in_name_order` takes it."""
    if not is_image_name(name):
        return name, partial(Member, name, None, not_an_image(label))
    if at + size > len(view):
        raise EOFError(f"{name} is cut short")
    return name, partial(copied_member, name, view[at:at + size])


def tar_members(blob: Buffer, label: str) -> Iterator[Member]:
    """The files of the tar held in ``blob`` (a category's tar), in name order: images as members, others with a reason.

    The headers are all read here (:func:`plain_tar_entries`, or ``tarfile`` for other headers; ``LayoutError``
    for a damaged tar, before any member is given); each image's bytes are copied out of ``blob`` only when the
    iterator reaches it.
    """
    view = memoryview(blob)
    plain = plain_tar_entries(lambda at: bytes(view[at:at + _TAR_BLOCK]), len(view))
    found: list[tuple[str, Callable[[], Member]]] = []
    try:
        if plain is not None:
            found = [_member(os.path.basename(e.name), view, e.offset, e.size, label) for e in plain]
        else:
            with tarfile.open(fileobj=_ViewFile(blob), mode="r:") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    name = os.path.basename(member.name)
                    if is_image_name(name) and member.issparse():
                        handle = tar.extractfile(member)
                        found.append((name, partial(Member, name, handle.read() if handle is not None else b"")))
                    else:
                        found.append(_member(name, view, member.offset_data, member.size, label))
            _check_stop(bytes(view[tar.offset:tar.offset + _TAR_BLOCK]), tar.offset)
    except (tarfile.TarError, EOFError) as err:
        raise LayoutError(f"{label} is not a readable tar ({err}): the archive is damaged; download it again") \
            from None
    return in_name_order(found)


def copied_member(name: str, data: Buffer) -> Member:
    """The member ``name`` holding a copy of ``data``, a view of the bytes of its archive (see :func:`tar_members`)."""
    return Member(name, bytes(data))


@dataclass(frozen=True)
class ZipEntry:
    """A file in a zip: its zipfile info and the byte range from its local header to the next record."""

    info: zipfile.ZipInfo
    start: int
    end: int

    @property
    def name(self) -> str:
        return self.info.filename


def zip_index(f: Any, label: str) -> list[ZipEntry]:
    """The files of the zip ``f`` (seekable), from its central directory, in the order they lie in the file.

    ``LayoutError`` naming ``label`` when it is not a complete zip (its central directory is at its end, so a
    zip cut short has none).
    """
    try:
        with zipfile.ZipFile(f) as zf:
            infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
            directory = int(zf.start_dir)
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise LayoutError(f"{label} is not a complete zip ({err}): it was cut short or damaged; download it "
                          "again") from None
    entries = []
    for k, info in enumerate(infos):
        end = infos[k + 1].header_offset if k + 1 < len(infos) else directory
        if not info.is_dir():
            entries.append(ZipEntry(info, info.header_offset, end))
    return entries


def zip_member(blob: Buffer, base: int, entry: ZipEntry, label: str) -> Member:
    """The member ``entry`` out of ``blob``, the bytes of its zip from offset ``base``, inflated. Its ``crc`` is the
    one the zip records, not yet compared: the upload compares it as it stores the image (see :func:`zip_text`)."""
    name = os.path.basename(entry.name)
    at = entry.start - base
    header = blob[at:at + _ZIP_LOCAL_HEADER.size]
    if len(header) < _ZIP_LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        return Member(name, None, f"its record in {label} is damaged (no local header); download the archive again")
    fields = _ZIP_LOCAL_HEADER.unpack(header)
    start = at + _ZIP_LOCAL_HEADER.size + fields[10] + fields[11]
    raw = memoryview(blob)[start:start + entry.info.compress_size]
    try:
        if entry.info.compress_type == zipfile.ZIP_STORED:
            data = bytes(raw)
        elif entry.info.compress_type == zipfile.ZIP_DEFLATED:
            data = inflate_raw(raw, entry.info.file_size)
        else:
            return Member(name, None, f"compressed with method {entry.info.compress_type} in {label}, which is not "
                                      "read")
    except INFLATE_ERRORS as err:
        return Member(name, None, f"cannot be decompressed from {label} ({err}); download the archive again")
    return Member(name, data, crc=entry.info.CRC)


class _Window(io.RawIOBase):
    """Bytes ``start`` to ``start + size`` of the seekable file ``f``, read front to back; ``tell()`` counts them."""

    def __init__(self, f: Any, start: int, size: int):
        super().__init__()
        self.f, self.size, self.pos = f, size, 0
        f.seek(start)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.f.read(min(len(buffer), self.size - self.pos)) if self.pos < self.size else b""
        buffer[:len(data)] = data
        self.pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self.pos


class _Inflating(io.RawIOBase):
    """The raw deflate stream ``raw`` (a zip member's) inflated as it is read; ``tell()`` counts ``raw``'s bytes."""

    def __init__(self, raw: _Window):
        super().__init__()
        self.raw, self.inflater = raw, inflater()
        self.out, self.at, self.done = b"", 0, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self.at == len(self.out) and not self.done:
            chunk = self.raw.read(1 << 20)
            if chunk:
                self.out, self.at = self.inflater.decompress(chunk), 0
            else:
                self.out, self.at, self.done = self.inflater.flush(), 0, True
                if not self.inflater.eof:
                    raise EOFError("the member ends before its deflate stream does")
        n = min(len(buffer), len(self.out) - self.at)
        buffer[:n] = self.out[self.at:self.at + n]
        self.at += n
        return n

    def tell(self) -> int:
        return self.raw.tell()


@contextlib.contextmanager
def zip_member_stream(files: Files, path: str, entry: ZipEntry) -> Iterator[Any]:
    """The member ``entry`` of the zip at ``path`` as a binary stream, read front to back (and inflated when it is
    deflated) without reading the rest of the zip: a large member (a tar.gz in a zip) is read in place."""
    label = f"{files.url(path)}: {entry.name}"
    header = files.read(path, entry.start, entry.start + _ZIP_LOCAL_HEADER.size)
    if len(header) < _ZIP_LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise LayoutError(f"{label}: its record is damaged (no local header); download the archive again")
    fields = _ZIP_LOCAL_HEADER.unpack(header)
    start = entry.start + _ZIP_LOCAL_HEADER.size + fields[10] + fields[11]
    method = entry.info.compress_type
    if method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise LayoutError(f"{label} is compressed with method {method}, which is not read; unzip it first")
    with files.open(path, SMALL_MEMBERS_BLOCK) as f:
        window = _Window(f, start, entry.info.compress_size)
        yield window if method == zipfile.ZIP_STORED else _Inflating(window)


def zip_text(blob: bytes, base: int, entry: ZipEntry, label: str) -> str:
    """The text file ``entry`` out of ``blob`` (as :func:`zip_member`), its CRC checked; ``LayoutError`` if damaged."""
    member = zip_member(blob, base, entry, label)
    if member.data is None:
        raise LayoutError(f"{label}: {entry.name} {member.reason}")
    if crc32(member.data) != member.crc:
        raise LayoutError(f"{label}: {entry.name} {CRC_MISMATCH}")
    return member.data.decode("utf-8", "replace")
