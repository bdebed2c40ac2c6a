"""The benchmark's vocabulary: its stages, its targets, and how a measurement is named and read."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..declare import declaration

logger = logging.getLogger(__name__)

#: Every stage, in the order they run.
STAGES = ("decode", "naive", "naive_auto", "io", "synthetic", "train", "fetch", "time_to_accuracy", "scaling")
#: Stages run when none are named (``fetch`` needs a board, ``time_to_accuracy`` and ``scaling`` take minutes: they
#: are asked for explicitly).
DEFAULT_STAGES = ("decode", "naive", "naive_auto", "io", "synthetic", "train")
#: Stages that measure the benchmark's images (``images`` of ``data``, or a synthetic ImageNet).
IMAGE_STAGES = ("decode", "naive", "naive_auto", "io", "synthetic", "train")
#: Stages measured on 1, 2 and all cores.
PIPELINE_STAGES = ("decode", "naive", "naive_auto", "io")
# Order in which a pinned child runs them: `io` first, so that its memory is measured from a fresh process
# (memory freed by an earlier stage is not always returned to the system).
CHILD_ORDER = ("io", "naive", "naive_auto", "decode")

#: The targets: name -> (what is compared, minimum ratio).
TARGETS: dict[str, tuple[str, float]] = {
    "io_vs_decode_per_core": ("io on 1 core / decode on 1 core", 1.0),
    "io_2_cores_vs_1": ("io on 2 cores / io on 1 core", 1.8),
    "io_vs_naive_2_cores": ("io on 2 cores / naive on 2 cores", 2.0),
    "fetch_parallel_vs_serial": ("parallel fetch / one download at a time (bytes/s)", 5.0),
}
#: The ``time_to_accuracy`` targets, on the medians over its seeds: name -> (what is compared, bound, "at most" or
#: "at least").
ACCURACY_TARGETS: dict[str, tuple[str, float, str]] = {
    "time_ratio": ("defaults / paper recipe: median wall time to the target accuracy", 0.4, "at most"),
    "accuracy_difference": ("defaults - paper recipe: median validation accuracy after the same epochs", 0.0,
                            "at least"),
    "final_vs_best": ("defaults: median of final - best validation accuracy", -0.02, "at least"),
}
#: Ratios reported without a target: name -> what is compared.
COMPARISONS: dict[str, str] = {
    "io_vs_naive_auto_2_cores": "io on 2 cores / naive_auto on 2 cores",
}

#: A pipeline measurement that got less than this share of its CPUs was slowed down by other work.
CONTENDED = 0.9
#: A measurement shorter than this many seconds is not judged: a pause of its process (collecting garbage, waiting
#: for the disk) takes a share of so short a time that other work need not have taken.
JUDGED_SECONDS = 1.0


def contended(record: Mapping[str, Any]) -> bool:
    """Did this measurement get less than :data:`CONTENDED` of its CPUs, so that other work slowed it down?

    ``naive`` on more than one core is never counted: its sequential maps cannot keep more than about one
    core busy, so its low share of the CPUs is what it measures, not a sign of other work. Nor is a measurement
    shorter than :data:`JUDGED_SECONDS`.
    """
    if record.get("cpu_use") is None or (record.get("stage") == "naive" and record.get("cores", 1) > 1):
        return False
    if float(record.get("seconds", JUDGED_SECONDS)) < JUDGED_SECONDS:
        return False
    return bool(record["cpu_use"] < CONTENDED)


def rate(stages: Iterable[Mapping[str, Any]], stage: str, cores: int | None = None) -> float | None:
    """Images per second of ``stage`` (on ``cores`` cores when given) among measured ``stages``; None if absent."""
    for s in stages:
        if s.get("stage") == stage and (cores is None or s.get("cores") == cores) and "images_per_second" in s:
            return float(s["images_per_second"])
    return None


def label(stage: Mapping[str, Any]) -> str:
    """A measurement's short name in tables and charts: ``io 2c``, ``fetch x8``, ``train``."""
    if stage.get("stage") == "fetch":
        return f"fetch x{stage['workers']}"
    if stage.get("stage") in PIPELINE_STAGES:
        return f"{stage['stage']} {stage['cores']}c"
    return str(stage.get("stage"))


def warn_unused(values: Any, stage: str) -> None:
    """Warn about the settings of ``values`` (stage ``stage``'s declaration) given other than their defaults, when
    the benchmark does not run the stage."""
    given = declaration.changed(values)
    if given:
        logger.warning("%s: the %s stage's, which `stages` does not run: not used.",
                       ", ".join(f"`{name}`" for name in given), stage)
