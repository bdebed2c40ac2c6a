"""The Spark launcher: real pyspark in local[2], barrier mode, two TensorFlow workers on 127.0.0.1."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import alexnet

pytest.importorskip("pyspark")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from helpers_train import class_image, jpeg_bytes  # noqa: E402

from alexnet import cli  # noqa: E402
from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.cli.cluster import _train_summary  # noqa: E402
from alexnet.data.fetch import imagenet_categories  # noqa: E402
from alexnet.data.partition import partition_categories  # noqa: E402
from alexnet.data.upload import imagenet_upload  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.launch import api, training  # noqa: E402
from alexnet.launch import spark as launcher  # noqa: E402
from alexnet.launch import worker as workers  # noqa: E402
from alexnet.launch.gpus import gpu_environment, task_gpus  # noqa: E402
from alexnet.train.advice import ADVISED_EFFICIENCY, ADVISED_PACK_MB, SIXTEEN_BIT_GAIN  # noqa: E402

IMAGES_PER_CATEGORY = (15, 12, 12, 12)
BATCH = 5  # the two partitions (27 and 24 images) fill 5 and 4 batches: their own counts disagree


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """One local[2] Spark application for the module, bound to 127.0.0.1, small memory.

    Its Python workers keep their scratch folders under this module's temporary folder: the tests that
    kill workers leave them behind (the next launch on a machine removes such folders).
    """
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    # the tasks of this module run code defined here: ship it by value (the executors cannot import it)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "TMPDIR")}
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                      TMPDIR=str(tmp_path_factory.mktemp("spark-tmp")))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("alexnet-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.python.worker.memory", "256m")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """4 categories of one colour each (quick to learn), 15, 12, 12 and 12 images of 40 to 72 pixels, uploaded
    from a plain <wnid>/ folder: the two partitions get 27 and 24 images."""
    root = tmp_path_factory.mktemp("spark-board")
    rng = np.random.default_rng(0)
    for label, count in enumerate(IMAGES_PER_CATEGORY):
        folder = root / "plain" / f"n{label + 1:08d}"
        folder.mkdir(parents=True)
        for i in range(count):
            height, width = (int(v) for v in rng.integers(40, 73, size=2))
            (folder / f"n{label + 1:08d}_{i}.JPEG").write_bytes(jpeg_bytes(class_image(rng, label, height, width)))
    imagenet_upload(root / "plain", board=root / "board")
    return str(root / "board")


class LabelRecorder(keras.callbacks.Callback):
    """Records the labels of every batch the model trains on; writes them to ``folder/labels-<worker>.json``."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder
        self.labels: set[int] = set()
        self.batches = 0

    def set_model(self, model):
        super().set_model(model)
        train_step = model.train_step

        def recording_train_step(data):
            tf.py_function(self._record, [data[1]], [])
            return train_step(data)

        model.train_step = recording_train_step

    def _record(self, labels):
        self.labels.update(int(v) for v in labels.numpy().reshape(-1))
        self.batches += 1
        return []

    def on_train_end(self, logs=None):
        index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
        record = {"labels": sorted(self.labels), "batches": self.batches}
        Path(self.folder, f"labels-{index}.json").write_text(json.dumps(record))


@pytest.mark.workers
@pytest.mark.long  # make test-long (CI)
def test_two_workers_train_in_step_each_on_its_own_partition(spark, board, tmp_path, capfd, caplog):
    base = free_base_port(2)
    epochs = 3
    caplog.set_level(logging.WARNING, logger="alexnet")
    rows = api.alexnet_spark_train(
        spark,
        2,
        board,
        base_port=base,
        cache_dir=tmp_path / "cache",
        timeout=300,
        batch_size=BATCH,
        epochs=epochs,
        image_size=64,
        dense_units=64,
        # a constant 0.003 (drops start at epoch 30): the loss falls by 0.1-0.16 in 12 steps; the defaults scaled
        # to the global batch of 10 and falling to zero (about 0.0004 on average) moved it by less than its noise
        learning_rate=0.003, lr_scaling="none", lr_schedule="step",
        area_range=(0.6, 1.0),
        seed=1,
        model_dir=str(tmp_path / "model"),
        collective_timeout=60,
        callbacks=[LabelRecorder(str(tmp_path))],
    )
    assert [row["worker"] for row in rows] == [0, 1]
    # two barrier tasks on this host, TensorFlow servers on one port each, worker 0 the chief
    assert all(row["address"].startswith("127.0.0.1:") for row in rows)
    assert [row["tf_address"] for row in rows] == [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]
    for k, row in enumerate(rows):  # where each worker's log is, on its host, whole once the job ended
        host, log = row["log"].split(":", 1)
        assert host == socket.gethostname() and os.path.basename(log).startswith(f"worker{k}-")
        assert os.path.getsize(log) > 0
    assert [row["chief"] for row in rows] == [True, False]

    table = imagenet_categories(board)
    images = {r["id"]: r["images"] for r in table}
    index = {r["id"]: r["index"] for r in table}
    histories = [row["history"] for row in rows]
    # each worker fetched its own partition and trained on that partition's images only
    for row in rows:
        assert row["categories"] == partition_categories(images, row["worker"], 2)
        assert row["train_images"] == sum(images[c] for c in row["categories"])
        seen = json.loads((tmp_path / f"labels-{row['worker']}.json").read_text())
        assert seen["labels"], "the recorder saw no batch"
        assert set(seen["labels"]) <= {index[c] for c in row["categories"]}, seen
        assert seen["batches"] == epochs * row["history"]["params"]["steps"]
    assert not set(rows[0]["categories"]) & set(rows[1]["categories"])
    counts = sorted(row["train_images"] for row in rows)
    assert counts[0] // BATCH != counts[1] // BATCH, "the test needs partitions that fill different numbers of batches"
    # the same number of steps on both, from the smaller partition
    steps = {h["params"]["steps"] for h in histories}
    assert steps == {min(row["train_images"] for row in rows) // BATCH}
    assert all(h["params"]["workers"] == 2 and h["params"]["global_batch_size"] == 2 * BATCH for h in histories)
    # synchronous training: identical weights at the end, and the loss fell
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    for history in histories:
        loss = history["metrics"]["loss"]
        assert len(loss) == epochs and loss[-1] < loss[0], loss
    # only the chief saved the model
    assert histories[0]["model_path"] == str(tmp_path / "model" / "alexnet.keras")
    assert Path(histories[0]["model_path"]).exists() and histories[1]["model_path"] is None
    assert rows.evaluation is None, "no evaluation unless asked for"
    summary = training.train_row(rows[1])
    assert list(summary) == list(training.TRAIN_COLUMNS)
    assert summary["loss"] == histories[1]["metrics"]["loss"][-1] and json.loads(summary["history"]) == histories[1]
    # what the exchange costs against the computation, both timed before training on every worker, and the settings
    # that would send less (float32 gradients every step: 16 bits first, whenever anything is advised)
    # the probe's step with packs sends the format the chief's timing advises, on every worker
    chiefs = histories[0]["params"]
    chief_faster = chiefs["sixteen_bit_allreduce_seconds"] <= SIXTEEN_BIT_GAIN * chiefs["allreduce_seconds"]
    for history in histories:
        params = history["params"]
        assert params["allreduce_seconds"] > 0 and params["compute_seconds"] > 0
        share = params["compute_seconds"] / (params["compute_seconds"] + params["allreduce_seconds"])
        assert params["communication_efficiency"] == pytest.approx(share)
        alone = params["allreduce_seconds"]
        assert params["communication_advice"].startswith(f"One exchange alone takes {alone:.3g} s a step")
        advised = params["advised_settings"]
        assert bool(advised) == (share < ADVISED_EFFICIENCY), (share, advised)
        # 16 bits first, and only where they were timed at most SIXTEEN_BIT_GAIN of float32's exchange (the small
        # tensors of this model may gain nothing over loopback)
        sixteen = params["sixteen_bit_allreduce_seconds"]
        assert sixteen > 0
        faster = sixteen <= SIXTEEN_BIT_GAIN * alone
        assert ("allreduce_precision" in advised) == (faster and bool(advised)), (alone, sixteen, advised)
        assert "allreduce_precision" not in advised or next(iter(advised)) == "allreduce_precision"
        # what packs hid of the exchange in the chief's format, timed where they overlap the backward pass
        hidden = params["hidden_seconds"]
        assert hidden is None or 0.0 <= hidden <= (sixteen if chief_faster else alone), (hidden, alone, sixteen)
        # packs are advised where they overlap, unless the whole exchange (this small model's) fits in one
        wire = params["allreduce_bytes_per_step"] * (0.5 if "allreduce_precision" in advised else 1)
        packs = hidden is not None and wire > ADVISED_PACK_MB * 1e6
        assert not advised or packs == ("allreduce_pack_mb" in advised), (hidden, wire, advised)
        # a few images: no micro-batches advised, whatever the exchange
        assert params["micro_batches_up_to"] == 1 and "accumulate_steps" not in advised
    # the command's summary ends with the chief's, unless the driver has just said it as the chief's warning (the
    # advice of settings): then once
    chief = histories[0]["params"]["communication_advice"]
    warned = f"Communication: {chief}" in histories[0]["warnings"]
    summary = _train_summary(list(rows))
    assert (summary.splitlines()[-1] == f"Communication: {chief}") != warned
    assert "Communication: " not in summary or not warned
    # the driver showed the chief's lines of start-up as it logged them (they were in its log alone), and each
    # worker's warning once, as it was logged, not again as the job ended
    shown = capfd.readouterr().err.splitlines()
    started = [line.split(": ", 2)[2] for line in shown if line.startswith("alexnet: worker 0 of 2: ")]
    expected = ("Building the model on 2 workers: ", "Measuring the link between the 2 workers: ",
                "Communication: ")
    assert all(line.startswith((*expected, "Precision ", "Measuring which precision ")) for line in started), shown
    assert [next(k for k in expected if line.startswith(k)) for line in started if line.startswith(expected)] == \
        list(expected), shown
    assert " MB a step in float32, " in started[-1], shown
    assert not [line for line in shown if line.startswith("alexnet: worker 1 of 2: ")], "the chief's alone"
    for message in {message for history in histories for message in history["warnings"]}:
        assert sum(line.endswith(f": {message}") for line in shown) == 1, (message, shown)
        assert not [r for r in caplog.records if r.getMessage().endswith(f": {message}")], message


def test_the_summary_says_the_chiefs_advice_once():
    """The chief's advice of settings is a warning the driver says (relay_warnings): the command's summary then leaves
    it out; advice that was no warning (nothing to change) ends the summary."""
    def rows(warnings):
        history = {"metrics": {"loss": [1.5, 1.25]}, "params": {"communication_advice": "Send less."},
                   "warnings": warnings, "weights_sha256": "ab" * 32}
        return [{"worker": 0, "tf_address": "h:1", "chief": True, "train_images": 8, "categories": ["n1"],
                 "history": history}]

    assert _train_summary(rows([])).splitlines()[-1] == "Communication: Send less."
    warned = _train_summary(rows(["Communication: Send less."]))
    assert "Communication" not in warned and warned.splitlines() == [
        "AlexNet trained on 1 Spark worker", "  worker 0 (chief) at h:1: 1 category, 8 images, 2 epochs, loss 1.250",
        f"Weights: sha256 {'ab' * 32}"]


def test_the_summary_says_what_adapt_communication_took_when_the_chief_warned_of_the_advice_after_it():
    """The chief's warning is the advice after what `--adapt-communication` took: the summary left out its whole
    Communication line, and the driver never said what the run took."""
    from alexnet.cli import build_parser, common

    took = "With `adapt_communication` the run took `allreduce_precision` = 'bfloat16'."
    history = {"metrics": {"loss": [1.5, 1.25]}, "weights_sha256": "ab" * 32,
               "params": {"communication_advice": f"{took} Send less."}, "warnings": ["Communication: Send less."]}
    rows = [{"worker": 0, "tf_address": "h:1", "chief": True, "train_images": 8, "categories": ["n1"],
             "history": history}]
    args = build_parser().parse_args(["spark-train", "--workers", "1", "--board", "b"])
    lines = _train_summary(rows, common.typed(args)).splitlines()
    assert [line for line in lines if "Communication" in line] == [
        "Communication: With `--adapt-communication` the run took `--allreduce-precision` 'bfloat16'."]
    assert _train_summary([{**rows[0], "history": {**history, "warnings": []}}]).splitlines()[-1] == \
        f"Communication: {took} Send less.", "no warning: the whole advice"


def _worker_result(worker: int, **history: object) -> dict:
    """What a worker's train_work() returns, as little of it as the summaries read."""
    return {"worker": worker, "workers": 2, "address": f"h:{4040 + worker}", "tf_address": f"h:{8000 + worker}",
            "chief": worker == 0, "categories": [f"n{worker}"], "train_images": 8, "val_images": 0,
            "history": {"metrics": {"loss": [1.5, 1.25]}, "params": {"steps": 4}, "images_per_second": 12.5,
                        "weights_sha256": "ab" * 32, "warnings": [], "model_path": None, "model_pin": None,
                        **history}}


def test_the_summary_of_a_run_called_again_says_that_nothing_was_left_to_train():
    """A run called again on checkpoints whose epochs were all trained says so, as its chief's history does, in the
    command's words; a run from scratch does not."""
    from alexnet.cli import build_parser, common

    done = {"params": {"steps": 4, "epochs": 2, "initial_epoch": 2, "initial_step": 0, "checkpoint_dir": "/runs/1"}}
    rows = [_worker_result(0, **done), _worker_result(1, **done)]
    args = build_parser().parse_args(["spark-train", "--workers", "2", "--board", "b"])
    assert _train_summary(rows, common.typed(args)).splitlines()[3:] == [
        "All 2 epochs were trained before, in /runs/1: nothing was left to train (a larger `--epochs` trains further).",
        "Every worker holds the same weights", f"Weights: sha256 {'ab' * 32}"]
    assert "nothing was left" not in _train_summary([_worker_result(0), _worker_result(1)])


def test_the_summary_and_the_rows_say_where_the_chief_saved_and_published_the_model():
    """The chief's model, saved and published, is said as `alexnet train` says it; its flat row carries both."""
    pin = {"board": "/boards/b", "name": "m2", "version": "20261207T000000Z-abcde"}
    rows = [_worker_result(0, model_path="/runs/1/alexnet.keras", model_pin=pin), _worker_result(1)]
    assert _train_summary(rows).splitlines()[-4:] == [
        "Every worker holds the same weights", f"Weights: sha256 {'ab' * 32}", "Model: /runs/1/alexnet.keras",
        "Model pin: m2 version 20261207T000000Z-abcde on /boards/b"]
    chief, other = training.train_row(rows[0]), training.train_row(rows[1])
    assert (chief["model_path"], chief["model_pin"], chief["model_board"]) == (
        "/runs/1/alexnet.keras", "m2@20261207T000000Z-abcde", "/boards/b")
    assert (other["model_path"], other["model_pin"], other["model_board"]) == ("", "", "")
    # neither saved where asked nor published: nothing said
    assert _train_summary([_worker_result(0), _worker_result(1)]).splitlines()[-1] == f"Weights: sha256 {'ab' * 32}"


def test_a_worker_where_no_step_ran_says_no_rate():
    """A relaunch that found every epoch trained before ran no step: no rate is said, nor a rate of 0."""
    from alexnet.train.callbacks import Throughput

    assert Throughput().images_per_second(32) is None, "no epoch"
    timed = Throughput()
    timed.epochs = [(0, 0.0)]
    assert timed.images_per_second(32) is None, "an epoch of no step"
    timed.epochs = [(4, 2.0), (4, 1.0)]
    assert timed.images_per_second(32) == 128.0, "the epochs after the first"
    rows = [_worker_result(0, images_per_second=None), _worker_result(1)]
    lines = _train_summary(rows).splitlines()
    assert lines[1] == "  worker 0 (chief) at h:8000: 1 category, 8 images, 2 epochs, loss 1.250"
    assert lines[2].endswith(", loss 1.250, 12.5 images/s")
    logged = [_worker_result(0), {**_worker_result(1), "log": "h:/tmp/alexnet-logs/worker1-x.log"}]
    assert _train_summary(logged).splitlines()[2].endswith(", 12.5 images/s; log h:/tmp/alexnet-logs/worker1-x.log")
    assert training.train_row(logged[1])["log"] == "h:/tmp/alexnet-logs/worker1-x.log"
    assert training.train_row(logged[0])["log"] == ""
    rate = training.train_row(rows[0])["images_per_second"]
    assert math.isnan(rate), "NaN in the flat row, which R's print leaves out"


def _share(worker: int, **more: object) -> dict:
    """What a worker's score_share() returns, as little of it as the flat row and the sums read."""
    from alexnet.launch.evaluation import empty_share

    return {**empty_share(1), "worker": worker, "workers": 2, "images": 3, "top1_correct": 1, "top5_correct": 2,
            "top_k": 5, "image_size": 64, "num_classes": 4, "seconds": 1.5, "model": "m", **more}


def test_each_worker_of_an_evaluation_says_where_its_log_is():
    """An evaluation's flat rows and its per_worker entries carry each worker's log (host:path), as a training's
    rows do: alone, and at the end of a training, where the training row's own log says it once."""
    from alexnet.launch.evaluation import combine_shares, evaluate_row
    from alexnet.launch.task import Evaluation, Task

    logs = ["h0:/tmp/alexnet-logs/worker0-x.log", "h1:/tmp/alexnet-logs/worker1-x.log"]
    rows = [evaluate_row(_share(k, log=logs[k])) for k in (0, 1)]
    assert [row["log"] for row in rows] == logs
    assert [w["log"] for w in combine_shares(rows, 2.0)["per_worker"]] == logs
    assert evaluate_row(_share(0))["log"] == "", "a result that does not say"
    # a training that ends with its evaluation: the share's columns without a second log, the sums with the worker's
    trained = [training.train_row({**_worker_result(k), "log": logs[k], "evaluation": _share(k)}) for k in (0, 1)]
    assert trained[1]["log"] == logs[1] and "eval_log" not in trained[1]
    task = Task(kind="train", board="/boards/b", workers=2, evaluation=Evaluation())
    assert list(trained[0]) == list(training.train_columns(task))
    evaluation = training.combine_training(task, trained, 2.0)
    assert [w["log"] for w in evaluation["per_worker"]] == logs

def test_more_workers_than_slots_is_refused_before_launching(spark, board):
    with pytest.raises(AlexnetError, match=r"3 workers need 3 task slots .* has 2: use `workers` <= 2"):
        api.alexnet_spark_train(spark, 3, board, epochs=1)
    with pytest.raises(AlexnetError, match="task slots"):
        launcher.run_barrier(spark, 5, _sleeper)
    assert not spark.sparkContext.statusTracker().getActiveJobsIds(), "nothing was launched"
    # the slot count: cores over cores per task; unknown (no check) with dynamic allocation
    assert launcher.barrier_slots(spark) == 2
    assert launcher.slots_from(8, "2", "false") == 4 and launcher.slots_from(3, 4) == 1
    assert launcher.slots_from(8, 1, "true") is None and launcher.check_slots(50, None) == 50


def test_arguments_the_launcher_sets_itself_are_refused(spark, board):
    with pytest.raises(AlexnetError, match="`strategy` cannot be given"):
        api.alexnet_spark_train(spark, 2, board, strategy="mirrored")
    with pytest.raises(AlexnetError, match="SparkSession or SparkContext"):
        api.alexnet_spark_train("local[2]", 2, board)


def _sleeper(index, addresses):
    time.sleep(0.1)
    return {"index": index}


def _failing(index, addresses, folder, how):
    """Worker 1 fails after a few log lines (unless ``how`` is "sleep"); worker 0 would run for two minutes."""
    import logging

    Path(folder, f"pid-{index}").write_text(str(os.getpid()))
    if index == 1 and how != "sleep":
        # fail only once worker 0 runs, so that the test can see its process stopped (a fresh Python
        # process can take more than a second to start on a loaded machine)
        deadline = time.monotonic() + 60
        while not Path(folder, "pid-0").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        logging.getLogger("alexnet.test").warning("worker %d of %s is about to fail", index, addresses)
        sys.stderr.flush()
        if how == "exit":
            os._exit(9)
        raise ValueError("broken on purpose on worker 1")
    time.sleep(120)
    Path(folder, f"done-{index}").write_text("finished")
    return {"index": index}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["raise", "exit"])
@pytest.mark.workers
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_one_failed_worker_fails_the_job_with_its_error_and_log(spark, tmp_path, how):
    from functools import partial

    with pytest.raises(workers.WorkerError) as caught:
        launcher.run_barrier(spark, 2, partial(_failing, folder=str(tmp_path), how=how), timeout=150)
    error = caught.value
    assert error.worker == 1 and error.workers == 2
    if how == "raise":
        assert "ValueError: broken on purpose on worker 1" in str(error)
    else:
        assert error.exit_code == 9 and "exit code 9" in str(error)
    assert any("about to fail" in line for line in error.log_tail), error.log_tail
    # the job failed before worker 0's two minutes were up: Spark stopped the other task, and its worker process
    # went with it (a timeout of 150 s would have named the timeout instead)
    assert not (tmp_path / "done-0").exists(), "worker 0 ran to its end: it was not stopped"
    survivor = int((tmp_path / "pid-0").read_text())
    deadline = time.monotonic() + 20
    while _pid_alive(survivor) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _pid_alive(survivor), "worker 0's process outlived its task"


def _timer_from_workers_up(folder: Path, workers: int, start_up: float) -> type[threading.Timer]:
    """A ``threading.Timer`` whose time counts from when ``workers`` workers wrote their pid files in ``folder``
    (or ``start_up`` seconds went by without it): a fresh worker process can take many seconds to start on a
    loaded machine, and a timeout that fires before it runs tests nothing of stopping it."""

    class Timer(threading.Timer):
        def run(self) -> None:
            deadline = time.monotonic() + start_up
            while (len(list(folder.glob("pid-*"))) < workers and time.monotonic() < deadline
                   and not self.finished.is_set()):
                self.finished.wait(0.1)
            super().run()

    return Timer


@pytest.mark.workers
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_job_over_its_timeout_is_cancelled(spark, tmp_path, monkeypatch):
    from functools import partial

    # the job's timeout (3 s) counts from when both workers run: then the cancellation has processes to stop
    monkeypatch.setattr(launcher, "threading",
                        SimpleNamespace(Event=threading.Event, Timer=_timer_from_workers_up(tmp_path, 2, 90)))
    with pytest.raises(AlexnetError, match="did not finish within timeout = 3"):
        launcher.run_barrier(spark, 2, partial(_failing, folder=str(tmp_path), how="sleep"), timeout=3)
    pids = {index: tmp_path / f"pid-{index}" for index in (0, 1)}
    assert all(path.exists() for path in pids.values()), "the workers never started: nothing was cancelled"
    for index, path in pids.items():
        pid = int(path.read_text())
        deadline = time.monotonic() + 20
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _pid_alive(pid), f"worker {index}'s process outlived the cancelled job"


def test_command_line_spark_train(spark, board, monkeypatch, capsys):
    calls = []

    def fake(session, workers, board, **kwargs):
        calls.append((session, workers, board, kwargs))
        history = {"metrics": {"loss": [1.5, 1.2]}, "params": {"steps": 3}, "weights_sha256": "ab" * 32}
        return [
            {"worker": k, "workers": workers, "address": "127.0.0.1:1", "tf_address": f"127.0.0.1:{8000 + k}",
             "chief": k == 0, "categories": ["n1"], "train_images": 12, "val_images": 0, "history": history}
            for k in range(workers)
        ]

    # the help texts show the core's defaults, read from the signature
    # the command reaches the core through the package's public map: alexnet.alexnet_spark_train
    monkeypatch.setattr(alexnet, "alexnet_spark_train", functools.wraps(api.alexnet_spark_train)(fake),
                        raising=False)
    code = cli.main(["spark-train", "--workers", "2", "--board", board, "--epochs", "1", "--batch-size", "4",
                     "--image-size", "64", "--base-port", "9100", "--json"])
    assert code == 0
    (session, workers, used_board, kwargs) = calls[0]
    assert workers == 2 and used_board == board and session.sparkContext is spark.sparkContext
    settings = kwargs["settings"]  # checked once by the command, before Spark work
    assert (settings.epochs, settings.batch_size, settings.image_size) == (1, 4, (64,))
    assert kwargs["base_port"] == 9100 and "evaluate" not in kwargs
    rows = json.loads(capsys.readouterr().out)
    assert [r["worker"] for r in rows] == [0, 1]
    assert not spark.sparkContext._jsc.sc().isStopped(), "the command must not stop a session it did not start"

    # --evaluate: the run's evaluation after the workers (and with --json, an object of both)
    def evaluated(session, workers, board, **kwargs):
        run = api.SparkRun(fake(session, workers, board, **kwargs))
        run.evaluation = {"model": "alexnet@v2", "protocol": "10 crops", "image_size": 64, "top1_accuracy": 0.5,
                          "top1_correct": 3, "images": 6, "top_k": 5, "top5_accuracy": 1.0, "top5_correct": 6,
                          "images_per_second": 2.0, "per_worker": [], "bad_images": []}
        return run

    monkeypatch.setattr(alexnet, "alexnet_spark_train", functools.wraps(api.alexnet_spark_train)(evaluated),
                        raising=False)
    words = ["spark-train", "--workers", "2", "--board", board, "--epochs", "1", "--evaluate", "--crops", "10"]
    assert cli.main([*words, "--json"]) == 0
    assert (calls[-1][3]["evaluate"], calls[-1][3]["crops"]) == (True, 10)
    shown = json.loads(capsys.readouterr().out)
    assert [r["worker"] for r in shown["workers"]] == [0, 1] and shown["evaluation"]["top1_correct"] == 3
    assert cli.main(words) == 0
    assert "Evaluation of the model on every validation image of the board (alexnet@v2):\nTop-1 accuracy 50.0% (3 of " \
           "6 images)" in capsys.readouterr().out
    args = cli.build_parser().parse_args(["spark-train", "--workers", "3"])
    assert args.master is None, "the master defaults to local[workers]"


class SlowSteps(keras.callbacks.Callback):
    """Makes each training step last at least ``seconds``, so that a test can act in the middle of an epoch."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.seconds)


def worker_pids(index: int) -> list[int]:
    """Process ids of worker ``index``'s Python processes on this machine (their command line names its folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if f"alexnet-worker{index}-" in command and "alexnet.child" in command:
            pids.append(int(entry.name))
    return pids


@pytest.mark.workers
@pytest.mark.long  # a relaunched training job: make test-long (CI) runs it, and the relaunched evaluation too
def test_a_worker_killed_mid_run_is_relaunched_and_training_resumes_from_the_checkpoint(spark, board, tmp_path):
    import signal
    import threading

    from alexnet.train.checkpoint import STATE_FILE

    checkpoints = tmp_path / "ckpt"
    killed: dict = {}

    def kill_worker_1_in_epoch_2() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = epochs_done(checkpoints)
            pids = worker_pids(1) if done >= 1 else []
            if pids:
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                killed.update(pids=pids, epochs_done=done)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_worker_1_in_epoch_2, daemon=True)
    killer.start()
    rows = api.alexnet_spark_train(
        spark, 2, board, base_port=free_base_port(2), cache_dir=tmp_path / "cache", timeout=400, retries=1,
        batch_size=BATCH, epochs=3, image_size=64, dense_units=32, seed=1, checkpoint_dir=str(checkpoints),
        collective_timeout=30, callbacks=[SlowSteps(0.4)],
        # the levers of a slow link go through the launch, the retry and the resume like any other setting
        allreduce_precision="bfloat16", allreduce_pack_mb=0.5, sync_every=2,
    )
    killer.join(timeout=5)
    assert killed, "worker 1 was never seen in its second epoch"
    assert killed["epochs_done"] == 1, "killed during epoch 2 of 3"
    assert [row["attempt"] for row in rows] == [2, 2], "one retry"
    histories = [row["history"] for row in rows]
    # the relaunched workers resumed from the last checkpoint, not from epoch 0, and finished the run
    assert all(h["params"]["initial_epoch"] >= 1 for h in histories), [h["params"] for h in histories]
    assert all(len(h["metrics"]["loss"]) == 3 for h in histories)
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]  # local SGD averaged at the end
    assert all(h["params"]["communication"] == "bfloat16 on the wire, packs of 0.5 MB, weights and momentum "
               "averaged every 2 steps" for h in histories)
    assert json.loads((checkpoints / STATE_FILE).read_text())["epochs_done"] == 3


def epochs_done(checkpoints: Path, at_least: int = 0, within: float = 0) -> int:
    """The epochs the run whose ``checkpoint_dir`` is ``checkpoints`` has checkpointed (0 before its first); with
    ``at_least``, waited for up to ``within`` seconds."""
    from alexnet.train.checkpoint import STATE_FILE

    deadline = time.monotonic() + within
    while True:
        try:
            done = int(json.loads((checkpoints / STATE_FILE).read_text())["epochs_done"])
        except (OSError, ValueError, KeyError):
            done = 0
        if done >= at_least or time.monotonic() >= deadline:
            return done
        time.sleep(0.2)


def test_executors_whose_python_lacks_alexnet_are_named_before_the_barrier_stage(spark, board, tmp_path):
    import subprocess

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    with pytest.raises(AlexnetError) as caught:
        api.alexnet_spark_train(spark, 2, board, python=python, epochs=1)
    message = str(caught.value)
    # no job is left running; Spark's status of a finished job (the probe's) follows its listener events, which may
    # arrive a moment after collect() returned
    tracker, deadline = spark.sparkContext.statusTracker(), time.monotonic() + 30
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not tracker.getActiveJobsIds(), "no job is left running"
    assert "cannot run alexnet on 1 executor(s)" in message and python in message
    assert "ModuleNotFoundError: No module named" in message
    assert "PYSPARK_PYTHON" in message and "spark.pyspark.python" in message
    assert "\tat org.apache" not in message and len(message.splitlines()) < 8, message


class _TaskContext:
    """Stands in for a BarrierTaskContext whose task Spark gave ``gpus`` (``None``: no GPU scheduling)."""

    def __init__(self, gpus: list[str] | None) -> None:
        self.gpus = gpus

    def resources(self) -> dict:
        from pyspark.resource import ResourceInformation

        return {} if self.gpus is None else {"gpu": ResourceInformation("gpu", self.gpus)}

    def partitionId(self) -> int:
        return 1

    def getTaskInfos(self) -> list:
        return [SimpleNamespace(address="10.0.0.1:4040"), SimpleNamespace(address="10.0.0.1:4041")]

    def barrier(self) -> None:
        pass


def test_a_task_given_gpus_by_spark_holds_its_worker_to_them(monkeypatch):
    """Two tasks of one node would each take every GPU: each worker starts with CUDA_VISIBLE_DEVICES naming those
    Spark assigned its task (within the executor's own, when it has them), unless the job's `env` names its own."""
    import pyspark

    order = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert task_gpus(_TaskContext(None), {}) is None
    assert task_gpus(_TaskContext(["2", "3"]), {}) == ["2", "3"]
    assert task_gpus(_TaskContext(["1"]), {"CUDA_VISIBLE_DEVICES": "4,5,6"}) == ["5"]
    assert gpu_environment(_TaskContext(["2", "3"]), {"A": "1"}, {}) == {
        "A": "1", "CUDA_VISIBLE_DEVICES": "2,3", **order}
    assert gpu_environment(_TaskContext(["1"]), {}, {"CUDA_VISIBLE_DEVICES": "4,5"}) == {
        "CUDA_VISIBLE_DEVICES": "5"}
    assert gpu_environment(_TaskContext(["2"]), {"CUDA_VISIBLE_DEVICES": "0"}, {}) == {
        "CUDA_VISIBLE_DEVICES": "0"}
    assert gpu_environment(_TaskContext(None), {"A": "1"}, {}) == {"A": "1"}
    # the barrier task hands its worker's process that environment
    seen = {}

    def worker(function, index, addresses, *, python, env):
        seen.update(index=index, addresses=addresses, env=env)
        return {"ok": True}

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setattr(launcher, "run_worker", worker)
    for gpus, given in ((["1", "3"], {"CUDA_VISIBLE_DEVICES": "1,3", **order}), (None, {})):
        monkeypatch.setattr(pyspark.BarrierTaskContext, "get", lambda gpus=gpus: _TaskContext(gpus))
        rows = list(launcher._barrier_task(print, None, {"ALEXNET_PROGRESS": "0"}, iter([0])))
        assert [json.loads(row) for row in rows] == [{"worker": 1, "result": {"ok": True}}]
        assert seen == {"index": 1, "addresses": ["10.0.0.1:4040", "10.0.0.1:4041"],
                        "env": {"ALEXNET_PROGRESS": "0", **given}}


def test_a_clusters_session_shows_sparks_warnings_but_not_each_failed_tasks(spark, monkeypatch):
    """On a cluster's master Spark's console is set back to the warnings it showed, but a failed task's Java stack,
    a TaskSetManager warning each time, is left out: alexnet's error leads with the worker's own."""
    from alexnet.launch import session as session_module

    jvm = spark.sparkContext._jvm
    level = lambda name: str(jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel())  # noqa: E731
    tasks = "org.apache.spark.scheduler.TaskSetManager"
    before = level(tasks)
    monkeypatch.setattr(session_module, "unanswered_master", lambda master: None)
    monkeypatch.setattr(session_module, "_log_level_before_start", lambda: "WARN")
    try:  # the builder gives back this module's running application, whatever the master
        assert session_module.spark_session("spark://127.0.0.1:7077") is spark
        assert level(tasks) == "ERROR" and level("org.apache.spark.scheduler.DAGScheduler") == "WARN"
    finally:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            tasks, getattr(jvm.org.apache.logging.log4j.Level, before))
        spark.sparkContext.setLogLevel("ERROR")


def test_a_master_spark_does_not_take_is_one_line_naming_it(monkeypatch):
    # in a process of its own: this module's Spark application would be given back whatever the master
    code = ("from alexnet.launch.session import spark_session\n"
            "try:\n    spark_session('bogus://nowhere')\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    said = done.stdout.strip().splitlines()[-1]
    assert said.startswith("AlexnetError Spark did not start on `master` = 'bogus://nowhere' (org.apache.spark.") and \
        said.endswith("give a master Spark takes, e.g. 'local[2]', 'spark://host:7077', 'yarn' or "
                      "'k8s://https://host:443'.")
    # a master of a kind Spark takes: what that kind needs
    from alexnet.launch.session import master_advice

    assert master_advice("spark://127.0.0.1:7999").startswith("no Spark master answered there: start it")
    for variable in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        monkeypatch.delenv(variable, raising=False)
    assert master_advice("yarn").startswith("a YARN master needs HADOOP_CONF_DIR")
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop")
    assert master_advice("yarn").startswith("give a master Spark takes")
