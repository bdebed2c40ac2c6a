"""The official ILSVRC2012 archives, read in place: the training tar of per-category tars, the validation tar and
the devkit that labels it.

* ``ILSVRC2012_img_train.tar`` holds one tar per category (``n01440764.tar``, ...), each holding that category's
  images. Its headers are indexed first, so each category's tar is read as one byte range, by the thread that
  packs it, and a category already on the board is not read at all. A training tar that cannot seek (compressed,
  ``.tar.gz``) is read front to back as a stream instead: a finished category's bytes are then read again, but
  not decoded.
* ``ILSVRC2012_img_val.tar`` holds the 50,000 validation images in one folder (``ILSVRC2012_val_00000001.JPEG``
  ...); ``data/ILSVRC2012_validation_ground_truth.txt`` in ``ILSVRC2012_devkit_t12.tar.gz`` gives each image's
  ILSVRC2012 id, in image-number order, and ``data/meta.mat`` maps those ids to WordNet ids and names (read with
  ``scipy.io.loadmat``, keeping the synsets without children: the 1000 classes). Each category's validation
  images are read as their byte ranges. The devkit is read, and the validation tar's headers (read one after
  another) are indexed and checked against its ground truth, while the first training categories are read and
  packed; no category is published before they have been.
"""

from __future__ import annotations

import io
import logging
import os
import re
import tarfile
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..checks import some_names
from ..errors import LayoutError
from ..storage.zipformat import gunzip
from .archive_io import LARGE_MEMBERS_BLOCK, Files
from .classes import check_classes, class_names
from .parts import Members, Part, Source, Wanted, given, identity_of, in_name_order, wanted_parts
from .tar_io import STREAM_ERRORS, TarEntry, copied_member, member_bytes, stream_tar, tar_index, tar_members

log = logging.getLogger(__name__)

TRAIN_TAR = "ILSVRC2012_img_train.tar"
VAL_TAR = "ILSVRC2012_img_val.tar"
DEVKIT = "ILSVRC2012_devkit_t12.tar.gz"
GROUND_TRUTH = "data/ILSVRC2012_validation_ground_truth.txt"
META = "data/meta.mat"
#: Names the training tar is recognised by (compressed copies are read as a stream).
TRAIN_NAMES = (TRAIN_TAR, f"{TRAIN_TAR}.gz")
_CATEGORY_TAR = re.compile(r"^(n\d{8})\.tar$")
_VAL_IMAGE = re.compile(r"^ILSVRC2012_val_(\d{8})\.[A-Za-z]+$")


@dataclass(frozen=True)
class Devkit:
    """What the devkit says: ILSVRC2012 id -> WordNet id, WordNet id -> name, and each validation image's id."""

    wnid_of: dict[int, str]
    names: dict[str, str]
    ground_truth: tuple[int, ...]


def _meta(data: bytes, where: str) -> tuple[dict[int, str], dict[str, str]]:
    import scipy.io

    try:
        synsets = scipy.io.loadmat(io.BytesIO(data), squeeze_me=True)["synsets"]
        leaves = [s for s in synsets.ravel() if int(s["num_children"]) == 0]
        wnid_of = {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in leaves}
        names = {str(s["WNID"]): str(s["words"]) for s in leaves}
    except (KeyError, ValueError, TypeError, IndexError, NotImplementedError) as err:
        raise LayoutError(f"{where} is not the devkit's meta.mat (a `synsets` struct with ILSVRC2012_ID, WNID, "
                          f"words and num_children): {type(err).__name__}: {err}; use ILSVRC2012's devkit") from None
    if not leaves:
        raise LayoutError(f"{where} lists no class (no synset without children); use the devkit of ILSVRC2012")
    return wnid_of, names


#: The most bytes a file of the devkit read by the upload may hold (each is read whole into memory).
_DEVKIT_FILE_BYTES = 64 << 20


def read_devkit(files: Files, path: str) -> Devkit:
    """The devkit at ``path``: its ``meta.mat`` and validation ground truth (``LayoutError`` when either is missing
    or unreadable)."""
    label = files.url(path)
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(files.read(path, 0, files.size(path))), mode="r:*") as tar:
            for member in tar:
                for wanted in (META, GROUND_TRUTH):
                    if member.isfile() and member.name.endswith(wanted):
                        if member.size > _DEVKIT_FILE_BYTES:  # not read into memory
                            raise LayoutError(f"{label}: its {member.name} says it holds {member.size:,} bytes, which "
                                              "is not ILSVRC2012's devkit (its files take a few megabytes at most); "
                                              "download the devkit again")
                        found[wanted] = member_bytes(tar, member)
    except (tarfile.TarError, EOFError, OSError) as err:
        said = str(err).splitlines()[0].rstrip(":")  # tarfile lists each compression it tried, a line each
        raise LayoutError(f"{label} cannot be read as a tar.gz ({said}): download the devkit again") from None
    missing = [m for m in (META, GROUND_TRUTH) if m not in found]
    if missing:
        raise LayoutError(f"{label} holds no {' and no '.join(missing)}: it is not ILSVRC2012's devkit "
                          "(ILSVRC2012_devkit_t12.tar.gz)")
    wnid_of, names = _meta(found[META], f"{label}: {META}")
    lines = found[GROUND_TRUTH].decode("utf-8", "replace").split()
    try:
        truth = tuple(int(x) for x in lines)
    except ValueError:
        raise LayoutError(f"{label}: {GROUND_TRUTH} holds something other than class ids, one a line; download "
                          "the devkit again") from None
    unknown = sorted({t for t in truth if t not in wnid_of})
    if unknown:
        raise LayoutError(f"{label}: {GROUND_TRUTH} uses ids that meta.mat does not define ({unknown[:5]}); use "
                          "the devkit's own meta.mat")
    return Devkit(wnid_of, names, truth)


class _Stopped(Exception):
    """Reading an index was stopped: the upload has ended without it."""


class _Stoppable:
    """The file ``f``, whose reads raise :class:`_Stopped` once ``stop`` is set."""

    def __init__(self, f: Any, stop: threading.Event):
        self.f, self.stop = f, stop

    def read(self, size: int = -1) -> bytes:
        if self.stop.is_set():
            raise _Stopped
        return self.f.read(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)


def _twice(label: str, names: list[str], read_so_far: bool = False, each: str = "category's tar") -> LayoutError:
    """The error for a training tar (or the validation tar: ``each`` its ``"image"``) that holds a member more than
    once (an archive written to twice, or joined from two): which copy is the one cannot be told."""
    shown = some_names(names, 5)
    return LayoutError(f"{label} holds {shown} more than once: it is not the archive as released (written to twice, "
                       f"or two joined); download it again, or make a tar with one copy of each {each}"
                       + (" (the categories read so far are on the board and are skipped next time)" if read_so_far
                          else "; nothing was uploaded"))


class ArchivesSource(Source):
    """The official archives in ``folder``: the training tar, and for validation the val tar and the devkit."""

    layout = "archives"

    def __init__(self, files: Files, folder: str, train: str):
        self.files, self.root = files, files.url(folder)
        present = set(files.names(folder))
        self.train_path = f"{folder}/{train}"
        self.val_path = f"{folder}/{VAL_TAR}" if VAL_TAR in present else None
        devkit = f"{folder}/{DEVKIT}" if DEVKIT in present else None
        if self.val_path and devkit is None:
            raise LayoutError(f"{files.url(self.val_path)} has no {DEVKIT} beside it to label its images: put the "
                              "devkit in the same folder, or move the validation tar away to upload without validation")
        self.train_size = files.size(self.train_path)
        self.index: list[TarEntry] | None = None
        if not train.endswith(".gz"):
            with files.open(self.train_path, LARGE_MEMBERS_BLOCK) as f:
                self.index = tar_index(f, files.url(self.train_path), self.train_size)
            self._check_categories([os.path.basename(e.name) for e in self.index])
        # the devkit (scipy's import, 0.15 s) and the validation tar's headers (50,000, read one after another) are
        # read while the first training categories are read and packed
        self._stop = threading.Event()
        self._reading = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alexnet-labels")
        self._labels = self._reading.submit(self._read_labels, devkit)
        # the images and their headers: the bar is filled at the end (the validation images of excluded categories)
        self.total_bytes = self.train_size + (files.size(self.val_path) if self.val_path is not None else 0)

    def _read_labels(self, devkit_path: str | None) -> tuple[dict[str, str], dict[str, list[TarEntry]]]:
        """The class names (the devkit's, or the standard list's without it) and the validation images of each
        category."""
        if devkit_path is None:
            return class_names(), {}
        devkit = read_devkit(self.files, devkit_path)
        check_classes(devkit.names, self.files.url(devkit_path), strict=True)
        return devkit.names, self._label_val(self.val_path, devkit) if self.val_path is not None else {}

    @property
    def names(self) -> dict[str, str]:  # type: ignore[override]
        """The names of the classes (waiting for the devkit, read in the background)."""
        return self._labels.result()[0]

    @property
    def val(self) -> dict[str, list[TarEntry]]:
        """The validation tar's images of each category (waiting for its index, read in the background)."""
        return self._labels.result()[1]

    def ready(self, wait: bool = True) -> bool:
        if not wait and not self._labels.done():
            return False
        self._labels.result()
        return True

    def close(self) -> None:
        self._stop.set()
        self._reading.shutdown(wait=False)

    def _check_categories(self, names: list[str]) -> None:
        twice = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) < len(names) else []
        if twice:
            raise _twice(self.files.url(self.train_path), twice)
        wnids = {m.group(1): "" for m in map(_CATEGORY_TAR.match, names) if m}
        check_classes(wnids, self.files.url(self.train_path), strict=True)
        for other in sorted(n for n in names if not _CATEGORY_TAR.match(n)):
            log.warning("%s holds %s, which is not a category's tar (<wnid>.tar): it is left out; remove it from "
                        "the archive to silence this", self.files.url(self.train_path), other)

    def _label_val(self, val_path: str, devkit: Devkit) -> dict[str, list[TarEntry]]:
        label = self.files.url(val_path)
        with self.files.open_headers(val_path) as f:
            entries = tar_index(_Stoppable(f, self._stop), label, self.files.size(val_path))
        numbered = [(int(m.group(1)), e) for e in entries if (m := _VAL_IMAGE.match(os.path.basename(e.name)))]
        copies = Counter(number for number, _ in numbered)
        if len(copies) < len(numbered):  # sorted, two copies of an image would be compared as entries
            raise _twice(label, sorted({os.path.basename(e.name) for n, e in numbered if copies[n] > 1}), each="image")
        images = sorted(numbered, key=lambda pair: pair[0])
        for other in sorted(e.name for e in entries if not _VAL_IMAGE.match(os.path.basename(e.name))):
            log.warning("%s holds %s, which is not a validation image (ILSVRC2012_val_<8 digits>.JPEG): it is left "
                        "out", label, other)
        truth = devkit.ground_truth
        if len(truth) != len(images) or (images and images[-1][0] > len(truth)):
            raise LayoutError(
                f"{label} holds {len(images)} validation images but the ground truth of its devkit "
                f"({GROUND_TRUTH}) labels {len(truth)}: they are not of the same release. Use the devkit that goes "
                "with this validation tar (ILSVRC2012_devkit_t12.tar.gz); nothing was uploaded")
        groups: dict[str, list[TarEntry]] = {}
        for number, entry in images:
            groups.setdefault(devkit.wnid_of[truth[number - 1]], []).append(entry)
        return groups

    def _train_part(self, name: str, size: int, mtime: int, read_at: int) -> Part:
        wnid = name[:-4]

        def open_part() -> Members:
            label = f"{name} in {self.files.url(self.train_path)}"
            fetch = self.files.read_ranges_ahead(self.train_path, [(read_at, read_at + size)])
            return lambda: tar_members(fetch()[0], label)

        return Part(wnid, "train", identity_of([], "ilsvrc2012-train", name, size, mtime), size, open_part)

    def _stream(self, wanted: Wanted) -> Iterator[Part]:
        label = self.files.url(self.train_path)
        seen: set[str] = set()
        with self.files.open_stream(self.train_path) as raw, gunzip(raw) as unzipped:
            try:
                for entry, read in stream_tar(unzipped):
                    name = os.path.basename(entry.name)
                    if name in seen:
                        raise _twice(label, [name], read_so_far=True)
                    seen.add(name)
                    if not _CATEGORY_TAR.match(name):
                        self._check_categories([name])
                        continue
                    check_classes({name[:-4]: ""}, label, strict=True)
                    part = self._train_part(name, entry.size, entry.mtime, 0)
                    if wanted(part):
                        members = tar_members(read(), f"{name} in {label}")
                        part.open = given(members)
                        yield part
            except STREAM_ERRORS as err:
                raise LayoutError(f"{label} cannot be read to its end ({err}): it is damaged or cut short; download "
                                  "it again (the categories read so far are on the board and are skipped next "
                                  "time)") from None

    def parts(self, split: str, wanted: Wanted, keep: frozenset[str] | None = None, workdir: str = "") \
            -> Iterator[Part]:
        if split == "train":
            if self.index is None:
                yield from self._stream(wanted)
                return
            for entry in self.index:
                name = os.path.basename(entry.name)
                if _CATEGORY_TAR.match(name):
                    part = self._train_part(name, entry.size, entry.mtime, entry.offset)
                    if wanted(part):
                        yield part
            return
        yield from wanted_parts(self.val, split, wanted, keep, lambda wnid: self._val_part(wnid, self.val[wnid]))

    def _val_part(self, wnid: str, entries: list[TarEntry]) -> Part:
        assert self.val_path is not None
        path = self.val_path

        def open_part() -> Members:
            ordered = sorted(entries, key=lambda e: e.offset)
            fetch = self.files.read_ranges_ahead(path, [(e.offset, e.offset + e.size) for e in ordered])
            names = [os.path.basename(e.name) for e in ordered]
            return lambda: in_name_order((n, partial(copied_member, n, blob))
                                         for n, blob in zip(names, fetch(), strict=True))

        identity = identity_of([(os.path.basename(e.name), e.size) for e in entries], "ilsvrc2012-val", wnid)
        return Part(wnid, "val", identity, sum(e.size for e in entries), open_part, count=len(entries))
