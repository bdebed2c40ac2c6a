"""What the public functions return: a plain ``dict`` whose printed form is short enough to read.

A partition's result lists every image of the partition, about 100 characters each: typed alone in a notebook, or
printed, 80,000 images made a screen of several megabytes. :class:`Result` is a ``dict`` in every other way (equal
to the same ``dict``, written by ``json`` as one, pickled); only its ``repr`` shows each long list as its first
items and the count of the rest. The R package receives a plain ``dict`` (:func:`as_plain`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: Items of a list shown before the count of the others.
SHOWN = 3
#: A list longer than this is shortened.
LONGEST = 8


def shortened(value: Any) -> str:
    """``repr(value)``, where every list or tuple longer than :data:`LONGEST` items, at any depth, is written as its
    first :data:`SHOWN` items and ``... N more``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {shortened(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        if len(value) > LONGEST:
            items = [shortened(item) for item in value[:SHOWN]] + [f"... {len(value) - SHOWN:,} more"]
        else:
            items = [shortened(item) for item in value]
        if isinstance(value, tuple) and len(value) == 1:
            items[0] += ","
        return opening + ", ".join(items) + closing
    return repr(value)


class Result(dict[str, Any]):
    """A function's result: a ``dict`` whose ``repr`` (and so ``print`` and a notebook's display) shortens long
    lists (:func:`shortened`); the values themselves are whole."""

    def __repr__(self) -> str:
        return shortened(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's display: the same short form."""
        printer.text("{...}" if cycle else repr(self))


class Results(list[Any]):
    """A function's list of records (a prediction's, a board's categories): a ``list`` whose ``repr`` shows its first
    :data:`SHOWN` records and the count of the others when it has more than :data:`LONGEST` (50,000 images' top-5
    printed 38 MB); the records themselves are whole."""

    def __repr__(self) -> str:
        return shortened(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's display: the same short form."""
        printer.text("[...]" if cycle else repr(self))


def returns_result(function: Callable[P, R]) -> Callable[P, R]:
    """``function``, returning a :class:`Result` where it returns a plain ``dict``, and :class:`Results` where it
    returns a plain ``list`` (its signature and help kept)."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        value: Any = function(*args, **kwargs)
        if type(value) is dict:
            return Result(value)  # type: ignore[return-value]
        return Results(value) if type(value) is list else value  # type: ignore[return-value]

    return call


def as_plain(value: Any) -> Any:
    """``value`` with a :class:`Result` at its top level, or in a list at its top level, as a plain ``dict``, and a
    :class:`Results` as a plain ``list``, which reticulate converts to an R list (it leaves a subclass of ``dict`` or
    ``list`` a Python object)."""
    if isinstance(value, Result):
        return dict(value)
    if isinstance(value, list):
        return [dict(item) if isinstance(item, Result) else item for item in value]
    return value
