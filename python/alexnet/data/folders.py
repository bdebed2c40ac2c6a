"""A category folder of an extracted tree, listed: the images it holds and what else it holds, said once per kind
rather than dropped without a word (:mod:`alexnet.data.imagenet` reads the trees through it).

One ``os.scandir`` per folder and no per-file ``stat``, so that the 1.28M files of ImageNet-1k are listed in seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..checks import count_text, some_names

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS: frozenset[str] = frozenset({".jpeg", ".jpg", ".png"})
#: Image formats met in folders of photos that the upload does not read: a file with one of these extensions is
#: said to be an image to convert, not a stray file.
OTHER_IMAGE_EXTENSIONS: frozenset[str] = frozenset({
    ".webp", ".bmp", ".gif", ".tif", ".tiff", ".heic", ".heif", ".avif", ".jxl", ".jp2", ".jfif", ".ico", ".svg",
    ".dng", ".cr2", ".cr3", ".nef", ".arw", ".orf", ".rw2", ".raw",
})
MAPPING_FILE = "LOC_synset_mapping.txt"
# Name files looked for, in this order, next to the <wnid>/ folders of the plain layout.
NAME_FILES: tuple[str, ...] = (MAPPING_FILE, "synset_words.txt", "words.txt")


def _is_name_file(name: str) -> bool:
    return name.startswith("LOC_") or name in NAME_FILES


@dataclass
class Listing:
    """What a category folder holds, from one ``os.scandir`` (a ``stat`` only where the kernel does not say what an
    entry is): the ``images`` read, and what is left out: ``other_images`` (images in formats not read),
    ``others`` (files that are not images) and ``folders`` (sub-folders, whose files are not read). Hidden entries
    and the name files (``LOC_*``, ``synset_words.txt``, ``words.txt``) are in none of them. Names are sorted.

    A link that leads nowhere (to nothing, or round a loop) counts as what its name says: named as an image, it is an
    image, which cannot be read (the upload lists it among the bad images, with why, as any image it cannot read);
    otherwise, as a pipe, socket or device is, a file left out."""

    images: list[str]
    other_images: list[str]
    others: list[str]
    folders: list[str]

    def held(self) -> str:
        """What the folder holds besides images, as an error says it (empty when nothing)."""
        said = []
        if self.folders:
            shown = some_names([f + "/" for f in self.folders])
            said.append(f"{count_text(len(self.folders), 'sub-folder')} ({shown}), whose files are not read: move the "
                        "images up into the folder itself")
        if self.other_images:
            said.append(f"{count_text(len(self.other_images), 'image')} in a format not read "
                        f"({some_names(self.other_images)}): convert them to JPEG")
        if self.others:
            said.append(f"{count_text(len(self.others), 'file')} that {'is' if len(self.others) == 1 else 'are'} not "
                        f"an image ({some_names(self.others)})")
        return "; ".join(said)


def _kind(entry: os.DirEntry[str]) -> str:
    """What ``entry`` is: a ``file`` or a ``folder`` (itself or where its link leads), a link that leads ``nowhere``
    (to nothing, or round a loop) or ``other`` (a pipe, a socket, a device). A ``stat`` for links only."""
    try:
        if entry.is_file():
            return "file"
        if entry.is_dir():
            return "folder"
    except OSError:  # a link round a loop
        return "nowhere"
    return "nowhere" if entry.is_symlink() and not os.path.exists(entry.path) else "other"


def list_folder(folder: str) -> Listing:
    """What ``folder`` holds (see :class:`Listing`): one scandir, no stat for regular entries."""
    with os.scandir(folder) as entries:
        return classify((entry.name, _kind(entry)) for entry in entries if not entry.name.startswith("."))


def classify(entries: Iterable[tuple[str, str]]) -> Listing:
    """The :class:`Listing` of a folder's entries, each a name and what :func:`_kind` says it is (a bucket's
    objects are each a ``file``, the prefixes of their names ``folder`` s)."""
    images, other_images, others, folders = [], [], [], []
    for name, kind in entries:
        if name.startswith("."):
            continue
        extension = os.path.splitext(name)[1].lower()
        if extension in IMAGE_EXTENSIONS and kind in ("file", "nowhere"):
            images.append(name)
        elif kind == "folder":
            folders.append(name)
        elif _is_name_file(name):
            continue
        elif extension in OTHER_IMAGE_EXTENSIONS:
            other_images.append(name)
        else:
            others.append(name)
    return Listing(sorted(images), sorted(other_images), sorted(others), sorted(folders))


class LeftOut:
    """What the category folders of one folder hold that is not read, gathered as they are listed and said in one
    warning per kind (:meth:`warn`), so that nothing is dropped without a word."""

    def __init__(self, where: str):
        self.where = where
        self.other_images: list[str] = []
        self.others: list[str] = []
        self.folders: list[str] = []
        self.categories: dict[str, set[str]] = {"other_images": set(), "others": set(), "folders": set()}

    def add(self, category: str, listing: Listing) -> None:
        """What the folder of ``category`` holds besides its images."""
        for kind, names, suffix in (("other_images", listing.other_images, ""), ("others", listing.others, ""),
                                    ("folders", listing.folders, "/")):
            if names:
                getattr(self, kind).extend(f"{category}/{n}{suffix}" for n in names)
                self.categories[kind].add(category)

    def _in(self, kind: str) -> str:
        return f"in {count_text(len(self.categories[kind]), 'category folder')} of {self.where}"

    def warn(self) -> None:
        """One warning per kind of entry left out: how many, a few of them, why, and what to do."""
        if self.other_images:
            one = len(self.other_images) == 1
            log.warning("%s %s %s left out: %s in a format the upload does not read, only JPEG and PNG (%s): "
                        "convert %s to JPEG to have %s uploaded", count_text(len(self.other_images), "file"),
                        self._in("other_images"), "was" if one else "were", "an image" if one else "images",
                        some_names(self.other_images), "it" if one else "them", "it" if one else "them")
        if self.others:
            one = len(self.others) == 1
            log.warning("%s %s %s left out: %s (%s); only .JPEG, .jpg, .jpeg and .png files are read",
                        count_text(len(self.others), "file"), self._in("others"), "was" if one else "were",
                        "not an image file" if one else "not image files", some_names(self.others))
        if self.folders:
            log.warning("%s %s %s not read (%s): a category's images are read from its own folder, not from folders "
                        "inside it; move their images up into the category folder (under names of their own) to have "
                        "them uploaded", count_text(len(self.folders), "sub-folder"), self._in("folders"),
                        "was" if len(self.folders) == 1 else "were", some_names(self.folders))


def category_dirs(folder: str) -> list[str]:
    """Sorted names of the sub-folders of ``folder`` that can be categories (hidden and ``_*`` ones skipped)."""
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if not e.name.startswith((".", "_")) and e.is_dir())


__all__ = ["IMAGE_EXTENSIONS", "NAME_FILES", "LeftOut", "Listing", "category_dirs", "classify", "list_folder"]
