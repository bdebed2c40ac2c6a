"""What a run keeps stays usable: a run that diverges keeps nothing of it, a checkpoint that cannot be written says
why and leaves the one before it, the best epoch's weights survive a run stopped between its files, and a checkpoint's
upload to a bucket rides out a failed request."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers_train import synthetic_data

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.cli.common import emit  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.train import callbacks as cb  # noqa: E402
from alexnet.train import checkpoint_files  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402
from alexnet.train.checkpoint import BEST_FILE, CheckpointStore, Resume  # noqa: E402
from alexnet.train.checkpoint_files import RUN_LOCK  # noqa: E402
from alexnet.train.history_file import alexnet_history  # noqa: E402

SMALL = {"image_size": 64, "dense_units": 16, "learning_rate": 0.005, "area_range": (0.6, 1.0), "verbose": 0,
         "precision": "float32", "lr_scaling": "none"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2 categories x 16 training images (4 steps of 8 an epoch), 4 validation images each."""
    return synthetic_data(tmp_path_factory.mktemp("kept"), classes=2, per_class=16, val_per_class=4)


def _finite(folder: Path) -> bool:
    """Are the model's weights in the newest checkpoint of ``folder`` finite numbers?"""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(folder)))
    return all(np.isfinite(reader.get_tensor(key)).all() for key, dtype in reader.get_variable_to_dtype_map().items()
               if key.startswith("model/") and dtype.is_floating)


# ---------------------------------------------------------------------------------------------------------
# a run that diverges


def test_a_run_that_diverges_stops_with_one_error_and_its_checkpoints_stay_finite(data, tmp_path):
    folder, model_dir = tmp_path / "ckpt", tmp_path / "model"
    trained = alexnet_train(8, 1, data, checkpoint_dir=str(folder), **SMALL)
    first = tf.train.latest_checkpoint(str(folder))
    with pytest.raises(AlexnetError, match=r"Training diverged after epoch 2: the model's weights are no longer "
                                           r"finite numbers .*Lower `learning_rate`") as raised:
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), model_dir=str(model_dir),
                      **{**SMALL, "learning_rate": 1e9})
    assert "nothing of it was kept" in str(raised.value) and raised.value.while_running, "status 1, not 2"
    assert tf.train.latest_checkpoint(str(folder)) == first, "no checkpoint was written from the diverged epoch"
    assert _finite(folder)
    assert json.loads((folder / "alexnet-history.json").read_text())["epochs_done"] == 1
    # read back as the good run returned it
    kept = alexnet_history(folder)
    assert kept["metrics"] == trained["metrics"] and kept["epochs_done"] == 1 and kept["position"] == [1, 0]
    assert kept["schedule"]["learning_rate"] == trained["schedule"]["learning_rate"]
    assert kept["schedule"]["summary"].startswith("image size 64, learning rate")
    assert (kept["params"]["learning_rate"], kept["params"]["epochs"]) == (SMALL["learning_rate"], 1)
    assert kept["params"]["checkpoint_dir"] == str(folder)
    # said as the run's own history is (its batch, strategy, precision and peak rate), but for the model saved
    from alexnet.cli.train import history_summary

    said, live = history_summary(kept).splitlines(), history_summary(trained).splitlines()
    assert said == [line for line in live if not line.startswith("Model")], (said, live)
    assert said[0] == "AlexNet training history: 1 epoch, default strategy, 1 replica"
    schedule = next(line for line in said if line.startswith("Schedule: "))
    assert schedule.startswith("Schedule: image size 64, learning rate 0 at the epoch's end (peak 0.005), precision ")
    with pytest.raises(AlexnetError, match=r"^`checkpoint_dir` = .* holds no alexnet-history\.json: give the "
                                           r"`checkpoint_dir` a training wrote its checkpoints to"):
        alexnet_history(tmp_path)
    assert not (model_dir / "alexnet.keras").exists(), "no model was saved"
    # resumed with a rate that does not diverge, from the checkpoint before it
    history = alexnet_train(8, 2, data, checkpoint_dir=str(folder), **SMALL)
    assert history["params"]["initial_epoch"] == 1 and np.isfinite(history["metrics"]["loss"]).all()


def test_weights_that_are_not_finite_stop_a_run_at_a_checkpoint_inside_an_epoch(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    recorder = cb.Recorder(4, lambda epoch: {}, every=2, store=None)
    recorder.set_model(model)
    recorder.on_train_batch_end(1, {"loss": 1.0})  # no store: nothing saved, nothing checked
    model.layers[0].kernel.assign([[np.nan], [1.0]])
    recorder.on_train_batch_end(1, {"loss": 1.0})
    with pytest.raises(AlexnetError, match=r"diverged after epoch 1: .*\(loss nan\)"):
        recorder.on_epoch_end(0, {"loss": float("nan")})


def test_json_output_writes_a_number_that_is_not_finite_as_null(capsys):
    emit({"loss": [float("nan"), 1.5], "top1": float("inf"), "rows": ({"x": float("-inf")},), "n": 3}, True, str)
    printed = json.loads(capsys.readouterr().out)  # strict JSON: what jsonlite and JSON.parse read
    assert printed == {"loss": [None, 1.5], "top1": None, "rows": [{"x": None}], "n": 3}


# ---------------------------------------------------------------------------------------------------------
# the best epoch's weights


class _Store:
    """A checkpoint store's best-weights file alone, in memory."""

    location = "/ckpt"

    def __init__(self, kept: tuple[int, list] | None):
        self.kept, self.saved = kept, []

    def read_best(self):
        return self.kept

    def save_best(self, epoch, weights):
        self.saved.append(epoch)


def _model(value: float) -> keras.Model:
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="zeros")])
    model.layers[0].kernel.assign([[value]])
    return model


def _resumed(accuracies: list[float], step: int = 0) -> Resume:
    return Resume(epoch=len(accuracies), step=step, metrics={"val_accuracy": accuracies}, restored=True)


def test_an_epoch_checkpointed_but_not_yet_kept_as_the_best_is_taken_from_the_checkpoint():
    """A run stopped after epoch 2's checkpoint and before its best weights: the file still holds epoch 1's."""
    store = _Store((0, [np.array([[1.0]]), np.array([0.0])]))
    best = cb.BestWeights(store, _resumed([0.5, 0.75]), _model(2.0))
    assert (best.epoch, best.best) == (1, 0.75) and best.weights[0][0][0] == 2.0
    assert store.saved == [1], "the file is written again, with epoch 2's"


def test_an_earlier_best_stays_the_best_and_equals_keep_the_first():
    for accuracies in ([0.75, 0.5], [0.75, 0.75]):
        store = _Store((0, [np.array([[1.0]]), np.array([0.0])]))
        best = cb.BestWeights(store, _resumed(accuracies), _model(2.0))
        assert (best.epoch, best.best) == (0, 0.75) and best.weights[0][0][0] == 1.0 and store.saved == []


def test_a_best_epoch_whose_weights_are_lost_is_said(caplog):
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        best = cb.BestWeights(_Store(None), _resumed([0.75, 0.5]), _model(2.0))
    assert best.weights is None and best.best == -np.inf
    assert "the weights of epoch 1, the best so far (validation top-1 0.7500), are not kept in /ckpt" in caplog.text
    # inside an epoch, the model's weights are not the last epoch's
    best = cb.BestWeights(_Store(None), _resumed([0.5, 0.75], step=2), _model(2.0))
    assert best.weights is None


def test_a_best_weights_file_cut_short_is_passed_over_and_the_run_resumes(data, tmp_path, caplog):
    folder = tmp_path / "ckpt"
    alexnet_train(8, 1, data, checkpoint_dir=str(folder), keep_best=True, **SMALL)
    best_file = folder / BEST_FILE
    best_file.write_bytes(best_file.read_bytes()[:1000])
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        history = alexnet_train(8, 2, data, checkpoint_dir=str(folder), keep_best=True, **SMALL)
    assert f"keep_best: {folder}/{BEST_FILE} cannot be read" in caplog.text
    accuracies = history["metrics"]["val_accuracy"]
    assert history["best_epoch"] == accuracies.index(max(accuracies)) + 1
    with np.load(best_file) as kept:  # whole again
        assert int(kept["epoch"]) == history["best_epoch"] - 1


def test_the_best_weights_file_is_replaced_whole(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"), chief=True)
    try:
        store.save_best(0, [np.ones((2, 2))])
        store.save_best(3, [np.zeros((2, 2))])
        assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == sorted([BEST_FILE, RUN_LOCK]), (
            "no temporary file is left")
        epoch, weights = store.read_best()
        assert epoch == 3 and weights[0].sum() == 0
    finally:
        store.close()


def test_a_best_weights_file_begun_by_a_killed_run_is_removed_when_the_next_one_starts(tmp_path, caplog):
    """A run killed while it wrote the best epoch's weights left alexnet-best-weights.npz.tmp (240 MB for a full-size
    AlexNet) until a later epoch was better, or for good; the next run's start removes it, as it removes a checkpoint
    TensorFlow began. Written straight to its file, the weights are not held once more in memory as bytes."""
    folder = tmp_path / "ckpt"
    store = CheckpointStore(str(folder), chief=True)
    try:
        store.save_best(0, [np.ones((2, 2))])
    finally:
        store.close()
    (folder / f"{BEST_FILE}.tmp").write_bytes(b"PK\x03\x04 cut short")
    (folder / "ckpt-3_temp").mkdir()
    (folder / "alexnet-model.json.tmp").write_text("{")  # not the checkpoints' own: left alone
    # another worker's view of a folder it may not have (a local path on a cluster): nothing of the chief's touched
    other = CheckpointStore(str(tmp_path / "not-made-here"), chief=False)
    try:
        assert other.remove_unfinished() == []
    finally:
        other.close()
    again = CheckpointStore(str(folder), chief=True)
    try:
        assert sorted(again.remove_unfinished()) == sorted([f"{BEST_FILE}.tmp", "ckpt-3_temp"])
        assert sorted(p.name for p in folder.iterdir()) == sorted([BEST_FILE, RUN_LOCK, "alexnet-model.json.tmp"])
        epoch, weights = again.read_best()
        assert epoch == 0 and weights[0].sum() == 4
    finally:
        again.close()


# ---------------------------------------------------------------------------------------------------------
# two runs given one folder


def test_a_second_run_in_the_same_folder_of_checkpoints_is_refused_while_the_first_runs(tmp_path, monkeypatch):
    """A run's lock file was left empty in its folder of checkpoints after the run; it is now deleted as the run ends
    (a killed run's stays, and the next run takes it)."""
    monkeypatch.setattr(checkpoint_files, "RUN_LOCK_PATIENCE", 0.3)
    folder = tmp_path / "ckpt"
    first = CheckpointStore(str(folder), chief=True)
    try:
        with pytest.raises(AlexnetError, match=r"Another training run is writing its checkpoints to .*ckpt \(the run "
                                               r"of process \d+ on .*, begun .*\).*give this run another "
                                               r"`checkpoint_dir`"):
            CheckpointStore(str(folder), chief=True)
        other = CheckpointStore(str(folder), chief=False)  # another worker's checkpoints go elsewhere: no lock
        other.close()
    finally:
        first.close()
    assert not (folder / RUN_LOCK).exists(), "the lock is deleted as the run lets go of it, not left in the folder"
    again = CheckpointStore(str(folder), chief=True)  # the folder is free once the first run ends
    assert (folder / RUN_LOCK).exists()
    again.close()
    assert sorted(p.name for p in folder.iterdir()) == []


def test_a_second_run_waits_for_a_first_that_ends_meanwhile(tmp_path, monkeypatch, caplog):
    import threading

    monkeypatch.setattr(checkpoint_files, "RUN_LOCK_PATIENCE", 20.0)
    folder = tmp_path / "ckpt"
    first = CheckpointStore(str(folder), chief=True)
    ending = threading.Timer(1.0, first.close)
    ending.start()
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        second = CheckpointStore(str(folder), chief=True)
    second.close()
    ending.join()
    assert "waiting up to 20 s for it to end" in caplog.text


def test_two_runs_in_one_folder_stop_the_second_before_it_trains(data, tmp_path, monkeypatch):
    """End to end: a run whose folder of checkpoints another process holds stops with the error, and writes nothing
    there."""
    monkeypatch.setattr(checkpoint_files, "RUN_LOCK_PATIENCE", 0.5)
    folder = tmp_path / "ckpt"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from alexnet.storage.locking import hold_lock; "
         f"hold_lock({str(folder / RUN_LOCK)!r}, patience=0, note='the run of a test'); print('held', flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(AlexnetError, match=r"\(the run of a test\)"):
            alexnet_train(8, 1, data, checkpoint_dir=str(folder), **SMALL)
        assert sorted(p.name for p in folder.iterdir()) == [RUN_LOCK], "nothing was written"
    finally:
        holder.communicate("")


# ---------------------------------------------------------------------------------------------------------
# a checkpoint that cannot be written


def _store_with_model(folder: Path, units: int = 100) -> tuple[CheckpointStore, keras.Model]:
    """A store at ``folder`` restored with a model of ``1000 x units`` weights and an optimizer with momentum."""
    model = keras.Sequential([keras.Input((1000,)), keras.layers.Dense(units)])
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    optimizer.build(model.trainable_variables)
    store = CheckpointStore(str(folder), chief=True, steps=1)
    store.restore(model, optimizer)
    return store, model


def test_a_checkpoint_begun_and_never_finished_is_removed_when_the_next_run_starts(tmp_path, caplog):
    folder = tmp_path / "ckpt"
    (folder / "ckpt-4_temp").mkdir(parents=True)
    (folder / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"x" * 100)
    with caplog.at_level(logging.INFO, logger="alexnet"):
        store, _ = _store_with_model(folder, units=2)
    store.close()
    assert not (folder / "ckpt-4_temp").exists()
    assert "did not finish: ckpt-4_temp" in caplog.text


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a file system of 2 MB (tmpfs), unmounted after."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_stops_the_run_with_what_to_do_and_the_checkpoint_before_it_stays(small_disk):
    folder = small_disk / "ckpt"
    store, _ = _store_with_model(folder)  # a checkpoint of 0.8 MB: weights and momentum
    try:
        store.save(1, 0, {"loss": [1.0]})
        with pytest.raises(AlexnetError) as raised:
            for epoch in range(2, 5):
                store.save(epoch, 0, {"loss": [1.0] * epoch})
    finally:
        store.close()
    said = str(raised.value)
    assert f"could not be written to {folder}" in said and "No space left" in said, said
    assert "a checkpoint of this model takes 1 MB" in said
    assert "make room there or give another `checkpoint_dir`" in said
    assert "running the same command again resumes from the last checkpoint written" in said.lower()
    assert not [p for p in folder.iterdir() if p.name.endswith("_temp")], "nothing half-written is left"
    again, _ = _store_with_model(folder)
    try:
        assert again._manager.latest_checkpoint is not None
    finally:
        again.close()


# ---------------------------------------------------------------------------------------------------------
# a checkpoint's upload


def test_a_checkpoint_upload_that_fails_once_is_tried_again(cloud_env, monkeypatch, caplog):
    from alexnet.storage import transfer

    monkeypatch.setattr(transfer, "backoff", lambda attempt: 0.0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.SGD(0.1)
    store = CheckpointStore("s3://alexnet-outputs/kept-safe/ckpt", chief=True, steps=1)
    failed: list[str] = []
    put = store.fs.put_file

    def put_once_failing(local, remote, *args, **kwargs):
        if not failed:
            failed.append(remote)
            raise ConnectionResetError("connection reset by peer")
        return put(local, remote, *args, **kwargs)

    monkeypatch.setattr(store.fs, "put_file", put_once_failing)
    try:
        store.restore(model, optimizer)
        store.save(1, 0, {"loss": [1.0]})
        assert failed and store.fs.exists("alexnet-outputs/kept-safe/ckpt/checkpoint")
        assert store.read_state()["epochs_done"] == 1
    finally:
        store.close()
        shutil.rmtree(store.local, ignore_errors=True)


def test_a_float16_run_resuming_a_checkpoint_of_another_precision_is_told_which_to_give(tmp_path):
    store, _ = _store_with_model(tmp_path / "ckpt", units=2)
    store.save(1, 0, {"loss": [1.0]})
    store.close()
    model = keras.Sequential([keras.Input((1000,)), keras.layers.Dense(2)])
    optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1, momentum=0.9))
    optimizer.build(model.trainable_variables)
    again = CheckpointStore(str(tmp_path / "ckpt"), chief=True, steps=1)
    try:
        with pytest.raises(AlexnetError, match=r"written by a run that did not compute in float16, and this run does "
                                               r".*give `precision` the one the checkpoint was written in"):
            again.restore(model, optimizer)
    finally:
        again.close()
