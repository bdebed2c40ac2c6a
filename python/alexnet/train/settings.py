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

from ..checks import as_int, as_optional_int, as_seconds
from ..errors import AlexnetError
from ..storage.location import writable_location
from .geometry import MIN_IMAGE_SIZE


@dataclass(frozen=True)
class TrainSettings:
    """Every setting of a training run, checked (see :func:`alexnet.train.api.alexnet_train` for each)."""

    batch_size: int
    epochs: int
    parallel: int | None
    image_size: int
    learning_rate: float
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
    mixed_precision: bool | None
    jit_compile: bool | None
    collective_timeout: float | None
    progress_file: str | None

    def model_settings(self) -> dict[str, Any]:
        """What decides the shape of the model: a checkpoint written with other values cannot be resumed."""
        return {"image_size": self.image_size, "dense_units": self.dense_units, "grouped": self.grouped}


def _number(value: Any, name: str, low: float | None = None, high: float | None = None) -> float:
    try:
        number = float(value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value)
    except (TypeError, ValueError):
        number = float("nan")
    if number != number or (low is not None and number < low) or (high is not None and number > high):
        bounds = f" between {low:g} and {high:g}" if low is not None and high is not None else \
            f" >= {low:g}" if low is not None else ""
        raise AlexnetError(f"`{name}` must be a number{bounds}, not {value!r}.")
    return number


def _optional_bool(value: Any, name: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if not isinstance(value, (bool, int)):
        raise AlexnetError(f"`{name}` must be TRUE/True, FALSE/False or NULL/None, not {value!r}.")
    return bool(value)


def _area_range(value: Any) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise AlexnetError(
            f"`area_range` must be two numbers, the least and most share of an image, not {value!r}."
        ) from None
    if not 0 < low <= high <= 1:
        raise AlexnetError(f"`area_range` must be two shares with 0 < low <= high <= 1, not {value!r}.")
    return low, high


def _output(value: Any, name: str) -> str | None:
    return None if value is None else writable_location(value, name)[0]


def check_settings(arguments: Mapping[str, Any]) -> TrainSettings:
    """``arguments`` (``alexnet_train``'s, by name) checked and converted: a :class:`TrainSettings`.

    Output locations are resolved and proven writable here, before any training work.
    """
    a = arguments
    drops: Sequence[Any] = a["lr_drop_epochs"] if a["lr_drop_epochs"] is not None else ()
    checkpoint_dir = _output(a["checkpoint_dir"], "checkpoint_dir")
    model_dir = _output(a["model_dir"], "model_dir") if a["model_dir"] is not None else checkpoint_dir
    checkpoint_every = as_optional_int(a["checkpoint_every"], "checkpoint_every", minimum=1)
    if checkpoint_every is not None and checkpoint_dir is None:
        raise AlexnetError("`checkpoint_every` needs `checkpoint_dir`: the storage the checkpoints are written to.")
    return TrainSettings(
        batch_size=as_int(a["batch_size"], "batch_size", minimum=1),
        epochs=as_int(a["epochs"], "epochs", minimum=1),
        parallel=as_optional_int(a["parallel"], "parallel", minimum=1),
        image_size=as_int(a["image_size"], "image_size", minimum=MIN_IMAGE_SIZE),
        learning_rate=_number(a["learning_rate"], "learning_rate", 0.0),
        momentum=_number(a["momentum"], "momentum", 0.0, 1.0),
        weight_decay=_number(a["weight_decay"], "weight_decay", 0.0),
        lr_drop_epochs=tuple(as_int(e, "lr_drop_epochs", minimum=0) for e in
                             ([drops] if isinstance(drops, (int, float)) else drops)),
        checkpoint_dir=checkpoint_dir,
        model_dir=model_dir,
        checkpoint_every=checkpoint_every,
        steps_per_epoch=as_optional_int(a["steps_per_epoch"], "steps_per_epoch", minimum=1),
        validation=bool(a["validation"]),
        validation_steps=as_optional_int(a["validation_steps"], "validation_steps", minimum=1),
        cache=bool(a["cache"]),
        max_bad_fraction=_number(a["max_bad_fraction"], "max_bad_fraction", 0.0, 1.0),
        check_images=bool(a["check_images"]),
        seed=as_optional_int(a["seed"], "seed"),
        verbose=as_int(a["verbose"], "verbose", minimum=0),
        dense_units=as_int(a["dense_units"], "dense_units", minimum=1),
        dropout=_number(a["dropout"], "dropout", 0.0, 1.0),
        grouped=bool(a["grouped"]),
        area_range=_area_range(a["area_range"]),
        mixed_precision=_optional_bool(a["mixed_precision"], "mixed_precision"),
        jit_compile=_optional_bool(a["jit_compile"], "jit_compile"),
        collective_timeout=as_seconds(a["collective_timeout"], "collective_timeout"),
        progress_file=None if a.get("progress_file") is None else str(a["progress_file"]),
    )


def settings_params(settings: TrainSettings) -> dict[str, Any]:
    """The settings as plain values for the returned history's ``params``."""
    params = asdict(settings)
    params["lr_drop_epochs"] = list(settings.lr_drop_epochs)
    params["area_range"] = list(settings.area_range)
    return params
