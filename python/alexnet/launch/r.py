"""A barrier job launched from R with ``sparklyr::spark_apply(barrier = TRUE)``: one call on the driver, one in each
task, whatever the kind of work.

The R package (``R/spark-job.R``) calls :func:`r_job` on the driver, handing it two R functions: ``launch``, which runs
one barrier stage with ``spark_apply()``, and ``check``, which runs the executors' check. Every barrier task calls
:func:`barrier_row` with its ``barrier`` list and the task the driver planned. The plan, probe, progress, retries
and the job's evaluation are :mod:`alexnet.launch.job`'s, the same as from Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..checks import as_int
from ..errors import AlexnetError, error_fields
from . import monitor, spark
from .job import combine_job, failure_of, plan_job, run_job
from .monitor import DRIVER_GONE_AFTER, driver_gone, report_failure
from .spark import slots_from
from .task import Task
from .work import column_types, row_of, worker_function
from .worker import WorkerError, run_worker

#: What to do when the R workers cannot run alexnet (R launcher).
R_ADVICE = (
    "Install alexnet on every node (the R package, then alexnet::install_alexnet()), or point the Spark R "
    "workers at a Python that has the core: pass python = '/path/to/python' to alexnet_spark_train(), or set "
    "ALEXNET_PYTHON for them with spark_config() (sparklyr.apply.env.ALEXNET_PYTHON)."
)


def _records(value: Any) -> list[dict[str, Any]]:
    """Rows as R hands them over: a data frame (as pandas) or a list of named lists."""
    if hasattr(value, "to_dict"):
        return list(value.to_dict(orient="records"))
    return [dict(row) for row in value]


#: What R is told after an interrupt (Ctrl-C) of its Spark job, which sparklyr cancelled.
INTERRUPTED = ("Interrupted: the Spark job was cancelled, and its workers stop once they find the driver gone "
               f"(within {DRIVER_GONE_AFTER:g} s). A training with `checkpoint_dir` run again resumes from its last "
               "checkpoint.")

#: ``launch(task, columns)``: the R function that runs one barrier stage (see :func:`r_job`).
Launch = Callable[[dict[str, Any], dict[str, str]], Any]


def r_job(kind: str, workers: int, board: str | os.PathLike | None, default_parallelism: int, task_cpus: int | str,
          dynamic_allocation: bool | str, driver_host: str | None, launch: Launch,
          check: Callable[[], Any] | None = None, *, on_retry: Callable[[str, dict[str, Any]], Any] | None = None,
          parallelism: Callable[[], Any] | None = None, setting: Callable[[str, str], Any] | None = None,
          on_wait: Callable[[str], Any] | None = None, **options: Any) -> dict[str, Any]:
    """The driver's part of a barrier job of ``kind`` (``"train"``, ``"evaluate"``) launched from R: one call.

    Makes the checks of :func:`alexnet.launch.job.plan_job` (the slots come from ``default_parallelism``,
    ``task_cpus`` (``spark.task.cpus``) and ``dynamic_allocation`` (``spark.dynamicAllocation.enabled``), as
    sparklyr reads them; ``options`` are the launch options and the kind's arguments), then runs the job
    (:func:`alexnet.launch.job.run_job`): ``check()`` (an R function running the R workers' check, run unless the
    launch options say ``probe = FALSE``) returns one
    row per task, as :func:`alexnet.launch.probe_task.check_python` makes them; ``launch(task, columns)`` (an R
    function running ``spark_apply()`` with ``workers`` barrier tasks whose closure calls :func:`barrier_row` with
    ``task``, a plain list, and ``columns``, the rows' column names and Python types) returns one flat row per
    worker, or ``{"failure": <the error's message>}`` when the stage failed (returned, not raised: an R error
    reaching Python has its message shortened); ``on_retry(message, fields)`` is called before each relaunch with
    the failure and what follows, and the failure's fields (:func:`alexnet.errors.error_fields`: a worker's
    ``worker``, ``workers`` and ``log``), which R says at once and raises as a warning that carries them;
    ``driver_host`` is where the workers' progress is sent (unless the launch options say ``progress = FALSE``).
    With ``parallelism()`` (the application's ``defaultParallelism`` now) and ``setting(key, default)`` (its
    conf's), a relaunch first waits for the task slots of a lost Spark worker to
    return, as long as Spark would (:func:`alexnet.launch.spark.await_slots`), and says so through ``on_wait(text)``
    (R shows it as a message).

    Returns ``rows`` (in worker order, each with ``attempt``) and ``evaluation`` (see
    :func:`alexnet.launch.job.combine_job`; ``None`` for a training without one).
    """
    plan = plan_job(workers, board, slots_from(default_parallelism, task_cpus, dynamic_allocation), kind=kind,
                    **options)

    def relaunch() -> None:  # a lost Spark worker's slots may not be back
        if parallelism is not None:
            spark.await_slots(lambda: slots_from(int(parallelism()), task_cpus, dynamic_allocation), plan.workers,
                              spark.slots_patience(setting or (lambda key, default: default)), poll=spark.SLOTS_POLL,
                              say=on_wait)

    def launched(task: Task) -> list[dict[str, Any]]:
        value = launch(task.to_dict(), column_types(task))  # a plain list in R, made a Task again by each task
        if isinstance(value, Mapping) and value.get("interrupted"):  # Ctrl-C: the job cancelled, not launched again
            raise AlexnetError(INTERRUPTED)
        if isinstance(value, Mapping) and "failure" in value:  # the stage's error, as R caught it
            raise failure_of(RuntimeError(str(value["failure"])), plan.workers)
        return _records(value)

    def retried(text: str, failure: AlexnetError) -> None:
        if on_retry is not None:
            on_retry(text, error_fields(failure))

    said_as, monitor.SAID_AS = monitor.SAID_AS, monitor.R_WORDS  # the monitor's lines in R's words
    try:
        run = run_job(plan, launched, driver_host=driver_host,
                      probe=(lambda: _records(check())) if check is not None else None, advice=R_ADVICE,
                      on_retry=retried if on_retry is not None else None, before_relaunch=relaunch)
    finally:
        monitor.SAID_AS = said_as
    # every warning said again as the job ends, also those the monitor showed: R raises them as conditions of class
    # `alexnet_warning`, which a caller catches, where the monitor's lines are text on the console
    return {"rows": run.rows, "evaluation": combine_job(plan, run.rows, run.seconds), "attempt": run.attempt}


def barrier_row(addresses: Sequence[str], partition: int, task: Mapping[str, Any]) -> dict[str, Any]:
    """What an R barrier task (``spark_apply(barrier = TRUE)``) does: its worker's work in a fresh Python process,
    as a flat row (the columns :func:`r_job` hands ``launch``).

    ``addresses`` is the closure's ``barrier$address`` (every task's ``"host:port"``, in partition order),
    ``partition`` its ``barrier$partition`` (0-based) and ``task`` the :class:`~alexnet.launch.task.Task` the driver
    planned, as the plain list R carried; its options' ``timeout`` bounds the worker's run here (sparklyr has no way to
    cancel a stage). When the worker fails, the row is ``{"failure": <message>}`` (see
    :meth:`~alexnet.launch.worker.WorkerError.task_failure`), for the task to ``stop()`` with, and the message is
    handed to the driver's monitor first (:func:`alexnet.launch.monitor.report_failure`), when the task has one.
    """
    job = Task.from_dict(task)
    try:
        options = job.options
        # stopped when the driver is gone: a Spark job cancelled from R leaves its R tasks running
        result = run_worker(worker_function(job), as_int(partition, "barrier$partition"), [str(a) for a in addresses],
                            python=options.python, env=options.env, timeout=options.timeout,
                            abandoned=driver_gone(job.progress))
    except WorkerError as error:
        # returned, for the R task to stop() with: a Python error reaching R has its message shortened; and handed to
        # the driver's monitor first, as sparklyr's error of the stage does not carry the task's
        failure = error.task_failure()
        report_failure(job.progress, error.worker, failure)
        return {"failure": failure}
    return row_of(job, result)
