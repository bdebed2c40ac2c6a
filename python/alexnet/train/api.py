"""``alexnet_train()``: AlexNet on a partition of ImageNet, on one device, several GPUs or several workers.

The steps, in order, each the job of its own module: check the arguments (:mod:`.settings`); resolve the
strategy, before any other TensorFlow work, as multi-worker training requires (:mod:`.strategy`); check every
image once and leave bad ones out (:mod:`alexnet.input.scan`); agree with the other workers on the steps per
epoch (:mod:`.agreement`); build the tf.data pipelines (:mod:`alexnet.input.pipeline`); build and compile
AlexNet under the strategy's scope (:mod:`.model`); restore the last checkpoint when there is one
(:mod:`.checkpoint`); fit for the remaining epochs, checkpointing as it goes (:mod:`.callbacks`) and logging
for TensorBoard (:mod:`.tensorboard`); save the model with its card (:mod:`.card`), and publish it as a pin;
return the history as a plain dict. TensorFlow is imported by the call, not by this module.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import AlexnetError
from .cluster import DEFAULT_COLLECTIVE_TIMEOUT
from .settings import TrainSettings, check_settings, settings_params

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from ..input.inputs import TrainingData
    from ..model.card import ModelCard
    from .agreement import Steps
    from .checkpoint import Resume
    from .model import WarmupStepSchedule
    from .precision import Precision
    from .strategy import Topology

logger = logging.getLogger(__name__)

_METRICS = ("loss", "accuracy", "top5_accuracy", "val_loss", "val_accuracy", "val_top5_accuracy")
#: What each epoch trained with, kept in the history beside the metrics but not a result of the model (not in its card).
SCHEDULE = ("image_size", "learning_rate")


def weights_digest(model: keras.Model) -> str:
    """sha256 of every weight of ``model``, in order: equal on the workers of a synchronous run."""
    import numpy as np

    digest = hashlib.sha256()
    for weight in model.get_weights():
        array = np.ascontiguousarray(weight)
        digest.update(str((array.dtype.str, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _usable_data(data: Mapping[str, Any], settings: TrainSettings) -> tuple[TrainingData, list[str]]:
    """The images of ``data``, without those that cannot be decoded; and the bad ones."""
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


class _Datasets:
    """The training dataset of the image size being trained (made when first needed, dropped when the schedule
    moves on) and the validation dataset, at the last size."""

    def __init__(self, td: TrainingData, settings: TrainSettings, topology: Topology, steps: Steps):
        from ..input import pipeline

        self.td, self.settings, self.steps = td, settings, steps
        self.global_batch = topology.global_batch(settings.batch_size)
        self._train: dict[int, tf.data.Dataset] = {}
        self.validation = None
        if steps.validate:
            self.validation = pipeline.eval_dataset(
                td.val_files, td.val_labels, self.global_batch, settings.image_size, parallel=settings.parallel,
                cache=settings.cache, repeat=steps.validation is not None, drop_remainder=steps.validation is not None)

    def train(self, size: int) -> tf.data.Dataset:
        """Training batches of ``size`` pixels square."""
        from ..input import pipeline

        if size not in self._train:
            s = self.settings
            # only the current size is kept: with `cache`, each dataset holds its own copy of the compressed bytes
            self._train = {size: pipeline.train_dataset(self.td.files, self.td.labels, self.global_batch, size,
                                                       parallel=s.parallel, cache=s.cache, seed=s.seed,
                                                       area_range=s.area_range)}
        return self._train[size]


def _build(strategy: tf.distribute.Strategy, num_classes: int, settings: TrainSettings, topology: Topology,
           steps: int) -> tuple[keras.Model, Any, Precision, WarmupStepSchedule]:
    """AlexNet and its optimizer, made under ``strategy``'s scope and compiled, in the precision the hardware has
    (or the one asked for), with the learning rate scaled to the global batch."""
    from ..model.network import build_alexnet
    from . import model as alexnet_model
    from .precision import choose_precision, hardware
    from .settings import rate_plan

    precision = choose_precision(settings.precision, hardware(topology.gpu))
    xla = topology.gpu if settings.jit_compile is None else settings.jit_compile
    plan = rate_plan(settings, topology.global_batch(settings.batch_size))
    with strategy.scope():
        net = build_alexnet(num_classes, dense_units=settings.dense_units, dropout=settings.dropout,
                            grouped=settings.grouped, policy=precision.policy)
        schedule = alexnet_model.step_schedule(plan.peak, steps, plan.drop_epochs, warmup_epochs=plan.warmup_epochs,
                                               initial=plan.start)
        optimizer = alexnet_model.make_optimizer(schedule, settings.momentum, settings.weight_decay,
                                                 loss_scaled=precision.loss_scaled)
        alexnet_model.compile_alexnet(net, optimizer, num_classes, jit_compile=xla)
        optimizer.build(net.trainable_variables)
    logger.info("Precision %s (%s); learning rate %g (%g for a batch of 128, x%g)%s.", precision.name,
                precision.reason, plan.peak, plan.base, plan.factor,
                f", warmed up over {plan.warmup_epochs} epoch(s)" if plan.warmup_epochs else "")
    return net, optimizer, precision, schedule


def _fit(net: keras.Model, datasets: _Datasets, settings: TrainSettings, steps: Steps, start: Resume,
         callbacks: Sequence[Any]) -> None:
    """Fit from ``start`` to the last epoch, one ``fit`` per run of epochs at one image size; a run resumed
    mid-epoch finishes that epoch first, in a fit of the steps left (which is how the callbacks know the step;
    see :func:`.callbacks.epoch_step`)."""
    epoch, step = start.epoch, start.step

    traced: list[int] = []

    def fit(first: int, last: int, steps_per_epoch: int, size: int) -> None:
        if traced and traced[-1] != size:
            # a step traced for this size alone: Keras would otherwise relax the third shape it sees to any
            # size, a graph that runs slower than one of known shapes
            net.train_function = None
        traced.append(size)
        net.fit(datasets.train(size), epochs=last, initial_epoch=first, steps_per_epoch=steps_per_epoch,
                validation_data=datasets.validation, validation_steps=steps.validation, callbacks=list(callbacks),
                verbose=settings.verbose)

    if step > 0 and epoch < settings.epochs:
        fit(epoch, epoch + 1, steps.train - step, settings.size_at(epoch))
        epoch += 1
    for first, last, size in settings.size_segments(epoch, settings.epochs):
        if len(settings.image_sizes) > 1:
            logger.info("Epochs %d to %d at %d x %d pixels.", first + 1, last, size, size)
        fit(first, last, steps.train, size)
    if epoch >= settings.epochs and step == 0:
        logger.info("All %d epochs are already done in %s; nothing to train.", settings.epochs,
                    settings.checkpoint_dir)


def _history(settings: TrainSettings, topology: Topology, td: TrainingData, steps: Steps, start: Resume,
             metrics: dict[str, list[float]], precision: Precision, extra: dict[str, Any]) -> dict[str, Any]:
    from .settings import rate_plan

    plan = rate_plan(settings, topology.global_batch(settings.batch_size))
    ordered = {name: [float(v) for v in metrics[name]] for name in _METRICS if name in metrics}
    ordered.update({k: [float(x) for x in v] for k, v in metrics.items() if k not in ordered})
    params = {
        **settings_params(settings),
        "initial_epoch": start.epoch, "initial_step": start.step, "steps": steps.train,
        "global_batch_size": topology.global_batch(settings.batch_size), "num_classes": td.num_classes,
        "strategy": topology.name, "replicas": topology.replicas, "workers": topology.workers,
        "train_images": len(td.files), "val_images": len(td.val_files) if steps.validate else 0,
        "precision": precision.name, "precision_reason": precision.reason, "mixed_precision": precision.mixed,
        "lr_factor": plan.factor, "peak_learning_rate": plan.peak, "warmup_epochs": plan.warmup_epochs,
        "jit_compile": topology.gpu if settings.jit_compile is None else settings.jit_compile,
        "seconds": extra.pop("seconds"),
    }
    return {"params": params, "metrics": ordered, **extra}


def alexnet_train(
    batch_size: int = 32,
    epochs: int = 2,
    data: Mapping[str, Any] | None = None,
    strategy: str | tf.distribute.Strategy | None = None,
    parallel: int | None = None,
    *,
    image_size: int | Sequence[int] = 224,
    image_size_epochs: Sequence[int] | None = None,
    learning_rate: float = 0.01,
    lr_scaling: str = "linear",
    warmup_epochs: int | None = None,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    lr_drop_epochs: Sequence[int] = (30, 60, 80),
    checkpoint_dir: str | os.PathLike | None = None,
    model_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    steps_per_epoch: int | None = None,
    validation: bool = True,
    validation_steps: int | None = None,
    cache: bool = False,
    max_bad_fraction: float = 0.01,
    check_images: bool = True,
    seed: int | None = None,
    verbose: int = 1,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    area_range: tuple[float, float] = (0.08, 1.0),
    precision: str | None = None,
    mixed_precision: bool | None = None,
    jit_compile: bool | None = None,
    callbacks: Sequence[keras.callbacks.Callback] | None = None,
    collective_timeout: float | None = DEFAULT_COLLECTIVE_TIMEOUT,
    progress_file: str | None = None,
    log_dir: str | os.PathLike | None = None,
    log_every: int = 100,
    profile_steps: tuple[int, int] | None = None,
    model_pin: str | None = None,
    model_board: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Train AlexNet on ``data`` and return its history.

    ``data`` is the result of ``imagenet_partition()`` or a dict with ``image`` (paths), ``category``
    (one per image) and ``categories`` (see :func:`alexnet.input.inputs.training_data`); the model always has the
    *global* ``num_classes`` outputs. ``strategy`` is ``None``/``"default"`` (one device), ``"mirrored"`` (all
    GPUs here), ``"multi_worker"`` (all workers of ``TF_CONFIG``) or a ``tf.distribute.Strategy`` object.
    ``parallel`` is the number of images decoded at once (``None``: autotune).

    Batches: ``batch_size`` is per replica (per GPU, or per machine without GPUs); one step trains on the
    global batch ``batch_size * replicas``, where replicas count every device of every worker. With
    ``"multi_worker"`` over 16 machines of 4 GPUs and ``batch_size = 32``, a step trains on
    32 x 64 = 2048 images, 128 of them from each machine's own partition, and the gradients are
    averaged over all of them.
    An epoch is ``steps_per_epoch`` steps, by default as many whole batches as this machine's images
    fill (each pass over the images sees each once, in a new order; see
    :func:`alexnet.input.pipeline.train_dataset`). With several workers the default is the same on every
    worker: the smallest partition's images (from the partition sizes ``imagenet_partition()`` returns,
    else exchanged between the workers) over this machine's share of the global batch; workers with more
    images see a different subset of them in each epoch. Validation likewise runs the same number of steps
    everywhere, and only when every worker has validation images.

    Optimisation is the paper's: SGD, ``momentum`` 0.9, ``weight_decay`` 5e-4 added to the gradient
    (:class:`alexnet.train.model.DecayedSGD`), the rate divided by 10 at each epoch of ``lr_drop_epochs``.
    ``learning_rate`` is the rate for a global batch of 128, the paper's (0.01). With ``lr_scaling = "linear"``
    (the default) the rate follows the linear scaling rule of Goyal et al. (2017): it is multiplied by
    ``global batch / 128`` (0.04 for 16 workers of batch 32) and reached by a linear warm-up from
    ``learning_rate`` over ``warmup_epochs`` (default: 5 when the rate grows more than twice, else none; below a
    global batch of 128 the rate only shrinks, and a warm-up stays at the scaled rate);
    ``"none"`` keeps ``learning_rate`` whatever the batch. The history's ``learning_rate`` holds the rate of
    each epoch's last step.

    ``image_size`` is one image side (224, the paper's), or several trained in order (progressive resizing:
    ``(128, 160, 224)``): the epochs are split evenly among them, later sizes taking any left over, unless
    ``image_size_epochs`` gives the epochs at each size (``(4, 4, 2)``, adding up to ``epochs``). Small
    images make the early epochs several times cheaper; the last size is the one validation uses and the model
    card records. One model takes every size (AlexNet's last feature map is pooled to 6x6 whatever the input; see
    :mod:`alexnet.train.model`), and the history's ``image_size`` holds each epoch's size.

    ``precision`` is what the layers compute in: ``None`` (the hardware's: bfloat16 on a CPU with
    ``avx512_bf16`` or ``amx_bf16`` and on GPUs of compute capability 8.0 or more, float16 on older GPUs,
    float32 otherwise), ``"float32"``, ``"bfloat16"`` (mixed, float32 weights) or ``"float16"`` (mixed,
    loss-scaled); see :mod:`alexnet.train.precision`. The older ``mixed_precision`` flag maps onto it (``True``:
    float16, ``False``: float32). The history's ``params`` say which precision was used and why. On a GPU, XLA
    is on unless ``jit_compile`` says otherwise.

    Validation images (``val_image`` in ``data``, when ``validation``) are evaluated after each epoch,
    centre-cropped. Images are checked once before training (``check_images``): bad ones are skipped and
    listed in ``bad_images``; more than ``max_bad_fraction`` of them raises
    :class:`~alexnet.errors.BadImagesError` naming them.

    ``checkpoint_dir`` (a folder, ``file://``, ``gs://`` or ``s3://``, like a board): a checkpoint is written
    after every epoch and, with ``checkpoint_every``, every that many steps inside an epoch; running again
    with the same ``checkpoint_dir`` resumes where the last checkpoint was written, and the returned history
    covers every epoch. ``model_dir`` (same kinds of string; default: ``checkpoint_dir``) receives the trained
    model as ``alexnet.keras``, with its card beside it as ``alexnet-model.json``
    (:class:`alexnet.model.card.ModelCard`: image size, the id and name of every class by label, epochs done,
    final metrics, the data's board and ``categories`` version, weights digest, creation time). A location
    that cannot be written is an error before any training.

    ``model_pin`` (a pin name, such as ``"alexnet"``): after training, the model is saved without its
    optimizer state (what inference needs; resuming is the checkpoints' job) and published as a new version of
    that pin on ``model_board`` (default: the board ``data`` came from), with the card, its kind (``model``),
    and the file's SHA-256 and size as the pin's metadata. The name must not be one of the data board's own
    pins (``categories``, ``bad_images``, a WordNet id, ``val-<wnid>``), and the board must be writable:
    both are checked before training.

    ``log_dir`` (same kinds of string as ``checkpoint_dir``) receives TensorBoard event files: per epoch
    ``epoch/loss``, ``epoch/accuracy``, ``epoch/top5_accuracy`` (with more than 5 classes), the ``val_`` ones,
    ``epoch/learning_rate``, ``epoch/images_per_second`` and ``epoch/image_size``; every ``log_every`` steps
    ``step/loss``, ``step/accuracy``, ``step/learning_rate`` and ``step/images_per_second``, at the global step (which
    continues across resumed runs). ``profile_steps = (first, last)`` (R: ``c(first, last)``) runs
    TensorFlow's profiler over those steps of this call (counted from 1), into ``plugins/profile/`` under
    ``log_dir``. Logs on a bucket are uploaded after each epoch and at the end (see
    :mod:`alexnet.train.tensorboard`). Watch with ``pip install alexnet[tensorboard]`` and
    ``tensorboard --logdir <log_dir>`` (TensorBoard reads a folder and ``gs://``; copy ``s3://`` logs to a folder).

    ``cache`` keeps the compressed image bytes in memory after the first epoch. ``dense_units``,
    ``dropout`` and ``grouped`` change the model (see :func:`alexnet.model.network.build_alexnet`);
    ``area_range`` is the share of each image that a random training crop covers (see
    :func:`alexnet.input.decode.decode_for_training`); ``callbacks`` are extra Keras callbacks;
    ``progress_file`` is where the chief reports its progress as lines of JSON while it trains (a file path,
    or ``tcp://host:port`` of a launcher's monitor).

    Several workers: ``strategy = "multi_worker"`` reads ``TF_CONFIG`` (see :mod:`alexnet.train.cluster`)
    and bounds every collective operation by ``collective_timeout`` seconds, so that a worker that died
    makes the others fail instead of waiting for ever (a ``MultiWorkerMirroredStrategy`` object keeps its
    own communication options). Only the chief (worker 0) keeps checkpoints, the model, its card and pin,
    and TensorBoard logs; for a resumable multi-worker run, ``checkpoint_dir`` must be storage every worker
    reaches (a bucket, or the same path on a shared file system), as every worker restores from it.

    Returns a dict: ``params`` (settings and sizes), ``metrics`` (per-epoch lists: ``loss``,
    ``accuracy``, ``top5_accuracy`` and, with validation, ``val_loss``, ``val_accuracy``,
    ``val_top5_accuracy``), ``model_path`` (or ``None``), ``bad_images`` (paths) and
    ``images_per_second`` (training images per second on this machine, over the epochs after the first
    when there are several), ``weights_sha256`` (a digest of the final weights, the same on every
    worker of a multi-worker run), ``card`` (the model card as a dict) and ``model_pin`` (``board``,
    ``name`` and ``version`` of the pin written, or ``None``).
    """
    arguments = dict(locals())
    if data is None:
        raise AlexnetError(
            "`data` is missing: pass the result of imagenet_partition(partition, total, board), or a list "
            "with `image`, `category` and `categories`."
        )
    settings = check_settings(arguments)
    from .strategy import resolve_strategy, topology

    resolved = resolve_strategy(strategy, collective_timeout=settings.collective_timeout)  # before other TF work
    return _train(resolved, topology(resolved), data, settings, list(callbacks or []))


def check_train_schedule(train_args: Mapping[str, Any]) -> None:
    """The epochs, image sizes, learning-rate scaling and precision of ``train_args`` (arguments of
    :func:`alexnet_train` by name, the others taking its defaults) checked together, before any data is fetched
    or job launched: the same rules as the call itself (:func:`.settings.check_schedule`)."""
    import inspect

    from .settings import check_schedule

    defaults = {name: p.default for name, p in inspect.signature(alexnet_train).parameters.items()}
    check_schedule({**defaults, **train_args})


def _card(td: TrainingData, data: Mapping[str, Any], settings: TrainSettings,
          metrics: Mapping[str, list[float]], digest: str) -> ModelCard:
    """The card of the model trained on ``td``: its classes, input size, training and data."""
    from ..model.card import ModelCard, now

    def text(name: str) -> str | None:
        value = data.get(name)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        return None if value is None else str(value)

    return ModelCard(image_size=settings.image_size, num_classes=td.num_classes, class_ids=list(td.class_ids),
                     class_names=list(td.class_names), epochs=len(metrics.get("loss") or []) or settings.epochs,
                     metrics={name: float(values[-1]) for name, values in metrics.items()
                              if values and name not in SCHEDULE},
                     board=text("board"), categories_version=text("categories_version"), weights_sha256=digest,
                     created=now())


def _publish(net: keras.Model, settings: TrainSettings, topo: Topology, card: ModelCard) -> dict[str, str] | None:
    """Publish ``net`` without its optimizer state as pin ``settings.model_pin`` (the chief; every worker saves)."""
    from ..model.pin import publish_model
    from ..model.saved import inference_copy

    if settings.model_pin is None or (not topo.chief and topo.workers == 1):
        return None
    with inference_copy(net) as local:
        if not topo.chief:
            return None
        pin = publish_model(settings.model_board, settings.model_pin, local, card)
    logger.info("Published the model as pin %s version %s on %s.", pin["name"], pin["version"], pin["board"])
    return pin


def _train(strategy: tf.distribute.Strategy, topo: Topology, data: Mapping[str, Any], settings: TrainSettings,
           extra_callbacks: list[Any]) -> dict[str, Any]:
    from ..model.saved import save_model
    from . import callbacks as cb
    from .agreement import agree_on_steps, check_agreement
    from .checkpoint import CheckpointStore, Resume
    from .strategy import collective_timeout_of
    from .tensorboard import LogDir, TensorBoardLog

    if topo.workers > 1 and collective_timeout_of(strategy) is None:
        logger.warning(
            "This MultiWorkerMirroredStrategy has no collective timeout: if a worker dies, the others may wait "
            "until TensorFlow's own peer check gives up. Pass strategy = 'multi_worker' (timeout: "
            "collective_timeout), or build it with communication_options=CommunicationOptions(timeout_seconds=...).")
    td, bad = _usable_data(data, settings)
    if settings.seed is not None:
        from ..tfimport import keras

        keras.utils.set_random_seed(settings.seed)
    worker_batch = topo.worker_batch(settings.batch_size)
    steps = agree_on_steps(strategy, topo, data, td, worker_batch, settings.steps_per_epoch, settings.validation,
                           settings.validation_steps)
    datasets = _Datasets(td, settings, topo, steps)
    net, optimizer, precision, schedule = _build(strategy, td.num_classes, settings, topo, steps.train)
    model_settings = {"num_classes": td.num_classes, **settings.model_settings()}
    store = (CheckpointStore(settings.checkpoint_dir, chief=topo.chief, steps=steps.train,
                             settings={**model_settings, "epochs": settings.epochs, "steps": steps.train,
                                       "global_batch_size": topo.global_batch(settings.batch_size)})
             if settings.checkpoint_dir else None)
    start = Resume()
    board_log: TensorBoardLog | None = None
    try:
        if store is not None:
            start = store.restore(net, optimizer, checked=model_settings)
        if topo.workers > 1:
            check_agreement(strategy, (start.epoch, start.step), steps, settings.checkpoint_dir)

        def schedule_of(epoch: int) -> dict[str, float]:  # what the epoch trained with, kept in the metrics
            last_step = (epoch + 1) * steps.train - 1
            return {"image_size": settings.size_at(epoch), "learning_rate": schedule.rate(last_step)}

        recorder = cb.Recorder(steps.train, metrics=start.metrics, store=store, every=settings.checkpoint_every,
                               facts=schedule_of)
        throughput = cb.Throughput()
        callbacks: list[Any] = [recorder, throughput, *extra_callbacks]
        if settings.progress_file and topo.chief:
            callbacks.append(cb.Progress(cb.progress_writer(settings.progress_file), epochs=settings.epochs,
                                         steps=steps.train, worker_batch=worker_batch, workers=topo.workers))
        if settings.log_dir and topo.chief:
            board_log = TensorBoardLog(LogDir(settings.log_dir), steps=steps.train, every=settings.log_every,
                                       images_per_step=topo.global_batch(settings.batch_size),
                                       num_classes=td.num_classes, profile_steps=settings.profile_steps,
                                       sizes=settings.size_at)
            callbacks.append(board_log)
        logger.info("Training AlexNet: %d images, %d classes, %d epochs of %d steps, global batch %d on %d "
                    "replica(s) (%s).", len(td.files), td.num_classes, settings.epochs, steps.train,
                    topo.global_batch(settings.batch_size), topo.replicas, topo.name)
        began = time.perf_counter()
        _fit(net, datasets, settings, steps, start, callbacks)
        seconds = time.perf_counter() - began
    finally:
        if store is not None:
            store.close()
        if board_log is not None:
            board_log.close()
    digest = weights_digest(net)
    card = _card(td, data, settings, recorder.metrics, digest)
    model_path = save_model(net, settings.model_dir, chief=topo.chief, workers=topo.workers, card=card)
    model_pin = _publish(net, settings, topo, card)
    return _history(settings, topo, td, steps, start, recorder.metrics, precision, {
        "seconds": float(seconds), "model_path": model_path, "bad_images": list(bad),
        "images_per_second": throughput.images_per_second(worker_batch), "weights_sha256": digest,
        "card": card.to_dict(), "model_pin": model_pin})
