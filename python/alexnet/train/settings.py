"""The arguments of ``alexnet_train()``, checked once and kept together, with the run's facts they lead to.

The defaults are those of :func:`alexnet.train.api.alexnet_train`'s signature, and only there;
:func:`check_settings` turns whatever reached it (from Python, the command line or R through reticulate)
into a :class:`TrainSettings`, or raises an :class:`~alexnet.errors.AlexnetError` that names the argument.
This module does not import TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..checks import (
    as_area_range,
    as_image_size,
    as_int,
    as_ints,
    as_learning_rate,
    as_number,
    as_optional_bool,
    as_optional_int,
    as_parallel,
    as_seconds,
    as_step_range,
)
from ..errors import AlexnetError
from ..model.pin import check_model_board, check_model_pin
from ..storage.location import writable_location
from .precision import check_precision

#: The global batch the paper's learning rate is for: ``learning_rate`` is the rate of a batch of this size.
REFERENCE_BATCH = 128
#: The ways ``lr_scaling`` may scale the learning rate with the global batch.
LR_SCALINGS = ("linear", "none")
#: The warm-up when ``warmup_epochs`` is not given and the rate grows more than :data:`WARMUP_ABOVE` times.
DEFAULT_WARMUP_EPOCHS = 5
WARMUP_ABOVE = 2.0


@dataclass(frozen=True)
class TrainSettings:
    """Every setting of a training run, checked (see :func:`alexnet.train.api.alexnet_train` for each)."""

    batch_size: int
    epochs: int
    parallel: int | None
    image_size: int  # the last (or only) size: validation, the saved model
    image_sizes: tuple[int, ...]  # the sizes trained, in order
    image_size_epochs: tuple[int, ...]  # epochs at each size, adding up to `epochs`
    learning_rate: float  # for a global batch of REFERENCE_BATCH
    lr_scaling: str
    warmup_epochs: int | None  # None: by the factor
    momentum: float
    weight_decay: float
    lr_drop_epochs: tuple[int, ...]
    checkpoint_dir: str | None  # resolved location
    model_dir: str | None  # resolved location; checkpoint_dir when not given
    checkpoint_every: int | None
    steps_per_epoch: int | None
    validation: bool
    validation_steps: int | None
    cache: bool
    max_bad_fraction: float
    check_images: bool
    seed: int | None
    verbose: int
    dense_units: int
    dropout: float
    grouped: bool
    area_range: tuple[float, float]
    precision: str | None  # None: the hardware's
    jit_compile: bool | None
    collective_timeout: float | None
    progress_file: str | None
    log_dir: str | None  # resolved location
    log_every: int
    profile_steps: tuple[int, int] | None
    model_pin: str | None
    model_board: str | None  # resolved board location, with model_pin only

    def model_settings(self) -> dict[str, Any]:
        """What decides the shape of the model: a checkpoint written with other values cannot be resumed.
        (The image size does not: one model takes every size.)"""
        return {"dense_units": self.dense_units, "grouped": self.grouped}

    def size_at(self, epoch: int) -> int:
        """The image size of epoch ``epoch`` (0-based) of the schedule; the last size past its end."""
        end = 0
        for size, count in zip(self.image_sizes, self.image_size_epochs, strict=True):
            end += count
            if epoch < end:
                return size
        return self.image_size

    def size_segments(self, first: int, last: int) -> list[tuple[int, int, int]]:
        """Epochs ``first`` to ``last`` (exclusive) as runs of one size: ``(first, last, size)`` each."""
        segments: list[tuple[int, int, int]] = []
        for epoch in range(first, last):
            size = self.size_at(epoch)
            if segments and segments[-1][2] == size:
                segments[-1] = (segments[-1][0], epoch + 1, size)
            else:
                segments.append((epoch, epoch + 1, size))
        return segments


@dataclass(frozen=True)
class RatePlan:
    """The learning rate of a run: ``base`` (for a global batch of :data:`REFERENCE_BATCH`) times ``factor``
    is ``peak``, reached by a linear warm-up from :attr:`start` over ``warmup_epochs``, divided by 10 at each of
    ``drop_epochs``."""

    base: float
    factor: float
    peak: float
    warmup_epochs: int
    drop_epochs: tuple[int, ...]

    @property
    def start(self) -> float:
        """Where the warm-up starts: ``base``, or ``peak`` when that is lower (a global batch below
        :data:`REFERENCE_BATCH`), so that a warm-up never trains above the rate it leads to."""
        return min(self.base, self.peak)


def rate_plan(settings: TrainSettings, global_batch: int) -> RatePlan:
    """The :class:`RatePlan` of ``settings`` for ``global_batch`` images a step (``lr_scaling``, ``warmup_epochs``:
    see :func:`alexnet.train.api.alexnet_train`)."""
    factor = global_batch / REFERENCE_BATCH if settings.lr_scaling == "linear" else 1.0
    warmup = settings.warmup_epochs
    if warmup is None:
        warmup = min(DEFAULT_WARMUP_EPOCHS, settings.epochs) if factor > WARMUP_ABOVE else 0
    return RatePlan(settings.learning_rate, factor, settings.learning_rate * factor, warmup, settings.lr_drop_epochs)


def check_image_sizes(image_size: Any, image_size_epochs: Any, epochs: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``image_size`` (one size or several, trained in order) and ``image_size_epochs`` (epochs at each size;
    ``None``: ``epochs`` split evenly, the later sizes taking the epochs left over) checked against ``epochs``."""
    if isinstance(image_size, (int, float)) and not isinstance(image_size, bool):
        sizes = (as_image_size(image_size),)
    else:
        sizes = tuple(as_ints(image_size, "image_size"))
        if not sizes:
            raise AlexnetError("`image_size` is empty: give one size (224) or several trained in order "
                               "(c(128, 160, 224)).")
        for size in sizes:
            as_image_size(size)
    if image_size_epochs is None:
        if len(sizes) > epochs:
            raise AlexnetError(f"`image_size` has {len(sizes)} sizes but `epochs` is {epochs}: every size needs at "
                               "least one epoch; give more epochs or fewer sizes.")
        share, extra = divmod(epochs, len(sizes))
        counts = tuple(share + (1 if index >= len(sizes) - extra else 0) for index in range(len(sizes)))
        return sizes, counts
    counts = tuple(as_ints(image_size_epochs, "image_size_epochs"))
    if len(counts) != len(sizes) or any(c < 1 for c in counts) or sum(counts) != epochs:
        raise AlexnetError(
            f"`image_size_epochs` = {list(counts)} does not fit: it needs one whole number >= 1 per size of "
            f"`image_size` ({len(sizes)}) adding up to `epochs` ({epochs}).")
    return sizes, counts


def _lr_scaling(value: Any) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str) or value.strip().lower() not in LR_SCALINGS:
        raise AlexnetError(f"`lr_scaling` must be {' or '.join(map(repr, LR_SCALINGS))}, not {value!r}.")
    return value.strip().lower()


def _output(value: Any, name: str) -> str | None:
    return None if value is None else writable_location(value, name)[0]


def check_schedule(arguments: Mapping[str, Any]) -> tuple[int, tuple[int, ...], tuple[int, ...], str, int | None,
                                                         str | None]:
    """The schedule of ``arguments`` (``alexnet_train``'s, by name: ``epochs``, ``image_size``,
    ``image_size_epochs``, ``lr_scaling``, ``warmup_epochs``, ``precision``, ``mixed_precision``) checked
    against itself: ``(epochs, sizes, epochs at each size, lr_scaling, warmup_epochs, precision)``. A launcher
    checks it on the driver before any job (:func:`alexnet.launch.job.plan_job`), with the defaults of
    ``alexnet_train`` filled in."""
    a = arguments
    epochs = as_int(a["epochs"], "epochs", minimum=1)
    sizes, size_epochs = check_image_sizes(a["image_size"], a.get("image_size_epochs"), epochs)
    lr_scaling = _lr_scaling(a.get("lr_scaling", "linear"))
    warmup = as_optional_int(a.get("warmup_epochs"), "warmup_epochs", minimum=0)
    if warmup is not None and warmup > epochs:
        raise AlexnetError(f"`warmup_epochs` = {warmup} is more than `epochs` ({epochs}): the rate would never "
                           "reach its peak; give fewer warm-up epochs.")
    if warmup and lr_scaling == "none":
        raise AlexnetError("`warmup_epochs` warms up to the rate scaled with the batch, and lr_scaling = 'none' "
                           "scales nothing: use lr_scaling = 'linear', or leave out `warmup_epochs`.")
    precision = check_precision(a.get("precision"), as_optional_bool(a.get("mixed_precision"), "mixed_precision"))
    return epochs, sizes, size_epochs, lr_scaling, warmup, precision


def check_settings(arguments: Mapping[str, Any]) -> TrainSettings:
    """``arguments`` (``alexnet_train``'s, by name) checked and converted: a :class:`TrainSettings`.

    Output locations (``checkpoint_dir``, ``model_dir``, ``log_dir``) are resolved and proven writable here,
    before any training work; so is the board of ``model_pin``, whose name is checked too.
    """
    a = arguments
    drops: Sequence[Any] = a["lr_drop_epochs"] if a["lr_drop_epochs"] is not None else ()
    checkpoint_dir = _output(a["checkpoint_dir"], "checkpoint_dir")
    model_dir = _output(a["model_dir"], "model_dir") if a["model_dir"] is not None else checkpoint_dir
    checkpoint_every = as_optional_int(a["checkpoint_every"], "checkpoint_every", minimum=1)
    model_pin = None if a.get("model_pin") is None else check_model_pin(a["model_pin"])
    data = a.get("data")
    data_board = data.get("board") if isinstance(data, Mapping) else None
    model_board = check_model_board(a.get("model_board"), data_board) if model_pin is not None else None
    if checkpoint_every is not None and checkpoint_dir is None:
        raise AlexnetError("`checkpoint_every` needs `checkpoint_dir`: the storage the checkpoints are written to.")
    epochs, sizes, size_epochs, lr_scaling, warmup, precision = check_schedule(a)
    return TrainSettings(
        batch_size=as_int(a["batch_size"], "batch_size", minimum=1),
        epochs=epochs,
        parallel=as_parallel(a["parallel"]),
        image_size=sizes[-1],
        image_sizes=sizes,
        image_size_epochs=size_epochs,
        learning_rate=as_learning_rate(a["learning_rate"]),
        lr_scaling=lr_scaling,
        warmup_epochs=warmup,
        momentum=as_number(a["momentum"], "momentum", 0.0, 1.0),
        weight_decay=as_number(a["weight_decay"], "weight_decay", 0.0),
        lr_drop_epochs=tuple(as_int(e, "lr_drop_epochs", minimum=0) for e in
                             ([drops] if isinstance(drops, (int, float)) else drops)),
        checkpoint_dir=checkpoint_dir,
        model_dir=model_dir,
        checkpoint_every=checkpoint_every,
        steps_per_epoch=as_optional_int(a["steps_per_epoch"], "steps_per_epoch", minimum=1),
        validation=bool(a["validation"]),
        validation_steps=as_optional_int(a["validation_steps"], "validation_steps", minimum=1),
        cache=bool(a["cache"]),
        max_bad_fraction=as_number(a["max_bad_fraction"], "max_bad_fraction", 0.0, 1.0),
        check_images=bool(a["check_images"]),
        seed=as_optional_int(a["seed"], "seed"),
        verbose=as_int(a["verbose"], "verbose", minimum=0),
        dense_units=as_int(a["dense_units"], "dense_units", minimum=1),
        dropout=as_number(a["dropout"], "dropout", 0.0, 1.0),
        grouped=bool(a["grouped"]),
        area_range=as_area_range(a["area_range"]),
        precision=precision,
        jit_compile=as_optional_bool(a["jit_compile"], "jit_compile"),
        collective_timeout=as_seconds(a["collective_timeout"], "collective_timeout"),
        progress_file=None if a.get("progress_file") is None else str(a["progress_file"]),
        log_dir=_output(a.get("log_dir"), "log_dir"),
        log_every=as_int(a.get("log_every", 100), "log_every", minimum=1),
        profile_steps=as_step_range(a.get("profile_steps"), "profile_steps"),
        model_pin=model_pin,
        model_board=model_board,
    )


def settings_params(settings: TrainSettings) -> dict[str, Any]:
    """The settings as plain values for the returned history's ``params``."""
    params = asdict(settings)
    params["lr_drop_epochs"] = list(settings.lr_drop_epochs)
    params["area_range"] = list(settings.area_range)
    params["image_sizes"] = list(settings.image_sizes)
    params["image_size_epochs"] = list(settings.image_size_epochs)
    params["profile_steps"] = None if settings.profile_steps is None else list(settings.profile_steps)
    return params
