"""ImageNet as people have it: the layout of a source is recognised from what it holds, and read in place.

================  =====================================================================================
layout            what ``source`` is (a local path, or a ``gs://``/``s3://`` URL)
================  =====================================================================================
``archives``      the official ILSVRC2012 archives: ``ILSVRC2012_img_train.tar``, with
                  ``ILSVRC2012_img_val.tar`` and ``ILSVRC2012_devkit_t12.tar.gz`` beside it for validation
                  (:mod:`alexnet.data.ilsvrc`); the folder that holds them, or the training tar itself
``kaggle_zip``    Kaggle's ``imagenet-object-localization-challenge.zip``, or the folder that holds it
                  (:mod:`alexnet.data.kaggle_zip`)
``kaggle_targz``  Kaggle's earlier download, its tree in ``imagenet_object_localization_patched2019.tar.gz`` with
                  the ``LOC_*`` files beside it, or the folder that holds them, or Kaggle's zip that holds them
                  (:mod:`alexnet.data.kaggle_targz`)
``parquet``       Hugging Face's ``imagenet-1k``: a folder of ``train-*.parquet`` and
                  ``validation-*.parquet`` shards, or the folder above its ``data/`` (:mod:`alexnet.data.parquet`)
``kaggle``        Kaggle's download extracted: ``ILSVRC/Data/CLS-LOC/train/<wnid>/``, ``LOC_*`` files
``imagefolder``   torchvision's ``ImageFolder`` tree: ``train/<wnid>/`` and ``val/<wnid>/`` folders of images, a
                  validation image labelled by its folder (as PyTorch's ``valprep.sh`` leaves them)
``folders``       a folder of ``<wnid>/`` folders of images
================  =====================================================================================

The last three are read file by file (:mod:`alexnet.data.imagenet`), from a local folder or, listed a folder at a
time, a bucket prefix (:mod:`alexnet.data.tree_files`). Anything else is one
``LayoutError`` that lists these layouts and what the source holds. A folder that holds several reads the
archives, then Kaggle's zip, the shards, the extracted tree, the ``train/``, ``val/`` tree and last the tar.gz
(:func:`_found`), with one warning naming the others.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from typing import NamedTuple

from ..checks import some_names
from ..errors import LayoutError
from ..storage.board import MANIFEST as BOARD_MANIFEST
from ..storage.location import bucket_path, location_kind
from .archive_io import Files
from .ilsvrc import DEVKIT, TRAIN_NAMES, VAL_TAR, ArchivesSource
from .imagenet import MAPPING_FILE, ImageNetTree, is_imagefolder, read_tree
from .kaggle_targz import KAGGLE_TARGZ, KaggleTarGzSource, is_kaggle_targz
from .kaggle_zip import KAGGLE_ZIP, open_kaggle_zip
from .parquet import ParquetSource, shard_folder
from .parts import Part, Source, Wanted, wanted_parts
from .tree_files import TreeFiles, tree_files
from .val_solution import VAL_SOLUTION_FILE

log = logging.getLogger(__name__)


class Layout(NamedTuple):
    """A layout read: its ``name``, ``what`` a source in it is, and where it holds its ``validation`` images (empty
    for a layout without a validation set)."""

    name: str
    what: str
    validation: str


_VAL_FOLDER = "ILSVRC/Data/CLS-LOC/val/"

#: The layouts read, as the error for an unrecognised source lists them.
LAYOUTS: tuple[Layout, ...] = (
    Layout("archives", f"the official ILSVRC2012 archives: {TRAIN_NAMES[0]} (with {VAL_TAR} and {DEVKIT} beside it "
                       "for validation), or the folder that holds them",
           f"{VAL_TAR} and {DEVKIT} beside {TRAIN_NAMES[0]}"),
    Layout("kaggle_zip", f"Kaggle's {KAGGLE_ZIP}, or the folder that holds it",
           f"the zip's {_VAL_FOLDER} folder and its {VAL_SOLUTION_FILE} (a complete download has both)"),
    Layout("kaggle_targz", f"Kaggle's earlier download, its tree in {KAGGLE_TARGZ} (with {MAPPING_FILE} and "
                           f"{VAL_SOLUTION_FILE} beside it), the folder that holds it, or the {KAGGLE_ZIP} that holds "
                           "them",
           f"the tar.gz's {_VAL_FOLDER} folder, with {VAL_SOLUTION_FILE} beside the tar.gz"),
    Layout("parquet", "Hugging Face's imagenet-1k: the folder of its train-*.parquet and validation-*.parquet shards "
                      "(or the folder above its data/)",
           "validation-*.parquet shards beside the train-*.parquet ones"),
    Layout("kaggle", f"Kaggle's download extracted: ILSVRC/Data/CLS-LOC/train/<wnid>/ with "
                     f"{MAPPING_FILE} and {VAL_SOLUTION_FILE}",
           f"{_VAL_FOLDER} with {VAL_SOLUTION_FILE} beside ILSVRC/"),
    Layout("imagefolder", "torchvision's ImageFolder tree: train/<wnid>/ and val/<wnid>/ folders of "
                          "images, as PyTorch's valprep.sh leaves ImageNet",
           "val/<wnid>/ beside train/, each validation image in the folder of its category"),
    Layout("folders", "a folder of <wnid>/ folders of images (e.g. n01440764/)", ""),
)

#: Where each layout holds its validation images, by name (empty for a layout without a validation set).
_VALIDATION = {entry.name: entry.validation for entry in LAYOUTS}


def no_validation(layout: str) -> str:
    """What to do when a source in ``layout`` gave no validation images: where its layout holds them, or, for a
    layout without a validation set, which layouts have one."""
    holds = _VALIDATION.get(layout)
    if holds:
        return (f"the {layout} layout holds them in {holds}: add them and run imagenet_upload() again (the "
                "categories already on the board are skipped)")
    held = " hold out a share of each category's images with `val_share` (0.1, say), or" if layout == "folders" else ""
    return ("the " + (f"{layout} layout has" if layout else "source has") + " no validation set: to have one,"
            f"{held} upload ImageNet in a layout that has it ({validation_files()})")


def validation_files() -> str:
    """Where each layout with a validation set holds it, on one line."""
    return "; ".join(f"{entry.name}: {entry.validation}" for entry in LAYOUTS if entry.validation)


def held_out(files: tuple[str, ...], share: float) -> frozenset[str]:
    """The ``files`` of one category held out as its validation images: each whose name hashes (SHA-256) below
    ``share`` of the range, so that an image's split depends on its name alone; at least one (the lowest hash) of a
    category of two images or more, and never every one."""
    if share <= 0 or len(files) < 2:
        return frozenset()
    ranked = sorted((hashlib.sha256(os.path.basename(p).encode()).digest(), p) for p in files)
    held = [p for digest, p in ranked if int.from_bytes(digest[:8], "big") < share * 2 ** 64]
    return frozenset(held[:len(files) - 1] or [ranked[0][1]])


class FolderSource(Source):
    """An extracted tree (Kaggle's, ``train/`` and ``val/`` folders, or a folder of ``<wnid>/`` folders), read file by
    file from a local folder or a bucket prefix (``files``, :mod:`alexnet.data.tree_files`); with ``val_share``, a
    tree without validation images holds out about that share of each category's images as its validation images
    (:func:`held_out`)."""

    def __init__(self, tree: ImageNetTree, val_share: float = 0.0, files: TreeFiles | None = None):
        self.tree, self.layout, self.root = tree, tree.layout, tree.root
        self.files = files or TreeFiles()
        self.names = {c.id: c.name for c in tree.categories}
        self.train = {c.id: tuple(c.files) for c in tree.categories}
        grouped: dict[str, list[str]] = {}  # a list per category: 50,000 images grouped in one pass
        for path, label in zip(tree.val_files, tree.val_labels, strict=True):
            grouped.setdefault(label, []).append(path)
        self.val: dict[str, tuple[str, ...]] = {label: tuple(paths) for label, paths in grouped.items()}
        if val_share and self.val:
            raise LayoutError(f"{tree.root} has validation images of its own ({len(tree.val_files)}): `val_share` "
                              "holds out validation images of a source without them; leave it out.")
        for wnid, images in list(self.train.items()):
            held = held_out(images, val_share)
            if held:
                self.train[wnid] = tuple(p for p in images if p not in held)
                self.val[wnid] = tuple(p for p in images if p in held)
        self.stats = {p: self.files.stat(p) for paths in (*self.train.values(), *self.val.values()) for p in paths}
        self.total_bytes = sum(size for size, _ in self.stats.values())

    def _part(self, wnid: str, split: str, paths: tuple[str, ...]) -> Part:
        ordered = sorted(paths)
        identity = "".join(f"\0{os.path.basename(p)}\0{self.stats[p][0]}\0{self.stats[p][1]}"
                           for p in ordered).encode()
        return Part(wnid, split, identity, sum(self.stats[p][0] for p in ordered),
                    lambda: self.files.open_files(paths), count=len(paths))

    def parts(self, split: str, wanted: Wanted, keep: frozenset[str] | None = None, workdir: str = "") \
            -> Iterator[Part]:
        groups = self.train if split == "train" else self.val
        yield from wanted_parts(groups, split, wanted, keep, lambda wnid: self._part(wnid, split, groups[wnid]))


def _unrecognised(files: Files, path: str, found: list[str], why: str = "") -> LayoutError:
    shown = some_names(found, 8)
    accepted = "\n".join(f"  - {entry.name}: {entry.what}" for entry in LAYOUTS)
    what = f"holds {shown}" if found else ("is empty" if files.fs.exists(path) else _missing(files, path))
    return LayoutError(f"ImageNet source {files.url(path)} {what}{why}: it is none of the layouts read, which are\n"
                       f"{accepted}\nPass one of these.")


def _missing(files: Files, path: str) -> str:
    """What is said of a source ``path`` that is not there: in a bucket that is not there either, that."""
    url = files.url(path)
    if location_kind(url) in ("gs", "s3"):
        bucket, _ = bucket_path(url)
        try:
            there = files.fs.exists(bucket)
        except Exception:  # unknown: the source alone is said
            there = True
        if not there:
            return f"does not exist, nor does its bucket {bucket!r}"
    return "does not exist"


def _found(files: Files, path: str, names: list[str], tree: TreeFiles) -> list[tuple[str, str, str]]:
    """The layouts whose files the folder ``path`` (holding ``names``; its files as an extracted tree's, ``tree``)
    holds, the one read first: the archives, Kaggle's zip, the parquet shards, the extracted tree (``ILSVRC``), the
    ``train/``, ``val/`` tree, then Kaggle's tar.gz (once extracted beside it, the tree is read). Each with what shows
    it, as said, and the path to read it from."""
    found: list[tuple[str, str, str]] = []
    train = next((n for n in TRAIN_NAMES if n in names), None)
    if train is not None:
        found.append(("archives", train, train))
    if KAGGLE_ZIP in names:
        found.append(("kaggle_zip", KAGGLE_ZIP, f"{path}/{KAGGLE_ZIP}"))
    shards = shard_folder(files, path)
    if shards is not None:
        found.append(("parquet", "data/" if shards != path else "its parquet shards", shards))
    if "ILSVRC" in names:
        found.append(("kaggle", "ILSVRC", path))
    if "train" in names and is_imagefolder(_tree_root(files, path), tree):
        found.append(("imagefolder", "train/", path))
    packed = next((n for n in names if is_kaggle_targz(n)), None)
    if packed is not None:
        found.append(("kaggle_targz", packed, packed))
    return found


def _refuse_an_empty_train(files: Files, path: str, names: list[str], tree: TreeFiles) -> None:
    """Refuse a ``train/`` folder that holds nothing beside a ``val/`` one: torchvision's tree not filled yet (or its
    images elsewhere), which was read as a folder of category folders and said as a category named ``train``."""
    if "train" not in names or "val" not in names:
        return
    train = tree.join(_tree_root(files, path), "train")
    if tree.isdir(train) and not tree.folders(train) and not tree.listing(train).images:
        raise LayoutError(f"{files.url(path)}/train is empty: torchvision's tree holds its training images in "
                          "train/<wnid>/ folders (and its validation images in val/<wnid>/); add them, or pass the "
                          "folder that holds ImageNet")


def _tree_root(files: Files, path: str) -> str:
    """The folder ``path`` of ``files`` as an extracted tree's files name it: a local path, or the bucket's URL."""
    return path if files.local else files.location


def _also_a_folder(files: Files, path: str) -> bool:
    """Whether the bucket object ``path`` (not an archive's name) is a folder too, objects being named under it: the
    marker some tools make of a folder, read as the folder."""
    name = path.rsplit("/", 1)[-1]
    archive = name in (*TRAIN_NAMES, VAL_TAR, DEVKIT) or name.endswith((".zip", ".parquet")) or is_kaggle_targz(name)
    return not files.local and not archive and bool(files.names(path))


def open_source(source: str | os.PathLike, val_share: float = 0.0) -> Source:
    """The ImageNet source at ``source`` (a path or a ``gs://``/``s3://`` URL), its layout recognised from what it
    holds. Indexes and labels are read here (the official validation tar's in the background: the upload publishes
    nothing before :meth:`~alexnet.data.parts.Source.ready`), so that a damaged or mislabelled source fails before
    any upload. ``val_share`` holds out validation images of an extracted tree that has none (:class:`FolderSource`);
    any other source given one is a ``LayoutError``."""
    read = _open_source(source, val_share)
    if val_share and not isinstance(read, FolderSource):
        read.close()
        raise LayoutError(f"`val_share` holds out validation images of a folder of category folders; "
                          f"{read.root} is in the {read.layout} layout, whose validation images are "
                          f"{_VALIDATION[read.layout]}: leave `val_share` out.")
    return read


def _open_source(source: str | os.PathLike, val_share: float) -> Source:
    files = Files.at(source)
    path = files.path()
    if files.isfile(path) and not _also_a_folder(files, path):
        folder, name = path.rsplit("/", 1) if "/" in path else ("", path)
        folder = folder or "/"
        if name in TRAIN_NAMES:
            return ArchivesSource(files, folder, name)
        if name.endswith(".zip"):
            return open_kaggle_zip(files, path)
        if name.endswith(".parquet") and shard_folder(files, folder):
            return ParquetSource(files, folder)
        if is_kaggle_targz(name):
            return KaggleTarGzSource.beside(files, folder, name)
        if name in (VAL_TAR, DEVKIT):
            which = "validation tar" if name == VAL_TAR else "devkit"
            raise LayoutError(f"{files.url(path)} is the official archives' {which}: pass the folder that holds the "
                              f"three archives, or {TRAIN_NAMES[0]} (the validation images are uploaded with the "
                              "training categories, from beside it)")
        raise _unrecognised(files, path, [name], " (a single file)")
    names = files.names(path)
    if BOARD_MANIFEST in names:
        raise LayoutError(f"{files.url(path)} is a board (what an upload writes, {BOARD_MANIFEST} in it), not "
                          "ImageNet: give the folder or archive of ImageNet as `source`, and this board as `board`.")
    tree = tree_files(files)  # listed as the reading asks: the folders read to recognise the layout, once
    found = _found(files, path, names, tree)
    if VAL_TAR in names and not any(layout == "archives" for layout, _, _ in found):
        raise LayoutError(f"{files.url(path)} holds {VAL_TAR} but no {TRAIN_NAMES[0]}: put the training tar beside "
                          "it (the validation images are uploaded with the training categories)")
    if len(found) > 1:
        log.warning("%s holds ImageNet in more than one layout: reading the %s layout (%s), leaving alone %s; to "
                    "read another, pass the path of its own file or folder, or move the others away",
                    files.url(path), found[0][0], found[0][1],
                    ", ".join(f"the {layout} layout ({shown})" for layout, shown, _ in found[1:]))
    layout, _, target = found[0] if found else ("", "", "")
    if layout == "archives":
        return ArchivesSource(files, path, target)
    if layout == "kaggle_zip":
        return open_kaggle_zip(files, target)
    if layout == "parquet":
        return ParquetSource(files, target)
    if layout == "kaggle_targz":
        return KaggleTarGzSource.beside(files, path, target)
    if not names or (files.local and not os.path.isdir(path)):
        raise _unrecognised(files, path, names)
    _refuse_an_empty_train(files, path, names, tree)
    try:
        return FolderSource(read_tree(tree, _tree_root(files, path)), val_share, tree)
    except LayoutError as err:
        if not str(err).startswith("No category folders"):
            raise
        raise _unrecognised(files, path, names) from None


__all__ = ["LAYOUTS", "FolderSource", "Layout", "Source", "no_validation", "open_source", "validation_files"]
