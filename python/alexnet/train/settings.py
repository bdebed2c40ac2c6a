"""The training settings, declared once: name, type, default, limits and help of every setting of a run.

:class:`TrainSettings` is the declaration. Each field is a setting of ``alexnet_train()``, in the order of its
signature, with its Python type and, through :func:`~alexnet.declare.declaration.setting`, a
:class:`~alexnet.declare.kinds.Spec`: the default a caller sees, the kind of value, its limits or choices, its help
text, and its command-line option. Everything else is derived from it (:mod:`alexnet.declare.declaration`): the
signature and help of :func:`alexnet.alexnet_train`, the command line's options, the argument kinds R checks
``alexnet_train()`` and ``alexnet_spark_train()`` with, the checks, and the typed settings a Spark worker receives.

:func:`alexnet.train.settings_check.check_settings` is the one check: every value converted and held to its limits,
the settings checked against each other, output locations proven writable and a model pin's board opened, before any
data is fetched or Spark job launched. Its result travels as plain values (:meth:`TrainSettings.to_dict`) and comes
back typed (:meth:`TrainSettings.from_dict`) without being checked again. This module does not import TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..checks import MIN_IMAGE_SIZE, seconds_words
from ..declare import declaration
from ..declare.declaration import setting
from ..declare.kinds import Spec, UsedWith
from ..model.options import check_model_pin
from ..model.pin import MODEL_FORMATS
from .batch_bound import IMAGENET_TRAIN_IMAGES, LARGEST_GLOBAL_BATCH
from .cluster import DEFAULT_COLLECTIVE_TIMEOUT, HEARTBEAT_TIMEOUT, TRACE_GRACE
from .communication import WIRE_FORMATS
from .formats import RUN_LOCK_PATIENCE
from .initial import LEARNING_LAYERS
from .precision import PRECISIONS
from .schedule import (
    DEFAULT_WARMUP_EPOCHS,
    DROP_FACTOR,
    LR_SCALINGS,
    LR_SCHEDULES,
    MAX_PLATEAU_DROPS,
    REFERENCE_BATCH,
    WARMUP_ABOVE,
    RateSchedule,
    SizeSchedule,
    rate_schedule,
    split_epochs,
)

#: What each drop of the rate does, as the help says it ("divided by 10").
_DROPPED = f"divided by {1 / DROP_FACTOR:g}"
#: How many times the rate grows before a warm-up is the default, as the help says it ("twice").
_GROWN = "twice" if WARMUP_ABOVE == 2 else f"{WARMUP_ABOVE:g} times"


#: The settings every worker of a multi-worker run must be given alike (the workers check before they train:
#: :func:`alexnet.train.agreement.agree_on_settings`): what decides the collective operations each worker runs, in
#: order, shape and number format (the exchange's levers, the steps and epochs, validation, the model, its
#: precision and XLA, a trained start), and how every update follows from the gradients all-reduced (the batch,
#: the rate and its schedule, momentum and decay, which layers learn, the weights kept): a worker given another of
#: these would wait for ever for an exchange the others never start, fail with TensorFlow's error, or move away from
#: the others' weights. The seed, the images' augmentation, dropout and where each worker writes may differ.
SHARED_BY_WORKERS = (
    "batch_size", "epochs", "image_size", "image_size_epochs", "learning_rate", "lr_scaling", "lr_schedule",
    "warmup_epochs", "momentum", "weight_decay", "lr_drop_epochs", "patience", "checkpoint_every", "steps_per_epoch",
    "validation", "validation_steps", "keep_best", "dense_units", "grouped", "initial_model", "train_from", "precision",
    "jit_compile", "allreduce_precision", "allreduce_pack_mb", "accumulate_steps", "sync_every", "local_sgd_after",
    "adapt_communication",
)

#: The settings that change what a run learns from its images, beyond the model itself (:meth:`TrainSettings.
#: model_settings`, which a checkpoint must match): the image sizes, the rate and its schedule, momentum and decay, the
#: labels' smoothing, dropout, the augmentation and local SGD. A run resumed with another of these learns what is left
#: otherwise than it began, and is warned (:func:`alexnet.train.resumed.warn_of_changes`). The batch and the
#: epochs, which change the schedule, are compared apart; those that change only how fast a run trains (precision,
#: XLA, the exchange's levers), where it writes, what it logs or which epoch's weights it keeps are not among them.
LEARNT_WITH = (
    "image_size", "image_size_epochs", "learning_rate", "lr_scaling", "lr_schedule", "warmup_epochs", "momentum",
    "weight_decay", "lr_drop_epochs", "patience", "label_smoothing", "dropout", "area_range", "lighting",
    "sync_every", "local_sgd_after",
)

#: The public reports of XLA-compiled training steps that fail when their gradients are all-reduced: between the
#: workers of a MultiWorkerMirroredStrategy (tensorflow/tensorflow#58961, tensorflow/models#10752) and between the
#: GPUs of one machine (tensorflow/tensorflow#45940): why XLA is not on by default there (:meth:`TrainSettings.xla`).
XLA_ALL_REDUCE_ISSUE = "tensorflow/tensorflow#58961, #45940"

#: What puts to use the settings of a model pin, and those of the TensorBoard logs.
_WITH_PIN = UsedWith("`model_pin`", "no model pin is written", lambda v: v["model_pin"] is not None)
_WITH_LOGS = UsedWith("`log_dir`", "nothing is logged for TensorBoard", lambda v: v["log_dir"] is not None)


@dataclass(frozen=True)
class TrainSettings:
    """Every setting of a training run, checked (the declaration: see the module documentation)."""

    batch_size: int = setting(32, "count", "images per batch on each replica (GPU, or worker without GPUs); the "
                              "global batch is this times the replicas. A step of more images than a worker's epoch "
                              "holds is taken down to the largest they fill, with a warning", minimum=1)
    epochs: int = setting(2, "count", "passes over the data", minimum=1)
    parallel: int | None = setting(None, "count", "images decoded at once (unset: one per CPU this process may use)",
                                   minimum=1, optional=True)
    image_size: tuple[int, ...] = setting(
        224, "sizes", f"image side in pixels (at least {MIN_IMAGE_SIZE}; 224, the paper's), or several trained in "
        "order (128, 160, 224)", minimum=MIN_IMAGE_SIZE, metavar="PIXELS")
    image_size_epochs: tuple[int, ...] | None = setting(
        None, "counts", "epochs at each size of `image_size`, adding up to `epochs` (unset: split evenly, later "
        "sizes taking the epochs left over)", minimum=1, optional=True, metavar="N")
    learning_rate: float = setting(0.01, "number", f"the learning rate for a global batch of {REFERENCE_BATCH} "
                                   "(the paper's 0.01), scaled with the batch by `lr_scaling`", above=0.0)
    lr_scaling: str = setting("linear", "choice", "how the rate follows the global batch: \"linear\" multiplies "
                              f"`learning_rate` by global batch / {REFERENCE_BATCH} (reached by a warm-up), "
                              "\"none\" keeps it", choices=LR_SCALINGS)
    lr_schedule: str = setting("linear", "choice", "how the rate ends after the warm-up: \"linear\" straight down to "
                               "zero at the last step, \"cosine\" down to zero along half a cosine, \"step\" "
                               f"{_DROPPED} at `lr_drop_epochs`, \"plateau\" {_DROPPED} when the validation top-1 "
                               "has not improved for `patience` epochs (the paper)", choices=LR_SCHEDULES)
    warmup_epochs: int | None = setting(None, "count", "epochs of linear warm-up to the scaled rate (unset: "
                                        f"{DEFAULT_WARMUP_EPOCHS}, at most half the epochs, when the rate grows more "
                                        f"than {_GROWN}, else 0)", minimum=0, optional=True)
    momentum: float = setting(0.9, "number", "SGD momentum", minimum=0.0, maximum=1.0)
    weight_decay: float = setting(5e-4, "number", "L2 weight decay added to the gradient of every kernel",
                                  minimum=0.0)
    lr_drop_epochs: tuple[int, ...] = setting((30, 60, 80), "counts", "with lr_schedule = \"step\": epochs (0-based) "
                                              f"at whose start the rate is {_DROPPED} (from 1: epoch 0 starts at the "
                                              "peak)", minimum=1, metavar="EPOCH",
                                              used_with=UsedWith("lr_schedule = 'step'",
                                                                 "the rate is not dropped at set epochs",
                                                                 lambda v: v["lr_schedule"] == "step"))
    patience: int = setting(2, "count", "with lr_schedule = \"plateau\": epochs without a better validation top-1 "
                            f"before the rate is {_DROPPED}, {MAX_PLATEAU_DROPS} times at most (the paper's)",
                            minimum=1,
                            used_with=UsedWith("lr_schedule = 'plateau'", "the rate is not dropped when the "
                                               "validation top-1 stalls", lambda v: v["lr_schedule"] == "plateau"))
    label_smoothing: float = setting(0.1, "number", "the share of each label's probability spread evenly over all "
                                     "classes (0: the paper's hard labels)", minimum=0.0, below=1.0)
    checkpoint_dir: str | None = setting(None, "location", "checkpoints, to resume after an interruption (one "
                                         "run at a time, in a folder or a bucket: a second waits up to "
                                         f"{seconds_words(RUN_LOCK_PATIENCE)} for it, then stops)", optional=True,
                                         output=True)
    model_dir: str | None = setting(None, "location", "where the trained model is saved (unset: "
                                    "`checkpoint_dir`), replacing one there (said before the run); not another "
                                    "run's folder of checkpoints, whose model it would replace", optional=True,
                                    output=True)
    checkpoint_every: int | None = setting(None, "count", "also checkpoint every this many steps inside an epoch "
                                           "(needs `checkpoint_dir`); a run resumed from one goes on with the "
                                           "images of the steps after it (with `seed`, those the run would have "
                                           "taken, cropped alike), and that epoch's training metrics count its steps "
                                           "after the resume alone", minimum=1, optional=True)
    steps_per_epoch: int | None = setting(None, "count", "training steps per epoch (unset: as many whole batches "
                                          "as the images fill, at least one)", minimum=1, optional=True)
    validation: bool = setting(True, "flag", "evaluate the validation images (centre crop at the last image size) "
                               "after each epoch, every worker's, each once")
    validation_steps: int | None = setting(None, "count", "validation steps per epoch (unset: as many as every "
                                           "validation image once takes; set: at most this many, covering the first "
                                           "`validation_steps` x `batch_size` x its replicas of each worker's images)",
                                           minimum=1, optional=True,
        used_with=UsedWith("`validation`", "no validation is run", lambda v: v["validation"]))
    keep_best: bool = setting(False, "flag", "save, and publish, the weights of the epoch with the best validation "
                              "top-1 rather than the last epoch's (the model card says which epoch)")
    cache: bool = setting(False, "flag", "keep the compressed image bytes in memory after the first epoch (as much "
                          "memory as this worker's images take on disk: said when more than half of what is free)")
    max_bad_fraction: float = setting(0.01, "number", "the share of images that may be unusable (skipped) before "
                                      "training stops with an error naming them", minimum=0.0, maximum=1.0)
    check_images: bool = setting(True, "flag", "check every image once before training and skip the bad ones")
    seed: int | None = setting(None, "count", "random seed of the weights, of the order and crops of the images and of "
                               "the dropout masks, each step's a function of the seed and the step: a run resumed from "
                               "its checkpoints goes on as the run would have without the stop",
                               minimum=0, optional=True)
    verbose: int = setting(1, "count", "Keras fit verbosity (0 silent, 1 progress bar, 2 one line per epoch); 1 "
                           "gives a line per epoch too where no bars are drawn (ALEXNET_PROGRESS=0) or standard "
                           "output is not a terminal", minimum=0, maximum=2, option="--verbose-fit")
    dense_units: int = setting(4096, "count", "units of each of the two hidden dense layers (the paper's 4096)",
                               minimum=1)
    dropout: float = setting(0.5, "number", "dropout rate after each hidden dense layer", minimum=0.0, below=1.0)
    grouped: bool = setting(False, "flag", "split conv2, conv4 and conv5 into two groups, as the paper's two GPUs")
    initial_model: str | Mapping[str, Any] | None = setting(
        None, "model", "start from the weights of this trained model: the location of a model_dir or "
        "alexnet.keras, or, from R and Python, a model pin as alexnet_model returns it; its last layer's weights are "
        "kept for the classes both have and the other classes start afresh, so a model trained on ImageNet starts "
        "training on categories of your own (a resumed run, which must name the same model, takes its checkpoint's "
        "weights without reading it)", optional=True,
        metavar="MODEL")
    train_from: str = setting("conv1", "choice", "the first layer that learns: the layers before it keep the weights "
                              "they start with, those of `initial_model` (\"fc1\": only the dense layers learn, "
                              "\"logits\": only the last)", choices=LEARNING_LAYERS)
    area_range: tuple[float, float] = setting((0.08, 1.0), "shares", "the least and most share of an image that a "
                                              "random training crop covers", metavar="SHARE")
    lighting: float = setting(0.0, "number", "the AlexNet paper's colour augmentation: each training image's light "
                              "shifted along the three principal components of ImageNet's colours, by weights drawn "
                              "with this standard deviation (the paper's 0.1; 0: none)", minimum=0.0, maximum=1.0,
                              metavar="SD")
    precision: str | None = setting(None, "choice", "what the layers compute in (unset: the hardware's; "
                                    "bfloat16 and float16 are mixed precision)", choices=PRECISIONS, optional=True,
                                    none_word="auto", aliases={"fp32": "float32", "bf16": "bfloat16",
                                                               "fp16": "float16", "half": "float16",
                                                               "mixed_bfloat16": "bfloat16",
                                                               "mixed_float16": "float16"})
    mixed_precision: bool | None = setting(None, "flag", "the older form of `precision`: on means \"float16\", "
                                           "off \"float32\"", optional=True, option=None)
    jit_compile: bool | None = setting(None, "flag", "compile the training step with XLA (unset: on one GPU; off on "
                                       "CPUs, under multi_worker and with several replicas, where XLA-compiled steps "
                                       "that all-reduce the gradients have failed "
                                       f"({XLA_ALL_REDUCE_ISSUE}); set, on or off as asked)",
                                       optional=True)
    collective_timeout: float | None = setting(
        DEFAULT_COLLECTIVE_TIMEOUT, "seconds", "seconds a worker waits for the others in a step, validation step or "
        f"agreement ({seconds_words(TRACE_GRACE)} more for the first, which may build its function first), or for "
        "them all to join at the start, before failing (unset: for ever); a worker silent for as long, or for "
        f"{seconds_words(HEARTBEAT_TIMEOUT)} if less, is declared lost",
        optional=True, none_word="never")
    allreduce_precision: str = setting(
        "float32", "choice", "the number format of the gradients on the wire between replicas (the GPUs of a "
        "machine, and the workers): \"float32\", or \"bfloat16\" / \"float16\", half the bytes (each replica's "
        "gradients rounded to 16 bits and every partial sum of the all-reduce rounded again; the sum comes back as "
        "float32)", choices=WIRE_FORMATS,
        aliases={"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"})
    allreduce_pack_mb: float = setting(0.0, "number", "all-reduce the gradients between replicas in packs of about "
                                       "this many megabytes, last layer first, so that packs travel while the "
                                       "backward pass computes the rest (0: one all-reduce of every gradient after "
                                       "the backward pass)",
                                       minimum=0.0, metavar="MB")
    accumulate_steps: int = setting(1, "count", "micro-batches of `batch_size` whose gradients are added up before "
                                    "one all-reduce and optimizer step: a step trains `accumulate_steps` x "
                                    "`batch_size` images a replica, and the rate and schedules count these steps",
                                    minimum=1)
    sync_every: int = setting(1, "count", "local SGD: each worker takes this many optimizer steps alone, then the "
                              "workers average their weights and momentum (1: synchronous training, the gradients "
                              "all-reduced every step; one worker: nothing to average)", minimum=1)
    local_sgd_after: int = setting(0, "count", "with `sync_every` above 1: epochs trained synchronously before local "
                                   "SGD begins (post-local SGD: the models the workers train alone drift apart most "
                                   "while the rate is high, early in training)", minimum=0, metavar="EPOCHS",
                                   used_with=UsedWith("`sync_every` above 1", "every step is synchronous",
                                                      lambda v: v["sync_every"] > 1))
    adapt_communication: bool = setting(False, "flag", "with several workers: take what the measurement before "
                                        "training advises of 16-bit gradients, packs where they overlap the "
                                        "backward pass (on GPUs, and on CPUs with two or more inter-op threads) "
                                        "and `accumulate_steps` (up to `largest_global_batch`, and as many "
                                        "micro-batches as an epoch's whole steps take leaving out at most one "
                                        "batch in 20), as the chief decides, on every "
                                        "worker (local SGD, which changes what is learnt, is only advised; a "
                                        "resumed run keeps what it took when it began)")
    largest_global_batch: int | None = setting(
        None, "count", "with several workers: the largest global batch (images of one optimizer step over every "
        "worker) that the micro-batches advised before training, and taken by `adapt_communication`, may make "
        f"(unset: {LARGEST_GLOBAL_BATCH} on ImageNet's {IMAGENET_TRAIN_IMAGES:,} training images, the largest AlexNet "
        "keeps its accuracy at with the rate scaled linearly, and as many times fewer on fewer images, down to none; "
        f"it never stops a batch you set yourself, which the chief warns about beyond {LARGEST_GLOBAL_BATCH}, or "
        "beyond this bound when it is larger)", minimum=1, optional=True, metavar="IMAGES")
    progress_file: str | None = setting(None, "location", "where the chief reports progress as lines of JSON (a file, "
                                        "or tcp://host:port of a launcher's monitor)", optional=True, option=None)
    log_dir: str | None = setting(None, "location", "TensorBoard logs, watched with `tensorboard --logdir`",
                                  optional=True, output=True)
    log_every: int = setting(100, "count", "write step scalars to `log_dir` every this many steps", minimum=1,
                            used_with=_WITH_LOGS)
    profile_steps: tuple[int, int] | None = setting(None, "steps", "profile these training steps (first, last; "
                                                    "counted from 1) into `log_dir`", optional=True,
                                                    metavar=("FIRST", "LAST"), used_with=_WITH_LOGS)
    model_pin: str | None = setting(None, "pin", "after training, publish the model (without optimizer state) as "
                                    "a new version of this pin", optional=True, metavar="NAME", check=check_model_pin)
    model_board: str | None = setting(None, "location", "board of `model_pin` (unset: the board the data came "
                                      "from)", optional=True, metavar="BOARD",
                                      used_with=_WITH_PIN)
    model_format: str = setting("keras", "choice", "what `model_pin` carries: \"keras\", alexnet.keras (what "
                                "evaluation and prediction read); \"keras+savedmodel\" or "
                                "\"keras+tflite\", also its alexnet_export() beside it, for serving without this "
                                "package", choices=MODEL_FORMATS,
                                used_with=_WITH_PIN)

    @property
    def sizes(self) -> SizeSchedule:
        """The image sizes of the run and the epochs at each."""
        counts = self.image_size_epochs or split_epochs(len(self.image_size), self.epochs)
        return SizeSchedule(tuple(self.image_size), tuple(counts))

    @property
    def step_batch(self) -> int:
        """Images of one optimizer step on one replica: ``batch_size`` times ``accumulate_steps``."""
        return self.batch_size * self.accumulate_steps

    def rates(self, global_batch: int, steps_per_epoch: int) -> RateSchedule:
        """The learning rate of every step, for ``global_batch`` images a step and ``steps_per_epoch`` steps."""
        return rate_schedule(self.learning_rate, self.lr_scaling, self.warmup_epochs, self.lr_drop_epochs,
                             epochs=self.epochs, global_batch=global_batch, steps_per_epoch=steps_per_epoch,
                             kind=self.lr_schedule)

    def xla(self, gpu: bool, *, strategy: str = "default", replicas: int = 1) -> bool:
        """Is the training step compiled with XLA on ``gpu``s (or CPUs) under ``strategy`` (its short name) with
        ``replicas`` replicas in all (see :meth:`xla_choice`)?"""
        return self.xla_choice(gpu, strategy=strategy, replicas=replicas)[0]

    def xla_choice(self, gpu: bool, *, strategy: str = "default", replicas: int = 1) -> tuple[bool, str]:
        """Whether the training step is compiled with XLA, and why (the history's ``jit_compile_reason``):
        ``jit_compile`` when it is set; unset, on one GPU only: not on CPUs, and not under ``multi_worker`` nor
        with several replicas, where XLA-compiled steps whose gradients are all-reduced between devices or workers
        have failed (:data:`XLA_ALL_REDUCE_ISSUE`)."""
        if self.jit_compile is not None:
            return self.jit_compile, "asked for (`jit_compile`)"
        if not gpu:
            return False, "unset: off on a CPU"
        if strategy == "multi_worker" or replicas > 1:
            where = "under multi_worker" if strategy == "multi_worker" else f"with {replicas} replicas"
            return False, (f"unset: off {where}, where XLA-compiled steps that all-reduce the gradients have failed "
                           f"({XLA_ALL_REDUCE_ISSUE}); set `jit_compile` to compile it all the same")
        return True, "unset: on one GPU"

    def model_settings(self) -> dict[str, Any]:
        """What decides the shape of the model and of its optimizer (which layers learn): a checkpoint written with
        other values cannot be resumed. (The image size does not: one model takes every size.)"""
        return {"dense_units": self.dense_units, "grouped": self.grouped, "train_from": self.train_from}

    def learnt_with(self) -> dict[str, Any]:
        """The settings of :data:`LEARNT_WITH` as plain values, as given, without those another setting leaves
        unused (``patience`` but for the plateau schedule, ...): what a checkpoint records of how its run learnt."""
        values = self.to_dict()
        unused = declaration.unused(TrainSettings, values)
        return {name: values[name] for name in LEARNT_WITH if name not in unused}

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain values (lists for tuples): the history's ``params``, and what a launcher carries."""
        return declaration.to_dict(self)

    def shared_by_workers(self) -> dict[str, Any]:
        """The settings of :data:`SHARED_BY_WORKERS` as plain values, which every worker of a run must hold alike:
        without those another setting leaves unused (``patience`` but for the plateau schedule, ``local_sgd_after``
        without local SGD, ...), with the image sizes and the epochs of each, and ``initial_model`` as whether one
        is given (each worker may read its own copy)."""
        values = self.to_dict()
        unused = declaration.unused(TrainSettings, values)
        shared = {name: values[name] for name in SHARED_BY_WORKERS if name not in unused}
        shared.update(image_size=list(self.sizes.sizes), image_size_epochs=list(self.sizes.epochs),
                      initial_model=None if self.initial_model is None else "given")
        return shared

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainSettings:
        """The settings :meth:`to_dict` gave, typed again (after a trip through R or JSON), not checked again; a
        setting missing from ``values`` takes its default."""
        return declaration.restore(cls, values)


def specs() -> dict[str, Spec]:
    """Every setting's :class:`~alexnet.declare.kinds.Spec`, by name, in the declaration's order."""
    return declaration.specs(TrainSettings)


def defaults() -> dict[str, Any]:
    """Every setting's default, as a caller gives it."""
    return declaration.defaults(TrainSettings)


def check_names(names: Any, where: str = "alexnet_train()", *, reserved: Mapping[str, str] | None = None) -> None:
    """Raise when ``names`` holds one that is not a setting (with the closest setting when one is close);
    ``reserved`` maps names a caller must not give to what to say instead."""
    declaration.check_names(names, specs(), where, "The training settings", reserved=reserved)
