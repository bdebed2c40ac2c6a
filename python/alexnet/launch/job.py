"""A barrier job as the driver sees it, the same for every kind of work and from Python and from R.

One path for every job: :func:`plan_job` makes every check that can be made before anything runs on the cluster
(task slots, the kind's arguments, the board, output locations); :func:`run_job` checks the executors (a short
probe job: does the Python that would run a worker import alexnet and TensorFlow?), starts the progress
monitor, and launches the barrier stage; after a failure it launches it again, up to ``retries`` times (a
training resumes from the last checkpoint on the shared ``checkpoint_dir``; an evaluation, idempotent, is run
again whole); :func:`combine_job` makes the job's evaluation of the workers' rows. What the workers do is the
kind's (:mod:`alexnet.launch.work`); how a stage is launched, the front end's: :mod:`alexnet.launch.spark` with
pyspark, ``sparklyr::spark_apply()`` from R (:mod:`alexnet.launch.r`).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import AlexnetError, run_error
from .monitor import start_monitor
from .options import check_launch, specs
from .task import Task, check_slots
from .work import Work, work_of
from .worker import WorkerError

logger = logging.getLogger(__name__)

#: Lines of a Spark failure shown when no worker reported its own error.
SPARK_LINES = 12


class SparkJobError(AlexnetError):
    """A Spark job failed before any worker could report an error of its own (``python_error`` when Spark's
    message holds one; ``spark_message`` the whole of it, which reaches R as the condition's field)."""

    while_running = True

    def __init__(self, workers: int, python_error: str | None, detail: Sequence[str], spark_message: str = "",
                 advice: str = ""):
        self.workers, self.python_error, self.detail = workers, python_error, list(detail)
        self.spark_message, self.advice = spark_message, advice
        lead = f": {python_error}" if python_error else ""
        shown = "".join(f"\n  {line}" for line in self.detail)
        super().__init__(
            f"The Spark job of {workers} worker(s) failed before a worker reported an error{lead}{shown}\n"
            "(Spark's whole message is logged at DEBUG level: logging.getLogger('alexnet').setLevel('DEBUG'))."
            + (f"\n{advice}" if advice else "")
        )

    def advised(self, more: str) -> SparkJobError:
        """The same error, ending with ``more``."""
        return SparkJobError(self.workers, self.python_error, self.detail, self.spark_message,
                             f"{self.advice} {more}" if self.advice else more)


_PYTHON_ERROR = re.compile(r"^\s*((?:[A-Za-z_][\w.]*)(?:Error|Exception|Exit|Interrupt)\b.*)$", re.MULTILINE)


def failure_of(error: BaseException, workers: int) -> AlexnetError:
    """The error a failed Spark job stands for: the worker's own :class:`WorkerError` when a barrier task
    reported one, else a :class:`SparkJobError` that leads with the Python error in Spark's message (if any),
    without Spark's Java stack trace."""
    message = str(error)
    reported = WorkerError.from_failure(message)
    if reported is not None:
        return reported
    logger.debug("Spark's message: %s", message)
    lines = [line.rstrip() for line in message.splitlines() if line.strip()]
    python = [m.group(1).strip() for m in _PYTHON_ERROR.finditer(message) if "java." not in m.group(1)]
    lead = python[-1] if python else None
    # with the Python error in the lead, Spark's own lines add nothing; else its first lines, without stack frames
    detail = [] if lead else [line for line in lines if not line.lstrip().startswith(("at ", "File ", "Traceback"))]
    return SparkJobError(workers, lead, detail[:SPARK_LINES], message)


def reported_failure(reports: Sequence[Mapping[str, Any]], failure: SparkJobError) -> AlexnetError:
    """The worker's own error that the first of ``reports`` (the failures workers handed to the driver's monitor, in
    order of arrival) holds, for a Spark job whose ``failure`` did not carry it (sparklyr's says only that an R worker
    failed); ``failure`` when no worker reported one."""
    for report in reports:
        reported = WorkerError.from_failure(str(report.get("failure", "")))
        if reported is not None:
            logger.debug("Spark's message of the job: %s", "\n".join(failure.detail))
            return reported
    return failure


#: A line of Spark's message that says an executor, or the worker that ran it, went away.
_LOST = re.compile(r"ExecutorLost|Lost executor|worker lost|Reason:", re.IGNORECASE)


@dataclass
class JobPlan:
    """What the checks of :func:`plan_job` settled: the workers, the board, the task each worker is handed (with
    the job's launch options)."""

    workers: int
    board: str
    task: Task

    @property
    def retries(self) -> int:
        """Launches of the job again after a failure."""
        return self.task.options.retries

    @property
    def work(self) -> Work:
        """The kind of work of this job (see :data:`alexnet.launch.work.WORK`)."""
        return work_of(self.task.kind)


@dataclass
class JobRun:
    """A job that ran: one row per worker, in worker order (each with ``attempt``), the launch that succeeded
    (``attempt``, 1 for the first), its wall time in ``seconds``, and the workers' warnings the driver's monitor
    showed as they were logged (``shown``, as the workers logged them)."""

    rows: list[dict[str, Any]]
    attempt: int
    seconds: float
    shown: set[str] = field(default_factory=set)


#: How each kind of job is named in the errors of its arguments.
WHERE = {"train": "alexnet_spark_train()", "evaluate": "alexnet_spark_evaluate()"}


def plan_job(workers: Any, board: str | os.PathLike | None, slots: int | Callable[[], int | None] | None, *,
             kind: str = "train", local_master: bool = True, where: str | None = None, **arguments: Any) -> JobPlan:
    """Every check that can be made on the driver before a barrier job of ``kind``, and the plan it leads to.

    ``workers`` must be a count that fits in ``slots`` (a barrier stage starts all its tasks at once, or waits for
    ever); the launch options among ``arguments`` are checked next
    (:class:`alexnet.launch.options.LaunchOptions`: ``base_port`` leaving room for every worker, ``timeout``
    positive or unset, ...), then the kind's own arguments (a training's settings and options, see
    :func:`alexnet.launch.training.check_training`; an evaluation's model and options, see
    :func:`alexnet.launch.evaluation.check_evaluation`), before the board is read; then the board must be reachable
    and fit the work (categories, validation images). ``slots`` given as a function is called last, so that a Spark
    session it starts is started for a job that passed every other check (its ``known`` attribute, when it has one,
    is checked first: the slots of a local master, known before it starts). ``where`` names the call in errors.
    """
    from ..storage.board import open_board
    from ..storage.layout import categories_and_version

    work = work_of(kind)
    # a function may know the slots before it starts a session (a local master's): checked first too
    workers = check_slots(workers, getattr(slots, "known", None) if callable(slots) else slots)
    options = check_launch({name: arguments.pop(name) for name in specs() if name in arguments}, workers)
    fields = work.check(workers, board, local_master=bool(local_master), where=where or WHERE[kind], **arguments)
    opened = open_board(board)
    rows, version = categories_and_version(opened)
    task = Task(kind=kind, board=opened.location, workers=workers, options=options, categories_version=version,
                **fields)
    work.fit(task, rows)
    if callable(slots):
        check_slots(workers, slots())
    return JobPlan(workers, opened.location, task)


def check_probe(rows: Sequence[Mapping[str, Any]], advice: str) -> None:
    """Raise when an executor's Python cannot run a worker (see :mod:`alexnet.launch.probe_task`), naming it; say
    when executors run another version of alexnet than the driver's."""
    from .. import __version__

    bad = [row for row in rows if not row.get("ok")]
    if not bad:
        other = sorted({(str(r.get("alexnet")), str(r.get("host")), str(r.get("python"))) for r in rows
                        if r.get("alexnet") not in (None, __version__)})
        if other:
            logger.warning("The executors run another version of alexnet than this driver's %s: %s. A driver and "
                           "workers of different versions may not read each other's settings and results: install "
                           "the same version on every machine.", __version__,
                           "; ".join(f"{version} on {host} ({python})" for version, host, python in other))
        return
    seen = sorted({(str(r.get("host")), str(r.get("python")), str(r.get("error"))) for r in bad})
    listing = "\n  ".join(f"{host}: {python}: {error}" for host, python, error in seen)
    raise run_error(f"The Python that would run the workers cannot run alexnet on {len(seen)} executor(s):\n"
                       f"  {listing}\n{advice}")


def run_job(plan: JobPlan, launch: Callable[[Task], list[dict[str, Any]]], *, driver_host: str | None,
            probe: Callable[[], Sequence[Mapping[str, Any]]] | None = None, advice: str = "",
            on_retry: Callable[[str, AlexnetError], Any] | None = None,
            before_relaunch: Callable[[], Any] | None = None) -> JobRun:
    """Run ``plan``: check the executors with ``probe`` (when the plan's options say ``probe``), then
    ``launch(task)`` (one barrier stage, returning one row per worker) until it succeeds or ``plan.retries``
    relaunches have failed too.

    While the stage runs, the workers' progress is shown on the driver (when the plan's options say ``progress``,
    and ``driver_host``, the address the executors reach the driver at, is known). A worker's failure raises its
    :class:`WorkerError`; a failure of Spark itself, a :class:`SparkJobError`. Before each relaunch, the failure and
    what follows are logged as a warning, or handed to ``on_retry`` (that text and the failure) when given (R says
    it and raises an R warning); then ``before_relaunch()`` runs (the wait for a lost Spark worker's task slots), not
    counted in the job's seconds.
    """
    options = plan.task.options
    if probe is not None and options.probe:  # a Spark job of its own, which takes a while on a cluster
        logger.info("Checking the executors: does the Python that would run the %d workers import alexnet and "
                    "TensorFlow?", plan.workers)
        check_probe(probe(), advice)
    monitor = start_monitor(driver_host) if options.progress and driver_host else None
    task = plan.task if monitor is None else plan.task.with_progress(monitor.address)
    try:
        for attempt in itertools.count(1):
            start = time.monotonic()
            if monitor is not None:
                monitor.take_failures()  # those of an attempt before
            try:
                rows = launch(task)
                break
            except (WorkerError, SparkJobError) as error:
                failure: AlexnetError = error
            except AlexnetError:
                raise
            except Exception as error:  # a failure of Spark, from pyspark or through R
                failure = failure_of(error, plan.workers)
            if isinstance(failure, SparkJobError) and monitor is not None:
                failure = reported_failure(monitor.take_failures(), failure)
            if attempt > plan.retries:
                raise last_failure(failure, plan) from None
            _log_retry(failure, attempt, plan, on_retry)
            if before_relaunch is not None:
                before_relaunch()
    finally:
        shown: set[str] = set()
        if monitor is not None:  # stopped first: a warning it is still writing out is then in what it showed
            monitor.stop()
            shown = monitor.shown_warnings()
            monitor.close()
    seconds = time.monotonic() - start
    rows = sorted(rows, key=lambda row: int(row["worker"]))
    for row in rows:
        row["attempt"] = attempt
    logger.debug("The %s on %d worker(s) finished in %.1f s (attempt %d).", plan.work.noun, plan.workers, seconds,
                 attempt)
    return JobRun(rows, attempt, seconds, shown)


def last_failure(failure: AlexnetError, plan: JobPlan) -> AlexnetError:
    """The error a job ends with after its last launch failed: ``failure``, which for a training with
    ``checkpoint_dir`` also names ``retries``, the way to have the job launched again by itself, resuming from
    its last checkpoint, where a relaunch can help: not after a worker's own error that says what to change in the
    settings or input (``known``, not found while the run ran), which every launch meets alike."""
    settings = plan.task.settings
    if plan.task.kind != "train" or settings is None or not settings.checkpoint_dir:
        return failure
    if not isinstance(failure, (WorkerError, SparkJobError)):
        return failure
    if isinstance(failure, WorkerError) and failure.known and not failure.in_run:
        return failure
    more = (f"Give `retries` = {plan.retries + 1} or more" + (f" (this job had {plan.retries})" if plan.retries else "")
            + " for the workers to be launched again after a failure, resuming from the last checkpoint by "
            "themselves.")
    return failure.advised(more)


def combine_job(plan: JobPlan, rows: Sequence[Mapping[str, Any]], seconds: float,
                shown: Collection[str] = ()) -> dict[str, Any] | None:
    """The driver's end of a job that ran: the workers' warnings said, but those already ``shown``
    (:attr:`JobRun.shown`); the evaluation the workers' flat rows add up to (an evaluation, or a training that ends
    with one, recorded in the model's card), or ``None``."""
    return plan.work.combine(plan.task, rows, seconds, shown)


def _log_retry(failure: AlexnetError, attempt: int, plan: JobPlan,
               on_retry: Callable[[str, AlexnetError], Any] | None = None) -> None:
    lines = str(failure).splitlines()
    shown = lines[:2] if len(lines) > 1 and lines[1].startswith("Full log:") else lines[:1]
    if isinstance(failure, SparkJobError):  # why Spark failed: a lost executor names the host that went away
        shown += [f"  {line.strip()}" for line in failure.detail if _LOST.search(line)][:1]
    message = "{}\nLaunching the {} workers again, {} (retry {} of {}).".format(
        "\n".join(shown), plan.workers, plan.work.relaunch(plan.task), attempt, plan.retries)
    if on_retry is None:
        logger.warning("%s", message)
    else:
        logger.info("%s", message)
        on_retry(message, failure)
