"""What an upload reads from an ImageNet source, whatever its layout: parts, each one pin's images.

A *part* is one category's training images or its validation images. A source (:mod:`alexnet.data.sources`)
yields its parts in the order it reads them; for each it first asks the upload whether the part is wanted
(a part already on the board with the same identity is not), so that a source read as a stream skips the
bytes of a finished category without decoding them, and a seekable one does not read them at all.

``Part.open()`` is called by the upload's reading thread, in order: a streamed source reads the part's bytes
there (the archive is read once, front to back); a seekable source or a folder returns at once, and the bytes
are read by the packing thread that calls the result. Either way the result yields the part's members in
name order: ``Member(name, data)`` for a file, or ``Member(name, None, reason)`` for one that cannot be used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from .folders import IMAGE_EXTENSIONS
from .images import too_many_bytes

#: The layouts of ImageNet a source is read in (:mod:`alexnet.data.sources`), and written in by
#: :func:`~alexnet.data.synthetic.imagenet_synthetic`.
LAYOUT_NAMES = ("kaggle", "archives", "kaggle_zip", "kaggle_targz", "parquet", "imagefolder", "folders")


class Member(NamedTuple):
    """A member of a part: its file name, its bytes (None when it cannot be used) and why not.

    ``crc`` is the CRC-32 the archive records for ``data`` when the source has not checked it yet (a zip
    member): the upload computes the CRC of every image it stores anyway, and compares it with this one.
    """

    name: str
    data: bytes | bytearray | None
    reason: str = ""
    crc: int | None = None


def member_read(name: str, size: int, read: Callable[[], bytes | bytearray]) -> Member:
    """The member ``name``, its ``size`` bytes (as its source declares them) read by ``read``, unless that is more
    than an image may take (:func:`~alexnet.data.images.too_many_bytes`): then named, and not read."""
    refused = too_many_bytes(size)
    return Member(name, read()) if refused is None else Member(name, None, refused)

#: What ``Part.open()`` returns: a call that yields the members, in name order.
Members = Callable[[], Iterable[Member]]


@dataclass
class Part:
    """One pin's images in a source.

    Attributes:
        wnid: the category's WordNet id.
        split: ``"train"`` or ``"val"``.
        identity: what the part is made from (member names and sizes, or an archive member's header), without
            reading the images: the upload hashes it with its options into the fingerprint it compares with
            the board's.
        source_bytes: bytes of the source this part covers (the progress bar counts them).
        open: called once, in source order, when the part is wanted, by the thread that reads the source (up to
            ``workers + 2`` parts ahead of packing); returns its :data:`Members`. A local source asks the kernel
            for the part's bytes here; a bucket's are fetched when the members are asked for, by the thread that
            packs the part.
        count: members known before reading (None when only reading tells), for ``min_images``.
    """

    wnid: str
    split: str
    identity: bytes
    source_bytes: int
    open: Callable[[], Members]
    count: int | None = None

    @property
    def pin(self) -> str:
        from ..storage.layout import val_pin_name

        return self.wnid if self.split == "train" else val_pin_name(self.wnid)


#: Asked by a source for each of its parts before it reads it: False skips the part.
Wanted = Callable[[Part], bool]


def is_image_name(name: str, extensions: frozenset[str] = IMAGE_EXTENSIONS) -> bool:
    """A file name with one of ``extensions`` (ImageNet's: .JPEG, .jpg, .jpeg, .png), in any case, not hidden."""
    base = os.path.basename(name)
    return not base.startswith(".") and os.path.splitext(base)[1].lower() in extensions


#: The reason given for an image whose bytes do not match the CRC-32 its archive records.
CRC_MISMATCH = "its bytes do not match the CRC-32 its archive records: the archive is damaged; download it again"

#: Why an image whose name a fetch would not write as one file (a backslash, which it takes for a folder's, or . or
#: ..) is left out: were it stored, every fetch of its category would be refused.
NOT_A_FILE_NAME = "its name is not one file's (it holds a backslash, or is . or ..): rename the file and upload again"


def not_an_image(where: str) -> str:
    """The reason given for a file of an archive that is not an image."""
    return (f"not an image file (in {where}: only .JPEG, .jpg, .jpeg and .png files are read); remove it from the "
            "archive if it belongs elsewhere")


def by_name(members: Iterable[Member]) -> list[Member]:
    """``members`` in name order, the order a part yields them in (members of the same name keep theirs)."""
    return sorted(members, key=lambda m: m.name)


def in_name_order(pending: Iterable[tuple[str, Callable[[], Member]]]) -> Iterator[Member]:
    """Members in name order, each made (its bytes copied or inflated) only when it is reached: ``pending`` pairs a
    member's name with the call that makes it; they are sorted here, members of the same name keeping their order."""
    return (make() for _, make in sorted(pending, key=lambda held: held[0]))


def given(members: Iterable[Member]) -> Callable[[], Members]:
    """A part's ``open`` for members read already (from a stream): it returns a call that yields them."""
    return lambda: lambda: members


def identity_of(entries: Iterable[tuple[str, int]], *extra: object) -> bytes:
    """An identity from ``(name, size)`` pairs (in any order) and a few more fields."""
    head = "\0".join(str(e) for e in extra)
    return (head + "".join(f"\0{name}\0{size}" for name, size in sorted(entries))).encode()


class Kept(frozenset[str]):
    """The categories whose validation images an upload takes: those it kept for training. A source asks
    ``wnid in kept`` of each category of its validation images; the ones it asked about and were not kept are noted
    (:attr:`asked_not_kept`), so that the upload can say which validation images had no training category."""

    asked_not_kept: set[str]

    def __new__(cls, wnids: Iterable[str]) -> Kept:
        kept = super().__new__(cls, wnids)
        kept.asked_not_kept = set()
        return kept

    def __contains__(self, wnid: object) -> bool:
        found = super().__contains__(wnid)
        if not found and isinstance(wnid, str):
            self.asked_not_kept.add(wnid)
        return found


def wanted_parts(wnids: Iterable[str], split: str, wanted: Wanted, keep: frozenset[str] | None,
                 make: Callable[[str], Part]) -> Iterator[Part]:
    """The parts ``make(wnid)`` of ``wnids`` in sorted order that ``wanted`` wants (for validation, of ``keep``)."""
    for wnid in sorted(wnids):
        if split == "val" and keep is not None and wnid not in keep:
            continue
        part = make(wnid)
        if wanted(part):
            yield part


class Source:
    """An ImageNet source read for an upload. Subclasses set the attributes and yield parts.

    Attributes:
        layout: ``"kaggle"``, ``"imagefolder"``, ``"folders"``, ``"archives"``, ``"kaggle_zip"``, ``"kaggle_targz"``
            or ``"parquet"``.
        root: where it was read from (a path or URL), for messages and the report.
        names: WordNet id -> name of every category the source has.
        total_bytes: bytes of the source the upload reads, for the progress bar.
    """

    layout: str = ""
    root: str = ""
    names: dict[str, str]
    total_bytes: int = 0

    def parts(self, split: str, wanted: Wanted, keep: frozenset[str] | None = None, workdir: str = "") \
            -> Iterator[Part]:
        """The parts of ``split`` (``"train"`` or ``"val"``; for val only the categories in ``keep``), in reading
        order, each asked of ``wanted`` before it is read; only the wanted ones are yielded. ``workdir`` is the
        upload's scratch folder, where a source read as a stream may spool what it holds for later parts."""
        raise NotImplementedError

    def ready(self, wait: bool = True) -> bool:
        """Whether the checks the source runs in the background have ended (the official validation tar's labels
        are checked while the first training categories are read), raising the
        :class:`~alexnet.errors.LayoutError` they found; with ``wait``, wait for them to end. The upload publishes
        no part before this has returned True."""
        return True

    def close(self) -> None:
        """Release what the source holds open (files, scratch space, checks running in the background)."""
