"""An evaluation's counts class by class: which classes a model gets right, and what it takes each one for.

:class:`ClassCounts` holds, per class, its images, those whose most probable class was theirs and those whose label
was among the top k, and, kept sparse, each pair of a class and another class its images were taken for (at most one
pair an image: a model of 20,000 classes needs no 20,000 x 20,000 matrix). :func:`alexnet.alexnet_evaluate` fills it
batch by batch; :meth:`ClassCounts.tables` gives what the evaluation returns: ``per_class`` (one record per class
that has images: its counts, accuracies and the class it is most often taken for) and ``confusions`` (one record per
pair of a true class and a wrong top-1 prediction, the most frequent first). Workers that scored shares of the same
validation images send these two tables; :meth:`ClassCounts.from_tables` reads them back, and the shares add up
(:meth:`ClassCounts.add`) to the counts of the whole, from which the tables are made again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AlexnetError


@dataclass
class ClassCounts:
    """Per class ``i``: ``images[i]`` counted, ``top1[i]`` whose most probable class was ``i``, ``topk[i]`` whose
    label was among the ``k`` most probable; ``wrong[(i, j)]``: images of class ``i`` whose most probable class was
    ``j`` (another). The wrong pairs are kept sparse: at most one per image, however many classes the model has."""

    images: np.ndarray
    top1: np.ndarray
    topk: np.ndarray
    wrong: dict[tuple[int, int], int] = field(default_factory=dict)

    @classmethod
    def empty(cls, classes: int) -> ClassCounts:
        """No image counted yet, for a model of ``classes`` outputs."""
        images, top1, topk = (np.zeros(classes, dtype=np.int64) for _ in range(3))
        return cls(images, top1, topk)

    @property
    def classes(self) -> int:
        """The number of classes (the model's outputs)."""
        return int(self.images.shape[0])

    @property
    def top1_correct(self) -> int:
        """Images whose label was the most probable class."""
        return int(self.top1.sum())

    @property
    def topk_correct(self) -> int:
        """Images whose label was among the ``k`` most probable classes."""
        return int(self.topk.sum())

    def count(self, probabilities: np.ndarray, labels: np.ndarray, k: int) -> None:
        """Count a batch: ``probabilities`` ``[images, classes]``, ``labels`` ``[images]``. Ties go to the lower
        class index, for the top 1 and the top ``k`` alike."""
        if probabilities.shape[1] != self.classes:
            raise AlexnetError(f"internal: {probabilities.shape[1]} probabilities per image for {self.classes} "
                               "classes.")
        order = np.argsort(-probabilities, axis=1, kind="stable")[:, :k]
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        predicted = order[:, 0]
        right = predicted == labels
        np.add.at(self.images, labels, 1)
        np.add.at(self.top1, labels[right], 1)
        np.add.at(self.topk, labels[np.any(order == labels[:, None], axis=1)], 1)
        pairs, counts = np.unique(labels[~right] * self.classes + predicted[~right], return_counts=True)
        for pair, n in zip(pairs.tolist(), counts.tolist(), strict=True):
            key = divmod(pair, self.classes)
            self.wrong[key] = self.wrong.get(key, 0) + n

    def add(self, other: ClassCounts) -> ClassCounts:
        """The counts of both (shares of different images)."""
        if other.classes != self.classes:
            raise AlexnetError(f"internal: counts of {other.classes} classes added to counts of {self.classes}.")
        wrong = dict(self.wrong)
        for key, n in other.wrong.items():
            wrong[key] = wrong.get(key, 0) + n
        return ClassCounts(self.images + other.images, self.top1 + other.top1, self.topk + other.topk, wrong)

    def tables(self, class_ids: Sequence[str], class_names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """``per_class`` and ``confusions``, naming classes by ``class_ids`` (WordNet ids) and ``class_names``.

        ``per_class``: per class with images, by index: ``index``, ``id``, ``name``, ``images``, ``top1_correct``,
        ``top5_correct`` (among the top k), ``top1_accuracy``, ``top5_accuracy``, ``confused_with`` (the id of the
        class its images were most often taken for, the lower index on a tie; ``""`` when none was wrong) and
        ``confused_images`` (how many were). ``confusions``: per pair of a class and another class that was its
        images' most probable class, the most images first (then by index): ``index``, ``id``, ``name``,
        ``predicted_index``, ``predicted_id``, ``predicted_name`` and ``images``.
        """
        if len(class_ids) != self.classes or len(class_names) != self.classes:
            raise AlexnetError(f"internal: {len(class_ids)} ids and {len(class_names)} names for {self.classes} "
                               "classes.")
        pairs = sorted(self.wrong.items(), key=lambda item: (-item[1], item[0]))
        most: dict[int, tuple[int, int]] = {}  # class -> (predicted, images): the first of its pairs in that order
        for (true, predicted), n in pairs:
            most.setdefault(true, (predicted, n))
        per_class = []
        for index in np.flatnonzero(self.images).tolist():
            count, right, near = int(self.images[index]), int(self.top1[index]), int(self.topk[index])
            confused, confused_images = most.get(index, (None, 0))
            per_class.append({
                "index": index, "id": str(class_ids[index]), "name": str(class_names[index]), "images": count,
                "top1_correct": right, "top5_correct": near, "top1_accuracy": right / count,
                "top5_accuracy": near / count,
                "confused_with": "" if confused is None else str(class_ids[confused]),
                "confused_images": confused_images,
            })
        confusions = [{
            "index": true, "id": str(class_ids[true]), "name": str(class_names[true]), "predicted_index": predicted,
            "predicted_id": str(class_ids[predicted]), "predicted_name": str(class_names[predicted]), "images": n,
        } for (true, predicted), n in pairs]
        return {"per_class": per_class, "confusions": confusions}

    @classmethod
    def from_tables(cls, classes: int, per_class: Sequence[Mapping[str, Any]],
                    confusions: Sequence[Mapping[str, Any]]) -> ClassCounts:
        """The counts :meth:`tables` described (as a worker of a Spark evaluation sends them)."""
        counts = cls.empty(classes)
        for row in per_class:
            index = int(row["index"])
            counts.images[index] += int(row["images"])
            counts.top1[index] += int(row["top1_correct"])
            counts.topk[index] += int(row["top5_correct"])
        wrong = np.zeros(classes, dtype=np.int64)
        for row in confusions:
            key = (int(row["index"]), int(row["predicted_index"]))
            counts.wrong[key] = counts.wrong.get(key, 0) + int(row["images"])
            wrong[key[0]] += int(row["images"])
        unequal = np.flatnonzero(counts.images != counts.top1 + wrong)
        if unequal.size:
            index = int(unequal[0])
            raise AlexnetError(f"the counts of class {class_ids_of(per_class, index)} do not add up: "
                               f"{counts.images[index]} images, but {counts.top1[index]} right and {wrong[index]} "
                               "taken for other classes.")
        return counts


def class_ids_of(per_class: Sequence[Mapping[str, Any]], index: int) -> str:
    """The id a table gives class ``index`` (its index when no row names it)."""
    return next((str(row["id"]) for row in per_class if int(row["index"]) == index), str(index))
