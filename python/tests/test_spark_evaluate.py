"""Evaluation over Spark barrier tasks in local[2]: the workers' counts add up to the one-machine evaluation."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("tensorflow")

from helpers_model import card_for, save_model_dir, synthetic_board, tiny_model
from test_spark import spark  # noqa: F401  (the module's local[2] Spark application)

from alexnet.data.fetch import imagenet_categories
from alexnet.errors import AlexnetError
from alexnet.launch import evaluate as launcher
from alexnet.model.evaluate import alexnet_evaluate
from alexnet.model.pin import alexnet_model, publish_model

CLASSES = 6


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


@pytest.mark.slow
def test_two_workers_add_up_to_the_one_machine_evaluation(spark, setup):  # noqa: F811
    pin = alexnet_model(setup["board"], "alexnet", cache_dir=setup["root"] / "models")
    for model in (pin, setup["model_dir"]):
        result = launcher.alexnet_spark_evaluate(spark, model, 2, setup["board"], batch_size=4,
                                                 cache_dir=str(setup["root"] / "cache"), timeout=300)
        alone = alexnet_evaluate(model, board=setup["board"], cache_dir=setup["root"] / "cache", batch_size=7)
        for key in ("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy", "top_k", "crops",
                    "protocol", "image_size", "num_classes", "bad_images", "model"):
            assert result[key] == alone[key], key
        assert result["images"] == CLASSES * 3 and result["workers"] == 2
        per = result["per_worker"]
        assert [w["worker"] for w in per] == [0, 1] and all(w["images"] > 0 for w in per)
        assert sum(w["images"] for w in per) == result["images"]
        assert sum(w["top1_correct"] for w in per) == result["top1_correct"]
        assert sum(w["top5_correct"] for w in per) == result["top5_correct"]


def test_what_cannot_work_is_refused_on_the_driver(spark, setup):  # noqa: F811
    with pytest.raises(AlexnetError, match="a model every worker can reach"):
        launcher.alexnet_spark_evaluate(spark, setup["model"], 2, setup["board"])
    with pytest.raises(AlexnetError, match="3 workers need 3 task slots"):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 3, setup["board"])
    with pytest.raises(AlexnetError, match="does not exist"):
        launcher.alexnet_spark_evaluate(spark, str(setup["root"] / "nothing"), 2, setup["board"])
    with pytest.raises(AlexnetError, match="`crops` must be 1"):
        launcher.alexnet_spark_evaluate(spark, setup["model_dir"], 2, setup["board"], crops=3)
    # workers beyond the categories with validation images, checked with more slots than that
    with pytest.raises(AlexnetError, match=r"7 workers need at least 7 categories with validation images"):
        launcher.plan_evaluation(setup["model_dir"], 7, setup["board"], 16)
    assert not spark.sparkContext.statusTracker().getActiveJobsIds(), "nothing was launched"


def test_an_r_launch_is_planned_run_and_added_up_by_the_core(setup):
    """r_evaluate with fake R functions: the task it hands launch() runs in evaluate_row as R's closure would."""
    handed = []

    def launch(task):
        handed.append(task)
        return [launcher.worker_row({"worker": k, "workers": 2, "images": 3 + k, "top1_correct": k, "top5_correct": 2,
                                     "top_k": 5, "crops": 1, "protocol": "centre crop", "image_size": 64,
                                     "num_classes": CLASSES, "seconds": 1.0, "model": "m", "bad_images": [f"b{k}"]})
                for k in (1, 0)]

    result = launcher.r_evaluate(2, setup["board"], 2, "1", "false", None, launch, model=setup["model_dir"],
                                 on_retry=lambda message: None, python=None)
    assert handed[0]["board"] == setup["board"] and handed[0]["workers"] == 2 and handed[0]["crops"] == 1
    assert (result["images"], result["top1_correct"], result["top5_correct"]) == (7, 1, 4)
    assert result["bad_images"] == ["b0", "b1"] and [w["worker"] for w in result["per_worker"]] == [0, 1]
    assert list(launcher.evaluate_columns()) == list(launcher.EVALUATE_COLUMNS)
    with pytest.raises(AlexnetError, match="boom"):
        launcher.r_evaluate(2, setup["board"], 2, "1", "false", None, lambda task: {"failure": "RuntimeError: boom"},
                            model=setup["model_dir"])
