"""Training outputs on remote storage, for real: checkpoints on gs:// (the GCS emulator), the model on s3:// (moto);
checks of output locations before any training step; checkpoints inside an epoch."""

from __future__ import annotations

import os
import time
from pathlib import Path

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import pytest
from helpers_train import synthetic_data

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.errors import AlexnetError, BoardError  # noqa: E402
from alexnet.model.saved import MODEL_FILE  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402

BUCKET = "alexnet-outputs"
SMALL = {"image_size": 64, "dense_units": 16, "learning_rate": 0.005, "area_range": (0.6, 1.0), "verbose": 0}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2 categories x 16 training images: 4 steps of 8 per epoch."""
    return synthetic_data(tmp_path_factory.mktemp("outputs"), classes=2, per_class=16, val_per_class=0)


class Interrupted(Exception):
    pass


class StopAt(keras.callbacks.Callback):
    """Raises :class:`Interrupted` after batch ``batch`` of epoch ``epoch`` (0-based), as a lost worker would."""

    def __init__(self, epoch: int, batch: int | None = None):
        super().__init__()
        self.epoch, self.batch, self.current = epoch, batch, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.batch is not None and self.current == self.epoch and batch == self.batch:
            raise Interrupted(f"interrupted at epoch {self.current}, batch {batch}")

    def on_epoch_end(self, epoch, logs=None):
        if self.batch is None and epoch == self.epoch:
            raise Interrupted(f"interrupted after epoch {epoch}")


class Epochs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs: list[int] = []
        self.iterations = -1

    def on_train_begin(self, logs=None):
        if self.iterations < 0:
            self.iterations = int(self.model.optimizer.iterations.numpy())

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_interrupted_run_resumes_from_gs_and_the_model_lands_on_s3(data, cloud_env, tmp_path, monkeypatch):
    import gcsfs
    import s3fs

    monkeypatch.chdir(tmp_path)  # a local folder named "gs:" would appear here if the location were a path
    settings = dict(SMALL, checkpoint_dir=f"gs://{BUCKET}/runs/one", model_dir=f"s3://{BUCKET}/models/one")
    with pytest.raises(Interrupted):
        alexnet_train(8, 3, data, callbacks=[StopAt(epoch=0)], **settings)
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())
    gcs = gcsfs.GCSFileSystem()
    saved = [Path(p).name for p in gcs.find(f"{BUCKET}/runs/one")]
    assert any(name.startswith("ckpt-") for name in saved), saved

    record = Epochs()
    history = alexnet_train(8, 3, data, callbacks=[record], **settings)
    steps = history["params"]["steps"]
    assert history["params"]["initial_epoch"] == 1 and record.epochs == [1, 2]
    assert record.iterations == steps, "the optimizer state came back from gs://"
    assert len(history["metrics"]["loss"]) == 3
    assert history["model_path"] == f"s3://{BUCKET}/models/one/{MODEL_FILE}"
    local = tmp_path / "loaded.keras"
    s3fs.S3FileSystem().get(history["model_path"], str(local))
    model = keras.models.load_model(local, compile=False)
    assert model.output_shape == (None, 2)
    assert not any(p.name.startswith(("gs:", "s3:")) for p in tmp_path.iterdir())


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_checkpoint_inside_an_epoch_resumes_at_that_step(data, tmp_path):
    settings = dict(SMALL, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=2)
    with pytest.raises(Interrupted):
        alexnet_train(8, 2, data, callbacks=[StopAt(epoch=1, batch=2)], **settings)  # after step 3 of epoch 2
    record = Epochs()
    history = alexnet_train(8, 2, data, callbacks=[record], **settings)
    steps = history["params"]["steps"]
    assert steps == 4
    assert (history["params"]["initial_epoch"], history["params"]["initial_step"]) == (1, 2)
    assert record.iterations == steps + 2, "resumed after the checkpoint of step 2 of epoch 2, not at epoch 2's start"
    assert len(history["metrics"]["loss"]) == 2
    with pytest.raises(AlexnetError, match="checkpoint_every"):
        alexnet_train(8, 2, data, **dict(settings, checkpoint_every=0))


def test_a_checkpoint_every_as_many_steps_as_an_epoch_has_is_said(data, tmp_path, caplog):
    """checkpoint_every = 500 with epochs of 12 steps never checkpointed inside an epoch, without a word."""
    with caplog.at_level("WARNING", logger="alexnet"):
        alexnet_train(8, 1, data, **dict(SMALL, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=4))
    assert "`checkpoint_every` = 4 is not below the 4 steps of an epoch: no checkpoint is written inside an epoch, " \
        "only at each epoch's end; give checkpoint_every below 4." in [r.getMessage() for r in caplog.records]


def test_a_model_dir_holding_another_runs_checkpoints_is_refused_before_training(data, cloud_env, tmp_path):
    import s3fs

    from alexnet.train.checkpoint_files import RUN_LOCK

    first = tmp_path / "first"
    alexnet_train(8, 1, data, **dict(SMALL, checkpoint_dir=str(first)))
    model = first / MODEL_FILE
    saved = model.read_bytes()
    stop = StopAt(epoch=0, batch=0)
    refused = "is the folder of another training run's checkpoints, where that run saves its model"
    for own in ({"checkpoint_dir": str(tmp_path / "second")}, {}):
        with pytest.raises(AlexnetError, match=refused):
            alexnet_train(8, 1, data, callbacks=[stop], **dict(SMALL, model_dir=str(first), **own))
    assert model.read_bytes() == saved, "the first run's model is as it saved it"
    assert not (tmp_path / "second").exists(), "refused before anything was written"
    again = alexnet_train(8, 1, data, **dict(SMALL, checkpoint_dir=str(first), model_dir=str(first)))
    assert again["model_path"] == str(model), "a run's own folder of checkpoints is its model_dir"

    s3fs.S3FileSystem().pipe(f"{BUCKET}/runs/held/{RUN_LOCK}", b"{}")  # a run holds it before its first checkpoint
    with pytest.raises(AlexnetError, match=refused):
        alexnet_train(8, 1, data, callbacks=[stop], **dict(SMALL, model_dir=f"s3://{BUCKET}/runs/held"))
    fresh = alexnet_train(8, 1, data, **dict(SMALL, model_dir=f"s3://{BUCKET}/models/fresh"))
    assert fresh["model_path"] == f"s3://{BUCKET}/models/fresh/{MODEL_FILE}"


def test_a_model_dir_holding_a_model_is_said_to_be_replaced_when_the_settings_are_checked(tmp_path, caplog):
    from alexnet.train.settings_check import check_settings

    folder = tmp_path / "kept"
    folder.mkdir()
    replaced = f"`model_dir` = {folder} holds a model already ({MODEL_FILE}): this run's model replaces it"
    for holds in (False, True):
        if holds:
            (folder / MODEL_FILE).write_bytes(b"a model")
        caplog.clear()
        with caplog.at_level("WARNING", logger="alexnet"):
            check_settings({"model_dir": str(folder)})
        said = [r.getMessage() for r in caplog.records if r.name == "alexnet.train.formats"]
        assert any(replaced in line for line in said) == holds, said
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet"):  # a run's own folder of checkpoints: its model is this run's
        check_settings({"model_dir": str(folder), "checkpoint_dir": str(folder)})
    assert not [r for r in caplog.records if r.name == "alexnet.train.formats"]


@pytest.mark.parametrize(
    ("name", "location", "message"),
    [
        ("checkpoint_dir", "gs://no-such-bucket-{pid}/run", "`checkpoint_dir` = gs://no-such-bucket"),
        ("model_dir", "s3://no-such-bucket-{pid}/model", "`model_dir` = s3://no-such-bucket"),
        ("model_dir", "https://example.com/models", "`model_dir` = https://example.com/models cannot be written"),
        ("checkpoint_dir", "gs://", "checkpoint_dir"),
    ],
)
def test_an_output_location_that_cannot_be_written_fails_before_training(data, cloud_env, name, location, message):
    location = location.format(pid=os.getpid())  # in the test, not its name: pytest-xdist's processes collect alike
    stop = StopAt(epoch=0, batch=0)
    start = time.monotonic()
    with pytest.raises((AlexnetError, BoardError), match=message):
        alexnet_train(8, 1, data, callbacks=[stop], **dict(SMALL, **{name: location}))
    assert time.monotonic() - start < 60
