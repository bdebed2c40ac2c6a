"""One worker of a benchmark run over several processes, in its own process (see :mod:`.cluster`).

:func:`train_worker` trains with :func:`alexnet.train.api.alexnet_train` under ``MultiWorkerMirroredStrategy``
(from the ``TF_CONFIG`` its process was started with; the default strategy when it trains alone) and returns what
the ``scaling`` and ``time_to_accuracy`` stages read: the seconds of every training step, the history, and the
seconds one exchange of the run's all-reduce takes alone on the same link, as the run's own probe timed it before
training (:func:`alexnet.train.probe.probe_communication`).
"""

from __future__ import annotations

import itertools
import logging
import os
import statistics
from collections.abc import Mapping
from typing import Any

from ..environment import INTEROP_VARIABLE

logger = logging.getLogger(__name__)


def typical_step(steps: list[float], period: int = 1) -> float | None:
    """The seconds a step of ``steps`` takes: their median, or with an exchange every ``period`` steps (local SGD)
    their mean, which then holds one exchange per ``period`` steps when ``steps`` are whole periods."""
    if not steps:
        return None
    return statistics.fmean(steps) if period > 1 else statistics.median(steps)


def train_worker(task: Mapping[str, Any]) -> dict[str, Any]:
    """Train as ``task`` says (``settings``: keyword arguments of ``alexnet_train``, ``data``, ``workers``,
    ``warmup_steps``, ``period``, ``collective_timeout``, ``threads``) and return ``step_seconds`` (every step after
    the first ``warmup_steps``), ``typical_step_seconds`` (:func:`typical_step`), ``step_cpu_seconds`` and
    ``typical_step_cpu_seconds`` (the same for the CPU seconds of the worker's process), ``epoch_seconds`` (from the
    start of training to the end of each epoch, its validation included), ``history``, ``parameters`` (the model's
    trainable numbers), ``bytes_per_step``, ``allreduce_seconds`` (one exchange alone, timed before training, per
    optimizer step: the gradients every step, or with local SGD the weights and momentum once every ``sync_every``
    steps; 0 alone), ``interop_threads`` (``TF_NUM_INTEROP_THREADS`` as TensorFlow read it, ``None`` for its
    default of one per CPU: ``"2"`` in a worker held to one CPU, see :func:`alexnet.environment.set_interop_threads`)
    and ``threads``. A ``threads`` > 0 (the CPUs the worker is given) sets TensorFlow's intra-op threads (those one
    operation computes with) to as many."""
    from ..tfimport import tf
    from ..train.api import alexnet_train
    from ..train.strategy import resolve_strategy

    threads = int(task.get("threads") or 0)
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    workers = int(task["workers"])
    strategy = resolve_strategy("multi_worker" if workers > 1 else None,
                                collective_timeout=task.get("collective_timeout"))
    from .clock import EpochClock, StepClock

    clock, epochs = StepClock(), EpochClock()
    history = alexnet_train(data=dict(task["data"]), strategy=strategy, callbacks=[clock, epochs],
                            **dict(task["settings"]))
    intervals = [b - a for a, b in itertools.pairwise([clock.start, *clock.ends])]
    cpu = [b - a for a, b in itertools.pairwise([clock.cpu_start, *clock.cpu_ends])]
    warmup = min(int(task.get("warmup_steps", 1)), max(0, len(intervals) - 1))
    steps, cpu_steps = intervals[warmup:], cpu[warmup:]
    period = int(task.get("period", 1))
    model = clock.model
    parameters = int(sum(int(tf.size(w)) for w in model.trainable_weights))
    params = history["params"]  # the run's own probe timed one exchange alone before training (multi-worker runs)
    return {
        "index": int(task.get("index", 0)),
        "step_seconds": steps,
        "typical_step_seconds": typical_step(steps, period),
        "step_cpu_seconds": cpu_steps,
        "typical_step_cpu_seconds": typical_step(cpu_steps, period),
        "history": history,
        "parameters": parameters,
        "bytes_per_step": float(params["allreduce_bytes_per_step"]),
        "allreduce_seconds": float(params.get("allreduce_seconds") or 0.0),
        "epoch_seconds": list(epochs.seconds),
        "interop_threads": os.environ.get(INTEROP_VARIABLE),
        "threads": threads,
    }
