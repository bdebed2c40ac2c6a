"""Kaggle's tree in one compressed tar, ``imagenet_object_localization_patched2019.tar.gz``, read as a stream.

Kaggle's earlier download held its tree as this one tar.gz beside the ``LOC_*`` files, in its zip, and mirrors
still share it under that name. The tar holds the tree (``ILSVRC/Data/CLS-LOC/{train/<wnid>/, val/, test/}`` and
the annotations, which are not read); ``LOC_synset_mapping.txt`` (the categories' names) and
``LOC_val_solution.csv`` (the validation labels) are read from beside it: its folder, or the zip that holds it,
whose member is then read in place (:func:`~alexnet.data.zip_io.zip_member_stream`).

A gzip stream cannot seek, so the tar is read once, front to back, by the upload's reading thread. A category's
training images lie together in it: the category is handed to packing as soon as the stream leaves its folder
(a category found in two places is an error). The validation images share one folder: they are held by category,
in memory up to :data:`~alexnet.data.held.MEMORY_BUDGET` and the largest categories beyond it in spool files
in the scratch folder (up to the validation set's size, 6.4 GB for ImageNet), and packed once the stream ends,
after their labels are checked. An upload run again reads the whole stream again and decodes only the categories
that are not on the board.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from ..errors import LayoutError
from ..storage.zipformat import gunzip
from .archive_io import Files
from .classes import check_classes, class_ids, class_names
from .held import Held
from .imagenet import MAPPING_FILE, parse_names
from .parts import Member, Part, Source, Wanted, given, identity_of, is_image_name, member_read, not_an_image
from .tar_io import STREAM_ERRORS, stream_tar
from .val_solution import VAL_SOLUTION_FILE, read_val_solution, unlabelled_error
from .zip_io import ZipEntry, zip_member_stream

log = logging.getLogger(__name__)

KAGGLE_TARGZ = "imagenet_object_localization_patched2019.tar.gz"
_CLS_LOC = "Data/CLS-LOC/"


def is_kaggle_targz(name: str) -> bool:
    """Whether a file name is Kaggle's tar.gz (mirrors add a suffix, as in ``..._patched2019 (1).tar.gz``)."""
    return name.startswith(KAGGLE_TARGZ[:-len(".tar.gz")]) and name.endswith(".tar.gz")


def _read_image(name: str, size: int, read: Callable[[], bytes], label: str) -> Member:
    """The file ``name`` of the stream (``size`` bytes, as its header says), read by ``read`` unless it is not an
    image or says it holds more than an image may (:func:`~alexnet.data.images.too_many_bytes`)."""
    return member_read(name, size, read) if is_image_name(name) else Member(name, None, not_an_image(label))


class KaggleTarGzSource(Source):
    """Kaggle's tar.gz read as a stream: ``open_stream()`` opens it (a context manager of a binary file whose
    ``tell()`` counts the bytes of the source read so far), ``texts`` holds the ``LOC_*`` files found with it (file
    name -> (where, text)). :meth:`beside` and :meth:`in_zip` make one."""

    layout = "kaggle_targz"

    def __init__(self, files: Files, label: str, total_bytes: int,
                 open_stream: Callable[[], AbstractContextManager[Any]], texts: dict[str, tuple[str, str]]):
        self.files, self.open_stream, self.total_bytes = files, open_stream, total_bytes
        self.root = self.label = label
        self.names = class_names()
        if MAPPING_FILE in texts:
            where, text = texts[MAPPING_FILE]
            mapping = parse_names(text.splitlines())
            check_classes(mapping, where, strict=True)
            self.names = {**self.names, **mapping}
        self.solution: dict[str, str] = {}
        self.solution_where = texts.get(VAL_SOLUTION_FILE, (VAL_SOLUTION_FILE, ""))[0]
        if VAL_SOLUTION_FILE in texts:
            self.solution = dict(read_val_solution(io.StringIO(texts[VAL_SOLUTION_FILE][1]), self.solution_where))
        else:
            log.warning("%s has no %s with it: its validation images are left out; put that file beside it to "
                        "upload them", self.label, VAL_SOLUTION_FILE)
        self.held: Held | None = None
        self.val_found: dict[str, list[tuple[str, int]]] = {}
        self.train_found: set[str] = set()
        self.index = {w: k for k, w in enumerate(class_ids())}  # Held keys a category by its label

    @classmethod
    def beside(cls, files: Files, folder: str, name: str) -> KaggleTarGzSource:
        """The tar.gz ``name`` in ``folder``, with the ``LOC_*`` files beside it."""
        path = f"{folder}/{name}"
        present = set(files.names(folder))
        texts = {text: (files.url(f"{folder}/{text}"),
                        files.read(f"{folder}/{text}", 0, files.size(f"{folder}/{text}")).decode("utf-8", "replace"))
                 for text in (MAPPING_FILE, VAL_SOLUTION_FILE) if text in present}
        return cls(files, files.url(path), files.size(path), lambda: files.open_stream(path), texts)

    @classmethod
    def in_zip(cls, files: Files, path: str, entry: ZipEntry, texts: dict[str, tuple[str, str]]) -> KaggleTarGzSource:
        """The tar.gz held by the zip at ``path`` as its member ``entry`` (Kaggle's earlier zip), read without
        unzipping, with the ``LOC_*`` files ``texts`` found in the zip."""
        return cls(files, f"{files.url(path)}: {entry.name}", entry.compressed,
                   lambda: zip_member_stream(files, path, entry), texts)

    def parts(self, split: str, wanted: Wanted, keep: frozenset[str] | None = None, workdir: str = "") \
            -> Iterator[Part]:
        if split == "train":
            yield from self._stream(wanted, workdir)
            return
        if self.held is None:  # the stream is read by the training split; read it now if it was not
            for _ in self._stream(lambda part: False, workdir):
                pass
        held = self.held
        assert held is not None
        index = self.index
        for wnid in sorted(self.val_found):
            found = self.val_found[wnid]
            if keep is not None and wnid not in keep:
                held.take(index[wnid])
                continue
            part = Part(wnid, "val", identity_of(found, "kaggle-targz", "val"), 0,
                        partial(held.take, index[wnid]), count=len(found))
            if wanted(part):
                yield part
            else:
                held.take(index[wnid])

    def _stream(self, wanted: Wanted, workdir: str) -> Iterator[Part]:
        self.held = held = Held(workdir, "val")
        index = self.index
        current: str | None = None
        members: list[Member] = []
        sizes: list[tuple[str, int]] = []
        read_before = unlabelled = 0
        with self.open_stream() as raw:

            def finish() -> Iterator[Part]:
                nonlocal read_before
                if current is None:
                    return
                here = raw.tell()
                part = Part(current, "train", identity_of(sizes, "kaggle-targz", "train", current), here - read_before,
                            given(tuple(members)), count=len(members))
                read_before = here
                if wanted(part):
                    yield part

            try:
                with gunzip(raw) as unzipped:
                    for entry, read in stream_tar(unzipped):
                        if _CLS_LOC not in entry.name:
                            continue
                        rest = entry.name[entry.name.index(_CLS_LOC) + len(_CLS_LOC):].split("/")
                        if rest[0] == "train" and len(rest) == 3:
                            wnid, name = rest[1], rest[2]
                            if wnid != current:
                                yield from finish()
                                if wnid in self.train_found:
                                    raise LayoutError(
                                        f"{self.label}: the training images of {wnid} are not all together (found "
                                        f"again at {entry.name}); it cannot be read as a stream: extract it and "
                                        "upload the extracted folder")
                                check_classes({wnid: ""}, self.label, strict=True)
                                self.train_found.add(wnid)
                                current, members, sizes = wnid, [], []
                            sizes.append((name, entry.size))
                            members.append(_read_image(name, entry.size, read, self.label))
                        elif rest[0] == "val" and len(rest) == 2 and is_image_name(rest[1]) and self.solution:
                            image_id = os.path.splitext(rest[1])[0]
                            labelled = self.solution.get(image_id)
                            if labelled is None:
                                unlabelled += 1
                                continue
                            held.add(index.get(labelled, -1), _read_image(rest[1], entry.size, read, self.label))
                            self.val_found.setdefault(labelled, []).append((rest[1], entry.size))
                            held.spill()
                    yield from finish()
            except STREAM_ERRORS as err:
                raise LayoutError(f"{self.label} cannot be read to its end ({err}): it is damaged or cut short; "
                                  "download it again (the categories read so far are on the board and are skipped "
                                  "next time)") from None
        if unlabelled:
            raise unlabelled_error(unlabelled, [], self.label, self.solution_where)
        self._check_val()

    def _check_val(self) -> None:
        """The validation images found against the solution file: every label a training category, every listed
        image found (``LayoutError``, before any validation image is uploaded)."""
        if not self.solution:
            return
        strangers = sorted({w for w in self.val_found if w not in self.train_found})
        if strangers:
            raise LayoutError(f"{self.solution_where} labels validation images {strangers[0]}, but {self.label} has no "
                              f"training images of {strangers[0]}: use the {VAL_SOLUTION_FILE} that goes with it "
                              "(no validation image was uploaded)")
        found = sum(len(v) for v in self.val_found.values())
        if found < len(self.solution):
            raise LayoutError(f"{self.solution_where} lists {len(self.solution)} validation images, but {self.label} "
                              f"holds {found} of them: use the {VAL_SOLUTION_FILE} that goes with it, or move it "
                              "away to upload without validation (no validation image was uploaded)")
