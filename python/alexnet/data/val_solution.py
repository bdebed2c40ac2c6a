"""The labels of ImageNet's validation images in Kaggle's ``LOC_val_solution.csv``, wherever the file and the images
are: its rows read from text lines (:func:`read_val_solution`), each validation image found labelled by a training
category (:func:`label_val_images`), and an image it does not label refused (:func:`unlabelled_error`), so that
nothing is uploaded half-labelled. The extracted tree (:mod:`alexnet.data.imagenet`), Kaggle's zip
(:mod:`alexnet.data.kaggle_zip`) and its earlier tar.gz (:mod:`alexnet.data.kaggle_targz`) read it alike.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from typing import TypeVar

from ..checks import some_names
from ..errors import LayoutError

T = TypeVar("T")

VAL_SOLUTION_FILE = "LOC_val_solution.csv"


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

    ``LayoutError`` when a label is not a training category, a listed image is missing, or an image is not listed
    (:func:`unlabelled_error`): nothing is uploaded half-labelled.
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
            f"{some_names(missing)}. Restore them, or remove the solution file to train without validation."
        )
    unlabelled = len(on_disk) - len(labelled)
    if unlabelled > 0:
        raise unlabelled_error(unlabelled, sorted(set(on_disk) - {image_id for image_id, _ in solution}),
                               val_where, solution_where)
    return labelled


def unlabelled_error(count: int, examples: list[str], val_where: str, solution_where: str) -> LayoutError:
    """The error for ``count`` validation images of ``val_where`` that ``solution_where`` does not label: the two are
    not of one release (a complete download labels every image), and nothing is uploaded half-labelled."""
    shown = f", e.g. {some_names(examples)}" if examples else ""
    return LayoutError(f"{count} validation images in {val_where} are not in {solution_where}{shown}: they are not "
                       f"of the same release; use the {VAL_SOLUTION_FILE} that goes with them, or remove those images "
                       "(no validation image was uploaded)")
