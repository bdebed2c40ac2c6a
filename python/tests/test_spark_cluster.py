"""A real Spark cluster, not local mode: a standalone master and two workers on 127.0.0.1 (one core each), started
with the installed pyspark's ``spark-class``, and a two-worker run through it. The cluster is stopped after, also
when the test fails."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("tensorflow")

from servers import free_port  # noqa: E402
from test_spark import BATCH, board  # noqa: E402, F401 - the board fixture of the local-mode tests

from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.launch import api  # noqa: E402
from alexnet.launch import spark as launcher  # noqa: E402

HOST = "127.0.0.1"


def _spark_class() -> str:
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@contextlib.contextmanager
def _daemon(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        process = subprocess.Popen([_spark_class(), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
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
def standalone_cluster(folder: Path, workers: int = 2) -> Iterator[str]:
    """A Spark standalone master and ``workers`` workers of one core each; yields the master URL."""
    env = {**os.environ, "SPARK_LOCAL_IP": HOST, "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(folder / "work"), "SPARK_LOG_DIR": str(folder / "logs")}
    port = free_port()
    master = f"spark://{HOST}:{port}"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_daemon(
            ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port), "--webui-port",
             str(free_port())], folder / "master.log", env))
        for k in range(workers):
            stack.enter_context(_daemon(
                ["org.apache.spark.deploy.worker.Worker", master, "--host", HOST, "--cores", "1", "--memory", "1g",
                 "--webui-port", str(free_port()), "--work-dir", str(folder / f"work{k}")],
                folder / f"worker{k}.log", env))
        yield master


def _wait_for_executors(context, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executors = context._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver is listed too
        if executors >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"{count} executors did not register within {timeout:.0f} s")


@pytest.mark.long
def test_two_workers_train_on_a_standalone_cluster(board, tmp_path, monkeypatch):  # noqa: F811
    from pyspark.sql import SparkSession

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    with standalone_cluster(tmp_path) as master:
        session = (
            SparkSession.builder.master(master).appName("alexnet-cluster-test")
            .config("spark.driver.host", HOST).config("spark.driver.bindAddress", HOST)
            .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
            .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
            .getOrCreate()
        )
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
