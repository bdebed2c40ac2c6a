"""The zip format as the project writes and reads it: stored zips written in one pass, CRC-32 and raw inflate.

A category's zip is written by :func:`stored_zip`: members stored (not deflated), dated :data:`ZIP_DATE`, made on
Unix with mode 644, so that the same members in the same order always give the same bytes, on every platform.
They are the bytes Python's ``zipfile`` writes for such members on Linux (boards written before stay valid), but
each header is written once, with a CRC the caller may already hold (a member read from another zip, its CRC
checked), and the sha256 of the file is taken as it is written instead of by reading it again.

:func:`crc32`, :func:`inflate_raw` and :func:`gunzip` use ISA-L (the ``isal`` package, several times faster at
CRC-32 and about twice as fast at inflating) when it is installed, and ``zlib`` otherwise; the results are the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

try:  # the same functions as zlib's, faster
    from isal import isal_zlib as _fast
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback where it has no wheel
    _fast = zlib  # type: ignore[assignment]

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
_MODE_644 = 0o644 << 16
_DOS_DATE = (ZIP_DATE[0] - 1980) << 9 | ZIP_DATE[1] << 5 | ZIP_DATE[2]
_DOS_TIME = ZIP_DATE[3] << 11 | ZIP_DATE[4] << 5 | ZIP_DATE[5] // 2


def crc32(data: Any, value: int = 0) -> int:
    """The CRC-32 of ``data`` (a bytes-like object), continuing from ``value``, as zlib computes it."""
    return int(_fast.crc32(data, value))


#: What :func:`inflate_raw` raises for a damaged stream.
INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _fast.error)


def inflate_raw(data: Any, size: int) -> bytes:
    """``data``, a raw deflate stream (a zip member's), inflated; ``size`` is the expected length.

    Raises one of :data:`INFLATE_ERRORS` when the stream is damaged or inflates to another length."""
    out = _fast.decompress(data, -15, max(size, 1))
    if len(out) != size:
        raise zlib.error(f"it inflates to {len(out)} bytes, not the {size} its record gives")
    return bytes(out)


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
