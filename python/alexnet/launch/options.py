"""The options of a Spark job, declared once: how its workers are launched, and how a training job ends.

:class:`LaunchOptions` are every job's (where the workers listen and fetch, their Python and environment, the bound
on a launch, the relaunches, the progress shown, the executors' probe); :class:`TrainingJobOptions` a training's own
(its evaluation at the end). Both are declarations like the training settings' (frozen dataclasses of
:func:`alexnet.declare.declaration.setting` fields): :func:`alexnet.alexnet_spark_train` and
:func:`alexnet.alexnet_spark_evaluate` take them by name with these defaults, ``alexnet spark-train`` and ``alexnet
spark-evaluate`` have an option for each, R's ``alexnet_spark_train()`` and ``alexnet_spark_evaluate()`` a formal
(``R/launch-options.R``, generated from this module), and :func:`check_launch` is their one check, made by the
driver's plan (:func:`alexnet.launch.job.plan_job`); the task every worker is handed carries the result. This module
does not import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..data.options import FetchOptions
from ..declare import declaration
from ..declare.declaration import like, setting
from ..declare.kinds import Spec, UsedWith
from ..model.options import specs as evaluation_specs
from ..train.cluster import DEFAULT_BASE_PORT, EPHEMERAL_PORTS, check_base_port

#: The options of a fetch (:class:`~alexnet.data.options.FetchOptions`), which a worker's own follow.
FETCH = declaration.specs(FetchOptions)


@dataclass(frozen=True)
class LaunchOptions:
    """How every worker of a job is launched (the declaration: see the module documentation)."""

    base_port: int = setting(DEFAULT_BASE_PORT, "count", "worker k of a training listens on its host at this port "
                             "+ k (an evaluation's workers listen on none; tasks on one host must not collide; "
                             f"below the hosts' ephemeral ports, {EPHEMERAL_PORTS[0]} on Linux, which outgoing "
                             "connections take)", minimum=1, maximum=65535, metavar="PORT")
    cache_dir: str | None = like(FETCH["cache_dir"], help="where each worker extracts its share of the board "
                                 "(unset: under the user cache directory)")
    fetch_workers: int = like(FETCH["workers"], help="parallel downloads of each worker")
    timeout: float | None = setting(None, "seconds", "seconds a launch may take before the whole job is cancelled, "
                                    "and not launched again (unset: no bound)", optional=True)
    python: str | None = setting(None, "string", "the Python each worker runs (unset: the executor's; from R, the "
                                 "R session's alexnet_python())", optional=True, metavar="PATH")
    env: Mapping[str, str] | None = setting(None, "mapping", "extra environment variables of the workers' processes",
                                         optional=True, option=None)
    retries: int = setting(0, "count", "launches of the job again after a failure (a training resumes from the last "
                           "checkpoint of `checkpoint_dir`, an evaluation scores every image again); after a lost "
                           "Spark worker, a relaunch first waits for the task slots it took (saying so), as long as "
                           "Spark waits for a barrier stage's (10 minutes by default)", minimum=0)
    progress: bool = setting(True, "flag", "show the workers' progress on the driver (from R, also how a failed "
                             "worker's own error reaches it: sparklyr's error of the stage does not carry it)")
    probe: bool = setting(True, "flag", "first check, in a short job, that the executors' Python imports alexnet and "
                          "TensorFlow, naming those that do not")

    def check(self, workers: int) -> LaunchOptions:
        """These options for a job of ``workers``: ``base_port`` leaving room for every worker, ``cache_dir`` made
        absolute (a task may run in another folder)."""
        cache = None if self.cache_dir is None else os.path.abspath(os.fspath(self.cache_dir))
        return dataclasses.replace(self, base_port=check_base_port(self.base_port, workers), cache_dir=cache)


@dataclass(frozen=True)
class TrainingJobOptions:
    """A training job's own options: whether it ends with its evaluation, and how that scores."""

    evaluate: bool = setting(False, "flag", "after the last epoch, each worker scores its partition's validation "
                             "images with the model it holds: the evaluation of every validation image of the board, "
                             "recorded in the model card and in the one version of `model_pin` the job writes")
    crops: int = like(evaluation_specs()["crops"], help="with `evaluate`, " + evaluation_specs()["crops"].help,
                      used_with=UsedWith("`evaluate`", "the model is not evaluated as the training ends",
                                         lambda v: v["evaluate"]))


def specs() -> dict[str, Spec]:
    """Every launch option's spec, by name, in the declaration's order."""
    return declaration.specs(LaunchOptions)


def training_job_specs() -> dict[str, Spec]:
    """Every option of a training job's own, by name."""
    return declaration.specs(TrainingJobOptions)


def check_launch(arguments: Mapping[str, Any], workers: int) -> LaunchOptions:
    """The launch options among ``arguments`` (by name; the others at their defaults) checked and converted for a
    job of ``workers``."""
    return LaunchOptions(**declaration.convert(LaunchOptions, arguments)).check(workers)
