"""A seeded run stopped and resumed from its checkpoint goes on as the run would have gone without the stop: the
same images in the same order, cropped alike, the same dropout masks, so the same losses and weights (training on
one CPU process is deterministic: two runs of one seed end alike)."""

from __future__ import annotations

import pytest
from helpers_train import Interrupted, stop_after_first_epoch, synthetic_data

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.train.api import alexnet_train  # noqa: E402

#: dropout at its default (0.5): its masks are part of what a resumed run must draw again
SEEDED = {"image_size": 64, "dense_units": 16, "learning_rate": 0.01, "area_range": (0.6, 1.0), "lighting": 0.1,
          "verbose": 0, "precision": "float32", "seed": 1, "checkpoint_every": 1}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2 categories x 12 training images: 3 steps of 8 per epoch, and a pass over the images of 24."""
    return synthetic_data(tmp_path_factory.mktemp("reproduced"), classes=2, per_class=12, val_per_class=0)


@pytest.fixture(scope="module")
def straight(data, tmp_path_factory):
    """A run of 3 epochs that nothing stopped."""
    return alexnet_train(8, 3, data, checkpoint_dir=str(tmp_path_factory.mktemp("straight") / "ckpt"), **SEEDED)


class StopAfterStep(keras.callbacks.Callback):
    """Raises :class:`Interrupted` after step ``step`` (from 0) of epoch ``epoch`` (from 0), once its checkpoint is
    written (``checkpoint_every`` = 1)."""

    def __init__(self, epoch: int, step: int):
        super().__init__()
        self.epoch, self.step, self.current = epoch, step, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.current, batch) == (self.epoch, self.step):
            raise Interrupted(f"interrupted after step {batch + 1} of epoch {self.current + 1}")


def test_a_seeded_run_resumed_after_an_epoch_ends_as_the_run_that_did_not_stop(data, straight, tmp_path):
    folder = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        alexnet_train(8, 3, data, checkpoint_dir=folder, callbacks=[stop_after_first_epoch()], **SEEDED)
    resumed = alexnet_train(8, 3, data, checkpoint_dir=folder, **SEEDED)
    assert resumed["params"]["initial_epoch"] == 1
    assert resumed["metrics"]["loss"] == straight["metrics"]["loss"]
    assert resumed["metrics"]["accuracy"] == straight["metrics"]["accuracy"]
    assert resumed["weights_sha256"] == straight["weights_sha256"]


def test_a_seeded_run_resumed_inside_an_epoch_ends_as_the_run_that_did_not_stop(data, straight, tmp_path):
    folder = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):  # in epoch 2, whose images begin in one pass and end in the next
        alexnet_train(8, 3, data, checkpoint_dir=folder, callbacks=[StopAfterStep(1, 0)], **SEEDED)
    resumed = alexnet_train(8, 3, data, checkpoint_dir=folder, **SEEDED)
    assert (resumed["params"]["initial_epoch"], resumed["params"]["initial_step"]) == (1, 1)
    loss, straight_loss = resumed["metrics"]["loss"], straight["metrics"]["loss"]
    # epoch 2's training loss counts its steps after the resume alone
    assert (loss[0], loss[2]) == (straight_loss[0], straight_loss[2])
    assert resumed["weights_sha256"] == straight["weights_sha256"]
