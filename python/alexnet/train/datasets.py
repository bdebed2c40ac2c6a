"""What a run trains on: the images of its data that can be decoded (:func:`usable_data`) and the datasets that
feed them to the strategy's replicas, one image size at a time (:class:`RunDatasets`)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
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
#: The stored-side warnings :func:`warn_of_stored_side` gave within :func:`stored_side_said` (None outside one).
_SAID: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("stored_side_said", default=None)


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


def warn_of_stored_side(data: Mapping[str, Any], settings: TrainSettings, *, trains: bool, validates: bool) -> None:
    """Warn, once before training, when the board's images were stored (``data``'s ``resize``, as
    :func:`alexnet.imagenet_partition` gives it) with a short side below the largest ``image_size`` training crops
    (when the run ``trains``: a run resumed with every epoch done reads no image to train on), or, when the run
    ``validates``, below the short side validation resizes them to for the last size (``image_size * 256 / 224``):
    every crop enlarged from fewer pixels (:func:`alexnet.data.options.stored_side_problem`, the rule the benchmark
    refuses by). A warning, not an error: small stored images may be what a quick run wants."""
    from ..data.fetch import stored_side
    from ..data.options import stored_side_problem
    from ..input.decode import EVAL_RESIZE_RATIO

    resize = stored_side(data)
    sizes = settings.sizes
    problem = None
    if trains:
        problem = stored_side_problem(resize, max(sizes.sizes), "training", schedule=len(set(sizes.sizes)) > 1,
                                      uploaded=True)
    if problem is None and validates:
        problem = stored_side_problem(resize, sizes.final, "validation", side=round(sizes.final * EVAL_RESIZE_RATIO),
                                      uploaded=True)
    if problem is not None:
        logger.warning("%s", problem)
        said = _SAID.get()
        if said is not None:
            said.append(problem)


@contextlib.contextmanager
def stored_side_said() -> Iterator[list[str]]:
    """The stored-side warnings a run gives within it (:func:`warn_of_stored_side`), in the list it yields: a job
    that reads the images again once the run is over (a Spark training's evaluation) says its own only when the run
    said none, so that the job says it once."""
    said: list[str] = []
    token = _SAID.set(said)
    try:
        yield said
    finally:
        _SAID.reset(token)


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


#: The skipped images a warning or error names, at most.
NAMED = 5


class SkippedImages:
    """The training images this worker's pipeline could not read or decode and skipped (files damaged since they were
    checked before training: a category of the cache is checked once per fetched zip, and its quick check of the files
    sees no change that keeps a file's size), said by :meth:`check` at each epoch's end: their number, a few by name,
    what to do; more than ``max_bad_fraction`` of the ``images`` stop the run. An image being decoded as an epoch ends
    is said at the next epoch's end if it fails.

    Every worker counts the images of its own partition, checked against its own share. In a run of several workers
    (``strategy`` and ``topology`` given), they tell each other at each epoch's end which of them is past its share,
    so that all of them stop there together: without it the others would go on to their next exchange and wait for
    the stopped worker until ``collective_timeout``."""

    def __init__(self, failures: Any, images: int, max_bad_fraction: float,
                 strategy: tf.distribute.Strategy | None = None, topology: Topology | None = None):
        self.failures, self.images, self.max_bad_fraction = failures, images, max_bad_fraction
        self.strategy, self.topology = strategy, topology
        self.found: list[str] = []

    def _others_past_their_share(self, past: bool) -> list[tuple[str, int, int]]:
        """The other workers past their share of skipped images (each named, with its count and images), told by
        every worker at the same point: a collective when there are several workers, none otherwise."""
        from .agreement import all_gather_ints

        topology = self.topology
        if self.strategy is None or topology is None or topology.workers < 2:
            return []
        rows = all_gather_ints(self.strategy, [int(topology.chief), topology.worker_index, len(self.found),
                                               self.images, int(past)])
        own = (int(topology.chief), topology.worker_index)
        others = {(int(chief), int(index)): (int(count), int(images))
                  for chief, index, count, images, over in rows.tolist() if over and (chief, index) != own}
        return [("the chief" if chief else f"worker {index}", count, images)
                for (chief, index), (count, images) in sorted(others.items())]

    def check(self, epoch: int) -> None:
        """Say the images skipped since the last check (at the end of ``epoch``, from 0), told from those the pipeline
        was decoding at that moment by reading them again; raise
        :class:`~alexnet.errors.BadImagesError` once they are more than ``max_bad_fraction`` of the images, on this
        worker's or on another's (every worker calls this at each epoch's end)."""
        from ..errors import BadImagesError
        from ..input.scan import listing, undecodable_now

        seen = set(self.found)
        new = undecodable_now([path for path in self.failures.pending() if path not in seen])
        self.found += new
        count, fraction = len(self.found), len(self.found) / max(1, self.images)
        others = self._others_past_their_share(fraction > self.max_bad_fraction)
        listed = listing(new, NAMED)
        when = f"by the end of epoch {epoch + 1}"
        todo = ("Replace or remove these files (a board's partition in the cache: fetch it again with verify = True, "
                "which fetches damaged categories again)")
        if fraction > self.max_bad_fraction:
            raise BadImagesError(
                f"{count} of {self.images} training images ({fraction:.2%}) could not be read or decoded during "
                f"training, more than max_bad_fraction = {self.max_bad_fraction:g}; found {when}:\n  {listed}\n"
                f"They changed since they were checked before training. {todo}, or raise `max_bad_fraction` to train "
                "without them.")
        if new:
            logger.warning("%d training image(s) could not be read or decoded %s and were skipped (%d of %d so far); "
                           "they changed since they were checked before training:\n  %s\n%s.", len(new), when, count,
                           self.images, listed, todo)
        if others:
            said = "; ".join(f"{name}: {n} of {total} ({n / max(1, total):.2%})" for name, n, total in others)
            raise BadImagesError(
                f"Training stopped {when}: more than max_bad_fraction = {self.max_bad_fraction:g} of another worker's "
                f"training images could not be read or decoded during training ({said}), and every worker stops with "
                "it. That worker's log names them: replace or remove those files (a board's partition in its cache: "
                "fetch it again with verify = True), or raise `max_bad_fraction` on every worker to train without "
                "them.")


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
        #: the images of one step of this worker (a batch for each of its replicas)
        self.worker_images = topology.worker_batch(settings.step_batch)
        self._train: Any = None
        self.skipped = SkippedImages(pipeline.DecodeFailures(), len(td.files), settings.max_bad_fraction, strategy,
                                     topology)
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

    def train(self, size: int, epoch: int = 0, step: int = 0) -> Any:
        """Training batches of ``size`` pixels square, from step ``step`` of epoch ``epoch`` (both from 0) on: the
        images, crops and order a run of these steps and batches takes from there
        (:func:`alexnet.input.pipeline.train_dataset`'s ``start``), so that a run resumed there, or going on at
        another size, goes on as one that did not stop. An image skipped as unreadable moves the images after it
        one place on in the run that skipped it alone."""
        from ..input import pipeline

        s, start = self.settings, (epoch * self.steps.train + step) * self.worker_images
        self._train = None  # only the current one is kept: with `cache`, each holds its own copy of the bytes
        self._train = self._per_replica(lambda: pipeline.train_dataset(
            self.td.files, self.td.labels, s.step_batch, size, parallel=s.parallel, cache=s.cache, seed=s.seed,
            start=start, area_range=s.area_range, lighting=s.lighting, failures=self.skipped.failures))
        return self._train
