"""Validation after every epoch on one device: `validation_steps` caps it, and no image is skipped silently.

Every validation image counted once over two workers, and over two replicas of one machine, is shown by the
two-worker run of test_multiworker.py and the mirrored run of test_train.py.
"""

from __future__ import annotations

import pytest
from helpers_train import keep_epoch_weights, make_tree, score_epochs, write_quirks

tf = pytest.importorskip("tensorflow")

from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402

TINY = {"image_size": 64, "dense_units": 32, "learning_rate": 0.02, "lr_scaling": "none", "precision": "float32",
        "verbose": 0, "seed": 0}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """4 classes x 4 training images; 13 validation images (neither of the batches below divides them)."""
    root = tmp_path_factory.mktemp("validation")
    data = make_tree(root, classes=4, per_class=4, val_per_class=4, seed=5, min_side=48, max_side=72)
    data["val_image"], data["val_label"], data["val_category"] = (data[k][:13] for k in
                                                                    ("val_image", "val_label", "val_category"))
    data["quirks"] = write_quirks(root / "quirks")
    return data


def _data(tree: dict, **changes) -> dict:
    return {**{k: v for k, v in tree.items() if k != "quirks"}, **changes}


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_validation_steps_cap_validation_at_the_first_images(tree, tmp_path):
    # 2 steps of 3: the first 6 of the 13 images, each once, whatever is left out after them
    history = alexnet_train(3, 1, _data(tree), validation_steps=2, callbacks=[keep_epoch_weights(tmp_path)], **TINY)
    assert history["params"]["val_images"] == 6 and history["metrics"]["val_images"] == [6.0]
    first = _data(tree, val_image=tree["val_image"][:6], val_label=tree["val_label"][:6])
    [score] = score_epochs(tmp_path, first, 64, num_classes=4, dense_units=32)
    assert history["metrics"]["val_accuracy"] == [score["top1_correct"] / 6]
    assert history["metrics"]["val_loss"][0] == pytest.approx(score["loss"], rel=1e-5)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_an_image_that_cannot_be_decoded_stops_validation_with_what_to_do(tree):
    broken = _data(tree, val_image=[*tree["val_image"], str(tree["quirks"]["truncated"])],
                   val_label=[*tree["val_label"], 0])
    broken.pop("val_category")
    with pytest.raises(AlexnetError, match=r"cannot be decoded.*check_images"):
        alexnet_train(4, 1, broken, check_images=False, **TINY)
    # checked first (the default), it is left out and listed, and validation counts the other 13
    history = alexnet_train(4, 1, broken, max_bad_fraction=0.1, **TINY)
    assert history["bad_images"] == [str(tree["quirks"]["truncated"])]
    assert history["metrics"]["val_images"] == [13.0]
