"""Spark barrier execution from Python: one task per worker, all started together, each running any function.

:func:`run_barrier` is the runner: ``function(index, addresses)`` once per worker in one barrier stage
(``rdd.barrier().mapPartitions``), each in a fresh Python process (:func:`alexnet.launch.worker.run_worker`);
what the function does is the caller's. Spark starts all tasks of a barrier stage together or none, and when
one fails it stops the others; the process of a task that Spark stops is killed with it (on Linux), so no
TensorFlow process outlives its task. :func:`probe_executors` is the check before a job, and :func:`launch_job`
runs a planned job (:mod:`alexnet.launch.job`: probe, progress, retries) with this runner, whatever its kind. A
worker whose task Spark assigned GPUs (``spark.task.resource.gpu.amount``) computes on those alone
(:func:`alexnet.launch.gpus.gpu_environment`); a job launched from R cannot see them (R's ``spark_apply()`` hands its
tasks no Spark task context: see ``?alexnet_spark_train``).
"""

from __future__ import annotations

import json
import logging
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

from ..checks import as_seconds
from ..errors import AlexnetError, importing, run_error
from . import probe_task
from .gpus import VISIBLE_GPUS, gpu_environment
from .job import JobPlan, JobRun, failure_of, run_job
from .session import spark_session as spark_session  # where the README has long named it
from .task import Task, check_slots
from .work import worker_function
from .worker import WorkerError, run_worker

logger = logging.getLogger(__name__)

#: What to do when the executors' Python cannot run alexnet (Python launcher).
PYTHON_ADVICE = (
    "Give every executor a Python with the alexnet core and TensorFlow: install it on every node "
    "(pip install 'alexnet[spark]', or install_alexnet() from R), and point Spark at it with PYSPARK_PYTHON or "
    "the spark.pyspark.python setting, or pass python = '/path/to/python' to alexnet_spark_train() or "
    "alexnet_spark_evaluate()."
)


def slots_from(
    default_parallelism: int, task_cpus: int | str = 1, dynamic_allocation: bool | str = False
) -> int | None:
    """Barrier tasks Spark can run at once: ``default_parallelism`` over ``task_cpus`` (``spark.task.cpus``).

    ``None`` (unknown) with dynamic allocation, where executors, and so slots, come and go.
    """
    if str(dynamic_allocation).strip().lower() == "true":
        return None
    return max(1, int(default_parallelism) // max(1, int(task_cpus)))


def spark_context(spark: Any) -> Any:
    """The SparkContext of ``spark`` (a SparkSession or a SparkContext); an :class:`AlexnetError` otherwise."""
    context = getattr(spark, "sparkContext", spark)
    if not hasattr(context, "parallelize"):
        raise AlexnetError(
            f"`spark` must be a pyspark SparkSession or SparkContext, not a {type(spark).__name__}: create one "
            "with SparkSession.builder.master(...).getOrCreate()."
        )
    return context


def barrier_slots(spark: Any) -> int | None:
    """:func:`slots_from` for a SparkSession or SparkContext."""
    context = spark_context(spark)
    conf = context.getConf()
    return slots_from(
        context.defaultParallelism,
        conf.get("spark.task.cpus", "1"),
        conf.get("spark.dynamicAllocation.enabled", "false"),
    )


#: Seconds between two looks at the application's task slots while a relaunch waits for them (:func:`await_slots`).
SLOTS_POLL = 5.0

_SPARK_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$")
_SPARK_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _spark_seconds(text: object, default: float) -> float:
    """A Spark time setting (``15s``, ``500ms``, ``2min``; a bare number is seconds) in seconds, or ``default``."""
    match = _SPARK_TIME.match(str(text))
    return float(match.group(1)) * _SPARK_UNITS[match.group(2) or "s"] if match else default


def slots_patience(setting: Callable[[str, str], Any]) -> float:
    """How long Spark itself waits for the slots of a barrier stage before failing it: its check's interval
    (``spark.scheduler.barrier.maxConcurrentTasksCheck.interval``, 15 s) times its tries (``...maxFailures``, 40),
    as ``setting(key, default)`` reads them (``SparkConf.get``; from R, the conf's ``get`` through sparklyr)."""
    interval = _spark_seconds(setting("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "15s"), 15.0)
    tries = setting("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "40")
    return interval * (int(tries) if str(tries).strip().isdigit() else 40)


def await_slots(slots: Callable[[], int | None], workers: int, patience: float, poll: float = SLOTS_POLL,
                say: Callable[[str], Any] | None = None) -> None:
    """Before a relaunch, wait up to ``patience`` seconds for the Spark application to have ``workers`` barrier
    task slots again (``slots()``: how many it has now, ``None`` when unknown), looking every ``poll`` seconds. A lost
    Spark worker takes its executors' slots along until the cluster gives the application new ones (a worker
    restarted, YARN or Kubernetes replacing the node); launched at once, the relaunch was refused as if the application
    had always had too few. Says once that it waits, and why, and when the slots are back: logged, or handed to
    ``say`` (R shows it at once, where a logged warning would wait for the job's end); when the slots do not
    return, an :class:`AlexnetError` says what to do."""
    now = slots()
    if now is None or now >= workers:
        return
    waiting = (f"Before launching the {workers} workers again, waiting up to {patience:.0f} s for {workers} task "
               f"slots: the Spark application has {now} now (a Spark worker was lost, and its executors with it).")
    (say or logger.warning)(waiting)
    start = time.monotonic()
    while time.monotonic() - start < patience:
        time.sleep(min(poll, max(0.0, patience - (time.monotonic() - start))))
        now = slots()
        if now is None or now >= workers:
            waited = time.monotonic() - start
            back = f"The Spark application has {now or workers} task slots again, after {waited:.0f} s."
            (say or logger.info)(back)
            return
    raise run_error(
        f"{workers} workers need {workers} task slots at once to be launched again, but this Spark application still "
        f"has {now} after waiting {patience:.0f} s for a lost Spark worker's slots to return: restart that "
        f"worker or give the application more executors, then run it again (a checkpoint_dir resumes), or give "
        f"`workers` <= {now}.")


def _barrier_task(function: Any, python: str | None, env: Mapping[str, str], rows: Iterable[Any]) -> Iterator[str]:
    """Body of one barrier task: run the worker's process, on the GPUs Spark assigned the task (if any); yield its
    result (or fail with its error)."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    index = context.partitionId()
    addresses = [info.address for info in context.getTaskInfos()]
    given, env = env, gpu_environment(context, env)
    if env != given:
        logger.info("Worker %d computes on the GPUs Spark assigned its task: %s=%s.", index, VISIBLE_GPUS,
                    env[VISIBLE_GPUS])
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
    what: str | None = None,
    advice: str = "raise `timeout`",
) -> list[Any]:
    """Run ``function(index, addresses)`` once per worker, in one Spark barrier stage; results in worker order.

    Each of the ``workers`` barrier tasks runs ``function`` in a fresh Python process (see
    :func:`alexnet.launch.worker.run_worker`) once all tasks have started; ``addresses`` are the tasks'
    ``host:port`` in partition order. Raises :class:`~alexnet.launch.worker.WorkerError` (the worker's own
    error, where its log is, and the log's last lines) when a worker fails, which makes Spark stop the others;
    :class:`~alexnet.launch.job.SparkJobError` when Spark fails otherwise; AlexnetError when the job takes longer
    than ``timeout`` seconds (then it is cancelled), naming the job as ``what`` and ending with ``advice``.
    """
    context = spark_context(spark)
    workers = check_slots(workers, barrier_slots(context))
    timeout = as_seconds(timeout, "timeout")
    task = partial(_barrier_task, function, python, {str(k): str(v) for k, v in (env or {}).items()})
    rdd = context.parallelize(range(workers), workers).barrier().mapPartitions(task)

    tag = f"alexnet-{uuid.uuid4().hex[:12]}"
    expired = threading.Event()
    started: list[bool | None] = [None]

    def cancel() -> None:
        started[0] = tasks_started(context)
        expired.set()
        context.cancelJobsWithTag(tag)

    timer = threading.Timer(float(timeout), cancel) if timeout is not None else None
    context.addJobTag(tag)
    start = time.monotonic()
    restore = _quiet_after_interrupt()  # Ctrl-C cancels the job without py4j's errors of the call it cut short
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        logger.info("Starting %d barrier task(s) (job tag %s).", workers, tag)
        lines = rdd.collect()
    except Exception as error:
        if expired.is_set():
            # tasks not started yet: a short timeout, or a stage that waits for slots a lost Spark worker took along
            waiting = (f" Its barrier tasks had not started: they wait for {workers} free task slots at once, and if a "
                       "Spark worker was lost (or other jobs hold its slots), the application has fewer: restart "
                       "it, or give fewer `workers`." if started[0] is False else "")
            raise run_error(
                f"{what or f'The {workers} worker(s)'} did not finish within timeout = {timeout:g} s, so the Spark "
                f"job was cancelled: {advice}.{waiting}"
            ) from None
        raise failure_of(error, workers) from None
    finally:
        if timer is not None:
            timer.cancel()
        try:
            context.removeJobTag(tag)
        finally:
            restore()
    logger.info("%d worker(s) finished in %.1f s.", workers, time.monotonic() - start)
    rows = sorted((json.loads(line) for line in lines), key=lambda row: row["worker"])
    return [row["result"] for row in rows]


#: What py4j logs (on the root logger, with the traceback) of the call to the JVM that Ctrl-C interrupted.
_PY4J_INTERRUPTED = ("Exception while sending command.", "KeyboardInterrupt while sending command.")


class _Py4jInterrupted(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "root" and record.getMessage() in _PY4J_INTERRUPTED)


def _quiet_after_interrupt() -> Callable[[], None]:
    """From now until the returned function is called, in the main thread: Ctrl-C, on which pyspark's handler (the
    one before) cancels the jobs and raises KeyboardInterrupt, leaves py4j's errors of the call it cut short unsaid
    (its logger quiet too), so that the interruption is said once, by whoever catches it. The returned function puts
    back the handler, the logger's level and the root logger's filters as they were."""
    before = signal.getsignal(signal.SIGINT)
    quiet, py4j = _Py4jInterrupted(), logging.getLogger("py4j")
    level = py4j.level

    def interrupted(signum: int, frame: Any) -> None:
        if before == signal.SIG_IGN:
            return
        if quiet not in logging.getLogger().filters:
            logging.getLogger().addFilter(quiet)
            py4j.setLevel(logging.CRITICAL + 1)
        if callable(before):
            before(signum, frame)
        raise KeyboardInterrupt

    def restore() -> None:
        signal.signal(signal.SIGINT, before)
        if quiet in logging.getLogger().filters:
            logging.getLogger().removeFilter(quiet)
            py4j.setLevel(level)

    try:
        signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # not the main thread (of the main interpreter): its handler is not this call's to change
        return lambda: None
    return restore


def tasks_started(context: Any) -> bool | None:
    """Has any task of the active stages of the SparkContext ``context`` started (None: not known)? A barrier stage
    that waits for task slots has started none."""
    try:
        tracker = context.statusTracker()
        infos = [tracker.getStageInfo(stage) for stage in tracker.getActiveStageIds()]
    except Exception:
        return None
    infos = [info for info in infos if info is not None]
    if not infos:
        return None
    return any(info.numActiveTasks + info.numCompletedTasks + info.numFailedTasks > 0 for info in infos)


def probe_executors(spark: Any, tasks: int, python: str | None = None, env: Mapping[str, str] | None = None
                    ) -> list[dict[str, Any]]:
    """Ask ``tasks`` ordinary Spark tasks whether the Python that would run a worker imports alexnet and
    TensorFlow (see :mod:`alexnet.launch.probe_task`); one row per task.

    The probe is shipped by value, so it runs on executors whose Python lacks alexnet (which it reports).
    """
    with importing():
        from pyspark import cloudpickle

    context = spark_context(spark)
    cloudpickle.register_pickle_by_value(probe_task)
    try:
        body = partial(probe_task.probe_partition, python, {str(k): str(v) for k, v in (env or {}).items()})
        lines = context.parallelize(range(tasks), tasks).mapPartitions(body).collect()
    except Exception as error:
        raise failure_of(error, tasks) from None
    finally:
        cloudpickle.unregister_pickle_by_value(probe_task)
    return [json.loads(line) for line in lines]


def driver_host(context: Any) -> str | None:
    """The address the executors reach the driver of ``context`` at (``spark.driver.host``), if known."""
    return context.getConf().get("spark.driver.host", None)


def launch_job(spark: Any, plan: JobPlan, **extra: Any) -> JobRun:
    """Run ``plan`` (:func:`alexnet.launch.job.plan_job`) on ``spark`` with :func:`run_barrier`: the executors'
    probe and the workers' progress here (as the plan's options say), the barrier stage (each worker runs what its
    kind's entry of :data:`alexnet.launch.work.WORK` says, with ``extra`` keyword arguments), bounded by the
    options' ``timeout`` (the driver cancels the Spark job), relaunched up to ``plan.retries`` times."""
    context = spark_context(spark)
    work, options = plan.work, plan.task.options

    def launch(task: Task) -> list[dict[str, Any]]:
        return run_barrier(context, plan.workers, worker_function(task, **extra), timeout=options.timeout,
                           python=options.python, env=options.env, what=f"The {work.noun} on {plan.workers} worker(s)",
                           advice=work.timeout_advice)

    def check() -> list[dict[str, Any]]:
        slots = barrier_slots(context) or plan.workers
        return probe_executors(context, max(plan.workers, slots), options.python, options.env)

    def relaunch() -> None:  # after a lost Spark worker, its slots may not be back yet
        await_slots(lambda: barrier_slots(context), plan.workers, slots_patience(context.getConf().get))

    return run_job(plan, launch, driver_host=driver_host(context), probe=check, advice=PYTHON_ADVICE,
                   before_relaunch=relaunch)
