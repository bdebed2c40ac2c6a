"""The scaling stage: links, lever sets, the projection, the workers' processes and what they leave behind.

The shaped links need root (network namespaces and tc); those tests are skipped without it. Every test that makes
namespaces checks that ``ip netns list`` is as before once it ends, also after a killed worker, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers_processes import Processes

from alexnet.bench import cluster
from alexnet.bench import link as links
from alexnet.bench.lever_sets import LEVER_SETS, lever_text, parse_lever_set
from alexnet.bench.projection import Measured, efficiency, mxnet_efficiency, project, ring_seconds
from alexnet.bench.report import accuracy_table, scaling_table
from alexnet.bench.scaling import ScalingPlan
from alexnet.bench.scaling_rows import projections, summarize_scaling
from alexnet.bench.scaling_worker import typical_step
from alexnet.errors import AlexnetError
from alexnet.train.batch_bound import LARGEST_GLOBAL_BATCH, large_batch_warning

HERE = Path(__file__).resolve()
ROOT = links.can_shape() is None
needs_root = pytest.mark.skipif(not ROOT, reason=links.can_shape() or "")


def test_links_are_read_as_tc_writes_rates():
    assert links.parse_link("1gbit") == links.LinkSpec("1gbit", 1e9, None)
    assert links.parse_link("10Gbit/0.5ms") == links.LinkSpec("10gbit/0.5ms", 1e10, 0.5)
    assert links.parse_link("200mbit/250us").rtt_ms == 0.25
    assert not links.parse_link("loopback").shaped
    assert [link.name for link in links.parse_links("10gbit,loopback,1gbit")] == ["loopback", "10gbit", "1gbit"]
    for bad in ("fast", "1gb", "0gbit", "1gbit/5s"):
        with pytest.raises(AlexnetError, match="give \"loopback\" or a rate as tc writes it"):
            links.parse_link(bad)


def test_lever_sets_by_name_or_as_checked_training_settings():
    assert parse_lever_set("today") == ("today", {})
    assert parse_lever_set("packed")[1] == LEVER_SETS["packed"]
    _, settings = parse_lever_set("accumulate_steps=8+allreduce_precision=bf16+allreduce_pack_mb=2.5")
    assert settings == {"accumulate_steps": 8, "allreduce_precision": "bfloat16", "allreduce_pack_mb": 2.5}
    with pytest.raises(AlexnetError, match="Unknown lever set 'fastest'"):
        parse_lever_set("fastest")
    with pytest.raises(AlexnetError, match=r"sync_evrey.*sync_every"):
        parse_lever_set("sync_evrey=4")
    with pytest.raises(AlexnetError, match="`accumulate_steps` must be a whole number >= 1"):
        parse_lever_set("accumulate_steps=0")
    with pytest.raises(AlexnetError, match="cannot change batch_size"):
        parse_lever_set("batch_size=64")
    with pytest.raises(AlexnetError, match=r"^the lever set 'sync_every=four' gives `sync_every` 'four', which is "
                                           r"not a number\.$"):
        parse_lever_set("sync_every=four")
    with pytest.raises(AlexnetError, match=r"^`allreduce_pack_mb` must be a number >= 0, not inf\.$"):
        parse_lever_set("allreduce_pack_mb=inf")
    with pytest.raises(AlexnetError, match=r"'sync_every=4\+sync_every=8' gives sync_every more than once"):
        parse_lever_set("sync_every=4+sync_every=8")
    # a name among settings, a trailing +, a value without its setting: one line, where Python's unpacking failed
    for word, odd in (("packed+accumulate_steps=2", "'packed'"), ("accumulate_steps=2+", "''"), ("=2", "'=2'")):
        with pytest.raises(AlexnetError, match=rf"^The lever set '{re.escape(word)}' has {odd}, which is no "
                                               r"setting=value: a lever set is a name alone, or settings written"):
            parse_lever_set(word)
    # written back as a lever set (what a run advised, in the stage's table), read again as the same settings
    for name in LEVER_SETS:
        assert parse_lever_set(lever_text(LEVER_SETS[name]) or "today")[1] == LEVER_SETS[name]
    assert lever_text(settings) == "accumulate_steps=8+allreduce_precision=bfloat16+allreduce_pack_mb=2.5"
    # a flag, written as the lever set "adapted" takes it
    assert parse_lever_set("adapted")[1] == {"adapt_communication": True}
    assert parse_lever_set("adapt_communication=FALSE")[1] == {"adapt_communication": False}
    assert lever_text({"adapt_communication": True}) == "adapt_communication=true"
    with pytest.raises(AlexnetError, match="`adapt_communication` must be True, False or None"):
        parse_lever_set("adapt_communication=maybe")


def test_a_run_that_took_more_micro_batches_is_compared_with_a_lone_worker_over_as_many_images():
    from alexnet.bench.scaling_rows import scaling_row

    def run(images: int, seconds: float, cpu: float, **more) -> dict:
        return {"workers": [{"images_per_step": images, "typical_step_seconds": seconds,
                             "typical_step_cpu_seconds": cpu, "allreduce_seconds": 0.5, "precision": "float32",
                             "micro_batches": images // 32, "bytes_per_step": 1e6, "estimated_efficiency": 0.5,
                             "adapted": more.get("adapted", ""), "advised": ""}],
                "load_before": 0.0, "load_after": 0.0}

    # adapt_communication: the two workers took 4 micro-batches of 32 images a step, the lone worker trained 1
    many = run(128, 5.0, 9.0, adapted="accumulate_steps=4")
    many["workers"].append(many["workers"][0])
    row = scaling_row("adapted", {"adapt_communication": True}, links.LinkSpec("loopback"), run(32, 1.0, 2.0), many, 2)
    assert row["efficiency"] == pytest.approx(0.8) and row["compute_seconds"] == pytest.approx(4.0)
    assert row["images_per_second_1"] == pytest.approx(32.0) and row["images_per_second"] == pytest.approx(51.2)
    assert row["exposed_seconds"] == pytest.approx(1.0) and row["extra_cpu_seconds"] == pytest.approx(1.0)
    assert row["micro_batches"] == 4 and row["adapted"] == "accumulate_steps=4"
    assert "| adapted (took accumulate_steps=4) | loopback |" in scaling_table({"rows": [row]})
    # an efficiency (and an estimate) just below the share advised are shown below it, rounded down
    shown = scaling_table({"rows": [{**row, "efficiency": 0.8996, "estimated_efficiency": 0.8996}]})
    assert "| 0.89 | " in shown and "0.90" not in shown
    # two workers over a slow link at 0.0075 of linear: its first digit, never "0.00"
    slow = scaling_table({"rows": [{**row, "efficiency": 0.0075, "estimated_efficiency": 0.0042}]})
    assert "| 0.007 | " in slow and "| 0.004 | " in slow and "0.00 |" not in slow
    assert row["cpu_use_1"] == 1.0 and not row["contended"]
    # a lone worker whose step got 0.4 of its CPU: other work slowed it, and every ratio to it is off
    slowed = scaling_row("today", {}, links.LinkSpec("1gbit"), run(32, 1.0, 0.4), many, 2)
    slowed["load_before"] = 8.05
    assert slowed["cpu_use_1"] == pytest.approx(0.4) and slowed["contended"]
    summary = summarize_scaling([slowed])
    table = scaling_table({"rows": [slowed], "summary": summary})
    assert "| 0.40 * |" in table and "load average 8.1 before the run" in table
    assert table.endswith("| at least 0.85 | no (slowed down by other work) |")


def test_a_run_that_took_micro_batches_is_compared_with_a_lone_worker_timed_with_them(monkeypatch, tmp_path):
    """A lone worker without the micro-batches the two took was counted for as many images: micro-batches alone
    speed a step up, which was credited as scaling (above 1.0 where they sped it more than the link slowed it)."""
    from alexnet.bench import run as bench
    from alexnet.bench import scaling
    from alexnet.bench.plan import check_plan

    calls: list[tuple[dict, int]] = []

    def fake_run(plan, levers, data, link, workers, cpus, log_dir) -> dict:
        calls.append((dict(levers), workers))
        took = workers > 1 and levers.get("adapt_communication")
        micro = 4 if took or levers.get("accumulate_steps") == 4 else 1
        seconds = {1: 1.0, 4: 3.0}[micro] if workers == 1 else 3.6  # 4 micro-batches alone: 3 s, not 4
        worker = {"images_per_step": 32 * micro, "typical_step_seconds": seconds, "typical_step_cpu_seconds": seconds,
                  "allreduce_seconds": 0.5, "precision": "float32", "micro_batches": micro, "bytes_per_step": 1e6,
                  "estimated_efficiency": 0.8, "adapted": "accumulate_steps=4" if took else "", "advised": ""}
        return {"workers": [worker] * workers, "load_before": 0.0, "load_after": 0.0}

    monkeypatch.setattr(scaling, "_run", fake_run)
    monkeypatch.setattr(scaling, "scaling_data", lambda plan, workdir: [{}, {}])
    plan = check_plan({"stages": "scaling", "links": "loopback", "levers": ["adapted"], "output_dir": str(tmp_path)})
    (row,) = bench.run(plan)["scaling"]["rows"]
    assert row["efficiency"] == pytest.approx(3.0 / 3.6, abs=1e-4), "against a lone worker of 4 micro-batches"
    lone = [levers for levers, workers in calls if workers == 1]
    assert len(lone) == 2 and lone[1]["accumulate_steps"] == 4 and "adapt_communication" not in lone[1]


def test_post_local_sgd_is_a_lever_set_of_the_accuracy_stage_only():
    # the scaling stage times a few steps of one epoch: with local_sgd_after they would all be synchronous
    import alexnet

    assert parse_lever_set("sync_every=4+local_sgd_after=2")[1] == {"sync_every": 4, "local_sgd_after": 2}
    with pytest.raises(AlexnetError, match=r"sets local_sgd_after.*time_to_accuracy stage"):
        alexnet.alexnet_benchmark(stages="scaling", levers="sync_every=4+local_sgd_after=2")


def test_the_projection_is_the_ring_all_reduce_model():
    # 250 MB a step over two workers on 1 Gbit/s: each sends and receives 250 MB, 2 s
    assert ring_seconds(250e6, 2, 1e9) == pytest.approx(2.0)
    assert ring_seconds(250e6, 256, 1e9) == pytest.approx(2 * 255 / 256 * 2.0)
    assert ring_seconds(250e6, 4, 1e9, latency=0.001) == pytest.approx(1.5 * 2.0 + 0.006)
    assert efficiency(1.0, 250e6, 2, 1e9) == pytest.approx(1 / 3)
    assert efficiency(1.0, 250e6, 2, 1e9, hidden=0.5) == pytest.approx(1 / 2.5)
    assert efficiency(4.0, 125e6, 2, 1e10) == pytest.approx(4 / 4.1)
    # measured: 1 s of compute, 2 workers took 1.6 s a step; the all-reduce alone 1 s where the link allows 0.8 s
    measured = Measured(compute=1.0, step=1.6, alone=1.0, step_bytes=100e6, rate=1e9)
    assert measured.share == pytest.approx(0.8)
    assert measured.hidden == pytest.approx(0.4)
    (record,) = project(measured, [1.0], workers=[2])
    assert record["efficiency"] == [pytest.approx(1 / 1.6, abs=1e-4)] and measured.overhead == 0.0
    # a step of two that lost more than its all-reduce alone (0.95 s exposed, 0.84 s alone): the rest, 0.11 s of 1 s
    # of compute, stays in the projection, which gives back the measured efficiency at the measured compute
    lossy = Measured(compute=1.0, step=1.95, alone=0.84, step_bytes=100e6, rate=1e9)
    assert lossy.hidden == 0.0 and lossy.overhead == pytest.approx(0.11)
    (near, far) = project(lossy, [1.0], workers=[2, 16])[0]["efficiency"]
    assert near == pytest.approx(1 / 1.95, abs=1e-4) and near < 1 / (1 + 0.84)
    assert far == pytest.approx(1 / (1 + 2 * 15 / 16 * 0.8 / lossy.share + 0.11), abs=1e-4)
    assert efficiency(2.0, 250e6, 2, 1e9, overhead=0.1) == pytest.approx(2 / (2 + 2 + 0.2))
    table = dict(mxnet_efficiency())
    assert table[1] == 1.0 and table[256] == pytest.approx(0.5294, abs=1e-3)
    # on a link of 10 ms one way, the two rounds of latency the pair waited are not the link's rate: the share is
    # that of the rest, and the projection waits 2 (N - 1) rounds
    slow = Measured(compute=1.0, step=1.62, alone=1.02, step_bytes=100e6, rate=1e9, latency=0.01)
    assert slow.share == pytest.approx(0.8)
    (near, far) = project(slow, [1.0], workers=[2, 256])[0]["efficiency"]
    assert (near, far) == (pytest.approx(1 / (1 + max(0.0, 0.8 / 0.8 + 0.02 - slow.hidden)), abs=1e-4),
                           pytest.approx(1 / (1 + max(0.0, 2 * 255 / 256 * 0.8 / 0.8 + 2 * 255 * 0.01 - slow.hidden)),
                                         abs=1e-4))


def test_the_projections_of_a_row_take_its_links_latency():
    row = {"levers": "today", "link": "1gbit", "rate": 1e9, "compute_seconds": 1.0, "step_seconds": 1.6,
           "allreduce_seconds": 1.0, "bytes_per_step": 100e6, "micro_batches": 1}
    plain, delayed = (projections([{**row, "link": link}], []) for link in ("1gbit", "1gbit/20ms"))
    assert plain[0]["efficiency"][-1] > delayed[0]["efficiency"][-1]  # 256 workers wait 510 rounds of 10 ms more


def test_the_summary_names_the_best_lever_set_per_link_against_the_targets():
    rows = [{"levers": "today", "link": "1gbit", "efficiency": 0.3},
            {"levers": "accumulate", "link": "1gbit", "efficiency": 0.9},
            {"levers": "today", "link": "loopback", "efficiency": 0.5},
            {"levers": "packed", "link": "loopback", "efficiency": 0.94}]
    summary = summarize_scaling(rows)
    assert summary["links"]["1gbit"] == {"today": 0.3, "best": 0.9, "best_levers": "accumulate"}
    assert summary["targets"]["1gbit"]["met"] and not summary["targets"]["loopback"]["met"]
    assert summary["targets"]["loopback"]["levers"] == "packed"
    full = [{**row, "workers": 2, "images_per_second_1": 40.0, "images_per_second": 80 * row["efficiency"],
             "step_seconds": 1 / row["efficiency"], "compute_seconds": 1.0,
             "exposed_seconds": 1 / row["efficiency"] - 1, "extra_cpu_seconds": 0.04, "allreduce_seconds": 0.5,
             "bytes_per_step": 124_756_688.0, "estimated_efficiency": 0.8,
             "advised": "" if row["levers"] != "today" else "allreduce_precision=bfloat16+accumulate_steps=16"}
            for row in rows]
    table = scaling_table({"rows": full, "summary": summary}).splitlines()
    assert table[0].startswith("| levers | link | images/s, 1 worker | images/s, 2 workers | efficiency |")
    assert table[0].endswith("| estimated before training | advised | CPU share, 1 worker |")
    assert ("| accumulate | 1gbit | 40.0 | 72.0 | 0.90 | 1.11 | 1.00 | 0.11 | 0.04 | 0.50 | 124.8 | 0.80 |  |  |"
            in table)
    assert table[2].endswith("| 0.80 | allreduce_precision=bfloat16+accumulate_steps=16 |  |")
    assert "over loopback (packed) | 0.94 | at least 0.95 | no |" in table[-1]


def test_local_sgd_runs_are_timed_over_whole_periods_of_sync_every_steps():
    plan = ScalingPlan(workers=2, links=(), levers=(), steps=5, warmup_steps=2, batch_size=4, image_size=64,
                       dense_units=32, precision=None, step_seconds=(0.15,), classes=4, images_per_class=8, seed=0)
    assert plan.timing({}) == (2, 5) and plan.training({})["steps_per_epoch"] == 7
    assert plan.timing({"sync_every": 4}) == (4, 8) and plan.training({"sync_every": 4})["steps_per_epoch"] == 12
    # its few images stand in for ImageNet's: micro-batches advised and taken up to AlexNet's largest batch, unless
    # the lever set bounds them itself
    assert plan.training({})["largest_global_batch"] == 1024
    assert plan.training({"largest_global_batch": 64})["largest_global_batch"] == 64
    # a lever set whose own micro-batches go beyond it is timed as it is, without the warning about accuracy
    wide = dataclasses.replace(plan, batch_size=32).training(LEVER_SETS["combined"])
    own = 32 * 2 * LEVER_SETS["combined"]["accumulate_steps"]
    assert own > LARGEST_GLOBAL_BATCH and wide["largest_global_batch"] == own
    assert large_batch_warning(own, wide["largest_global_batch"], True) is None
    assert large_batch_warning(own, None, True) is not None
    # the step that averages counts once per period: the mean, not the median that would leave it out
    assert typical_step([1.0, 1.0, 1.0, 5.0], period=4) == 2.0
    assert typical_step([1.0, 1.0, 1.0, 5.0]) == 1.0 and typical_step([]) is None


def _faked_run(workers: int, seconds: float) -> dict:
    """What scaling._run gives for a run of ``workers`` whose steps each take ``seconds``, computed and on the CPU."""
    worker = {"images_per_step": 32, "typical_step_seconds": seconds, "typical_step_cpu_seconds": seconds,
              "allreduce_seconds": 0.5, "precision": "float32", "micro_batches": 1, "bytes_per_step": 1e6,
              "estimated_efficiency": 0.8, "adapted": "", "advised": ""}
    return {"workers": [worker] * workers, "load_before": 0.0, "load_after": 0.0}


def _fake_scaling_runs(monkeypatch, stop_at: list[int], drift: float = 0.0) -> list[tuple[str, str, int]]:
    """The scaling stage's runs of workers replaced by ones that take no time: a lone worker's step 1 s and two
    workers' 1.25 s, each call ``drift`` s more than the one before; the call numbered ``stop_at[0]`` raises
    ``KeyboardInterrupt`` (Ctrl-C). The list returned gets each call's lever set (today or packed), link and
    workers."""
    from alexnet.bench import scaling

    runs: list[tuple[str, str, int]] = []

    def fake_run(plan, levers, data, link, workers, cpus, log_dir) -> dict:
        runs.append(("packed" if levers else "today", link.name, workers))
        if len(runs) == stop_at[0]:
            raise KeyboardInterrupt
        return _faked_run(workers, (1.0 if workers == 1 else 1.25) + drift * len(runs))

    monkeypatch.setattr(scaling, "_run", fake_run)
    monkeypatch.setattr(scaling, "scaling_data", lambda plan, workdir: [{}, {}])
    return runs


def test_a_stopped_scaling_stage_keeps_the_rows_it_measured_in_its_output_dir(monkeypatch, tmp_path):
    from alexnet.bench import run as bench
    from alexnet.bench.plan import check_plan

    stop_at = [3]  # Ctrl-C during the second lever set's lone worker
    _fake_scaling_runs(monkeypatch, stop_at)
    plan = check_plan({"stages": "scaling", "links": "loopback", "levers": ["today", "packed"],
                       "output_dir": str(tmp_path)})
    rows_file = tmp_path / bench.ROWS_FILE
    rows_file.write_text('{"levers": "an earlier run"}\n')
    with pytest.raises(KeyboardInterrupt):
        bench.run(plan)
    kept = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [(row["levers"], row["link"], row["efficiency"]) for row in kept] == [("today", "loopback", 0.8)]
    assert not (tmp_path / bench.JSON_FILE).exists()
    # run to its end, the result holds every row and the file of rows is gone
    stop_at[0] = 0
    result = bench.run(plan)
    assert [(row["levers"], row["efficiency"]) for row in result["scaling"]["rows"]] == [("today", 0.8),
                                                                                         ("packed", 0.8)]
    assert (tmp_path / bench.JSON_FILE).exists() and not rows_file.exists()


def test_a_stopped_scaling_stage_resumed_measures_only_the_rows_it_lacks(monkeypatch, tmp_path):
    from alexnet.bench import run as bench
    from alexnet.bench import scaling
    from alexnet.bench.plan import check_plan

    stop_at = [0]
    # every call gives other seconds, so that a row measured again cannot pass for one kept
    runs = _fake_scaling_runs(monkeypatch, stop_at, drift=0.01)
    settings = {"stages": "scaling", "links": "loopback", "levers": ["today", "packed"], "output_dir": str(tmp_path)}
    rows_file = tmp_path / bench.ROWS_FILE
    # stopped during packed's two workers: today's row and packed's lone worker measured
    stop_at[0] = 4
    with pytest.raises(KeyboardInterrupt):
        bench.run(check_plan(settings))
    stopped = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [row["levers"] for row in stopped] == ["today"]
    with rows_file.open("a") as f:
        f.write('{"levers": "packed", "link": "loop')  # a line cut short by the stop

    # resumed with packed first, and stopped again before it reaches today: the row kept is still in the file (the
    # line cut short is not), and nothing else
    runs.clear()
    stop_at[0] = 1
    with pytest.raises(KeyboardInterrupt):
        bench.run(check_plan({**settings, "levers": ["packed", "today"], "scaling_resume": True}))
    assert runs == [("packed", "loopback", 1)]
    assert [json.loads(line) for line in rows_file.read_text().splitlines()] == stopped

    # resumed: only packed is measured, its lone worker again too (no row of it was kept)
    runs.clear()
    stop_at[0] = 0
    result = bench.run(check_plan({**settings, "scaling_resume": True}))
    assert runs == [("packed", "loopback", 1), ("packed", "loopback", 2)]
    rows = result["scaling"]["rows"]
    assert rows[0] == {k: v for k, v in stopped[0].items() if k not in scaling.RECORD_ONLY}
    assert [row["levers"] for row in rows] == ["today", "packed"] and result["scaling"]["kept"] == 1
    assert [(run["levers"], len(run["workers"])) for run in result["scaling"]["runs"]] == [
        ("today", 1), ("today", 2), ("packed", 1), ("packed", 2)]
    assert result["scaling"]["runs"][1]["workers"] == stopped[0]["runs"]["many"]["workers"]
    assert "Rows kept from a stopped run (`scaling_resume`): 1 of 2." in scaling_table(result["scaling"])
    assert result["settings"]["scaling"]["scaling_resume"] is True and not rows_file.exists()

    # a stopped run measured with other settings is measured again, whole
    stop_at[0] = 3
    with pytest.raises(KeyboardInterrupt):
        bench.run(check_plan(settings))
    runs.clear()
    stop_at[0] = 0
    result = bench.run(check_plan({**settings, "scaling_resume": True, "scaling_steps": 6}))
    assert [run[0] for run in runs] == ["today", "today", "packed", "packed"] and result["scaling"]["kept"] == 0
    # resumed with no rows to take, every row is measured
    runs.clear()
    result = bench.run(check_plan({**settings, "scaling_resume": True}))
    assert len(runs) == 4 and result["scaling"]["kept"] == 0

    with pytest.raises(AlexnetError, match="`scaling_resume` reads the rows a stopped run wrote to its `output_dir`"):
        check_plan({"stages": "scaling", "links": "loopback", "scaling_resume": True})


def test_the_lever_recipes_are_tabled_against_the_defaults():
    accuracy = {"settings": {"target_accuracy": 0.75, "max_epochs": 8, "repeats": 3}, "recipes": {}, "targets": {},
                "levers": {"defaults+sync_every=4": {
                    "epochs_to_target": 3, "defaults_epochs_to_target": 2, "seconds_to_target": 40.0,
                    "defaults_seconds_to_target": 50.0, "final_accuracy": 0.9, "defaults_final_accuracy": 0.95,
                    "same_epochs_or_fewer": False}}}
    rows = accuracy_table(accuracy).splitlines()
    assert "| defaults+sync_every=4 | 3 | 2 | 40 s | 50 s | 0.900 | 0.950 | no |" in rows
    assert "Medians over 3 seed(s), ranges in brackets." in rows  # one worker: no link to tell
    accuracy["settings"].update(accuracy_workers=2, accuracy_link="1gbit")
    assert "Medians over 3 seed(s), ranges in brackets; 2 workers over 1gbit." in accuracy_table(accuracy).splitlines()


def test_a_recipe_of_adapt_communication_is_tabled_with_what_its_runs_took():
    spread = {"median": 0.9, "min": 0.9, "max": 0.9, "count": 2}
    recipe = {"recipe": "defaults+adapted", "precision": "float32", "image_sizes": [88, 128],
              "image_size_epochs": [1, 1], "learning_rate": 0.02, "lr_schedule": "linear",
              "seconds_to_target": {"median": 40.0, "min": 40.0, "max": 40.0, "count": 2}, "final_accuracy": spread,
              "best_accuracy": spread, "late_drop": {"median": 0.0, "min": 0.0, "max": 0.0, "count": 2},
              "runs": [{"adapted": "allreduce_precision=bfloat16"}, {"adapted": ""},
                       {"adapted": "allreduce_precision=bfloat16+accumulate_steps=2"}]}
    accuracy = {"settings": {"target_accuracy": 0.75, "max_epochs": 2, "repeats": 3}, "targets": {},
                "recipes": {"defaults+adapted": recipe, "defaults": {**recipe, "recipe": "defaults", "runs": [{}]}}}
    rows = accuracy_table(accuracy).splitlines()
    assert rows[2].startswith("| defaults+adapted (took allreduce_precision=bfloat16, "
                              "allreduce_precision=bfloat16+accumulate_steps=2) | float32 | 88 (1), 128 (1) |")
    assert rows[3].startswith("| defaults | float32 |")  # took nothing: the recipe alone


# ---------------------------------------------------------------------------------------------------------------
# namespaces, links and processes (root)


def _received(network: links.Network, megabytes: int) -> float:
    """Bits per second from worker 0 to worker 1 over ``network``; the receiver is stopped however this ends."""
    server = textwrap.dedent("""
        import socket, sys, time
        s = socket.socket(); s.settimeout(60); s.bind(("0.0.0.0", 5999)); s.listen(); c, _ = s.accept()
        c.settimeout(60); n = 0; t = time.time()
        while True:
            d = c.recv(1 << 20)
            if not d: break
            n += len(d)
        print(n * 8 / (time.time() - t))
    """)
    client = textwrap.dedent(f"""
        import socket, time
        for _ in range(100):
            try:
                c = socket.create_connection(("{network.addresses[1]}", 5999)); break
            except OSError:
                time.sleep(0.05)
        block = b"x" * (1 << 20)
        for _ in range({megabytes}): c.sendall(block)
        c.close()
    """)
    # inside the network's block: a receiver left running would outlive the namespace it was started in
    with Processes() as started:
        receiver = started.popen([*network.command(1), sys.executable, "-c", server], stdout=subprocess.PIPE,
                                 text=True)
        subprocess.run([*network.command(0), sys.executable, "-c", client], check=True, timeout=60)
        return float(receiver.communicate(timeout=60)[0])


@needs_root
def test_a_shaped_link_carries_its_rate_and_leaves_nothing_behind():
    before = links.namespaces()
    with links.Network(2, links.parse_link("200mbit")) as network:
        assert set(network.names) <= set(links.namespaces())
        rate = _received(network, 10)
    assert 0.6 * 200e6 < rate < 1.1 * 200e6, rate
    assert links.namespaces() == before


def test_workers_ports_are_free_and_outside_the_range_outgoing_connections_take_theirs(monkeypatch):
    low, high = cluster.ephemeral_ports()
    assert cluster.LOWEST_PORT <= low <= high <= 65535
    for _ in range(20):
        base = cluster.free_base_port(3)
        assert base >= cluster.LOWEST_PORT and base + 2 <= 65535
        assert base + 2 < low or base > high, (base, low, high)
        for port in range(base, base + 3):
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
    # where the ephemeral range leaves little room, the ports come from what is left, on either side
    monkeypatch.setattr(cluster, "ephemeral_ports", lambda: (cluster.LOWEST_PORT + 4, 65530))
    bases = {cluster.free_base_port(2) for _ in range(60)}
    assert bases <= {cluster.LOWEST_PORT, cluster.LOWEST_PORT + 1, cluster.LOWEST_PORT + 2, 65531, 65532, 65533, 65534}
    monkeypatch.setattr(cluster, "ephemeral_ports", lambda: (cluster.LOWEST_PORT + 1, 65535))
    with pytest.raises(OSError, match="outside the ephemeral range"):
        cluster.free_base_port(2)


def _sleep(task: dict) -> int:
    time.sleep(float(task["seconds"]))
    return int(task["index"])


@needs_root
def test_a_killed_worker_stops_the_others_and_its_network_is_removed():
    from alexnet.bench.cluster import run_workers
    from alexnet.child import ChildError

    before = links.namespaces()
    killed = []

    def kill_one(children):
        time.sleep(1.0)
        children[1].process.kill()
        killed.append(children)

    env = {"PYTHONPATH": str(HERE.parent)}
    began = time.monotonic()
    with pytest.raises(ChildError, match="worker 1 of 2 \\(1gbit\\)"):
        run_workers(_sleep, [{"seconds": 60}, {"seconds": 60}], link=links.parse_link("1gbit"), cpus=[[0], [0]],
                    env=env, started=kill_one)
    assert time.monotonic() - began < 30, "the other worker was left running"
    assert all(child.process.poll() is not None for child in killed[0])
    assert links.namespaces() == before
    # the same on loopback: results in order when nobody fails
    assert run_workers(_sleep, [{"seconds": 0}, {"seconds": 0}], link=links.parse_link("loopback"),
                       cpus=[[0], [0]], env=env) == [0, 1]


@needs_root
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_removes_the_namespaces_and_the_workers(stop, tmp_path):
    before = links.namespaces()
    pids = tmp_path / "pids.json"
    script = textwrap.dedent(f"""
        import json, signal, sys
        # Ctrl-C raises KeyboardInterrupt, as in a terminal, also when the suite runs as a background job of a
        # shell (which starts it with SIGINT ignored, and Python then keeps it ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(HERE.parent)!r})
        from alexnet.bench.cluster import run_workers
        from alexnet.bench.link import parse_link
        from test_scaling import _sleep

        def started(children):
            open({str(pids)!r}, "w").write(json.dumps([c.process.pid for c in children]))

        run_workers(_sleep, [{{"seconds": 120}}, {{"seconds": 120}}], link=parse_link("1gbit"), cpus=[[0], [0]],
                    env={{"PYTHONPATH": {str(HERE.parent)!r}}}, started=started)
    """)
    started = Processes()
    try:
        process = started.popen([sys.executable, "-c", script])
        deadline = time.monotonic() + 60
        while not pids.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pids.exists(), "the workers never started"
        workers = json.loads(pids.read_text())
        assert set(links.namespaces()) > set(before)
        process.send_signal(stop)
        process.wait(timeout=60)
    finally:
        # after a failure above: SIGTERM lets it remove its namespaces (its workers die with it), and what a kill
        # leaves behind is swept, so that a failed run leaves neither processes nor namespaces to the next tests
        if any(p.poll() is None for p in started.started):
            started.stop_all(grace=30)
            links.sweep_stale()
    assert links.namespaces() == before
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


@needs_root
@pytest.mark.workers
@pytest.mark.long  # make test-long (CI)
def test_the_stage_measures_two_workers_over_loopback_and_a_shaped_link(tmp_path):
    import alexnet

    before = links.namespaces()
    result = alexnet.alexnet_benchmark(stages="scaling", links="loopback,1gbit", levers="bfloat16", batch_size=4,
                                       image_size=64, dense_units=32, precision="float32", scaling_steps=2,
                                       scaling_warmup_steps=1, scaling_classes=4, scaling_images_per_class=8,
                                       step_seconds=[0.1, 1.0], output_dir=str(tmp_path / "out"))
    assert links.namespaces() == before
    scaling = result["scaling"]
    assert [(row["levers"], row["link"]) for row in scaling["rows"]] == [("bfloat16", "loopback"),
                                                                         ("bfloat16", "1gbit")]
    parameters = scaling["runs"][1]["workers"][0]["parameters"]
    for row in scaling["rows"]:
        assert row["workers"] == 2 and row["images_per_step"] == 4 and row["precision"] == "float32"
        compute, step = row["compute_seconds"], row["step_seconds"]
        # the row gives all three to 4 decimals: their ratio is off by up to that rounding, which a short step
        # magnifies (0.0013 for steps of 0.03 and 0.06 s)
        rounding = 0.5e-4 * (1 / step + compute / step**2) + 0.5e-4
        assert 0 < row["efficiency"] == pytest.approx(compute / step, abs=max(1e-3, rounding))
        assert row["bytes_per_step"] == 2 * parameters  # bfloat16 on the wire
        assert row["allreduce_seconds"] > 0 and row["images_per_second_1"] > 0
        # what the chief's run estimated before training, and the lever set it advised (read back as one), whole:
        # the row's own bfloat16 with what it adds
        assert 0 < row["estimated_efficiency"] <= 1
        assert (row["estimated_efficiency"] < 0.9) == bool(row["advised"]), row
        if row["advised"]:
            advised = parse_lever_set(row["advised"])[1]
            # micro-batches, or packs where a step with them hid enough (the workers run two inter-op threads)
            assert advised["allreduce_precision"] == "bfloat16", advised
            assert advised.get("accumulate_steps", 1) > 1 or advised.get("allreduce_pack_mb") == 25, advised
        # the CPU a worker's step took beyond the lone worker's, from the runs' own CPU times
        one, many = (run for run in scaling["runs"] if run["levers"] == row["levers"]
                     and run["link"] in (None, row["link"]))
        extra = max(w["typical_step_cpu_seconds"] for w in many["workers"]) - \
            one["workers"][0]["typical_step_cpu_seconds"]
        assert row["extra_cpu_seconds"] == pytest.approx(max(0.0, extra), abs=1e-4)
    for run in scaling["runs"]:
        assert all(len(worker["step_seconds"]) == 2 for worker in run["workers"])
        # a worker's CPU seconds each step: its process was at work, on the CPUs it is pinned to
        cpus = result["settings"]["cores"] // 2
        for worker in run["workers"]:
            assert len(worker["step_cpu_seconds"]) == 2
            assert all(0 < cpu <= cpus * wall + 0.05 for cpu, wall in zip(worker["step_cpu_seconds"],
                                                                          worker["step_seconds"], strict=True))
    # the projection: the shaped link's row at its own compute time and the two given, 2 to 256 workers
    assert [p["compute_seconds"] for p in scaling["projection"]][1:] == [0.1, 1.0]
    assert scaling["projection"][0]["workers"][-1] == 256 and scaling["mxnet"][-1]["workers"] == 256
    assert set(result["summary"]["scaling"]) == {"1gbit", "loopback"}
    saved = json.loads(Path(result["json"]).read_text())
    assert saved["scaling"]["rows"] == scaling["rows"] and Path(result["png"]).stat().st_size > 10_000


def test_without_root_the_stage_keeps_loopback_and_says_why(monkeypatch):
    from alexnet.bench import scaling

    monkeypatch.setattr(scaling, "can_shape", lambda: "shaped links need root (network namespaces and tc)")
    kept, why = scaling.usable_links(links.parse_links("loopback,1gbit"))
    assert [link.name for link in kept] == ["loopback"] and "need root" in why
    kept, why = scaling.usable_links(links.parse_links("1gbit"))
    assert [link.name for link in kept] == ["loopback"] and why.endswith("(run it as root)")


def test_links_with_a_round_trip_are_left_out_where_the_kernel_has_no_netem(monkeypatch):
    from alexnet.bench import scaling

    monkeypatch.setattr(scaling, "can_shape", lambda: None)  # as root
    monkeypatch.setattr(scaling, "can_delay", lambda: links.NO_NETEM)
    kept, why = scaling.usable_links(links.parse_links("loopback,1gbit,1gbit/10ms"))
    assert [link.name for link in kept] == ["loopback", "1gbit"] and "no netem queue" in why and '"1gbit"' in why
    kept, why = scaling.usable_links(links.parse_links("1gbit/10ms"))
    assert [link.name for link in kept] == ["loopback"]
    # netem is asked about only when a link adds a round trip
    monkeypatch.setattr(scaling, "can_delay", lambda: pytest.fail("netem tried"))
    assert scaling.usable_links(links.parse_links("loopback,1gbit")) == (links.parse_links("loopback,1gbit"), None)
    monkeypatch.setattr(scaling, "can_delay", lambda: None)
    assert scaling.usable_links(links.parse_links("1gbit/10ms"))[0] == links.parse_links("1gbit/10ms")


@needs_root
def test_whether_a_round_trip_can_be_added_is_tried_in_a_namespace_removed_after():
    before = links.namespaces()
    assert links.can_delay() in (None, links.NO_NETEM)
    assert links.namespaces() == before


def test_the_accuracy_stages_link_is_checked_before_any_work(monkeypatch):
    from alexnet.bench import accuracy
    from alexnet.bench.plan import check_plan

    monkeypatch.setattr(accuracy, "can_shape", lambda: None)  # as root
    plan = check_plan({"stages": "time_to_accuracy", "accuracy_workers": 2, "accuracy_link": "1GBIT"})
    assert plan.accuracy.accuracy_link == "1gbit"
    with pytest.raises(AlexnetError, match="`accuracy_link`: Unknown link 'fast'"):
        check_plan({"stages": "time_to_accuracy", "accuracy_link": "fast"})
    with pytest.raises(AlexnetError, match="`accuracy_link` must be one link"):
        check_plan({"stages": "time_to_accuracy", "accuracy_link": 3})
    with pytest.raises(AlexnetError, match="joins workers, but `accuracy_workers` = 1"):
        check_plan({"stages": "time_to_accuracy", "accuracy_link": "1gbit"})
    monkeypatch.setattr(accuracy, "can_shape", lambda: "shaped links need root (network namespaces and tc)")
    with pytest.raises(AlexnetError, match=r"need root .*: run the benchmark as root, or use `accuracy_link` = "):
        check_plan({"stages": "time_to_accuracy", "accuracy_workers": 2, "accuracy_link": "1gbit"})
    # a round trip needs the kernel's netem, tried before any work
    monkeypatch.setattr(accuracy, "can_shape", lambda: None)
    monkeypatch.setattr(accuracy, "can_delay", lambda: links.NO_NETEM)
    with pytest.raises(AlexnetError, match=r"`accuracy_link` = '1gbit/10ms', but this kernel has no netem .* alone"):
        check_plan({"stages": "time_to_accuracy", "accuracy_workers": 2, "accuracy_link": "1gbit/10ms"})
    assert check_plan({"stages": "time_to_accuracy", "accuracy_workers": 2,
                       "accuracy_link": "1gbit"}).accuracy.accuracy_link == "1gbit"
    # loopback needs no root, and a stage that does not run is not held to its link
    assert check_plan({"stages": "time_to_accuracy", "accuracy_workers": 2}).accuracy.accuracy_link == "loopback"
    check_plan({"stages": "decode", "accuracy_link": "1gbit"})


def test_a_recipe_over_several_workers_trains_them_on_the_accuracy_link(monkeypatch, tmp_path):
    from alexnet.bench import accuracy, cluster, recipes

    seen = {}

    def workers(function, tasks, *, link, cpus, log_dir=None, **kwargs):
        seen.update(link=link, cpus=cpus, shares=len(tasks))
        params = {"precision": "float32", "precision_reason": "asked", "image_size": [64], "image_size_epochs": [1],
                  "lr_scaling": "none", "lr_schedule": "plateau", "label_smoothing": 0.0, "peak_learning_rate": 0.01,
                  "communication": "float32 on the wire", "adapted_settings": {}}
        history = {"params": params, "metrics": {"val_accuracy": [0.5]}, "images_per_second": 3.0,
                   "schedule": {"image_size": [64], "learning_rate": [0.01]}}
        return [{"history": history, "epoch_seconds": [2.0]} for _ in tasks]

    monkeypatch.setattr(cluster, "run_workers", workers)
    plan = accuracy.AccuracySettings(target_accuracy=0.4, max_epochs=1, repeats=1, accuracy_classes=2,
                                     accuracy_images_per_class=1, accuracy_val_per_class=1, accuracy_image_size=64,
                                     accuracy_batch_size=2, accuracy_dense_units=8, accuracy_workers=2,
                                     accuracy_levers=None, accuracy_link="100mbit/1ms")
    data = {"image": ["a", "b"], "label": [0, 1], "val_image": ["c", "d"], "val_label": [0, 1], "num_classes": 2}
    record = recipes.run_recipe("paper", data, plan, cpus=[0, 1])
    assert seen == {"link": links.LinkSpec("100mbit/1ms", 1e8, 1.0), "cpus": [[0], [1]], "shares": 2}
    assert record["link"] == "100mbit/1ms" and record["workers"] == 2 and record["seconds_to_target"] == 2.0
    assert accuracy.summarize("paper", [record])["link"] == "100mbit/1ms"


@pytest.mark.workers
@pytest.mark.long
def test_time_to_accuracy_over_two_workers_with_a_lever_set_as_a_recipe_of_its_own(tmp_path):
    import alexnet

    # as root (as in CI) the workers train over a shaped link of network namespaces, else over loopback
    link = "1gbit" if ROOT else "loopback"
    before = links.namespaces()
    result = alexnet.alexnet_benchmark(
        stages="time_to_accuracy", target_accuracy=0.0, max_epochs=2, repeats=1, accuracy_workers=2,
        accuracy_levers="sync_every=2", accuracy_classes=4, accuracy_images_per_class=8, accuracy_val_per_class=3,
        accuracy_image_size=64, accuracy_batch_size=4, accuracy_dense_units=32, precision="float32",
        accuracy_link=link, output_dir=str(tmp_path / "out"))
    assert links.namespaces() == before
    stage = result["time_to_accuracy"]
    assert stage["settings"]["accuracy_link"] == link
    assert list(stage["recipes"]) == ["paper", "defaults", "defaults+sync_every=2"]
    for recipe in stage["recipes"].values():
        assert recipe["workers"] == 2 and recipe["link"] == link and recipe["runs"][0]["link"] == link
        (run,) = recipe["runs"]
        # every validation image of both workers, each once, after each epoch: 12 images
        assert len(run["val_accuracy"]) == 2 and all(a * 12 == round(a * 12) for a in run["val_accuracy"])
        assert run["epochs_to_target"] == 1
    assert stage["recipes"]["defaults+sync_every=2"]["communication"].endswith("averaged every 2 steps")
    assert stage["recipes"]["defaults"]["communication"].endswith("gradients all-reduced every step")
    lever = stage["levers"]["defaults+sync_every=2"]
    assert lever["epochs_to_target"] == lever["defaults_epochs_to_target"] == 1 and lever["same_epochs_or_fewer"]


@pytest.mark.parametrize("output_dir", ["folder", "bucket", None])
def test_the_logs_of_a_failed_scaling_worker_outlive_the_run(monkeypatch, tmp_path, output_dir, request):
    """A worker's failure says where its whole log is: in the output folder's scaling-logs (on a bucket, where it is
    uploaded), or without one in the workers' log folder, not in the scratch folder the run removes."""
    from alexnet.bench import run as bench
    from alexnet.bench import scaling
    from alexnet.bench.plan import check_plan
    from alexnet.child import ChildError

    monkeypatch.setenv("ALEXNET_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setattr(scaling, "scaling_data", lambda plan, workdir: [{}, {}])

    def failing(plan, levers, data, link, workers, cpus, log_dir):
        log = log_dir / f"worker0-of-{workers}.log"
        log.write_text("Traceback: the worker's own error\n")
        raise ChildError("worker 0 of 1 (loopback)", "ValueError: broken", ["the worker's own error"], 1, str(log))

    monkeypatch.setattr(scaling, "_run", failing)
    where = {"folder": str(tmp_path / "out"), "bucket": f"s3://alexnet-outputs/failed-{tmp_path.name}", None: None}
    if output_dir == "bucket":
        request.getfixturevalue("cloud_env")
    settings = {"stages": "scaling", "links": "loopback", "levers": ["today"],
                **({"output_dir": where[output_dir]} if output_dir else {})}
    with pytest.raises(ChildError) as err:
        bench.run(check_plan(settings))
    log = str(err.value).split("Full log: ", 1)[1].split("\n", 1)[0]
    assert err.value.log == log
    if output_dir == "bucket":
        import fsspec

        assert log == f"{where['bucket']}/scaling-logs/today/alone/worker0-of-1.log"
        assert fsspec.filesystem("s3").cat_file(log) == b"Traceback: the worker's own error\n"
    else:
        assert Path(log).read_text() == "Traceback: the worker's own error\n"
        assert Path(log).parents[3] == (tmp_path / "out" if output_dir else tmp_path / "logs")


def test_every_runs_worker_logs_are_kept_by_lever_set_and_link(monkeypatch, tmp_path):
    """Each run's workers keep their logs in a folder of their own, by lever set and link, and a failed worker's
    error names its own log there: every run wrote worker<i>-of-<n>.log in the one folder, each lever set's (and
    link's) over the one before."""
    from alexnet.bench import run as bench
    from alexnet.bench import scaling
    from alexnet.bench.plan import check_plan
    from alexnet.child import ChildError

    failing: list[tuple[str, str, int]] = []

    def fake_run(plan, levers, data, link, workers, cpus, log_dir) -> dict:
        said = f"{lever_text(levers) or 'today'} on {link.name}, {workers} worker(s)"
        for i in range(workers):
            (log_dir / f"worker{i}-of-{workers}.log").write_text(said + "\n")
        if (lever_text(levers), link.name, workers) in failing:
            raise ChildError(f"worker 0 of {workers} ({link.name})", "ValueError: broken", [said], 1,
                             str(log_dir / f"worker0-of-{workers}.log"))
        took = "accumulate_steps=4" if workers > 1 and levers.get("adapt_communication") else ""
        worker = {"images_per_step": 32, "typical_step_seconds": 1.0, "typical_step_cpu_seconds": 1.0,
                  "allreduce_seconds": 0.5, "precision": "float32", "micro_batches": 1, "bytes_per_step": 1e6,
                  "estimated_efficiency": 0.8, "adapted": took, "advised": ""}
        return {"workers": [worker] * workers, "load_before": 0.0, "load_after": 0.0}

    monkeypatch.setattr(scaling, "_run", fake_run)
    monkeypatch.setattr(scaling, "scaling_data", lambda plan, workdir: [{}, {}])
    monkeypatch.setattr(scaling, "usable_links", lambda asked: (list(asked), None))  # as root, without namespaces
    out = tmp_path / "out"
    settings = {"stages": "scaling", "links": "loopback,1gbit/0.5ms", "levers": ["today", "bfloat16", "adapted"],
                "output_dir": str(out)}
    bench.run(check_plan(settings))
    logs = out / "scaling-logs"
    kept = {str(path.relative_to(logs)): path.read_text().strip() for path in logs.rglob("*.log")}
    assert kept == {
        "today/alone/worker0-of-1.log": "today on loopback, 1 worker(s)",
        **{f"{levers}/{folder}/worker{i}-of-2.log": f"{text} on {link}, 2 worker(s)"
           for levers, text in (("today", "today"), ("bfloat16", "allreduce_precision=bfloat16"),
                                ("adapted", "adapt_communication=true"))
           for link, folder in (("loopback", "loopback"), ("1gbit/0.5ms", "1gbit-0.5ms")) for i in range(2)},
        "bfloat16/alone/worker0-of-1.log": "allreduce_precision=bfloat16 on loopback, 1 worker(s)",
        "adapted/alone/worker0-of-1.log": "adapt_communication=true on loopback, 1 worker(s)",
        "adapted/alone+accumulate_steps=4/worker0-of-1.log": "accumulate_steps=4 on loopback, 1 worker(s)"}
    # a worker of the second lever set fails on the shaped link: its error names its own log, which is its run's
    failing.append(("allreduce_precision=bfloat16", "1gbit/0.5ms", 2))
    with pytest.raises(ChildError) as err:
        bench.run(check_plan(settings))
    log = str(err.value).split("Full log: ", 1)[1].split("\n", 1)[0]
    assert log == str(logs / "bfloat16" / "1gbit-0.5ms" / "worker0-of-2.log")
    assert Path(log).read_text() == "allreduce_precision=bfloat16 on 1gbit/0.5ms, 2 worker(s)\n"
    assert (logs / "today" / "1gbit-0.5ms" / "worker0-of-2.log").read_text() == "today on 1gbit/0.5ms, 2 worker(s)\n"


def test_lever_sets_that_train_alike_are_measured_once_and_reported_under_every_name(monkeypatch, tmp_path, caplog):
    """Two lever sets of the same settings were each measured: the same runs twice, which the stage's minutes are
    spent on (a name given twice is given once, as any setting's words are)."""
    from alexnet.bench import run as bench
    from alexnet.bench import scaling
    from alexnet.bench.plan import check_plan

    calls: list[tuple[str, str, int]] = []

    def fake_run(plan, levers, data, link, workers, cpus, log_dir) -> dict:
        calls.append((lever_text(levers), link.name, workers))
        return _faked_run(workers, (1.0 if workers == 1 else 1.25) + 0.01 * len(calls))  # no two runs alike

    monkeypatch.setattr(scaling, "_run", fake_run)
    monkeypatch.setattr(scaling, "scaling_data", lambda plan, workdir: [{}, {}])
    monkeypatch.setattr(scaling, "usable_links", lambda asked: (list(asked), None))  # as root, without namespaces
    asked = ["today", "bfloat16", "today", "allreduce_precision=bfloat16", "accumulate_steps=1", "packed",
             "allreduce_pack_mb=25+allreduce_precision=bf16"]
    plan = check_plan({"stages": "scaling", "links": "loopback,1gbit", "levers": asked, "output_dir": str(tmp_path)})
    with caplog.at_level("INFO", logger="alexnet.bench.scaling"):
        stage = bench.run(plan)["scaling"]
    # each distinct training measured once: a lone worker, then two on each link
    assert calls == [(levers, link, workers) for levers in ("", "allreduce_precision=bfloat16",
                                                            "allreduce_precision=bfloat16+allreduce_pack_mb=25")
                     for link, workers in (("loopback", 1), ("loopback", 2), ("1gbit", 2))]
    said = [r.getMessage() for r in caplog.records if "train alike" in r.getMessage()]
    assert said == ["The scaling stage measures once the lever sets that train alike, and gives each name its rows: "
                    "today and accumulate_steps=1 (measured as today); bfloat16 and "
                    "allreduce_precision=bfloat16 (measured as bfloat16); packed and "
                    "allreduce_pack_mb=25+allreduce_precision=bf16 (measured as packed)."]
    # every name asked has its rows, once, in the order asked: the others' a copy of the measured rows
    rows = stage["rows"]
    names = ["today", "bfloat16", "allreduce_precision=bfloat16", "accumulate_steps=1", "packed",
             "allreduce_pack_mb=25+allreduce_precision=bf16"]
    assert [(row["levers"], row["link"]) for row in rows] == [(name, link) for name in names
                                                              for link in ("loopback", "1gbit")]
    by = {(row["levers"], row["link"]): row for row in rows}
    for name, first in (("accumulate_steps=1", "today"), ("allreduce_precision=bfloat16", "bfloat16"),
                        ("allreduce_pack_mb=25+allreduce_precision=bf16", "packed")):
        for link in ("loopback", "1gbit"):
            assert by[name, link] == {**by[first, link], "levers": name, "same_as": first}
            assert "same_as" not in by[first, link]
    assert "| allreduce_precision=bfloat16 (measured as bfloat16) | 1gbit |" in scaling_table(stage)
    # runs and projections are the measured ones'
    assert {run["levers"] for run in stage["runs"]} == {"today", "bfloat16", "packed"}
    assert {p["levers"] for p in stage["projection"]} == {"today", "bfloat16", "packed"}


def test_the_projection_panel_says_each_lines_compute_a_step():
    """A lever set of 2 micro-batches is projected at twice the step time given: each line says its own, where the
    panel's title said the first line's for all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from alexnet.bench.scaling_chart import projection_panel

    def record(levers: str, seconds: float) -> dict:
        return {"levers": levers, "link": "1gbit", "workers": [2, 4], "efficiency": [0.9, 0.8],
                "compute_seconds": seconds}

    projected = [record("today", 0.11), record("today", 0.15), record("accumulate", 0.23), record("accumulate", 0.3)]
    figure, axes = plt.subplots()
    try:
        projection_panel(axes, {"projection": projected, "mxnet": []})
        labels = [line.get_label() for line in axes.get_lines() if not line.get_label().startswith("_")]
        assert labels[:2] == ["today, 1gbit, 0.15 s a step", "accumulate, 1gbit, 0.3 s a step"]
        assert "0.15 s of compute" not in axes.get_title()
    finally:
        plt.close(figure)
