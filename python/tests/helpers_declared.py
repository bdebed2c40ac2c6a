"""Values of a declared setting that the walks over a declaration try: one it refuses, one other than its default,
and how the command line spells a value (tests/test_settings.py, tests/test_bench_settings.py,
tests/test_launch_options.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from alexnet.bench.link import link_setting
from alexnet.declare.kinds import Spec
from alexnet.errors import AlexnetError


def bad_value(name: str, spec: Spec) -> Any:
    """A value of the right type that the declaration refuses: below its least value, a choice it does not have,
    a range the wrong way round, an empty location. ``None`` for a flag, which has no such value."""
    least = spec.minimum if spec.minimum is not None else spec.above
    if spec.kind in ("count", "number", "seconds"):
        if spec.choices:
            return next(v for v in range(1000) if v not in spec.choices)
        if least is not None:
            return least - 1 if spec.kind == "count" else least - 0.5
        return -1 if spec.kind == "seconds" else 1.5  # a number that is not a whole one
    if spec.kind in ("sizes", "counts"):
        return [int(least or 0) - 1]
    if spec.kind == "numbers":
        return [float(least or 0) - 0.5]
    if spec.kind == "words":
        return "nonsense" if spec.choices else None
    return {"choice": "nonsense", "shares": [0.9, 0.2], "steps": [5, 2], "location": "", "string": "",
            "pin": ""}.get(spec.kind)


def cli_words(value: Any) -> list[str]:
    """``value`` as the words of an option."""
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def other_value(name: str, spec: Spec) -> Any:
    """A value of the setting other than its default, typed as the settings hold it (not checked)."""
    converted = spec.restore(spec.default)
    kind = spec.kind
    if kind == "flag":
        return not converted if converted is not None else True
    if kind == "count":
        if spec.choices:
            return next(c for c in spec.choices if c != converted)
        least = int(spec.minimum or 0)
        return least + 1 if converted != least + 1 else least + 2
    if kind in ("number", "seconds"):
        return 0.25 if converted != 0.25 else 0.5
    if kind == "choice":
        return next(c for c in spec.choices if c != converted)
    if kind in ("sizes", "counts"):
        return (int(spec.minimum or 0) + 1, int(spec.minimum or 0) + 3)
    if kind == "shares":
        return (0.25, 0.75)
    if kind == "numbers":
        return (0.5, 2.0)
    if kind == "steps":
        return (3, 7)
    if kind == "words":
        return tuple(reversed(spec.choices[:2])) if spec.choices else ("a", "b")
    if kind == "mapping":
        return {"ALEXNET_TEST": "1"}
    if spec.check is link_setting:
        return "10gbit"
    return f"gs://bucket/{name}" if kind == "location" else "alexnet-other"


def refusal(check: Callable[[dict[str, Any]], Any], name: str, spec: Spec) -> tuple[Any, str]:
    """A bad value of setting ``name`` (:func:`bad_value`) and the message ``check`` refuses it with, which names
    it; the test is skipped for a setting that takes every value of its type."""
    bad = bad_value(name, spec)
    if bad is None:
        pytest.skip(f"{name} ({spec.kind}) takes every value of its type")
    with pytest.raises(AlexnetError) as checked:
        check({name: bad})
    message = str(checked.value)
    assert f"`{name}`" in message, message
    return bad, message


def option_refusal(name: str, spec: Spec, bad: Any) -> str:
    """The message a command refuses ``bad`` with when it is given as setting ``name``'s option: the setting's own
    check, naming the option typed (``--min-images``, not the core's ``min_images``)."""
    from alexnet.declare.kinds import option_name

    flag = option_name(name, spec)
    assert flag is not None, f"{name} is not on the command line"
    with pytest.raises(AlexnetError) as checked:
        spec.convert(bad, flag)
    message = str(checked.value)
    assert f"`{flag}`" in message and f"`{name}`" not in message, message
    return message
