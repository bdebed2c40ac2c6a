"""Kaggle's ImageNet download as it comes, ``imagenet-object-localization-challenge.zip``, read without unzipping.

The zip holds Kaggle's tree (``ILSVRC/Data/CLS-LOC/{train/<wnid>/, val/}``, ``LOC_synset_mapping.txt``,
``LOC_val_solution.csv``; the test images and the annotations are not read). Its central directory, at the end
of the file, says where every member lies; a category's members lie together, so each category is read as one
byte range (or a few) by the thread that packs it, and a category already on the board is not read at all.
Members are inflated here; their CRC is checked as the upload stores them. Kaggle's earlier zip, which holds the
tree as one tar.gz beside the ``LOC_*`` files, is read by :mod:`alexnet.data.kaggle_targz` (:func:`open_kaggle_zip`).
"""

from __future__ import annotations

import io
import logging
import os
from array import array
from collections.abc import Callable, Iterator
from functools import partial

from ..errors import LayoutError
from .archive_io import SMALL_MEMBERS_BLOCK, Buffer, Files
from .classes import check_classes, class_names
from .imagenet import MAPPING_FILE, parse_names, unnamed
from .kaggle_targz import KaggleTarGzSource, is_kaggle_targz
from .parts import (
    Member,
    Members,
    Part,
    Source,
    Wanted,
    identity_of,
    in_name_order,
    is_image_name,
    not_an_image,
    wanted_parts,
)
from .val_solution import VAL_SOLUTION_FILE, label_val_images, read_val_solution
from .zip_io import ZipEntry, ZipIndex, zip_index, zip_member, zip_text

log = logging.getLogger(__name__)

KAGGLE_ZIP = "imagenet-object-localization-challenge.zip"
_CLS_LOC = "ILSVRC/Data/CLS-LOC/"


def open_kaggle_zip(files: Files, path: str) -> Source:
    """Kaggle's zip at ``path``: its tree (:class:`KaggleZipSource`) or, in Kaggle's earlier zip, the tree in one
    tar.gz beside the ``LOC_*`` files (:meth:`~alexnet.data.kaggle_targz.KaggleTarGzSource.in_zip`)."""
    label = files.url(path)
    with files.open(path, SMALL_MEMBERS_BLOCK) as f:
        index = zip_index(f, label, _read)
    packed = None if any(_CLS_LOC in name for name in index.names) else \
        next((e for e in index if is_kaggle_targz(os.path.basename(e.name))), None)
    if packed is not None:
        texts = {os.path.basename(e.name): (f"{label}: {e.name}", zip_text(files.read(path, e.start, e.end), e.start,
                                                                            e, label))
                 for e in index if os.path.basename(e.name) in (MAPPING_FILE, VAL_SOLUTION_FILE)}
        return KaggleTarGzSource.in_zip(files, path, packed, texts)
    return KaggleZipSource(files, path, index)


def _read(name: str) -> bool:
    """Whether the upload reads the zip's file ``name``: the training and validation images (and what else lies in
    their folders), the ``LOC_*`` files it needs and the earlier zip's tar.gz; not the test images nor the
    annotations, half of the download's two million files."""
    if _CLS_LOC in name:
        return f"{_CLS_LOC}train/" in name or f"{_CLS_LOC}val/" in name
    base = name.rsplit("/", 1)[-1]
    return base in (MAPPING_FILE, VAL_SOLUTION_FILE) or is_kaggle_targz(base)


def _runs(entries: list[ZipEntry]) -> list[list[ZipEntry]]:
    """``entries`` (in file order) cut into runs that lie back to back in the zip."""
    runs: list[list[ZipEntry]] = []
    for entry in entries:
        if runs and runs[-1][-1].end == entry.start:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


class KaggleZipSource(Source):
    """Kaggle's zip at ``path``."""

    layout = "kaggle_zip"

    def __init__(self, files: Files, path: str, index: ZipIndex):
        self.files, self.path, self.index = files, path, index
        self.root = self.label = files.url(path)
        cls_loc = next((name[:name.index(_CLS_LOC) + len(_CLS_LOC)] for name in index.names if _CLS_LOC in name), None)
        if cls_loc is None:
            raise LayoutError(f"{self.label} holds no {_CLS_LOC}train/ folder: it is not Kaggle's ImageNet download "
                              f"({KAGGLE_ZIP})")
        top = cls_loc[:-len(_CLS_LOC)]
        # each category's files as their numbers in the index: 8 bytes each, not an object
        self.train: dict[str, array[int]] = {}
        val_on_disk: dict[str, int] = {}
        small: dict[str, ZipEntry] = {}
        for k, name in enumerate(index.names):
            rest = name[len(cls_loc):] if name.startswith(cls_loc) else None
            if rest is not None and rest.startswith("train/"):
                parts = rest.split("/")
                if len(parts) == 3:
                    self.train.setdefault(parts[1], array("q")).append(k)
                else:
                    log.warning("%s: %s is not in a category folder (train/<wnid>/): it is left out", self.label,
                                name)
            elif rest is not None and rest.startswith("val/") and is_image_name(rest):
                val_on_disk.setdefault(os.path.splitext(os.path.basename(rest))[0], k)
            elif name in (top + MAPPING_FILE, top + VAL_SOLUTION_FILE):
                small[os.path.basename(name)] = index[k]
        if not self.train:
            raise LayoutError(f"{self.label} holds no category folder under {cls_loc}train/: the zip is incomplete; "
                              "download it again")
        shipped = class_names()  # as the extracted tree, the names the package ships where the zip names none
        self.names = {wnid: shipped.get(wnid, "") for wnid in sorted(self.train)}
        if MAPPING_FILE in small:
            mapping = parse_names(self._text(small[MAPPING_FILE]).splitlines())
            self.names.update((wnid, name) for wnid, name in mapping.items() if wnid in self.names)
        else:
            unnamed(self.names, MAPPING_FILE, self.label, "ILSVRC/ in the zip")
        check_classes(self.names, self.label, strict=True)
        self.val: dict[str, array[int]] = {}
        if VAL_SOLUTION_FILE in small:
            where = f"{self.label}: {VAL_SOLUTION_FILE}"
            rows = read_val_solution(io.StringIO(self._text(small[VAL_SOLUTION_FILE])), where)
            for k, wnid in label_val_images(val_on_disk, rows, set(self.train), f"{self.label}: {cls_loc}val/", where):
                self.val.setdefault(wnid, array("q")).append(k)
        elif val_on_disk:
            raise LayoutError(f"{self.label} holds {len(val_on_disk)} validation images but no {VAL_SOLUTION_FILE} "
                              "to label them: it is incomplete; download it again")
        self.total_bytes = sum(index.record_bytes(k) for group in (*self.train.values(), *self.val.values())
                               for k in group)

    def _text(self, entry: ZipEntry) -> str:
        return zip_text(self.files.read(self.path, entry.start, entry.end), entry.start, entry, self.label)

    def _open(self, entries: list[ZipEntry]) -> Members:
        """The category's bytes asked for at once, a byte range for each run of members (see
        :meth:`~alexnet.data.archive_io.Files.read_ranges_ahead`), and its members made when they are packed."""
        runs = _runs(sorted(entries, key=lambda e: e.start))
        fetch = self.files.read_ranges_ahead(self.path, [(run[0].start, run[-1].end) for run in runs])
        return lambda: self._members(runs, fetch())

    def _members(self, runs: list[list[ZipEntry]], blobs: list[Buffer]) -> Iterator[Member]:
        """The members of ``runs`` (held in ``blobs``) in name order, each inflated only when it is reached, so that
        a category's images are not all held inflated together."""
        pending: list[tuple[str, Callable[[], Member]]] = []
        for run, blob in zip(runs, blobs, strict=True):
            for entry in run:
                name = os.path.basename(entry.name)
                if is_image_name(entry.name):
                    pending.append((name, partial(zip_member, blob, run[0].start, entry, self.label)))
                else:
                    pending.append((name, partial(Member, name, None, not_an_image(self.label))))
        return in_name_order(pending)

    def _part(self, wnid: str, split: str, numbers: array[int]) -> Part:
        entries = [self.index[k] for k in numbers]
        identity = identity_of([(e.name, e.crc) for e in entries], "kaggle-zip", split, sum(e.size for e in entries))
        return Part(wnid, split, identity, sum(e.end - e.start for e in entries),
                    lambda: self._open(entries), count=len(entries))

    def parts(self, split: str, wanted: Wanted, keep: frozenset[str] | None = None, workdir: str = "") \
            -> Iterator[Part]:
        groups = self.train if split == "train" else self.val
        yield from wanted_parts(groups, split, wanted, keep, lambda wnid: self._part(wnid, split, groups[wnid]))
