"""Evaluation over Spark barrier tasks in local[2]: the workers' counts add up to the one-machine evaluation, whether
the job is an evaluation or a training that ends with its evaluation; retries, timeouts and progress as a
training's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("tensorflow")

from helpers_model import card_for, save_model_dir, synthetic_board, tiny_model
from helpers_spark import HELPER
from test_spark import spark, worker_pids  # noqa: F401  (the module's local[2] Spark application)

from alexnet.bench.cluster import free_base_port
from alexnet.data.fetch import imagenet_categories
from alexnet.errors import AlexnetError
from alexnet.launch import api as launcher
from alexnet.launch import r as r_launcher
from alexnet.launch.evaluation import EVALUATE_COLUMNS, evaluate_row
from alexnet.launch.job import plan_job
from alexnet.launch.training import SHARE_COLUMNS, TRAIN_COLUMNS, train_row
from alexnet.model.card import CARD_FILE
from alexnet.model.evaluate import alexnet_evaluate
from alexnet.model.pin import alexnet_model
from alexnet.model.publishing import publish_model
from alexnet.storage.board import open_board

CLASSES = 6
#: What an evaluation over workers must give exactly as one machine does.
SAME = ("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy", "top_k", "crops", "protocol",
        "image_size", "num_classes", "per_class", "confusions")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A board of 6 categories with 3 validation images each, a model saved beside its card and published as a
    pin on the same board."""
    root = tmp_path_factory.mktemp("spark-evaluate")
    board = synthetic_board(root, classes=CLASSES, val_per_class=3, seed=4)
    model = tiny_model(CLASSES, seed=8)
    card = card_for(imagenet_categories(board), board=board)
    model_dir = root / "model"
    model_file = save_model_dir(model, model_dir, card)
    publish_model(board, "alexnet", str(model_file), card)
    return {"board": board, "model_dir": str(model_dir), "model": model, "root": root}


def kill_worker_once(index: int, ready: Callable[[], bool] = lambda: True, within: float = 300) -> dict:
    """Kills the processes of worker ``index`` (SIGKILL) the first time they are seen once ``ready()``, from a
    thread, but not those already there (a previous job's, still exiting); the returned dict gets ``pids`` when it
    did."""
    killed: dict = {}
    before = set(worker_pids(index))

    def watch() -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            pids = [pid for pid in worker_pids(index) if pid not in before] if ready() else []
            if pids:
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                killed["pids"] = pids
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return killed


#: The evaluation job launched from R, as alexnet_spark_evaluate() does it, through the stand-in for sparklyr of the R
#: tests (its two barrier tasks run one after the other): its counts as JSON.
R_EVALUATION = """
args <- commandArgs(TRUE)
source(args[[1]])
suppressPackageStartupMessages(library(alexnet))
api <- fake_sparklyr(new.env(), address = c("127.0.0.1:41001", "127.0.0.1:41002"))
result <- alexnet:::spark_evaluate_run(api, "sc", 2, args[[2]], list(model = args[[3]], cache_dir = args[[4]],
                                                                     batch_size = 4, probe = FALSE))
cat(jsonlite::toJSON(list(images = result$images, top1_correct = result$top1_correct,
                          top5_correct = result$top5_correct, per_worker = result$workers$images,
                          class_top1 = result$per_class$top1_correct, class_ids = result$per_class$id,
                          confused = result$confusions$images, class = class(result)), auto_unbox = TRUE), "\n")
"""


def r_evaluation(board: str, model: str, cache: str) -> dict:
    """The counts of :data:`R_EVALUATION` (skips without R and the R package)."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("no Rscript")
    env = {**os.environ, "ALEXNET_PYTHON": sys.executable, "ALEXNET_PROGRESS": "0"}
    if subprocess.run([rscript, "-e", "library(alexnet)"], capture_output=True, env=env, check=False).returncode:
        pytest.skip("the R package alexnet is not installed")
    done = subprocess.run([rscript, "-e", R_EVALUATION, str(HELPER), board, model, cache], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.workers
@pytest.mark.long
def test_two_workers_add_up_to_the_one_machine_evaluation_also_after_a_killed_worker_and_from_r(
        spark, setup, capfd):  # noqa: F811
    pin = alexnet_model(setup["board"], "alexnet", cache_dir=setup["root"] / "models")
    for model in (pin, setup["model_dir"]):
        # the second evaluation loses worker 1 as it starts, and is launched again whole
        killed = kill_worker_once(1) if model == setup["model_dir"] else None
        result = launcher.alexnet_spark_evaluate(spark, model, 2, setup["board"], batch_size=4,
                                                 cache_dir=str(setup["root"] / "cache"), timeout=300, retries=1,
                                                 probe=False)
        alone = alexnet_evaluate(model, board=setup["board"], cache_dir=setup["root"] / "cache", batch_size=7)
        for key in (*SAME, "bad_images", "model", "left_out_at_upload"):
            assert result[key] == alone[key], key
        assert result["left_out_at_upload"] == 0, "added over the shares, as a count the board knows"
        assert result["images"] == CLASSES * 3 and result["workers"] == 2
        assert result["attempt"] == (2 if killed is not None else 1), result["attempt"]
        if killed is not None:
            assert killed.get("pids"), "worker 1 was never seen"
        per = result["per_worker"]
        assert [w["worker"] for w in per] == [0, 1] and all(w["images"] > 0 for w in per)
        assert sum(w["images"] for w in per) == result["images"]
        assert sum(w["top1_correct"] for w in per) == result["top1_correct"]
        assert sum(w["top5_correct"] for w in per) == result["top5_correct"]
    # each worker's progress was shown on the driver while it scored (the monitor writes to this standard error)
    shown = capfd.readouterr().err
    for worker in (0, 1):  # 3 of the 6 categories each, 9 images
        assert f"alexnet: evaluation, worker {worker} of 2: 9/9 images" in shown, shown[-3000:]
    # the same job launched from R (sparklyr's stand-in) gives the same numbers as the Python launcher's
    from_r = r_evaluation(setup["board"], setup["model_dir"], str(setup["root"] / "r-cache"))
    assert (from_r["images"], from_r["top1_correct"], from_r["top5_correct"]) == \
        (result["images"], result["top1_correct"], result["top5_correct"])
    assert from_r["per_worker"] == [w["images"] for w in result["per_worker"]]
    # and the same counts by class, as data frames
    assert from_r["class_top1"] == [c["top1_correct"] for c in result["per_class"]]
    assert from_r["class_ids"] == [c["id"] for c in result["per_class"]]
    assert from_r["confused"] == [c["images"] for c in result["confusions"]]
    assert from_r["class"] == "alexnet_evaluation"


def test_an_evaluation_past_its_timeout_is_cancelled_and_the_error_names_it(spark, setup):  # noqa: F811
    start = time.monotonic()
    with pytest.raises(AlexnetError, match=r"The evaluation on 2 worker\(s\) did not finish within timeout = 2 s, "
                       r"so the Spark job was cancelled: raise `timeout`, or use more workers\."):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 2, setup["board"], timeout=2, retries=2,
                                        probe=False, cache_dir=str(setup["root"] / "cache"))
    assert time.monotonic() - start < 60, "a job past its timeout is not launched again"
    deadline = time.monotonic() + 20
    while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not spark.sparkContext.statusTracker().getActiveJobsIds(), "the job was cancelled"


def test_what_cannot_work_is_refused_on_the_driver(spark, setup):  # noqa: F811
    with pytest.raises(AlexnetError, match="a model every worker can reach"):
        launcher.alexnet_spark_evaluate(spark, setup["model"], 2, setup["board"])
    with pytest.raises(AlexnetError, match="3 workers need 3 task slots"):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 3, setup["board"])
    with pytest.raises(AlexnetError, match="does not exist"):
        launcher.alexnet_spark_evaluate(spark, str(setup["root"] / "nothing"), 2, setup["board"])
    with pytest.raises(AlexnetError, match="`crops` must be 1"):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 2, setup["board"], crops=3)
    with pytest.raises(AlexnetError, match="`timeout` must be"):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 2, setup["board"], timeout=-1)
    with pytest.raises(AlexnetError, match="`retries` must be a whole number >= 0"):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 2, setup["board"], retries=-1)
    # workers beyond the categories with validation images, checked with more slots than that
    with pytest.raises(AlexnetError, match=r"7 workers need at least 7 categories with validation images"):
        plan_job(7, setup["board"], 16, kind="evaluate", model=setup["model_dir"])
    with pytest.raises(AlexnetError, match=r"does not take `crop` \(did you mean `crops`\?\)"):
        plan_job(2, setup["board"], 2, kind="evaluate", model=setup["model_dir"], crop=10)
    # a model of as many classes, but one the board holds is not among them
    rows = imagenet_categories(setup["board"])
    other = save_model_dir(setup["model"], setup["root"] / "other-classes",
                           card_for([*rows[1:], {**rows[0], "id": "z"}]))
    with pytest.raises(AlexnetError, match=rf"board .* holds 1 of its {len(rows)} classes that the model was not "
                                           rf"trained on \({rows[0]['id']}\)"):
        plan_job(2, setup["board"], 2, kind="evaluate", model=str(other))
    with pytest.raises(AlexnetError, match="`crops` must be 1"):
        launcher.alexnet_spark_train(spark, 2, setup["board"], evaluate=True, crops=3)
    assert not spark.sparkContext.statusTracker().getActiveJobsIds(), "nothing was launched"


def test_an_r_launch_is_planned_run_and_added_up_by_the_core(setup):
    """r_job with fake R functions: the task and columns it hands launch(), a failure retried with R's warning."""
    handed, warned = [], []

    def launch(task, columns):
        handed.append((task, columns))
        if len(handed) == 1:
            return {"failure": "RuntimeError: lost executor"}
        return [evaluate_row({"worker": k, "workers": 2, "images": 3 + k, "top1_correct": k, "top5_correct": 2,
                              "top_k": 5, "crops": 1, "protocol": "centre crop", "image_size": 64,
                              "num_classes": CLASSES, "seconds": 1.0, "model": "m", "bad_images": [f"b{k}"],
                              "log": f"node{k}:/tmp/alexnet-logs/worker{k}.log"})
                for k in (1, 0)]

    result = r_launcher.r_job("evaluate", 2, setup["board"], 2, "1", "false", None, launch, model=setup["model_dir"],
                              on_retry=lambda text, fields: warned.append((text, fields)), python=None, retries=1,
                              timeout=60)
    task, columns = handed[0]
    assert task["kind"] == "evaluate" and task["board"] == setup["board"] and task["workers"] == 2
    assert task["evaluation"]["options"]["crops"] == 1 and task["options"]["timeout"] == 60
    assert list(columns) == list(EVALUATE_COLUMNS) and columns["images"] == "int"
    assert len(warned) == 1
    text, fields = warned[0]
    assert "Launching the 2 workers again, scoring every image again (retry 1 of 1)" in text
    # the failure's fields, which R's warning carries: Spark's own failure, before a worker reported one
    assert fields["workers"] == 2 and "RuntimeError: lost executor" in fields["spark_message"]
    evaluation = result["evaluation"]
    assert (evaluation["images"], evaluation["top1_correct"], evaluation["top5_correct"]) == (7, 1, 4)
    assert evaluation["bad_images"] == ["b0", "b1"] and [w["worker"] for w in evaluation["per_worker"]] == [0, 1]
    assert [w["log"] for w in evaluation["per_worker"]] == [f"node{k}:/tmp/alexnet-logs/worker{k}.log" for k in (0, 1)]
    assert result["attempt"] == 2 and [row["attempt"] for row in result["rows"]] == [2, 2]
    with pytest.raises(AlexnetError, match="boom"):
        r_launcher.r_job("evaluate", 2, setup["board"], 2, "1", "false", None,
                         lambda task, columns: {"failure": "RuntimeError: boom"}, model=setup["model_dir"])


@pytest.mark.workers
@pytest.mark.long
def test_a_training_that_ends_with_its_evaluation_counts_as_one_machine_counts_the_saved_model(
        spark, setup, tmp_path):  # noqa: F811
    """Two workers train one epoch and score their partitions' validation images with 10 crops; worker 1 is killed
    once training is over, and the relaunch, with nothing left to train, evaluates the checkpoint's model."""
    from alexnet.train.checkpoint import STATE_FILE

    board, checkpoints, model_dir = setup["board"], tmp_path / "ckpt", tmp_path / "model"

    def trained() -> bool:
        try:
            return json.loads((checkpoints / STATE_FILE).read_text())["epochs_done"] >= 1
        except (OSError, ValueError, KeyError):
            return False

    before = alexnet_model(board, "alexnet", cache_dir=tmp_path / "models")
    versions = len(open_board(board).pins.pin_versions("alexnet", as_df=False))
    killed = kill_worker_once(1, trained)
    run = launcher.alexnet_spark_train(
        spark, 2, board, evaluate=True, crops=10, base_port=free_base_port(2), cache_dir=tmp_path / "cache",
        timeout=400, retries=1, probe=False, epochs=1, batch_size=2, image_size=64, dense_units=32, seed=1,
        checkpoint_dir=str(checkpoints), model_dir=str(model_dir), model_pin="alexnet", collective_timeout=60)
    assert killed.get("pids"), "worker 1 was never seen after training"
    assert [row["attempt"] for row in run] == [2, 2], "one retry"
    assert run[0]["history"]["params"]["initial_epoch"] == 1, "the relaunch had nothing left to train"
    evaluation = run.evaluation

    alone = alexnet_evaluate(str(model_dir), board=board, crops=10, cache_dir=tmp_path / "alone")
    for key in SAME:
        assert evaluation[key] == alone[key], key
    assert evaluation["images"] == CLASSES * 3 and evaluation["crops"] == 10 and evaluation["workers"] == 2
    # each worker scored the validation images of its own partition
    assert [w["images"] for w in evaluation["per_worker"]] == [row["val_images"] for row in run]
    # the flat rows R gets carry each worker's share
    rows = [train_row(row) for row in run]
    assert list(rows[0]) == [*TRAIN_COLUMNS, *(f"eval_{name}" for name in SHARE_COLUMNS)]
    assert sum(row["eval_top1_correct"] for row in rows) == alone["top1_correct"]
    # the card beside the model and the pin's one new version, written once after the evaluation, record it
    assert len(open_board(board).pins.pin_versions("alexnet", as_df=False)) == versions + 1
    recorded = json.loads((model_dir / CARD_FILE).read_text())["evaluation"]
    assert (recorded["images"], recorded["top1_correct"], recorded["top5_correct"], recorded["crops"]) == \
        (alone["images"], alone["top1_correct"], alone["top5_correct"], 10)
    pinned = alexnet_model(board, "alexnet", cache_dir=tmp_path / "models")
    assert pinned["version"] == evaluation["model_pin"]["version"] != before["version"]
    assert evaluation["model"] == f"alexnet@{pinned['version']}"
    assert pinned["evaluation"] == recorded
    assert pinned["weights_sha256"] == run[0]["history"]["weights_sha256"]


@pytest.mark.workers
@pytest.mark.long
def test_a_training_that_ends_with_its_evaluation_says_the_stored_side_once(spark, tmp_path):  # noqa: F811
    """Images stored at a short side of 64, which validation and evaluation at image_size 64 resize to 73: the job
    says so once, from its chief, whether its training validates (the training says it), does not, or has nothing
    left to train (the evaluation says it in either case)."""
    board = synthetic_board(tmp_path, classes=4, val_per_class=2, seed=5, resize=64)
    checkpoints = tmp_path / "ckpt"
    for validation, says in ((True, "validation"), (False, "evaluation"), (True, "evaluation")):  # the last: resumed
        run = launcher.alexnet_spark_train(
            spark, 2, board, evaluate=True, validation=validation, base_port=free_base_port(2),
            cache_dir=tmp_path / "cache", timeout=300, probe=False, epochs=1, batch_size=2, image_size=64,
            dense_units=32, seed=1, checkpoint_dir=str(checkpoints) if not validation or says == "evaluation" else None)
        said = [(row["worker"], message) for row in run for message in row["history"]["warnings"]
                if "were stored with `resize` = 64" in message]
        assert len(said) == 1 and said[0][0] == 0, (validation, said)
        assert f"{says} resizes the short side of each image to 73" in said[0][1], said
        assert run.evaluation["images"] == 4 * 2
    assert run[0]["history"]["params"]["initial_epoch"] == 1, "the last run had nothing left to train"
