"""Tar archives read in place: indexes from their headers, a category's tar held in memory read as its members.

Plain headers (ustar or GNU, as ImageNet's tars are written) are read here (:func:`plain_tar_entries`), anything
else by Python's ``tarfile``.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import LayoutError
from .archive_io import Buffer
from .parts import Member, in_name_order, is_image_name, not_an_image

_TAR_BLOCK = 512


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
