"""The task every barrier task of a Spark job is handed: one type for each kind of job, built once on the driver.

A :class:`Task` says which kind of work its workers do (``kind``, an entry of :data:`alexnet.launch.work.WORK`:
``"train"`` or ``"evaluate"``), where they read (``board``, ``cache_dir``), how their processes start
(``python``, ``env``, ``timeout``) and where they report progress, plus the work's own part: the checked training
``settings`` and, for an evaluation or a training that ends with one, an :class:`Evaluation`. The pyspark
launcher hands it to the workers as it is; the R launcher (``sparklyr::spark_apply()``) carries it as a plain list
(:meth:`Task.to_dict`), made a :class:`Task` again in each barrier task (:meth:`Task.from_dict`).

The checks of the fields every kind shares are here too: :func:`check_slots` and :func:`launch_fields`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..checks import as_int, as_seconds
from ..data.fetch import DEFAULT_DOWNLOADS
from ..errors import AlexnetError
from ..train.cluster import DEFAULT_BASE_PORT, check_base_port
from ..train.settings import TrainSettings

#: The kinds of job, as :data:`alexnet.launch.work.WORK` names them.
KINDS = ("train", "evaluate")
#: The arguments every kind of job takes (see :func:`launch_fields` and :func:`alexnet.launch.job.plan_job`), and
#: those of the launchers around it.
JOB_ARGUMENTS = ("base_port", "cache_dir", "fetch_workers", "python", "env", "timeout", "retries", "progress",
                 "probe")


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` as a dict: R hands an empty named list over as an empty list, and ``NULL`` as ``None``."""
    return dict(value or {})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Evaluation:
    """What each worker scores: its share of the board's validation images with ``model`` (a location or a model
    pin's dict; ``None``: the model the workers of a training have just trained), ``crops`` (1 or 10) at a time
    ``batch_size`` images."""

    model: Any = None
    crops: int = 1
    batch_size: int = 64

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Evaluation:
        """The evaluation :func:`dataclasses.asdict` gave (after a trip through R)."""
        model = value.get("model")
        return cls(model=dict(model) if isinstance(model, Mapping) else model,
                   crops=as_int(value.get("crops", 1), "crops"), batch_size=as_int(value.get("batch_size", 64),
                                                                                    "batch_size"))


@dataclass(frozen=True)
class Task:
    """One worker's part of a barrier job of ``workers`` tasks: the ``kind`` of work, the ``board`` (resolved),
    ``base_port`` (worker ``k`` of a training listens on ``base_port + k``), ``cache_dir``, ``fetch_workers``, the
    worker's ``python`` and extra ``env``, ``timeout`` (seconds a worker may run; ``None``: no bound),
    ``progress`` (where workers report, the driver's monitor; ``None``: nowhere), the training ``settings`` and the
    ``evaluation``."""

    kind: str
    board: str
    workers: int
    base_port: int = DEFAULT_BASE_PORT
    cache_dir: str | None = None
    fetch_workers: int = DEFAULT_DOWNLOADS
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    progress: str | None = None
    settings: TrainSettings | None = None
    evaluation: Evaluation | None = None

    def with_progress(self, address: str) -> Task:
        """This task with its workers' progress sent to ``address`` (the driver's monitor): a training's chief
        reports its steps, every worker of an evaluation its images."""
        settings = None if self.settings is None else dataclasses.replace(self.settings, progress_file=address)
        return dataclasses.replace(self, progress=address, settings=settings)

    def to_dict(self) -> dict[str, Any]:
        """The task as plain values, for a launcher that carries it through R."""
        return {**dataclasses.asdict(self), "settings": None if self.settings is None else self.settings.to_dict()}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Task:
        """The task :meth:`to_dict` gave (after a trip through R, whose numbers are doubles)."""
        settings, evaluation = value.get("settings"), value.get("evaluation")
        return cls(kind=str(value["kind"]), board=str(value["board"]), workers=as_int(value["workers"], "workers"),
                   base_port=as_int(value.get("base_port", DEFAULT_BASE_PORT), "base_port"),
                   cache_dir=_text(value.get("cache_dir")),
                   fetch_workers=as_int(value.get("fetch_workers", DEFAULT_DOWNLOADS), "fetch_workers"),
                   python=_text(value.get("python")),
                   env={str(k): str(v) for k, v in _mapping(value.get("env")).items()},
                   timeout=as_seconds(value.get("timeout"), "timeout"), progress=_text(value.get("progress")),
                   settings=None if settings is None else TrainSettings.from_dict(_mapping(settings)),
                   evaluation=None if evaluation is None else Evaluation.from_dict(_mapping(evaluation)))


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


def launch_fields(workers: int, *, base_port: Any = DEFAULT_BASE_PORT, cache_dir: Any = None,
                  fetch_workers: Any = DEFAULT_DOWNLOADS, python: str | None = None,
                  env: Mapping[str, Any] | None = None, timeout: Any = None) -> dict[str, Any]:
    """The fields of a :class:`Task` that every kind of job has, checked: ``timeout`` positive or ``None``,
    ``base_port`` leaving room for every worker, ``fetch_workers`` at least 1; ``cache_dir`` made absolute (a task
    may run in another folder)."""
    return {"timeout": as_seconds(timeout, "timeout"), "base_port": check_base_port(base_port, workers),
            "cache_dir": None if cache_dir is None else os.path.abspath(os.fspath(cache_dir)),
            "fetch_workers": as_int(fetch_workers, "fetch_workers", 1), "python": python,
            "env": {str(k): str(v) for k, v in (env or {}).items()}}
