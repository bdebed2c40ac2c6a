"""A distributed run as the driver sees it, the same from Python and from R.

:func:`plan_job` makes every check that can be made before anything runs on the cluster (task slots, the
board, the arguments, output locations). :func:`run_job` then checks the executors (a short probe job: does
the Python that would run a worker import alexnet and TensorFlow?), starts the progress monitor, and launches
the barrier stage; after a failure it launches it again, up to ``retries`` times, and the workers resume from
the last checkpoint on the shared ``checkpoint_dir``. How a stage is launched is the front end's part:
:mod:`alexnet.launch.spark` with pyspark, ``sparklyr::spark_apply()`` from R.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..checks import as_int, as_seconds
from ..data.fetch import DEFAULT_DOWNLOADS
from ..errors import AlexnetError
from ..train.cluster import DEFAULT_BASE_PORT, check_base_port
from ..train.settings import TrainSettings
from .monitor import start_monitor
from .task import TrainTask
from .worker import RESERVED, WORKER_VERBOSE, WorkerError

logger = logging.getLogger(__name__)

#: Relaunches of a failed barrier stage.
DEFAULT_RETRIES = 0

#: Lines of a Spark failure shown when no worker reported its own error.
SPARK_LINES = 12


class SparkJobError(AlexnetError):
    """A Spark job failed before any worker could report an error of its own (``python_error`` when Spark's
    message holds one)."""

    def __init__(self, workers: int, python_error: str | None, detail: Sequence[str]):
        self.python_error, self.detail = python_error, list(detail)
        lead = f": {python_error}" if python_error else ""
        shown = "\n  ".join(self.detail)
        super().__init__(
            f"The Spark job of {workers} worker(s) failed before a worker reported an error{lead}\n  {shown}\n"
            "(Spark's whole message is logged at DEBUG level: logging.getLogger('alexnet').setLevel('DEBUG'))."
        )


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
    detail = [line for line in lines if not line.lstrip().startswith("at ")][:SPARK_LINES]
    return SparkJobError(workers, lead, detail)


def check_slots(workers: object, slots: int | None) -> int:
    """``workers`` as an int that fits in ``slots`` barrier task slots (``None``: unknown, not checked).

    A barrier stage starts all its tasks at once: with fewer slots it would wait for ever.
    """
    workers = as_int(workers, "workers", 1)
    if slots is not None and workers > int(slots):
        raise AlexnetError(
            f"{workers} workers need {workers} task slots at once (one barrier task each), but this Spark "
            f"application has {int(slots)}: use workers <= {int(slots)}, or give Spark more executors or "
            f"cores (e.g. master 'local[{workers}]' on one machine)."
        )
    return workers


@dataclass
class JobPlan:
    """What the checks of :func:`plan_job` settled: the workers, the board, what each task needs, the retries."""

    workers: int
    board: str
    task: TrainTask
    retries: int = 0


def worker_settings(train_args: Mapping[str, Any], board: str | os.PathLike | None, *, local_master: bool = True,
                    where: str = "alexnet_spark_train()") -> TrainSettings:
    """The training settings every worker of a distributed run gets, checked once on the driver
    (:func:`alexnet.train.settings.check_settings`: names, values, output locations writable, the board of
    ``model_pin``, by default ``board``): not ``data`` or ``strategy``, which the workers set; Keras prints one line
    per epoch unless ``verbose`` says otherwise (a worker's output goes to its log)."""
    from ..storage.board import default_board
    from ..train.settings import check_settings

    arguments = dict(train_args)
    if arguments.get("strategy", "multi_worker") in (None, "multi_worker"):
        arguments.pop("strategy", None)
    arguments.setdefault("verbose", WORKER_VERBOSE)
    return check_settings(arguments, data_board=os.fspath(board) if board is not None else default_board(),
                          shared=not local_master, where=where, reserved=RESERVED)


def plan_job(workers: int, board: str | os.PathLike | None, slots: int | None, *, base_port: int = DEFAULT_BASE_PORT,
             cache_dir: Any = None, fetch_workers: int = DEFAULT_DOWNLOADS, python: str | None = None,
             env: Mapping[str, str] | None = None, retries: int = DEFAULT_RETRIES, local_master: bool = True,
             timeout: float | None = None, where: str = "alexnet_spark_train()", settings: TrainSettings | None = None,
             **train_args: Any) -> JobPlan:
    """Every check that can be made on the driver before a distributed run, and the plan it leads to.

    ``workers`` must fit in ``slots`` (a barrier stage starts all its tasks at once, or waits for ever);
    ``train_args`` are the training settings (:func:`worker_settings`), or ``settings`` holds them already checked;
    ``timeout`` (seconds a launch may take) must be positive or ``None``; ``base_port`` must leave room for every
    worker; the board must be reachable and hold at least ``workers`` categories.
    """
    from ..storage.board import open_board
    from ..storage.layout import read_categories

    workers = check_slots(workers, slots)
    if settings is None:
        settings = worker_settings(train_args, board, local_master=local_master, where=where)
    elif train_args:
        raise AlexnetError(f"{where}: give the training settings either checked (`settings`) or by name, not both.")
    timeout = as_seconds(timeout, "timeout")
    port = check_base_port(base_port, workers)
    opened = open_board(board)
    categories = len(read_categories(opened))
    if workers > categories:
        raise AlexnetError(f"{workers} workers need at least {workers} categories, but board {opened.location} has "
                           f"{categories}: use workers <= {categories}.")
    task = TrainTask(board=opened.location, base_port=port,
                     cache_dir=None if cache_dir is None else os.fspath(cache_dir),
                     fetch_workers=as_int(fetch_workers, "fetch_workers", 1), python=python,
                     env={str(k): str(v) for k, v in (env or {}).items()},
                     settings=settings, timeout=timeout)
    return JobPlan(workers, opened.location, task, as_int(retries, "retries", 0))


def check_probe(rows: Sequence[Mapping[str, Any]], advice: str) -> None:
    """Raise when an executor's Python cannot run a worker (see :mod:`alexnet.launch.probe_task`), naming it."""
    bad = [row for row in rows if not row.get("ok")]
    if not bad:
        return
    seen = sorted({(str(r.get("host")), str(r.get("python")), str(r.get("error"))) for r in bad})
    listing = "\n  ".join(f"{host}: {python}: {error}" for host, python, error in seen)
    raise AlexnetError(f"The Python that would run the workers cannot run alexnet on {len(seen)} executor(s):\n"
                       f"  {listing}\n{advice}")


def run_job(plan: JobPlan, launch: Callable[[TrainTask], list[dict[str, Any]]], *, driver_host: str | None,
            probe: Callable[[], Sequence[Mapping[str, Any]]] | None = None, advice: str = "",
            progress: bool = True, on_retry: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
    """Run ``plan``: check the executors with ``probe``, then ``launch(task)`` (one barrier stage, returning one
    row per worker) until it succeeds or ``plan.retries`` relaunches have failed too.

    While the stage runs, the chief's progress is shown on the driver (when ``progress`` and ``driver_host``,
    the address the executors reach the driver at). Each row gets ``attempt`` (1 for the first launch). A
    worker's failure raises its :class:`WorkerError`; a failure of Spark itself, a :class:`SparkJobError`. Before
    each relaunch, the failure and what follows are logged as a warning, or handed to ``on_retry`` (one string)
    when given (R shows it as an R warning).
    """
    if probe is not None:
        check_probe(probe(), advice)
    monitor = start_monitor(driver_host) if progress and driver_host else None
    task = plan.task if monitor is None else plan.task.with_progress(monitor.address)
    try:
        for attempt in itertools.count(1):
            try:
                rows = launch(task)
                break
            except (WorkerError, SparkJobError) as error:
                failure: AlexnetError = error
            except AlexnetError:
                raise
            except Exception as error:  # a failure of Spark, from pyspark or through R
                failure = failure_of(error, plan.workers)
            if attempt > plan.retries:
                raise failure from None
            _log_retry(failure, attempt, plan, on_retry)
    finally:
        if monitor is not None:
            monitor.close()
    rows = sorted(rows, key=lambda row: int(row["worker"]))
    for row in rows:
        row["attempt"] = attempt
    return rows


def _log_retry(failure: AlexnetError, attempt: int, plan: JobPlan,
               on_retry: Callable[[str], Any] | None = None) -> None:
    resume = "resuming from the last checkpoint" if plan.task.settings.checkpoint_dir else \
        "starting afresh (no checkpoint_dir)"
    lines = str(failure).splitlines()
    shown = lines[:2] if len(lines) > 1 and lines[1].startswith("Full log:") else lines[:1]
    message = "{}\nLaunching the {} workers again, {} (retry {} of {}).".format(
        "\n".join(shown), plan.workers, resume, attempt, plan.retries)
    if on_retry is None:
        logger.warning("%s", message)
    else:
        logger.info("%s", message)
        on_retry(message)
