"""Argument checks shared by every layer. R sends whole numbers as doubles (``32`` arrives as ``32.0``)
and length-one vectors as scalars or one-element lists, so numbers are accepted in any of those forms."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .errors import AlexnetError


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
