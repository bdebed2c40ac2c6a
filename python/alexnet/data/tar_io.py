"""Tar archives read in place: indexes from their headers, a category's tar held in memory read as its members, a
compressed tar read as a stream.

Plain headers (ustar or GNU, as ImageNet's tars are written) are read here (:func:`plain_tar_entries`, and
:func:`stream_tar` for a tar read as a stream), anything else by Python's ``tarfile``.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from ..errors import LayoutError
from ..storage.zipformat import INFLATE_ERRORS
from .archive_io import AtPosition, Buffer
from .images import too_many_bytes
from .parts import Member, in_name_order, is_image_name, not_an_image

_TAR_BLOCK = 512


class _ViewFile(AtPosition, io.RawIOBase):
    """A read-only, seekable file over a buffer, so that tarfile reads headers out of a mapped file without a copy."""

    def __init__(self, data: Buffer):
        super().__init__()
        self.data, self.pos = memoryview(data), 0

    def readinto(self, buffer: Any) -> int:
        chunk = self.data[self.pos:self.pos + len(buffer)]
        buffer[:len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = max(0, offset + (0, self.pos, len(self.data))[whence])
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


class _Plain(NamedTuple):
    """What a plain header says: the file's name, size and modification time, and whether it is a folder."""

    name: str
    size: int
    mtime: int
    folder: bool


def _plain_header(header: bytes) -> _Plain | None:
    """The 512-byte ``header`` if it is a plain one (a regular file or a folder; ustar or GNU; a short name; numbers
    in octal; its checksum right), else None (the end-of-archive zero block included)."""
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
    folder = kind == b"5" or (kind == b"\0" and name.endswith("/"))  # no data follows a folder's header
    return _Plain(f"{os.fsdecode(prefix)}/{name}" if prefix else name, size, mtime, folder)


def _padded(size: int) -> int:
    """The bytes a file of ``size`` bytes takes in a tar: whole blocks."""
    return -(-size // _TAR_BLOCK) * _TAR_BLOCK


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
        plain = _plain_header(header)
        if plain is None:
            return None
        if plain.folder:
            at += _TAR_BLOCK
            continue
        entries.append(TarEntry(plain.name, at + _TAR_BLOCK, plain.size, plain.mtime))
        at += _TAR_BLOCK + _padded(plain.size)
    return None  # the end of the file without the zero block that ends a tar: tarfile reads it, _check_stop says it


def _check_stop(block: bytes, offset: int) -> None:
    """``tarfile`` ends a tar quietly at a header it cannot read, and at the end of the file: ``block``, where it
    stopped, must be the zero block that ends a tar (a tar that ends without one was cut between two members, so
    that the members after the cut are missing); ``tarfile.ReadError`` otherwise."""
    if not block:
        raise tarfile.ReadError(f"it ends at byte {offset} without the blocks that end a tar: it is cut short")
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
        if entries and entries[-1].offset + entries[-1].size > total:  # the cut is in the last member read
            raise LayoutError(f"{label} is cut short: it ends inside {entries[-1].name} ({total} bytes); download it "
                              "again") from None
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


#: The bytes a stream read by :class:`_Forward` keeps to go back into: a header and the byte before it.
_KEPT = 2 * _TAR_BLOCK


class _Forward(AtPosition):
    """A stream read front to back (a gzip stream), as a file ``tarfile`` can read: a seek forward skips bytes, a
    seek back goes only into the last :data:`_KEPT` bytes read (``tarfile`` steps back a byte before a header)."""

    def __init__(self, raw: Any):
        self.raw, self.pos = raw, 0
        self.kept = b""  # the last bytes read from the stream, up to where it has been read
        self.replay = b""  # bytes of ``kept`` to give again after a seek back

    def _raw(self, size: int) -> bytes:
        """Up to ``size`` bytes of the stream (all that is left when negative), fewer only at its end."""
        if size < 0:
            return bytes(self.raw.read())
        pieces, got = [], 0
        while got < size:
            piece = self.raw.read(size - got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        return bytes(pieces[0]) if len(pieces) == 1 else b"".join(pieces)

    def read(self, size: int = -1) -> bytes:
        head, self.replay = (self.replay, b"") if size < 0 else (self.replay[:size], self.replay[size:])
        new = self._raw(-1 if size < 0 else size - len(head)) if size < 0 or len(head) < size else b""
        self.kept = new[-_KEPT:] if len(new) >= _KEPT else (self.kept + new)[-_KEPT:]
        data = head + new if head else new
        self.pos += len(data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence not in (io.SEEK_SET, io.SEEK_CUR):
            raise io.UnsupportedOperation("a stream has no end to seek from")
        target = offset if whence == io.SEEK_SET else self.pos + offset
        if target < self.pos:
            back = self.pos + len(self.replay) - target  # bytes before where the stream has been read to
            if back > len(self.kept):
                raise io.UnsupportedOperation(f"a stream cannot go back to byte {target}")
            self.replay, self.pos = self.kept[len(self.kept) - back:], target
        while self.pos < target and self.read(min(target - self.pos, 1 << 20)):
            pass
        return self.pos

    def take(self, entry: TarEntry) -> bytes:
        """The bytes of the file ``entry`` (the stream at its start or before it)."""
        self.seek(entry.offset)
        data = self.read(entry.size)
        if len(data) < entry.size:
            raise EOFError(f"the tar ends inside {entry.name}")
        return data

    def drain(self) -> None:
        """Read the stream to its end: a gzip stream checks its CRC there."""
        while self.read(1 << 20):
            pass


#: What reading a gzipped tar through :func:`stream_tar` raises when the archive is damaged or cut short.
STREAM_ERRORS: tuple[type[Exception], ...] = (tarfile.TarError, EOFError, OSError, *INFLATE_ERRORS)


def stream_tar(f: Any) -> Iterator[tuple[TarEntry, Callable[[], bytes]]]:
    """The regular files of the tar read front to back from the stream ``f`` (a gzip stream, which cannot seek), each
    with a call that gives its bytes, to be made before the next file is asked for (a file not read is skipped).

    Plain headers are read here (as :func:`plain_tar_entries` does); from the first other one on (a long name, a pax
    record, a link), the rest of the tar is read by ``tarfile``, kept from holding every header it reads (about 490
    bytes each: a GB for the two million files of Kaggle's tar.gz). A header that cannot be read is an error
    (``tarfile.ReadError`` naming the byte where it lies), not the quiet end of the tar that ``tarfile`` makes of it,
    and the stream is read to its end after the tar's end, so that a gzip stream's CRC is checked.
    """
    source = _Forward(f)
    while True:
        at = source.pos
        header = source.read(_TAR_BLOCK)
        if not header:  # the end of the stream without the blocks that end a tar: cut between two members
            raise tarfile.ReadError(f"it ends at byte {at} without the blocks that end a tar: it is cut short")
        if header == _ZERO_BLOCK:  # the end of the archive
            source.drain()
            return
        plain = _plain_header(header)
        if plain is None:
            source.seek(at)
            yield from _tarfile_stream(source)
            return
        if plain.folder:
            continue
        entry = TarEntry(plain.name, at + _TAR_BLOCK, plain.size, plain.mtime)
        yield entry, partial(source.take, entry)
        source.seek(entry.offset + _padded(entry.size))


def _tarfile_stream(source: _Forward) -> Iterator[tuple[TarEntry, Callable[[], bytes]]]:
    """The rest of :func:`stream_tar` read by ``tarfile``, from the header ``source`` is at."""
    # typeshed's file for tarfile asks for write() and close() too, which tarfile never calls on a file it was given
    with tarfile.open(fileobj=source, mode="r:") as tar:  # type: ignore[call-overload]
        while True:
            member = tar.next()
            tar.members.clear()  # tarfile keeps every header it reads; nothing here looks one up again
            if member is None:
                break
            if member.isfile():
                yield (TarEntry(member.name, member.offset_data, member.size, int(member.mtime)),
                       partial(member_bytes, tar, member))
    source.seek(tar.offset)
    _check_stop(source.read(_TAR_BLOCK), tar.offset)
    source.drain()


def _member(name: str, view: memoryview, at: int, size: int, label: str) -> tuple[str, Callable[[], Member]]:
    """A file of a category's tar held in ``view``, its bytes from ``at``, as :func:`in_name_order` takes it."""
    if not is_image_name(name):
        return name, partial(Member, name, None, not_an_image(label))
    refused = too_many_bytes(size)
    if refused is not None:
        return name, partial(Member, name, None, refused)
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
                    if is_image_name(name) and member.issparse() and too_many_bytes(member.size) is None:
                        found.append((name, partial(Member, name, member_bytes(tar, member))))
                    else:
                        found.append(_member(name, view, member.offset_data, member.size, label))
            _check_stop(bytes(view[tar.offset:tar.offset + _TAR_BLOCK]), tar.offset)
    except (tarfile.TarError, EOFError) as err:
        raise LayoutError(f"{label} is not a readable tar ({err}): the archive is damaged; download it again") \
            from None
    return in_name_order(found)


def member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """The bytes of the regular file ``member`` of ``tar`` (as ``tarfile`` reads them, sparse files included)."""
    handle = tar.extractfile(member)
    return handle.read() if handle is not None else b""


def copied_member(name: str, data: Buffer) -> Member:
    """The member ``name`` holding a copy of ``data``, a view of the bytes of its archive (see :func:`tar_members`)."""
    return Member(name, bytes(data))
