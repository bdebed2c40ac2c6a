"""One worker of a multi-worker run: fetch its partition, set TF_CONFIG, train; and its result as a flat row.

:func:`train_worker` is what each barrier task runs, in a fresh Python process (see
:func:`alexnet.child.run_child`), whether the task was launched from Python (:mod:`alexnet.launch.spark`) or
from R (``sparklyr::spark_apply(barrier = TRUE)``, through :func:`barrier_row`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import as_int
from ..child import ChildError, run_child
from ..data.fetch import DEFAULT_DOWNLOADS
from ..train.cluster import DEFAULT_BASE_PORT, tf_config
from ..train.settings import TrainSettings

logger = logging.getLogger(__name__)

#: Columns of :func:`worker_summary`, in order, with their Python types.
SUMMARY_COLUMNS: dict[str, type] = {
    "worker": int,
    "workers": int,
    "address": str,
    "tf_address": str,
    "chief": bool,
    "categories": str,
    "train_images": int,
    "val_images": int,
    "steps": int,
    "global_batch_size": int,
    "epochs": int,
    "loss": float,
    "accuracy": float,
    "val_accuracy": float,
    "images_per_second": float,
    "fetch_seconds": float,
    "train_seconds": float,
    "weights_sha256": str,
    "model_path": str,
    "history": str,
}
#: Arguments a worker sets itself, which callers must not give, and what to say when they do.
RESERVED = {name: "each worker trains on its own partition with strategy = 'multi_worker'. Leave it out."
            for name in ("data", "strategy")}
#: Worker logs kept on each host.
KEPT_LOGS = 50
#: Keras verbosity of a worker whose output goes to a log file: one line per epoch.
WORKER_VERBOSE = 2
_MARK = "<<alexnet-worker-error>>"
#: Characters of the end of a worker's log carried in its task failure.
MARKED_CHARACTERS = 1500


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def train_worker(
    index: int,
    addresses: Sequence[str],
    board: str | os.PathLike | None = None,
    *,
    base_port: int = DEFAULT_BASE_PORT,
    cache_dir: str | os.PathLike | None = None,
    fetch_workers: int = DEFAULT_DOWNLOADS,
    settings: TrainSettings | Mapping[str, Any] | None = None,
    callbacks: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """One worker's part of a multi-worker run: fetch its partition, set TF_CONFIG, train.

    Worker ``index`` of ``len(addresses)`` (the barrier addresses, in partition order) fetches partition
    ``index`` of ``len(addresses)`` from ``board`` (into ``cache_dir``, ``fetch_workers`` downloads at
    once), sets ``TF_CONFIG`` from the addresses (see :func:`alexnet.train.cluster.tf_config`) and calls
    :func:`alexnet.train.api.train` with ``strategy = "multi_worker"`` and ``settings`` (checked on the driver; a
    dict is what :meth:`~alexnet.train.settings.TrainSettings.to_dict` gave; ``None``: the defaults). It must run in a
    process where TensorFlow has not started yet. Every worker of the job calls it at about the same
    time (each blocks until all have joined).

    Returns a dict: ``worker``, ``workers``, ``address`` (the barrier address), ``tf_address`` (where
    this worker's TensorFlow server listens), ``chief``, ``categories`` (the partition's wnids),
    ``train_images``, ``val_images``, ``downloaded_bytes``, ``fetch_seconds`` and ``history`` (what
    ``alexnet_train()`` returns). :func:`worker_summary` makes a flat row of it.
    """
    addresses = [addresses] if isinstance(addresses, str) else [str(a) for a in addresses]
    index = as_int(index, "index")
    config = tf_config(addresses, index, base_port)
    os.environ["TF_CONFIG"] = json.dumps(config)
    logger.info("Worker %d of %d: TF_CONFIG %s", index, len(addresses), os.environ["TF_CONFIG"])

    from ..data.fetch import imagenet_partition
    from ..train.api import train
    from ..train.settings import check_settings

    data = imagenet_partition(index, len(addresses), board, cache_dir=cache_dir, workers=fetch_workers)
    if settings is None:
        settings = check_settings({"verbose": WORKER_VERBOSE})
    elif not isinstance(settings, TrainSettings):
        settings = TrainSettings.from_dict(settings)
    history = train(settings, data, "multi_worker", callbacks)
    return {
        "worker": index,
        "workers": len(addresses),
        "address": addresses[index],
        "tf_address": config["cluster"]["worker"][index],
        "chief": index == 0,
        "categories": list(data["categories"]),
        "train_images": len(data["image"]),
        "val_images": len(data["val_image"]),
        "downloaded_bytes": int(data.get("downloaded_bytes", 0)),
        "fetch_seconds": float(data.get("seconds", 0.0)),
        "history": history,
    }


def worker_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """A flat row of scalars (the columns of :data:`SUMMARY_COLUMNS`) from a :func:`train_worker` result.

    Final-epoch ``loss``, ``accuracy`` and ``val_accuracy`` (NaN without validation), ``categories``
    joined with commas, and the whole history as JSON in ``history``.
    """
    history = row["history"]
    metrics = history.get("metrics", {})
    params = history.get("params", {})

    def last(name: str) -> float:
        values = metrics.get(name) or []
        return float(values[-1]) if values else float("nan")

    summary = {
        "worker": int(row["worker"]),
        "workers": int(row["workers"]),
        "address": str(row["address"]),
        "tf_address": str(row["tf_address"]),
        "chief": bool(row["chief"]),
        "categories": ",".join(row["categories"]),
        "train_images": int(row["train_images"]),
        "val_images": int(row["val_images"]),
        "steps": int(params.get("steps", 0)),
        "global_batch_size": int(params.get("global_batch_size", 0)),
        "epochs": len(metrics.get("loss") or []),
        "loss": last("loss"),
        "accuracy": last("accuracy"),
        "val_accuracy": last("val_accuracy"),
        "images_per_second": float(history.get("images_per_second", 0.0)),
        "fetch_seconds": float(row.get("fetch_seconds", 0.0)),
        "train_seconds": float(params.get("seconds", 0.0)),
        "weights_sha256": str(history.get("weights_sha256", "")),
        "model_path": str(history.get("model_path") or ""),
        "history": json.dumps(history),
    }
    return {name: summary[name] for name in SUMMARY_COLUMNS}  # in the columns' order, as spark_apply() wants


class WorkerError(ChildError):
    """A worker of a distributed run failed; ``worker`` and ``workers`` say which, the rest as :class:`ChildError`."""

    def __init__(self, worker: int, workers: int, error: str, log_tail: Sequence[str], exit_code: int | None = None,
                 log: str | None = None):
        self.worker, self.workers = worker, workers
        super().__init__(f"Worker {worker} of {workers}", error, log_tail, exit_code, log,
                         "The other workers were stopped. Fix the cause and run again (with `checkpoint_dir`, "
                         "training resumes from the last checkpoint).")

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
                   "log_tail": tail, "exit_code": self.exit_code, "log": self.log}
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
                       details.get("log"))
        except (ValueError, KeyError, TypeError):
            return None


def worker_log(index: int) -> str:
    """Where worker ``index`` on this host keeps its log: ``$ALEXNET_LOG_DIR`` or ``<temporary folder>/alexnet-logs``,
    a new file per run; the oldest are deleted beyond :data:`KEPT_LOGS`."""
    folder = os.environ.get("ALEXNET_LOG_DIR") or os.path.join(tempfile.gettempdir(), "alexnet-logs")
    os.makedirs(folder, exist_ok=True)
    logs = sorted(os.scandir(folder), key=lambda entry: entry.stat().st_mtime)
    for entry in logs[: max(0, len(logs) - KEPT_LOGS + 1)]:
        with contextlib.suppress(OSError):
            os.remove(entry.path)
    return os.path.join(folder, f"worker{index}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")


def run_worker(function: Any, index: int, addresses: Sequence[str], *, python: str | None = None,
               env: Mapping[str, str] | None = None, timeout: float | None = None) -> Any:
    """``function(index, addresses)`` in a fresh Python process (see :func:`alexnet.child.run_child`), its output
    kept in :func:`worker_log`; a failure raises :class:`WorkerError`, which says where that log is. A worker
    still running after ``timeout`` seconds is stopped, and fails saying so."""
    addresses = [str(a) for a in addresses]
    log = worker_log(index)
    try:
        return run_child(function, index, addresses, what=f"worker {index}", python=python, env=env, log=log,
                         prefix=f"alexnet-worker{index}-", timeout=timeout)
    except ChildError as error:
        raise WorkerError(index, len(addresses), error.error, error.log_tail, error.exit_code,
                          f"{socket.gethostname()}:{log}") from None


def barrier_row(addresses: Sequence[str], partition: int, task: Mapping[str, Any]) -> dict[str, Any]:
    """What an R barrier task (``spark_apply(barrier = TRUE)``) does: :func:`train_worker` for ``partition`` in a
    fresh Python process, as a flat row (:func:`worker_summary`).

    ``task`` is the :class:`~alexnet.launch.task.TrainTask` the driver planned, as the plain list R carried; its
    ``timeout`` bounds the worker's run here (sparklyr has no way to cancel a stage). When the worker fails, the row is
    ``{"failure": <message>}`` (see :meth:`WorkerError.task_failure`), for the task to fail with.
    """
    from .task import TrainTask

    job = TrainTask.from_dict(task)
    try:
        row = run_worker(job.worker_function(), as_int(partition, "barrier$partition"), [str(a) for a in addresses],
                         python=job.python, env=job.env, timeout=job.timeout)
    except WorkerError as error:
        # returned, for the R task to stop() with: a Python error reaching R has its message shortened
        return {"failure": error.task_failure()}
    return worker_summary(row)
