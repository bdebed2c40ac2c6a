"""The measurement a multi-worker run takes before its first step (:func:`alexnet.train.probe.probe_communication`):
what the chief's line says of it, and what a relaunched run of ``adapt_communication`` times.

The two-worker run is this file started twice as a script (see the bottom), two processes with their own TF_CONFIG on
127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from helpers_train import make_tree, run_two_workers  # noqa: E402

from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.train.communication import Communication  # noqa: E402
from alexnet.train.strategy import Topology  # noqa: E402

HERE = Path(__file__).resolve()

CHIEF = Topology("multi_worker", 2, 2, 0, True, 1, False)
GPU_CHIEF = Topology("multi_worker", 2, 2, 0, True, 1, True)  # the probe runs on this CPU all the same


@pytest.mark.parametrize(("wire", "seconds", "said", "sixteen_bit"), [
    # float32 asked, 16 bits timed faster: the step with packs travels in 16 bits, and its hidden seconds are of them
    ("float32", {"float32": 2.0, "bfloat16": 1.2},
     r"in float32, 2\.000 s alone \(bfloat16: 1\.200 s alone\); compute \d+\.\d{3} s a step; packs hide "
     r"(\d+\.\d{3}) s of the bfloat16 exchange\.", True),
    # 16 bits timed no faster: the step with packs stays in float32
    ("float32", {"float32": 1.0, "bfloat16": 1.0},
     r"in float32, 1\.000 s alone \(bfloat16: 1\.000 s alone\); compute \d+\.\d{3} s a step; packs hide "
     r"(\d+\.\d{3}) s of the float32 exchange\.", True),
    # 16 bits asked: nothing else timed
    ("bfloat16", {"bfloat16": 1.2},
     r"in bfloat16, 1\.200 s alone; compute \d+\.\d{3} s a step; packs hide (\d+\.\d{3}) s of the bfloat16 "
     r"exchange\.", True),
    # a relaunch that kept float32 times no 16 bits: its step with packs travels in float32
    ("float32", {"float32": 1.0},
     r"in float32, 1\.000 s alone; compute \d+\.\d{3} s a step; packs hide (\d+\.\d{3}) s of the float32 "
     r"exchange\.", False),
])
def test_the_chiefs_line_names_the_wire_format_of_each_figure_it_timed(wire, seconds, said, sixteen_bit, monkeypatch,
                                                                       caplog):
    """The chief's line of what the probe timed (one worker's strategy standing in for two GPU workers, whose step
    with packs is timed: each exchange is said to take ``seconds``, by format)."""
    from alexnet.model.network import build_alexnet
    from alexnet.train import communication, levers

    monkeypatch.setattr(communication, "time_all_reduce", lambda strategy, shapes, sent, options, repeats=3:
                        seconds[sent])
    caplog.set_level(logging.INFO, logger="alexnet.train")
    net = build_alexnet(4, dense_units=32)
    asked = replace(Communication(workers=2), wire=wire)
    timing = levers.probe_communication(tf.distribute.get_strategy(), net, asked, GPU_CHIEF, batch=1, image_size=64,
                                        sixteen_bit=sixteen_bit)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Communication: ")]
    assert len(lines) == 1, lines
    found = re.fullmatch(r"Communication: (\d+\.\d) MB a step " + said, lines[0])
    assert found, lines[0]
    assert float(found.group(1)) == pytest.approx(timing["bytes_per_step"] / 1e6, abs=0.05)
    assert float(found.group(2)) == pytest.approx(timing["hidden_seconds"], abs=5e-4)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_cpu_workers_time_no_step_with_packs_whose_figure_the_advice_would_not_count(threads, monkeypatch, caplog):
    """On CPUs, even with two inter-op threads (where packs overlap the backward pass), what a step with packs hid
    varied from one probe to the next of the same two workers, and the advice does not count it: the probe runs no
    such step (three passes and exchanges of the whole gradients: over 100 Mbit/s about 31 s), records no
    ``hidden_seconds`` and its line says nothing of packs."""
    from alexnet.environment import INTEROP_VARIABLE
    from alexnet.model.network import build_alexnet
    from alexnet.train import communication, levers

    monkeypatch.setenv(INTEROP_VARIABLE, threads)
    monkeypatch.setattr(communication, "time_all_reduce", lambda strategy, shapes, sent, options, repeats=3:
                        {"float32": 2.0, "bfloat16": 1.0}[sent])
    monkeypatch.setattr(communication, "all_reduce", lambda *args: pytest.fail("a step with packs was timed"))
    caplog.set_level(logging.INFO, logger="alexnet.train")
    assert levers.overlaps(CHIEF) == (threads == "2")
    timing = levers.probe_communication(tf.distribute.get_strategy(), build_alexnet(4, dense_units=32),
                                        Communication(workers=2), CHIEF, batch=1, image_size=64)
    assert set(timing) == {"bytes_per_step", "allreduce_seconds", "sixteen_bit_allreduce_seconds", "compute_seconds"}
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Communication: ")]
    assert len(lines) == 1 and re.fullmatch(r"Communication: \d+\.\d MB a step in float32, 2\.000 s alone "
                                            r"\(bfloat16: 1\.000 s alone\); compute \d+\.\d{3} s a step\.",
                                            lines[0]), lines



@pytest.mark.parametrize(("record", "timed", "levels", "asked"), [
    # launched: both formats timed; the advice it takes said as a line, what is left of it for 16 bits a warning
    (None, ["float32", "bfloat16"], ["INFO", "WARNING"], 1.0),
    # took 16 bits: only they are timed, and said; the float32 exchange the launch timed is the record's (a history
    # file of an older run may lack it: none then)
    ({"allreduce_precision": "bfloat16"}, ["bfloat16"], ["WARNING"], 2.5),
    ({"allreduce_precision": "bfloat16"}, ["bfloat16"], ["WARNING"], None),
    # took nothing: float32 alone, its advice said as a launch that took none says it
    ({}, ["float32"], ["INFO"], None),
])
def test_a_resumed_adapted_run_decides_before_it_measures_and_times_only_what_it_trains_with(
        record, timed, levels, asked, tmp_path, monkeypatch, caplog):
    """:func:`alexnet.train.levers.measure_communication` of the chief (one worker's strategy standing in for two,
    every exchange said to take a second in float32, half that in 16 bits, packs overlapping the backward pass)
    without and with what its checkpoints recorded when it began (``asked``: the float32 exchange its launch timed,
    in the params its history file keeps)."""
    from alexnet.model.network import build_alexnet
    from alexnet.train import communication, levers
    from alexnet.train.agreement import Steps
    from alexnet.train.checkpoint import STATE_FILE
    from alexnet.train.settings_check import check_settings

    said: list[str] = []
    monkeypatch.setattr(communication, "time_all_reduce", lambda strategy, shapes, sent, options, repeats=3:
                        said.append(sent) or (1.0 if sent == "float32" else 0.5))
    monkeypatch.setattr(levers, "overlaps", lambda topology: True)
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    if record is not None:
        params = {} if asked is None else {"params": {"asked_allreduce_seconds": asked}}
        (folder / STATE_FILE).write_text(json.dumps({"settings": {"adapted_settings": record, **params}}))
    settings = check_settings({"adapt_communication": True, "checkpoint_dir": str(folder), "batch_size": 1,
                               "image_size": 64, "dense_units": 32})
    steps = Steps(train=100, validate=False, validation=None, train_images=200)
    caplog.set_level(logging.INFO, logger="alexnet.train")
    measured = levers.measure_communication(tf.distribute.get_strategy(), build_alexnet(4, dense_units=32), settings,
                                            levers.check_levers(settings, CHIEF), CHIEF, steps, lambda taken: steps)
    assert said == timed
    advice = [r.levelname for r in caplog.records if r.getMessage().startswith("Communication: One exchange")]
    assert advice == levels, caplog.text
    assert measured.timing.get("asked_allreduce_seconds") == asked
    if record is None:  # launched: the chief's decision of the advice, 16 bits among it, timed and kept as asked
        assert measured.adapted["allreduce_precision"] == "bfloat16"
    else:
        assert measured.adapted == record and "It resumes, and keeps what it took when it began." in caplog.text
        # the launch's judgement of 16 bits stands: a record without them is not told to take them (timed here
        # in float32 alone, they would be assumed to halve the exchange)
        assert measured.advice is not None and "allreduce_precision" not in measured.advice.settings, measured.advice
    assert measured.settings.allreduce_precision == measured.communication.wire == \
        measured.adapted.get("allreduce_precision", "float32")
    assert measured.timing["allreduce_seconds"] == (0.5 if measured.communication.wire == "bfloat16" else 1.0)
    # CPU workers time no step with packs (the format a relaunch's would take: the test of the chief's line)
    assert "hidden_seconds" not in measured.timing and "packs hide" not in caplog.text

@pytest.mark.parametrize("adapt", [False, True])
def test_local_sgd_s_figures_a_step_count_every_average_of_an_epoch_as_the_advice_does(adapt, monkeypatch, caplog):
    """:func:`alexnet.train.levers.measure_communication` of local SGD every 4 steps in epochs of 10 steps (averages
    after steps 4, 8 and 10: 0.3 a step), each average said to take a second in float32 and half that in 16 bits: the
    bytes and seconds a step its log line, history and TensorBoard report count the averages as its advice does,
    where they counted one in 4 steps; with ``adapt_communication`` (16 bits and 2 micro-batches taken: epochs of 5
    steps, averages after steps 4 and 5) those of the epochs it trains with."""
    from alexnet.model.network import build_alexnet
    from alexnet.train import communication, levers
    from alexnet.train.agreement import Steps
    from alexnet.train.communication import WIRE_BYTES, averages_in_epoch
    from alexnet.train.settings_check import check_settings

    monkeypatch.setattr(communication, "time_all_reduce", lambda strategy, shapes, sent, options, repeats=3:
                        1.0 if sent == "float32" else 0.5)
    caplog.set_level(logging.INFO, logger="alexnet.train")
    settings = check_settings({"sync_every": 4, "adapt_communication": adapt, "largest_global_batch": 4,
                               "batch_size": 1, "image_size": 64, "dense_units": 32})
    steps = Steps(train=10, validate=False, validation=None, train_images=2000)
    net = build_alexnet(4, dense_units=32)
    measured = levers.measure_communication(
        tf.distribute.get_strategy(), net, settings, levers.check_levers(settings, CHIEF), CHIEF, steps,
        lambda taken: replace(steps, train=10 // taken.accumulate_steps))
    took, trained = measured.communication, measured.steps.train
    assert (took.wire, took.accumulate, trained) == (("bfloat16", 2, 5) if adapt else ("float32", 1, 10))
    per_step = averages_in_epoch(trained, 4) / trained  # 0.3, or 0.4 in epochs of 5
    average = 1.0 if took.wire == "float32" else 0.5
    timing = measured.timing
    assert timing["allreduce_seconds"] == pytest.approx(average * per_step)
    assert timing["bytes_per_step"] == pytest.approx(2 * levers.parameter_count(net) * WIRE_BYTES[took.wire] *
                                                     per_step)
    assert took.bytes_per_step(levers.parameter_count(net), trained) == timing["bytes_per_step"]  # the history's
    # the advice's exchange a step is the same figure
    advice = measured.advice
    assert advice is not None and f"One exchange alone takes {timing['allreduce_seconds']:.3g} s a step" in \
        advice.text, advice.text
    compute = timing["compute_seconds"]
    assert advice.efficiency == pytest.approx(compute / (compute + timing["allreduce_seconds"]))
    if not adapt:  # the probe's line, of the steps it trains
        assert f"MB a step in float32, {average * per_step:.3f} s alone" in caplog.text, caplog.text


@pytest.mark.workers
@pytest.mark.long  # over 20 s
def test_a_relaunched_adapted_run_times_only_the_exchange_it_took_and_trains_on_with_it(tmp_path):
    """Two workers launched with ``adapt_communication``, then relaunched on the same checkpoints for a second epoch
    (each exchange said to take a second more than it does, two in float32: the advice is 16 bits and
    micro-batches)."""
    codes = run_two_workers(HERE, tmp_path, free_base_port(2), timeout=600)
    assert codes == [0, 0], [(tmp_path / f"log-{i}.txt").read_text()[-3000:] for i in range(2)]
    launched, relaunched = zip(*(json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)),
                               strict=True)
    # the launch timed float32 and 16 bits to decide; the relaunch, decided by its record, the exchange it took
    assert [run["timed"] for run in launched] == [["float32", "bfloat16"]] * 2, launched
    assert [run["timed"] for run in relaunched] == [["bfloat16"]] * 2, relaunched
    took = launched[0]["adapted"]
    assert took["allreduce_precision"] == "bfloat16" and took["accumulate_steps"] == 2, took
    for runs in (launched, relaunched):  # every worker took the chief's settings, and they end with one model
        assert [run["adapted"] for run in runs] == [took, took]
        assert runs[0]["digest"] == runs[1]["digest"] and [run["agree"] for run in runs] == [True, True]
    assert [run["initial_epoch"] for run in relaunched] == [1, 1]
    # the history of the launch keeps the float32 exchange as asked beside the 16-bit one (its file too); the
    # relaunch's, and the advice it logs, are of the 16-bit exchange it timed, beside the launch's float32 one as
    # its checkpoints recorded it (the chief's: in its history and its file)
    first, again = launched[0], relaunched[0]
    assert first["asked_allreduce_seconds"] >= 2.0 > first["allreduce_seconds"] >= 1.0, first
    assert first["kept_asked_allreduce_seconds"] == first["asked_allreduce_seconds"]
    assert again["asked_allreduce_seconds"] == first["asked_allreduce_seconds"], again
    assert again["kept_asked_allreduce_seconds"] == first["asked_allreduce_seconds"], again
    assert again["allreduce_seconds"] >= 1.0, again
    assert again["communication"].startswith("bfloat16 on the wire"), again
    assert f"One exchange alone takes {again['allreduce_seconds']:.3g} s a step" in again["advice"], again
    log = (tmp_path / "log-0.txt").read_text()
    assert len(re.findall(r"MB a step in float32, \d+\.\d{3} s alone \(bfloat16: \d+\.\d{3} s alone\)", log)) == 1
    assert len(re.findall(r"MB a step in bfloat16, \d+\.\d{3} s alone; compute", log)) == 1
    assert log.count("It resumes, and keeps what it took when it began.") == 1, log[-3000:]


def _worker(folder: str, index: int, base: int) -> None:
    from alexnet.train import api as training
    from alexnet.train import communication
    from alexnet.train.cluster import tf_config_json
    from alexnet.train.history_file import alexnet_history

    os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], index, base)
    from alexnet.train.strategy import resolve_strategy

    strategy = resolve_strategy("multi_worker", collective_timeout=120)
    root = Path(folder)
    data = make_tree(root / f"images-{index}", classes=4, per_class=12, val_per_class=3, seed=index, min_side=48,
                     max_side=72)
    timed: list[str] = []  # the wire format of each exchange timed
    real = communication.time_all_reduce

    def slow(strategy, shapes, wire, options, repeats=3):
        timed.append(wire)
        return real(strategy, shapes, wire, options, repeats) + (2.0 if wire == "float32" else 1.0)

    communication.time_all_reduce = slow
    settings = {"batch_size": 1, "steps_per_epoch": 3, "image_size": 64, "dense_units": 32, "dropout": 0.0,
                "seed": 0, "precision": "float32", "verbose": 0, "parallel": 1, "learning_rate": 0.05,
                "adapt_communication": True, "largest_global_batch": 4, "checkpoint_dir": str(root / "checkpoints")}
    results = []
    for epochs in (1, 2):  # launched for one epoch, relaunched for a second
        timed.clear()
        history = training.alexnet_train(data=data, strategy=strategy, epochs=epochs, **settings)
        params = history["params"]
        results.append({"timed": list(timed), "adapted": params["adapted_settings"],
                        "digest": history["weights_sha256"], "agree": history["weights_agree"],
                        "initial_epoch": params["initial_epoch"], "communication": params["communication"],
                        "allreduce_seconds": params["allreduce_seconds"],
                        "asked_allreduce_seconds": params["asked_allreduce_seconds"],
                        "advice": params["communication_advice"],
                        "kept_asked_allreduce_seconds": alexnet_history(settings["checkpoint_dir"])["params"][
                            "asked_allreduce_seconds"] if index == 0 else None})
    (root / f"result-{index}.json").write_text(json.dumps(results))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
