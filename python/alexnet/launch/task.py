"""The task every barrier task of a Spark job is handed: one type for each kind of job, built once on the driver.

A :class:`Task` says which kind of work its workers do (``kind``, an entry of :data:`alexnet.launch.work.WORK`:
``"train"`` or ``"evaluate"``), where they read (``board``), how they are launched (``options``, the checked
:class:`~alexnet.launch.options.LaunchOptions`: their Python and environment, the bound on a launch, where they
fetch to, ...) and where they report progress, plus the work's own part: the checked training ``settings`` and, for
an evaluation or a training that ends with one, an :class:`Evaluation`. The pyspark launcher hands it to the
workers as it is; the R launcher (``sparklyr::spark_apply()``) carries it as a plain list (:meth:`Task.to_dict`),
made a :class:`Task` again in each barrier task (:meth:`Task.from_dict`).

:func:`check_slots`, the check of the workers against Spark's task slots, is here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..checks import as_int
from ..declare import declaration
from ..errors import AlexnetError
from ..model.options import EvaluationOptions
from ..train.settings import TrainSettings
from .options import LaunchOptions

#: The kinds of job, as :data:`alexnet.launch.work.WORK` names them.
KINDS = ("train", "evaluate")


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` as a dict: R hands an empty named list over as an empty list, and ``NULL`` as ``None``."""
    return dict(value or {})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Evaluation:
    """What each worker scores: its share of the board's validation images with ``model`` (a location or a model
    pin's dict; ``None``: the model the workers of a training have just trained), scored as ``options`` say (the
    checked :class:`~alexnet.model.options.EvaluationOptions`)."""

    model: Any = None
    options: EvaluationOptions = field(default_factory=lambda: declaration.at_defaults(EvaluationOptions))

    def to_dict(self) -> dict[str, Any]:
        """The evaluation as plain values."""
        return {"model": self.model, "options": declaration.to_dict(self.options)}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Evaluation:
        """The evaluation :meth:`to_dict` gave (after a trip through R)."""
        model = value.get("model")
        return cls(model=dict(model) if isinstance(model, Mapping) else model,
                   options=declaration.restore(EvaluationOptions, _mapping(value.get("options"))))


@dataclass(frozen=True)
class Task:
    """One worker's part of a barrier job of ``workers`` tasks: the ``kind`` of work, the ``board`` (resolved), the
    launch ``options`` (worker ``k`` of a training listens on ``options.base_port + k``), ``progress`` (where workers
    report, the driver's monitor; ``None``: nowhere), the training ``settings`` and the ``evaluation``; and the version
    of the board's ``categories`` table the driver planned the job with (``None``: the board does not say)."""

    kind: str
    board: str
    workers: int
    options: LaunchOptions = field(default_factory=lambda: declaration.at_defaults(LaunchOptions))
    progress: str | None = None
    settings: TrainSettings | None = None
    evaluation: Evaluation | None = None
    categories_version: str | None = None

    def with_progress(self, address: str) -> Task:
        """This task with its workers' progress sent to ``address`` (the driver's monitor): a training's chief
        reports its steps, every worker of an evaluation its images."""
        settings = None if self.settings is None else dataclasses.replace(self.settings, progress_file=address)
        return dataclasses.replace(self, progress=address, settings=settings)

    def to_dict(self) -> dict[str, Any]:
        """The task as plain values, for a launcher that carries it through R."""
        return {"kind": self.kind, "board": self.board, "workers": self.workers,
                "options": declaration.to_dict(self.options), "progress": self.progress,
                "settings": None if self.settings is None else self.settings.to_dict(),
                "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
                "categories_version": self.categories_version}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Task:
        """The task :meth:`to_dict` gave (after a trip through R, whose numbers are doubles)."""
        settings, evaluation = value.get("settings"), value.get("evaluation")
        return cls(kind=str(value["kind"]), board=str(value["board"]), workers=as_int(value["workers"], "workers"),
                   options=declaration.restore(LaunchOptions, _mapping(value.get("options"))),
                   progress=_text(value.get("progress")),
                   settings=None if settings is None else TrainSettings.from_dict(_mapping(settings)),
                   evaluation=None if evaluation is None else Evaluation.from_dict(_mapping(evaluation)),
                   categories_version=_text(value.get("categories_version")))


def check_slots(workers: object, slots: int | None) -> int:
    """``workers`` as an int that fits in ``slots`` barrier task slots (``None``: unknown, not checked).

    A barrier stage starts all its tasks at once: with fewer slots it would wait for ever.
    """
    workers = as_int(workers, "workers", 1)
    if slots is not None and workers > int(slots):
        raise AlexnetError(
            f"{workers} workers need {workers} task slots at once (one barrier task each), but this Spark "
            f"application has {int(slots)}: use `workers` <= {int(slots)}, or give Spark more executors or "
            f"cores (e.g. master = 'local[{workers}]' on one machine)."
        )
    return workers
