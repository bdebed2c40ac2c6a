"""Argument checks shared by every layer. R sends whole numbers as doubles (``32`` arrives as ``32.0``)
and length-one vectors as scalars or one-element lists, so numbers are accepted in any of those forms."""

from __future__ import annotations

import numbers
import os
from typing import Any

import numpy as np

from .errors import AlexnetError

#: The smallest image side AlexNet takes: below it, its three poolings leave no 1x1 map (see
#: :func:`alexnet.train.geometry.feature_sizes`). Defined here, below every layer, so that the data layer (images
#: stored with ``resize``) and the model check against the one value.
MIN_IMAGE_SIZE = 63


def as_int(value: Any, name: str, minimum: int | None = None) -> int:
    """``value`` as an ``int``; an :class:`AlexnetError` naming ``name`` when it is not a whole number
    (at least ``minimum`` when given)."""
    if isinstance(value, (list, tuple, np.ndarray)) and np.size(value) == 1:
        value = np.asarray(value).reshape(-1)[0].item()
    wanted = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise AlexnetError(f"`{name}` must be {wanted}, not {value!r}.")
    number = float(value)
    if not np.isfinite(number) or not number.is_integer():
        raise AlexnetError(f"`{name}` must be {wanted}, not {value!r}.")
    if minimum is not None and number < minimum:
        raise AlexnetError(f"`{name}` must be {wanted}, not {int(number)}.")
    return int(number)


def as_optional_int(value: Any, name: str, minimum: int | None = None) -> int | None:
    """:func:`as_int`, with ``None`` (R's ``NULL``) passed through."""
    return None if value is None else as_int(value, name, minimum)


def as_strings(value: Any) -> list[str]:
    """``value`` as a list of strings: ``None`` is empty; a string, path or bytes is one element; arrays and
    sequences (R vectors through reticulate) are flattened."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, os.PathLike)):
        value = [value]
    if isinstance(value, np.ndarray):
        value = value.reshape(-1).tolist()
    return [
        v.decode() if isinstance(v, bytes) else os.fspath(v) if isinstance(v, os.PathLike) else str(v) for v in value
    ]


def as_ints(value: Any, name: str) -> list[int]:
    """``value`` (a number or a sequence of them, as R sends doubles) as a list of ints; an :class:`AlexnetError`
    naming ``name`` when one is not a whole number."""
    if value is None:
        return []
    array = np.asarray(value if not isinstance(value, (int, float)) else [value]).reshape(-1)
    try:
        numbers = array.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise AlexnetError(f"`{name}` must be whole numbers.") from error
    if not np.all(np.isfinite(numbers)) or not np.all(numbers == np.round(numbers)):
        raise AlexnetError(f"`{name}` must be whole numbers.")
    return [int(v) for v in numbers]


def as_seconds(value: Any, name: str, *, allow_none: bool = True, allow_zero: bool = False) -> float | None:
    """``value`` as a number of seconds: positive (or 0 with ``allow_zero``), or ``None`` when allowed."""
    if value is None and allow_none:
        return None
    if isinstance(value, (list, tuple, np.ndarray)) and np.size(value) == 1:
        value = np.asarray(value).reshape(-1)[0].item()
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (number >= 0 if allow_zero else number > 0) or not np.isfinite(number):
        wanted = "a number of seconds >= 0" if allow_zero else "a positive number of seconds"
        raise AlexnetError(f"`{name}` must be {wanted}{' or None' if allow_none else ''}, not {value!r}.")
    return number
