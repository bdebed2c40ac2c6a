"""Spark barrier execution from Python: one training task per worker, all started together.

:func:`alexnet_spark_train` runs one barrier task per worker (``rdd.barrier().mapPartitions``). Each task
starts a fresh Python process for its worker (TensorFlow's multi-worker set-up must come before any other
TensorFlow work, and Spark reuses its Python workers), which fetches the worker's partition of the board,
sets TF_CONFIG from the barrier addresses and trains with ``MultiWorkerMirroredStrategy``
(:func:`alexnet.launch.worker.train_worker`). Spark starts all tasks of a barrier stage together or none,
and when one fails it stops the others. The process of a task that Spark stops is killed with it (on Linux),
so no TensorFlow process outlives its task. Checks, the executors' probe, progress and retries are
:mod:`alexnet.launch.job`'s, shared with the R launcher.

From R, ``sparklyr::spark_apply(barrier = TRUE)`` launches the tasks; :func:`r_train` is the driver's one
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from ..checks import as_seconds
from ..data.fetch import DEFAULT_DOWNLOADS
from ..errors import AlexnetError
from ..train.cluster import DEFAULT_BASE_PORT
from ..train.settings import TrainSettings
from . import probe_task
from .job import DEFAULT_RETRIES, SparkJobError, check_slots, failure_of, plan_job, run_job
from .task import TrainTask
from .worker import SUMMARY_COLUMNS, WorkerError, run_worker

logger = logging.getLogger(__name__)

#: What to do when the executors' Python cannot run alexnet (Python launcher).
PYTHON_ADVICE = (
    "Give every executor a Python with the alexnet core and TensorFlow: install it on every node "
    "(pip install 'alexnet[spark]', or install_alexnet() from R), and point Spark at it with PYSPARK_PYTHON or "
    "the spark.pyspark.python setting, or pass python = '/path/to/python' to alexnet_spark_train()."
)


def spark_session(master: str, app_name: str = "alexnet") -> Any:
    """A SparkSession on ``master`` whose Python workers run this interpreter (the one that has alexnet).

    A ``local[...]`` master keeps the driver on 127.0.0.1 (and its web UI off): a single machine needs no
    other interface, and Spark would otherwise bind to whatever address the host name resolves to. Spark's
    console stage bar is off, and with a local master its own log shows fatal errors only.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # Spark's stage bar would garble the chief's progress lines
    builder = SparkSession.builder.master(master).appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    session = builder.getOrCreate()
    if master.startswith("local"):
        # the executors are this JVM: a failed worker's Java stack would be printed here, while the error
        # alexnet raises already leads with the worker's own Python error (Spark's message: DEBUG log level)
        session.sparkContext.setLogLevel("FATAL")
    return session


def slots_from(
    default_parallelism: int, task_cpus: int | str = 1, dynamic_allocation: bool | str = False
) -> int | None:
    """Barrier tasks Spark can run at once: ``default_parallelism`` over ``task_cpus`` (``spark.task.cpus``).

    ``None`` (unknown) with dynamic allocation, where executors, and so slots, come and go.
    """
    if str(dynamic_allocation).strip().lower() == "true":
        return None
    return max(1, int(default_parallelism) // max(1, int(task_cpus)))


def _spark_context(spark: Any) -> Any:
    context = getattr(spark, "sparkContext", spark)
    if not hasattr(context, "parallelize"):
        raise AlexnetError(
            f"`spark` must be a pyspark SparkSession or SparkContext, not a {type(spark).__name__}: create one "
            "with SparkSession.builder.master(...).getOrCreate()."
        )
    return context


def barrier_slots(spark: Any) -> int | None:
    """:func:`slots_from` for a SparkSession or SparkContext."""
    context = _spark_context(spark)
    conf = context.getConf()
    return slots_from(
        context.defaultParallelism,
        conf.get("spark.task.cpus", "1"),
        conf.get("spark.dynamicAllocation.enabled", "false"),
    )


def _barrier_task(function: Any, python: str | None, env: Mapping[str, str], rows: Iterable[Any]) -> Iterator[str]:
    """Body of one barrier task: run the worker's process; yield its result (or fail with its error)."""
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
        raise RuntimeError(error.task_failure()) from None
    yield json.dumps({"worker": index, "result": result})


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
    :func:`alexnet.launch.worker.run_worker`) once all tasks have started; ``addresses`` are the tasks'
    ``host:port`` in partition order. Raises :class:`~alexnet.launch.worker.WorkerError` (the worker's own
    error, where its log is, and the log's last lines) when a worker fails, which makes Spark stop the others;
    :class:`~alexnet.launch.job.SparkJobError` when Spark fails otherwise; AlexnetError when the job takes longer
    than ``timeout`` seconds (then it is cancelled).
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
        raise failure_of(error, workers) from None
    finally:
        if timer is not None:
            timer.cancel()
        context.removeJobTag(tag)
    logger.info("%d worker(s) finished in %.1f s.", workers, time.monotonic() - start)
    rows = sorted((json.loads(line) for line in lines), key=lambda row: row["worker"])
    return [row["result"] for row in rows]


def probe_executors(spark: Any, tasks: int, python: str | None = None, env: Mapping[str, str] | None = None
                    ) -> list[dict[str, Any]]:
    """Ask ``tasks`` ordinary Spark tasks whether the Python that would run a worker imports alexnet and
    TensorFlow (see :mod:`alexnet.launch.probe_task`); one row per task.

    The probe is shipped by value, so it runs on executors whose Python lacks alexnet (which it reports).
    """
    from pyspark import cloudpickle

    context = _spark_context(spark)
    cloudpickle.register_pickle_by_value(probe_task)
    try:
        body = partial(probe_task.probe_partition, python, {str(k): str(v) for k, v in (env or {}).items()})
        lines = context.parallelize(range(tasks), tasks).mapPartitions(body).collect()
    except Exception as error:
        raise failure_of(error, tasks) from None
    finally:
        cloudpickle.unregister_pickle_by_value(probe_task)
    return [json.loads(line) for line in lines]


def _driver_host(context: Any) -> str | None:
    return context.getConf().get("spark.driver.host", None)


def alexnet_spark_train(
    spark: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    base_port: int = DEFAULT_BASE_PORT,
    cache_dir: str | os.PathLike | None = None,
    fetch_workers: int = DEFAULT_DOWNLOADS,
    timeout: float | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = DEFAULT_RETRIES,
    progress: bool = True,
    probe: bool = True,
    settings: TrainSettings | None = None,
    callbacks: Sequence[Any] | None = None,
    **train_args: Any,
) -> list[dict[str, Any]]:
    """Train AlexNet on ``workers`` Spark tasks at once, each on its own partition of ``board``.

    One barrier task per worker (``rdd.barrier().mapPartitions``): task ``k`` runs
    :func:`alexnet.launch.worker.train_worker` in a fresh Python process, which fetches partition ``k`` of
    ``workers``, sets TF_CONFIG from the barrier addresses (worker ``k`` listens on its host at ``base_port + k``;
    worker 0 is the chief) and trains with ``MultiWorkerMirroredStrategy``; ``train_args`` are its training settings
    (those of :func:`alexnet.alexnet_train`: ``epochs``, ``batch_size`` per worker, ``image_size``,
    ``checkpoint_dir`` and ``model_dir`` on storage every worker reaches (``gs://``, ``s3://``),
    ``checkpoint_every``, ``collective_timeout``, ...), or ``settings`` holds them already checked
    (:func:`alexnet.launch.job.worker_settings`). ``spark`` is a SparkSession or SparkContext; ``python`` the
    worker's Python (default: the executor's); ``env`` extra environment variables for the worker processes;
    ``timeout`` bounds each launch in seconds; ``callbacks`` are Keras callbacks every worker trains with (they
    travel to the workers pickled).

    Before anything runs on the cluster: more workers than Spark task slots (or than categories), an
    unreachable board or an output location that cannot be written is an error; with ``probe``, a short job
    then checks that the executors' Python imports alexnet and TensorFlow, and names those that do not. While
    the workers train, the chief's progress is shown here (``progress``). When a worker fails, Spark stops the
    others; with ``retries``, the stage is launched again (up to that many times) and training resumes from the
    last checkpoint of ``checkpoint_dir``. The error of the last failure leads with the worker's own Python
    error and says where its whole log is.

    Returns one dict per worker, in worker order (see :func:`alexnet.launch.worker.train_worker`), with
    ``attempt`` (1 when the first launch succeeded); every worker ends with the same weights
    (``history["weights_sha256"]``).
    """
    context = _spark_context(spark)
    master = context.master or ""
    plan = plan_job(workers, board, barrier_slots(context), base_port=base_port, cache_dir=cache_dir,
                    fetch_workers=fetch_workers, python=python, env=env, retries=retries, timeout=timeout,
                    local_master=master.startswith("local"), settings=settings, **train_args)

    def launch(task: TrainTask) -> list[dict[str, Any]]:
        # the driver bounds the stage: it cancels the Spark job after task.timeout seconds
        function = partial(task.worker_function(), callbacks=list(callbacks or []))
        return run_barrier(context, plan.workers, function, timeout=task.timeout, python=task.python, env=task.env)

    def check() -> list[dict[str, Any]]:
        slots = barrier_slots(context) or plan.workers
        return probe_executors(context, max(plan.workers, slots), plan.task.python, plan.task.env)

    rows = run_job(plan, launch, driver_host=_driver_host(context), probe=check if probe else None,
                   advice=PYTHON_ADVICE, progress=bool(progress))
    digests = {row["history"].get("weights_sha256") for row in rows}
    if len(digests) > 1:
        logger.warning("The workers ended with different weights (%d digests): they were not in step.", len(digests))
    return rows


#: What to do when the R workers cannot run alexnet (R launcher).
R_ADVICE = (
    "Install alexnet on every node (the R package, then alexnet::install_alexnet()), or point the Spark R "
    "workers at a Python that has the core: pass python = '/path/to/python' to alexnet_spark_train(), or set "
    "ALEXNET_PYTHON for them with spark_config() (sparklyr.apply.env.ALEXNET_PYTHON)."
)


def r_train(workers: int, board: str | os.PathLike | None, default_parallelism: int, task_cpus: int | str,
            dynamic_allocation: bool | str, driver_host: str | None, launch: Callable[[dict[str, Any]], Any],
            probe: Callable[[], Any] | None = None, **options: Any) -> list[dict[str, Any]]:
    """The driver's part of a run launched from R with ``sparklyr::spark_apply(barrier = TRUE)``: one call.

    Makes the checks of :func:`alexnet.launch.job.plan_job` (the slots come from ``default_parallelism``,
    ``spark.task.cpus`` and dynamic allocation, as sparklyr reads them; ``options`` are those of
    :func:`alexnet_spark_train` and the training arguments), then runs the job
    (:func:`alexnet.launch.job.run_job`): ``probe()`` (an R function running the R workers' check) returns one
    row per task; ``launch(task)`` (an R function running ``spark_apply()`` whose tasks call
    :func:`alexnet.launch.worker.barrier_row` with ``task``) returns one flat row per worker, with the columns of
    :data:`~alexnet.launch.worker.SUMMARY_COLUMNS`, or ``{"failure": <the error's message>}`` when the stage
    failed (returned, not raised: an R error reaching Python has its message shortened); ``on_retry(message)``,
    when given in ``options``, is called before each relaunch with the failure (R turns it into a warning).
    Returns the rows in worker order, with ``attempt``.
    """
    shown = {"progress": bool(options.pop("progress"))} if "progress" in options else {}
    on_retry = options.pop("on_retry", None)  # an R function that turns the retry into an R warning
    plan = plan_job(workers, board, slots_from(default_parallelism, task_cpus, dynamic_allocation), **options)

    def records(value: Any) -> list[dict[str, Any]]:
        if hasattr(value, "to_dict"):  # a data frame, as pandas
            return list(value.to_dict(orient="records"))
        return [dict(row) for row in value]

    def launched(task: TrainTask) -> list[dict[str, Any]]:
        value = launch(task.to_dict())  # a plain list in R, made a TrainTask again by each barrier task
        if isinstance(value, Mapping) and "failure" in value:  # the stage's error, as R caught it
            raise failure_of(RuntimeError(str(value["failure"])), plan.workers)
        return records(value)

    return run_job(plan, launched, driver_host=driver_host,
                   probe=(lambda: records(probe())) if probe is not None else None, advice=R_ADVICE, on_retry=on_retry,
                   **shown)


def summary_columns() -> dict[str, str]:
    """The columns of a worker's flat row and their Python types (``int``, ``float``, ``str``, ``bool``)."""
    return {name: kind.__name__ for name, kind in SUMMARY_COLUMNS.items()}


__all__ = ["SparkJobError", "alexnet_spark_train", "barrier_slots", "check_slots", "probe_executors", "r_train",
           "run_barrier", "slots_from", "spark_session"]
