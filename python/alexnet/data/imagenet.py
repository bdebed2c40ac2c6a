"""Read an ImageNet tree: its categories, the training files of each, and the labelled validation files.

Two layouts are read:

* Kaggle's ILSVRC download: ``ILSVRC/Data/CLS-LOC/{train/<wnid>/*.JPEG, val/*.JPEG}`` with
  ``LOC_synset_mapping.txt`` (``n01440764 tench, Tinca tinca``) and ``LOC_val_solution.csv``
  (``ImageId,PredictionString``; the first wnid of the prediction string is the label).
* A plain folder of ``<wnid>/`` folders (the full fall11 release), with names from a
  ``LOC_synset_mapping.txt``, ``synset_words.txt`` or ``words.txt`` next to them when there is one. It has no
  validation set.

Listing uses one ``os.scandir`` per folder and no per-file ``stat``, so the 1.28M files of ImageNet-1k are
listed in seconds.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..errors import LayoutError
from ..storage.layout import board_own_pin

log = logging.getLogger(__name__)

T = TypeVar("T")

IMAGE_EXTENSIONS: frozenset[str] = frozenset({".jpeg", ".jpg", ".png"})
MAPPING_FILE = "LOC_synset_mapping.txt"
VAL_SOLUTION_FILE = "LOC_val_solution.csv"
# Name files looked for, in this order, next to the <wnid>/ folders of the plain layout.
NAME_FILES: tuple[str, ...] = (MAPPING_FILE, "synset_words.txt", "words.txt")


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
        layout: ``"kaggle"`` or ``"folders"``.
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


def _is_image(name: str) -> bool:
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def _list_images(folder: str) -> list[str]:
    """Sorted names of the image files directly in ``folder`` (one scandir, no stat for regular entries)."""
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if _is_image(e.name) and e.is_file())


def _category_dirs(folder: str) -> list[str]:
    """Sorted names of the sub-folders of ``folder`` that can be categories (hidden and ``_*`` ones skipped)."""
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if not e.name.startswith((".", "_")) and e.is_dir())


def parse_names(lines: Iterable[str]) -> dict[str, str]:
    """``wnid -> name`` from the lines of a mapping file, ``<wnid><space or tab><name>`` (``LOC_synset_mapping.txt``,
    ``synset_words.txt``)."""
    names: dict[str, str] = {}
    for line in lines:
        parts = line.strip().split(None, 1)
        if parts:
            names[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return names


def _read_names(path: str) -> dict[str, str]:
    """``wnid -> name`` from the mapping file at ``path`` (see :func:`parse_names`)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_names(f)


def _read_categories(train_dir: str, names: dict[str, str], layout_hint: str) -> tuple[Category, ...]:
    wnids = _category_dirs(train_dir)
    if not wnids:
        raise LayoutError(
            f"No category folders in {train_dir}. Expected {layout_hint}: one sub-folder per category "
            "named by its WordNet id (e.g. n01440764/) holding its images."
        )
    categories = []
    for index, wnid in enumerate(wnids):
        folder = os.path.join(train_dir, wnid)
        if board_own_pin(wnid):
            raise LayoutError(f"Category folder {folder} is named as one of a board's own pins (categories, "
                              "bad_images, val-<category>): rename the folder.")
        files = _list_images(folder)
        if not files:
            raise LayoutError(
                f"Category folder {folder} holds no images (.JPEG, .jpg, .jpeg or .png). "
                "Add its images or remove the folder."
            )
        prefix = folder + os.sep
        categories.append(Category(wnid, names.get(wnid, ""), index, tuple(prefix + n for n in files)))
    return tuple(categories)


def _find_up(start: str, name: str, levels: int) -> str | None:
    """``start/name`` or the same name in one of the ``levels`` folders above ``start``, the nearest first."""
    folder = start
    for _ in range(levels + 1):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _kaggle_cls_loc(root: str) -> str | None:
    """The ``CLS-LOC`` folder when ``root`` is a Kaggle tree (or its ``ILSVRC``, ``Data`` or ``CLS-LOC`` folder)."""
    for sub in (("ILSVRC", "Data", "CLS-LOC"), ("Data", "CLS-LOC"), ("CLS-LOC",), ()):
        candidate = os.path.join(root, *sub)
        if os.path.isdir(os.path.join(candidate, "train")):
            return candidate
    return None


def read_val_solution(lines: Iterable[str], where: str) -> list[tuple[str, str]]:
    """``(ImageId, wnid)`` of each row of a ``LOC_val_solution.csv`` given as text lines (``where`` names it).

    The first wnid of a row's prediction string is the image's label; ``LayoutError`` for a wrong header or row.
    """
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    if "ImageId" not in header or "PredictionString" not in header:
        raise LayoutError(
            f"{where} has header {','.join(header) or '(none)'}; expected ImageId,PredictionString "
            "as in Kaggle's LOC_val_solution.csv."
        )
    rows = []
    for line, row in enumerate(reader, start=2):
        image_id = (row["ImageId"] or "").strip()
        prediction = (row["PredictionString"] or "").split()
        if not image_id or not prediction:
            raise LayoutError(
                f"{where}, line {line}: expected `<ImageId>,<wnid> x1 y1 x2 y2 ...`, got {row!r}. "
                "Fix or remove that line."
            )
        rows.append((image_id, prediction[0]))
    return rows


def label_val_images(on_disk: Mapping[str, T], solution: list[tuple[str, str]], known: set[str], val_where: str,
                     solution_where: str) -> list[tuple[T, str]]:
    """Each validation image of ``on_disk`` (ImageId -> what locates it) that ``solution`` labels, with its wnid.

    ``LayoutError`` when a label is not a training category or a listed image is missing; images the solution
    does not list are left out with a warning.
    """
    labelled: list[tuple[T, str]] = []
    missing: list[str] = []
    for image_id, wnid in solution:
        if wnid not in known:
            raise LayoutError(
                f"Validation image {image_id} is labelled {wnid} in {solution_where}, but {wnid} is not a "
                "training category (no folder train/" + wnid + "). Add that category's training images "
                "or remove its validation images from the solution file."
            )
        found = on_disk.get(image_id)
        if found is None:
            missing.append(image_id)
        else:
            labelled.append((found, wnid))
    if missing:
        raise LayoutError(
            f"{len(missing)} validation images listed in {solution_where} are missing from {val_where}, e.g. "
            f"{', '.join(missing[:3])}. Restore them, or remove the solution file to train without validation."
        )
    unlabelled = len(on_disk) - len(labelled)
    if unlabelled > 0:
        log.warning("%d images in %s are not in %s; they are left out", unlabelled, val_where, solution_where)
    return labelled


def _read_val(
    val_dir: str, solution: str | None, categories: tuple[Category, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    has_dir = os.path.isdir(val_dir)
    on_disk: dict[str, str] = {}
    if has_dir:
        for name in _list_images(val_dir):
            on_disk.setdefault(os.path.splitext(name)[0], os.path.join(val_dir, name))
    if solution is None:
        if on_disk:
            raise LayoutError(
                f"Validation folder {val_dir} holds {len(on_disk)} images but {VAL_SOLUTION_FILE}, which "
                "labels them, was not found next to ILSVRC/. Put the solution file there, or remove the val "
                "folder to train without validation."
            )
        return (), ()
    with open(solution, newline="", encoding="utf-8") as f:
        rows = read_val_solution(f, solution)
    where = val_dir if has_dir else f"{val_dir} (the folder does not exist)"
    labelled = sorted(label_val_images(on_disk, rows, {c.id for c in categories}, where, solution))
    return tuple(p for p, _ in labelled), tuple(w for _, w in labelled)


def read_imagenet(src: str | os.PathLike[str]) -> ImageNetTree:
    """Read an ImageNet tree in Kaggle's layout or as a plain folder of ``<wnid>/`` folders.

    Args:
        src: for Kaggle's layout, the folder holding ``ILSVRC/`` and the ``LOC_*`` files (or the ``ILSVRC``,
            ``Data`` or ``CLS-LOC`` folder inside it: the ``LOC_*`` files are then looked for up the tree);
            otherwise a folder whose sub-folders are named by WordNet id and hold the images.

    Returns:
        An :class:`ImageNetTree`: categories sorted by id with their global 0-based index and human name,
        the sorted training files of each, and the validation files with their wnids (Kaggle layout only).

    Raises:
        LayoutError: ``src`` is not a folder, holds no category folders, a category folder holds no images,
            a val folder has no ``LOC_val_solution.csv``, or a validation image is labelled with a wnid that is
            not a training category or is missing from the val folder.
    """
    root = os.path.abspath(os.path.expanduser(os.fspath(src)))
    if not os.path.isdir(root):
        what = "is not a folder" if os.path.exists(root) else "does not exist"
        raise LayoutError(f"ImageNet source {root} {what}. Pass the folder that holds ILSVRC/ or the <wnid>/ folders.")

    cls_loc = _kaggle_cls_loc(root)
    if cls_loc is None and os.path.isdir(os.path.join(root, "ILSVRC")):
        raise LayoutError(
            f"{root} holds ILSVRC/ but no ILSVRC/Data/CLS-LOC/train folder, so it has no training images. "
            "Extract the full Kaggle download (ILSVRC/Data/CLS-LOC/train/<wnid>/) there."
        )
    if cls_loc is not None:
        # The LOC files sit next to ILSVRC/, three levels above CLS-LOC.
        mapping = _find_up(cls_loc, MAPPING_FILE, 3)
        if mapping is None:
            log.warning("%s not found near %s: category names are left empty", MAPPING_FILE, cls_loc)
        names = _read_names(mapping) if mapping else {}
        categories = _read_categories(
            os.path.join(cls_loc, "train"), names, "Kaggle's ILSVRC/Data/CLS-LOC/train/<wnid>/ layout"
        )
        solution = _find_up(cls_loc, VAL_SOLUTION_FILE, 3)
        val_files, val_labels = _read_val(os.path.join(cls_loc, "val"), solution, categories)
        tree = ImageNetTree(root, "kaggle", categories, val_files, val_labels)
    else:
        names = {}
        for name_file in NAME_FILES:
            path = os.path.join(root, name_file)
            if os.path.isfile(path):
                names = _read_names(path)
                break
        categories = _read_categories(
            root, names, "a folder of <wnid>/ folders, or Kaggle's layout with ILSVRC/Data/CLS-LOC/train"
        )
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


__all__ = ["Category", "ImageNetTree", "label_val_images", "read_imagenet", "read_val_solution"]
