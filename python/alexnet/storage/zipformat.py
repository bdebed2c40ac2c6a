"""The zip format as the project writes and reads it: stored zips written in one pass, a zip's central directory
read into a compact table, CRC-32 and raw inflate.

A category's zip is written by :func:`stored_zip`: members stored (not deflated), dated :data:`ZIP_DATE`, made on
Unix with mode 644, so that the same members in the same order always give the same bytes, on every platform.
They are the bytes Python's ``zipfile`` writes for such members on Linux (boards written before stay valid), but
each header is written once, with a CRC the caller may already hold (a member read from another zip, its CRC
checked), and the sha256 of the file is taken as it is written instead of by reading it again.

:func:`read_directory` reads what Python's ``zipfile`` reads of a zip's members (zip64 records, a comment, bytes
before the zip), but into one list of names and one array of numbers, leaving out the members the caller does not
want before any object is made for them: Kaggle's ImageNet download lists two million files, which ``zipfile``
holds as 1.3 GB of ``ZipInfo`` objects.

:func:`crc32` and :func:`gunzip` use ISA-L (the ``isal`` package: several times faster at CRC-32, about twice as
fast at gunzipping) when it is installed, and ``zlib`` otherwise. :func:`inflate_raw`, which inflates a whole zip
member whose size the zip records, uses libdeflate (the ``deflate`` package), made for that case. On deflated JPEGs,
which are almost all literals, it was the fastest of the three on both CPUs measured: 17% less CPU than ISA-L on an
AMD EPYC; on an Intel Xeon, 1,550 MB/s against zlib's 1,030 and ISA-L's 790. Without it, ISA-L's inflate or zlib's
does. The results are the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import types
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

#: zlib's functions (``crc32``, ``decompress``, ``decompressobj``, ``error``) from ISA-L, or from zlib itself
_fast: types.ModuleType
#: libdeflate's whole-buffer inflater, where it is installed
_whole: types.ModuleType | None

try:  # the same functions as zlib's, faster
    from isal import isal_zlib as _fast
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback where it has no wheel
    _fast = zlib

try:  # a whole deflate stream inflated into a buffer of the size it is known to have
    import deflate as _whole
except ImportError:  # pragma: no cover - deflate is a dependency; ISA-L or zlib is the fallback where it has no wheel
    _whole = None

#: Zip members are dated 1980-01-01 00:00, so that the same files always give the same bytes.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
#: Sizes and offsets above this need the zip64 extensions (the limit Python's zipfile uses).
ZIP64_LIMIT = (1 << 31) - 1
#: More members than this need the zip64 end records.
ZIP_FILECOUNT_LIMIT = (1 << 16) - 1

_LOCAL = struct.Struct("<4s2B4HL2L2H")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_END64_LOCATOR = struct.Struct("<4sLQL")
_VERSION, _ZIP64_VERSION, _UNIX = 20, 45, 3
_UTF8_NAME = 1 << 11
_ZIP64_EXTRA = 1
_NO_VALUE = 0xFFFFFFFF  # a size or offset given in the zip64 extra field instead
#: The central directory is read this many bytes at a time.
DIRECTORY_BLOCK = 8 << 20
_MODE_644 = 0o644 << 16
_DOS_DATE = (ZIP_DATE[0] - 1980) << 9 | ZIP_DATE[1] << 5 | ZIP_DATE[2]
_DOS_TIME = ZIP_DATE[3] << 11 | ZIP_DATE[4] << 5 | ZIP_DATE[5] // 2


def crc32(data: Any, value: int = 0) -> int:
    """The CRC-32 of ``data`` (a bytes-like object), continuing from ``value``, as zlib computes it."""
    return int(_fast.crc32(data, value))


#: What :func:`inflate_raw` raises for a damaged stream.
INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _fast.error)


def inflate_raw(data: Any, size: int) -> bytes | bytearray:
    """``data``, a raw deflate stream (a zip member's), inflated; ``size`` is the expected length. The result is
    the buffer the inflater filled, not copied (a ``bytearray`` from libdeflate).

    Raises one of :data:`INFLATE_ERRORS` when the stream is damaged or inflates to another length."""
    out: bytes | bytearray
    if _whole is not None and size > 0:
        try:
            out = _whole.deflate_decompress(data, size)
        except _whole.DeflateError:
            # libdeflate says no more than that it failed: the stream is damaged or longer than the record says
            raise zlib.error(f"it is damaged, or does not inflate to the {size} bytes its record gives") from None
    else:  # at most one byte more than the record gives: a stream that lies about its size is not inflated whole
        stream = _fast.decompressobj(-15)
        out = stream.decompress(data, size + 1)
        if len(out) == size and not stream.eof:
            out += stream.decompress(stream.unconsumed_tail, 1)
    if len(out) != size:
        raise zlib.error(f"it inflates to more than the {size} bytes its record gives" if len(out) > size else
                         f"it inflates to {len(out)} bytes, not the {size} its record gives")
    return out


def inflater() -> Any:
    """An object that inflates a raw deflate stream piece by piece (``decompress``, ``flush``, ``eof``), as zlib's."""
    return _fast.decompressobj(-15)


def gunzip(fileobj: Any) -> Any:
    """A binary stream of the gzip ``fileobj`` decompressed as it is read (with ISA-L when it is installed: about
    twice as fast; the CRC at the end of each gzip member is checked either way)."""
    try:
        from isal.igzip import IGzipFile
    except ImportError:  # pragma: no cover - isal is a dependency
        import gzip

        return gzip.GzipFile(fileobj=fileobj, mode="rb")
    return IGzipFile(fileobj=fileobj, mode="rb")


#: The bytes of a local file header before its name and extra field.
LOCAL_HEADER_SIZE = _LOCAL.size


def data_offset(header: Any) -> int | None:
    """Where a member's data starts, counted from its local header, of which ``header`` holds the first
    :data:`LOCAL_HEADER_SIZE` bytes; None when they are not a local header (cut short, or another record)."""
    if len(header) < _LOCAL.size or header[:4] != b"PK\x03\x04":
        return None
    fields = _LOCAL.unpack(header[:_LOCAL.size])
    return _LOCAL.size + fields[10] + fields[11]


def _name_bytes(name: str) -> tuple[bytes, int]:
    try:
        return name.encode("ascii"), 0
    except UnicodeEncodeError:
        return name.encode("utf-8"), _UTF8_NAME


class StoredZip:
    """A stored zip being written to ``dest``: :meth:`add` members, then :meth:`close`; ``size`` and ``sha256``
    are those of the whole file once it is closed."""

    def __init__(self, dest: str | os.PathLike):
        self.file = open(dest, "wb")  # noqa: SIM115 - closed by close()
        self.digest = hashlib.sha256()
        self.offset = 0
        self.directory: list[tuple[bytes, int, int, int, int, bool]] = []  # name, flags, crc, size, offset, zip64
        self.size = 0
        self.sha256 = ""

    def _write(self, *chunks: Any) -> None:
        for chunk in chunks:
            self.file.write(chunk)
            self.digest.update(chunk)
            self.offset += len(chunk)

    def add(self, name: str, data: Any, crc: int | None = None) -> None:
        """Add the member ``name`` holding ``data``; ``crc``, when given, must be the CRC-32 of ``data``."""
        name_bytes, flags = _name_bytes(name)
        size = len(data)
        crc = crc32(data) if crc is None else crc
        # like zipfile, the local header takes zip64 sizes when a member might pass the limit
        zip64 = size * 1.05 > ZIP64_LIMIT
        extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        shown = 0xFFFFFFFF if zip64 else size
        header = _LOCAL.pack(b"PK\x03\x04", _ZIP64_VERSION if zip64 else _VERSION, 0, flags, 0, _DOS_TIME, _DOS_DATE,
                             crc, shown, shown, len(name_bytes), len(extra))
        self.directory.append((name_bytes, flags, crc, size, self.offset, zip64))
        self._write(header, name_bytes, extra, data)

    def close(self) -> None:
        """Write the central directory and the end records, close the file, set ``size`` and ``sha256``."""
        start = self.offset
        for name_bytes, flags, crc, size, offset, zip64 in self.directory:
            values = ([size, size] if size > ZIP64_LIMIT else []) + ([offset] if offset > ZIP64_LIMIT else [])
            extra = struct.pack("<HH" + "Q" * len(values), 1, 8 * len(values), *values) if values else b""
            version = _ZIP64_VERSION if values or zip64 else _VERSION
            shown = 0xFFFFFFFF if size > ZIP64_LIMIT else size
            self._write(_CENTRAL.pack(b"PK\x01\x02", version, _UNIX, version, 0, flags, 0, _DOS_TIME, _DOS_DATE,
                                      crc, shown, shown, len(name_bytes), len(extra), 0, 0, 0, _MODE_644,
                                      0xFFFFFFFF if offset > ZIP64_LIMIT else offset),
                        name_bytes, extra)
        end = self.offset
        count, length = len(self.directory), end - start
        if count > ZIP_FILECOUNT_LIMIT or start > ZIP64_LIMIT or length > ZIP64_LIMIT:
            self._write(_END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, length, start),
                        _END64_LOCATOR.pack(b"PK\x06\x07", 0, end, 1))
            count, length, start = min(count, 0xFFFF), min(length, 0xFFFFFFFF), min(start, 0xFFFFFFFF)
        self._write(_END.pack(b"PK\x05\x06", 0, 0, count, count, length, start, 0))
        self.file.close()
        self.size, self.sha256 = self.offset, self.digest.hexdigest()


@contextlib.contextmanager
def stored_zip(dest: str | os.PathLike) -> Iterator[StoredZip]:
    """Write the zip ``dest`` (see :class:`StoredZip`); it is complete when the block ends without an error."""
    writer = StoredZip(dest)
    try:
        yield writer
    except BaseException:
        writer.file.close()
        raise
    writer.close()


class DamagedZip(ValueError):
    """A zip whose end records or central directory cannot be read: cut short, or not a zip."""


class Directory(NamedTuple):
    """The members of a zip kept by :func:`read_directory`, in the order they lie in the file.

    ``table`` holds :data:`FIELDS` numbers for each member, in that order; ``start`` is where the central directory
    starts (the end of the last member's record)."""

    names: list[str]
    table: array
    start: int


#: The numbers of a member in :attr:`Directory.table`: the offset of its local header, the offset of the record after
#: it (the next member's local header, or the central directory), its compression method, compressed size, size
#: and CRC-32.
FIELDS = ("start", "end", "method", "compressed", "size", "crc")


def _end_record_at(tail: bytes) -> int:
    """Where the end record lies in ``tail``, the end of a zip: the last signature whose comment ends the file, or,
    when none does (bytes after the zip), the last one with room for a record."""
    found = -1
    at = len(tail) - _END.size + 1  # the first search ends where a record's signature with room for it would end
    while (at := tail.rfind(b"PK\x05\x06", 0, at + 3)) >= 0:
        if at + _END.size + _END.unpack_from(tail, at)[-1] == len(tail):
            return at
        found = max(found, at)
    if found < 0:
        raise DamagedZip("no end of central directory record: it is cut short or not a zip")
    return found


def _end_records(f: Any) -> tuple[int, int, int]:
    """``(size, start, before)`` of the zip ``f``: the size of its central directory and where it starts, as its end
    records give them, and the bytes before the zip (a self-extracting zip's program), which move every offset the
    zip gives (as ``zipfile`` takes them)."""
    f.seek(0, os.SEEK_END)
    length = f.tell()
    tail_start = max(0, length - (_END.size + 0xFFFF))  # the end record, then a comment of up to 64 KB
    f.seek(tail_start)
    tail = f.read()
    at = _end_record_at(tail)
    _, disk, _, _, _, size, offset, _ = _END.unpack_from(tail, at)
    end_at = tail_start + at
    zip64 = end_at >= _END64_LOCATOR.size + _END64.size
    if zip64:
        f.seek(end_at - _END64_LOCATOR.size - _END64.size)
        records = f.read(_END64.size + _END64_LOCATOR.size)
        zip64 = records[_END64.size:_END64.size + 4] == b"PK\x06\x07"
    if zip64:
        _, disk, _, disks = _END64_LOCATOR.unpack_from(records, _END64.size)
        if disks > 1:
            raise DamagedZip("it spans several files")
        signature, _, _, _, disk, _, _, _, size, offset = _END64.unpack_from(records)
        if signature != b"PK\x06\x06":
            raise DamagedZip("its zip64 end of central directory record is damaged")
    if disk:
        raise DamagedZip("it spans several files")
    before = end_at - size - offset - ((_END64.size + _END64_LOCATOR.size) if zip64 else 0)
    if before < 0:
        raise DamagedZip("its central directory lies outside the file")
    return size, offset + before, before


def _zip64_values(extra: bytes, size: int, compressed: int, offset: int) -> tuple[int, int, int]:
    """``size``, ``compressed`` and ``offset`` with those given as 0xFFFFFFFF taken from the zip64 extra field, in the
    order the format sets."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == _ZIP64_EXTRA:
            values = list(struct.unpack_from(f"<{length // 8}Q", extra, at + 4))
            try:
                if size == _NO_VALUE:
                    size = values.pop(0)
                if compressed == _NO_VALUE:
                    compressed = values.pop(0)
                if offset == _NO_VALUE:
                    offset = values.pop(0)
            except IndexError:
                raise DamagedZip("a zip64 extra field is shorter than its record needs") from None
            return size, compressed, offset
        at += 4 + length
    raise DamagedZip("a member's sizes or offset are missing from its zip64 extra field")


def _central_records(f: Any, start: int, size: int) -> Iterator[tuple[bytes, int, tuple[Any, ...]]]:
    """Each record of the central directory of ``size`` bytes at ``start`` in ``f``: the bytes it lies in, where it
    starts in them and its fixed fields. Read :data:`DIRECTORY_BLOCK` bytes at a time, so that the directory (about
    200 MB for Kaggle's ImageNet download) is never held whole."""
    f.seek(start)
    unpack, record = _CENTRAL.unpack_from, _CENTRAL.size
    data, read = b"", 0
    while True:
        chunk = f.read(min(DIRECTORY_BLOCK, size - read)) if read < size else b""
        read += len(chunk)
        data += chunk
        at = 0
        while at + record <= len(data):
            fields = unpack(data, at)
            if fields[0] != b"PK\x01\x02":
                raise DamagedZip(f"its central directory is damaged at byte {start + read - len(data) + at}")
            end = at + record + fields[12] + fields[13] + fields[14]
            if end > len(data):
                break
            yield data, at, fields
            at = end
        data = data[at:]
        if not chunk:
            if data or read < size:
                raise DamagedZip("its central directory is cut short")
            return


def read_directory(f: Any, keep: Callable[[str], bool] | None = None) -> Directory:
    """The members of the zip ``f`` (a seekable binary file) its central directory lists, but folders and the names
    ``keep`` returns false for, in the order they lie in the file (see :class:`Directory`). Names are decoded as
    ``zipfile`` decodes them (UTF-8 when the member's flag says so, code page 437 otherwise). Raises
    :class:`DamagedZip`."""
    size, start, before = _end_records(f)
    names: list[str] = []
    kept = array("q")  # the kept members' five numbers (all but the end)
    offsets = array("q")  # the local header offset of every member, kept or not
    record = _CENTRAL.size
    for data, at, fields in _central_records(f, start, size):
        flags, method, crc, compressed, length, name_length, extra_length, offset = fields[5:7] + fields[9:14] + \
            fields[18:]
        name_end = at + record + name_length
        if _NO_VALUE in (compressed, length, offset):
            length, compressed, offset = _zip64_values(data[name_end:name_end + extra_length], length, compressed,
                                                       offset)
        offset += before
        offsets.append(offset)
        name = data[at + record:name_end].decode("utf-8" if flags & _UTF8_NAME else "cp437")
        if "\x00" in name:  # as zipfile: a name ends at its first NUL
            name = name[:name.index("\x00")]
        if not name.endswith("/") and (keep is None or keep(name)):
            names.append(name)
            kept.extend((offset, method, compressed, length, crc))
    # where each kept member's record ends: at the next member's local header, or at the central directory
    ordered = array("q", sorted(offsets))
    del offsets
    order = sorted(range(len(names)), key=kept[::5].__getitem__)
    table = array("q")
    for k in order:
        offset = kept[5 * k]
        after = bisect_right(ordered, offset)
        table.append(offset)
        table.append(ordered[after] if after < len(ordered) else start)
        table.extend(kept[5 * k + 1:5 * k + 5])
    return Directory([names[k] for k in order], table, start)
