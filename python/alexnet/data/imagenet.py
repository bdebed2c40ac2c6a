"""Read an ImageNet tree: its categories, the training files of each, and the labelled validation files.

Three layouts are read:

* Kaggle's ILSVRC download: ``ILSVRC/Data/CLS-LOC/{train/<wnid>/*.JPEG, val/*.JPEG}`` with
  ``LOC_synset_mapping.txt`` (``n01440764 tench, Tinca tinca``) and ``LOC_val_solution.csv``
  (``ImageId,PredictionString``; the first wnid of the prediction string is the label).
* torchvision's ``ImageFolder`` tree (``imagefolder``): ``train/<wnid>/*.JPEG`` and ``val/<wnid>/*.JPEG``, a
  validation image labelled by its folder (what PyTorch's ``valprep.sh`` makes of ImageNet's validation images).
* A plain folder of ``<wnid>/`` folders (the full fall11 release). It has no validation set.

Names come from a ``LOC_synset_mapping.txt`` (or, beside category folders, a ``synset_words.txt`` or
``words.txt``) when there is one; ids it does not name, or all of them without one, are named from the 1000
ILSVRC2012 classes the package ships (:mod:`alexnet.data.classes`), and left empty when they are none of these.

A category folder's images are the ``.JPEG``, ``.jpg``, ``.jpeg`` and ``.png`` files directly in it. What else it
holds is left out with one warning per kind (:class:`~alexnet.data.folders.LeftOut`): images in other formats, other
files, sub-folders; hidden files are left out without a word.

Category folders are listed by :mod:`alexnet.data.folders`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..checks import count_text, some_names
from ..errors import LayoutError
from ..storage.layout import board_own_pin
from ..storage.location import home_expanded
from .classes import class_names
from .folders import MAPPING_FILE, NAME_FILES, LeftOut
from .tree_files import TreeFiles
from .val_solution import VAL_SOLUTION_FILE, label_val_images, read_val_solution

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Category:
    """One ImageNet category.

    Attributes:
        id: WordNet id, e.g. ``"n01440764"``.
        name: human name from the mapping file, ``""`` when unknown.
        index: global 0-based label: the position of ``id`` in the id-sorted list of categories.
        files: absolute paths of the training images, sorted.
    """

    id: str
    name: str
    index: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class ImageNetTree:
    """An ImageNet tree as read by :func:`read_imagenet`.

    Attributes:
        root: absolute path of the folder that was read.
        layout: ``"kaggle"``, ``"imagefolder"`` or ``"folders"``.
        categories: the categories, sorted by id (so ``categories[i].index == i``).
        val_files: absolute paths of the validation images, sorted; empty when there is no validation set.
        val_labels: the wnid of each validation image.
    """

    root: str
    layout: str
    categories: tuple[Category, ...]
    val_files: tuple[str, ...] = ()
    val_labels: tuple[str, ...] = ()

    @property
    def num_images(self) -> int:
        """Number of training images over all categories."""
        return sum(len(c.files) for c in self.categories)

    def training_files(self) -> tuple[list[str], list[int]]:
        """Every training file, category by category, and its global label."""
        return [f for c in self.categories for f in c.files], [c.index for c in self.categories for _ in c.files]


def parse_names(lines: Iterable[str]) -> dict[str, str]:
    """``wnid -> name`` from the lines of a mapping file, ``<wnid><space or tab><name>`` (``LOC_synset_mapping.txt``,
    ``synset_words.txt``)."""
    names: dict[str, str] = {}
    for line in lines:
        parts = line.strip().split(None, 1)
        if parts:
            names[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return names


def _read_names(files: TreeFiles, path: str) -> dict[str, str]:
    """``wnid -> name`` from the mapping file at ``path`` (see :func:`parse_names`)."""
    return parse_names(files.text(path))


def _read_categories(files: TreeFiles, train_dir: str, names: dict[str, str], layout_hint: str) \
        -> tuple[Category, ...]:
    """The categories of ``train_dir``, named from ``names`` or else the shipped ILSVRC2012 names; what their
    folders hold that is not read is said in a warning."""
    wnids = files.folders(train_dir)
    if not wnids:
        raise LayoutError(
            f"No category folders in {train_dir}. Expected {layout_hint}: one sub-folder per category "
            "named by its WordNet id (e.g. n01440764/) holding its images."
        )
    shipped = class_names()
    left_out = LeftOut(train_dir)
    categories = []
    for index, wnid in enumerate(wnids):
        folder = files.join(train_dir, wnid)
        if board_own_pin(wnid):
            raise LayoutError(f"Category folder {folder} is named as one of a board's own pins (categories, "
                              "bad_images, val-<category>): rename the folder.")
        listing = files.listing(folder)
        if not listing.images:
            held = listing.held()
            raise LayoutError(
                f"Category folder {folder} holds no images (.JPEG, .jpg, .jpeg or .png)"
                + (f": it holds {held}. " if held else ". ") + "Add its images or remove the folder."
            )
        left_out.add(wnid, listing)
        prefix = files.join(folder, "")
        name = names[wnid] if wnid in names else shipped.get(wnid, "")
        categories.append(Category(wnid, name, index, tuple(prefix + n for n in listing.images)))
    left_out.warn()
    return tuple(categories)


def unnamed(ids: Iterable[str], mapping: str, near: str, beside: str) -> None:
    """Warn of the categories (by id) left without a name when no mapping file was found: those whose ids are not
    among the ILSVRC2012 classes the package ships (the others are named from it)."""
    shipped = class_names()
    unknown = [i for i in ids if i not in shipped]
    if unknown:
        log.warning("%s not found near %s: the names of %s (%s) are left empty, their ids being none of the 1000 "
                    "ILSVRC2012 classes whose names the package ships (the others are named from them); put %s "
                    "beside %s to name them", mapping, near, count_text(len(unknown), "category", "categories"),
                    some_names(unknown), mapping, beside)


def _find_up(files: TreeFiles, start: str, name: str, levels: int) -> str | None:
    """``start/name`` or the same name in one of the ``levels`` folders above ``start``, the nearest first."""
    folder = start
    for _ in range(levels + 1):
        candidate = files.join(folder, name)
        if files.isfile(candidate):
            return candidate
        parent = files.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _kaggle_cls_loc(files: TreeFiles, root: str) -> str | None:
    """The ``CLS-LOC`` folder when ``root`` is a Kaggle tree (or its ``ILSVRC``, ``Data`` or ``CLS-LOC`` folder)."""
    for sub in (("ILSVRC", "Data", "CLS-LOC"), ("Data", "CLS-LOC"), ("CLS-LOC",)):
        candidate = files.join(root, *sub)
        if files.isdir(files.join(candidate, "train")):
            return candidate
    if files.isdir(files.join(root, "train")) and (os.path.basename(root) == "CLS-LOC"
                                                   or _kaggles_val(files, root)):
        return root
    return None


def is_imagefolder(root: str, files: TreeFiles | None = None) -> bool:
    """Whether ``root`` (a local folder, or in ``files``) is torchvision's tree: a ``train/`` folder of category
    folders (a ``train/`` of images is a category named so, in a folder of category folders)."""
    files = files or TreeFiles()
    train = files.join(root, "train")
    return files.isdir(train) and bool(files.folders(train))


def _kaggles_val(files: TreeFiles, root: str) -> bool:
    """Whether ``root/val`` holds images directly, with a ``LOC_val_solution.csv`` to label them near ``root``: Kaggle's
    ``CLS-LOC`` folder under another name, not a ``train/``, ``val/<wnid>/`` tree."""
    val = files.join(root, "val")
    if not files.isdir(val) or _find_up(files, root, VAL_SOLUTION_FILE, 3) is None:
        return False
    return bool(files.listing(val).images)


def _read_names_beside(files: TreeFiles, folder: str, levels: int = 0) -> dict[str, str]:
    """``wnid -> name`` from the first name file of :data:`NAME_FILES` found in ``folder`` (or up to ``levels``
    folders above it); empty when there is none."""
    for name_file in NAME_FILES:
        path = _find_up(files, folder, name_file, levels)
        if path is not None:
            return _read_names(files, path)
    return {}


def _read_val(
    files: TreeFiles, val_dir: str, solution: str | None, categories: tuple[Category, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    has_dir = files.isdir(val_dir)
    on_disk: dict[str, str] = {}
    if has_dir:
        for name in files.listing(val_dir).images:
            on_disk.setdefault(os.path.splitext(name)[0], files.join(val_dir, name))
    if solution is None:
        if on_disk:
            raise LayoutError(
                f"Validation folder {val_dir} holds {len(on_disk)} images but {VAL_SOLUTION_FILE}, which "
                "labels them, was not found next to ILSVRC/. Put the solution file there, or remove the val "
                "folder to train without validation."
            )
        return (), ()
    rows = read_val_solution(files.text(solution), solution)
    where = val_dir if has_dir else f"{val_dir} (the folder does not exist)"
    labelled = sorted(label_val_images(on_disk, rows, {c.id for c in categories}, where, solution))
    return tuple(p for p, _ in labelled), tuple(w for _, w in labelled)


def _read_val_folders(files: TreeFiles, val_dir: str, categories: tuple[Category, ...]) \
        -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The validation images of a ``train/``, ``val/`` tree: each in ``val/<wnid>/``, labelled by its folder.

    ``LayoutError`` when a folder is not named as a training category, or when ``val/`` holds images directly
    (unlabelled); what the folders hold that is not read is said in a warning, as for the training folders.
    """
    if not files.isdir(val_dir):
        return (), ()
    top = files.listing(val_dir)
    if top.images:
        raise LayoutError(
            f"Validation folder {val_dir} holds {count_text(len(top.images), 'image')} directly "
            f"({some_names(top.images)}), which nothing labels: in this layout a validation image is labelled by its "
            "folder, val/<wnid>/. Move each into the folder of its category (PyTorch's valprep.sh does so for "
            f"ImageNet's validation images), or put Kaggle's {VAL_SOLUTION_FILE}, which labels them, beside train/ "
            "and val/."
        )
    known = {c.id for c in categories}
    folders = files.folders(val_dir)  # those that can be categories (a bucket's then listed 16 at a time)
    strangers = [f for f in folders if f not in known]
    if strangers:
        raise LayoutError(
            f"Validation folder {val_dir} holds {count_text(len(strangers), 'folder')} not named as a training "
            f"category ({some_names([f + '/' for f in strangers])}): a validation image is labelled by its folder, and "
            f"there is no train/{strangers[0]}/. Rename the folder to its category's, add that category's training "
            "images, or remove the folder."
        )
    left_out = LeftOut(val_dir)
    labelled: list[tuple[str, str]] = []
    for wnid in folders:
        folder = files.join(val_dir, wnid)
        listing = files.listing(folder)
        left_out.add(wnid, listing)
        labelled.extend((files.join(folder, name), wnid) for name in listing.images)
    left_out.warn()
    labelled.sort()
    return tuple(p for p, _ in labelled), tuple(w for _, w in labelled)


def read_imagenet(src: str | os.PathLike[str]) -> ImageNetTree:
    """Read an ImageNet tree in Kaggle's layout, as ``train/`` and ``val/`` folders of ``<wnid>/`` folders, or as
    a plain folder of ``<wnid>/`` folders.

    Args:
        src: for Kaggle's layout, the folder holding ``ILSVRC/`` and the ``LOC_*`` files (or the ``ILSVRC``,
            ``Data`` or ``CLS-LOC`` folder inside it: the ``LOC_*`` files are then looked for up the tree); for
            torchvision's ``ImageFolder`` tree, the folder holding ``train/<wnid>/`` and ``val/<wnid>/`` (a
            ``train/`` whose ``val/`` holds the images directly, with a ``LOC_val_solution.csv`` near, is Kaggle's
            ``CLS-LOC`` folder); otherwise a folder whose sub-folders are named by WordNet id and hold the images.

    Returns:
        An :class:`ImageNetTree`: categories sorted by id with their global 0-based index and human name (from
        the tree's name file, else the shipped ILSVRC2012 names, else empty), the sorted training files of each,
        and the validation files with their wnids (Kaggle's and the ``train/``, ``val/`` layouts only).

    Raises:
        LayoutError: ``src`` is not a folder, holds no category folders, a category folder holds no images,
            a val folder has no ``LOC_val_solution.csv``, a validation image is labelled with a wnid that is
            not a training category or is missing from the val folder, or, in the ``train/``, ``val/`` layout,
            ``val/`` holds images directly or a folder named as no training category.
    """
    root = os.path.abspath(home_expanded(os.fspath(src)))
    if not os.path.isdir(root):
        what = "is not a folder" if os.path.exists(root) else "does not exist"
        raise LayoutError(f"ImageNet source {root} {what}. Pass the folder that holds ILSVRC/, train/ and val/, or the "
                          "<wnid>/ folders.")
    return read_tree(TreeFiles(), root)


def read_tree(files: TreeFiles, root: str) -> ImageNetTree:
    """:func:`read_imagenet` of the folder ``root`` of ``files``: a local folder, or a bucket prefix whose objects
    are listed (:class:`~alexnet.data.tree_files.BucketTree`), its paths then URLs."""
    cls_loc = _kaggle_cls_loc(files, root)
    if cls_loc is None and files.isdir(files.join(root, "ILSVRC")):
        raise LayoutError(
            f"{root} holds ILSVRC/ but no ILSVRC/Data/CLS-LOC/train folder, so it has no training images. "
            "Extract the full Kaggle download (ILSVRC/Data/CLS-LOC/train/<wnid>/) there."
        )
    if cls_loc is not None:
        # The LOC files sit next to ILSVRC/, three levels above CLS-LOC.
        mapping = _find_up(files, cls_loc, MAPPING_FILE, 3)
        names = _read_names(files, mapping) if mapping else {}
        categories = _read_categories(
            files, files.join(cls_loc, "train"), names, "Kaggle's ILSVRC/Data/CLS-LOC/train/<wnid>/ layout"
        )
        if mapping is None:
            unnamed((c.id for c in categories), MAPPING_FILE, cls_loc, "ILSVRC/")
        solution = _find_up(files, cls_loc, VAL_SOLUTION_FILE, 3)
        val_files, val_labels = _read_val(files, files.join(cls_loc, "val"), solution, categories)
        tree = ImageNetTree(root, "kaggle", categories, val_files, val_labels)
    elif is_imagefolder(root, files):
        names = _read_names_beside(files, root)
        categories = _read_categories(
            files, files.join(root, "train"), names,
            "torchvision's ImageFolder layout, train/<wnid>/ and val/<wnid>/"
        )
        if not names:
            unnamed((c.id for c in categories), MAPPING_FILE, root, "train/")
        val_files, val_labels = _read_val_folders(files, files.join(root, "val"), categories)
        tree = ImageNetTree(root, "imagefolder", categories, val_files, val_labels)
    else:
        categories = _read_categories(files, root, _read_names_beside(files, root),
                                      "a folder of <wnid>/ folders, or Kaggle's layout with ILSVRC/Data/CLS-LOC/train")
        tree = ImageNetTree(root, "folders", categories)

    log.info(
        "ImageNet (%s layout) at %s: %d categories, %d training images, %d validation images",
        tree.layout,
        root,
        len(tree.categories),
        tree.num_images,
        len(tree.val_files),
    )
    return tree


__all__ = ["Category", "ImageNetTree", "read_imagenet", "read_tree"]
