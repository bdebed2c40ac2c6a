"""Resuming from checkpoints that a stopped run, or a hand, left damaged or out of step with the history file."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers_train import synthetic_data

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402
from alexnet.train.checkpoint import HISTORY_KEY, STATE_FILE, CheckpointStore, recorded_settings  # noqa: E402

SMALL = {"image_size": 64, "dense_units": 16, "learning_rate": 0.005, "area_range": (0.6, 1.0), "verbose": 0,
         "precision": "float32"}


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2 categories x 16 training images: 4 steps of 8 per epoch."""
    return synthetic_data(tmp_path_factory.mktemp("resume"), classes=2, per_class=16, val_per_class=0)


@pytest.fixture(scope="module")
def two_epochs(data, tmp_path_factory):
    """The checkpoint folder of a run of 2 epochs of 4 steps: ckpt-4 and ckpt-8 and the history."""
    folder = tmp_path_factory.mktemp("two") / "ckpt"
    alexnet_train(8, 2, data, checkpoint_dir=str(folder), **SMALL)
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(folder, target)
    return target


GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _rewrite(prefix: Path, history: Callable[[dict], dict] | None = None,
             renamed: tuple[str, str] | None = None) -> None:
    """Write the checkpoint at ``prefix`` again as another version of alexnet would have written it: the history it
    keeps changed by ``history``, the optimizer's attribute ``renamed[0]`` named ``renamed[1]`` (in its object graph
    and its keys), every other tensor as it was."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(str(prefix))
    tensors = {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}
    if history is not None:
        tensors[HISTORY_KEY] = json.dumps(history(json.loads(tensors[HISTORY_KEY]))).encode()
    if renamed is not None:
        old, new = (f"optimizer/{name}/" for name in renamed)
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(tensors[GRAPH_KEY])
        optimizer = next(c.node_id for c in graph.nodes[0].children if c.local_name == "optimizer")
        for child in graph.nodes[optimizer].children:
            if child.local_name == renamed[0]:
                child.local_name = renamed[1]
        for node in graph.nodes:
            for attribute in node.attributes:
                attribute.checkpoint_key = attribute.checkpoint_key.replace(old, new, 1)
        tensors[GRAPH_KEY] = graph.SerializeToString()
        tensors = {(new + key[len(old):] if key.startswith(old) else key): value for key, value in tensors.items()}
    for file in prefix.parent.glob(prefix.name + ".*"):
        file.unlink()
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=list(tensors), shape_and_slices=[""] * len(tensors),
                      tensors=[tf.constant(value) for value in tensors.values()])


def _edit_history(folder: Path, change: Callable[[dict], dict]) -> None:
    """The history of the checkpoints in ``folder`` changed by ``change``: its file and each checkpoint's copy."""
    (folder / STATE_FILE).write_text(json.dumps(change(json.loads((folder / STATE_FILE).read_text()))))
    for index in folder.glob("ckpt-*.index"):
        _rewrite(index.with_suffix(""), history=change)


def test_a_resumed_runs_history_read_back_holds_its_params_and_says_its_lines(data, tmp_path, monkeypatch):
    """alexnet_history() of a run's checkpoint_dir has the params the run returned: every setting (its
    communication settings too), what it measured of its link and the advice, where it resumed; its summary says the
    run's lines, `Resumed from ...` and `Communication: ...` among them. The link is measured as a chief of two
    workers measures it (the measurement and the advice of one worker are none)."""
    import dataclasses

    from alexnet.cli.train import history_summary
    from alexnet.train import levers
    from alexnet.train.history_file import alexnet_history
    from alexnet.train.strategy import Topology

    advise = levers.advise_communication
    monkeypatch.setattr(levers, "probe_communication", lambda *args, **kwargs: {
        "bytes_per_step": 1.2e8, "allreduce_seconds": 2.92, "sixteen_bit_allreduce_seconds": 1.5,
        "compute_seconds": 0.4})
    monkeypatch.setattr(levers, "advise_communication", lambda timing, communication, topology, **kwargs: advise(
        timing, dataclasses.replace(communication, workers=2, replicas=2),
        Topology("multi_worker", 2, 2, 0, True, 1, False), **kwargs))
    levered = {**SMALL, "allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "accumulate_steps": 2,
               "sync_every": 4}
    folder = tmp_path / "ckpt"
    alexnet_train(8, 1, data, checkpoint_dir=str(folder), **levered)
    live = alexnet_train(8, 2, data, checkpoint_dir=str(folder), **levered)
    kept = alexnet_history(folder)
    params = live["params"]
    assert params["communication_advice"] and params["communication_efficiency"] and params["allreduce_seconds"] == 2.92
    # every param of the run's, as it returned them, but the seconds (trained until the last checkpoint)
    assert {name: value for name, value in kept["params"].items() if name not in ("seconds", "data")} == \
        {name: value for name, value in params.items() if name != "seconds"}
    assert 0 < kept["params"]["seconds"] <= params["seconds"]
    assert {name: kept["params"][name] for name in ("allreduce_precision", "allreduce_pack_mb", "accumulate_steps",
                                                    "sync_every", "initial_epoch")} == {
        "allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "accumulate_steps": 2, "sync_every": 4,
        "initial_epoch": 1}
    said, own = history_summary(kept).splitlines(), history_summary(live).splitlines()
    assert said == [line for line in own if not line.startswith("Model")], (said, own)
    assert f"Resumed from {folder} at epoch 2, step 0." in said
    assert f"Communication: {params['communication_advice']}" in said


def test_a_history_file_keeps_no_password_and_names_the_initial_model_as_its_checkpoints_do():
    from alexnet.train.run_history import kept_params

    params = {"model_board": "https://reader:s3cret@boards.example/b", "epochs": 2, "image_size": [64],
              "initial_model": {"name": "alexnet", "version": "v1", "board": "https://reader:s3cret@boards.example/b"},
              "started_from": {"model": "alexnet@v1", "text": "Started from https://reader:s3cret@boards.example/b"}}
    assert kept_params(params, "alexnet@v1") == {
        "model_board": "https://reader:***@boards.example/b", "epochs": 2, "image_size": [64],
        "initial_model": "alexnet@v1",
        "started_from": {"model": "alexnet@v1", "text": "Started from https://reader:***@boards.example/b"}}


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_an_unreadable_index_resumes_from_the_newest_checkpoint_found_and_says_so(data, two_epochs, tmp_path, caplog,
                                                                                damage):
    folder = _copy(two_epochs, tmp_path)
    if damage == "garbage":
        (folder / "checkpoint").write_text("garbage\n")
    else:
        (folder / "checkpoint").unlink()
    with caplog.at_level("INFO", logger="alexnet"):
        history = alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert history["params"]["initial_epoch"] == 2, "not a fresh start over the old checkpoints"
    assert len(history["metrics"]["loss"]) == 3
    assert "resuming from the newest checkpoint there, ckpt-8" in caplog.text
    assert "Resuming from" in caplog.text


def test_a_history_of_epochs_done_without_any_checkpoint_is_refused(data, two_epochs, tmp_path):
    folder = _copy(two_epochs, tmp_path)
    for file in folder.glob("ckpt-*"):
        file.unlink()
    with pytest.raises(AlexnetError, match=r"records 2 epoch\(s\) and 0 step\(s\) done, but there is no checkpoint"):
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)


@pytest.mark.parametrize("damage", ["truncated", "garbage index"])
def test_a_damaged_newest_checkpoint_gives_way_to_the_one_before_it(data, two_epochs, tmp_path, caplog, damage):
    folder = _copy(two_epochs, tmp_path)
    if damage == "truncated":
        with open(folder / "ckpt-8.data-00000-of-00001", "r+b") as f:
            f.truncate(1_000_000)
    else:
        (folder / "ckpt-8.index").write_text("garbage\n")
    with caplog.at_level("INFO", logger="alexnet"):
        history = alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert history["params"]["initial_epoch"] == 1
    assert len(history["metrics"]["loss"]) == 3
    assert f"The newest checkpoint in {folder}, ckpt-8, is damaged" in caplog.text
    assert "resuming from ckpt-4, the one before it" in caplog.text
    assert "does not fit" not in caplog.text


def test_every_checkpoint_damaged_is_refused_naming_them(data, two_epochs, tmp_path):
    folder = _copy(two_epochs, tmp_path)
    for name in ("ckpt-8", "ckpt-4"):
        with open(folder / f"{name}.data-00000-of-00001", "r+b") as f:
            f.truncate(1_000_000)
    damaged = r"are damaged \(ckpt-8: .*; ckpt-4: .*\): delete its ckpt-\* files"
    with pytest.raises(AlexnetError, match=damaged) as error:
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert "does not fit" not in str(error.value)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_run_stopped_between_its_checkpoint_and_its_history_file_loses_no_epoch(data, tmp_path, monkeypatch):
    folder = tmp_path / "ckpt"
    write = CheckpointStore.write_state

    def stop_before_the_second(self, state):
        if state["epochs_done"] == 2:
            raise Interrupted("stopped after the checkpoint of epoch 2, before its history file")
        write(self, state)

    monkeypatch.setattr(CheckpointStore, "write_state", stop_before_the_second)
    with pytest.raises(Interrupted):
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    monkeypatch.setattr(CheckpointStore, "write_state", write)
    assert json.loads((folder / STATE_FILE).read_text())["epochs_done"] == 1
    history = alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert history["params"]["initial_epoch"] == 2
    assert len(history["metrics"]["loss"]) == 3 and history["card"]["epochs"] == 3


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_a_history_file_deleted_or_unreadable_is_taken_from_the_checkpoint(data, two_epochs, tmp_path, caplog, damage):
    folder = _copy(two_epochs, tmp_path)
    recorded = recorded_settings(str(folder))
    if damage == "deleted":
        (folder / STATE_FILE).unlink()
    else:
        (folder / STATE_FILE).write_text("{garbage")
    # what the Spark driver checks and adapt_communication reads: the copy the newest checkpoint keeps
    assert recorded and recorded_settings(str(folder)) == recorded
    alone = tmp_path / "history-alone"  # without a checkpoint, an unreadable history is said as it is
    alone.mkdir()
    (alone / STATE_FILE).write_text("{garbage")
    with pytest.raises(AlexnetError, match="use another `checkpoint_dir`, or delete that folder's ckpt-\\* files"):
        recorded_settings(str(alone))
    with pytest.raises(AlexnetError, match="dense_units"):  # the settings are still checked
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), **dict(SMALL, dense_units=8))
    with caplog.at_level("INFO", logger="alexnet"):
        history = alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert "resuming with the copy of it that ckpt-8 keeps" in caplog.text
    assert history["params"]["initial_epoch"] == 2
    assert len(history["metrics"]["loss"]) == 3 and history["card"]["epochs"] == 3


class StopAt(keras.callbacks.Callback):
    """Raises :class:`Interrupted` after batch ``batch`` of epoch ``epoch`` (0-based)."""

    def __init__(self, epoch: int, batch: int):
        super().__init__()
        self.epoch, self.batch, self.current = epoch, batch, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.current == self.epoch and batch == self.batch:
            raise Interrupted(f"interrupted at epoch {self.current}, batch {batch}")


class Epochs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs: list[tuple[int, int]] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append((epoch, self.params["steps"]))


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_run_checkpointed_mid_epoch_resumed_at_a_larger_batch_ends_that_epoch_and_goes_on(data, tmp_path, caplog):
    folder = tmp_path / "ckpt"
    settings = dict(SMALL, checkpoint_dir=str(folder), checkpoint_every=2)
    with caplog.at_level("INFO", logger="alexnet"), pytest.raises(Interrupted):  # epochs of 8 steps of 4
        alexnet_train(4, 2, data, callbacks=[StopAt(epoch=0, batch=6)], **settings)
    assert json.loads((folder / STATE_FILE).read_text())["position"] == [0, 6]
    # the last checkpoint, after step 6 of epoch 1, said as the run resumed from it says where it goes on
    assert "Checkpoint at epoch 1, step 6: a run resumed from it goes on there." in caplog.text
    caplog.clear()
    record = Epochs()
    with caplog.at_level("INFO", logger="alexnet"):
        history = alexnet_train(8, 2, data, callbacks=[record], **settings)  # epochs of 4 steps
    assert (history["params"]["initial_epoch"], history["params"]["initial_step"]) == (0, 6)
    assert record.epochs == [(0, 1), (1, 4)], "epoch 1 ends with its last step, epoch 2 is whole"
    assert "after step 6 of epoch 1, and an epoch has 4 steps now: epoch 1 ends with its last step" in caplog.text
    assert f"Resuming from {folder} at epoch 1, step 6." in caplog.text
    assert len(history["metrics"]["loss"]) == 2


def test_checkpoints_found_without_their_index_are_taken_latest_position_first(tmp_path):
    """A run resumed at a larger global batch numbers its checkpoints by shorter epochs: ckpt-4 (epoch 1, step 0)
    comes after ckpt-6 (epoch 0, step 6). Without the index, the position each holds says which is newest."""
    folder = tmp_path / "ckpt"
    for name, (epoch, step) in (("ckpt-6", (0, 6)), ("ckpt-4", (1, 0)), ("ckpt-2", (0, 2))):
        tf.train.Checkpoint(epoch=tf.Variable(epoch, dtype=tf.int64), step=tf.Variable(step, dtype=tf.int64),
                            history=tf.Variable("", dtype=tf.string)).write(str(folder / name))
    (folder / "ckpt-9.index").write_bytes(b"not a checkpoint")  # unreadable: last
    (folder / "ckpt-9.data-00000-of-00001").write_bytes(b"")
    store = CheckpointStore(str(folder), chief=False)
    try:
        names, passed_over = store._candidates()
        assert names == ["ckpt-9", "ckpt-6", "ckpt-4", "ckpt-2"] and "missing" in passed_over
        assert store._by_position(names) == ["ckpt-4", "ckpt-6", "ckpt-2", "ckpt-9"]
    finally:
        store.close()


def test_a_checkpoint_of_another_format_is_refused_and_one_recording_none_resumes_as_today(data, two_epochs, tmp_path,
                                                                                          caplog):
    folder = _copy(two_epochs, tmp_path)
    assert json.loads((folder / STATE_FILE).read_text())["format"] == 1
    _edit_history(folder, lambda state: {**state, "format": 2})
    refused = (rf"^The checkpoints in {re.escape(str(folder))} are of checkpoint format 2, and this version of alexnet "
               r"writes and resumes format 1 only \(.*\): start from the model saved there with "
               rf'`initial_model` = "{re.escape(str(folder))}" and a new `checkpoint_dir`, or start afresh with a new '
               r"`checkpoint_dir`\.$")
    with pytest.raises(AlexnetError, match=refused):
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    with pytest.raises(AlexnetError, match=refused):  # what the Spark driver checks before it launches the workers
        recorded_settings(str(folder))
    # every checkpoint written before the format was recorded: today's, resumed without a word of it
    _edit_history(folder, lambda state: {k: v for k, v in state.items() if k != "format"})
    with caplog.at_level("INFO", logger="alexnet"):
        history = alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert history["params"]["initial_epoch"] == 2 and "checkpoint format" not in caplog.text
    assert json.loads((folder / STATE_FILE).read_text())["format"] == 1


def test_a_checkpoint_of_an_older_optimizer_is_refused_as_such_not_as_another_models(data, two_epochs, tmp_path):
    folder = _copy(two_epochs, tmp_path)
    for index in folder.glob("ckpt-*.index"):  # written before 7bc07fc: the rate kept as _current_learning_rate
        _rewrite(index.with_suffix(""), renamed=("_learning_rate", "_current_learning_rate"))
    assert "optimizer/_current_learning_rate/.ATTRIBUTES/VARIABLE_VALUE" in dict(
        tf.train.list_variables(str(folder / "ckpt-8")))
    refused = (rf"^The checkpoint {re.escape(str(folder / 'ckpt-8'))} of {re.escape(str(folder))} was written by an "
               r"older version of alexnet, whose optimizer state cannot be resumed .*: start from the model saved "
               rf'there with `initial_model` = "{re.escape(str(folder))}" and a new `checkpoint_dir`, or start afresh '
               r"with a new `checkpoint_dir`\.$")
    with pytest.raises(AlexnetError, match=refused) as error:
        alexnet_train(8, 3, data, checkpoint_dir=str(folder), **SMALL)
    assert "the settings it was written with" not in str(error.value)


def test_a_resume_on_other_classes_is_refused_naming_them_also_from_an_older_history(data, two_epochs, tmp_path):
    folder = _copy(two_epochs, tmp_path)
    ids = sorted(data["categories"])
    other = dict(data, class_ids=[ids[0], "z_other"])  # the same images, label 1 named another class
    where = re.escape(str(folder))
    refused = (rf"^The checkpoints in {where} were trained on other classes than this data's: 1 of their 2 outputs "
               rf"would stand for another class \(label 1: {ids[1]} then, z_other now\)\. To train on these classes "
               rf'from their model, give `initial_model` = "{where}" \(the model saved there\) and a new '
               r"`checkpoint_dir`; to resume, give the data of their classes\.$")
    with pytest.raises(AlexnetError, match=refused):
        alexnet_train(8, 3, other, checkpoint_dir=str(folder), **SMALL)
    # an older history, without what the run trained on: the card of the model saved beside the checkpoints tells
    _edit_history(folder, lambda state: {**state, "settings": {k: v for k, v in state["settings"].items()
                                                               if k != "data"}})
    with pytest.raises(AlexnetError, match=refused):
        alexnet_train(8, 3, other, checkpoint_dir=str(folder), **SMALL)
    # a history that kept a digest of the ids, without a card or model beside it: refused without naming them
    from alexnet.train.resumed import class_digest

    _edit_history(folder, lambda state: {**state, "settings": {**state["settings"],
                                                               "data": {"class_ids": class_digest(ids)}}})
    for name in ("alexnet-model.json", "alexnet.keras"):
        (folder / name).unlink()
    with pytest.raises(AlexnetError, match=r"other classes than this data's: the class ids differ, of which their "
                                           r"history keeps a digest only\. .*give `initial_model` = the `model_dir` "
                                           r"their run saved its model to and a new `checkpoint_dir`"):
        alexnet_train(8, 3, other, checkpoint_dir=str(folder), **SMALL)


def test_other_classes_are_the_chiefs_to_refuse_and_every_worker_raises_its_words(monkeypatch):
    """The model's classes are the chief's (its card names them; another worker's hand-made data may name only its
    own): the chief checks, and with several workers each raises what the chief said, so that none of them hangs."""
    from alexnet.train import agreement
    from alexnet.train.checkpoint import Resume
    from alexnet.train.resumed import refuse_other_classes
    from alexnet.train.strategy import Topology

    class Store:
        def __init__(self, refusal):
            self.refusal, self.checked = refusal, []

        def check_classes(self, saved, class_ids):
            self.checked.append(class_ids)
            if self.refusal:
                raise AlexnetError(self.refusal)

    sent = []

    def gather(strategy, text):
        sent.append(text)
        return ["trained on other classes", ""]  # the chief's row first

    monkeypatch.setattr(agreement, "all_gather_texts", gather)
    start = Resume(1, 0, settings={"data": {"class_ids": ["a", "b"]}}, restored=True)
    chief, other = Topology("multi_worker", 2, 2, 0, True, 1, False), Topology("multi_worker", 2, 2, 1, False, 1, False)
    with pytest.raises(AlexnetError, match=r"^trained on other classes$"):
        refuse_other_classes(None, chief, Store("trained on other classes"), start, ["a", "z"])
    worker = Store("worker 1's own classes")
    with pytest.raises(AlexnetError, match=r"^trained on other classes$"):  # the chief's words, not its own
        refuse_other_classes(None, other, worker, start, ["0", "z"])
    assert sent == ["trained on other classes", ""] and worker.checked == []
    alone = Topology("default", 1, 1, 0, True, 1, False)
    with pytest.raises(AlexnetError, match=r"^one worker$"):
        refuse_other_classes(None, alone, Store("one worker"), start, ["a", "z"])
    assert len(sent) == 2, "a run of one worker gathers nothing"


def test_a_run_with_checkpoints_leaves_the_root_logger_as_the_program_left_it(data, tmp_path, monkeypatch):
    """TensorFlow's checkpoint save logs through absl, which calls logging.basicConfig() when the root logger has
    no handler: a program that configures its logging after training found its basicConfig(...) ignored."""
    import logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # a program that has not configured logging
    alexnet_train(8, 1, data, checkpoint_dir=str(tmp_path / "ckpt"), **{**SMALL, "steps_per_epoch": 2})
    assert root.handlers == []


# -- checkpoints in a bucket ------------------------------------------------------------------------------------------

def _bucket_checkpoints(location: str) -> tuple[list[str], str]:
    """The checkpoints' files in ``location`` (an s3:// folder) by name, and its index's text ("" when missing)."""
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    names = sorted(Path(p).name for p in fs.ls(location, detail=False))
    index = fs.cat_file(f"{location}/checkpoint").decode() if "checkpoint" in names else ""
    return names, index


def test_a_checkpoint_is_uploaded_index_last_and_one_cut_short_is_no_checkpoint(cloud_env, data, two_epochs,
                                                                                   tmp_path, monkeypatch):
    """A run killed while its first checkpoint was uploaded left ``ckpt-N.index`` alone in the bucket (the files went
    in listing order); every run given that folder after stopped, saying the checkpoints were damaged. Files of the
    same number that the new checkpoint does not write (another count of shards) are deleted: they made it no
    checkpoint."""
    import fsspec

    from alexnet.train.checkpoint_files import upload_order

    assert upload_order(["ckpt-4.index", "ckpt-4.data-00000-of-00002", "ckpt-4.data-00001-of-00002"]) == [
        "ckpt-4.data-00000-of-00002", "ckpt-4.data-00001-of-00002", "ckpt-4.index"]
    from alexnet.train import checkpoint_files

    location = f"s3://alexnet-outputs/cut-{tmp_path.name}/ckpt"
    fs = fsspec.filesystem("s3")
    fs.put_file(str(two_epochs / "ckpt-4.index"), f"{location}/ckpt-4.index")  # what the killed run left
    fs.pipe_file(f"{location}/ckpt-4.data-00001-of-00002", b"a shard of a checkpoint written in two")
    writes, order = checkpoint_files.upload_retry, []

    def recorded(what, fn):  # every write to the bucket of the checkpoints, in the order made
        order.append(what.split(" of the checkpoints", 1)[0])
        return writes(what, fn)

    monkeypatch.setattr(checkpoint_files, "upload_retry", recorded)
    history = alexnet_train(8, 1, data, checkpoint_dir=location, **SMALL)
    uploaded = [what for what in order if what.startswith("uploading ")]
    assert uploaded == ["uploading ckpt-4.data-00000-of-00001", "uploading ckpt-4.index", "uploading checkpoint"], order
    assert history["params"]["initial_epoch"] == 0, "started afresh"
    names, index = _bucket_checkpoints(location)
    assert [n for n in names if n.startswith("ckpt-")] == ["ckpt-4.data-00000-of-00001", "ckpt-4.index"]
    assert 'model_checkpoint_path: "ckpt-4"' in index


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_run_resumed_from_a_bucket_keeps_the_checkpoint_it_resumed_from(cloud_env, data, tmp_path, caplog):
    """The first checkpoint of a run resumed from a bucket deleted every older one there (TensorFlow's manager, over
    an empty scratch folder, knew none), so that a damaged newest checkpoint had none before it to give way to; one
    that does gives way, said of the bucket's files (it named the scratch folder they were downloaded to)."""
    location = f"s3://alexnet-outputs/kept-{tmp_path.name}/ckpt"
    alexnet_train(8, 1, data, checkpoint_dir=location, **SMALL)
    with pytest.raises(Interrupted):  # the checkpoint at step 2 of epoch 2 written, then killed
        alexnet_train(8, 2, data, checkpoint_dir=location, checkpoint_every=2, callbacks=[StopAt(1, 1)], **SMALL)
    names, index = _bucket_checkpoints(location)
    kept = sorted({n.split(".", 1)[0] for n in names if n.startswith("ckpt-")}, key=lambda n: int(n[5:]))
    assert kept[0] == "ckpt-4" and len(kept) == 2, names
    assert re.findall(r'all_model_checkpoint_paths: "(ckpt-\d+)"', index) == kept
    assert f'model_checkpoint_path: "{kept[1]}"' in index

    import fsspec

    fs = fsspec.filesystem("s3")
    data_file = f"{location}/{kept[1]}.data-00000-of-00001"
    fs.pipe_file(data_file, b"\0" * fs.size(data_file))  # the newest one damaged
    resumed = alexnet_train(8, 2, data, checkpoint_dir=location, **SMALL)
    assert resumed["params"]["initial_epoch"] == 1, "from ckpt-4, the end of epoch 1"
    said = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"The newest checkpoint in {location}, {kept[1]}, is damaged (")
    assert "alexnet-checkpoint-" not in said[0] and said[0].endswith(": resuming from ckpt-4, the one before it.")
    names, index = _bucket_checkpoints(location)
    now = sorted({n.split(".", 1)[0] for n in names if n.startswith("ckpt-")}, key=lambda n: int(n[5:]))
    assert now[0] == "ckpt-4" and len(now) == 2, "the one resumed from, kept beside the new one; the damaged gone"
    assert re.findall(r'all_model_checkpoint_paths: "(ckpt-\d+)"', index) == now


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_finished_run_publishes_its_pin_on_a_new_bucket_board(cloud_env, data, tmp_path):
    """A run killed before its model pin's first version, run again, had nothing left to train and asked the board
    whether it held the pin already: a new bucket prefix was refused as a board that "holds nothing", every time."""
    location, board = (f"s3://alexnet-outputs/pin-{tmp_path.name}/{what}" for what in ("ckpt", "board"))
    alexnet_train(8, 1, data, checkpoint_dir=location, **SMALL)  # the run that ended before its pin
    again = alexnet_train(8, 1, data, checkpoint_dir=location, model_pin="alexnet", model_board=board, **SMALL)
    assert again["params"]["initial_epoch"] == 1 and again["model_pin"]["board"] == board
    third = alexnet_train(8, 1, data, checkpoint_dir=location, model_pin="alexnet", model_board=board, **SMALL)
    assert third["model_pin"]["version"] == again["model_pin"]["version"], "the same weights: no new version"


def test_a_bucket_folder_of_checkpoints_takes_one_run_at_a_time(cloud_env, tmp_path, monkeypatch, caplog):
    """A bucket took no lock: two runs given one bucket folder wrote over each other's checkpoints. The chief now holds
    a lease there (as a folder's lock): a second run waits for it, then stops naming the first; one killed is taken
    over once its lease stays as it is; a run whose lease was taken over stops before it writes again."""
    import fsspec

    from alexnet.storage import lease
    from alexnet.train import checkpoint_files
    from alexnet.train.checkpoint_files import RUN_LOCK, CheckpointFiles

    for name, value in (("BEAT", 0.1), ("STALE", 1.0), ("POLL", 0.05), ("SETTLE", 0.1)):
        monkeypatch.setattr(lease, name, value)
    monkeypatch.setattr(checkpoint_files, "RUN_LOCK_PATIENCE", 2.0)
    location = f"s3://alexnet-outputs/held-{tmp_path.name}/ckpt"
    fs = fsspec.filesystem("s3")
    first = CheckpointFiles(location, chief=True)
    held = json.loads(fs.cat_file(f"{location}/{RUN_LOCK}"))
    assert held["note"].startswith(f"the run of process {os.getpid()} on ")
    worker = CheckpointFiles(location, chief=False)  # another worker of the same run holds nothing
    worker.close()
    with caplog.at_level("WARNING"), pytest.raises(AlexnetError) as busy:
        CheckpointFiles(location, chief=True)
    assert str(busy.value).startswith(f"Another training run is writing its checkpoints to {location} "
                                      f"({held['note']}), and two runs in one folder would write over each other's")
    assert f"Another training run ({held['note']}) is writing its checkpoints to {location}; waiting up to 2 s" \
        in caplog.text
    first.close()
    assert not fs.exists(f"{location}/{RUN_LOCK}"), "let go at the end of the run"
    # a run killed: its lease stays as it was, and the next run takes it over
    killed = CheckpointFiles(location, chief=True)
    killed._lease._stop.set()
    killed._lease._thread.join()
    with caplog.at_level("INFO", logger="alexnet"):  # the package's level, which a command line run may have set
        relaunched = CheckpointFiles(location, chief=True)
    assert f"The checkpoints in {location} were held by {held['note'][:30]}" in caplog.text
    assert relaunched._lease.taken_over == killed._lease.note
    # the killed run was suspended only: back, it writes nothing more over the relaunched run's checkpoints, from
    # its first write on (it reads the lease again: its last renewal is too old to be trusted)
    with pytest.raises(AlexnetError, match=r"^Another training run \(the run of process .*\) took over the "
                                           rf"checkpoints in {re.escape(location)}: this run could not renew its hold "
                                           r"on them for 1 s"):
        killed.write_whole("alexnet-history.json", b"{}")
    killed.close()
    relaunched.close()
    assert not fs.exists(f"{location}/alexnet-history.json")


def test_the_s3_uploads_a_killed_run_left_unfinished_in_its_folder_are_aborted(cloud_env, tmp_path, caplog,
                                                                               monkeypatch):
    """An S3 multipart upload cut short by a kill (a checkpoint's data, a model) stayed in the bucket, billed and
    never listed; the next run of the folder, which holds its lease, aborts those of its folder and no others."""
    import fsspec

    from alexnet.storage import lease
    from alexnet.train.checkpoint_files import CheckpointFiles

    fs = fsspec.filesystem("s3")
    folder = f"left-{tmp_path.name}/ckpt"
    for key in (f"{folder}/ckpt-4.data-00000-of-00001", f"{folder}/alexnet.keras", f"{folder}-other/ckpt-1.index"):
        fs.call_s3("create_multipart_upload", Bucket="alexnet-outputs", Key=key)
    # a lease that is free is no killed run's: a run that ended well lets go only once its model is whole
    free = CheckpointFiles(f"s3://alexnet-outputs/{folder}", chief=True)
    free.close()

    def unfinished() -> list[str]:
        listed = fs.call_s3("list_multipart_uploads", Bucket="alexnet-outputs", Prefix=f"left-{tmp_path.name}/")
        return sorted(upload["Key"] for upload in listed.get("Uploads") or [])

    assert len(unfinished()) == 3
    killed = lease.Lease(fs, f"alexnet-outputs/{folder}/.alexnet-run.lock", "the run killed")
    killed._write(create=True)  # and renewed no more
    monkeypatch.setattr(lease, "STALE", 1.0)
    with caplog.at_level("INFO", logger="alexnet"):
        held = CheckpointFiles(f"s3://alexnet-outputs/{folder}", chief=True)
    held.close()
    assert unfinished() == [f"{folder}-other/ckpt-1.index"], "another folder's upload is left alone"
    assert f"Aborted 2 uploads that a killed run left unfinished in s3://alexnet-outputs/{folder}." in caplog.text
    worker = CheckpointFiles(f"s3://alexnet-outputs/{folder}-other", chief=False)  # only the chief, which holds it
    worker.close()
    assert unfinished() == [f"{folder}-other/ckpt-1.index"]


def test_a_bucket_folder_is_held_until_the_model_saved_there_is_whole(cloud_env, data, tmp_path, monkeypatch):
    """The lease was let go before the model was saved in the folder (`model_dir`'s default): a run waiting for the
    folder took it during that upload, and a run taking it could abort it."""
    import fsspec

    from alexnet.model import saving

    location = f"s3://alexnet-outputs/model-{tmp_path.name}/ckpt"
    fs = fsspec.filesystem("s3")
    seen: list[bool] = []
    real = saving.save_model

    def save_model(*args, **kwargs):
        seen.append(fs.exists(f"{location}/.alexnet-run.lock"))
        return real(*args, **kwargs)

    monkeypatch.setattr(saving, "save_model", save_model)
    history = alexnet_train(8, 1, data, checkpoint_dir=location, **SMALL)
    assert seen == [True], "held while the model is saved"
    assert history["model_path"].startswith(location) and not fs.exists(f"{location}/.alexnet-run.lock")


def test_a_run_whose_bucket_folder_was_taken_over_stops_at_the_next_step(cloud_env, data, tmp_path, monkeypatch):
    """A run that found its lease taken over trained on until its next checkpoint (an epoch of ImageNet: hours) beside
    the run that took it."""
    import fsspec

    from alexnet.storage import lease

    looks = []

    def lost(self):
        looks.append(1)
        return "the run that took it" if len(looks) > 3 else None

    monkeypatch.setattr(lease.Lease, "lost", lost)
    seen: list[int] = []

    class Steps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    location = f"s3://alexnet-outputs/taken-{tmp_path.name}/ckpt"
    with pytest.raises(AlexnetError, match=r"^Another training run \(the run that took it\) took over the checkpoints "
                                           rf"in {re.escape(location)}"):
        alexnet_train(8, 2, data, checkpoint_dir=location, callbacks=[Steps()], **dict(SMALL, steps_per_epoch=6))
    assert seen == [0, 1, 2], "stopped at the step after it was found, inside its first epoch"
    assert fsspec.filesystem("s3").glob(f"{location}/ckpt-*") == [], "no checkpoint written"


def test_a_position_is_said_with_its_epoch_counted_from_1_as_the_other_lines_say_it():
    """"... was written at epoch 0, step 100, and ckpt-50 at epoch 0, step 50" came just before "Resuming ... at
    epoch 1, step 50": a position's epoch, counted from 0, was said as it is kept."""
    from alexnet.train.checkpoint import _said_at

    assert _said_at([0, 100]) == "epoch 1, step 100" and _said_at((2, 0)) == "epoch 3, step 0"
    assert _said_at(None) == _said_at(["?", "?"]) == "an unknown position"
