"""What a run trains on: the images of its data that can be decoded (:func:`usable_data`) and the datasets that
feed them to the strategy's replicas, one image size at a time (:class:`RunDatasets`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..machine import available_memory

if TYPE_CHECKING:
    import tensorflow as tf

    from ..input.inputs import TrainingData
    from .agreement import Steps
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger(__name__)

#: The share of the memory available that ``cache`` may fill before the run says it may not fit (the model, its
#: optimizer, TensorFlow and the decoded batches need the rest).
CACHE_SHARE = 0.5


def warn_if_cache_will_not_fit(files: Sequence[str], available: int | None) -> None:
    """Say when ``cache`` would keep more compressed image bytes in memory (``files``: the training and validation
    images) than :data:`CACHE_SHARE` of the ``available`` memory: a worker killed for memory loses its run."""
    if available is None:
        return
    total = 0
    for file in files:
        try:
            total += os.path.getsize(file)
        except OSError:
            continue
    if total > CACHE_SHARE * available:
        logger.warning("`cache` keeps this worker's %d images in memory once read: %.1f GB of compressed bytes, with "
                       "%.1f GB of memory available: the run may be stopped for memory before its second epoch; leave "
                       "`cache` off, or train on a smaller partition (more workers)", len(files), total / 1e9,
                       available / 1e9)


def usable_data(data: Mapping[str, Any], settings: TrainSettings) -> tuple[TrainingData, list[str]]:
    """The images of ``data``, without those that cannot be decoded; and the bad ones. With ``cache``, says when they
    may not fit in memory (:func:`warn_if_cache_will_not_fit`)."""
    td, bad = _usable_data(data, settings)
    if settings.cache:
        warn_if_cache_will_not_fit([*td.files, *(td.val_files if settings.validation else [])], available_memory())
    return td, bad


def _usable_data(data: Mapping[str, Any], settings: TrainSettings) -> tuple[TrainingData, list[str]]:
    from ..input.inputs import training_data
    from ..input.scan import drop_bad_images, scan_images

    td = training_data(data)
    bad: list[str] = []
    if not settings.check_images:
        return td, bad
    found = scan_images(td.files, settings.parallel)
    td.files, td.labels = drop_bad_images(td.files, td.labels, found, settings.max_bad_fraction)
    bad += found
    if settings.validation and td.val_files:
        found = scan_images(td.val_files, settings.parallel)
        td.val_files, td.val_labels = drop_bad_images(td.val_files, td.val_labels, found, settings.max_bad_fraction,
                                                      what="validation")
        bad += found
    return td, bad


class RunDatasets:
    """The training dataset of the image size being trained (made when first needed, dropped when the schedule
    moves on) and the validation dataset, at the last size: this worker's share of the validation images the
    workers agreed on, padded to their validation steps (see :mod:`.validation`).

    Both are made by ``strategy`` from this worker's pipeline batched per replica, one batch for each of this
    worker's replicas a step (``distribute_datasets_from_function``). Handed a batch of the whole cluster's step
    instead, TensorFlow would cut each of this worker's batches into a piece for every replica of every worker and
    feed them to this worker's replicas one step after another: each worker would decode W steps' images at once
    every W steps (W workers), holding W times the images it trains on in memory, and wait for all of them before
    its first step."""

    def __init__(self, strategy: tf.distribute.Strategy, td: TrainingData, settings: TrainSettings,
                 topology: Topology, steps: Steps):
        from ..input import pipeline

        self.strategy, self.td, self.settings, self.steps = strategy, td, settings, steps
        self._train: dict[int, Any] = {}
        self.validation = None
        if steps.validate and steps.validation:
            share, length = steps.val_share, steps.validation * topology.worker_batch(settings.batch_size)
            self.validation = self._per_replica(lambda: pipeline.validation_dataset(
                td.val_files[:share], td.val_labels[:share], settings.batch_size, settings.sizes.final,
                length=length, parallel=settings.parallel, cache=settings.cache))

    def _per_replica(self, make: Callable[[], tf.data.Dataset]) -> Any:
        """``make()``'s dataset, batched per replica, as ``strategy`` hands it to this worker's replicas (the
        dataset itself under the default strategy)."""
        return self.strategy.distribute_datasets_from_function(lambda _: make())

    def train(self, size: int) -> Any:
        """Training batches of ``size`` pixels square."""
        from ..input import pipeline

        if size not in self._train:
            s = self.settings
            # only the current size is kept: with `cache`, each dataset holds its own copy of the compressed bytes
            self._train = {size: self._per_replica(lambda: pipeline.train_dataset(
                self.td.files, self.td.labels, s.step_batch, size, parallel=s.parallel, cache=s.cache, seed=s.seed,
                area_range=s.area_range, lighting=s.lighting))}
        return self._train[size]
