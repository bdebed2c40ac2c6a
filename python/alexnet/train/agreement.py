"""Workers of one run agreeing on everything that decides how many collective operations they run.

Under ``MultiWorkerMirroredStrategy`` every worker trains on its own partition (tf.data auto-sharding is
off), and every training and validation step is an all-reduce that all workers must join: a worker that runs
one step more waits for ever. So before the model is built the workers settle on one number of steps per
epoch and on whether to validate (:func:`agree_on_steps`), and after a checkpoint is restored they check that
they all resume at the same point (:func:`check_agreement`). Both raise on every worker at once, never on one
alone, so that no worker is left waiting.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import as_int, as_ints
from ..errors import AlexnetError
from ..input.inputs import TrainingData
from ..tfimport import tf
from .strategy import Topology, num_workers

logger = logging.getLogger(__name__)


def steps_for(count: int, batch_size: int) -> int:
    """Whole batches of ``batch_size`` in ``count`` images (at least 1)."""
    return max(1, math.floor(count / batch_size))


def all_gather_ints(strategy: tf.distribute.Strategy, values: Sequence[int]) -> np.ndarray:
    """Every replica's ``values`` across the whole cluster: an int array ``[replicas, len(values)]``.

    A collective all-gather, so every worker must call it at the same point; it waits for the others
    (at most the strategy's collective timeout). With one worker it returns ``values`` as one row.
    """
    local = np.asarray([list(values)], dtype=np.int64)
    if num_workers(strategy) == 1:
        return local
    constant = tf.constant(local)

    @tf.function
    def gather() -> Any:
        return strategy.run(lambda: tf.distribute.get_replica_context().all_gather(constant, axis=0))

    return np.asarray(strategy.experimental_local_results(gather())[0])


@dataclass(frozen=True)
class Steps:
    """Steps per epoch of training, whether to validate, and validation steps (``None``: one full pass)."""

    train: int
    validate: bool
    validation: int | None


def partition_steps(data: Mapping[str, Any], worker_batch: int) -> tuple[int, int] | None:
    """Steps per epoch ``(training, validation)`` every worker of a partitioned run can take, from ``data``.

    ``data`` from ``imagenet_partition()`` carries the image counts of every partition
    (``partition_sizes``, ``val_partition_sizes``): the smallest one over ``worker_batch`` is the same number on
    every worker, whatever its own files. ``None`` when ``data`` does not carry them; validation steps are 0
    when some partition has no validation images.
    """
    sizes = as_ints(data.get("partition_sizes"), "data$partition_sizes")
    if not sizes:
        return None
    val_sizes = as_ints(data.get("val_partition_sizes"), "data$val_partition_sizes") or [0]
    train = steps_for(min(sizes), worker_batch)
    val = steps_for(min(val_sizes), worker_batch) if min(val_sizes) > 0 else 0
    return train, val


def agree_on_steps(strategy: tf.distribute.Strategy, topology: Topology, data: Mapping[str, Any],
                   td: TrainingData, worker_batch: int, steps_per_epoch: int | None, validation: bool,
                   validation_steps: int | None) -> Steps:
    """Steps per epoch, whether to validate and validation steps: the same on every worker.

    From the partition sizes in ``data`` when it has them (see :func:`partition_steps`), else from the
    smallest worker's image counts, exchanged with an all-gather (which also makes every worker wait here
    until all have checked their images). One worker: its own image count.
    """
    if topology.workers == 1:
        steps = steps_per_epoch or steps_for(len(td.files), worker_batch)
        return Steps(steps, validation and bool(td.val_files), validation_steps)
    counts = all_gather_ints(strategy, [len(td.files), len(td.val_files) if validation else 0])
    fewest_train, fewest_val = (int(v) for v in counts.min(axis=0))
    from_sizes = partition_steps(data, worker_batch)
    if from_sizes is not None:
        total = as_int(data.get("total"), "data$total") if data.get("total") is not None else len(
            data["partition_sizes"])
        if total != topology.workers:
            logger.warning(
                "`data` is partition %s of %s, but %d workers train: each worker should train on its own "
                "partition of total = %d.", data.get("partition"), total, topology.workers, topology.workers)
        table_train, table_val = from_sizes
    else:
        table_train = steps_for(fewest_train, worker_batch)
        table_val = steps_for(fewest_val, worker_batch) if fewest_val > 0 else 0
    validate = validation and fewest_val > 0
    if validation and not validate and counts[:, 1].max() > 0:
        logger.warning("Some workers have no validation images: no worker validates (they must all run alike).")
    if validate and validation_steps is None:
        validation_steps = table_val or steps_for(fewest_val, worker_batch)
    steps = steps_per_epoch or table_train
    logger.info("Worker %d of %d: %d training steps per epoch (fewest images on a worker: %d, %d here).",
                topology.worker_index, topology.workers, steps, fewest_train, len(td.files))
    return Steps(steps, validate, validation_steps if validate else None)


def check_agreement(strategy: tf.distribute.Strategy, position: tuple[int, int], steps: Steps,
                    folder: str | None) -> None:
    """Raise on every worker (so that none of them hangs) when the workers would not run in step.

    ``position`` is ``(epoch, step)`` this worker resumes at.
    """
    table = all_gather_ints(strategy, [position[0], position[1], steps.train, steps.validation or 0])
    epochs, offsets, train, val = (table[:, k].tolist() for k in range(4))
    if len(set(epochs)) > 1 or len(set(offsets)) > 1:
        raise AlexnetError(
            f"The workers restored different checkpoints from `checkpoint_dir` = {folder} (epochs {epochs}, steps "
            f"{offsets}, one per replica): every worker must read the same checkpoints. Use storage all workers "
            "share (gs://, s3://, or the same path on a shared file system), or delete it to start afresh."
        )
    if len(set(train)) > 1 or len(set(val)) > 1:
        raise AlexnetError(
            f"The workers would run different numbers of steps per epoch (training {train}, validation {val}, "
            "one per replica): give every worker the same `steps_per_epoch`, `validation_steps` and arguments."
        )
