"""One worker's process: any function run in a fresh Python process, its log kept, its failure carried to the driver.

:func:`run_worker` is what each barrier task does, whatever the kind of work (see :mod:`alexnet.launch.work`),
whether the task was launched from Python (:mod:`alexnet.launch.spark`) or from R
(``sparklyr::spark_apply(barrier = TRUE)``, through :mod:`alexnet.launch.r`). A fresh process, because
TensorFlow's multi-worker set-up must come before any other TensorFlow work and Spark reuses its Python workers.
:class:`WorkerError` is a worker's failure, written by the task in a form the driver reads back from whatever
Spark, sparklyr and R wrap around it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..child import ChildError, run_child
from ..environment import env_value
from ..scratch import outer_temporary_folder

logger = logging.getLogger(__name__)

#: Worker logs kept on each host.
KEPT_LOGS = 50
_MARK = "<<alexnet-worker-error>>"
#: Characters of the end of a worker's log carried in its task failure.
MARKED_CHARACTERS = 1500
#: How the scratch folder of a worker's process begins (``alexnet-worker3-...`` for worker 3): a worker's next start
#: on a host removes the folders any worker there left when its task was killed, whatever its index.
WORKER_PREFIX = "alexnet-worker"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: What a worker's failure says to do, unless the driver says more (:meth:`WorkerError.advised`).
WORKER_ADVICE = ("The other workers were stopped. Fix the cause and run again (a training with `checkpoint_dir` "
                 "resumes from its last checkpoint).")


class WorkerError(ChildError):
    """A worker of a distributed run failed; ``worker`` and ``workers`` say which, the rest as :class:`ChildError`."""

    def __init__(self, worker: int, workers: int, error: str, log_tail: Sequence[str], exit_code: int | None = None,
                 log: str | None = None, known: bool = False, advice: str = WORKER_ADVICE, in_run: bool = False):
        self.worker, self.workers = worker, workers
        super().__init__(f"Worker {worker} of {workers}", error, log_tail, exit_code, log, advice, known, in_run)

    def advised(self, more: str) -> WorkerError:
        """The same error, its advice followed by ``more``."""
        return WorkerError(self.worker, self.workers, self.error, self.log_tail, self.exit_code, self.log,
                           self.known, f"{self.advice} {more}" if self.advice else more, self.in_run)

    def task_failure(self) -> str:
        """This error as the message a barrier task fails with; the driver makes it again with
        :meth:`from_failure`, whatever Spark (or sparklyr) wraps around it."""
        # short, so that no layer between the task and the driver (Spark, sparklyr, R, reticulate) cuts it
        tail: list[str] = []
        budget = MARKED_CHARACTERS
        for line in map(lambda text: _clip(text, 200), reversed(self.log_tail)):
            budget -= len(line)
            if budget < 0:
                break
            tail.insert(0, line)
        details = {"worker": self.worker, "workers": self.workers, "error": _clip(self.error, 400),
                   "log_tail": tail, "exit_code": self.exit_code, "log": self.log, "known": self.known,
                   "in_run": self.in_run}
        return f"worker {self.worker} failed: {self.error}\n{_MARK}{json.dumps(details)}{_MARK}"

    @classmethod
    def from_failure(cls, message: str) -> WorkerError | None:
        """The error whose :meth:`task_failure` is in ``message``; None when there is none."""
        start = message.find(_MARK)
        end = message.find(_MARK, start + len(_MARK)) if start >= 0 else -1
        if start < 0 or end < 0:
            return None
        try:
            details = json.loads(message[start + len(_MARK) : end])
            return cls(int(details["worker"]), int(details["workers"]), str(details["error"]),
                       [str(line) for line in details.get("log_tail", [])], details.get("exit_code"),
                       details.get("log"), bool(details.get("known")), in_run=bool(details.get("in_run")))
        except (ValueError, KeyError, TypeError):
            return None


def log_folder() -> str:
    """The folder of the workers' logs on this host, made if missing: ``$ALEXNET_LOG_DIR`` or
    ``<temporary folder>/alexnet-logs``."""
    folder = env_value("ALEXNET_LOG_DIR") or os.path.join(outer_temporary_folder(), "alexnet-logs")
    os.makedirs(folder, exist_ok=True)
    return folder


def worker_log(index: int) -> str:
    """Where worker ``index`` on this host keeps its log, in :func:`log_folder`: a new file per run; the oldest are
    deleted beyond :data:`KEPT_LOGS`."""
    folder = log_folder()
    logs = sorted((mtime, entry.path) for entry in os.scandir(folder) if (mtime := _modified(entry)) is not None)
    for _, path in logs[: max(0, len(logs) - KEPT_LOGS + 1)]:
        with contextlib.suppress(OSError):
            os.remove(path)
    return os.path.join(folder, f"worker{index}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")


def _modified(entry: os.DirEntry[str]) -> float | None:
    """When a log was last written; ``None`` when it is gone already (another worker on this host tidied it)."""
    try:
        return entry.stat().st_mtime
    except OSError:
        return None


def run_worker(function: Callable[[int, list[str]], Any], index: int, addresses: Sequence[str], *,
               python: str | None = None, env: Mapping[str, str] | None = None, timeout: float | None = None,
               abandoned: Callable[[], str | None] | None = None) -> Any:
    """``function(index, addresses)`` in a fresh Python process (see :func:`alexnet.child.run_child`), its output
    kept in :func:`worker_log` and its temporary files in its scratch folder (:data:`WORKER_PREFIX`); a result that
    is a dict gains ``log``, where that log is (``host:path``), and a
    failure raises :class:`WorkerError`, which says it too. A worker
    still running after ``timeout`` seconds, or once ``abandoned()`` gives a reason, is stopped, and fails saying
    so."""
    addresses = [str(a) for a in addresses]
    log = worker_log(index)
    where = f"{socket.gethostname()}:{log}"
    try:
        result = run_child(function, index, addresses, what=f"worker {index}", python=python, env=env, log=log,
                           prefix=f"{WORKER_PREFIX}{index}-", family=WORKER_PREFIX, timeout=timeout,
                           abandoned=abandoned)
    except ChildError as error:
        raise WorkerError(index, len(addresses), error.error, error.log_tail, error.exit_code, where,
                          error.known, in_run=error.in_run) from None
    return {**result, "log": where} if isinstance(result, dict) else result
