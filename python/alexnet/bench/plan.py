"""The benchmark's settings, declared once, and its plan: the settings checked, for every stage to read.

The declaration is in groups: :class:`BenchSettings`, what every stage shares, then one group per stage that has
settings of its own (:data:`STAGE_SETTINGS`: ``fetch``'s :class:`FetchSettings`, ``time_to_accuracy``'s
:class:`alexnet.bench.accuracy.AccuracySettings`), each a frozen dataclass whose fields are made with
:func:`alexnet.declare.declaration.setting` as the training settings' are. Everything else derives from the groups:
the signature and help of :func:`alexnet.alexnet_benchmark`, the options of ``alexnet bench``, the arguments of R's
``alexnet_benchmark()`` (``R/bench-settings.R``), and :func:`check_plan`, the one check, which gives the
:class:`BenchPlan` every stage reads. A stage's settings are added by declaring its group (with a ``check(common)``
method when they are checked against the shared ones) and naming it in :data:`STAGE_SETTINGS`. This module does not
import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..checks import MIN_IMAGE_SIZE
from ..data.options import FetchOptions, PartitionOptions, UploadOptions, check_stored_side
from ..declare import declaration
from ..declare.declaration import like, setting
from ..declare.kinds import Spec, UsedWith
from ..errors import AlexnetError
from ..machine import usable_cpus
from ..storage.outputs import writable_location
from ..train.settings import specs as training_specs
from .accuracy import AccuracySettings
from .scaling import ScalingSettings
from .stages import DEFAULT_STAGES, STAGES

logger = logging.getLogger(__name__)

#: Stages that build AlexNet on the benchmark's images (so their ``image_size`` must be one it takes).
MODEL_STAGES = ("synthetic", "train")
#: Stages that read the images re-encoded for ``resize`` (and crop ``image_size`` out of them).
STORED_STAGES = ("io", "train")
#: The ways the pipeline stages are isolated on their cores.
ISOLATIONS = ("process", "threads")

_UPLOAD = declaration.specs(UploadOptions)
_PARTITION = declaration.specs(PartitionOptions)
_FETCH = declaration.specs(FetchOptions)


def _pinning() -> bool:
    """Can this system pin a process to CPUs (what ``isolation = "process"`` needs)?"""
    return hasattr(os, "sched_setaffinity")


def available_cpus() -> list[int]:
    """The CPUs this process may use, by number."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(usable_cpus()))


@dataclass(frozen=True)
class BenchSettings:
    """The settings every stage shares (the first group of the benchmark's declaration)."""

    stages: tuple[str, ...] = setting(DEFAULT_STAGES, "words", "the stages to run, in this order, among "
                                      f"{', '.join(STAGES)} (fetch needs `board`; time_to_accuracy and scaling "
                                      "train for minutes)", choices=STAGES, metavar="STAGE")
    images: int = setting(2000, "count", "images used; each measurement also runs over at least this many",
                          minimum=1)
    batch_size: int = setting(32, "count", "images per batch", minimum=1)
    image_size: int = setting(224, "count", "pixels of the model's square input (at least "
                              f"{MIN_IMAGE_SIZE} when synthetic or train runs)", minimum=1)
    cores: int | None = setting(None, "count", "most cores the pipelines are measured on (unset: every CPU this "
                                "process may use); they run on 1, 2 and this many", minimum=1, optional=True)
    seconds: float = setting(5.0, "number", "least seconds each measurement runs, after its warm-up", minimum=0.0)
    parallel: int | None = setting(None, "count", "images the pipeline decodes at once (unset: one per CPU, as in "
                                   "training)", minimum=1, optional=True)
    cache: bool = setting(True, "flag", "keep the compressed bytes in memory after the first pass, as the decode "
                          "reference does")
    resize: int | None = like(_UPLOAD["resize"], help="the io and train stages read the images re-encoded to this "
                              f"short side, at least {MIN_IMAGE_SIZE} and `image_size`, as imagenet_upload(resize = ) "
                              "stores them (decode and naive still read the originals)")
    quality: int = like(_UPLOAD["quality"], help="JPEG quality of the images re-encoded for `resize`",
                        used_with=UsedWith("`resize`", "the stages read the images as they are, not re-encoded",
                                           lambda v: v["resize"] is not None))
    model_steps: int = setting(5, "count", "training steps synthetic and train time", minimum=1)
    dense_units: int = setting(4096, "count", "units of the model's two hidden dense layers", minimum=1)
    isolation: str | None = setting(None, "choice", "each core count measured in a child process pinned to that "
                                    "many CPUs (\"process\"), or in this process with tf.data's threads limited "
                                    "(\"threads\"); unset: process where CPUs can be pinned (Linux)",
                                    choices=ISOLATIONS, optional=True, none_word="auto")
    output_dir: str | None = setting(None, "location", "the folder (or gs:// or s3:// location) of "
                                     "alexnet-benchmark.json and alexnet-benchmark.png (unset: a new temporary "
                                     "folder); while the scaling "
                                     "stage runs, also of scaling-rows.jsonl, its rows as they are measured, which "
                                     "a run stopped before its end keeps (and `scaling_resume` takes again)",
                                     optional=True)
    seed: int = setting(0, "count", "random seed of the images' sample, the synthetic data and the models",
                        minimum=0)
    precision: str | None = like(training_specs()["precision"], help="what synthetic, train and the defaults recipe "
                                 "of time_to_accuracy compute in (unset: the one measured to train faster here, as "
                                 "alexnet_train() picks it)")

    def check(self, cpus: list[int]) -> BenchSettings:
        """These settings checked against each other and the ``cpus`` this process may use; ``cores`` and
        ``isolation`` left unset are filled in."""
        cores = len(cpus) if self.cores is None else self.cores
        if cores > len(cpus):
            raise AlexnetError(f"`cores` = {cores} but this process may use only {len(cpus)} CPU(s): use at most "
                               f"{len(cpus)}.")
        if self.image_size < MIN_IMAGE_SIZE and set(MODEL_STAGES) & set(self.stages):
            raise AlexnetError(f"`image_size` = {self.image_size} is too small for AlexNet: use at least "
                               f"{MIN_IMAGE_SIZE} (224 as in the paper), or leave out the synthetic and train stages.")
        if set(STORED_STAGES) & set(self.stages):
            check_stored_side(self.resize, self.image_size, "the io and train stages")
        isolation = self.isolation or ("process" if _pinning() else "threads")
        if isolation == "process" and not _pinning():
            raise AlexnetError("isolation = \"process\" pins CPUs with os.sched_setaffinity, which this system lacks: "
                               "use isolation = \"threads\".")
        output_dir = self.output_dir
        if output_dir is not None:  # proven writable before any work, and made when the results are written
            output_dir = writable_location(output_dir, "output_dir", keep=False)[0]
        return dataclasses.replace(self, cores=cores, isolation=isolation, output_dir=output_dir)


@dataclass(frozen=True)
class FetchSettings:
    """The ``fetch`` stage's own settings: which partition of which board it downloads, how many at once."""

    board: str | None = setting(None, "location", "the board a partition is downloaded from (the other stages take "
                                "their images from `data`, or draw them: on the command line, `alexnet bench --board` "
                                "gives them a partition of the board too, `--partition` of `--total`)", optional=True,
                                option=None)
    fetch_partition: int = like(_PARTITION["partition"], help="the 0-based partition downloaded", option=None)
    fetch_total: int = like(_PARTITION["total"], help="the number of partitions the board's categories are split "
                            "into", option=None)
    # measured against one download at a time: 1 would measure the same thing twice
    fetch_workers: int = like(_FETCH["workers"], help="parallel downloads, measured against one at a time",
                              minimum=2)

    def check(self, common: BenchSettings) -> None:
        """The partition asked for, and the board the stage needs, when it runs: before any stage."""
        if not self.fetch_partition < self.fetch_total:
            raise AlexnetError(f"`fetch_partition` must be in 0..{self.fetch_total - 1} (0-based, with `fetch_total` = "
                               f"{self.fetch_total}), not {self.fetch_partition}.")
        if "fetch" in common.stages and not self.board:
            raise AlexnetError("The `fetch` stage needs `board`: the board to fetch a partition from.")
        if "fetch" in common.stages:  # before any stage runs: a partition of each category at most
            from ..data.fetch import imagenet_categories

            categories = len(imagenet_categories(self.board))
            if self.fetch_total > categories:
                raise AlexnetError(f"`fetch_total` ({self.fetch_total}) must not exceed the {categories} categories of "
                                   f"board {self.board}: some partitions would be empty; use `fetch_total` <= "
                                   f"{categories}.")


#: The groups of settings of the stages that have their own, by stage, in the declaration's order.
STAGE_SETTINGS: dict[str, type] = {"fetch": FetchSettings, "time_to_accuracy": AccuracySettings,
                                   "scaling": ScalingSettings}
#: Every group of the declaration, by stage (``""``: the settings every stage shares).
GROUPS: dict[str, type] = {"": BenchSettings, **STAGE_SETTINGS}


def specs() -> dict[str, Spec]:
    """Every setting of the benchmark, by name, group after group in the declaration's order."""
    return {name: spec for group in GROUPS.values() for name, spec in declaration.specs(group).items()}


def stage_of(name: str) -> str:
    """The stage setting ``name`` belongs to (``""``: every stage's)."""
    return next(stage for stage, group in GROUPS.items() if name in declaration.specs(group))


@dataclass(frozen=True)
class BenchPlan:
    """The benchmark's settings, checked: ``common`` (every stage's), ``stage`` (each stage's own group, by stage,
    whether it runs or not) and ``cpus`` (those this process may use, in order)."""

    common: BenchSettings
    stage: dict[str, Any]
    cpus: list[int]

    @property
    def fetch(self) -> FetchSettings:
        """The ``fetch`` stage's settings."""
        return self.stage["fetch"]

    @property
    def scaling(self) -> ScalingSettings:
        """The ``scaling`` stage's settings."""
        return self.stage["scaling"]

    @property
    def accuracy(self) -> AccuracySettings:
        """The ``time_to_accuracy`` stage's settings."""
        return self.stage["time_to_accuracy"]

    def core_counts(self) -> list[int]:
        """The core counts the pipelines are measured on: 1, 2 and all."""
        cores = int(self.common.cores or 1)
        return sorted({1, min(2, cores), cores})

    def record(self) -> dict[str, Any]:
        """The settings recorded in the result: every shared one (``quality`` only with ``resize``), the core counts,
        and each stage's group by its stage's name (``None`` when the stage does not run)."""
        common = self.common
        values = {**declaration.to_dict(common), "core_counts": self.core_counts()}
        values.update(dict.fromkeys(declaration.unused(BenchSettings, values)))
        for stage, group in self.stage.items():
            runs = stage in common.stages
            values[stage] = None if not runs else group.record(common.precision, common.seed) \
                if hasattr(group, "record") else declaration.to_dict(group)
        return values


def check_names(names: Any, where: str = "alexnet_benchmark()") -> None:
    """Raise when ``names`` holds one that is not a setting of the benchmark (with the closest when one is close)."""
    declaration.check_names(names, specs(), where, "The benchmark's settings")


def check_plan(arguments: Mapping[str, Any], where: str = "alexnet_benchmark()") -> BenchPlan:
    """``arguments`` (settings by name; the others take their defaults) checked and converted, before any work: a
    :class:`BenchPlan`, or an :class:`AlexnetError` naming the setting to change."""
    check_names(arguments, where)
    cpus = available_cpus()
    common = BenchSettings(**declaration.convert(BenchSettings, arguments)).check(cpus)
    declaration.warn_unused(common, logger)
    stage = {name: group(**declaration.convert(group, arguments)) for name, group in STAGE_SETTINGS.items()}
    for group in stage.values():
        if hasattr(group, "check"):
            group.check(common)
    return BenchPlan(common, stage, cpus)
