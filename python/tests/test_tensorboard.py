"""TensorBoard logs of alexnet_train(): the scalars per epoch and every log_every steps, read back from the event
files; the global step across a resumed run, also one killed just after a checkpoint; the profiler's trace; logs on
gs:// (the GCS emulator)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import pytest
from helpers_train import make_tree

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.errors import AlexnetError, BoardError  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402

# the rate as given (not scaled with the batch of 4), so that the logged rate is the one set here, brought down
# to zero at the last step by the default linear schedule
TINY = {"image_size": 64, "dense_units": 64, "learning_rate": 0.005, "lr_scaling": "none", "area_range": (0.6, 1.0),
        "verbose": 0, "check_images": False}
EPOCH_TAGS = {"loss", "accuracy", "val_loss", "val_accuracy", "val_images", "learning_rate", "images_per_second",
              "image_size"}
STEP_TAGS = {"loss", "accuracy", "learning_rate", "images_per_second"}


def read_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} of every event file under ``folder`` (its profile folder aside)."""
    scalars: dict[str, dict[int, float]] = {}
    files = [p for p in folder.rglob("events.out.tfevents.*") if "plugins" not in p.parts]
    assert files, f"no event file in {folder}: {list(folder.rglob('*'))}"
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                assert value.metadata.plugin_data.plugin_name in ("scalars", "")
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                scalars.setdefault(value.tag, {})[int(event.step)] = number
    return scalars


def tags(scalars: dict[str, dict[int, float]], prefix: str) -> set[str]:
    return {tag[len(prefix):] for tag in scalars if tag.startswith(prefix)}


@pytest.fixture(scope="module")
def six_classes(tmp_path_factory):
    """6 classes x 4 images (6 steps of 4 per epoch), 1 validation image each: top-5 accuracy means something."""
    return make_tree(tmp_path_factory.mktemp("six"), classes=6, per_class=4, val_per_class=1, min_side=48,
                     max_side=72)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_scalars_per_epoch_and_every_log_every_steps_continue_across_a_resumed_run_and_the_profile(
        six_classes, tmp_path):
    logs, checkpoints = tmp_path / "logs", tmp_path / "ckpt"
    history = alexnet_train(4, 2, six_classes, log_dir=logs, log_every=5, profile_steps=(2, 3),
                            checkpoint_dir=checkpoints, **TINY)
    assert history["params"]["steps"] == 6
    scalars = read_scalars(logs)
    assert tags(scalars, "epoch/") == EPOCH_TAGS | {"top5_accuracy", "val_top5_accuracy"}
    assert tags(scalars, "step/") == STEP_TAGS
    for name in tags(scalars, "epoch/"):
        assert sorted(scalars[f"epoch/{name}"]) == [1, 2], name
    for name in STEP_TAGS:
        assert sorted(scalars[f"step/{name}"]) == [5, 10], name  # 12 steps, one point every 5
    schedule = history["schedule"]
    assert schedule["image_size"] == [64, 64]
    for name, values in [*history["metrics"].items(), ("image_size", schedule["image_size"]),
                         ("learning_rate", schedule["learning_rate"])]:
        assert [scalars[f"epoch/{name}"][e] for e in (1, 2)] == pytest.approx(values, rel=1e-6), name
    # the default linear schedule: 0.005 at the first of the 12 steps, down to zero at the last
    assert scalars["epoch/learning_rate"][1] == pytest.approx(0.005 * (1 - 5 / 11), rel=1e-6)
    assert scalars["epoch/learning_rate"][2] == 0.0
    assert [scalars["step/learning_rate"][s] for s in (5, 10)] == pytest.approx(
        [0.005 * (1 - 4 / 11), 0.005 * (1 - 9 / 11)], rel=1e-6), "the rate of each logged step"
    assert all(v > 0 for v in scalars["step/images_per_second"].values())
    traces = list((logs / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(traces) == 1 and traces[0].stat().st_size > 0

    # resumed for a third epoch: its steps 13..18 carry on the x axis, point at 15
    again = alexnet_train(4, 3, six_classes, log_dir=logs, log_every=5, checkpoint_dir=checkpoints, **TINY)
    assert again["params"]["initial_epoch"] == 2
    scalars = read_scalars(logs)
    assert sorted(scalars["step/loss"]) == [5, 10, 15]
    assert sorted(scalars["epoch/loss"]) == [1, 2, 3]


def test_logs_on_gs_end_in_the_bucket(cloud_env, tmp_path, monkeypatch):
    import gcsfs

    monkeypatch.chdir(tmp_path)  # a local folder named "gs:" would appear here if the location were a path
    data = make_tree(tmp_path / "images", classes=2, per_class=4, val_per_class=0, min_side=48, max_side=64)
    location = "gs://alexnet-outputs/logs/tensorboard-test"
    alexnet_train(4, 2, data, log_dir=location, log_every=1, profile_steps=(1, 1), **TINY)
    assert not (tmp_path / "gs:").exists()
    # a file system of its own: the one training wrote through keeps listings (and sizes) from before the last upload
    gcs = gcsfs.GCSFileSystem(skip_instance_cache=True)
    found = gcs.find(location)
    assert any("plugins/profile/" in p and p.endswith(".xplane.pb") for p in found), found
    events = [p for p in found if Path(p).name.startswith("events.out.tfevents.")]
    assert len(events) == 1, found
    local = tmp_path / "copy"
    local.mkdir()
    gcs.get_file(events[0], str(local / Path(events[0]).name))
    scalars = read_scalars(local)
    # 2 classes: no top-5 accuracy; no validation images: no val_ scalars
    assert tags(scalars, "epoch/") == {"loss", "accuracy", "learning_rate", "images_per_second", "image_size"}
    assert sorted(scalars["epoch/loss"]) == [1, 2]
    assert sorted(scalars["step/loss"]) == [1, 2, 3, 4]


class KilledAfterCheckpoint(keras.callbacks.Callback):
    """After the checkpoint of step 3 and of epoch 1 (the callbacks the user gives come after the run's own), reads
    what the log folder holds at that moment, as a process killed there would leave it; ends the run after epoch 1."""

    def __init__(self, logs: Path):
        super().__init__()
        self.logs, self.seen = logs, {}

    def on_train_batch_end(self, batch, logs=None):
        if batch == 2 and "step 3" not in self.seen:
            self.seen["step 3"] = read_scalars(self.logs)

    def on_epoch_end(self, epoch, logs=None):
        self.seen["epoch 1"] = read_scalars(self.logs)
        raise KeyboardInterrupt("killed after the checkpoint of epoch 1")


def test_a_run_killed_just_after_a_checkpoint_and_resumed_misses_no_scalar(six_classes, tmp_path):
    logs, checkpoints = tmp_path / "logs", tmp_path / "ckpt"
    killer = KilledAfterCheckpoint(logs)
    with pytest.raises(KeyboardInterrupt):
        alexnet_train(4, 2, six_classes, log_dir=logs, log_every=1, checkpoint_dir=checkpoints, checkpoint_every=3,
                      callbacks=[killer], **TINY)
    # written to the event file before the checkpoint a resumed run would start after
    assert sorted(killer.seen["step 3"]["step/loss"]) == [1, 2, 3]
    assert sorted(killer.seen["epoch 1"]["epoch/loss"]) == [1]
    assert sorted(killer.seen["epoch 1"]["step/loss"]) == [1, 2, 3, 4, 5, 6]
    again = alexnet_train(4, 2, six_classes, log_dir=logs, log_every=1, checkpoint_dir=checkpoints, **TINY)
    assert again["params"]["initial_epoch"] == 1
    scalars = read_scalars(logs)
    assert sorted(scalars["epoch/loss"]) == [1, 2]
    assert sorted(scalars["step/loss"]) == list(range(1, 13))


@pytest.mark.parametrize(("arguments", "message"), [
    ({"log_every": 0}, "log_every"),
    ({"profile_steps": (3, 2)}, "first <= last"),
    ({"profile_steps": 4}, "profile_steps"),
    ({"learning_rate": 0}, "learning_rate"),
    ({"learning_rate": -0.1}, "learning_rate"),
])
def test_bad_logging_and_learning_rate_arguments_fail_before_any_work(arguments, message):
    data = {"image": ["/nowhere/a.JPEG"], "category": ["n1"], "categories": ["n1"]}
    with pytest.raises(AlexnetError, match=message):
        alexnet_train(data=data, **arguments)


def test_a_log_dir_that_cannot_be_written_fails_before_any_work(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    data = {"image": ["/nowhere/a.JPEG"], "category": ["n1"], "categories": ["n1"]}
    with pytest.raises(BoardError, match="log_dir"):
        alexnet_train(data=data, log_dir=tmp_path / "file" / "logs")
    with pytest.raises(BoardError, match="log_dir"):
        alexnet_train(data=data, log_dir="https://example.invalid/logs")
