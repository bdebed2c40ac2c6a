"""``alexnet_train()``: AlexNet on a partition of ImageNet, on one device, several GPUs or several workers.

The call checks its settings once (:func:`.settings_check.check_settings`, against the declaration its signature is
made from) and hands them, typed, to :func:`train`, which the command line and the Spark workers call directly
with settings already checked. The run itself is :mod:`.run`'s. TensorFlow is imported by the run, not by this
module.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..declare import declaration
from ..errors import AlexnetError
from ..result import returns_result
from .settings import TrainSettings, check_names, specs
from .settings_check import check_settings
from .strategy import check_strategy

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from .run import Evaluate

#: The arguments of ``alexnet_train`` that are not settings: what it trains on, how, and extra callbacks.
NOT_SETTINGS = ("data", "strategy", "callbacks")
#: The arguments that may be given by position, in order (the original r-tensorflow/alexnet's).
POSITIONAL = ("batch_size", "epochs", "data", "strategy", "parallel")


def _signature() -> inspect.Signature:
    """``alexnet_train``'s signature: :data:`POSITIONAL` first, then every other setting by keyword, then
    ``callbacks``; each setting with the declaration's default and type."""
    settings = {p.name: p for p in declaration.parameters(TrainSettings, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    extra = {"data": ("Mapping[str, Any] | None", None), "strategy": ("str | tf.distribute.Strategy | None", None),
             "callbacks": ("Sequence[keras.callbacks.Callback] | None", None)}
    for name, (annotation, default) in extra.items():
        settings[name] = inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                           annotation=annotation)
    positional = [settings[name] for name in POSITIONAL]
    keywords = [settings[name].replace(kind=inspect.Parameter.KEYWORD_ONLY)
                for name in (*specs(), "callbacks") if name not in POSITIONAL]
    return inspect.Signature([*positional, *keywords], return_annotation="dict[str, Any]")


SIGNATURE = _signature()


@returns_result
def alexnet_train(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Train AlexNet on ``data`` and return its history.

    ``data`` is the result of ``imagenet_partition()`` or a dict with ``image`` (paths), ``category``
    (one per image) and ``categories`` (see :func:`alexnet.input.inputs.training_data`); the model always has the
    *global* ``num_classes`` outputs. ``strategy`` is ``None``/``"default"`` (one device), ``"mirrored"`` (all
    GPUs here), ``"multi_worker"`` (all workers of ``TF_CONFIG``) or a ``tf.distribute.Strategy`` object.
    ``parallel`` is the number of images decoded at once (``None``: one per CPU this process may use).

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
    images see a different subset of them in each epoch.

    Optimisation is the paper's: SGD, ``momentum`` 0.9, ``weight_decay`` 5e-4 added to the gradient, a change
    of rate taking effect at once (:class:`alexnet.train.model.DecayedSGD`), on labels smoothed by
    ``label_smoothing`` (0.1; 0 is the paper's hard labels). After any warm-up the rate follows ``lr_schedule``:
    ``"linear"`` (the default) straight down to zero at the last step, ``"cosine"`` down to zero along half a
    cosine, ``"step"`` divided by 10 at each epoch of ``lr_drop_epochs``, ``"plateau"`` divided by 10 when
    validation top-1 has not improved for ``patience`` epochs (the paper's rule; every worker decides alike, from
    the history, and a resumed run continues the same curve; see :mod:`alexnet.train.schedule`).
    ``learning_rate`` is the rate for a global batch of 128, the paper's (0.01). With ``lr_scaling = "linear"``
    (the default) the rate follows the linear scaling rule of Goyal et al. (2017): it is multiplied by
    ``global batch / 128`` (0.04 for 16 workers of batch 32) and reached by a linear warm-up from
    ``learning_rate`` over ``warmup_epochs`` (default: 5, at most half the epochs, when the rate grows more than
    twice, else none; below a global batch of 128 the rate only shrinks, and a warm-up stays at the scaled rate);
    ``"none"`` keeps ``learning_rate`` whatever the batch. The rate is set before every step; the history's
    ``schedule`` holds the rate of each epoch's last step.

    ``image_size`` is one image side (224, the paper's), or several trained in order (progressive resizing:
    ``(128, 160, 224)``): the epochs are split evenly among them, later sizes taking any left over, unless
    ``image_size_epochs`` gives the epochs at each size (``(4, 4, 2)``, adding up to ``epochs``). Small
    images make the early epochs several times cheaper; the last size is the one validation uses and the model
    card records. One model takes every size (AlexNet's last feature map is pooled to 6x6 whatever the input; see
    :mod:`alexnet.model.network`), and the history's ``schedule`` holds each epoch's size
    (:mod:`alexnet.train.schedule`).

    ``precision`` is what the layers compute in: ``None`` (measured: where the hardware has more than float32,
    a few training steps of this model are timed in each format, in a child process, and a 16-bit one is taken
    only when it is at least 1.1 times as fast; remembered per machine, see :mod:`alexnet.train.measure`; the
    workers of a cluster agree on one, else float32), ``"float32"``, ``"bfloat16"`` (mixed, float32 weights) or
    ``"float16"`` (mixed, loss-scaled); see :mod:`alexnet.train.precision`. The older ``mixed_precision`` flag maps
    onto it (``True``: float16, ``False``: float32). The history's ``params`` say which precision was used, why, and
    the rates measured. ``jit_compile`` compiles the training step with XLA; unset, it is on for a run of one GPU
    only: off on CPUs, and off under ``"multi_worker"`` and with several replicas, where XLA-compiled steps that
    all-reduce the gradients have failed (tensorflow/tensorflow#58961, #45940); ``params``' ``jit_compile`` and
    ``jit_compile_reason`` say which and why.

    Validation images (``val_image`` in ``data``, when ``validation``) are scored after each epoch as
    :func:`alexnet.alexnet_evaluate` scores them with ``crops = 1``: the centre crop at the last image size, in
    order, every image once (see :mod:`alexnet.train.validation`). With several workers, or several replicas,
    every worker scores its own validation images and the counts are added over all of them: ``val_accuracy``,
    ``val_top5_accuracy`` and ``val_loss`` (the mean loss per image) are over every worker's validation images,
    each counted once, the same on every worker. Every worker runs as many validation steps as the largest
    share fills, the smaller shares padded with images that count for nothing (at most one batch of padding
    beyond the largest share); ``validation_steps`` caps the steps, each worker then scoring its first
    ``validation_steps * batch_size * replicas here`` images. Validation runs when any worker has validation
    images. Images are checked once before training (``check_images``): bad ones are skipped and listed in
    ``bad_images``; more than ``max_bad_fraction`` of them raises :class:`~alexnet.errors.BadImagesError` naming
    them. Validation never skips an image: one that still cannot be decoded stops the run, naming the problem.

    ``checkpoint_dir`` (a folder, ``file://``, ``gs://`` or ``s3://``, like a board): a checkpoint is written
    after every epoch and, with ``checkpoint_every``, every that many steps inside an epoch; running again
    with the same ``checkpoint_dir`` resumes where the last checkpoint was written, and the returned history
    covers every epoch. The learning rate and the optimizer's state go on as they were; with ``seed``, so do the
    images each step takes, their order, crops and colour noise, and the dropout masks, functions of the seed and the
    step alone, so that a run resumed after an epoch or inside one goes on as the run would have without the stop (on
    one CPU process, where two runs of a seed end alike, to the same losses and weights; an image skipped as
    unreadable moves the images after it in the run that skipped it alone). Without ``seed``, the images after the
    resume come in a new random order. A run resumed inside an epoch counts that epoch's training loss and accuracy
    over its steps after the resume alone. Once every epoch asked for is done, running again
    trains nothing and measures no link: it returns the run as it ended (its history as its checkpoints recorded it,
    on a worker other than the chief with its own ``train_images`` and ``worker_val_images``; its model, left as it
    is where the run saved it, else saved from the last checkpoint; its ``model_pin`` version when the pin's newest
    holds these weights, rather than a second one) and logs so; a larger ``epochs`` trains further. ``model_dir``
    (same kinds of string; default: ``checkpoint_dir``) receives the trained model as ``alexnet.keras``, with its
    card beside it as ``alexnet-model.json``
    (:class:`alexnet.model.card.ModelCard`: image size, the id and name of every class by label, epochs done,
    final metrics, the data's board and ``categories`` version, weights digest, creation time). A location
    that cannot be written is an error before any training.

    ``model_pin`` (a pin name, such as ``"alexnet"``): after training, the model is saved without its
    optimizer state (what inference needs; resuming is the checkpoints' job) and published as a new version of
    that pin on ``model_board`` (default: the board ``data`` came from), with the card, its kind (``model``),
    and the file's SHA-256 and size as the pin's metadata. The name must not be one of the data board's own
    pins (``categories``, ``bad_images``, a WordNet id, ``val-<wnid>``), and the board must be writable:
    both are checked before training. With ``keep_best`` (it needs validation images) the model saved, its card
    (``best_epoch``) and its pin are those of the epoch with the best validation top-1, kept beside the
    checkpoints so that a resumed run still knows it; without, the last epoch's. ``model_format =
    "keras+savedmodel"`` (or ``"keras+tflite"``) puts the model's :func:`alexnet.alexnet_export` (the top 5 classes
    per image, in float32) into the same pin version, beside ``alexnet.keras``: what serves it without this package.

    ``log_dir`` (same kinds of string as ``checkpoint_dir``) receives TensorBoard event files: per epoch
    ``epoch/loss``, ``epoch/accuracy``, ``epoch/top5_accuracy`` (with more than 5 classes), the ``val_`` ones,
    ``epoch/learning_rate``, ``epoch/images_per_second`` and ``epoch/image_size``; every ``log_every`` steps
    ``step/loss``, ``step/accuracy``, ``step/learning_rate`` and ``step/images_per_second``, at the global step (which
    continues across resumed runs). ``profile_steps = (first, last)`` (R: ``c(first, last)``) runs
    TensorFlow's profiler over those steps of this call (counted from 1), into ``plugins/profile/`` under
    ``log_dir``. Logs on a bucket are uploaded after each epoch and at the end (see
    :mod:`alexnet.train.tensorboard`). Watch with ``tensorboard --logdir <log_dir>``, which the core's
    ``tensorboard`` extra installs (TensorBoard reads a folder and ``gs://``; copy ``s3://`` logs to a folder).

    ``cache`` keeps the compressed image bytes in memory after the first epoch. ``dense_units``,
    ``dropout`` and ``grouped`` change the model (see :func:`alexnet.model.network.build_alexnet`);
    ``area_range`` is the share of each image that a random training crop covers and ``lighting`` the strength of
    the AlexNet paper's PCA colour noise (see :func:`alexnet.input.decode.decode_for_training`); ``callbacks``
    are extra Keras callbacks (each is given the model the run ends with, with ``set_model``, also when no epoch
    was left to train; they come after the run's own, so that what they add to an epoch's logs is in neither the
    history nor TensorBoard's log);
    ``progress_file`` is where the chief reports its progress as lines of JSON while it trains (a file path,
    or ``tcp://host:port`` of a launcher's monitor).

    Several workers: ``strategy = "multi_worker"`` reads ``TF_CONFIG`` (see :mod:`alexnet.train.cluster`)
    and bounds each step, validation step, average and agreement of the workers by ``collective_timeout`` seconds
    (two minutes more for a first one, which may build its TensorFlow function first; one thread of the run keeps the
    bound, :mod:`alexnet.train.watchdog`), so that a worker that hangs makes the others fail instead of waiting for
    ever (with one :class:`~alexnet.train.lost.WorkerLostError` naming
    the worker lost, what to give when a slow link starved it, and how to resume); a worker whose heartbeats stop
    for a minute (or ``collective_timeout``, if less) is declared lost, where TensorFlow alone allows 10 s, which a
    busy worker can miss. A ``MultiWorkerMirroredStrategy`` object keeps its own communication options and TensorFlow's
    heartbeat timeout; the run warns when it has no collective timeout, when it has one (TensorFlow keeps a thread
    sleeping for it per collective operation) or when it keeps the 10 s. A worker of
    ``"multi_worker"`` stops on SIGTERM as a run of one process does (TensorFlow's set-up would otherwise take the
    signal over and train on; see :func:`alexnet.train.joining.keeping_sigterm`). Only the chief
    (worker 0) keeps checkpoints, the model, its card and pin, and TensorBoard logs; for a resumable
    multi-worker run, ``checkpoint_dir`` must be storage every worker reaches (a bucket, or the same path on a
    shared file system), as every worker restores from it.

    Returns a dict: ``params`` (settings and sizes; ``train_images`` this worker's, ``val_images`` the
    validation images each epoch counts over every worker, ``worker_val_images`` this worker's share of them;
    ``communication`` and ``allreduce_bytes_per_step``: what the replicas exchange (the GPUs of a machine as the
    workers of a cluster: ``allreduce_precision`` and ``allreduce_pack_mb`` act between them), in words and in bytes
    each replica puts into the all-reduce a step (0 with one replica); with several workers ``allreduce_seconds`` and
    ``compute_seconds``: one step's exchange and computation, each timed alone before training
    (``allreduce_bytes_per_step`` and ``allreduce_seconds`` count local SGD's averages as the advice does: every one
    of an epoch, its end's and checkpoints' too, over its steps),
    ``sixteen_bit_allreduce_seconds``: with float32 on the wire, the same exchange timed in 16 bits,
    ``hidden_seconds``: on GPU workers that all-reduce their gradients every step, what of the exchange a step
    with packs hid, timed in the wire format the chief's timing advises and counted by the advice (CPU workers time
    none: what it hid there varied from probe to probe),
    ``communication_efficiency``, the share of linear scaling they give if none of the exchange overlaps, and
    below 0.9 ``advised_settings``, the settings that would send less in the order to take them (16-bit gradients
    where timed a tenth faster or more, packs where they overlap the backward pass,
    ``accumulate_steps`` up to a global batch of ``micro_batches_up_to`` (``largest_global_batch``, or unset
    1,024 on ImageNet's training images and as many times fewer on fewer), then local SGD, whose cost in accuracy
    is to be measured first), with
    ``communication_advice``, the same in words, logged as a warning when training starts; see
    :func:`alexnet.train.advice.advise`; and ``adapted_settings``, what the run took of that advice with
    ``adapt_communication = True``, the chief's decision on every worker, the settings, timings, estimate and advice
    in ``params`` being then those it trained with, and where it took 16-bit gradients, ``asked_allreduce_seconds``
    the exchange in float32 as asked, timed before it took them; a relaunch, which takes what its checkpoints
    recorded before it measures, times only the exchange it trains with, and its chief keeps the launch's
    ``asked_allreduce_seconds`` as they recorded it),
    ``metrics`` (per-epoch lists: ``loss``, ``accuracy``, ``top5_accuracy`` and, with validation, ``val_loss``,
    ``val_accuracy``, ``val_top5_accuracy`` and ``val_images``, the images they cover), ``schedule`` (what each
    epoch trained with, apart from the metrics: ``image_size`` and ``learning_rate`` per epoch, and ``summary``,
    the schedule on one line), ``model_path`` (or ``None``), ``bad_images`` (paths), ``skipped_images`` (the paths
    of the images this worker's pipeline could not read or decode during training and skipped, one by one: changed
    since the check before training; each is said as a warning at the end of its epoch, and more than
    ``max_bad_fraction`` of this worker's images stop the run with :class:`~alexnet.errors.BadImagesError`, on
    every worker at that epoch's end) and
    ``images_per_second``
    (training images per second on this machine, over the epochs after the first when there are several,
    validation left out; ``None`` when no step ran, as in a run that found every epoch trained before),
    ``weights_sha256`` (a digest of the final weights, the same on every
    worker of a multi-worker run), ``weights_agree`` (with several workers, whether every worker ended with the
    chief's weights, compared at the end; a warning names those that did not; ``None`` with one; a finished run
    given again returns the run's own, which its history file records, or compares them again when it saves the
    model from its last checkpoint), ``card`` (the
    model card as a dict) and ``model_pin`` (``board``, ``name`` and ``version`` of the pin written, or ``None``).

    Every setting, with its default (the declaration, :class:`alexnet.train.settings.TrainSettings`):
    """
    try:
        bound = SIGNATURE.bind(*args, **kwargs)
    except TypeError as error:
        check_names([name for name in kwargs if name not in NOT_SETTINGS])
        raise AlexnetError(f"alexnet_train(): {error}.") from None
    arguments = dict(bound.arguments)
    if isinstance(arguments.get("batch_size"), Mapping):  # alexnet_train(partition): the first argument is batch_size
        raise AlexnetError("`batch_size`, the first argument, was given a partition: pass it by name, as `data`, "
                           "or after `batch_size` and `epochs`.")
    data = arguments.pop("data", None)
    strategy = arguments.pop("strategy", None)
    callbacks = arguments.pop("callbacks", None)
    if data is None:
        raise AlexnetError(
            "`data` is missing: pass the result of imagenet_partition(partition, total, board), or a list "
            "with `image`, `category` and `categories`."
        )
    board = data.get("board") if isinstance(data, Mapping) else None
    if isinstance(board, (list, tuple)) and len(board) == 1:
        board = board[0]
    check_strategy(strategy)  # a name, before TensorFlow is imported to resolve it
    extra = check_callbacks(callbacks)  # before the settings' checks, which make the output folders
    settings = check_settings(arguments, data_board=None if board is None else str(board))
    return train(settings, data, strategy, extra)


def check_callbacks(callbacks: Any) -> list[Any]:
    """``callbacks`` (None, one Keras callback or a sequence of them) as a list of callbacks; an :class:`AlexnetError`
    naming what is not one, before any work (Keras would fail at the start of training)."""
    if callbacks is None:
        return []
    given = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
    for i, callback in enumerate(given):
        if not all(callable(getattr(callback, method, None)) for method in ("set_model", "on_epoch_end")):
            where = f"`callbacks` item {i + 1}" if isinstance(callbacks, (list, tuple)) else "`callbacks`"
            raise AlexnetError(f"{where} is a {type(callback).__name__}, not a Keras callback: give a list of "
                               "keras.callbacks.Callback objects (from R, Python objects made with reticulate).")
    return given


alexnet_train.__signature__ = SIGNATURE  # type: ignore[attr-defined]
declaration.record_declared(alexnet_train, TrainSettings)
alexnet_train.__doc__ = (alexnet_train.__doc__ or "").rstrip() + "\n\n" + declaration.help_lines(TrainSettings) + "\n"


def train(settings: TrainSettings, data: Mapping[str, Any], strategy: str | tf.distribute.Strategy | None = None,
          callbacks: Sequence[keras.callbacks.Callback] | None = None, evaluate: Evaluate | None = None
          ) -> dict[str, Any]:
    """:func:`alexnet_train` with its settings already checked (:func:`.settings_check.check_settings`): what the
    command line and the Spark workers call, so that nothing is checked twice. ``evaluate`` (a Spark training that ends
    with its evaluation) gives the evaluation the model's card records when it is saved (see :func:`.run.run`). A run
    of several workers that loses one ends with a :class:`.lost.WorkerLostError` saying so, TensorFlow's error as its
    cause."""
    from ..tfimport import root_logging_untouched
    from .lost import lost_in_run
    from .run import run
    from .strategy import resolve_strategy, topology

    resolved = resolve_strategy(strategy, collective_timeout=settings.collective_timeout)  # before other TF work
    topo = topology(resolved)
    try:
        with root_logging_untouched():  # TensorFlow's checkpoints log through absl (see root_logging_untouched)
            return run(resolved, topo, data, settings, list(callbacks or []), evaluate)
    except Exception as error:
        lost = lost_in_run(error, topo, settings)
        if lost is None:
            raise
        raise lost from error
