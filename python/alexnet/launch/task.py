"""What each barrier task is handed, typed, built once on the driver and read by both launchers.

:func:`alexnet.launch.job.plan_job` builds a :class:`TrainTask` (training) and
:func:`alexnet.launch.evaluate.plan_evaluation` an :class:`EvaluateTask`. The pyspark launcher
(:mod:`alexnet.launch.spark`, :mod:`alexnet.launch.evaluate`) reads it directly; the R launcher
(``sparklyr::spark_apply()``) carries it to the workers as a plain list (:meth:`TrainTask.to_dict`), and each
task makes it again with :meth:`TrainTask.from_dict` before running its worker
(:func:`alexnet.launch.worker.barrier_row`, :func:`alexnet.launch.evaluate.evaluate_row`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..checks import as_int, as_seconds
from ..train.settings import TrainSettings, defaults


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` as a dict: R hands an empty named list over as an empty list, and ``NULL`` as ``None``."""
    return dict(value or {})


@dataclass(frozen=True)
class TrainTask:
    """One worker's part of a training run: the ``board`` (resolved), ``base_port``, ``cache_dir``,
    ``fetch_workers``, the worker's ``python`` and extra ``env``, the checked training ``settings``, and
    ``timeout`` (seconds a worker may run; ``None``: no bound)."""

    board: str
    base_port: int
    cache_dir: str | None = None
    fetch_workers: int = 8
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    settings: TrainSettings = field(default_factory=lambda: TrainSettings.from_dict(defaults()))
    timeout: float | None = None

    def with_progress(self, address: str) -> TrainTask:
        """This task with the chief's progress sent to ``address`` (the driver's monitor)."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, progress_file=address))

    def worker_function(self) -> Callable[[int, list[str]], Any]:
        """``function(index, addresses)``: :func:`alexnet.launch.worker.train_worker` with this task's arguments."""
        from .worker import train_worker

        return partial(train_worker, board=self.board, base_port=self.base_port, cache_dir=self.cache_dir,
                       fetch_workers=self.fetch_workers, settings=self.settings)

    def to_dict(self) -> dict[str, Any]:
        """The task as plain values, for a launcher that carries it through R."""
        return {**dataclasses.asdict(self), "settings": self.settings.to_dict()}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> TrainTask:
        """The task :meth:`to_dict` gave (after a trip through R)."""
        return cls(board=str(value["board"]), base_port=as_int(value["base_port"], "base_port"),
                   cache_dir=None if value.get("cache_dir") is None else str(value["cache_dir"]),
                   fetch_workers=as_int(value["fetch_workers"], "fetch_workers"),
                   python=None if value.get("python") is None else str(value["python"]),
                   env={str(k): str(v) for k, v in _mapping(value.get("env")).items()},
                   settings=TrainSettings.from_dict(_mapping(value.get("settings"))),
                   timeout=as_seconds(value.get("timeout"), "timeout"))


@dataclass(frozen=True)
class EvaluateTask:
    """One worker's part of a Spark evaluation: the ``model`` (a location, or a pin reference), the ``board``
    (resolved), ``crops``, ``batch_size``, ``cache_dir``, ``fetch_workers``, the worker's ``python`` and extra
    ``env``, and how many ``workers`` share the validation images."""

    model: Any
    board: str
    crops: int
    batch_size: int
    workers: int
    cache_dir: str | None = None
    fetch_workers: int = 8
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def worker_function(self) -> Callable[[int, list[str]], Any]:
        """``function(index, addresses)``: :func:`alexnet.launch.evaluate.evaluate_worker` with this task."""
        from .evaluate import evaluate_worker

        return partial(evaluate_worker, model=self.model, board=self.board, crops=self.crops,
                       batch_size=self.batch_size, cache_dir=self.cache_dir, fetch_workers=self.fetch_workers)

    def to_dict(self) -> dict[str, Any]:
        """The task as plain values, for a launcher that carries it through R."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> EvaluateTask:
        """The task :meth:`to_dict` gave (after a trip through R)."""
        model = value["model"]
        return cls(model=dict(model) if isinstance(model, Mapping) else model, board=str(value["board"]),
                   crops=as_int(value["crops"], "crops"), batch_size=as_int(value["batch_size"], "batch_size"),
                   workers=as_int(value["workers"], "workers"),
                   cache_dir=None if value.get("cache_dir") is None else str(value["cache_dir"]),
                   fetch_workers=as_int(value["fetch_workers"], "fetch_workers"),
                   python=None if value.get("python") is None else str(value["python"]),
                   env={str(k): str(v) for k, v in _mapping(value.get("env")).items()})
