"""The benchmark end to end on a tiny input, and the correctness of each technique the pipeline uses to be fast."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from helpers_train import centroid, make_tree, marker_image, write_quirks
from PIL import Image

tf = pytest.importorskip("tensorflow")


from alexnet import cli  # noqa: E402
from alexnet.bench import accuracy as bench_accuracy  # noqa: E402
from alexnet.bench import images as bench_images  # noqa: E402
from alexnet.bench import models as bench_models  # noqa: E402
from alexnet.bench import pipelines as bench_pipelines  # noqa: E402
from alexnet.bench import report as bench_report  # noqa: E402
from alexnet.bench import run as bench_run  # noqa: E402
from alexnet.bench import stages as bench_stages  # noqa: E402
from alexnet.bench.api import alexnet_benchmark  # noqa: E402
from alexnet.bench.plan import check_plan  # noqa: E402
from alexnet.checks import held_text  # noqa: E402
from alexnet.environment import tensorflow_environment  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.train.precision import candidates, hardware  # noqa: E402

STAGE_FIELDS = {"stage", "cores", "images_per_second", "images", "seconds", "load_average", "load_after"}
PIPELINE_FIELDS = STAGE_FIELDS | {"peak_rss_mb", "rss_before_mb", "peak_rss_scope"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return make_tree(tmp_path_factory.mktemp("bench"), classes=2, per_class=8, val_per_class=0, seed=4,
                     min_side=70, max_side=120)


def _auto_precisions() -> tuple[str, ...]:
    """What precision left to choose may become here: float32 alone where the hardware has nothing else."""
    return candidates(hardware(bool(tf.config.list_logical_devices("GPU"))))


@pytest.mark.workers
@pytest.mark.long
def test_benchmark_runs_end_to_end_and_its_json_has_every_field(tree, tmp_path):
    cores = min(2, len(os.sched_getaffinity(0)))
    data = {k: tree[k] for k in ("image", "label", "num_classes")}
    result = alexnet_benchmark(
        data, images=12, batch_size=4, image_size=64, seconds=0, model_steps=1, dense_units=16, cores=cores,
        output_dir=tmp_path,
    )
    saved = json.loads((tmp_path / bench_run.JSON_FILE).read_text())
    assert saved == json.loads(json.dumps(result))
    assert {"machine", "settings", "data", "stages", "summary", "json", "png"} <= set(saved)
    assert {"cpu", "cores", "gpus", "tensorflow"} <= set(saved["machine"])
    assert saved["machine"]["cpu_allocator"] == "bfc"  # the package's choice (conftest imports it before TensorFlow)
    assert saved["machine"]["malloc"] == tensorflow_environment()["ALEXNET_MALLOC"]  # and its malloc settings
    assert saved["data"]["images"] == 12 and saved["data"]["compressed_bytes"] > 0
    assert saved["settings"]["isolation"] == "process"

    core_counts = sorted({1, cores})
    seen = {(s["stage"], s["cores"]) for s in saved["stages"]}
    assert {(stage, c) for stage in bench_stages.PIPELINE_STAGES for c in core_counts} <= seen
    for record in saved["stages"]:
        fields = PIPELINE_FIELDS if record["stage"] in bench_stages.PIPELINE_STAGES else STAGE_FIELDS
        assert fields <= set(record), record
        assert record["images_per_second"] > 0 and record["images"] >= 4
    assert {"synthetic", "train"} <= {s["stage"] for s in saved["stages"]}
    # both compute in the precision training would pick here, and say so
    chosen = [s["precision"] for s in saved["stages"] if s["stage"] in ("synthetic", "train")]
    assert chosen[0] == chosen[1] and chosen[0] in _auto_precisions()
    assert saved["settings"]["precision"] is None and saved["time_to_accuracy"] is None
    # the child really ran pinned to as many CPUs as it says (its peak memory is its own, not this process's)
    assert all(s["peak_rss_mb"] > 50 for s in saved["stages"] if s["stage"] == "io")

    summary = saved["summary"]
    assert set(summary["ratios"]) == {"io_vs_decode_per_core", "io_2_cores_vs_1", "io_vs_naive_2_cores"}
    assert set(summary["comparisons"]) == {"io_vs_naive_auto_2_cores"}
    if cores >= 2:
        auto2 = bench_stages.rate(saved["stages"], "naive_auto", 2)
        io2 = bench_stages.rate(saved["stages"], "io", 2)
        assert summary["comparisons"]["io_vs_naive_auto_2_cores"]["value"] == pytest.approx(io2 / auto2, abs=1e-3)
    io1, decode1 = bench_stages.rate(saved["stages"], "io", 1), bench_stages.rate(saved["stages"], "decode", 1)
    assert summary["ratios"]["io_vs_decode_per_core"]["value"] == pytest.approx(io1 / decode1, abs=1e-3)
    assert summary["bottleneck"] in {"input pipeline", "model compute"}
    synthetic = bench_stages.rate(saved["stages"], "synthetic")
    gpus = len(saved["machine"]["gpus"])
    assert [s["gpus"] for s in saved["stages"] if s["stage"] == "synthetic"] == [gpus]
    assert summary["model_devices"] == max(1, gpus)
    assert summary["cores_to_feed_synthetic"] == math.ceil(synthetic * max(1, gpus) / io1)
    assert (tmp_path / bench_run.PNG_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| io | 1 |" in bench_report.benchmark_table(saved)
    assert all(s["images_per_cpu_second"] > 0 for s in saved["stages"] if s["stage"] in bench_stages.PIPELINE_STAGES)


def test_bench_command_writes_json_with_the_decode_reference(tree, tmp_path, capsys):
    folder = os.path.dirname(os.path.dirname(tree["image"][0]))  # <root>/train, a folder of <wnid>/ folders
    code = cli.main(["-q", "bench", "--data", folder, "--stages", "decode",
                     "--images", "6", "--batch-size", "3", "--seconds", "0", "--cores", "1", "--isolation", "threads",
                     "--output-dir", str(tmp_path), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(s["stage"], s["cores"]) for s in printed["stages"]] == [("decode", 1)]
    assert printed["settings"]["isolation"] == "threads"
    assert (tmp_path / bench_run.JSON_FILE).exists()


def test_fetch_stage_downloads_a_partition_one_at_a_time_then_in_parallel(tmp_path):
    from alexnet import imagenet_synthetic, imagenet_upload

    source = imagenet_synthetic(tmp_path / "src", classes=3, images_per_class=2, val_per_class=0, max_side=48)
    board = str(tmp_path / "board")
    imagenet_upload(source["path"], board=board, workers=2)
    records = bench_models.fetch_measurement(board, workers=3, workdir=tmp_path / "work")
    assert [r["workers"] for r in records] == [1, 3]
    for record in records:
        assert record["images"] == 6 and record["bytes"] > 0 and record["bytes_per_second"] > 0
    summary = bench_report.summarize(records, cores=1)
    expected = records[1]["bytes_per_second"] / records[0]["bytes_per_second"]
    assert summary["ratios"]["fetch_parallel_vs_serial"]["value"] == pytest.approx(expected, abs=1e-3)


def test_the_command_line_fetch_stage_alone_fetches_no_other_images(tmp_path, monkeypatch, capsys):
    """`alexnet bench --stages fetch --board B`: the stage downloads its partition (of `--total`, 16 unless given,
    as in R and Python) twice, and no partition is fetched beforehand for stages that do not run."""
    import json

    from alexnet import cli, imagenet_synthetic, imagenet_upload
    from alexnet.bench.plan import check_plan
    from alexnet.cli import common

    assert check_plan({}).stage["fetch"].fetch_total == 16
    source = imagenet_synthetic(tmp_path / "src", classes=3, images_per_class=2, val_per_class=0, max_side=48)
    board = str(tmp_path / "board")
    imagenet_upload(source["path"], board=board, workers=2)

    with pytest.raises(AlexnetError, match=r"^`fetch_total` \(16\) must not exceed the 3 categories of board .*: "
                                           r"some partitions would be empty; use `fetch_total` <= 3\.$"):
        check_plan({"stages": "fetch", "board": board})  # before any stage runs
    assert cli.main(["bench", "--stages", "fetch", "--board", board]) == 2
    assert "use `--total` <= 3" in capsys.readouterr().err
    # a partition beyond the total is refused before any stage too, whatever the stages (no board read)
    with pytest.raises(AlexnetError, match=r"^`fetch_partition` must be in 0\.\.1 \(0-based, with `fetch_total` = 2\), "
                                           r"not 2\.$"):
        check_plan({"stages": "decode", "fetch_partition": 2, "fetch_total": 2})

    def refused(args):
        raise AssertionError("a partition fetched for stages that do not run")

    monkeypatch.setattr(common, "fetch", refused)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--stages", "fetch", "--board", board, "--total", "3", "--partition", "2",
                     "--output-dir", str(tmp_path / "out"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(s["stage"], s["images"]) for s in printed["stages"]] == [("fetch", 2), ("fetch", 2)]


def test_images_are_sampled_and_unreadable_ones_left_out(tree, tmp_path):
    quirks = write_quirks(tmp_path / "quirks")
    files = [*tree["image"], *(str(p) for p in quirks.values())]
    data = {"image": files, "category": ["a"] * len(files)}
    everything = bench_images.resolve_images(data, 1000)
    # the PNG, the truncated and the empty file cannot go through a plain decode_jpeg; CMYK and grey can
    assert everything.skipped == 3
    assert str(quirks["cmyk"]) in everything.files and str(quirks["png"]) not in everything.files
    sample = bench_images.resolve_images(data, 5, seed=1)
    assert len(sample.files) + sample.skipped == 5
    assert sample.files == bench_images.resolve_images(data, 5, seed=1).files


def test_bottleneck_and_cores_needed_follow_the_measured_rates():
    stages = [
        {"stage": "decode", "cores": 1, "images_per_second": 100.0},
        {"stage": "io", "cores": 1, "images_per_second": 90.0},
        {"stage": "io", "cores": 2, "images_per_second": 170.0},
        {"stage": "naive", "cores": 2, "images_per_second": 80.0},
        {"stage": "naive_auto", "cores": 2, "images_per_second": 100.0},
        {"stage": "synthetic", "cores": 2, "images_per_second": 400.0},
    ]
    summary = bench_report.summarize(stages, cores=2)
    assert summary["bottleneck"] == "input pipeline"
    assert summary["cores_to_feed_synthetic"] == math.ceil(400 / 90)
    ratios = summary["ratios"]
    assert ratios["io_vs_decode_per_core"]["met"] is False
    assert ratios["io_2_cores_vs_1"]["value"] == pytest.approx(170 / 90, abs=1e-3)
    assert ratios["io_vs_naive_2_cores"]["met"] is True
    assert summary["comparisons"]["io_vs_naive_auto_2_cores"]["value"] == pytest.approx(1.7)
    table = bench_report.benchmark_table({"stages": stages, "summary": summary})
    assert "| io on 2 cores / naive_auto on 2 cores | 1.70x | no target | |" in table
    stages[-1]["images_per_second"] = 150.0
    assert bench_report.summarize(stages, cores=2)["bottleneck"] == "model compute"
    # a ratio just below its target is shown below it, rounded down: 1.797 was "1.80x" against 1.8x, "no"
    stages[2]["images_per_second"] = 90.0 * 1.797
    short = bench_report.summarize(stages, cores=2)
    assert short["ratios"]["io_2_cores_vs_1"]["met"] is False
    assert "| io on 2 cores / io on 1 core | 1.79x | 1.8x | no |" in bench_report.benchmark_table(
        {"stages": stages, "summary": short})
    # and an accuracy target's: away from the bound it misses
    assert held_text(0.4049, "at most", 2) == "0.41" and held_text(-0.0004, "at least", 3) == "-0.001"
    assert held_text(-0.0, "at least", 3) == "0.000"
    # a positive value below the last decimal shown: its first significant digit, rounded down, never 0
    assert held_text(0.0075) == "0.007" and held_text(0.00049, digits=3) == "0.0004" and held_text(0.0) == "0.00"
    assert held_text(0.0075, "at most") == "0.01"


def test_the_pipeline_is_compared_with_the_model_on_every_gpu_of_the_machine():
    # 32 cores deliver 24,000 images/s; one GPU trains 4,000, eight of them 32,000: the pipeline is the bottleneck
    stages = [
        {"stage": "io", "cores": 1, "images_per_second": 750.0},
        {"stage": "io", "cores": 32, "images_per_second": 24000.0},
        {"stage": "synthetic", "cores": 32, "images_per_second": 4000.0, "device": "GPU", "gpus": 8},
        {"stage": "train", "cores": 32, "images_per_second": 3000.0},
    ]
    summary = bench_report.summarize(stages, cores=32)
    assert summary["model_devices"] == 8 and summary["model_images_per_second"] == 32000.0
    assert summary["bottleneck"] == "input pipeline"
    assert summary["cores_to_feed_synthetic"] == math.ceil(32000 / 750) == 43
    assert "4000 images/s on one GPU" in summary["bottleneck_detail"]
    assert "32000 on the machine's 8 GPUs (8 times one GPU's rate" in summary["bottleneck_detail"]
    table = bench_report.benchmark_table({"stages": stages, "summary": summary})
    assert "the pipeline needs 43 core(s) to feed the model's rate on 8 GPUs." in table
    # one GPU, or none: the model's rate is the synthetic rate itself
    for gpus, device in ((1, "GPU"), (0, "CPU")):
        stages[2].update(gpus=gpus, device=device)
        alone = bench_report.summarize(stages, cores=32)
        assert alone["model_devices"] == 1 and alone["model_images_per_second"] == 4000.0
        assert alone["bottleneck"] == "model compute" and alone["cores_to_feed_synthetic"] == math.ceil(4000 / 750)
        assert alone["bottleneck_detail"].endswith("the model trains 4000 images/s on batches already in memory")
    del stages[2]["gpus"]  # a record written before the field
    assert bench_report.summarize(stages, cores=32)["model_devices"] == 1


def test_contention_is_a_low_cpu_share_except_for_the_sequential_naive_pipeline():
    stages = [
        {"stage": "io", "cores": 2, "images_per_second": 900.0, "cpu_use": 0.6},
        {"stage": "decode", "cores": 1, "images_per_second": 600.0, "cpu_use": 0.99},
        {"stage": "naive", "cores": 1, "images_per_second": 300.0, "cpu_use": 0.5},
        {"stage": "naive", "cores": 2, "images_per_second": 400.0, "cpu_use": 0.7},
        {"stage": "synthetic", "cores": 2, "images_per_second": 10.0},
        # too short to judge: a pause of the process takes a large share of a tenth of a second
        {"stage": "io", "cores": 1, "images_per_second": 80.0, "cpu_use": 0.5, "seconds": 0.1},
        {"stage": "decode", "cores": 2, "images_per_second": 600.0, "cpu_use": 0.5, "seconds": 1.0},
    ]
    assert [bench_stages.contended(s) for s in stages] == [True, False, True, False, False, False, True]
    assert bench_report.summarize(stages, cores=2)["contended"] == ["io 2c", "naive 1c", "decode 2c"]


def test_cpu_use_is_a_share_of_the_cores_at_most_one():
    from alexnet.bench.measure import cpu_share

    assert cpu_share(1.5, 1.0, 2) == 0.75
    assert cpu_share(3.0, 1.0, 2) == 1.0  # a very short run also counts TensorFlow's start
    assert cpu_share(0.1, 0.0, 2) is None


def test_the_table_lists_stages_in_the_order_asked_and_only_the_targets_measured():
    stages = [
        {"stage": "decode", "cores": 1, "images_per_second": 100.0},
        {"stage": "io", "cores": 2, "images_per_second": 170.0},
        {"stage": "io", "cores": 1, "images_per_second": 90.0},
    ]
    summary = bench_report.summarize(stages, cores=2)
    table = bench_report.benchmark_table({"stages": stages, "summary": summary,
                                          "settings": {"stages": ["io", "decode"]}})
    rows = [line.split("|")[1].strip() + " " + line.split("|")[2].strip() for line in table.splitlines()
            if line.startswith("| io |") or line.startswith("| decode |")]
    assert rows == ["io 1", "io 2", "decode 1"]
    assert "naive" not in table  # its target was not measured
    assert check_plan({"stages": "io,decode"}).common.stages == ("io", "decode")
    assert check_plan({"stages": ["train", "io", "train"]}).common.stages == ("train", "io")


def test_wrong_arguments_say_what_to_change(tree):
    with pytest.raises(AlexnetError, match="warp"):
        alexnet_benchmark(tree, stages="decode,warp")
    with pytest.raises(AlexnetError, match="board"):
        alexnet_benchmark(tree, stages=["fetch"])
    with pytest.raises(AlexnetError, match="cores"):
        alexnet_benchmark(tree, stages="decode", cores=10_000)
    with pytest.raises(AlexnetError, match="ImageNet folder"):
        alexnet_benchmark(42, stages="decode")


def test_a_benchmark_refused_at_its_images_leaves_no_temporary_folder_of_results(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(AlexnetError, match=r'`data\["image"\]` is missing or empty'):
        alexnet_benchmark({"a": 1}, stages="decode", images=4)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("alexnet-benchmark-")]


# -- time to accuracy ------------------------------------------------------------------------------------------

TINY_ACCURACY = {"accuracy_classes": 2, "accuracy_images_per_class": 6, "accuracy_val_per_class": 2,
                 "accuracy_image_size": 64, "accuracy_batch_size": 4, "accuracy_dense_units": 16}


@pytest.mark.workers
@pytest.mark.long
def test_time_to_accuracy_trains_both_recipes_from_each_seed_and_compares_their_medians(tmp_path):
    result = alexnet_benchmark(stages="time_to_accuracy", target_accuracy=0.0, max_epochs=2, repeats=2,
                                         output_dir=tmp_path, **TINY_ACCURACY)
    saved = json.loads((tmp_path / bench_run.JSON_FILE).read_text())
    assert saved == json.loads(json.dumps(result))
    assert saved["stages"] == [] and saved["data"]["images"] == 0  # no other stage ran
    stage = saved["time_to_accuracy"]
    assert stage["settings"]["repeats"] == 2
    assert stage["data"]["num_classes"] == 2 and stage["data"]["train_images"] == 12
    assert stage["data"]["val_images"] == 4
    paper, defaults = stage["recipes"]["paper"], stage["recipes"]["defaults"]
    assert paper["precision"] == "float32" and defaults["precision"] in _auto_precisions()
    assert (paper["lr_scaling"], defaults["lr_scaling"]) == ("none", "linear")
    # the paper: divided by 10 on a plateau, no label smoothing; the defaults: down to zero, labels smoothed by 0.1
    assert (paper["lr_schedule"], defaults["lr_schedule"]) == ("plateau", "linear")
    assert (paper["label_smoothing"], defaults["label_smoothing"]) == (0.0, 0.1)
    # the paper's fixed rate; the defaults' scaled to the batch of 4
    assert paper["learning_rate"] == pytest.approx(0.01) and defaults["learning_rate"] == pytest.approx(0.01 * 4 / 128)
    assert paper["image_sizes"] == [64] and defaults["image_sizes"] == [64]  # 64 is already AlexNet's smallest
    for recipe in (paper, defaults):
        runs = recipe["runs"]
        assert [r["seed"] for r in runs] == recipe["seeds"] == [0, 1]  # one run per seed
        for run in runs:
            assert len(run["val_accuracy"]) == len(run["seconds"]) == 2
            assert all(0.0 <= a <= 1.0 for a in run["val_accuracy"])
            assert 0 < run["seconds"][0] < run["seconds"][1] <= run["training_seconds"]
            assert run["epoch_image_size"] == [64, 64]
            # a target of 0 is reached by the first epoch's validation
            assert run["epochs_to_target"] == 1 and run["seconds_to_target"] == run["seconds"][0]
            assert run["final_accuracy"] == run["val_accuracy"][-1] and run["best_accuracy"] == max(run["val_accuracy"])
            assert run["late_drop"] == pytest.approx(max(0.0, run["val_accuracy"][0] - run["val_accuracy"][1]))
            # the final model, scored on every validation image at its size and 32 pixels above
            assert run["final_eval_accuracy"] == pytest.approx(run["final_accuracy"], abs=1e-3)
            assert 0.0 <= run["final_eval_accuracy_plus32"] <= 1.0
        for name in ("seconds_to_target", "final_accuracy", "best_accuracy", "late_drop"):
            values = sorted(r[name] for r in runs)
            assert recipe[name]["median"] == pytest.approx(sum(values) / 2, abs=1e-3)
            assert (recipe[name]["min"], recipe[name]["max"]) == pytest.approx((values[0], values[-1]), abs=1e-4)
    assert paper["runs"][0]["epoch_learning_rate"] == pytest.approx([0.01, 0.01])  # no plateau within 2 epochs
    first = defaults["runs"][0]["epoch_learning_rate"]
    assert defaults["learning_rate"] > first[0] > first[1] == 0.0
    ratio = defaults["seconds_to_target"]["median"] / paper["seconds_to_target"]["median"]
    assert stage["time_ratio"] == pytest.approx(ratio, abs=1e-3)
    assert stage["accuracy_difference"] == pytest.approx(
        defaults["final_accuracy"]["median"] - paper["final_accuracy"]["median"], abs=1e-4)
    targets = saved["summary"]["time_to_accuracy"]
    assert set(targets) == {"time_ratio", "accuracy_difference", "final_vs_best"}
    assert targets["time_ratio"]["value"] == stage["time_ratio"]
    assert targets["time_ratio"]["met"] == (stage["time_ratio"] <= 0.4)
    assert targets["accuracy_difference"]["met"] == (stage["accuracy_difference"] >= 0.0)
    assert (tmp_path / bench_run.PNG_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = bench_report.benchmark_table(saved)
    assert "| paper | float32 | 64 (2) | 0.01, plateau |" in table and "| defaults |" in table
    assert "Medians over 2 seed(s)" in table


def _run(seconds, accuracies, target):
    epoch = bench_accuracy._reached(accuracies, target)
    return {"seed": 0, "seconds": seconds, "val_accuracy": accuracies, "final_accuracy": accuracies[-1],
            "best_accuracy": max(accuracies), "late_drop": bench_accuracy.late_drop(accuracies),
            "epochs_to_target": epoch, "seconds_to_target": None if epoch is None else seconds[epoch - 1],
            **{k: None for k in ("precision", "precision_reason", "image_sizes", "image_size_epochs", "lr_scaling",
                                 "lr_schedule", "label_smoothing", "learning_rate")}}


def _recipe(name, *runs):
    return bench_accuracy.summarize(name, list(runs))


def test_the_largest_fall_is_counted_in_the_second_half_only():
    assert bench_accuracy.late_drop([0.9, 0.1, 0.5, 0.6]) == pytest.approx(0.0)  # the fall at epoch 2 is early
    assert bench_accuracy.late_drop([0.2, 0.4, 0.8, 0.5, 0.7, 0.6]) == pytest.approx(0.3)
    assert bench_accuracy.late_drop([0.5]) == 0.0


def test_medians_count_a_target_never_reached_as_the_slowest():
    assert bench_accuracy.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "count": 3}
    assert bench_accuracy.spread([3.0, None, 2.0]) == {"median": 3.0, "min": 2.0, "max": None, "count": 2}
    assert bench_accuracy.spread([None, None, 2.0])["median"] is None


def test_the_comparison_uses_the_medians_and_the_recipes_that_reached_the_target():
    plan = bench_accuracy.AccuracySettings(target_accuracy=0.6, max_epochs=3, repeats=3, accuracy_classes=10,
                                           accuracy_images_per_class=10, accuracy_val_per_class=2,
                                           accuracy_image_size=128, accuracy_batch_size=128, accuracy_dense_units=64,
                                           accuracy_workers=1, accuracy_levers=None,
                                           accuracy_link="loopback")
    paper = _recipe("paper", _run([10.0, 20.0, 30.0], [0.3, 0.65, 0.8], 0.6),
                    _run([10.0, 20.0, 30.0], [0.3, 0.5, 0.7], 0.6),  # 30 s: the median
                    _run([10.0, 20.0, 30.0], [0.6, 0.65, 0.9], 0.6))
    defaults = _recipe("defaults", _run([4.0, 8.0, 12.0], [0.35, 0.7, 0.79], 0.6),
                       _run([4.0, 8.0, 12.0], [0.65, 0.9, 0.85], 0.6),
                       _run([4.0, 8.0, 12.0], [0.2, 0.3, 0.5], 0.6))  # never: the slowest, not the median
    assert paper["seconds_to_target"]["median"] == 20.0 and defaults["seconds_to_target"]["median"] == 8.0
    assert paper["seconds_to_target"]["max"] == 30.0 and defaults["seconds_to_target"]["max"] is None
    compared = bench_accuracy.compare(paper, defaults, plan)
    assert compared["time_ratio"]["value"] == pytest.approx(0.4) and compared["time_ratio"]["met"] is True
    assert compared["accuracy_difference"]["value"] == pytest.approx(0.79 - 0.8)
    assert compared["accuracy_difference"]["met"] is False  # below the paper recipe's final accuracy
    assert compared["final_vs_best"]["value"] == pytest.approx(0.0) and compared["final_vs_best"]["met"] is True
    never = _recipe("defaults", *[_run([6.0, 13.0, 21.0], [0.2, 0.3, 0.5], 0.6)] * 3)
    lost = bench_accuracy.compare(paper, never, plan)
    assert lost["time_ratio"]["value"] is None and lost["time_ratio"]["met"] is False
    assert bench_accuracy.compare(never, defaults, plan)["time_ratio"]["met"] is True
    assert bench_accuracy.compare(never, never, plan)["time_ratio"]["met"] is None
    fell = _recipe("defaults", *[_run([4.0, 8.0, 12.0], [0.5, 0.9, 0.6], 0.6)] * 3)
    dropped = bench_accuracy.compare(paper, fell, plan)["final_vs_best"]
    assert dropped["value"] == pytest.approx(-0.3) and dropped["met"] is False


def test_recipes_that_train_alike_are_trained_once_and_reported_under_every_name(monkeypatch, caplog):
    """`accuracy_levers` of the same settings (bfloat16 and allreduce_precision=bfloat16; today, the defaults
    themselves) each trained every seed again: the stage's longest work done twice, to the same curves."""
    calls: list[tuple[str, int]] = []

    def fake_run(recipe, data, plan, *, seed, **kwargs):
        calls.append((recipe, seed))
        record = _run([4.0, 8.0], [0.5, 0.6 + 0.01 * len(calls)], 0.6)  # no two runs alike
        return {**record, "seed": seed, "image_sizes": [64, 96], "image_size_epochs": [1, 1], "learning_rate": 0.01,
                "lr_schedule": "linear", "precision": "float32"}

    monkeypatch.setattr(bench_accuracy, "run_recipe", fake_run)
    plan = check_plan({"stages": "time_to_accuracy", "max_epochs": 2, "repeats": 2, "accuracy_levers": [
        "bfloat16", "today", "allreduce_precision=bfloat16", "packed", "accumulate_steps=1", "packed"]}).accuracy
    with caplog.at_level("INFO", logger="alexnet.bench.accuracy"):
        result = bench_accuracy.time_to_accuracy({}, {}, plan)
    trained = ["paper", "defaults", "defaults+bfloat16", "defaults+packed"]
    assert calls == [(recipe, seed) for seed in (0, 1) for recipe in trained]
    said = [r.getMessage() for r in caplog.records if "train alike" in r.getMessage()]
    assert said == ["The time_to_accuracy stage trains once the recipes that train alike, and gives each name its "
                    "results: defaults, defaults+today and defaults+accumulate_steps=1 (trained as defaults); "
                    "defaults+bfloat16 and defaults+allreduce_precision=bfloat16 (trained as defaults+bfloat16)."]
    recipes, levers = result["recipes"], result["levers"]
    assert list(recipes) == ["paper", "defaults", "defaults+bfloat16", "defaults+today",
                             "defaults+allreduce_precision=bfloat16", "defaults+packed", "defaults+accumulate_steps=1"]
    for name, first in (("defaults+today", "defaults"), ("defaults+accumulate_steps=1", "defaults"),
                        ("defaults+allreduce_precision=bfloat16", "defaults+bfloat16")):
        assert recipes[name] == {**recipes[first], "recipe": name, "same_as": first}
        assert levers[name]["same_as"] == first and "same_as" not in recipes[first]
        assert {k: v for k, v in levers[name].items() if k != "same_as"} == \
            bench_accuracy.against_defaults(recipes[first], recipes["defaults"])
    assert "same_as" not in levers["defaults+bfloat16"] and "same_as" not in levers["defaults+packed"]
    table = bench_report.accuracy_table(result)
    assert "| defaults+allreduce_precision=bfloat16 (trained as defaults+bfloat16) | " in table
    assert table.count("| defaults+today (trained as defaults) | ") == 2  # the recipes' table and the levers'
    # the chart draws the curves trained once, each legend naming every recipe trained so
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from alexnet.bench.chart import _accuracy_panel

    figure, axes = pyplot.subplots()
    _accuracy_panel(axes, result)
    legends = [line.get_label() for line in axes.get_lines() if not line.get_label().startswith("_")]
    pyplot.close(figure)
    assert [legend.split(":")[0] for legend in legends] == [
        "paper", "defaults, defaults+today, defaults+accumulate_steps=1",
        "defaults+bfloat16, defaults+allreduce_precision=bfloat16", "defaults+packed", "target 0.75"]


def test_an_output_dir_that_cannot_be_written_is_refused_before_any_work(tmp_path, monkeypatch):
    """It was made as a local folder named after the URL (``./ftp:/h/x``), or failed after the measurement."""
    monkeypatch.chdir(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for given, said in (("ftp://h/x", r"unsupported scheme ftp://; use a folder path, file://, gs:// or s3://$"),
                        ("https://127.0.0.1:9/b", r"an https:// location is read only"),
                        (str(a_file), r"it, or a folder above it, is a file, not a folder")):
        with pytest.raises(AlexnetError, match=said):
            alexnet_benchmark(stages="decode", output_dir=given)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_benchmark_stopped_before_its_first_output_leaves_no_folder_it_made(tmp_path, monkeypatch):
    """Ctrl-C (or an error) before anything was written: the output folder the run made, and the parents made for
    it, go; a folder that was there before stays, as does one holding a file (a worker's log). They all stayed."""
    from alexnet.bench import scaling
    from alexnet.bench.run import ROWS_FILE

    def stopped(plan, data, workdir):
        raise KeyboardInterrupt

    images = bench_run._images
    monkeypatch.setattr(bench_run, "_images", stopped)
    made = tmp_path / "new" / "out"
    with pytest.raises(KeyboardInterrupt):
        alexnet_benchmark(stages="decode", output_dir=str(made))
    assert not (tmp_path / "new").exists() and tmp_path.is_dir()
    there = tmp_path / "there"
    there.mkdir()
    with pytest.raises(KeyboardInterrupt):
        alexnet_benchmark(stages="decode", output_dir=str(there))
    assert there.is_dir() and not any(there.iterdir())
    # the scaling stage stopped in its first run: its empty file of rows goes, a worker's log keeps the folder
    monkeypatch.setattr(bench_run, "_images", images)
    monkeypatch.setattr(scaling, "scaling_data", lambda plan, workdir: [{}, {}])

    def first_run(plan, levers, data, link, workers, cpus, log_dir):
        assert (made / ROWS_FILE).exists()
        (log_dir / "worker0-of-1.log").write_text("started\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(scaling, "_run", first_run)
    with pytest.raises(KeyboardInterrupt):
        alexnet_benchmark(stages="scaling", links="loopback", levers="today", output_dir=str(made))
    assert [p.name for p in made.rglob("*") if p.is_file()] == ["worker0-of-1.log"]


def test_sigterm_stops_a_benchmark_as_ctrl_c_does_leaving_no_empty_folder(tmp_path, processes):
    """SIGTERM ended the process at once: the output folder it had made stayed behind, empty."""
    import subprocess
    import sys
    import textwrap

    from helpers_processes import read_until

    made = tmp_path / "new" / "out"
    script = textwrap.dedent("""
        import sys, time
        from alexnet import cli
        from alexnet.bench import run

        def measuring(plan, data, workdir):
            print("measuring", flush=True)
            time.sleep(120)

        run._images = measuring
        sys.exit(cli.main(["bench", "--stages", "decode", "--output-dir", sys.argv[1]]))
    """)
    child = processes.popen([sys.executable, "-c", script, str(made)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    read_until(child.stdout, "measuring", 120)
    assert made.is_dir()
    child.terminate()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "alexnet bench: interrupted" in err
    assert not (tmp_path / "new").exists()


def test_the_results_and_the_rows_go_to_a_bucket(cloud_env, tmp_path):
    """An output_dir on a bucket holds the result, the chart, and while the scaling stage runs its rows, which a
    resumed run reads back from there."""
    import fsspec

    from alexnet.bench.run import ROWS_FILE, RowLog
    from alexnet.storage.mirror import MirroredFolder

    fs = fsspec.filesystem("s3")
    where = f"s3://alexnet-outputs/bench-{tmp_path.name}"
    result = alexnet_benchmark(stages="decode", images=8, image_size=63, seconds=0.2, output_dir=where)
    assert (result["json"], result["png"]) == (f"{where}/{bench_run.JSON_FILE}", f"{where}/{bench_run.PNG_FILE}")
    assert json.loads(fs.cat_file(result["json"]))["settings"]["stages"] == ["decode"]
    assert fs.cat_file(result["png"])[:4] == b"\x89PNG"
    rows = RowLog(MirroredFolder(where, "`output_dir`"))
    record = {"runs": {}, "measured_with": {"x": 1}}
    rows(record)
    assert fs.cat_file(f"{where}/{ROWS_FILE}").decode() == json.dumps(record) + "\n", "uploaded as it is measured"
    rows.folder.close()
    again = RowLog(MirroredFolder(where, "`output_dir`"), resume=True)  # another process, another scratch folder
    assert again.kept == [record]
    again.done()
    assert not fs.exists(f"{where}/{ROWS_FILE}")
    again.folder.close()


def test_time_to_accuracy_arguments_are_checked_before_any_work(tmp_path):
    for bad in (1.5, -0.1):
        with pytest.raises(AlexnetError, match="target_accuracy"):
            alexnet_benchmark(stages="time_to_accuracy", target_accuracy=bad, output_dir=tmp_path)
    with pytest.raises(AlexnetError, match="max_epochs"):
        alexnet_benchmark(stages="time_to_accuracy", max_epochs=0, output_dir=tmp_path)
    with pytest.raises(AlexnetError, match="repeats"):
        alexnet_benchmark(stages="time_to_accuracy", repeats=0, output_dir=tmp_path)
    with pytest.raises(AlexnetError, match="accuracy_image_size"):
        alexnet_benchmark(stages="time_to_accuracy", accuracy_image_size=32, output_dir=tmp_path)
    with pytest.raises(AlexnetError, match="precision"):
        alexnet_benchmark(stages="time_to_accuracy", precision="float8", output_dir=tmp_path)
    with pytest.raises(AlexnetError, match="no validation images"):
        alexnet_benchmark({"image": ["a.JPEG", "b.JPEG"], "category": ["x", "y"]},
                                    stages="time_to_accuracy", output_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # nothing was written


def test_bench_command_passes_the_time_to_accuracy_options(monkeypatch, capsys):
    seen = {}

    def fake(plan, data):
        seen["plan"] = plan
        raise AlexnetError("stop here")

    monkeypatch.setattr(bench_run, "run", fake)
    code = cli.main(["-q", "bench", "--stages", "time_to_accuracy", "--target-accuracy", "0.7", "--max-epochs", "5",
                     "--precision", "float32", "--accuracy-image-size", "96"])
    assert code == 2 and "stop here" in capsys.readouterr().err
    plan = seen["plan"]
    assert plan.common.stages == ("time_to_accuracy",) and plan.common.precision == "float32"
    assert (plan.accuracy.target_accuracy, plan.accuracy.max_epochs, plan.accuracy.accuracy_image_size) == (0.7, 5, 96)
    assert plan.accuracy.repeats == 3, "the options left out keep their defaults"


# -- the compared pipelines -----------------------------------------------------------------------------------


def test_naive_and_decode_reference_pipelines_do_what_they_say(tree):
    files = tree["image"][:6]
    batches = list(bench_pipelines.naive_dataset(files, 3, 32, parallel=2, repeat=False))
    assert [tuple(b.shape) for b in batches] == [(3, 32, 32, 3)] * 2
    assert batches[0].dtype == tf.float32
    # float pixels scaled to 0-1 (then jittered, unclipped as in the seed), not 0-255
    assert float(tf.reduce_max(batches[0])) < 2.0 and float(tf.reduce_min(batches[0])) >= 0.0
    # the seed's maps without num_parallel_calls stay sequential; naive_auto leaves tf.data's rewrite on
    sequential = bench_pipelines.naive_dataset(files, 3, 32, parallel=2, repeat=False)
    automatic = bench_pipelines.naive_dataset(files, 3, 32, parallel=2, repeat=False, sequential=False)
    assert sequential.options().experimental_optimization.map_parallelization is False
    assert automatic.options().experimental_optimization.map_parallelization is not False
    assert [tuple(b.shape) for b in automatic] == [(3, 32, 32, 3)] * 2
    contents = [Path(f).read_bytes() for f in files]
    shapes = next(iter(bench_pipelines.decode_dataset(contents, 6, parallel=1))).numpy().tolist()
    expected = [list(np.asarray(Image.open(f)).shape) for f in files]
    assert sorted(shapes) == sorted(expected)


# -- the techniques ---------------------------------------------------------------------------------------


def test_pre_resized_storage_keeps_the_picture_at_the_asked_short_side(tree, tmp_path):
    big = tmp_path / "big.JPEG"
    big.write_bytes(marker_image(600, 900, (200, 300, 260, 380)))
    small = tree["image"][0]
    stored = bench_images.store_resized([str(big), small], 256, tmp_path / "stored", workers=1)
    resized = Image.open(stored[0])
    assert min(resized.size) == 256 and resized.size == (384, 256)
    assert Path(stored[1]).read_bytes() == Path(small).read_bytes()  # already small: kept as it is
    centre = centroid(np.asarray(resized))
    assert np.abs(centre - np.array([230 * 256 / 600, 340 * 256 / 600])).max() < 1.5


def test_pre_resized_run_feeds_io_the_stored_copies_and_decode_the_originals(tree, tmp_path):
    data = {k: tree[k] for k in ("image", "label", "num_classes")}
    result = alexnet_benchmark(data, stages="decode,io", images=6, batch_size=3, image_size=32, seconds=0,
                                     cores=1, resize=64, isolation="threads", output_dir=tmp_path)
    assert result["settings"]["resize"] == 64
    assert "short side 64" in result["data"]["io_reads"]
    assert result["data"]["decode_and_naive_read"] == "the original files"
    # the stored copies (short side 64; the upload stores no less than 63) weigh less than the originals (70-120 px)
    assert 0 < result["data"]["compressed_bytes"] < result["data"]["original_bytes"]
    assert {s["stage"] for s in result["stages"]} == {"decode", "io"}
