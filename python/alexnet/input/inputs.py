"""The ``data`` argument of training and the benchmark, normalised: files, global labels, validation.

``data`` is the result of ``imagenet_partition()`` (files with their global ``label`` and ``num_classes``),
or a list made by hand with ``image``, ``category`` and ``categories``, as the original r-tensorflow/alexnet
took it (a label is then the position of the image's category among the sorted ``categories``). An ``image`` that is
a category's zip (a board's pin, as pins' ``pin_download()`` gives it) stands for every file it holds, extracted once
into the user cache (:mod:`alexnet.storage.given_zips`). Values may
be lists, tuples, numpy arrays or, for one element, a bare string or number, as R sends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checks import as_int, as_ints, as_strings, entry
from ..errors import AlexnetError


@dataclass
class TrainingData:
    """The images of ``data`` and their labels, normalised."""

    files: list[str]
    labels: list[int]
    num_classes: int
    categories: list[str]
    val_files: list[str] = field(default_factory=list)
    val_labels: list[int] = field(default_factory=list)
    #: The id and name of every output of the model, by label (``num_classes`` of each).
    class_ids: list[str] = field(default_factory=list)
    class_names: list[str] = field(default_factory=list)


def _data(key: str) -> str:
    """Entry ``key`` of ``data`` as messages name it (:func:`alexnet.checks.entry`: ``data["image"]``)."""
    return entry("data", key)


def _check_range(labels: Sequence[int], num_classes: int, name: str) -> None:
    bad = [v for v in labels if not 0 <= v < num_classes]
    if bad:
        raise AlexnetError(
            f"`{_data(name)}` has {len(bad)} value(s) outside 0..{num_classes - 1} (e.g. {bad[0]}): labels are "
            f"0-based indices below num_classes = {num_classes}."
        )


def _labels(data: Mapping[str, Any], files: list[str]) -> tuple[list[int], int, dict[str, int]]:
    """Labels of ``files``, the number of classes, and category -> label as far as ``data`` tells it."""
    category = as_strings(data.get("category"), _data("category"))
    if data.get("label") is not None:
        labels = as_ints(data["label"], _data("label"))
        if data.get("num_classes") is None:
            raise AlexnetError(
                "`data` has `label` but no `num_classes`: add the global number of classes, as "
                "imagenet_partition() does, or drop `label` to number the classes from `categories`."
            )
        num_classes = as_int(data["num_classes"], _data("num_classes"), minimum=1)
        mapping = dict(zip(category, labels, strict=True)) if len(category) == len(labels) else {}
        return labels, num_classes, mapping
    categories = as_strings(data.get("categories"), _data("categories"))
    if not categories:
        raise AlexnetError(f"`{_data('categories')}` is missing or empty: list the categories of the images.")
    if len(category) != len(files):
        raise AlexnetError(
            f"`{_data('image')}` has {len(files)} entries but `{_data('category')}` has {len(category)}: give one "
            "category per image."
        )
    mapping = {wnid: index for index, wnid in enumerate(sorted(set(categories)))}
    unknown = sorted(set(category) - set(mapping))
    if unknown:
        raise AlexnetError(
            f"Categories {unknown[:10]} of `{_data('category')}` are not in `{_data('categories')}`: add them there."
        )
    return [mapping[c] for c in category], len(mapping), mapping


def _val_labels(data: Mapping[str, Any], val_files: list[str], mapping: dict[str, int]) -> list[int]:
    if data.get("val_label") is not None:
        val_labels = as_ints(data["val_label"], _data("val_label"))
    elif data.get("val_category") is not None:
        val_category = as_strings(data["val_category"], _data("val_category"))
        unknown = sorted(set(val_category) - set(mapping))
        if unknown:
            raise AlexnetError(
                f"Validation categories {unknown[:10]} are not among the training categories: give "
                "`val_label` (global class indices) or drop those images."
            )
        val_labels = [mapping[c] for c in val_category]
    else:
        raise AlexnetError(f"`{_data('val_image')}` needs `val_label` or `val_category` for its labels.")
    if len(val_labels) != len(val_files):
        raise AlexnetError(
            f"`{_data('val_image')}` has {len(val_files)} entries but there are {len(val_labels)} validation "
            "labels: give one per image."
        )
    return val_labels


def _classes(data: Mapping[str, Any], num_classes: int, mapping: dict[str, int]) -> tuple[list[str], list[str]]:
    """The id and name of every class, by label: ``class_ids``/``class_names`` of ``data`` when given, else the
    categories ``data`` names (as ids and names), with the label's number for a label no image names."""
    ids, names = as_strings(data.get("class_ids")), as_strings(data.get("class_names"))
    if ids or names:
        names = names or ids
        ids = ids or names
        for name, values in (("class_ids", ids), ("class_names", names)):
            if len(values) != num_classes:
                raise AlexnetError(
                    f"`{_data(name)}` has {len(values)} entries but there are {num_classes} classes: give one per "
                    "class, in label order (as imagenet_partition() does), or leave it out."
                )
        return ids, names
    by_label = {label: wnid for wnid, label in mapping.items()}
    ids = [by_label.get(label, str(label)) for label in range(num_classes)]
    return ids, list(ids)


def training_data(data: Mapping[str, Any]) -> TrainingData:
    """Normalise ``data``: the result of ``imagenet_partition()``, or a hand-made ``image``/``category``/``categories``.

    With ``label`` and ``num_classes`` (a partition), labels are the global class indices. Without them
    (the hand-made form), a label is the position of the image's category in ``sorted(categories)`` and
    ``num_classes`` is the number of categories. Validation images come from ``val_image`` with
    ``val_label`` or ``val_category``. A zip among the images or validation images stands for the files it holds,
    each with its label (:func:`~alexnet.storage.given_zips.unzipped`). The classes' ids and names come from
    ``class_ids`` and ``class_names``
    (one per class, in label order) when given; otherwise the hand-made form's sorted categories serve as both,
    and a partition without them names the classes its images show, the others by their label's number.
    Every problem raises an :class:`AlexnetError` that names the field.
    """
    if isinstance(data, (list, tuple)) and not data:  # R's list()
        raise AlexnetError("`data` is empty: there are no images to train on. Give the result of "
                           "imagenet_partition(), or a dict/list with `image`, `category` and `categories`.")
    if not isinstance(data, Mapping):
        given = (f"{len(data)} values without names" if isinstance(data, (list, tuple))  # R's list(1, 2)
                 else f"a {type(data).__name__}")
        raise AlexnetError(
            f"`data` must be the result of imagenet_partition() or a dict/list with `image`, `category` and "
            f"`categories` named, not {given}."
        )
    files = as_strings(data.get("image"), _data("image"))
    if not files:
        raise AlexnetError(f"`{_data('image')}` is missing or empty: there are no images to train on.")
    labels, num_classes, mapping = _labels(data, files)
    if len(labels) != len(files):
        raise AlexnetError(
            f"`{_data('image')}` has {len(files)} entries but `{_data('label')}` has {len(labels)}: give one label per "
            "image."
        )
    _check_range(labels, num_classes, "label")
    val_files = as_strings(data.get("val_image"), _data("val_image"))
    val_labels = _val_labels(data, val_files, mapping) if val_files else []
    _check_range(val_labels, num_classes, "val_label")
    from ..storage.given_zips import unzipped

    files, labels = unzipped(files, labels, _data("image"))
    val_files, val_labels = unzipped(val_files, val_labels, _data("val_image"))
    class_ids, class_names = _classes(data, num_classes, mapping)
    return TrainingData(files, labels, num_classes, as_strings(data.get("categories")), val_files, val_labels,
                        class_ids, class_names)
