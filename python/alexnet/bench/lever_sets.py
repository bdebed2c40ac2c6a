"""Lever sets: named groups of training settings that the ``scaling`` and ``time_to_accuracy`` stages compare.

A lever set is one of :data:`LEVER_SETS` by name, or training settings written ``setting=value+setting=value``,
checked against the training settings' declaration (:mod:`alexnet.train.settings`). This module does not import
TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import AlexnetError

#: The lever sets the stage knows by name: training settings on top of the stage's own.
LEVER_SETS: dict[str, dict[str, Any]] = {
    "today": {},
    "bfloat16": {"allreduce_precision": "bfloat16"},
    "packed": {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25},
    "accumulate": {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "accumulate_steps": 16},
    "local_sgd": {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "sync_every": 4},
    "combined": {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "accumulate_steps": 32, "sync_every": 4},
    # what each multi-worker run's own measurement before training advises, taken
    "adapted": {"adapt_communication": True},
}
#: The lever sets measured unless others are named.
DEFAULT_LEVERS = ("today", "bfloat16", "packed", "accumulate", "local_sgd", "combined")
#: How a lever set writes a flag's values.
FLAG_WORDS = {"true": True, "false": False}
#: Settings a lever set may not change: the stages decide them.
FIXED = ("epochs", "steps_per_epoch", "validation", "check_images", "cache", "verbose", "image_size", "batch_size",
         "dense_units", "precision", "seed")


def parse_lever_set(word: str) -> tuple[str, dict[str, Any]]:
    """A lever set by name (:data:`LEVER_SETS`) or written ``setting=value+setting=value``; its name and settings,
    checked against the training settings' declaration."""
    from ..train.settings import check_names, specs

    word = str(word).strip()
    if word in LEVER_SETS:
        return word, dict(LEVER_SETS[word])
    if "=" not in word:
        raise AlexnetError(f"Unknown lever set {word!r}: use {', '.join(LEVER_SETS)}, or training settings written "
                           "setting=value+setting=value (\"accumulate_steps=8+allreduce_precision=bfloat16\").")
    parts = word.split("+")
    odd = [part for part in parts if "=" not in part or not part.split("=", 1)[0].strip()]
    if odd:
        raise AlexnetError(f"The lever set {word!r} has {', '.join(repr(part) for part in odd)}, which is no "
                           "setting=value: a lever set is a name alone, or settings written "
                           "setting=value+setting=value (\"accumulate_steps=8+allreduce_precision=bfloat16\").")
    pairs = [part.split("=", 1) for part in parts]
    names = [name.strip() for name, _ in pairs]
    check_names(names, "a lever set of the scaling stage")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise AlexnetError(f"The lever set {word!r} gives {', '.join(twice)} more than once: give each setting "
                           "one value.")
    fixed = [name for name in names if name in FIXED]
    if fixed:
        raise AlexnetError(f"A lever set cannot change {', '.join(fixed)}: the stage sets it for every lever set "
                           "alike (see its own settings).")
    table = specs()
    settings = {}
    for name, value in pairs:
        name = name.strip()
        kind, value = table[name].kind, value.strip()
        settings[name] = table[name].convert(FLAG_WORDS.get(value.lower(), value) if kind == "flag" else
                                             _number(value, name, word) if kind in ("count", "number", "seconds")
                                             else value, name)
    return word, settings


def alike_lever_sets(lever_sets: Sequence[tuple[str, Mapping[str, Any]]]
                     ) -> list[tuple[str, Mapping[str, Any], list[str]]]:
    """``lever_sets`` (name and settings, as :func:`parse_lever_set` gives them) that train alike taken together:
    one per distinct training, in the order given, each with the first name given it, its settings, and every name
    given it in that order, each once (the same name given twice, or ``bfloat16`` and
    ``allreduce_precision=bfloat16``; a setting given its default, ``accumulate_steps=1``, is the same as leaving
    it out)."""
    from ..train.settings import defaults

    base = defaults()
    trained: list[dict[str, Any]] = []  # what each distinct lever set trains with (25 and 25.0 alike)
    alike: list[tuple[str, Mapping[str, Any], list[str]]] = []
    for name, settings in lever_sets:
        training = {**base, **settings}
        if training not in trained:
            trained.append(training)
            alike.append((name, settings, []))
        names = alike[trained.index(training)][2]
        if name not in names:
            names.append(name)
    return alike


def lever_text(settings: dict[str, Any]) -> str:
    """``settings`` written as a lever set, ``setting=value+setting=value``, which :func:`parse_lever_set` reads back
    (``""``: none)."""
    return "+".join(f"{name}={str(value).lower()}" if isinstance(value, bool) else
                    f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                    for name, value in settings.items())


def _number(text: str, name: str, word: str) -> float | int:
    """``text``, the value of setting ``name`` in the lever set ``word``, as a number."""
    try:
        number = float(text)
    except ValueError:
        raise AlexnetError(f"the lever set {word!r} gives `{name}` {text!r}, which is not a number.") from None
    return int(number) if number.is_integer() else number


