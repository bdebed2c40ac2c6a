"""What the driver of a Spark training shows of its workers, without Spark: the chief's lines of start-up as they are
logged, and each worker's warning once, in one format."""

from __future__ import annotations

import json
import logging
import time

import pytest

from alexnet.launch import job
from alexnet.launch import monitor as monitors
from alexnet.launch.monitor import StatusRelay, describe, is_status
from alexnet.launch.task import Task
from alexnet.launch.training import _status_relay
from alexnet.train.advice import adaptation_text
from alexnet.train.callbacks import progress_writer
from alexnet.train.communication import Communication
from alexnet.train.probe import _probed_text
from alexnet.train.settings_check import check_settings
from alexnet.train.strategy import Topology


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Three categories of two small images each."""
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    root = tmp_path_factory.mktemp("driver")
    src = imagenet_synthetic(root / "src", classes=3, images_per_class=2, val_per_class=0, max_side=48)
    imagenet_upload(src["path"], board=root / "board", workers=2)
    return str(root / "board")


def shown_until(capfd, text: str, within: float = 20) -> str:
    """What the driver's monitor, a child process, wrote to standard error until it wrote ``text`` (or ``within``
    seconds passed)."""
    shown, deadline = "", time.monotonic() + within
    while text not in shown and time.monotonic() < deadline:
        shown += capfd.readouterr().err
        time.sleep(0.1)
    return shown


def test_the_chiefs_start_up_lines_are_relayed_and_nothing_else_it_logs():
    """The lines the chief logs while the workers measure, build and measure the link, as its code words them, are
    sent to the driver; its advice (a warning, or the summary's), its warnings and another worker's are not."""
    from alexnet.train.model import say_building

    sent: list[dict] = []
    relay = StatusRelay(sent.append, 0, 2)
    log = logging.getLogger("alexnet")
    log.addHandler(relay)
    level = log.level
    log.setLevel(logging.INFO)
    try:
        say_building(Topology("multi_worker", 2, 2, 0, True, 1, False), 10, check_settings({"dense_units": 64}))
        logging.getLogger("alexnet.train.levers").info("Communication: %s", adaptation_text(
            {"allreduce_precision": "bfloat16"}))
        logging.getLogger("alexnet.train.levers").warning("Communication: %s", adaptation_text({}))
        logging.getLogger("alexnet.train.run").info("Training AlexNet: 2 workers")
    finally:
        log.removeHandler(relay)
        log.setLevel(level)
    assert [record["kind"] for record in sent] == ["status", "status"]
    assert sent[0]["message"].startswith("Building the model on 2 workers: the chief sends its initial weights")
    assert sent[1] == {"kind": "status", "worker": 0, "workers": 2, "message":
                       "Communication: With `adapt_communication` the run took `allreduce_precision` = 'bfloat16'."}
    timing = {"bytes_per_step": 4e6, "allreduce_seconds": 0.5, "sixteen_bit_allreduce_seconds": 0.3,
              "compute_seconds": 0.1}
    assert is_status(f"Communication: {_probed_text(timing, Communication(workers=2), None)}.")
    assert is_status("Measuring the link between the 2 workers: a step's exchange alone, and its computation.")
    assert is_status("Measuring which precision trains faster here: float32, bfloat16.")
    assert is_status("Precision bfloat16 (measured: float32 28.0, bfloat16 48.0 images/s); XLA off (a CPU).")
    assert not is_status("Communication: One exchange alone takes 0.462 s a step against 0.126 s of computation.")
    task = Task(kind="train", board="b", workers=2, progress="tcp://127.0.0.1:9")
    assert _status_relay(task, 1, 2) is None, "only the chief's"
    assert _status_relay(Task(kind="train", board="b", workers=2), 0, 2) is None, "no monitor, no relay"
    assert isinstance(_status_relay(task, 0, 2), StatusRelay)


def test_a_status_line_is_shown_as_the_workers_but_not_as_a_warning():
    status = {"kind": "status", "worker": 0, "workers": 2, "message": "Building the model on 2 workers: ..."}
    assert describe(status) == "alexnet: worker 0 of 2: Building the model on 2 workers: ..."
    warning = {**status, "kind": "warning", "message": "its disk is nearly full"}
    assert describe(warning) == "alexnet: warning from worker 0 of 2: its disk is nearly full"


def test_a_warning_shown_as_it_was_logged_is_not_said_again_when_the_job_ends(board, capfd, caplog, monkeypatch):
    """The chief's advice came twice on the driver, as the monitor showed it and as a logged warning at the end, in
    two formats; a warning the monitor did not show (none sent) is still said at the end. The chief's lines of
    start-up are shown as the command line types their settings."""
    from alexnet.cli import build_parser, common

    args = build_parser().parse_args(["spark-train", "--workers", "2", "--board", "b"])
    monkeypatch.setattr(monitors, "SAID_AS", common.said_as(args, workers=True))
    plan = job.plan_job(2, board, 2, probe=False)
    advice = "Communication: One exchange alone takes 2.9 s a step."
    took = "Communication: With `adapt_communication` the run took `allreduce_precision` = 'bfloat16'."
    seen = {}

    def launch(task):
        send = progress_writer(task.progress)
        send({"kind": "status", "worker": 0, "workers": 2, "message": took})
        send({"kind": "warning", "worker": 0, "workers": 2, "message": advice})
        send({"kind": "warning", "worker": 1, "workers": 2, "message": advice})  # the same from another: once
        seen["shown"] = shown_until(capfd, "One exchange alone")
        history = {"warnings": [advice, "3 images left out"]}
        return [{"worker": 0, "history": json.dumps(history)}, {"worker": 1, "history": json.dumps(history)}]

    run = job.run_job(plan, launch, driver_host="127.0.0.1")
    assert run.shown == {advice}
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        job.combine_job(plan, run.rows, run.seconds, run.shown)
    assert [record.getMessage() for record in caplog.records] == ["Every worker: 3 images left out"]
    lines = (seen["shown"] + capfd.readouterr().err).splitlines()
    advised = [line for line in lines if "One exchange alone" in line]
    assert advised == [f"alexnet: warning from worker 0 of 2: {advice}"]
    assert ("alexnet: worker 0 of 2: Communication: With `--adapt-communication` the run took `--allreduce-precision` "
            "'bfloat16'.") in lines


@pytest.mark.parametrize("probe", [True, False])
def test_the_probe_of_the_executors_is_said_as_it_starts(board, caplog, probe):
    """The executors' check, a Spark job of its own, took 25 s on a cluster with nothing said."""
    plan = job.plan_job(2, board, 2, probe=probe, progress=False)
    with caplog.at_level(logging.INFO, logger="alexnet.launch.job"):
        job.run_job(plan, lambda task: [{"worker": 0}, {"worker": 1}], driver_host=None,
                    probe=lambda: [{"ok": True, "alexnet": None}] * 2)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Checking the executors")]
    assert said == (["Checking the executors: does the Python that would run the 2 workers import alexnet and "
                     "TensorFlow?"] if probe else [])


def test_an_r_job_raises_every_warning_again_as_it_ends_also_those_the_monitor_showed(board, caplog, monkeypatch):
    """R turns the warnings the core logs during a call into conditions of class `alexnet_warning`, which a caller
    catches; the monitor's lines are text on the console. A Spark job from R says every worker warning again as it
    ends, also one the monitor showed, where it left those out as the command line does."""
    from alexnet.launch import r as r_launcher

    advice = "Communication: One exchange alone takes 2.9 s a step."
    history = json.dumps({"warnings": [advice]})
    shown = job.JobRun([{"worker": k, "workers": 2, "history": history} for k in (0, 1)], 1, 1.0, {advice})
    monkeypatch.setattr(r_launcher, "run_job", lambda *args, **kwargs: shown)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        r_launcher.r_job("train", 2, board, 2, "1", "false", None, lambda task, columns: [], probe=False,
                         progress=False)
    assert [record.getMessage() for record in caplog.records] == [f"Every worker: {advice}"]


def test_the_driver_reads_what_the_monitor_showed_once_it_has_stopped(board, monkeypatch):
    """A warning a worker sent just before the job ended could still be on its way to the console when the driver
    read what the monitor had shown, and was then said again at the end: the monitor is stopped first, so that what
    it shows and what it kept agree."""
    calls = []

    class Stand:
        address = "tcp://127.0.0.1:1"

        def stop(self):
            calls.append("stop")

        def shown_warnings(self):
            calls.append("shown")
            return {"advice"}

        def close(self):
            calls.append("close")

        def take_failures(self):
            return []

    monkeypatch.setattr(job, "start_monitor", lambda host: Stand())
    plan = job.plan_job(2, board, 2, probe=False)
    run = job.run_job(plan, lambda task: [{"worker": 0}, {"worker": 1}], driver_host="127.0.0.1")
    assert run.shown == {"advice"} and calls.index("stop") < calls.index("shown")


def test_an_r_jobs_monitor_says_the_workers_lines_in_rs_words(board, capfd):
    """From R, the monitor said `allreduce_precision` = 'bfloat16' and "(partition None then, ...)" while R's warning
    of the same text, as the job ended, said "bfloat16" and NULL."""
    from alexnet.launch import r as r_launcher

    took = "Communication: With `adapt_communication` the run took `allreduce_precision` = 'bfloat16'."
    other = "other images (partition None then, 0 now); `keep_best` = True"
    seen = {}

    def launch(task, columns):
        send = progress_writer(task["progress"])
        send({"kind": "status", "worker": 0, "workers": 2, "message": took})
        send({"kind": "warning", "worker": 1, "workers": 2, "message": other})
        seen["shown"] = shown_until(capfd, "other images")
        return [{"worker": k, "workers": 2, "history": json.dumps({"warnings": [other]})} for k in (0, 1)]

    r_launcher.r_job("train", 2, board, 2, "1", "false", "127.0.0.1", launch, probe=False)
    lines = seen["shown"].splitlines()
    assert ("alexnet: worker 0 of 2: Communication: With `adapt_communication` the run took `allreduce_precision` = "
            '"bfloat16".') in lines
    assert "alexnet: warning from worker 1 of 2: other images (partition NULL then, 0 now); `keep_best` = TRUE" in lines
    assert monitors.SAID_AS is None, "the command line's words, or the core's, again after the job"
