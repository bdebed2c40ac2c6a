"""The driver's side of a distributed run, without Spark: checks, probe verdicts, failures, retries, progress."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import alexnet
from alexnet.child import python_environment
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.errors import AlexnetError, BoardError
from alexnet.launch import job
from alexnet.launch.monitor import describe, start_monitor
from alexnet.launch.task import Task
from alexnet.launch.work import worker_function
from alexnet.launch.worker import WorkerError, run_worker
from alexnet.train.callbacks import progress_writer


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Three categories of two small images each."""
    root = tmp_path_factory.mktemp("job")
    src = imagenet_synthetic(root / "src", classes=3, images_per_class=2, val_per_class=0, max_side=48)
    imagenet_upload(src["path"], board=root / "board", workers=2)
    return str(root / "board")


def test_plan_checks_slots_categories_arguments_and_ports(board):
    with pytest.raises(AlexnetError, match=r"3 workers need 3 task slots .* has 2: use `workers` <= 2"):
        job.plan_job(3, board, 2)
    with pytest.raises(AlexnetError, match=r"4 workers need at least 4 categories.* has 3: use `workers` <= 3"):
        job.plan_job(4, board, None)
    with pytest.raises(AlexnetError, match="`strategy` cannot be given"):
        job.plan_job(2, board, 2, strategy="mirrored")
    with pytest.raises(AlexnetError, match="`data` cannot be given"):
        job.plan_job(2, board, 2, data={})
    with pytest.raises(AlexnetError, match="`base_port` must leave room for 2 ports"):
        job.plan_job(2, board, 2, base_port=65535)
    from alexnet.train.cluster import check_base_port

    assert check_base_port(65534, 2) == 65534, "workers at 65534 and 65535: the last port there is"
    with pytest.raises(AlexnetError, match="`retries` must be a whole number >= 0"):
        job.plan_job(2, board, 2, retries=-1)
    assert job.check_slots(50, None) == 50


def test_slots_given_by_a_function_are_asked_for_last_so_a_job_refused_starts_no_spark(board, monkeypatch, capsys):
    """The command line started Spark (seconds, a JVM) before the driver's checks of the board and the checkpoints,
    which then refused the job."""
    asked: list[int] = []

    def slots() -> int:
        asked.append(1)
        return 2

    with pytest.raises(AlexnetError, match="4 workers need at least 4 categories"):
        job.plan_job(4, board, slots)
    assert asked == [], "refused before the slots were asked for"
    with pytest.raises(AlexnetError, match=r"3 workers need 3 task slots .* has 2"):
        job.plan_job(3, board, slots)
    assert job.plan_job(2, board, slots).workers == 2 and asked == [1, 1]

    pytest.importorskip("pyspark")
    import alexnet.launch.spark  # noqa: F401  (imported before the patch, which its own name would otherwise keep)
    from alexnet.cli import main
    from alexnet.launch import session as spark

    def no_session(*args, **kwargs):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(spark, "spark_session", no_session)
    assert main(["spark-train", "--workers", "4", "--board", board]) == 2
    err = capsys.readouterr().err
    assert "alexnet spark-train: error: 4 workers need at least 4 categories" in err, err
    # a local master's slots are known before it starts: too many workers for them refused first, Spark not started
    assert main(["spark-train", "--workers", "3", "--master", "local[2]", "--board", board]) == 2
    err = capsys.readouterr().err
    assert "alexnet spark-train: error: 3 workers need 3 task slots at once" in err and "has 2" in err, err


@pytest.mark.parametrize(("master", "slots"), [
    ("local[2]", 2), ("local[ 4 , 3 ]", 4), ("local", 1), ("local[*]", len(os.sched_getaffinity(0))),
    ("local[*,2]", len(os.sched_getaffinity(0))), ("spark://127.0.0.1:7077", None), ("yarn", None),
    ("local-cluster[2,1,1024]", None),
])
def test_the_slots_of_a_local_master_are_known_before_it_starts(master, slots):
    from alexnet.launch.session import SparkToStart

    assert SparkToStart(master).local_slots() == slots


def test_a_python_without_pyspark_or_a_bucket_s_file_system_is_told_what_installs_it(board, monkeypatch):
    """From Python, a Spark job without pyspark ended in pyspark's own ModuleNotFoundError (the command line and R
    said what to install), and a board on s3:// without s3fs in s3fs's."""
    from alexnet.errors import MissingModuleError
    from alexnet.launch.session import SparkToStart

    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    for module, call, installs in (
        ("pyspark", lambda: alexnet.alexnet_spark_train(SparkToStart("local[2]"), 2, board, epochs=1),
         "the `spark` extra of the core, which this needs"),
        ("s3fs", lambda: alexnet.imagenet_categories("s3://bucket/board"), "the `s3` extra of the core"),
        ("gcsfs", lambda: alexnet.imagenet_categories("gs://bucket/board"), "one of the core's own dependencies"),
    ):
        with monkeypatch.context() as lacking:
            for name in [name for name in sys.modules if name.split(".")[0] == module] or [module]:
                lacking.setitem(sys.modules, name, None)  # as in a Python without it (imported before or not)
            with pytest.raises(MissingModuleError) as missing:
                call()
        said = str(missing.value)
        assert said.startswith(f"This Python ({sys.executable}) has no module `{module}`, {installs}"), said
        assert missing.value.name == module and isinstance(missing.value, AlexnetError)


def _job_failures():
    from alexnet.errors import run_error
    from alexnet.train.lost import WorkerLostError

    return [
        (WorkerError(1, 2, "ValueError: no such file", ["line one"], 1, None), 1),
        (job.SparkJobError(2, None, ["ExecutorLostFailure (executor 0 exited)"]), 1),
        (WorkerLostError("Worker 0 of 2 cannot go on: worker 1 of 2 stopped sending heartbeats", 1, "heartbeats"), 1),
        (run_error("The training on 2 worker(s) did not finish within timeout = 5 s, so the Spark job was cancelled"),
         1),
        (AlexnetError("2 workers need 2 task slots at once (one barrier task each), but this Spark application has 1"),
         2),
    ]


@pytest.mark.parametrize("index", range(5))
def test_a_job_that_fails_while_it_runs_exits_1_and_one_whose_settings_are_refused_2(board, monkeypatch, capsys,
                                                                                        index):
    """A worker's failure, Spark's, a timeout all exited with status 2, as a bad option value does."""
    pytest.importorskip("pyspark")
    import alexnet
    from alexnet.cli import main
    from alexnet.cli.common import CORE

    failure, status = _job_failures()[index]

    def failing(*args, **kwargs):
        raise failure

    monkeypatch.setattr(alexnet, CORE["spark-train"], failing)
    assert main(["spark-train", "--workers", "2", "--board", board, "--epochs", "1"]) == status
    assert "alexnet spark-train: error: " in capsys.readouterr().err


def test_plan_checks_the_schedule_with_alexnet_trains_defaults_before_the_board():
    nowhere = "/nowhere/board"  # never opened: the schedule is checked first
    with pytest.raises(AlexnetError, match="`image_size` has 3 sizes but `epochs` is 2"):
        job.plan_job(2, nowhere, 2, image_size=[64, 96, 128])  # alexnet_train's default epochs: 2
    with pytest.raises(AlexnetError, match="`image_size_epochs` = \\[1, 1\\] does not fit"):
        job.plan_job(2, nowhere, 2, epochs=3, image_size=[64, 96], image_size_epochs=[1, 1])
    with pytest.raises(AlexnetError, match="`lr_scaling` must be"):
        job.plan_job(2, nowhere, 2, lr_scaling="cubic")
    with pytest.raises(AlexnetError, match="`warmup_epochs` = 5 is more than `epochs` \\(2\\)"):
        job.plan_job(2, nowhere, 2, warmup_epochs=5)
    with pytest.raises(AlexnetError, match="`precision` must be"):
        job.plan_job(2, nowhere, 2, precision="int8")
    with pytest.raises(BoardError):
        job.plan_job(2, nowhere, 2, epochs=3, image_size=[64, 96], precision="bfloat16")  # fits: the board next


def test_plan_settles_what_each_task_needs(board, tmp_path):
    plan = job.plan_job(2, board, 2, base_port=9100, checkpoint_dir=tmp_path / "ckpt", epochs=3, retries=2)
    assert plan.workers == 2 and plan.retries == 2 and plan.board == board
    assert plan.task.options.base_port == 9100 and plan.task.board == board
    settings = plan.task.settings
    assert (settings.checkpoint_dir, settings.model_dir, settings.epochs) == (str(tmp_path / "ckpt"),) * 2 + (3,)
    assert settings.verbose == 2, "a worker logs one line per epoch unless told otherwise"
    assert not (tmp_path / "ckpt").exists(), "a local checkpoint folder proven writable on the driver is not left"
    from alexnet.storage.board import open_board
    from alexnet.storage.layout import categories_and_version

    assert plan.task.categories_version == categories_and_version(open_board(board))[1] is not None


def test_a_worker_that_read_another_categories_table_than_the_driver_stops(board):
    from alexnet.launch.training import check_same_table

    plan = job.plan_job(2, board, 2, epochs=1)
    planned = plan.task.categories_version
    check_same_table(plan.task, {"categories_version": planned}, 1)
    check_same_table(plan.task, {"categories_version": None}, 1)  # a board that does not say (https://)
    with pytest.raises(AlexnetError, match=rf"^board {re.escape(board)} was uploaded to after this job began: the "
                                           rf"driver planned it with version {planned} of its categories table, and "
                                           r"worker 1 read version 2099.*Run the job again once the upload is over\.$"):
        check_same_table(plan.task, {"categories_version": "20990101T000000Z-aaaaa"}, 1)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("https://example.com/runs", r"`checkpoint_dir` = https://example.com/runs cannot be written: .*read only"),
        ("ftp://host/runs", r"checkpoint_dir"),
        ("", r"checkpoint_dir"),
    ],
)
def test_an_output_location_that_cannot_be_written_is_an_error_before_any_work(board, location, message):
    start = time.monotonic()
    with pytest.raises((AlexnetError, BoardError), match=message):
        job.plan_job(2, board, 2, checkpoint_dir=location)
    assert time.monotonic() - start < 10


def test_a_local_output_folder_on_a_cluster_gets_a_warning(board, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        job.plan_job(2, board, 2, model_dir=tmp_path / "model", local_master=False)
    assert any("`model_dir`" in r.getMessage() and "gs://" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        job.plan_job(2, board, 2, model_dir=tmp_path / "model", local_master=True)
    assert not caplog.records


def test_an_output_folder_on_a_network_file_system_is_shared_and_gets_no_warning(board, tmp_path, caplog,
                                                                                  monkeypatch):
    """The warning of a local path came at every launch, also for a folder every node mounts over NFS: the mount's
    type now tells (the longest mount point that holds the path, a space in it written as /proc/mounts writes it)."""
    from alexnet.storage import location

    shared, local = tmp_path / "on nfs", tmp_path / "local"
    mounts = tmp_path / "mounts"
    monkeypatch.setattr(location, "MOUNTS_FILE", str(mounts), raising=False)
    for kind in ("nfs4", "fuse.gcsfuse"):
        mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {str(shared).replace(' ', chr(92) + '040')} "
                          f"{kind} rw 0 0\n")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="alexnet"):
            job.plan_job(2, board, 2, checkpoint_dir=shared / "ckpt", local_master=False)
        assert not caplog.records, kind
        assert location.mounted_file_system(shared / "ckpt") == (kind, str(shared))
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        job.plan_job(2, board, 2, checkpoint_dir=local / "ckpt", local_master=False)
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"`checkpoint_dir` = {local / 'ckpt'} is a path on this machine's ext4 file system "
                           "(mounted at /): ") and "If every node mounts one shared folder at this path, this is fine" \
        in said
    monkeypatch.setattr(location, "MOUNTS_FILE", str(tmp_path / "none"))  # no list of mounts: said as before
    assert location.local_path_warning("`model_dir` = /m", "/m").startswith("`model_dir` = /m is a path: ")


def test_a_failed_probe_names_each_executor_its_python_and_the_fix():
    missing = "ModuleNotFoundError: No module named 'alexnet'"
    rows = [
        {"host": "node1", "python": "/usr/bin/python3", "ok": False, "error": missing},
        {"host": "node1", "python": "/usr/bin/python3", "ok": False, "error": missing},
        {"host": "node2", "python": "/venv/bin/python", "ok": True, "alexnet": "0.1.0", "tensorflow": "2.21.0"},
    ]
    with pytest.raises(AlexnetError) as caught:
        job.check_probe(rows, "Set PYSPARK_PYTHON.")
    message = str(caught.value)
    assert "cannot run alexnet on 1 executor(s)" in message
    assert "node1: /usr/bin/python3: ModuleNotFoundError: No module named 'alexnet'" in message
    assert "node2" not in message and message.endswith("Set PYSPARK_PYTHON.")
    assert caught.value.while_running, "found by the job's run on the executors: the command line exits 1"
    job.check_probe([{**rows[2], "alexnet": alexnet.__version__}], "unused")  # all good: no error


def test_executors_of_another_version_of_alexnet_than_the_drivers_are_said(caplog):
    rows = [{"host": "node2", "python": "/venv/bin/python", "ok": True, "alexnet": "0.0.1", "tensorflow": "2.21.0"},
            {"host": "node3", "python": "/venv/bin/python", "ok": True, "alexnet": alexnet.__version__,
             "tensorflow": "2.21.0"}]
    with caplog.at_level(logging.WARNING, logger=job.__name__):
        job.check_probe(rows, "unused")
        job.check_probe(rows[1:], "unused")
    said = [r.getMessage() for r in caplog.records if r.name == job.__name__]
    assert said == [f"The executors run another version of alexnet than this driver's {alexnet.__version__}: 0.0.1 "
                    "on node2 (/venv/bin/python). A driver and workers of different versions may not read each "
                    "other's settings and results: install the same version on every machine."]


def test_probe_task_tells_a_python_without_alexnet_from_one_with_it(tmp_path, monkeypatch):
    from alexnet.launch.probe_task import check_python

    monkeypatch.chdir(tmp_path)  # not in python/, where `import alexnet` finds the source folder

    good = check_python(sys.executable)
    assert good["ok"] is True and good["alexnet"] and good["tensorflow"], good
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    bad = check_python(str(bare / "bin" / "python"))
    assert bad["ok"] is False and bad["error"] == "ModuleNotFoundError: No module named 'alexnet'", bad
    missing = check_python(str(tmp_path / "no-such-python"))
    assert missing["ok"] is False and "FileNotFoundError" in missing["error"]


JAVA_NOISE = "\n".join(f"\tat org.apache.spark.scheduler.DAGScheduler.run{i}(DAGScheduler.scala:1)" for i in range(40))


def test_a_spark_failure_leads_with_the_python_error_not_the_java_stack():
    message = (
        "An error occurred while calling o123.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "worker.py", line 1, in <module>\n'
        "ModuleNotFoundError: No module named 'alexnet'\n" + JAVA_NOISE
    )
    failure = job.failure_of(RuntimeError(message), 2)
    assert isinstance(failure, job.SparkJobError)
    assert failure.python_error == "ModuleNotFoundError: No module named 'alexnet'"
    text = str(failure)
    assert text.startswith("The Spark job of 2 worker(s) failed before a worker reported an error: ModuleNotFound")
    assert "DAGScheduler" not in text and "Traceback" not in text and 'File "worker.py"' not in text
    assert len(text.splitlines()) == 2  # the lead, and where Spark's whole message is
    # without a Python error, Spark's first lines, without its stack
    other = str(job.failure_of(RuntimeError("Job aborted: lost executor 3\n" + JAVA_NOISE), 2))
    assert "\n  Job aborted: lost executor 3\n" in other and "DAGScheduler" not in other


def test_a_worker_error_survives_whatever_spark_wraps_around_it():
    original = WorkerError(1, 2, "ValueError: broken", ["line one", "line two"], 1, "node7:/tmp/alexnet-logs/w1.log")
    wrapped = RuntimeError("Py4JJavaError: ...\n" + JAVA_NOISE + "\nRuntimeError: " + original.task_failure() + "\n"
                           + JAVA_NOISE)
    failure = job.failure_of(wrapped, 2)
    assert isinstance(failure, WorkerError)
    assert (failure.worker, failure.workers, failure.error) == (1, 2, "ValueError: broken")
    assert str(failure).startswith("Worker 1 of 2 failed: ValueError: broken\nFull log: node7:/tmp/alexnet-logs/w1.log")
    assert "DAGScheduler" not in str(failure)


def _port_taken(index: int, addresses: list[str]) -> None:  # a worker's own error, which says what to change
    raise AlexnetError(f"Port 8501 on this host, where worker {index} is to listen, is already in use.")


def _broken(index: int, addresses: list[str]) -> None:
    print("about to fail", flush=True)
    raise ValueError(f"broken on worker {index}")


def test_a_worker_failing_with_the_packages_own_error_is_said_by_its_message_without_its_traceback(monkeypatch,
                                                                                                   tmp_path):
    """Its message says what to change: the traceback and the class's module before it said nothing more."""
    monkeypatch.setenv("ALEXNET_LOG_DIR", str(tmp_path))
    here = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])}
    with pytest.raises(WorkerError) as caught:
        run_worker(_port_taken, 1, ["127.0.0.1:8500", "127.0.0.1:8501"], env=here)
    error = caught.value
    assert error.known and error.error == "Port 8501 on this host, where worker 1 is to listen, is already in use."
    assert str(error).startswith(f"Worker 1 of 2 failed: {error.error}\nFull log: ")
    assert "Last lines of its log" not in str(error) and "Traceback" not in str(error)
    assert str(error).endswith("(a training with `checkpoint_dir` resumes from its last checkpoint).")
    # as the driver reads it back from Spark's failure of the task
    again = WorkerError.from_failure(RuntimeError(error.task_failure()).args[0])
    assert again is not None and again.known and str(again) == str(error)
    # any other error: its type, and the last lines of its log
    with pytest.raises(WorkerError) as caught:
        run_worker(_broken, 0, ["127.0.0.1:8500"], env=here)
    assert not caught.value.known and caught.value.error == "ValueError: broken on worker 0"
    assert "\nLast lines of its log:\n" in str(caught.value) and "about to fail" in str(caught.value)


def _result(index: int, addresses: list[str]) -> dict:
    print(f"worker {index} trained", flush=True)
    return {"worker": index}


def test_a_worker_that_succeeds_says_where_its_log_is(monkeypatch, tmp_path):
    """A worker's log was named only when it failed; its result now says where it is, on its host."""
    monkeypatch.setenv("ALEXNET_LOG_DIR", str(tmp_path))
    here = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])}
    result = run_worker(_result, 1, ["127.0.0.1:8500", "127.0.0.1:8501"], env=here)
    host, log = result["log"].split(":", 1)
    assert result["worker"] == 1 and host == socket.gethostname() and os.path.dirname(log) == str(tmp_path)
    assert "worker 1 trained" in Path(log).read_text()


def _failing_launch(failures: int, calls: list):
    def launch(task):
        calls.append(task)
        if len(calls) <= failures:
            raise RuntimeError(WorkerError(1, 2, "OSError: lost", [], -9, "h:/log").task_failure())
        return [{"worker": 1}, {"worker": 0}]

    return launch


def test_a_failed_stage_is_launched_again_up_to_retries_times(board, tmp_path, caplog):
    plan = job.plan_job(2, board, 2, retries=2, checkpoint_dir=tmp_path / "ckpt")
    calls: list = []
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        run = job.run_job(plan, _failing_launch(2, calls), driver_host=None)
    assert len(calls) == 3 and run.attempt == 3
    assert [row["worker"] for row in run.rows] == [0, 1] and {row["attempt"] for row in run.rows} == {3}
    retries = [r.getMessage() for r in caplog.records if "Launching the 2 workers again" in r.getMessage()]
    assert len(retries) == 2 and "resuming from the last checkpoint (retry 2 of 2)" in retries[1]
    assert retries[0].startswith("Worker 1 of 2 failed: OSError: lost\nFull log: h:/log\nLaunching")

    calls.clear()
    with pytest.raises(WorkerError, match="Worker 1 of 2 failed: OSError: lost"):
        job.run_job(plan, _failing_launch(3, calls), driver_host=None)
    assert len(calls) == 3


def test_a_training_out_of_retries_names_retries_as_the_way_to_resume_by_itself(board, tmp_path):
    """A training with `checkpoint_dir` whose last launch failed says that `retries` relaunches it, resuming; one
    without a checkpoint folder, which would start afresh, does not."""
    with_checkpoints = job.plan_job(2, board, 2, checkpoint_dir=tmp_path / "ckpt", probe=False, progress=False)
    with pytest.raises(WorkerError) as failed:
        job.run_job(with_checkpoints, _failing_launch(1, []), driver_host=None)
    assert str(failed.value).endswith("Give `retries` = 1 or more for the workers to be launched again after a "
                                      "failure, resuming from the last checkpoint by themselves.")
    once = job.plan_job(2, board, 2, checkpoint_dir=tmp_path / "ckpt", retries=1, probe=False, progress=False)
    with pytest.raises(WorkerError, match=r"Give `retries` = 2 or more \(this job had 1\)"):
        job.run_job(once, _failing_launch(2, []), driver_host=None)
    with pytest.raises(job.SparkJobError, match=r"Give `retries` = 1 or more"):
        job.run_job(with_checkpoints, lambda task: (_ for _ in ()).throw(RuntimeError("Lost executor 0")),
                    driver_host=None)
    afresh = job.plan_job(2, board, 2, probe=False, progress=False)
    with pytest.raises(WorkerError) as failed:
        job.run_job(afresh, _failing_launch(1, []), driver_host=None)
    assert "`retries`" not in str(failed.value)


def test_a_workers_own_settings_error_is_not_advised_a_relaunch(board, tmp_path):
    """Every failed training with `checkpoint_dir` was advised `retries`, also after a worker's own error that says
    what to change (the workers restored different checkpoints), which every relaunch meets alike. Only a failure a
    relaunch may not meet again is: a worker lost or killed, or a known error found while the run ran (a partner
    lost), as the barrier task's failure carries it to the driver."""
    plan = job.plan_job(2, board, 2, checkpoint_dir=tmp_path / "ckpt", probe=False, progress=False)

    def failing(error):
        def launch(task):
            raise RuntimeError(WorkerError.from_failure(error.task_failure()).task_failure())
        return launch

    own = WorkerError(1, 2, "The workers restored different checkpoints: use storage every worker shares.", [], 1,
                      "h:/log", known=True)
    lost = WorkerError(0, 2, "Worker 1 of 2 was lost: see its own error.", [], 1, "h:/log", known=True, in_run=True)
    killed = WorkerError(1, 2, "its process was killed by SIGKILL without a result", [], -9, "h:/log")
    said = {}
    for name, error in (("own", own), ("lost", lost), ("killed", killed)):
        with pytest.raises(WorkerError) as failed:
            job.run_job(plan, failing(error), driver_host=None)
        said[name] = str(failed.value)
    assert "`retries`" not in said["own"] and said["own"].startswith("Worker 1 of 2 failed: The workers restored")
    assert all(said[name].endswith("Give `retries` = 1 or more for the workers to be launched again after a failure, "
                                   "resuming from the last checkpoint by themselves.") for name in ("lost", "killed"))


def test_a_relaunch_after_a_lost_spark_worker_says_which_went_away(board, tmp_path, caplog):
    """The warning kept only "failed before a worker reported an error", where Spark's message named the host."""
    plan = job.plan_job(2, board, 2, retries=1, checkpoint_dir=tmp_path / "ckpt")
    lost = ("Job aborted due to stage failure: Task 1 in stage 3.0 failed 1 times, most recent failure: Lost task 1.0 "
            "in stage 3.0 (TID 7) (10.231.9.2 executor 0): ExecutorLostFailure (executor 0 exited unrelated to the "
            "running tasks) Reason: worker lost: 10.231.9.2:40391 got disassociated\n" + JAVA_NOISE)
    calls: list = []

    def launch(task):
        calls.append(task)
        if len(calls) == 1:
            raise RuntimeError(lost)
        return [{"worker": 0}, {"worker": 1}]

    with caplog.at_level(logging.WARNING, logger="alexnet"):
        job.run_job(plan, launch, driver_host=None)
    (said,) = [r.getMessage() for r in caplog.records if "Launching the 2 workers again" in r.getMessage()]
    assert said.startswith("The Spark job of 2 worker(s) failed before a worker reported an error\n  ")
    assert "Reason: worker lost: 10.231.9.2:40391 got disassociated" in said.splitlines()[1]


def test_errors_of_the_arguments_are_not_retried(board):
    plan = job.plan_job(2, board, 2, retries=3)
    calls = []

    def launch(task):
        calls.append(task)
        raise AlexnetError("`epochs` must be a whole number >= 1, not 0.")

    with pytest.raises(AlexnetError, match="epochs"):
        job.run_job(plan, launch, driver_host=None)
    assert len(calls) == 1


def shown_until(capfd, text: str, within: float = 20) -> str:
    """What the driver's monitor, a child process, wrote to this standard error until it wrote ``text`` (or
    ``within`` seconds passed)."""
    shown, deadline = "", time.monotonic() + within
    while text not in shown and time.monotonic() < deadline:
        shown += capfd.readouterr().err
        time.sleep(0.1)
    return shown


@pytest.mark.parametrize("quiet", [False, True], ids=["notes", "quiet"])
def test_the_command_lines_quiet_shows_the_workers_warnings_and_not_their_progress(capfd, monkeypatch, quiet):
    from alexnet import cli
    from alexnet.cli import cluster
    from alexnet.launch import monitor as monitors

    seen = {}

    def spark_train(args):  # in place of the Spark job: what its chief and a worker send the driver's monitor
        assert monitors.WARNINGS_ONLY is quiet
        monitor = start_monitor("127.0.0.1")
        assert monitor is not None
        try:
            send = progress_writer(monitor.address)
            send({"kind": "step", "epoch": 1, "epochs": 1, "step": 1, "steps": 2, "loss": 2.0})
            send({"kind": "evaluate", "worker": 0, "workers": 2, "images": 3, "total": 6})
            send({"kind": "warning", "worker": 1, "workers": 2, "message": "its disk is nearly full"})
            seen["shown"] = shown_until(capfd, "its disk is nearly full")
        finally:
            monitor.close()

    monkeypatch.setattr(cluster, "_spark_train", spark_train)
    assert cli.main([*(["-q"] if quiet else []), "spark-train", "--workers", "2"]) == 0
    shown = seen["shown"]
    assert "alexnet: warning from worker 1 of 2: its disk is nearly full" in shown
    assert ("epoch 1/1, step 1/2" in shown) is not quiet and ("evaluation, worker 0 of 2" in shown) is not quiet
    assert monitors.WARNINGS_ONLY is False


def test_describe_makes_a_line_of_a_progress_record():
    step = {"kind": "step", "epoch": 2, "epochs": 3, "step": 14, "steps": 20, "loss": 1.23456, "accuracy": 0.5,
            "images_per_second": 812.4}
    assert describe(step) == "alexnet: epoch 2/3, step 14/20: loss 1.235, accuracy 0.5, 812 images/s over all workers"
    epoch = {"kind": "epoch", "epoch": 3, "epochs": 3, "loss": 1.0, "val_accuracy": 0.25}
    assert describe(epoch) == "alexnet: epoch 3/3: loss 1, val_accuracy 0.25"
    scored = {"kind": "evaluate", "worker": 1, "workers": 2, "images": 120, "total": 500, "images_per_second": 40.2}
    assert describe(scored) == "alexnet: evaluation, worker 1 of 2: 120/500 images, 40 images/s"


def test_the_chiefs_progress_reaches_the_driver_while_the_stage_runs(board, capfd):
    plan = job.plan_job(2, board, 2)
    seen = {}

    def launch(task):
        target = task.settings.progress_file
        assert target.startswith("tcp://127.0.0.1:")
        send = progress_writer(target)  # what the chief's Progress callback does
        for step in (1, 2):
            send({"kind": "step", "epoch": 1, "epochs": 1, "step": step, "steps": 2, "loss": 2.0 / step})
        shown = shown_until(capfd, "step 2/2")
        seen["shown"] = shown
        return [{"worker": 0}, {"worker": 1}]

    job.run_job(plan, launch, driver_host="127.0.0.1")
    assert "alexnet: epoch 1/1, step 1/2: loss 2" in seen["shown"], seen
    assert "alexnet: epoch 1/1, step 2/2: loss 1" in seen["shown"], seen


def test_the_monitor_shows_each_record_and_stops_when_closed(capfd):
    monitor = start_monitor("127.0.0.1")
    assert monitor is not None
    try:
        progress_writer(monitor.address)({"kind": "epoch", "epoch": 1, "epochs": 2, "loss": 1.5, "accuracy": 0.25})
        shown = shown_until(capfd, "epoch 1/2")
    finally:
        monitor.close()
    assert "alexnet: epoch 1/2: loss 1.5, accuracy 0.25" in shown
    assert monitor.process.poll() is not None and not Path(monitor.folder).exists()


def test_a_workers_warnings_reach_the_drivers_monitor_as_they_are_logged(capfd):
    """A worker's warnings (a relaunched chief waiting for the last one's lock on checkpoint_dir, the advice on a slow
    link) were shown on the driver only once the run had ended, which may be days; each is now sent to the driver's
    monitor the first time it is logged, and still kept for the rows."""
    import dataclasses

    from alexnet.errors import KeptWarnings
    from alexnet.launch.training import _warning_relay

    monitor = start_monitor("127.0.0.1")
    assert monitor is not None
    task = Task(kind="train", board="b", workers=2)
    assert _warning_relay(task, 1, 2) is None, "no monitor, no relay"
    kept = KeptWarnings(_warning_relay(dataclasses.replace(task, progress=monitor.address), 1, 2))
    log = logging.getLogger("alexnet.test")
    log.addHandler(kept)
    try:
        log.warning("Another run holds %s: waiting up to 60 s.", "gs://b/ckpt")
        log.warning("Another run holds %s: waiting up to 60 s.", "gs://b/ckpt")
        log.info("not a warning")
        log.warning("the second")
        shown = shown_until(capfd, "the second")
    finally:
        log.removeHandler(kept)
        monitor.close()
    assert kept.messages == ["Another run holds gs://b/ckpt: waiting up to 60 s."] * 2 + ["the second"]
    relayed = [line for line in shown.splitlines() if line.startswith("alexnet: warning from worker 1 of 2: ")]
    assert relayed == ["alexnet: warning from worker 1 of 2: Another run holds gs://b/ckpt: waiting up to 60 s.",
                       "alexnet: warning from worker 1 of 2: the second"], shown


def test_the_monitor_says_the_workers_warnings_as_the_command_line_typed_them(capfd, monkeypatch):
    """Shown live, a warning named `batch_size` where the same warning at the job's end, and every error of the
    command, said `--batch-size`."""
    from alexnet.cli import build_parser, common
    from alexnet.launch import monitor as monitor_module

    args = build_parser().parse_args(["spark-train", "--workers", "2", "--board", "b"])
    monkeypatch.setattr(monitor_module, "SAID_AS", common.said_as(args))
    monitor = start_monitor("127.0.0.1")
    assert monitor is not None
    try:
        send = progress_writer(monitor.address)  # one connection: the records arrive in order
        for worker in (0, 1):  # the same advice from both workers: shown once
            send({"kind": "warning", "worker": worker, "workers": 2,
                  "message": "more than the 24 images: give a smaller `batch_size` or keep_best = TRUE"})
        send({"kind": "warning", "worker": 1, "workers": 2, "message": "the last"})
        shown = shown_until(capfd, "the last")
    finally:
        monitor.close()
    assert "alexnet: warning from worker 0 of 2: more than the 24 images: give a smaller `--batch-size` or " \
           "--keep-best" in shown, shown
    assert shown.count("more than the 24 images") == 1, shown


def test_a_relay_that_fails_or_warns_itself_does_not_stop_the_warnings():
    from alexnet.errors import KeptWarnings

    calls = []
    log = logging.getLogger("alexnet.test")

    def relay(message):
        calls.append(message)
        log.warning("cannot report progress")  # what progress_writer says, once, when the monitor is gone
        raise OSError("gone")

    kept = KeptWarnings(relay)
    log.addHandler(kept)
    try:
        log.warning("first")
        log.warning("second")
    finally:
        log.removeHandler(kept)
    assert calls == ["first", "second"], "the relay's own warning is kept, not relayed"
    assert kept.messages == ["first", "cannot report progress", "second", "cannot report progress"]


def test_a_monitor_that_does_not_start_leaves_no_folder_and_one_outliving_its_driver_ends(monkeypatch, tmp_path):
    from alexnet.launch import monitor as monitor_module

    made: list[str] = []
    real = monitor_module.make_scratch
    monkeypatch.setattr(monitor_module, "make_scratch", lambda prefix: made.append(real(prefix)) or made[-1])
    monkeypatch.setattr(monitor_module, "python_executable", lambda: str(tmp_path / "no-python"))
    assert start_monitor("127.0.0.1") is None, "a warning, and training without progress"
    monkeypatch.setattr(monitor_module, "python_executable", lambda: sys.executable)
    monkeypatch.setattr(monitor_module, "START_TIMEOUT", 0.0)
    assert start_monitor("127.0.0.1") is None
    assert len(made) == 2 and not any(Path(folder).exists() for folder in made)
    # a monitor told of a driver that is gone already (no process has that id) ends at once
    ended = subprocess.run([sys.executable, "-m", "alexnet.launch.monitor", "127.0.0.1", str(tmp_path / "port"),
                            "1999999"], timeout=60, check=False)
    assert ended.returncode == 3 and not (tmp_path / "port").exists()


def test_ctrl_c_ends_the_monitors_serving_quietly_and_its_process_leaves_it_to_its_driver(monkeypatch, tmp_path):
    """Ctrl-C in a terminal interrupts the driver's whole process group: the monitor printed a KeyboardInterrupt
    traceback above the driver's one line."""
    import signal
    import socketserver

    from alexnet.launch import monitor as monitor_module

    def interrupted(self, poll_interval=0.5):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(socketserver.BaseServer, "serve_forever", interrupted)
        monitor_module._serve("127.0.0.1", str(tmp_path / "port"))  # returns, no traceback
    assert (tmp_path / "port").read_text().isdigit()
    port = tmp_path / "port-2"
    process = subprocess.Popen([sys.executable, "-m", "alexnet.launch.monitor", "127.0.0.1", str(port),
                                str(os.getpid())], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(monitor_module.__file__).parents[2])})
    try:
        deadline = time.monotonic() + 60
        while not port.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert process.poll() is None, "the driver stops its monitor"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_the_quiet_ctrl_c_of_a_job_run_outside_the_main_thread_changes_no_handler():
    """Spark jobs may be run from a thread (a notebook's, a test's timer): SIGINT's handler is the main thread's."""
    import signal

    from alexnet.launch import spark

    before, restored = signal.getsignal(signal.SIGINT), []
    worker = threading.Thread(target=lambda: restored.append(spark._quiet_after_interrupt()))
    worker.start()
    worker.join()
    restored[0]()
    assert signal.getsignal(signal.SIGINT) is before


def test_the_spark_session_of_a_master_is_where_the_readme_names_it():
    from alexnet.launch import session, spark

    assert spark.spark_session is session.spark_session


def test_ctrl_c_during_a_spark_job_leaves_py4j_s_errors_of_the_call_it_cut_short_unsaid(caplog):
    """pyspark's SIGINT handler cancels the jobs and raises KeyboardInterrupt inside py4j's call, which logged its
    errors (on the root logger) above the command's one line."""
    import signal

    from alexnet.launch import spark

    cancelled: list[str] = []

    def pyspark_handler(signum, frame):
        cancelled.append("all")
        raise KeyboardInterrupt

    def collect():  # as py4j's send_command does when Ctrl-C interrupts it
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            logging.exception("Exception while sending command.")
            logging.exception("KeyboardInterrupt while sending command.")
            logging.getLogger("py4j.clientserver").error("Error while receiving.")
            raise
        return []

    conf = SimpleNamespace(get=lambda key, default=None: default)
    rdd = SimpleNamespace(barrier=lambda: rdd, mapPartitions=lambda task: rdd, collect=collect)
    context = SimpleNamespace(parallelize=lambda data, slices: rdd, getConf=lambda: conf, defaultParallelism=2,
                              addJobTag=lambda tag: None, removeJobTag=lambda tag: None,
                              cancelJobsWithTag=lambda tag: None)
    before = signal.signal(signal.SIGINT, pyspark_handler)
    try:
        with caplog.at_level(logging.DEBUG), pytest.raises(KeyboardInterrupt):
            spark.run_barrier(context, 2, lambda index, addresses: None)
        assert signal.getsignal(signal.SIGINT) is pyspark_handler, "the handler before put back"
    finally:
        signal.signal(signal.SIGINT, before)
    assert cancelled == ["all"]
    said = [r.getMessage() for r in caplog.records if r.name == "root" or r.name.startswith("py4j")]
    assert said == [], said
    assert logging.getLogger("py4j").level == logging.NOTSET and not logging.getLogger().filters
    logging.exception("Exception while sending command.")  # outside an interrupted job, said as before
    assert [r.getMessage() for r in caplog.records if r.name == "root"] == ["Exception while sending command."]


#: py4j's text of the Java error a SparkSession on a standalone master that never answered ends with.
STOPPED_AS_IT_STARTED = """An error occurred while calling None.org.apache.spark.sql.classic.SparkSession.
: java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
This stopped SparkContext was created at:

org.apache.spark.api.java.JavaSparkContext.<init>(JavaSparkContext.scala:59)
py4j.ClientServerConnection.run(ClientServerConnection.java:108)
java.base/java.lang.Thread.run(Thread.java:840)

And it was stopped at:

org.apache.spark.SparkContext$$anon$3.run(SparkContext.scala:2298)

The currently active SparkContext was created at:

(No active SparkContext.)
"""


@pytest.mark.parametrize(("text", "said"), [
    (STOPPED_AS_IT_STARTED, "Spark stopped as it started: its ERROR line above says why"),
    ("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
     ": org.apache.spark.SparkException: Application has been killed. Reason: All masters are unresponsive! "
     "Giving up.\n\tat org.apache.spark.SparkContext.<init>(SparkContext.scala:1)",
     "All masters are unresponsive! Giving up."),
    ("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
     ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n\tat x.y(Z.scala:1)\n"
     "Caused by: java.io.IOException: Failed to connect to /127.0.0.1:7077\n\tat x.y(Z.scala:2)\n"
     "Caused by: java.net.ConnectException: Connection refused\n\tat x.y(Z.scala:3)",
     "java.net.ConnectException: Connection refused"),
    ("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
     ": org.apache.spark.SparkException: Could not parse Master URL: 'bogus://nowhere'\n\tat x.y(Z.scala:1)",
     "org.apache.spark.SparkException: Could not parse Master URL: 'bogus://nowhere'"),
    ("", "no reason given"),
])
def test_why_spark_did_not_start_is_its_root_cause_or_a_masters_words_never_an_empty_prefix(text, said):
    from alexnet.launch.session import java_reason

    assert java_reason(text) == said


def test_a_standalone_master_where_nothing_answers_is_said_at_once_without_starting_spark(monkeypatch):
    """Spark tries to reach a standalone master three times, 20 s apart (not a setting), and said the context it
    stopped then."""
    import socket

    pyspark = pytest.importorskip("pyspark.sql")
    from alexnet.launch import session as spark

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]  # closed: nothing listens there
    monkeypatch.setattr(pyspark.SparkSession.Builder, "getOrCreate",
                        lambda self: pytest.fail("Spark was started"))
    start = time.monotonic()
    with pytest.raises(AlexnetError) as caught:
        spark.spark_session(f"spark://127.0.0.1:{port}")
    assert time.monotonic() - start < 10
    assert str(caught.value) == (
        f"Spark did not start on `master` = 'spark://127.0.0.1:{port}' (nothing answers at 127.0.0.1:{port}: "
        f"Connection refused): {spark.master_advice('spark://x:1')}")
    assert caught.value.while_running, "found once the settings were accepted: the command line exits 1"
    assert spark.unanswered_master("local[2]") is None and spark.unanswered_master("spark://no-port") is None
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        there = listening.getsockname()[1]
        assert spark.unanswered_master(f"spark://127.0.0.1:{port},127.0.0.1:{there}") is None, "one master answers"


def test_progress_that_cannot_be_sent_is_dropped_with_one_warning(caplog):
    unreachable = progress_writer("tcp://127.0.0.1:1")
    with caplog.at_level(logging.WARNING, logger="alexnet.train.callbacks"):
        unreachable({"epoch": 1})  # returns: training goes on
        unreachable({"epoch": 2})
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "Cannot report progress to tcp://127.0.0.1:1" in warnings[0].getMessage()
    assert "training goes on" in warnings[0].getMessage()


def test_progress_to_a_local_file_appends_one_line_per_record(tmp_path):
    local = tmp_path / "progress.jsonl"
    send = progress_writer(str(local))
    send({"epoch": 1})
    send({"epoch": 2, "loss": 0.5})
    assert local.read_text() == '{"epoch": 1}\n{"epoch": 2, "loss": 0.5}\n'


def test_a_misspelt_training_argument_stops_the_run_on_the_driver_before_any_spark_job(board):
    with pytest.raises(AlexnetError, match=r"does not take `epoch` \(did you mean `epochs`\?\)"):
        job.plan_job(2, board, 2, epoch=3)


def test_a_task_survives_the_trip_through_r_as_a_plain_list(board, tmp_path):
    plan = job.plan_job(2, board, 2, epochs=3, timeout=60, env={"A": "1"}, cache_dir=tmp_path)
    plain = plan.task.to_dict()
    plain["settings"]["epochs"] = 3.0  # R numbers are doubles, and vectors of one are scalars
    plain["settings"]["image_size"] = 224.0
    plain["settings"]["lr_drop_epochs"] = [30.0, 60.0, 80.0]
    plain["options"]["base_port"] = float(plain["options"]["base_port"])
    again = Task.from_dict({**plain, "workers": 2.0})
    assert again.kind == "train" and again.workers == 2 and again.evaluation is None
    assert again.board == plan.task.board and again.options.base_port == plan.task.options.base_port
    assert again.categories_version == plan.task.categories_version is not None
    options = again.options
    assert options.timeout == 60.0 and options.env == {"A": "1"} and options.cache_dir == str(tmp_path)
    assert again.settings == plan.task.settings, "typed again, equal to what the driver checked"
    assert again.settings.epochs == 3 and type(again.settings.epochs) is int and again.settings.image_size == (224,)
    assert Task.from_dict({**plain, "options": {**plain["options"], "env": []}}).options.env == {}  # R's empty list
    assert again == plan.task
    function = worker_function(again)
    assert function.func.__name__ == "train_work" and function.keywords["task"] == plan.task


def test_a_worker_that_runs_past_its_timeout_is_stopped_and_says_so():
    with pytest.raises(WorkerError, match=r"Worker 0 of 1 failed: TimeoutError: .* within timeout = 1 s"):
        run_worker(lambda index, addresses: time.sleep(60), 0, ["127.0.0.1:1"], timeout=1)


R_LDPATHS = "/usr/lib/R/etc/ldpaths"


@pytest.mark.skipif(not os.path.exists(R_LDPATHS), reason="R is not installed here")
def test_a_python_started_from_r_gets_the_library_path_it_would_have_outside_r():
    out = subprocess.run(["sh", "-c", f"unset LD_LIBRARY_PATH; . {R_LDPATHS}; printf %s \"$LD_LIBRARY_PATH\""],
                         capture_output=True, text=True, check=True, env={"R_HOME": "/usr/lib/R", "PATH": os.defpath})
    prefix = out.stdout
    assert prefix, "R's ldpaths sets a library path"
    under_r = {"R_HOME": "/usr/lib/R", "LD_LIBRARY_PATH": f"{prefix}:{prefix}:/opt/mine/lib", "PATH": "/usr/bin"}
    assert python_environment(under_r)["LD_LIBRARY_PATH"] == "/opt/mine/lib"
    assert "LD_LIBRARY_PATH" not in python_environment({"R_HOME": "/usr/lib/R", "LD_LIBRARY_PATH": prefix})
    outside = {"LD_LIBRARY_PATH": f"{prefix}:/opt/mine/lib"}
    assert python_environment(outside) == outside, "outside R nothing changes"


@pytest.mark.skipif(not os.path.exists(R_LDPATHS), reason="R is not installed here")
def test_spark_s_jvm_starts_with_the_library_path_a_python_outside_r_has(monkeypatch):
    """Spark's JVM, and the Python workers it starts, take this process's environment: started from R, they got R's
    library folders first and loaded the system's libpython (ImportError of _ssl in every worker)."""
    from alexnet.launch.session import _outside_r_libraries

    out = subprocess.run(["sh", "-c", f"unset LD_LIBRARY_PATH; . {R_LDPATHS}; printf %s \"$LD_LIBRARY_PATH\""],
                         capture_output=True, text=True, check=True, env={"R_HOME": "/usr/lib/R", "PATH": os.defpath})
    monkeypatch.setenv("R_HOME", "/usr/lib/R")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{out.stdout}:/opt/mine/lib")
    with _outside_r_libraries():
        assert os.environ["LD_LIBRARY_PATH"] == "/opt/mine/lib"
    assert os.environ["LD_LIBRARY_PATH"] == f"{out.stdout}:/opt/mine/lib", "as it was after the JVM started"
    monkeypatch.setenv("LD_LIBRARY_PATH", out.stdout)
    with _outside_r_libraries():
        assert "LD_LIBRARY_PATH" not in os.environ
    assert os.environ["LD_LIBRARY_PATH"] == out.stdout


def test_step_progress_shows_the_mean_over_replicas_not_their_sum():
    from types import SimpleNamespace

    from alexnet.train.callbacks import Progress

    sent: list = []
    progress = Progress(sent.append, epochs=1, steps=4, worker_batch=8, workers=2, interval=0)
    strategy = SimpleNamespace(num_replicas_in_sync=2)
    progress.set_model(SimpleNamespace(distribute_strategy=strategy, distribute_reduction_method="auto"))
    progress.on_epoch_begin(0)
    progress.on_train_batch_end(0, {"loss": 2.8, "accuracy": 1.1})  # what Keras logs: each replica's mean, summed
    progress.on_epoch_end(0, {"loss": 1.4, "accuracy": 0.55})  # the metrics' global results
    assert sent[0]["kind"] == "step" and sent[0]["loss"] == pytest.approx(1.4) and sent[0]["accuracy"] == 0.55
    assert sent[1]["kind"] == "epoch" and sent[1]["loss"] == 1.4
    progress.set_model(SimpleNamespace(distribute_strategy=SimpleNamespace(num_replicas_in_sync=1)))
    progress.on_train_batch_end(1, {"loss": 2.8})
    assert sent[2]["loss"] == 2.8


def test_an_epochs_progress_counts_the_seconds_of_its_steps_not_its_validation_after(monkeypatch):
    """The epoch's line counted the validation and checkpoint at its end too: 6 images/s against its steps' 20."""
    from types import SimpleNamespace

    from alexnet.train import callbacks

    clock = iter([100.0, 101.0, 102.0, 110.0])  # the epoch begins; two steps end; the validation takes 8 s after
    monkeypatch.setattr(callbacks, "time", SimpleNamespace(perf_counter=lambda: next(clock), time=time.time))
    sent: list = []
    progress = callbacks.Progress(sent.append, epochs=1, steps=2, worker_batch=8, workers=2, interval=0)
    progress.set_model(SimpleNamespace(distribute_strategy=SimpleNamespace(num_replicas_in_sync=1)))
    progress.on_epoch_begin(0)
    progress.on_train_batch_end(0, {"loss": 2.0})
    progress.on_train_batch_end(1, {"loss": 1.0})
    progress.on_epoch_end(0, {"loss": 1.5, "val_accuracy": 0.5})
    assert [record["images_per_second"] for record in sent] == [16.0, 16.0, 16.0]


def test_the_probe_starts_python_with_the_environment_it_is_given(tmp_path, monkeypatch):
    from alexnet.launch.probe_task import check_python

    monkeypatch.chdir(tmp_path)
    script = tmp_path / "python"
    script.write_text('#!/bin/sh\necho "ModuleNotFoundError: $ALEXNET_PROBE_SEEN" >&2\nexit 1\n')
    script.chmod(0o755)
    monkeypatch.setenv("ALEXNET_PROBE_SEEN", "from os.environ")
    assert check_python(str(script))["error"] == "ModuleNotFoundError: from os.environ"
    given = check_python(str(script), environ={"PATH": os.defpath, "ALEXNET_PROBE_SEEN": "from environ"})
    assert given["error"] == "ModuleNotFoundError: from environ"


def test_a_worker_log_keeps_the_newest_and_takes_logs_another_worker_removed_meanwhile(tmp_path, monkeypatch):
    from alexnet.launch import worker

    monkeypatch.setenv("ALEXNET_LOG_DIR", str(tmp_path))
    for k in range(worker.KEPT_LOGS + 3):
        log = tmp_path / f"old{k:03d}.log"
        log.write_text("x")
        os.utime(log, (1000 + k, 1000 + k))
    scandir = os.scandir

    class Gone:  # an entry listed, then deleted by another worker on this host before its stat
        path = str(tmp_path / "gone.log")

        def stat(self) -> os.stat_result:
            raise FileNotFoundError(self.path)

    monkeypatch.setattr(worker.os, "scandir", lambda folder: [Gone(), *scandir(folder)])
    path = worker.worker_log(3)
    assert os.path.basename(path).startswith("worker3-") and os.path.dirname(path) == str(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == worker.KEPT_LOGS - 1 and kept[0] == "old004.log", "the oldest went, room left for the new"


def test_a_worker_whose_evaluation_failed_says_so_in_the_collective_and_every_worker_raises(monkeypatch):
    import numpy as np

    from alexnet.launch import training
    from alexnet.train import agreement

    share = {"images": 10, "top1_correct": 4, "top5_correct": 9, "top_k": 5, "image_size": 64, "num_classes": 5,
             "bad_images": [], "crops": 1, "protocol": "centre crop"}
    sent: list[list[int]] = []

    def gather(rows: list[list[int]]):
        def all_gather_ints(strategy, values):  # worker 0's values and what the others sent
            sent.append(list(values))
            return np.asarray([list(values), *rows])
        return all_gather_ints

    other = [1, 0, 10, 5, 8, 5, 64, 5, 0]
    monkeypatch.setattr(agreement, "all_gather_ints", gather([other]))
    added = training.added_up(None, share, 0, 2)
    assert (added["images"], added["top1_correct"], added["top5_correct"]) == (20, 9, 17)
    # this worker failed: it still joins the collective (its counts zero), then raises its own error
    with pytest.raises(ValueError, match="broken image"):
        training.added_up(None, ValueError("broken image"), 0, 2)
    assert sent[-1] == [0, 1] + [0] * 7
    # another worker failed: this one does not wait for it, and names it
    monkeypatch.setattr(agreement, "all_gather_ints", gather([[1, 1] + [0] * 7]))
    with pytest.raises(AlexnetError, match=r"the evaluation failed on worker 1 of 2 \(its log says why\), after "
                       "training and before the model was saved: launch again with `evaluate` off"):
        training.added_up(None, share, 0, 2)


def test_the_workers_warnings_are_said_on_the_driver_once_each(caplog):
    import json

    from alexnet.launch.training import relay_warnings

    big = "A step trains a global batch of 2048 images, beyond the 1024 AlexNet has kept its accuracy at."
    rows = [{"worker": 1, "history": json.dumps({"warnings": [big, "3 images left out"]})},
            {"worker": 0, "history": {"warnings": [big]}}, {"worker": 2, "history": json.dumps({})}]
    with caplog.at_level("WARNING", logger="alexnet.launch.training"):
        relay_warnings(rows)
    assert [r.getMessage() for r in caplog.records] == [f"Workers 0, 1: {big}", "Worker 1: 3 images left out"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.launch.training"):
        relay_warnings(rows[:2])
    assert caplog.records[0].getMessage() == f"Every worker: {big}"


class _WaitingContext:
    """A SparkContext whose barrier stage waits for task slots it never gets, until its job is cancelled."""

    def __init__(self, tasks_begun: int):
        self.cancelled = threading.Event()
        self.begun = tasks_begun

    def parallelize(self, *args):
        return self

    def barrier(self):
        return self

    def mapPartitions(self, task):
        return self

    def collect(self):
        self.cancelled.wait(30)
        raise RuntimeError("Job 3 cancelled part of cancelled job tag")

    def cancelJobsWithTag(self, tag):
        self.cancelled.set()

    addJobTag = removeJobTag = lambda self, tag: None

    def getConf(self):
        return SimpleNamespace(get=lambda key, default=None: default)

    defaultParallelism = 2

    def statusTracker(self):
        stage = SimpleNamespace(numActiveTasks=self.begun, numCompletedTasks=0, numFailedTasks=0)
        return SimpleNamespace(getActiveStageIds=lambda: [7], getStageInfo=lambda stage_id: stage)


def test_a_barrier_job_whose_tasks_never_started_says_they_may_lack_slots():
    """After a Spark worker was lost, the relaunch waited for its slot until the timeout, which said to raise it."""
    from alexnet.launch.spark import run_barrier

    with pytest.raises(AlexnetError, match=r"^The 2 worker\(s\) did not finish within timeout = 0\.5 s, so the Spark "
                                           r"job was cancelled: raise `timeout`\. Its barrier tasks had not started: "
                                           r"they wait for 2 free task slots at once, and if a Spark worker was lost.*"
                                           r"give fewer `workers`\.$"):
        run_barrier(_WaitingContext(0), 2, lambda task: None, timeout=0.5)
    with pytest.raises(AlexnetError, match=r"did not finish within timeout = 0\.5 s, so the Spark job was cancelled: "
                                           r"raise `timeout`\.$"):
        run_barrier(_WaitingContext(2), 2, lambda task: None, timeout=0.5)


class _ShrunkContext:
    """A SparkContext that lost a Spark worker: each look at ``defaultParallelism`` takes the next of ``slots`` (the
    last one stays)."""

    def __init__(self, slots: list[int], conf: dict[str, str] | None = None):
        self.slots, self.conf, self.looks = list(slots), conf or {}, 0

    @property
    def defaultParallelism(self):
        self.looks += 1
        return self.slots.pop(0) if len(self.slots) > 1 else self.slots[0]

    def getConf(self):
        return SimpleNamespace(get=lambda key, default=None: self.conf.get(key, default))

    def parallelize(self, *args):
        raise AssertionError("no Spark job in these tests")


def test_a_relaunch_waits_for_the_slots_of_a_lost_spark_worker(caplog):
    """Launched at once, a relaunch after a lost Spark worker was refused by the slot check as if the application had
    always had too few, and the retries were lost: it now waits for the slots to return, saying so once."""
    from alexnet.launch.spark import await_slots, barrier_slots

    context = _ShrunkContext([1, 1, 1, 2])
    with caplog.at_level(logging.INFO, logger="alexnet"):
        await_slots(lambda: barrier_slots(context), 2, patience=5, poll=0.01)
    said = [r.getMessage() for r in caplog.records]
    assert context.looks == 4 and len(said) == 2
    assert said[0].startswith("Before launching the 2 workers again, waiting up to 5 s for 2 task slots: the "
                              "Spark application has 1 now (a Spark worker was lost")
    assert said[1].startswith("The Spark application has 2 task slots again, after ")

    enough = _ShrunkContext([2])
    caplog.clear()
    await_slots(lambda: barrier_slots(enough), 2, patience=5, poll=0.01)
    assert enough.looks == 1 and caplog.records == []
    with pytest.raises(AlexnetError, match=r"^2 workers need 2 task slots at once to be launched again, but this Spark "
                                           r"application still has 1 after waiting 0 s for a lost Spark worker's "
                                           r"slots to return: restart that worker .* give `workers` <= 1\.$"):
        await_slots(lambda: 1, 2, patience=0.05, poll=0.01)


def test_a_relaunch_waits_as_long_as_spark_would_for_barrier_slots():
    from alexnet.launch.spark import slots_patience

    def patience(conf=None):
        return slots_patience(_ShrunkContext([2], conf).getConf().get)

    assert patience() == 600
    key = "spark.scheduler.barrier.maxConcurrentTasksCheck."
    assert patience({key + "interval": "500ms", key + "maxFailures": "4"}) == 2
    assert patience({key + "interval": "2min"}) == 4800
    assert patience({key + "interval": "soon", key + "maxFailures": "x"}) == 600


def test_only_a_relaunch_waits_for_slots(board, tmp_path, monkeypatch):
    from alexnet.launch import spark

    plan = job.plan_job(2, board, 2, retries=2, checkpoint_dir=tmp_path / "ckpt", probe=False, progress=False)
    launches, waits = [], []
    monkeypatch.setattr(spark, "await_slots",
                        lambda slots, workers, patience: waits.append((slots(), workers, patience)))

    def run_barrier(context, workers, function, **kwargs):
        launches.append(len(waits))
        if len(launches) < 3:
            raise job.failure_of(RuntimeError("ExecutorLostFailure (executor 0 exited)"), workers)
        return [{"worker": 0}, {"worker": 1}]

    monkeypatch.setattr(spark, "run_barrier", run_barrier)
    run = spark.launch_job(_ShrunkContext([2]), plan)
    assert run.attempt == 3 and launches == [0, 1, 2] and waits == [(2, 2, 600), (2, 2, 600)]


def test_a_relaunch_from_r_waits_for_the_slots_and_says_so_at_once(board, tmp_path, monkeypatch):
    """From R, a relaunch went straight to Spark's own wait for barrier slots, without a word for up to 10 minutes:
    it now waits here as from Python, said through R's ``on_wait`` as it happens."""
    from alexnet.launch import r as r_launcher
    from alexnet.launch import spark

    monkeypatch.setattr(spark, "SLOTS_POLL", 0.01)
    parallelism, said, launched = [1, 1, 2], [], []

    def launch(task, columns):
        launched.append(len(said))
        if len(launched) == 1:
            return {"failure": "ExecutorLostFailure (executor 1 exited caused by one of the running tasks)"}
        return [{"worker": k, "workers": 2, "history": "{}"} for k in (0, 1)]

    key = "spark.scheduler.barrier.maxConcurrentTasksCheck."
    conf = {key + "interval": "1s", key + "maxFailures": "30"}
    result = r_launcher.r_job("train", 2, board, 2, "1", "false", None, launch, retries=1, probe=False,
                              progress=False, checkpoint_dir=str(tmp_path / "ckpt"), on_retry=lambda text, fields: None,
                              parallelism=lambda: parallelism.pop(0), setting=lambda k, d: conf.get(k, d),
                              on_wait=said.append)
    assert result["attempt"] == 2 and launched == [0, 2] and parallelism == []
    assert said[0].startswith("Before launching the 2 workers again, waiting up to 30 s for 2 task slots: the Spark "
                              "application has 1 now")
    assert said[1].startswith("The Spark application has 2 task slots again, after ")


def test_a_failing_task_hands_its_worker_error_to_the_driver_whose_spark_error_lacks_it(capfd):
    """sparklyr's error of a failed stage says only that an R worker failed: the driver read no worker's error from
    it and said "failed before a worker reported an error", though the worker had one."""
    from alexnet.launch.monitor import report_failure

    monitor = start_monitor("127.0.0.1")
    assert monitor is not None
    try:
        assert monitor.take_failures() == []
        lost = WorkerError(0, 2, "WorkerLostError: worker 1 is gone", [], None, "h:/logs/w0.log", True)
        own = WorkerError(1, 2, "`cache_dir` = '/x' is a file, not a folder: give a folder", [], 1, "h:/logs/w1.log",
                          True)
        assert report_failure(monitor.address, 1, own.task_failure()) is True  # kept before the task stops
        assert report_failure(monitor.address, 0, lost.task_failure()) is True
        assert report_failure("tcp://127.0.0.1:1", 0, own.task_failure()) is False  # nobody there: nothing raised
        assert report_failure(None, 0, own.task_failure()) is False
        spark = job.failure_of(RuntimeError("Job aborted due to stage failure: sparklyr worker rscript failure with "
                                            "status 255, check worker logs for details"), 2)
        assert isinstance(spark, job.SparkJobError)
        reported = job.reported_failure(monitor.take_failures(), spark)
        assert isinstance(reported, WorkerError)
        assert (reported.worker, reported.error, reported.log) == (1, own.error, own.log), "the first to arrive"
        assert monitor.take_failures() == [], "taken once"
        assert job.reported_failure([], spark) is spark
        assert job.reported_failure([{"worker": 0, "failure": "no mark in it"}], spark) is spark
    finally:
        monitor.close()
    assert "is a file" not in capfd.readouterr().err, "kept for the driver, not shown as progress"
