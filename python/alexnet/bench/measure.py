"""Measuring a pipeline: images per second, CPU time, memory and load, in this process or in a pinned child.

"On k cores" means in a child process pinned with :func:`os.sched_setaffinity` to k CPUs (the default where
the system supports it), so that every thread TensorFlow starts shares those k CPUs; otherwise the
measurement runs in this process with tf.data's thread pool limited to k threads, which leaves TensorFlow's
other threads free and so flatters the numbers on few cores. Each measurement warms up, then runs for at
least a number of images and of seconds; the 1-minute load average is recorded with it, since other work on
the machine lowers the numbers, and the share of its CPUs it got (:func:`alexnet.bench.stages.contended`).
"""

from __future__ import annotations

import gc
import logging
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..child import ChildError, run_child
from ..errors import AlexnetError
from .pipelines import decode_dataset, naive_dataset
from .stages import CHILD_ORDER, PIPELINE_STAGES

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger(__name__)


def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _rss_mb() -> float | None:
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024


def reset_peak_rss() -> bool:
    """Reset this process's peak resident size (Linux ``clear_refs``); False when the system does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float | None:
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb / 1024
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return peak / 1024 / (1024 if sys.platform == "darwin" else 1)


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _count(batch: Any) -> int:
    first = batch[0] if isinstance(batch, tuple) else batch
    return int(first.shape[0])


def drain(dataset: tf.data.Dataset, images: int, seconds: float, warmup: int = 2) -> dict[str, Any]:
    """Pull batches from ``dataset`` and do nothing with them: images per second after ``warmup`` batches.

    Runs until at least ``images`` images and ``seconds`` seconds have gone by. Returns ``images_per_second``,
    ``images``, ``seconds``, ``cpu_seconds`` and ``images_per_cpu_second`` (CPU time of this whole process:
    unlike wall time, other work on the machine barely changes it), ``load_average`` (1 minute, when the
    timing started) and ``load_after``.
    """
    iterator = iter(dataset)
    for _ in range(max(0, warmup)):
        next(iterator)
    load = load_average()
    count = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    elapsed = 0.0
    while count < images or elapsed < seconds:
        count += _count(next(iterator))
        elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return {
        "images_per_second": count / elapsed,
        "images": count,
        "seconds": round(elapsed, 3),
        "cpu_seconds": round(cpu, 3),
        "images_per_cpu_second": count / cpu if cpu > 0 else None,
        "load_average": load,
        "load_after": load_average(),
    }


def _limit_threads(dataset: tf.data.Dataset, cores: int) -> tf.data.Dataset:
    from ..tfimport import tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = cores
    return dataset.with_options(options)


def _stage_dataset(stage: str, spec: Mapping[str, Any], warmup: int) -> tuple[tf.data.Dataset, int]:
    """The dataset that measures ``stage``, and the batches to skip before timing it."""
    from ..input import pipeline

    cores, batch_size, image_size = int(spec["cores"]), int(spec["batch_size"]), int(spec["image_size"])
    files = list(spec["files"])
    originals = spec.get("original_files") or files
    if stage == "decode":
        return decode_dataset([Path(f).read_bytes() for f in originals], batch_size, cores), warmup
    if stage in ("naive", "naive_auto"):
        return naive_dataset(originals, batch_size, image_size, cores, sequential=stage == "naive"), warmup
    if stage == "io":
        cache = bool(spec.get("cache", True))
        ds = pipeline.train_dataset(files, list(spec["labels"]), batch_size, image_size, parallel=spec.get("parallel"),
                                    cache=cache, seed=spec.get("seed"))
        # with the cache on, the first pass reads the files into it: leave it out of the timing
        return ds, max(warmup, math.ceil(len(files) / batch_size) + 2) if cache else warmup
    raise AlexnetError(f"Unknown pipeline stage {stage!r}: use one of {', '.join(PIPELINE_STAGES)}.")


def cpu_share(cpu_seconds: float, seconds: float, cores: int) -> float | None:
    """The share of ``cores`` CPUs a process got over ``seconds``: between 0 and 1 (the process's CPU time also
    counts threads that worked just before the timed window, such as TensorFlow's start, which a very short
    measurement cannot absorb); None when the run was too short to time."""
    if not seconds or seconds <= 0 or cores <= 0:
        return None
    return min(1.0, round(cpu_seconds / (seconds * cores), 3))


def pipeline_measurements(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Measure the pipeline stages of ``spec`` on ``spec["cores"]`` cores, in this process.

    ``spec`` holds ``stages`` (among :data:`~alexnet.bench.stages.PIPELINE_STAGES`), ``files``, ``labels``,
    ``cores`` (``original_files``, when given, are the files ``decode`` and the naive pipelines read instead of
    ``files``), ``batch_size``, ``image_size``, ``images``, ``seconds``, ``parallel`` (for ``io``; ``None``:
    one per usable CPU), ``cache``, ``seed`` and ``pinned``. In a process pinned to ``cores`` CPUs (``pinned`` true, see
    :func:`pinned_measurements`) the datasets run as they are; otherwise each one's tf.data thread pool is
    limited to ``cores`` threads instead. Each record has ``cpu_use``: the share of the ``cores`` CPUs the
    process got (at most 1); well below 1, other work on the machine took the rest and the wall-clock rate is low.
    """
    cores = int(spec["cores"])
    warmup = max(2, math.ceil(4 * cores))
    results = []
    for stage in sorted(spec["stages"], key=lambda name: CHILD_ORDER.index(name) if name in CHILD_ORDER else -1):
        gc.collect()
        scoped = reset_peak_rss()
        before = _rss_mb()
        ds, stage_warmup = _stage_dataset(stage, spec, warmup)
        if not spec.get("pinned"):
            ds = _limit_threads(ds, cores)
        measured = drain(ds, int(spec["images"]), float(spec["seconds"]), stage_warmup)
        del ds
        gc.collect()
        peak = peak_rss_mb()
        cpu_use = cpu_share(measured["cpu_seconds"], measured["seconds"], cores)
        measured.update({
            "stage": stage,
            "cores": cores,
            "cpu_use": cpu_use,
            "rss_before_mb": None if before is None else round(before, 1),
            "peak_rss_mb": None if peak is None else round(peak, 1),
            "peak_rss_scope": "stage" if scoped else "process",
        })
        results.append(measured)
        logger.info("%s on %d core(s): %.0f images/s (load %.2f)", stage, cores, measured["images_per_second"],
                    measured["load_average"] or float("nan"))
    return results


def pinned_measurements(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`pipeline_measurements` in a child already pinned to ``spec["cores"]`` CPUs, with TensorFlow's own
    thread pools sized to match."""
    from ..tfimport import tf

    cores = int(spec["cores"])
    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.config.threading.set_inter_op_parallelism_threads(cores)
    return pipeline_measurements({**spec, "pinned": True})


def run_pinned(spec: Mapping[str, Any], cpus: Sequence[int]) -> list[dict[str, Any]]:
    """:func:`pipeline_measurements` in a child process pinned to ``cpus`` (see :mod:`alexnet.child`)."""
    try:
        # the pipeline runs on the CPU: GPUs stay with this process
        return run_child(pinned_measurements, dict(spec), what=f"The measurement on {len(cpus)} core(s)",
                         cpus=cpus, env={"CUDA_VISIBLE_DEVICES": ""}, prefix="alexnet-bench-")
    except ChildError as error:
        raise AlexnetError(f"{error}\nRun it again with isolation = \"threads\" to measure in this process instead.") \
            from None
