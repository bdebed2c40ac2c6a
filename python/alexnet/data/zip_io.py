"""Zip archives read in place: the index from the central directory, members inflated out of a category's bytes,
and a large member (a tar.gz in a zip) streamed from its byte range."""

from __future__ import annotations

import contextlib
import io
import os
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import LayoutError
from ..storage.zipformat import (
    FIELDS,
    INFLATE_ERRORS,
    LOCAL_HEADER_SIZE,
    DamagedZip,
    Directory,
    crc32,
    data_offset,
    inflate_raw,
    inflater,
    read_directory,
)
from .archive_io import Buffer, Files
from .images import too_many_bytes
from .parts import CRC_MISMATCH, Member


@dataclass(frozen=True, slots=True)
class ZipEntry:
    """A file in a zip: its name, the byte range from its local header to the next record, and what its central
    directory record says of it."""

    name: str
    start: int
    end: int
    method: int
    compressed: int
    size: int
    crc: int


class ZipIndex:
    """The files of a zip kept by :func:`zip_index`, in the order they lie in the file, held as one list of names and
    one array of numbers; each :class:`ZipEntry` is made when it is asked for."""

    def __init__(self, directory: Directory):
        self.names, self.table = directory.names, directory.table

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, k: int) -> ZipEntry:
        at = len(FIELDS) * range(len(self))[k]
        return ZipEntry(self.names[k], *self.table[at:at + len(FIELDS)])

    def __iter__(self) -> Iterator[ZipEntry]:
        return (self[k] for k in range(len(self)))

    def record_bytes(self, k: int) -> int:
        """The bytes of file ``k``'s record in the zip (its local header, name and data)."""
        at = len(FIELDS) * k
        return self.table[at + 1] - self.table[at]


def zip_index(f: Any, label: str, keep: Callable[[str], bool] | None = None) -> ZipIndex:
    """The files of the zip ``f`` (seekable), from its central directory, in the order they lie in the file: those
    whose name ``keep`` accepts (all when it is None), folders left out.

    ``LayoutError`` naming ``label`` when it is not a complete zip (its central directory is at its end, so a
    zip cut short has none).
    """
    try:
        return ZipIndex(read_directory(f, keep))
    except (DamagedZip, UnicodeDecodeError, EOFError, OSError) as err:
        raise LayoutError(f"{label} is not a complete zip ({err}): it was cut short or damaged; download it "
                          "again") from None


def zip_member(blob: Buffer, base: int, entry: ZipEntry, label: str) -> Member:
    """The member ``entry`` out of ``blob``, the bytes of its zip from offset ``base``, inflated. Its ``crc`` is the
    one the zip records, not yet compared: the upload compares it as it stores the image (see :func:`zip_text`)."""
    name = os.path.basename(entry.name)
    at = entry.start - base
    offset = data_offset(blob[at:at + LOCAL_HEADER_SIZE])
    if offset is None:
        return Member(name, None, f"its record in {label} is damaged (no local header); download the archive again")
    start = at + offset
    refused = too_many_bytes(max(entry.size, entry.compressed))
    if refused is not None:
        return Member(name, None, refused)
    raw = memoryview(blob)[start:start + entry.compressed]
    data: bytes | bytearray
    try:
        if entry.method == zipfile.ZIP_STORED:
            data = bytes(raw)
        elif entry.method == zipfile.ZIP_DEFLATED:
            data = inflate_raw(raw, entry.size)
        else:
            return Member(name, None, f"compressed with method {entry.method} in {label}, which is not read")
    except INFLATE_ERRORS as err:
        return Member(name, None, f"cannot be decompressed from {label} ({err}); download the archive again")
    return Member(name, data, crc=entry.crc)


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
    offset = data_offset(files.read(path, entry.start, entry.start + LOCAL_HEADER_SIZE))
    if offset is None:
        raise LayoutError(f"{label}: its record is damaged (no local header); download the archive again")
    start = entry.start + offset
    method = entry.method
    if method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise LayoutError(f"{label} is compressed with method {method}, which is not read; unzip it first")
    with files.open_stream(path) as f:
        window = _Window(f, start, entry.compressed)
        yield window if method == zipfile.ZIP_STORED else _Inflating(window)


def zip_text(blob: bytes, base: int, entry: ZipEntry, label: str) -> str:
    """The text file ``entry`` out of ``blob`` (as :func:`zip_member`), its CRC checked; ``LayoutError`` if damaged."""
    member = zip_member(blob, base, entry, label)
    if member.data is None:
        raise LayoutError(f"{label}: {entry.name} {member.reason}")
    if crc32(member.data) != member.crc:
        raise LayoutError(f"{label}: {entry.name} {CRC_MISMATCH}")
    return member.data.decode("utf-8", "replace")
