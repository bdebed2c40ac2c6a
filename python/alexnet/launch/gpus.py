"""The GPUs Spark assigned a barrier task, given to its worker's process: a worker computes on those alone
(``CUDA_VISIBLE_DEVICES``), so that two tasks on one node do not both take every GPU. Spark assigns GPUs only when
asked to (``spark.task.resource.gpu.amount``); :mod:`alexnet.launch.spark` reads them in each task."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

#: The resource Spark schedules GPUs as (``spark.task.resource.gpu.amount``).
GPU_RESOURCE = "gpu"
#: The variable that holds a process's CUDA devices (TensorFlow sees those it names, renumbered from 0).
VISIBLE_GPUS = "CUDA_VISIBLE_DEVICES"


def task_gpus(context: Any, environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The GPUs Spark assigned the task of ``context`` (a ``BarrierTaskContext``, or anything with its
    ``resources()``), as ``CUDA_VISIBLE_DEVICES`` names them; ``None`` when Spark assigned none (it schedules GPUs
    only when asked to: ``spark.task.resource.gpu.amount``).

    Spark's addresses are what its GPU discovery script listed (``nvidia-smi``'s indexes). Where the executor already
    holds ``CUDA_VISIBLE_DEVICES`` (of ``environ``, default this process's), the whole-number addresses count within
    it, as pyspark's TorchDistributor takes them."""
    resources = context.resources() or {}
    gpu = resources.get(GPU_RESOURCE)
    addresses = [str(address).strip() for address in (getattr(gpu, "addresses", None) or ())]
    if not addresses:
        return None
    held = (os.environ if environ is None else environ).get(VISIBLE_GPUS, "")
    visible = [device.strip() for device in held.split(",") if device.strip()]
    if visible and all(address.isdigit() and int(address) < len(visible) for address in addresses):
        return [visible[int(address)] for address in addresses]
    return addresses


def gpu_environment(context: Any, env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (the variables a worker's process is given) with ``CUDA_VISIBLE_DEVICES`` naming the GPUs Spark
    assigned the task of ``context`` (:func:`task_gpus`), so that the worker's TensorFlow computes on those alone and
    two tasks on one node do not both take every GPU; numbered as ``nvidia-smi`` and Spark's discovery number them
    (``CUDA_DEVICE_ORDER=PCI_BUS_ID``) unless the executor's ``CUDA_VISIBLE_DEVICES`` (of ``environ``, default this
    process's) already orders them. Unchanged when Spark assigned no GPUs, and when ``env`` names its own
    ``CUDA_VISIBLE_DEVICES`` (the launch options' ``env``: a user's choice wins)."""
    environ = os.environ if environ is None else environ
    given = dict(env)
    gpus = None if VISIBLE_GPUS in given else task_gpus(context, environ)
    if gpus is None:
        return given
    given[VISIBLE_GPUS] = ",".join(gpus)
    if not environ.get(VISIBLE_GPUS) and "CUDA_DEVICE_ORDER" not in given and "CUDA_DEVICE_ORDER" not in environ:
        given["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return given
