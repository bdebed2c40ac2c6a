"""Spark barrier execution: one training task per worker, all started together, from Python or R.

:func:`alexnet_spark_train` runs one barrier task per worker (``rdd.barrier().mapPartitions``). Each task
starts a fresh Python process for its worker (TensorFlow's multi-worker set-up must come before any other
TensorFlow work, and Spark reuses its Python workers), which fetches the worker's partition of the board,
sets TF_CONFIG from the barrier addresses and trains with ``MultiWorkerMirroredStrategy``
(:func:`alexnet.launch.worker.train_worker`). Spark starts all tasks of a barrier stage together or none, and
when one fails it stops the others: the launcher then raises the failed worker's own error first, then where
its log is. The process of a task that Spark stops is killed with it (on Linux), so no TensorFlow process
outlives its task.

From R, ``sparklyr::spark_apply(barrier = TRUE)`` launches the tasks; :func:`r_job` is the driver's one
call into the core and :func:`alexnet.launch.worker.barrier_row` each task's.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

from ..checks import as_int, as_seconds
from ..child import LOG_TAIL_LINES
from ..errors import AlexnetError
from ..train.cluster import DEFAULT_BASE_PORT
from .worker import SUMMARY_COLUMNS, WorkerError, check_train_args, run_worker, train_worker

logger = logging.getLogger(__name__)

_MARK = "<<alexnet-worker-error>>"


def spark_session(master: str, app_name: str = "alexnet") -> Any:
    """A SparkSession on ``master`` whose Python workers run this interpreter (the one that has alexnet).

    A ``local[...]`` master keeps the driver on 127.0.0.1 (and its web UI off): a single machine needs no
    other interface, and Spark would otherwise bind to whatever address the host name resolves to.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    return builder.getOrCreate()


def slots_from(
    default_parallelism: int, task_cpus: int | str = 1, dynamic_allocation: bool | str = False
) -> int | None:
    """Barrier tasks Spark can run at once: ``default_parallelism`` over ``task_cpus`` (``spark.task.cpus``).

    ``None`` (unknown) with dynamic allocation, where executors, and so slots, come and go.
    """
    if str(dynamic_allocation).strip().lower() == "true":
        return None
    return max(1, int(default_parallelism) // max(1, int(task_cpus)))


def barrier_slots(spark: Any) -> int | None:
    """:func:`slots_from` for a SparkSession or SparkContext."""
    context = _spark_context(spark)
    conf = context.getConf()
    return slots_from(
        context.defaultParallelism,
        conf.get("spark.task.cpus", "1"),
        conf.get("spark.dynamicAllocation.enabled", "false"),
    )


def check_slots(workers: int, slots: int | None) -> int:
    """``workers`` as an int; an AlexnetError when it is below 1 or above ``slots`` (``None``: unknown).

    A barrier stage starts all its tasks at once or not at all: with more workers than slots, Spark
    would wait (and retry) instead of starting, so this is refused before launching.
    """

    workers = as_int(workers, "workers")
    if workers < 1:
        raise AlexnetError(f"`workers` must be at least 1, not {workers}.")
    if slots is not None and workers > int(slots):
        raise AlexnetError(
            f"{workers} workers need {workers} task slots at once (one barrier task each), but this Spark "
            f"application has {int(slots)}: use workers <= {int(slots)}, or give Spark more executors or "
            f"cores (e.g. master 'local[{workers}]' on one machine)."
        )
    return workers


def _spark_context(spark: Any) -> Any:
    context = getattr(spark, "sparkContext", spark)
    if not hasattr(context, "parallelize"):
        raise AlexnetError(
            f"`spark` must be a pyspark SparkSession or SparkContext, not a {type(spark).__name__}: create one "
            "with SparkSession.builder.master(...).getOrCreate()."
        )
    return context


def _barrier_task(function: Any, python: str | None, env: Mapping[str, str], rows: Iterable[Any]) -> Iterator[str]:
    """Body of one barrier task: run the worker's process; yield its result (or raise its error)."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    index = context.partitionId()
    addresses = [info.address for info in context.getTaskInfos()]
    for _ in rows:
        pass
    context.barrier()  # every task is running: start the workers together
    try:
        result = run_worker(function, index, addresses, python=python, env=env)
    except WorkerError as error:
        raise RuntimeError(f"worker {index} failed: {error.error}\n{_MARK}{json.dumps(error.details())}{_MARK}") \
            from None
    yield json.dumps({"worker": index, "result": result})


def _worker_error(message: str) -> WorkerError | None:
    start = message.find(_MARK)
    end = message.find(_MARK, start + len(_MARK)) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    try:
        return WorkerError.from_details(json.loads(message[start + len(_MARK) : end]))
    except (ValueError, KeyError, TypeError):
        return None


def run_barrier(
    spark: Any,
    workers: int,
    function: Callable[[int, list[str]], Any],
    *,
    timeout: float | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Any]:
    """Run ``function(index, addresses)`` once per worker, in one Spark barrier stage; results in worker order.

    Each of the ``workers`` barrier tasks runs ``function`` in a fresh Python process (see
    :func:`alexnet.launch.worker.run_worker`) once all tasks have started; ``addresses`` are the tasks' ``host:port``
    in partition order. Raises AlexnetError before launching when Spark has fewer task slots than
    ``workers``; :class:`WorkerError` (the worker's error and log tail) when a worker fails, which makes
    Spark stop the others; AlexnetError when the job takes longer than ``timeout`` seconds (then it is
    cancelled).
    """
    context = _spark_context(spark)
    workers = check_slots(workers, barrier_slots(context))
    timeout = as_seconds(timeout, "timeout")
    task = partial(_barrier_task, function, python, {str(k): str(v) for k, v in (env or {}).items()})
    rdd = context.parallelize(range(workers), workers).barrier().mapPartitions(task)

    tag = f"alexnet-{uuid.uuid4().hex[:12]}"
    expired = threading.Event()

    def cancel() -> None:
        expired.set()
        context.cancelJobsWithTag(tag)

    timer = threading.Timer(float(timeout), cancel) if timeout is not None else None
    context.addJobTag(tag)
    start = time.monotonic()
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        logger.info("Starting %d barrier task(s) (job tag %s).", workers, tag)
        lines = rdd.collect()
    except Exception as error:
        if expired.is_set():
            raise AlexnetError(
                f"The {workers} worker(s) did not finish within timeout = {timeout} s, so the Spark job was "
                "cancelled: raise `timeout`, or train less per run (with `checkpoint_dir` a new run resumes)."
            ) from None
        failed = _worker_error(str(error))
        if failed is not None:
            raise failed from None
        text = [line for line in str(error).splitlines() if line.strip()]
        raise AlexnetError(
            f"The Spark job of {workers} worker(s) failed before a worker reported an error:\n  "
            + "\n  ".join(text[:LOG_TAIL_LINES])
        ) from error
    finally:
        if timer is not None:
            timer.cancel()
        context.removeJobTag(tag)
    logger.info("%d worker(s) finished in %.1f s.", workers, time.monotonic() - start)
    rows = sorted((json.loads(line) for line in lines), key=lambda row: row["worker"])
    return [row["result"] for row in rows]


def check_spark_train(
    workers: int,
    board: str | os.PathLike | None,
    slots: int | None,
    *,
    base_port: int = DEFAULT_BASE_PORT,
    **train_args: Any,
) -> dict[str, Any]:
    """The checks made on the driver before a Spark training job starts; returns ``workers`` and ``board``.

    ``workers`` must fit in ``slots`` (see :func:`check_slots`); ``train_args`` must not hold ``data`` or
    ``strategy`` (the launcher sets them); the board must be reachable and hold at least ``workers``
    categories. Returns ``{"workers": int, "board": resolved board string}``.
    """
    from ..storage.board import open_board
    from ..storage.layout import read_categories
    from ..train.cluster import check_base_port

    workers = check_slots(workers, slots)
    check_train_args(train_args, "alexnet_spark_train()")
    check_base_port(base_port, workers)
    opened = open_board(board)
    categories = read_categories(opened)
    if workers > len(categories):
        raise AlexnetError(
            f"{workers} workers need at least {workers} categories, but board {opened.location} has "
            f"{len(categories)}: use workers <= {len(categories)}."
        )
    return {"workers": workers, "board": opened.location}


def alexnet_spark_train(
    spark: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    base_port: int = DEFAULT_BASE_PORT,
    cache_dir: str | os.PathLike | None = None,
    fetch_workers: int = 8,
    timeout: float | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    **train_args: Any,
) -> list[dict[str, Any]]:
    """Train AlexNet on ``workers`` Spark tasks at once, each on its own partition of ``board``.

    One barrier task per worker (``rdd.barrier().mapPartitions``): task ``k`` runs
    :func:`alexnet.launch.worker.train_worker`
    in a fresh Python process, which fetches partition ``k`` of ``workers``, sets TF_CONFIG from the
    barrier addresses (worker ``k`` listens on its host at ``base_port + k``; worker 0 is the chief) and
    trains with ``MultiWorkerMirroredStrategy``; ``train_args`` go to :func:`alexnet.alexnet_train`
    (``epochs``, ``batch_size`` per worker, ``image_size``, ``checkpoint_dir`` and ``model_dir`` on
    storage every worker can reach, ``collective_timeout``, ...). ``spark`` is a SparkSession or
    SparkContext; ``python`` the worker's Python (default: the executor's); ``env`` extra environment
    variables for the worker processes; ``timeout`` bounds the whole job in seconds.

    The board is checked on the driver first, and more workers than Spark task slots (or than
    categories) is an error before anything starts. When a worker fails, Spark stops the others and
    :class:`WorkerError` reports the failed worker's error and the last lines of its log.

    Returns one dict per worker, in worker order (see :func:`alexnet.launch.worker.train_worker`); every worker
    ends with the same weights (``history["weights_sha256"]``).
    """
    context = _spark_context(spark)
    plan = check_spark_train(workers, board, barrier_slots(context), base_port=base_port, **train_args)
    workers, resolved = plan["workers"], plan["board"]
    task = partial(
        train_worker,
        board=resolved,
        base_port=base_port,
        cache_dir=None if cache_dir is None else os.fspath(cache_dir),
        fetch_workers=fetch_workers,
        **train_args,
    )
    retries = as_int(retries, "retries", 0)
    for attempt in range(retries + 1):
        try:
            rows = run_barrier(context, workers, task, timeout=timeout, python=python, env=env)
            break
        except WorkerError as error:
            if attempt == retries:
                raise
            logger.warning("%s; relaunching the %d workers (retry %d of %d).", str(error).splitlines()[0], workers,
                           attempt + 1, retries)
    for row in rows:
        row["attempt"] = attempt + 1
    digests = {row["history"].get("weights_sha256") for row in rows}
    if len(digests) > 1:
        logger.warning("The workers ended with different weights (%d digests): they were not in step.", len(digests))
    return rows


def r_job(workers: int, board: str | os.PathLike | None, default_parallelism: int, task_cpus: int | str = 1,
          dynamic_allocation: bool | str = False, *, base_port: int = DEFAULT_BASE_PORT,
          cache_dir: str | os.PathLike | None = None, fetch_workers: int = 8, python: str | None = None,
          env: Mapping[str, str] | None = None, **train_args: Any) -> dict[str, Any]:
    """The driver's part of a run launched from R with ``sparklyr::spark_apply(barrier = TRUE)``.

    Makes the checks of :func:`check_spark_train` (the Spark application's slots come from its
    ``default_parallelism``, ``spark.task.cpus`` and dynamic allocation, as sparklyr reads them) and returns
    the plan: ``workers``, ``board`` (resolved), ``columns`` (name -> Python type name of each column of a
    worker's row) and ``task``, what each barrier task hands to :func:`alexnet.launch.worker.barrier_row`.
    """
    plan = check_spark_train(workers, board, slots_from(default_parallelism, task_cpus, dynamic_allocation),
                             base_port=base_port, **train_args)
    task = {"board": plan["board"], "base_port": as_int(base_port, "base_port"),
            "cache_dir": None if cache_dir is None else os.fspath(cache_dir),
            "fetch_workers": as_int(fetch_workers, "fetch_workers", 1), "python": python,
            "env": {str(k): str(v) for k, v in (env or {}).items()}, "train_args": dict(train_args)}
    return {**plan, "columns": {name: kind.__name__ for name, kind in SUMMARY_COLUMNS.items()}, "task": task}
