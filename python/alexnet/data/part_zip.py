"""A part's zip: the options it is packed with, the fingerprint an upload run again recognises it by, and its images
checked one by one (:func:`alexnet.data.images.check_image`) into a stored zip (:mod:`alexnet.storage.zipformat`).

:mod:`alexnet.data.packing` calls :func:`zip_images` in its packing threads and publishes the zip it writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..storage import layout
from ..storage.zipformat import crc32, stored_zip
from .images import MAX_PIXELS, check_image
from .parts import CRC_MISMATCH, NOT_A_FILE_NAME, Member, Part


@dataclass(frozen=True)
class Options:
    min_images: int
    resize: int | None
    quality: int
    retries: int
    max_pixels: int = MAX_PIXELS

    def settings(self, split: str) -> dict[str, Any]:
        return {"format": layout.FORMAT_VERSION, "split": split, "resize": self.resize,
                "quality": self.quality if self.resize is not None else None, "max_pixels": self.max_pixels}


def fingerprint(part: Part, options: Options) -> str:
    """A hash of what the part's zip is made from: its identity in the source and the options."""
    digest = hashlib.sha256(json.dumps(options.settings(part.split), sort_keys=True).encode())
    digest.update(part.identity)
    return digest.hexdigest()


class Packed(NamedTuple):
    """A part's zip as written: its good images, the bad ones, its size and sha256."""

    images: int
    bad: list[dict[str, str]]
    size: int
    sha256: str


def zip_images(part: Part, members: Iterable[Member], dest: str, options: Options) -> Packed:
    """Write the good images of ``members`` to the zip ``dest``."""
    bad: list[dict[str, str]] = []
    good = 0
    names: set[str] = set()

    def reject(name: str, reason: str) -> None:
        bad.append({"category": part.wnid, "split": part.split, "file": name, "reason": reason})

    with stored_zip(dest) as zip_file:
        for name, data, reason, recorded in members:
            if name in names:
                reject(name, "duplicate file name in the category")
                continue
            names.add(name)
            if not layout.is_file_name(name):
                reject(name, NOT_A_FILE_NAME)
                continue
            if data is None:
                reject(name, reason)
                continue
            # the CRC the stored member needs is the one to check against the archive's (computed once)
            crc = crc32(data) if recorded is not None else None
            if crc is not None and crc != recorded:
                reject(name, CRC_MISMATCH)
                continue
            stored, reason = check_image(data, resize=options.resize, quality=options.quality,
                                         max_pixels=options.max_pixels)
            if stored is None:
                reject(name, reason)
                continue
            zip_file.add(name, stored, crc if stored is data else None)
            good += 1
    return Packed(good, bad, zip_file.size, zip_file.sha256)
