"""The images of categories not yet finished by a source read in one pass (a parquet shard's row groups, the
validation folder of a stream): held in memory up to :data:`MEMORY_BUDGET`, the largest categories beyond it
appended to spool files in the upload's scratch folder until they are finished."""

from __future__ import annotations

import os
import struct

from .parts import Member, Members, by_name

#: A spooled member: the lengths of its name, bytes (``NO_DATA``: None) and reason, then its CRC (-1: none).
_RECORD = struct.Struct("<IIIq")
NO_DATA = 0xFFFFFFFF
#: Bytes of images of unfinished categories held in memory before the largest categories go to spool files.
MEMORY_BUDGET = 256 << 20


class Held:
    """The images of unfinished categories: in memory up to :data:`MEMORY_BUDGET`, the largest categories beyond it
    appended to spool files in ``workdir``. Used by the reading thread only (``take`` is a part's ``open``)."""

    def __init__(self, workdir: str, split: str):
        self.workdir, self.split = workdir, split
        self.members: dict[int, list[Member]] = {}
        self.sizes: dict[int, int] = {}
        self.bytes = 0
        self.spools: dict[int, str] = {}

    def add(self, label: int, member: Member) -> None:
        self.members.setdefault(label, []).append(member)
        size = len(member.data or b"")
        self.sizes[label] = self.sizes.get(label, 0) + size
        self.bytes += size

    def spill(self) -> None:
        """Move the largest categories to their spool files until half the budget is left in memory."""
        if self.bytes <= MEMORY_BUDGET:
            return
        for label in sorted(self.sizes, key=self.sizes.__getitem__, reverse=True):
            if self.bytes <= MEMORY_BUDGET // 2:
                break
            path = self.spools.setdefault(label, os.path.join(self.workdir, f"spool-{self.split}-{label}"))
            with open(path, "ab") as f:
                for name, data, reason, crc in self.members.pop(label, []):
                    encoded, why = name.encode(), reason.encode()
                    f.write(_RECORD.pack(len(encoded), NO_DATA if data is None else len(data), len(why),
                                         -1 if crc is None else crc) + encoded + (data or b"") + why)
            self.bytes -= self.sizes.pop(label)

    def take(self, label: int) -> Members:
        """The members of a finished category: those in memory now, those spooled when the packer reads them."""
        members = self.members.pop(label, [])
        self.bytes -= self.sizes.pop(label, 0)
        spool = self.spools.pop(label, None)
        return lambda: by_name(members + (_read_spool(spool) if spool else []))


def _read_spool(path: str) -> list[Member]:
    """The members a spool file holds, in the order they were written, each whole (its bytes, or None, its reason
    and its CRC); the file is removed."""
    members: list[Member] = []
    if os.path.exists(path):
        with open(path, "rb") as f:
            while header := f.read(_RECORD.size):
                size_name, size_data, size_reason, crc = _RECORD.unpack(header)
                name = f.read(size_name).decode()
                data = None if size_data == NO_DATA else f.read(size_data)
                reason = f.read(size_reason).decode()
                members.append(Member(name, data, reason, None if crc < 0 else crc))
        os.remove(path)
    return members
