"""Workers of one run agreeing on everything that decides how many collective operations they run.

Under ``MultiWorkerMirroredStrategy`` every worker trains on its own partition (tf.data auto-sharding is
off), and every training and validation step is an all-reduce that all workers must join: a worker that runs
one step more waits for ever, and a collective that workers start with other shapes or number formats fails. So
first of all the workers check that they were given the same settings of what they exchange and how they update
the weights (:func:`agree_on_settings`), then, before the model is built, they settle on one number of steps per
epoch and on how to validate (:func:`agree_on_steps`: every worker's validation images, each counted once, in
the same number of steps everywhere, the smaller shares padded; :func:`validation_plan`), and after a
checkpoint is restored they check that they all resume at the same point (:func:`check_agreement`). Each raises
on every worker at once, never on one alone, so that no worker is left waiting. When training ends, they compare
their weights (:func:`weights_agree`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..checks import as_int, as_ints, entry, shown
from ..errors import AlexnetError
from ..input.inputs import TrainingData
from ..tfimport import tf
from .strategy import Topology, num_workers

logger = logging.getLogger(__name__)


def steps_for(count: int, batch_size: int) -> int:
    """Whole batches of ``batch_size`` in ``count`` images (at least 1)."""
    return max(1, math.floor(count / batch_size))


#: The gathering function of each strategy (:func:`_gather_of`), made once: a ``tf.function`` made anew at every
#: call is traced anew, and TensorFlow warns of the retracing from the fifth.
_GATHERS: weakref.WeakKeyDictionary[tf.distribute.Strategy, Any] = weakref.WeakKeyDictionary()


def _gather_of(strategy: tf.distribute.Strategy) -> Any:
    """The ``tf.function`` that all-gathers a row of int64 over every replica of ``strategy``: traced once for rows
    of any length."""
    gather = _GATHERS.get(strategy)
    if gather is None:
        owner = weakref.ref(strategy)  # the function does not keep its strategy alive

        @tf.function(input_signature=[tf.TensorSpec([1, None], tf.int64)])
        def gather(row: Any) -> Any:
            # the row copied to the replica's device: a collective sends from a placed tensor
            alive = owner()
            assert alive is not None  # called only through _GATHERS, whose entry goes with its strategy
            return alive.run(lambda: tf.distribute.get_replica_context().all_gather(tf.identity(row), axis=0))

        _GATHERS[strategy] = gather
    return gather


def all_gather_ints(strategy: tf.distribute.Strategy, values: Sequence[int]) -> np.ndarray:
    """Every replica's ``values`` across the whole cluster: an int array ``[replicas, len(values)]``.

    A collective all-gather, so every worker must call it at the same point; it waits for the others
    (at most the run's ``collective_timeout``: :mod:`.watchdog`). With one worker it returns ``values`` as one row.
    """
    from .watchdog import TRACE_GRACE, watching

    local = np.asarray([list(values)], dtype=np.int64)
    if num_workers(strategy) == 1:
        return local
    with watching("an agreement of the workers", TRACE_GRACE):
        return np.asarray(strategy.experimental_local_results(_gather_of(strategy)(tf.constant(local)))[0])


def all_gather_texts(strategy: tf.distribute.Strategy, text: str) -> list[str]:
    """Every replica's ``text`` across the whole cluster, one per replica in the order of :func:`all_gather_ints`
    (two gathers: the lengths, then the texts padded to the longest). A collective, as that is."""
    encoded = list(text.encode())
    longest = int(all_gather_ints(strategy, [len(encoded)])[:, 0].max())
    rows = all_gather_ints(strategy, [len(encoded), *encoded, *[0] * (longest - len(encoded))])
    return [bytes(int(b) for b in row[1:1 + int(row[0])]).decode() for row in rows]


def _said(value: Any) -> str:
    """A setting's value as a message shows it: ``unset`` for ``None``."""
    return "unset" if value is None else shown(value)


def _workers(indices: Sequence[int]) -> str:
    """``worker 1``, ``workers 0 and 2``, ``workers 0, 1 and 3``."""
    names = [str(i) for i in indices]
    return f"worker {names[0]}" if len(names) == 1 else f"workers {', '.join(names[:-1])} and {names[-1]}"


def settings_apart(given: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """What differs between the settings ``given`` to each worker (by worker index): each setting whose value is not
    the same on every worker that holds it, with those workers' values, one text a setting (none: they all hold the
    same ones). A worker without a setting leaves it unused (another setting says so, and differs)."""
    parts = []
    for name in dict.fromkeys(name for worker in sorted(given) for name in given[worker]):
        holders: dict[str, list[int]] = {}
        values: dict[str, Any] = {}
        for worker in sorted(worker for worker in given if name in given[worker]):
            value = given[worker][name]
            key = json.dumps(value, sort_keys=True)
            holders.setdefault(key, []).append(worker)
            values[key] = value
        if len(holders) > 1:
            parts.append(f"`{name}` is " + ", ".join(f"{_said(values[key])} on {_workers(workers)}"
                                                     for key, workers in holders.items()))
    return parts


def agree_on_settings(strategy: tf.distribute.Strategy, topology: Topology, shared: Mapping[str, Any]) -> None:
    """Raise on every worker at once, naming each setting that differs and every worker's value, unless all of
    them were given the same ``shared`` settings (plain values: :meth:`.settings.TrainSettings.shared_by_workers`).
    Workers launched by hand with another ``sync_every`` or wire format would otherwise meet TensorFlow's errors of
    mismatched collectives (or wait for one the others never start). A collective: every worker calls it first,
    before any other exchange of the run. Nothing to compare with one worker."""
    if topology.workers <= 1:
        return
    texts = all_gather_texts(strategy, json.dumps({"worker": topology.worker_index, "settings": dict(shared)}))
    given = {int(row["worker"]): row["settings"] for row in map(json.loads, texts)}
    apart = settings_apart(given)
    if apart:
        raise AlexnetError(f"The workers were given different settings: {'; '.join(apart)}. "
                           f"{'This setting decides' if len(apart) == 1 else 'Each of these decides'} what the workers "
                           "exchange or how every step updates the weights they share: give every worker the same "
                           "settings.")


@dataclass(frozen=True)
class Steps:
    """Steps per epoch of training, whether to validate, and how: the same on every worker.

    ``validation`` steps (``None`` without validation) take ``worker_batch`` images from every worker each;
    they cover ``val_images`` validation images of the whole run, each once, of which the first ``val_share``
    of this worker's (see :func:`validation_plan`). ``train_images``: the training images of every worker (what
    the micro-batches of :func:`alexnet.train.batch_bound.largest_batch` are bounded by). ``fill``: the images an
    epoch's steps are counted from and what holds them (this run's images, the smallest partition), that a step's
    images on a worker must not outnumber (:func:`batch_within_images`); None when the steps were asked for.
    ``notes``: what a worker of several says of them, said once by :func:`say_steps` for the steps the run trains
    with (the workers agree again when a smaller batch or ``adapt_communication`` changes the settings)."""

    train: int
    validate: bool
    validation: int | None
    val_images: int = 0
    val_share: int = 0
    train_images: int = 0
    fill: tuple[int, str] | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)


def say_steps(steps: Steps) -> None:
    """Log what the workers agreed of ``steps`` (:attr:`Steps.notes`, and the chief's :attr:`Steps.warnings` of
    images an epoch leaves out): once a run, for the steps it trains with."""
    for note in steps.notes:
        logger.info("%s", note)
    for warning in steps.warnings:
        logger.warning("%s", warning)


def validation_plan(shares: Sequence[int], worker_batch: int, limit: int | None = None) -> tuple[int, int]:
    """Validation steps per epoch for workers holding ``shares`` validation images, and the images they cover.

    Every worker runs as many steps as the largest share fills, the last one padded: ``ceil(max(shares) /
    worker_batch)``, or ``limit`` when that is fewer. A worker covers its first ``min(share, steps *
    worker_batch)`` images and pads the rest of its steps with images that count for nothing, so the steps
    cover every image (up to ``limit``) exactly once. ``(0, 0)`` when no worker has validation images.
    """
    most = max(shares, default=0)
    if most <= 0:
        return 0, 0
    steps = math.ceil(most / worker_batch)
    if limit is not None:
        steps = min(steps, int(limit))
    return steps, sum(min(int(share), steps * worker_batch) for share in shares)


def partition_steps(data: Mapping[str, Any], worker_batch: int) -> int | None:
    """Training steps per epoch every worker of a partitioned run can take, from ``data``.

    ``data`` from ``imagenet_partition()`` carries the image counts of every partition (``partition_sizes``):
    the smallest one over ``worker_batch`` is the same number on every worker, whatever its own files.
    ``None`` when ``data`` does not carry them.
    """
    sizes = as_ints(data.get("partition_sizes"), entry("data", "partition_sizes"))
    if not sizes:
        return None
    return steps_for(min(sizes), worker_batch)


def _validation(shares: Sequence[int], own: int, worker_batch: int, limit: int | None) -> tuple[bool, int | None,
                                                                                               int, int]:
    """Whether to validate, the validation steps, the images they cover and this worker's share of them."""
    steps, images = validation_plan(shares, worker_batch, limit)
    if not steps:
        return False, None, 0, 0
    return True, steps, images, min(own, steps * worker_batch)


def _refuse_shared_partitions(partitions: dict[int, int], total: Any) -> None:
    """Raise, on every worker alike, when two workers train on the same partition (``partitions``: worker -> its
    partition, -1 for data that is no partition): the categories of the others would never be trained, and validation
    would count the same images twice."""
    holders: dict[int, list[int]] = {}
    for worker, partition in sorted(partitions.items()):
        if partition >= 0:
            holders.setdefault(partition, []).append(worker)
    shared = {p: w for p, w in holders.items() if len(w) > 1}
    if not shared:
        return
    of = f" of {total}" if total is not None else ""
    said = "; ".join(f"workers {', '.join(map(str, w[:-1]))} and {w[-1]} train on the same partition, {p}{of}"
                     for p, w in sorted(shared.items()))
    raise AlexnetError(
        f"{said}: each worker must train on its own partition "
        f"(partition = its worker index, total = the {len(partitions)} workers), or the categories of the others are "
        "never trained and the validation counts the same images more than once."
    )


def agree_on_steps(strategy: tf.distribute.Strategy, topology: Topology, data: Mapping[str, Any],
                   td: TrainingData, worker_batch: int, steps_per_epoch: int | None, validation: bool,
                   validation_steps: int | None, *, val_batch: int | None = None) -> Steps:
    """Steps per epoch, whether to validate and validation steps: the same on every worker.

    Training steps come from the partition sizes in ``data`` when it has them (see :func:`partition_steps`),
    else from the smallest worker's image count. Validation covers every worker's validation images, each
    once (see :func:`validation_plan`) in steps of ``val_batch`` images a worker (default: ``worker_batch``,
    the training step's), and runs when any worker has some. The workers' image counts are
    exchanged with an all-gather (which also makes every worker wait here until all have checked their
    images). One worker: its own image counts. What several agreed is said by :func:`say_steps`, once the run has
    its last settings.
    """
    own_val = len(td.val_files) if validation else 0
    val_batch = val_batch or worker_batch
    if topology.workers == 1:
        steps = steps_per_epoch or steps_for(len(td.files), worker_batch)
        return Steps(steps, *_validation([own_val], own_val, val_batch, validation_steps), len(td.files),
                     (len(td.files), "this run's images") if steps_per_epoch is None else None)
    partition = data.get("partition")
    own_partition = as_int(partition, entry("data", "partition")) if partition is not None else -1
    counts = all_gather_ints(strategy, [len(td.files), own_val, topology.worker_index, own_partition])
    # one row per replica: a worker's counts once, however many replicas it has
    per_worker = {int(row[2]): (int(row[0]), int(row[1])) for row in counts}
    _refuse_shared_partitions({int(row[2]): int(row[3]) for row in counts}, data.get("total"))
    fewest_train = min(train for train, _ in per_worker.values())
    table_train = partition_steps(data, worker_batch)
    if table_train is not None:
        total = as_int(data.get("total"), entry("data", "total")) if data.get("total") is not None else len(
            data["partition_sizes"])
        if total != topology.workers:
            logger.warning(
                "`data` is partition %s of %s, but %d workers train: each worker should train on its own "
                "partition of total = %d.", data.get("partition"), total, topology.workers, topology.workers)
    else:
        table_train = steps_for(fewest_train, worker_batch)
    steps = steps_per_epoch or table_train
    sizes = as_ints(data.get("partition_sizes"), entry("data", "partition_sizes"))
    fill = (min(sizes) if sizes else fewest_train, "the smallest partition") if steps_per_epoch is None else None
    missed = (left_out_text(sizes or [train for train, _ in per_worker.values()], steps, worker_batch)
              if steps_per_epoch is None and topology.chief and (fill is None or worker_batch <= fill[0]) else None)
    shares = [val for _, val in per_worker.values()]
    validate, val_steps, val_images, val_share = _validation(shares, own_val, val_batch, validation_steps)
    worker = f"Worker {topology.worker_index} of {topology.workers}"
    notes = (f"{worker}: {steps} training steps per epoch (fewest images on a worker: {fewest_train}, "
             f"{len(td.files)} here).",
             *([f"{worker}: {val_steps} validation steps per epoch over {val_images} validation images ({val_share} "
                f"of them here, {max(shares)} on the largest share)."] if validate else []))
    return Steps(steps, validate, val_steps, val_images, val_share,
                 sum(train for train, _ in per_worker.values()), fill, notes, (missed,) if missed else ())


#: The share of the training images an epoch may leave out (partitions' images beyond the steps every worker takes)
#: before the run warns of it.
LEFT_OUT_WARNING = 0.02


def left_out(sizes: Sequence[int], steps: int, worker_batch: int) -> tuple[int, int]:
    """The training images an epoch of ``steps`` steps of ``worker_batch`` images leaves out of partitions of
    ``sizes`` images (each worker trains on at most ``steps * worker_batch`` of its own), and all of them."""
    return sum(max(0, int(size) - steps * worker_batch) for size in sizes), sum(int(size) for size in sizes)


def left_out_text(sizes: Sequence[int], steps: int, worker_batch: int) -> str | None:
    """The warning of an epoch that leaves out more than :data:`LEFT_OUT_WARNING` of the training images (``None``:
    it does not); :func:`say_steps` says it, once a run.

    Every worker takes as many steps as the smallest partition fills, and partitions are whole categories: the more
    workers, the more the largest partitions hold beyond the smallest's (simulated with ImageNet's categories, 0.5%
    of the images at 16 workers, 2.5% at 64, 8% at 128, 21% at 256)."""
    missed, total = left_out(sizes, steps, worker_batch)
    if not total or missed <= LEFT_OUT_WARNING * total:
        return None
    return (f"Each epoch trains on {total - missed} of the {total} training images and leaves out "
            f"{100 * missed / total:.1f}% of them: every one of the {len(sizes)} workers takes {steps} steps of "
            f"{worker_batch} images, as many as the smallest partition ({min(sizes)} images) fills, and partitions "
            "are whole categories. Each worker's files are reshuffled every epoch, so different images are left out "
            "each time; to leave out fewer, train on fewer workers (as many partitions, one a worker).")


def batch_within_images(batch_size: int, accumulate_steps: int, topology: Topology, steps: Steps) -> int | None:
    """The largest ``batch_size`` whose step (``batch_size`` x ``accumulate_steps`` on each of a worker's replicas)
    the images an epoch's steps are counted from hold (``steps.fill``), with a warning saying it, when ``batch_size``
    is beyond it: a step would repeat images to fill a batch it can never fill, and take its memory (Keras trains one
    batch of every image likewise); None when it is within them, or the steps were asked for. The same on every
    worker (the smallest partition's images); an :class:`AlexnetError` when even a ``batch_size`` of 1 is beyond."""
    if steps.fill is None:
        return None
    images, holder = steps.fill
    per_batch = accumulate_steps * topology.local_replicas
    if batch_size * per_batch <= images:
        return None
    fits = images // per_batch
    if fits < 1:
        raise AlexnetError(f"A step takes at least {per_batch} images on each worker (`accumulate_steps` = "
                           f"{accumulate_steps} batches on each of its {topology.local_replicas} replica(s)), more "
                           f"than the {images} {holder} holds: give `accumulate_steps` of at most "
                           f"{max(1, images // topology.local_replicas)}, or more training images.")
    if topology.chief:
        logger.warning("`batch_size` = %d makes a step of %d images on each worker (`batch_size` x "
                       "`accumulate_steps`), more than the %d %s holds: the run trains with `batch_size` = %d, the "
                       "largest these images fill; give a `batch_size` of at most %d, or more training images.",
                       batch_size, batch_size * per_batch, images, holder, fits, fits)
    return fits


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


def weights_agree(strategy: tf.distribute.Strategy, digest: str, topology: Topology) -> bool:
    """Whether every worker ends with the chief's weights: the first 60 bits of each worker's ``digest``
    (``weights_sha256``) compared, and a warning naming the workers whose weights differ.

    Every update is the same on every worker, so their weights stay equal bit for bit; a worker whose weights
    differ holds another model than the one the chief saves and publishes. A collective: every worker calls it
    at the same point, after training. ``True`` with one worker.
    """
    rows = all_gather_ints(strategy, [int(digest[:15], 16), int(topology.chief), topology.worker_index])
    chief = {int(row[0]) for row in rows if row[1]}
    if not chief:  # no chief task: the first worker's
        chief = {int(rows[0][0])}
    apart = sorted({("chief" if row[1] else f"worker {int(row[2])}") for row in rows if int(row[0]) not in chief})
    if apart:
        own = f" (weights_sha256 {digest[:12]}...)" if topology.chief else ""
        logger.warning("The workers ended with different weights: %s %s weights other than the chief's, whose model "
                       "is the one saved and published%s. Their updates should have been the same bit for bit: the "
                       "history says weights_agree = false.", ", ".join(apart), "holds" if len(apart) == 1 else "hold",
                       own)
    return not apart


def agree_on_classes(strategy: tf.distribute.Strategy, class_ids: Sequence[str], topology: Topology) -> None:
    """Raise on every worker unless all of them name the classes alike (``class_ids``, by label): a run that starts
    from a trained model (``initial_model``) finds that model's classes by id, and workers that named them
    differently would start from different weights. A collective: every worker calls it at the same point."""
    digest = hashlib.sha256("\n".join(class_ids).encode()).hexdigest()
    rows = all_gather_ints(strategy, [int(digest[:15], 16), topology.worker_index])
    apart = sorted({int(row[1]) for row in rows if int(row[0]) != int(rows[0][0])})
    if apart:
        raise AlexnetError(
            f"`initial_model`: the workers name their classes differently (worker {int(rows[0][1])} and worker(s) "
            f"{', '.join(map(str, apart))} differ), so they would take different last-layer weights from the initial "
            "model: give every worker's data the same `class_ids`, one per class in label order, as "
            "imagenet_partition() does."
        )
