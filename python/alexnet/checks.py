"""Every argument check of the package, once, shared by every layer. R sends whole numbers as doubles (``32``
arrives as ``32.0``) and length-one vectors as scalars or one-element lists, so numbers are accepted in any
of those forms. Each check returns the converted value or raises an :class:`AlexnetError` naming the argument."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import AlexnetError

#: The smallest image side AlexNet takes: below it, its three poolings leave no 1x1 map (conv1 of 11 with
#: stride 4 and padding 2, then three 3x3 poolings of stride 2). Defined here, below every layer, so that the
#: data layer (images stored with ``resize``) and the model check against the one value.
MIN_IMAGE_SIZE = 63


def as_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int``; an :class:`AlexnetError` naming ``name`` when it is not a whole number
    (at least ``minimum`` and at most ``maximum`` when given)."""
    if isinstance(value, (list, tuple, np.ndarray)) and np.size(value) == 1:
        value = np.asarray(value).reshape(-1)[0].item()
    wanted = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise AlexnetError(f"`{name}` must be {wanted}, not {value!r}.")
    number = float(value)
    if not np.isfinite(number) or not number.is_integer():
        raise AlexnetError(f"`{name}` must be {wanted}, not {value!r}.")
    if maximum is not None and (number > maximum or (minimum is not None and number < minimum)):
        low = "" if minimum is None else minimum
        raise AlexnetError(f"`{name}` must be in {low}..{maximum}, not {int(number)}.")
    if minimum is not None and number < minimum:
        raise AlexnetError(f"`{name}` must be {wanted}, not {int(number)}.")
    return int(number)


def entry(name: str, key: str) -> str:
    """Entry ``key`` of argument ``name`` (a dict; R's named list) as the package's messages name it, in Python's
    words: ``data["image"]``. The R package says it in R's, ``data$image``, as it says every message of the core
    (its ``r_words()``)."""
    return f'{name}["{key}"]'


def as_optional_int(value: Any, name: str, minimum: int | None = None) -> int | None:
    """:func:`as_int`, with ``None`` (R's ``NULL``) passed through."""
    return None if value is None else as_int(value, name, minimum)


def as_strings(value: Any, name: str = "") -> list[str]:
    """``value`` as a list of strings: ``None`` is empty; a string, path or bytes is one element; arrays and
    sequences (R vectors through reticulate) are flattened; a mapping is an :class:`AlexnetError` naming ``name``."""
    if value is None:
        return []
    if isinstance(value, Mapping):  # its keys would be taken for the strings
        entries = count_text(len(value), "entry", "entries")
        raise AlexnetError(f"{f'`{name}`' if name else 'a list of strings'} must be strings, not a mapping of "
                           f"{entries} (a dict, or R's named list) whose names would be taken for them: give its "
                           "values.")
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
        raise AlexnetError(f"`{name}` must be whole numbers, not {value!r}.") from error
    if not np.all(np.isfinite(numbers)) or not np.all(numbers == np.round(numbers)):
        raise AlexnetError(f"`{name}` must be whole numbers, not {value!r}.")
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


def count_text(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` things, in the singular for one (``"1 category"``, ``"3 categories"``), as R's prints say them."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


_NUMBER_WORDS = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def seconds_words(seconds: float) -> str:
    """A duration as help texts say it: ``"a minute"``, ``"two minutes"``, else ``"90 s"``."""
    minutes = seconds / 60
    if minutes == 1:
        return "a minute"
    if minutes.is_integer() and 2 <= minutes < len(_NUMBER_WORDS):
        return f"{_NUMBER_WORDS[int(minutes)]} minutes"
    return f"{seconds:g} s"


def held_text(value: float, bound: str = "at least", digits: int = 2) -> str:
    """``value`` in ``digits`` decimals, rounded away from the bound it is held against (``bound``: "at least" or
    "at most"), so that what is shown never meets a bound the value misses: 0.8997 against at least 0.9 is "0.89",
    1.797 against 1.8 "1.79", 0.4049 against at most 0.4 "0.41"; never "-0.000", and never 0 for a positive value
    below ``10 ** -digits``: its first significant digit (0.0075 at least: "0.007")."""
    if bound != "at most" and 0 < value < 10 ** -digits:
        digits = -math.floor(math.log10(value))
    scale = 10 ** digits
    shown = (math.ceil(value * scale - 1e-9) if bound == "at most" else math.floor(value * scale + 1e-9)) / scale
    return f"{shown + 0.0:.{digits}f}"


def some_names(names: Sequence[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, and how many more there are, for a message."""
    return ", ".join(names[:shown]) + (f", ... ({len(names) - shown} more)" if len(names) > shown else "")


def shown(value: Any) -> str:
    """A value as a message shows it: a float as a number is written (R's ``-1`` arrives as ``-1.0``), else its
    ``repr``."""
    return f"{value:g}" if isinstance(value, float) else repr(value)


def as_number(value: Any, name: str, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a float, between ``low`` and ``high`` when given; a string or a flag is not a number, nor is NaN or
    an infinity (every setting of numbers needs a finite one: an infinite size of a pack, rate or timeout is no
    value a run can take)."""
    item = value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value
    try:
        number = float("nan") if isinstance(item, (str, bytes, bool)) else float(item)
    except (TypeError, ValueError):
        number = float("nan")
    if not np.isfinite(number) or (low is not None and number < low) or (high is not None and number > high):
        bounds = f" between {low:g} and {high:g}" if low is not None and high is not None else \
            f" >= {low:g}" if low is not None else ""
        raise AlexnetError(f"`{name}` must be a number{bounds}, not {shown(value)}.")
    return number


def as_optional_bool(value: Any, name: str) -> bool | None:
    """``value`` as a flag, with ``None`` (R's ``NULL``) passed through."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if not isinstance(value, (bool, int)):
        raise AlexnetError(f"`{name}` must be True, False or None, not {value!r}.")
    return bool(value)


def as_area_range(value: Any, name: str = "area_range") -> tuple[float, float]:
    """``value`` of setting ``name`` (``area_range``): the least and most share of an image a training crop covers,
    ``0 < low <= high <= 1``."""
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise AlexnetError(
            f"`{name}` must be two numbers, the least and most share of an image, not {value!r}."
        ) from None
    if not 0 < low <= high <= 1:
        raise AlexnetError(f"`{name}` must be two shares with 0 < low <= high <= 1, not {value!r}.")
    return low, high


def as_step_range(value: Any, name: str) -> tuple[int, int] | None:
    """``value`` as two step numbers ``(first, last)``, counted from 1, ``first <= last``; ``None`` passed through."""
    if value is None:
        return None
    try:
        first, last = (as_int(v, name, minimum=1) for v in value)
    except (TypeError, ValueError):
        raise AlexnetError(
            f"`{name}` must be two step numbers (first, last), as [10, 20], not {value!r}."
        ) from None
    if last < first:
        raise AlexnetError(f"`{name}` must be (first, last) with first <= last, not ({first}, {last}).")
    return first, last


def as_image_size(value: Any, name: str = "image_size") -> int:
    """An image side AlexNet takes: a whole number >= :data:`MIN_IMAGE_SIZE`."""
    return as_int(value, name, minimum=MIN_IMAGE_SIZE)


def name_hints(unknown: Sequence[str], known: Sequence[str]) -> str:
    """The names in ``unknown`` as an error shows them, each with the closest of ``known`` when one is close, e.g.
    ``"`epoch` (did you mean `epochs`?)"``."""
    import difflib

    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(known), n=1)
        hints.append(f"`{name}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
    return ", ".join(hints)
