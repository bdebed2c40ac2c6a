"""The ``data`` argument: a partition or the original hand-made list, normalised to files and global labels."""

from __future__ import annotations

import numpy as np
import pytest

from alexnet.errors import AlexnetError
from alexnet.input.inputs import training_data


def test_hand_made_form_numbers_classes_by_sorted_category():
    data = {
        "image": ["/x/b1.JPEG", "/x/a1.JPEG", "/x/c1.JPEG", "/x/a2.JPEG"],
        "category": ["n02", "n01", "n03", "n01"],
        "categories": ["n03", "n01", "n02"],
        "val_image": ["/x/v.JPEG"],
        "val_category": ["n03"],
    }
    td = training_data(data)
    assert td.labels == [1, 0, 2, 0]
    assert td.num_classes == 3
    assert td.val_labels == [2]


def test_partition_form_keeps_global_labels_and_num_classes():
    data = {
        "image": np.array(["/x/a.JPEG", "/x/b.JPEG"]),
        "category": ("n09", "n42"),
        "categories": ["n09", "n42"],
        "label": [7.0, 41.0],  # as R's numeric vectors arrive
        "num_classes": [1000],
        "val_image": "/x/v.JPEG",  # a single path arrives as a bare string
        "val_label": 41,
    }
    td = training_data(data)
    assert td.files == ["/x/a.JPEG", "/x/b.JPEG"]
    assert td.labels == [7, 41] and all(isinstance(v, int) for v in td.labels)
    assert td.num_classes == 1000, "the model must have the global number of classes, not the partition's 2"
    assert td.val_files == ["/x/v.JPEG"] and td.val_labels == [41]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"image": ["a"], "category": ["n1"], "categories": ["n2"]}, "not in `data\\$categories`"),
        ({"image": ["a", "b"], "category": ["n1"], "categories": ["n1"]}, "one category per image"),
        ({"image": ["a"], "category": ["n1"], "categories": ["n1"], "label": [0]}, "num_classes"),
        ({"image": ["a"], "label": [5], "num_classes": 3}, "outside 0..2"),
        ({"image": [], "category": [], "categories": ["n1"]}, "no images"),
        ({"image": ["a"], "label": [0.5], "num_classes": 3}, "whole numbers"),
    ],
)
def test_bad_data_is_refused_with_what_to_change(data, message):
    with pytest.raises(AlexnetError, match=message):
        training_data(data)
