"""The kinds of value a setting takes, and a setting's :class:`Spec`: what a declaration says of it.

A kind knows how to check and convert a value from any caller (Python, the command line, R through reticulate,
which sends whole numbers as doubles and vectors as lists), how to restore a value that travelled as plain
values, what R calls it (the argument kinds of ``R/arguments.R``) and how the command line reads it. The checks
themselves are those of :mod:`alexnet.checks`, shared with every other function of the package.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..checks import (
    as_area_range,
    as_int,
    as_ints,
    as_number,
    as_optional_bool,
    as_seconds,
    as_step_range,
    shown,
)
from ..errors import AlexnetError
from ..storage.location import home_expanded


def _one(value: Any) -> Any:
    """A length-one list or tuple (as R sends a scalar) as its element."""
    return value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value


@dataclass(frozen=True)
class UsedWith:
    """What puts a setting to use: ``needed`` says the other setting as a message names it (```log_dir```,
    ``lr_schedule = 'step'``), ``missing`` what a run without it does not do, and ``used(values)`` whether the
    checked settings ``values`` (by name) use it."""

    needed: str
    missing: str
    used: Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Spec:
    """What the declaration says of one setting.

    ``default`` is the value a caller sees (in the signature, the help, R); ``kind`` a name of :data:`KINDS` (a
    ``location``'s leading ``~`` is the home folder, as in a shell, whether it has a ``check`` of its own or not);
    ``help`` one phrase; ``minimum`` and ``maximum`` bound a number (``above`` and ``below``: strictly); ``choices`` the
    values of a choice, ``aliases`` other spellings of them; ``optional`` that ``None`` (R's ``NULL``) is taken;
    ``output`` that the value is a location written to (proven writable before training); ``option`` the command
    line's option (``""``: ``--<name with dashes>``; ``None``: not on the command line), ``none_word`` the word that
    stands for ``None`` there, and ``metavar`` its placeholder; ``check`` a check of its own in place of the kind's,
    ``check(value, name)`` returning the value converted or raising an error that names the setting as ``name``
    says (a pin name: :func:`alexnet.model.options.check_model_pin`; ``crops``: 1 or 10); ``used_with`` the other
    setting that puts it to use (:class:`UsedWith`), when another does.
    """

    default: Any
    kind: str
    help: str
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    below: float | None = None
    choices: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    optional: bool = False
    output: bool = False
    option: str | None = ""
    none_word: str | None = None
    metavar: str | tuple[str, ...] | None = None
    check: Callable[[Any, str], Any] | None = None
    used_with: UsedWith | None = None

    def convert(self, value: Any, name: str) -> Any:
        """``value`` of setting ``name`` checked and converted; an :class:`AlexnetError` naming it otherwise (as
        ``name``: the core's name of the setting, or its command-line option)."""
        value = _one(value) if KINDS[self.kind].scalar else value
        if value is None and (self.optional or self.kind == "counts"):
            return None if self.optional else ()
        converted = KINDS[self.kind].convert(value, name, self) if self.check is None else self.check(value, name)
        if self.kind == "location" and isinstance(converted, str):
            return home_expanded(converted)  # here, once, for every front end: R and a quoted option send `~` as is
        return converted

    def restore(self, value: Any) -> Any:
        """A value this setting converted, after a trip as plain values (JSON, R), typed again without checks."""
        if value is None:
            return None
        return KINDS[self.kind].restore(_one(value) if KINDS[self.kind].scalar else value)

    @property
    def accepts(self) -> str:
        """What a Python caller may give this setting, as an annotation a type checker reads (the typed signatures of
        :mod:`alexnet.cli.to_typed`): its kind's (:attr:`Kind.accepts`), or, with ``choices``, one of them or of their
        ``aliases`` as a ``Literal`` (:attr:`Kind.accepts_choices`); and ``None`` where it is taken."""
        kind = KINDS[self.kind]
        literal = "Literal[" + ", ".join(json.dumps(value) for value in (*self.choices, *self.aliases)) + "]"
        one = kind.accepts_choices.format(choices=literal) if self.choices else kind.accepts
        return f"{one} | None" if self.optional or self.kind == "counts" else one

    @property
    def r_kind(self) -> str:
        """The argument kind R checks this setting with (see ``R/arguments.R``): ``count>=1?`` and the like."""
        base = KINDS[self.kind].r_kind
        least = f">={self.minimum:g}" if self.minimum is not None and base in ("count", "counts") else ""
        optional = "?" if self.optional or self.kind == "counts" else ""
        return base + least + optional

    def shown_default(self) -> str:
        """The default as the help shows it."""
        value = self.default
        if value is None:
            return self.none_word or "none"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, (tuple, list)):
            return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
        return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Kind:
    """How one kind of value is checked (``convert``), typed again (``restore``), named in R (``r_kind``), read
    from the command line (``parse``, one word to a value, with ``nargs`` words) and annotated for a Python caller
    (``accepts``: what its ``convert`` takes from Python, as a type checker reads it; ``accepts_choices``, the same
    for a setting with choices, where ``{choices}`` stands for the ``Literal`` of them)."""

    convert: Callable[[Any, str, Spec], Any]
    restore: Callable[[Any], Any]
    r_kind: str
    parse: Callable[[str], Any] | None = None
    nargs: str | int | None = None
    scalar: bool = True
    accepts: str = "Any"
    accepts_choices: str = "{choices}"


def _count(value: Any, name: str, spec: Spec) -> int:
    least = None if spec.minimum is None else int(spec.minimum)
    return as_int(value, name, minimum=least, maximum=None if spec.maximum is None else int(spec.maximum))


def _words(value: Any, name: str, spec: Spec) -> tuple[str, ...]:
    """Strings: a list, or one string of words separated by commas; with ``choices``, each one of them (in the
    order given, each once)."""
    words = [w.strip() for w in value.split(",")] if isinstance(value, str) else None
    if words is None:
        if isinstance(value, (list, tuple)) and all(isinstance(w, str) for w in value):
            words = [w.strip() for w in value]
        else:
            raise AlexnetError(f"`{name}` must be strings (or one string of words separated by commas), not "
                               f"{value!r}.")
    words = [w.lower() for w in words if w] if spec.choices else [w for w in words if w]
    unknown = [w for w in words if spec.choices and w not in spec.choices]
    if unknown or not words:
        shown = ", ".join(map(repr, unknown)) if unknown else repr(value)
        wanted = f"some of {', '.join(spec.choices)}" if spec.choices else "one word at least"
        raise AlexnetError(f"`{name}` must be {wanted}, not {shown}.")
    return tuple(dict.fromkeys(words))


def _mapping(value: Any, name: str, spec: Spec) -> dict[str, str]:
    """Names and values (environment variables): a dict, or R's named list (an empty one arrives as a list)."""
    if isinstance(value, (list, tuple)) and not value:
        return {}
    if not isinstance(value, Mapping):
        raise AlexnetError(f"`{name}` must be names and values (a dict, or an R named list), not {value!r}.")
    return {str(k): str(_one(v)) for k, v in value.items()}


def _number(value: Any, name: str, spec: Spec) -> float:
    number = as_number(value, name, spec.minimum, spec.maximum)
    if spec.above is not None and not number > spec.above:
        raise AlexnetError(f"`{name}` must be a number > {spec.above:g}, not {shown(value)}.")
    if spec.below is not None and not number < spec.below:
        low = "" if spec.minimum is None else f" >= {spec.minimum:g} and"
        raise AlexnetError(f"`{name}` must be a number{low} < {spec.below:g}, not {shown(value)}.")
    return number


def _flag(value: Any, name: str, spec: Spec) -> bool:
    import numpy as np

    if isinstance(value, np.bool_):
        value = bool(value)
    checked = as_optional_bool(value, name)
    if checked is None:
        raise AlexnetError(f"`{name}` must be True or False, not None.")
    return checked


def _choice(value: Any, name: str, spec: Spec) -> str:
    word = value.strip().lower() if isinstance(value, str) else None
    word = spec.aliases.get(word, word) if word is not None else None
    if word not in spec.choices:
        shown = ", ".join(map(repr, spec.choices))
        if on_command_line(name):  # None is the option's word, if it has one
            none = f" or {spec.none_word!r}" if spec.optional and spec.none_word else ""
        else:
            none = " or None" + (f" ({spec.none_word})" if spec.none_word else "") if spec.optional else ""
        raise AlexnetError(f"`{name}` must be one of {shown}{none}, not {value!r}.")
    return word


def _whole_numbers(value: Any, name: str, spec: Spec) -> tuple[int, ...]:
    numbers = tuple(as_ints(value, name))
    least = spec.minimum
    for number in numbers:
        if least is not None and number < least:
            raise AlexnetError(f"`{name}` must be whole numbers >= {least:g}, not {number} in {list(numbers)}.")
    return numbers


def _sizes(value: Any, name: str, spec: Spec) -> tuple[int, ...]:
    sizes = _whole_numbers(value, name, spec)
    if not sizes:
        raise AlexnetError(f"`{name}` is empty: give one size (224) or several trained in order ([128, 160, 224]).")
    return sizes


def _counts(value: Any, name: str, spec: Spec) -> tuple[int, ...]:
    return _whole_numbers(value, name, spec)


def _text(value: Any, name: str, spec: Spec) -> str:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if not isinstance(value, str) or not value:
        raise AlexnetError(f"`{name}` must be one string (a path or URL), not {value!r}.")
    return value


def _model(value: Any, name: str, spec: Spec) -> str | dict[str, Any]:
    """A trained model as a setting names it: a location (a string) or what ``alexnet_model()`` returns (a dict, R's
    named list). Whether it exists is for the check of the settings it is one of to find out (the training settings':
    :func:`alexnet.train.settings_check.check_settings`), once, where the run is launched."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str) or not value:
        raise AlexnetError(f"`{name}` must be a model pin from alexnet_model() or the location of a model_dir or "
                           f"alexnet.keras, not {value!r}.")
    return value


def _pin_text(value: Any, name: str, spec: Spec) -> str:
    """A pin's name or version: one string that is not blank (a setting with a ``check`` of its own, such as a
    model pin's name, says which names a pin may have)."""
    if not isinstance(value, str) or not value.strip():
        raise AlexnetError(f"`{name}` must be one string (a pin's name or version), not {value!r}.")
    return value


def _seconds(value: Any, name: str, spec: Spec) -> float:
    if value is None and spec.optional:
        return value  # type: ignore[return-value]
    typed = on_command_line(name)  # where None is the option's word, or the option left out
    try:
        return float(as_seconds(value, name, allow_none=spec.optional and not typed))  # type: ignore[arg-type]
    except AlexnetError:
        if not (typed and spec.optional and spec.none_word):
            raise
        raise AlexnetError(f"`{name}` must be a positive number of seconds or {spec.none_word!r}, not {value!r}.") \
            from None


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in ([value] if isinstance(value, (int, float)) else value))


def _floats(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


def _word_numbers(value: str) -> list[int]:
    """A command-line word of whole numbers: one (``224``) or several separated by commas (``128,160,224``)."""
    words = [word.strip() for word in value.split(",")]
    try:
        return [int(word) for word in words]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be whole numbers separated by spaces or commas, not {value!r}") \
            from None


def _positive_numbers(value: Any, name: str, spec: Spec) -> tuple[float, ...]:
    values = [value] if isinstance(value, (int, float)) else value
    try:
        numbers = tuple(as_number(v, name, spec.minimum, spec.maximum) for v in values)
    except TypeError:
        raise AlexnetError(f"`{name}` must be numbers, not {value!r}.") from None
    if not numbers or (spec.above is not None and any(n <= spec.above for n in numbers)):
        above = "" if spec.above is None else f" > {spec.above:g}"
        raise AlexnetError(f"`{name}` must be one or more numbers{above}, not {value!r}.")
    return numbers


def _word_floats(value: str) -> list[float]:
    """A command-line word of numbers: one (``0.15``) or several separated by commas (``0.15,1.1``)."""
    try:
        return [float(word) for word in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be numbers separated by spaces or commas, not {value!r}") from None


#: Every kind of setting, by name.
KINDS: dict[str, Kind] = {
    "count": Kind(_count, int, "count", int, accepts="int"),
    "number": Kind(_number, float, "number", float, accepts="float"),
    "seconds": Kind(_seconds, float, "number", float, accepts="float"),
    "flag": Kind(_flag, bool, "flag", accepts="bool"),
    "choice": Kind(_choice, str, "choice", str, accepts="str"),
    "sizes": Kind(_sizes, _ints, "counts", _word_numbers, "+", scalar=False, accepts="int | Sequence[int]"),
    "counts": Kind(_counts, _ints, "counts", _word_numbers, "+", scalar=False, accepts="int | Sequence[int]"),
    "shares": Kind(lambda v, n, s: as_area_range(v, n), _floats, "numbers", float, 2, scalar=False,
                   accepts="Sequence[float]"),
    "steps": Kind(lambda v, n, s: as_step_range(v, n), _ints, "numbers", int, 2, scalar=False,
                  accepts="Sequence[int]"),
    "location": Kind(_text, str, "location", str, accepts="str | os.PathLike[str]"),
    "string": Kind(_text, str, "location", str, accepts="str | os.PathLike[str]"),
    "pin": Kind(_pin_text, str, "string", str, accepts="str"),
    "model": Kind(_model, lambda value: value, "object", str, accepts="str | os.PathLike[str] | Mapping[str, Any]"),
    "numbers": Kind(_positive_numbers, _floats, "numbers", _word_floats, "+", scalar=False,
                    accepts="float | Sequence[float]"),
    "words": Kind(_words, tuple, "strings", lambda word: word.split(","), "+", scalar=False,
                  accepts="str | Sequence[str]", accepts_choices="str | Sequence[{choices}]"),
    "mapping": Kind(_mapping, dict, "any", scalar=False, accepts="Mapping[str, str]"),
}


def option_name(name: str, spec: Spec) -> str | None:
    """The command-line option of setting ``name``: ``--<name with dashes>`` unless the spec names another or none."""
    if spec.option is None:
        return None
    return spec.option or "--" + name.replace("_", "-")


def on_command_line(name: str) -> bool:
    """Whether ``name``, as a check was given it to name its setting, is a command-line option (``--min-images``,
    in backquotes or not) rather than the core's name of the setting (``min_images``)."""
    return name.strip("`").startswith("--")


def given_as(name: str, value: str) -> str:
    """Setting ``name`` given ``value`` (already as it is written) the way its user writes it, for messages:
    ``name = value`` in R and Python, ``--option value`` on the command line (see :func:`on_command_line`)."""
    return f"{name} {value}" if on_command_line(name) else f"{name} = {value}"


def flatten_words(value: Any) -> Any:
    """Options of several words that each hold several values (``--image-size 128,160 224``) as one list."""
    if isinstance(value, list) and value and all(isinstance(word, list) for word in value):
        return [number for word in value for number in word]
    return value
