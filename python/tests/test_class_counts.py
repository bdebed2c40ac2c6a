"""ClassCounts: an evaluation's counts class by class, its tables, and shares read back from them and added."""

from __future__ import annotations

import numpy as np
import pytest

from alexnet.errors import AlexnetError
from alexnet.launch.evaluation import combine_shares, evaluate_row
from alexnet.model.class_counts import ClassCounts

IDS = [f"n0{i}" for i in range(6)]
NAMES = ["tench, Tinca tinca", "goldfish", "shark", "ray", "hen", "ostrich"]


def by_hand(probabilities: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The confusion matrix and top-k hits, one image at a time (ties: the lower index first)."""
    classes = probabilities.shape[1]
    confusion, topk = np.zeros((classes, classes), int), np.zeros(classes, int)
    for row, label in zip(probabilities, labels, strict=True):
        ranked = sorted(range(classes), key=lambda c: (-row[c], c))
        confusion[label, ranked[0]] += 1
        topk[label] += label in ranked[:k]
    return confusion, topk


def random_batch(seed: int, images: int, classes: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    probabilities = rng.random((images, classes)).round(1)  # rounded: ties happen
    return probabilities, rng.integers(0, classes, images)


def dense(counts: ClassCounts) -> np.ndarray:
    """The confusion matrix the counts describe: the right ones on the diagonal, the wrong pairs off it."""
    matrix = np.diag(counts.top1)
    for (true, predicted), n in counts.wrong.items():
        matrix[true, predicted] += n
    return matrix


def test_the_counts_are_each_images_prediction_with_ties_to_the_lower_class():
    counts = ClassCounts.empty(6)
    batches = [random_batch(seed, 40) for seed in range(3)]
    for probabilities, labels in batches:
        counts.count(probabilities, labels, 3)
    confusion, topk = by_hand(np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches]), 3)
    np.testing.assert_array_equal(dense(counts), confusion)
    np.testing.assert_array_equal(counts.images, confusion.sum(axis=1))
    np.testing.assert_array_equal(counts.topk, topk)
    assert all(true != predicted and n > 0 for (true, predicted), n in counts.wrong.items())
    assert (counts.top1_correct, counts.topk_correct) == (np.trace(confusion), topk.sum())
    # a tie for the top goes to the lower class
    tied = ClassCounts.empty(6)
    tied.count(np.array([[0.1, 0.4, 0.4, 0.1, 0, 0]]), np.array([2]), 1)
    assert tied.wrong == {(2, 1): 1} and tied.topk[2] == 0 and tied.images[2] == 1


def test_the_tables_give_each_class_its_accuracy_and_what_it_is_taken_for():
    # class 0: 3 images, 1 right, taken for 4 twice; class 2: 2 images, taken for 3 and 1 once each (tie: 1);
    # class 5: 1 image, right; classes 1, 3 and 4 have no images
    counts = ClassCounts(np.array([3, 0, 2, 0, 0, 1]), np.array([1, 0, 0, 0, 0, 1]), np.array([3, 0, 1, 0, 0, 1]),
                         {(2, 3): 1, (0, 4): 2, (2, 1): 1})
    tables = counts.tables(IDS, NAMES)
    per_class = tables["per_class"]
    assert [c["index"] for c in per_class] == [0, 2, 5]
    assert per_class[0] == {"index": 0, "id": "n00", "name": "tench, Tinca tinca", "images": 3, "top1_correct": 1,
                            "top5_correct": 3, "top1_accuracy": pytest.approx(1 / 3), "top5_accuracy": 1.0,
                            "confused_with": "n04", "confused_images": 2}
    assert (per_class[1]["confused_with"], per_class[1]["confused_images"], per_class[1]["top1_accuracy"]) == \
        ("n01", 1, 0.0)
    assert (per_class[2]["confused_with"], per_class[2]["confused_images"]) == ("", 0)
    assert [(c["index"], c["predicted_index"], c["images"]) for c in tables["confusions"]] == \
        [(0, 4, 2), (2, 1, 1), (2, 3, 1)]
    assert tables["confusions"][0]["predicted_name"] == "hen" and tables["confusions"][0]["predicted_id"] == "n04"
    assert sum(c["images"] for c in per_class) == counts.images.sum()


def test_shares_read_back_from_their_tables_add_up_to_the_whole():
    batches = [random_batch(seed, 30) for seed in range(2)]
    whole, shares = ClassCounts.empty(6), []
    for probabilities, labels in batches:
        whole.count(probabilities, labels, 5)
        share = ClassCounts.empty(6)
        share.count(probabilities, labels, 5)
        shares.append(share.tables(IDS, NAMES))
    back = [ClassCounts.from_tables(6, s["per_class"], s["confusions"]) for s in shares]
    added = back[0].add(back[1])
    np.testing.assert_array_equal(dense(added), dense(whole))
    np.testing.assert_array_equal(added.topk, whole.topk)
    np.testing.assert_array_equal(added.images, whole.images)
    # the workers' rows (their tables as JSON text) combine into the whole's tables, a class scored by both once
    rows = [evaluate_row({"worker": k, "workers": 2, "images": 30, "top1_correct": 0, "top5_correct": 0, "top_k": 5,
                          "crops": 1, "protocol": "centre crop", "image_size": 64, "num_classes": 6, "seconds": 1.0,
                          "model": "m", "bad_images": [], **shares[k]}) for k in (0, 1)]
    assert isinstance(rows[0]["per_class"], str)
    combined = combine_shares(rows, 1.0)
    assert combined["per_class"] == whole.tables(IDS, NAMES)["per_class"]
    assert combined["confusions"] == whole.tables(IDS, NAMES)["confusions"]
    assert sum(c["images"] for c in combined["per_class"]) == 60


def test_tables_whose_counts_do_not_add_up_are_refused():
    counts = ClassCounts.empty(6)
    counts.count(*random_batch(1, 20), 5)
    tables = counts.tables(IDS, NAMES)
    wrong = [dict(tables["per_class"][0], images=tables["per_class"][0]["images"] + 1), *tables["per_class"][1:]]
    with pytest.raises(AlexnetError, match="do not add up"):
        ClassCounts.from_tables(6, wrong, tables["confusions"])
