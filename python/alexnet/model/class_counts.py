"""An evaluation's counts class by class: which classes a model gets right, and what it takes each one for.

:class:`ClassCounts` holds the confusion matrix of top-1 predictions (true class by predicted class) and, per true
class, the images whose label is among the top k. :func:`alexnet.alexnet_evaluate` fills it batch by batch;
:meth:`ClassCounts.tables` gives what the evaluation returns: ``per_class`` (one record per class that has images:
its counts, accuracies and the class it is most often taken for) and ``confusions`` (one record per pair of a true
class and a wrong top-1 prediction, the most frequent first). Workers that scored shares of the same validation
images send these two tables; :meth:`ClassCounts.from_tables` reads them back, and the shares add up
(:meth:`ClassCounts.add`) to the counts of the whole, from which the tables are made again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import AlexnetError


@dataclass
class ClassCounts:
    """``confusion[i, j]``: images of class ``i`` whose most probable class was ``j``; ``topk[i]``: images of class
    ``i`` whose label was among the ``k`` most probable."""

    confusion: np.ndarray
    topk: np.ndarray

    @classmethod
    def empty(cls, classes: int) -> ClassCounts:
        """No image counted yet, for a model of ``classes`` outputs."""
        return cls(np.zeros((classes, classes), dtype=np.int64), np.zeros(classes, dtype=np.int64))

    @property
    def classes(self) -> int:
        """The number of classes (the model's outputs)."""
        return int(self.topk.shape[0])

    @property
    def images(self) -> int:
        """Images counted."""
        return int(self.confusion.sum())

    @property
    def top1_correct(self) -> int:
        """Images whose label was the most probable class."""
        return int(np.trace(self.confusion))

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
        np.add.at(self.confusion, (labels, order[:, 0]), 1)
        hit = np.any(order == labels[:, None], axis=1)
        np.add.at(self.topk, labels[hit], 1)

    def add(self, other: ClassCounts) -> ClassCounts:
        """The counts of both (shares of different images)."""
        if other.classes != self.classes:
            raise AlexnetError(f"internal: counts of {other.classes} classes added to counts of {self.classes}.")
        return ClassCounts(self.confusion + other.confusion, self.topk + other.topk)

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
        images = self.confusion.sum(axis=1)
        wrong = self.confusion.copy()
        np.fill_diagonal(wrong, 0)
        per_class = []
        for index in np.flatnonzero(images).tolist():
            count, right, near = int(images[index]), int(self.confusion[index, index]), int(self.topk[index])
            confused = int(np.argmax(wrong[index]))
            confused_images = int(wrong[index, confused])
            per_class.append({
                "index": index, "id": str(class_ids[index]), "name": str(class_names[index]), "images": count,
                "top1_correct": right, "top5_correct": near, "top1_accuracy": right / count,
                "top5_accuracy": near / count, "confused_with": str(class_ids[confused]) if confused_images else "",
                "confused_images": confused_images,
            })
        true, predicted = np.nonzero(wrong)
        counts = wrong[true, predicted]
        order = np.lexsort((predicted, true, -counts))
        confusions = [{
            "index": int(true[i]), "id": str(class_ids[true[i]]), "name": str(class_names[true[i]]),
            "predicted_index": int(predicted[i]), "predicted_id": str(class_ids[predicted[i]]),
            "predicted_name": str(class_names[predicted[i]]), "images": int(counts[i]),
        } for i in order.tolist()]
        return {"per_class": per_class, "confusions": confusions}

    @classmethod
    def from_tables(cls, classes: int, per_class: Sequence[Mapping[str, Any]],
                    confusions: Sequence[Mapping[str, Any]]) -> ClassCounts:
        """The counts :meth:`tables` described (as a worker of a Spark evaluation sends them)."""
        counts = cls.empty(classes)
        for row in per_class:
            index = int(row["index"])
            counts.topk[index] += int(row["top5_correct"])
            counts.confusion[index, index] += int(row["top1_correct"])
        for row in confusions:
            counts.confusion[int(row["index"]), int(row["predicted_index"])] += int(row["images"])
        for row in per_class:
            index = int(row["index"])
            if int(counts.confusion[index].sum()) != int(row["images"]):
                raise AlexnetError(f"the counts of class {row['id']} do not add up: {row['images']} images, but "
                                   f"{int(counts.confusion[index].sum())} in its confusions and top-1 count.")
        return counts
