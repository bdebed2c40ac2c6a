"""A real Spark cluster, not local mode: a standalone master and two workers (one core each), started with the
installed pyspark's ``spark-class``, and a two-worker run through it: on 127.0.0.1, and on hosts of their own (a
network namespace each, joined by a 1 Gbit/s link) with the driver on the master's host. The cluster is stopped
after, also when the test fails."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("tensorflow")

from servers import free_port  # noqa: E402
from test_spark import BATCH, board, epochs_done  # noqa: E402, F401 - the board fixture of the local-mode tests

from alexnet.bench import link  # noqa: E402
from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.data.synthetic import imagenet_synthetic  # noqa: E402
from alexnet.data.upload import imagenet_upload  # noqa: E402
from alexnet.launch import api  # noqa: E402
from alexnet.launch import spark as launcher  # noqa: E402

HOST = "127.0.0.1"


def _spark_class() -> str:
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@contextlib.contextmanager
def _daemon(args: list[str], log: Path, env: dict[str, str], where: list[str]) -> Iterator[subprocess.Popen]:
    """A Spark daemon started with ``where`` before its command (a network namespace's ``ip netns exec``)."""
    with open(log, "wb") as out:
        process = subprocess.Popen([*where, _spark_class(), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            process.wait(timeout=20)


@contextlib.contextmanager
def standalone_cluster(folder: Path, workers: int = 2, hosts: list[str] | None = None,
                       where: list[list[str]] | None = None) -> Iterator[str]:
    """A Spark standalone master and ``workers`` workers of one core each; yields the master URL. ``hosts``: the
    master's address and each worker's (default: all on 127.0.0.1); ``where``: what goes before each one's command
    to start it on its host (default: nothing)."""
    hosts = hosts or [HOST] * (workers + 1)
    where = where or [[] for _ in range(workers + 1)]
    env = _cluster_env(folder)
    port = free_port()
    master = f"spark://{hosts[0]}:{port}"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_daemon(
            ["org.apache.spark.deploy.master.Master", "--host", hosts[0], "--port", str(port), "--webui-port",
             str(free_port())], folder / "master.log", {**env, "SPARK_LOCAL_IP": hosts[0]}, where[0]))
        for k in range(workers):
            stack.enter_context(_spark_worker(folder, master, f"work{k}", hosts[k + 1], where[k + 1]))
        yield master


def _cluster_env(folder: Path) -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(folder / "work"),
            "SPARK_LOG_DIR": str(folder / "logs")}


def _spark_worker(folder: Path, master: str, name: str, host: str = HOST,
                  where: list[str] | None = None) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """A Spark worker of one core on ``host``, its work folder ``folder/name``."""
    return _daemon(["org.apache.spark.deploy.worker.Worker", master, "--host", host, "--cores", "1", "--memory", "1g",
                    "--webui-port", str(free_port()), "--work-dir", str(folder / name)],
                   folder / f"{name}.log", {**_cluster_env(folder), "SPARK_LOCAL_IP": host}, where or [])


def _session(master: str, name: str):
    """A SparkSession of ``master`` whose driver is on 127.0.0.1 (any active one stopped first)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    return (
        SparkSession.builder.master(master).appName(name)
        .config("spark.driver.host", HOST).config("spark.driver.bindAddress", HOST)
        .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .getOrCreate()
    )


def _wait_for_executors(context, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executors = context._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver is listed too
        if executors >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"{count} executors did not register within {timeout:.0f} s")


@pytest.mark.workers
@pytest.mark.long
def test_two_workers_train_on_a_standalone_cluster(board, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    with standalone_cluster(tmp_path) as master:
        session = _session(master, "alexnet-cluster-test")
        try:
            context = session.sparkContext
            _wait_for_executors(context, 2)
            assert launcher.barrier_slots(context) == 2
            base = free_base_port(2)
            rows = api.alexnet_spark_train(
                session, 2, board, base_port=base, cache_dir=tmp_path / "cache", timeout=300, batch_size=BATCH,
                epochs=2, image_size=64, dense_units=32, seed=1, collective_timeout=60,
            )
        finally:
            session.stop()
    assert [row["worker"] for row in rows] == [0, 1] and [row["attempt"] for row in rows] == [1, 1]
    assert sorted(row["tf_address"] for row in rows) == [f"{HOST}:{base}", f"{HOST}:{base + 1}"]
    histories = [row["history"] for row in rows]
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert all(h["params"]["workers"] == 2 and len(h["metrics"]["loss"]) == 2 for h in histories)
    assert not set(rows[0]["categories"]) & set(rows[1]["categories"])
    # each worker of the cluster ran an executor of its own (a JVM of its own): not local mode
    for k in (0, 1):
        assert list((tmp_path / f"work{k}").glob("app-*/*/stderr")), f"no executor ran on Spark worker {k}"


@pytest.mark.workers
@pytest.mark.long
def test_a_lost_spark_worker_is_waited_for_and_the_training_resumes(board, tmp_path, monkeypatch, caplog):  # noqa: F811
    """A Spark worker (and its executor) killed in the second epoch of three, started again 10 s later: the relaunch
    waits for its slot (launched at once, it was refused, the application having 2 slots for 3 workers), then resumes
    from the checkpoint and ends like an uninterrupted run."""
    import logging
    import signal
    import threading

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setattr(launcher, "SLOTS_POLL", 1.0)
    checkpoints = tmp_path / "ckpt"
    events: dict = {}
    with standalone_cluster(tmp_path, 3) as master, contextlib.ExitStack() as restarted:
        session = _session(master, "alexnet-lost-worker-test")
        context = session.sparkContext

        def lose_worker_2_in_epoch_2() -> None:
            done = epochs_done(checkpoints, at_least=1, within=400)
            worker = subprocess.run(["pgrep", "-f", f"deploy.worker.Worker.*{tmp_path / 'work2'}"],
                                    capture_output=True, text=True, check=False).stdout.split()
            for pid in worker:  # the Spark worker and, in its process group, its executor and the task's worker
                os.killpg(int(pid), signal.SIGKILL)
            events.update(killed=worker, epochs_done=done)
            time.sleep(10)
            events["slots_while_lost"] = launcher.barrier_slots(context)
            restarted.enter_context(_spark_worker(tmp_path, master, "work2-again"))

        try:
            _wait_for_executors(context, 3)
            killer = threading.Thread(target=lose_worker_2_in_epoch_2, daemon=True)
            killer.start()
            with caplog.at_level(logging.INFO, logger="alexnet"):
                rows = api.alexnet_spark_train(
                    session, 3, board, base_port=free_base_port(3), cache_dir=tmp_path / "cache", timeout=400,
                    retries=1, batch_size=BATCH, epochs=3, image_size=64, dense_units=16, seed=1,
                    checkpoint_dir=str(checkpoints), collective_timeout=60, probe=False,
                )
            killer.join(timeout=5)
        finally:
            session.stop()
    assert events.get("killed") and events["epochs_done"] == 1, events
    assert events["slots_while_lost"] == 2
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Before launching the 3 workers again, waiting up to 600 s for 3 task slots: the "
                            "Spark application has 2 now") for m in said), said
    assert any(m.startswith("The Spark application has 3 task slots again") for m in said), said
    assert [row["attempt"] for row in rows] == [2, 2, 2], "one relaunch, once the slot was back"
    histories = [row["history"] for row in rows]
    assert all(h["params"]["initial_epoch"] >= 1 and len(h["metrics"]["loss"]) == 3 for h in histories)
    assert len({h["weights_sha256"] for h in histories}) == 1
    assert list((tmp_path / "work2-again").glob("app-*/*/stderr")), "the relaunch ran on the restarted Spark worker"


@pytest.mark.workers
@pytest.mark.long
@pytest.mark.skipif(link.can_shape() is not None, reason=str(link.can_shape()))
def test_two_workers_on_hosts_of_their_own_train_and_evaluate_through_the_command_line(tmp_path):
    """Every other Spark test runs on 127.0.0.1, where a worker's address, the address TensorFlow listens at and the
    driver's are one. Here the master and the driver have a host of their own and each worker another (a network
    namespace each, 10.213.7.x, on a switch, every link shaped to 1 Gbit/s): TF_CONFIG must name each worker's own
    host, the chief's progress must reach the driver's monitor from another host, and the evaluation job too."""
    source = tmp_path / "imagenet"
    imagenet_synthetic(str(source), classes=4, images_per_class=12, val_per_class=3, max_side=72, seed=3)
    imagenet_upload(str(source), board=str(tmp_path / "board"))
    with link.Network(3, link.parse_link("1gbit")) as network:
        driver, hosts = network.command(0), network.addresses
        with standalone_cluster(tmp_path, 2, hosts=hosts, where=[network.command(i) for i in range(3)]) as master:
            base = free_base_port(2)
            env = {**os.environ, "ALEXNET_PROGRESS": "1", "PYSPARK_PYTHON": sys.executable,
                   "SPARK_LOCAL_IP": hosts[0], "TF_CPP_MIN_LOG_LEVEL": "2"}
            ran = subprocess.run(
                [*driver, sys.executable, "-m", "alexnet.cli", "spark-train", "--workers", "2", "--master", master,
                 "--board", str(tmp_path / "board"), "--epochs", "2", "--image-size", "64", "--dense-units", "32",
                 "--batch-size", str(BATCH), "--seed", "1", "--collective-timeout", "60", "--base-port", str(base),
                 "--cache-dir", str(tmp_path / "cache"), "--timeout", "600", "--evaluate", "--json"],
                capture_output=True, text=True, env=env, timeout=900, check=False)
    assert not [name for name in link.namespaces() if name.startswith(f"{link.PREFIX}{os.getpid()}-")]
    assert ran.returncode == 0, ran.stderr[-4000:]
    result = json.loads(ran.stdout)
    rows = result["workers"]
    # each worker trained on its own host, where TensorFlow listened
    assert [row["tf_address"] for row in rows] == [f"{hosts[1]}:{base}", f"{hosts[2]}:{base + 1}"] or \
        [row["tf_address"] for row in rows] == [f"{hosts[2]}:{base}", f"{hosts[1]}:{base + 1}"]
    histories = [row["history"] for row in rows]
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert [h["weights_agree"] for h in histories] == [True, True]
    assert all(h["params"]["workers"] == 2 and len(h["metrics"]["loss"]) == 2 for h in histories)
    # the chief's progress crossed from its host to the driver's monitor, every epoch
    assert "alexnet: epoch 1/2" in ran.stderr and "alexnet: epoch 2/2" in ran.stderr, ran.stderr[-3000:]
    # and among them none of Spark's INFO lines (its scheduler's, once a second), which its console leaves out
    assert not re.findall(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO ", ran.stderr, re.MULTILINE), ran.stderr[-3000:]
    # the evaluation job scored every validation image of the board, each on one host
    evaluation = result["evaluation"]
    assert evaluation["images"] == 4 * 3
    assert evaluation["workers"] == 2 and [part["images"] for part in evaluation["per_worker"]] == [6, 6]
