"""The public functions that take declared settings, as type checkers see them: the module ``alexnet/_typed.py``.

A function that takes declared settings through its ``**`` keywords (or takes its every argument through ``*`` and
``**``: ``alexnet_train()``, ``alexnet_benchmark()``) is given its whole signature when its module is imported
(:func:`alexnet.declare.declaration.take_declared`), which ``help()`` and a notebook show; a type checker or an editor
reads the source alone, where it sees ``**options: Any``. For each such export of :mod:`alexnet`, this module writes a
function with the signature it has at run time (the same parameters, kinds and defaults; a Spark training's settings,
which its ``**`` keywords take, among them), each declared setting annotated with what a Python caller may give it
(:attr:`alexnet.declare.kinds.Spec.accepts`: a choice as a ``Literal`` of its values and aliases, a location as a string
or a path, ``None`` where it is taken), and with the first paragraph of its help as its docstring (the rest is
``help()``'s). ``alexnet/__init__.py`` imports them under ``TYPE_CHECKING`` alone: a type checker completes every
setting and refuses a misspelt name or a value of another type, and nothing changes when the package runs. ``make
setup`` runs ``python -m alexnet.cli.to_typed python/alexnet/_typed.py`` whenever a declaration or one of those
functions changes, and a test fails when the file in the repository is not what this module gives.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..declare.declaration import declared_by

#: The longest line written, as ruff holds the package's lines.
LINE = 120

HEADER = '''\
# Generated from the declarations of the settings and the public functions' signatures: do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_typed python/alexnet/_typed.py`, when one changes.
# mypy: disable-error-code="empty-body"
"""The public functions that take declared settings, with the signatures type checkers and editors read.

At run time these functions take their settings through ``**`` keywords, and their signature is built from the
declarations when their module is imported; ``alexnet/__init__.py`` imports the functions below in their place under
``TYPE_CHECKING`` alone, so that every setting is completed and checked (its name, and a value of the kind it takes)
without any change to what runs (see :mod:`alexnet.cli.to_typed`).
"""

from __future__ import annotations
'''

#: The names an annotation may use, each with the import that gives it: at run time (the standard library's) or
#: only when type checking (:data:`CHECKING_ONLY`).
IMPORTS: dict[str, str] = {
    "os": "import os",
    "Mapping": "from collections.abc import Mapping",
    "Sequence": "from collections.abc import Sequence",
    "Any": "from typing import Any",
    "Literal": "from typing import Literal",
    "tf": "import tensorflow as tf",
    "keras": "import tf_keras as keras",
    "SparkRun": "from .launch.api import SparkRun",
    "TrainSettings": "from .train.settings import TrainSettings",
}
CHECKING_ONLY = ("tf", "keras", "SparkRun", "TrainSettings")


def hides_its_arguments(function: Any) -> bool:
    """Whether ``function``, as written (what a type checker reads; its signature at run time may say more, see
    :func:`alexnet.declare.declaration.take_declared`), takes ``*`` or ``**`` arguments."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    return code is not None and bool(code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS))


def covered() -> dict[str, Any]:
    """The exports of :mod:`alexnet` whose own signature (as written, which a type checker reads) hides declared
    settings behind ``*`` or ``**`` parameters, by name in :data:`alexnet.__all__`'s order; a :class:`ValueError`
    for one that does not record which declared settings it takes (its module's call of ``record_declared``)."""
    import alexnet

    functions = {}
    for name in alexnet.__all__:
        function = getattr(alexnet, name)
        if isinstance(function, type) or not callable(function):
            continue
        if hides_its_arguments(function):
            if declared_by(function) is None:
                raise ValueError(f"{name}() takes * or ** arguments but records no declared settings")
            functions[name] = function
    return functions


def code(value: Any) -> str:
    """``value`` (a default: None, a flag, a number, a string or a tuple or list of them) as Python code."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (tuple, list)):
        items = ", ".join(code(item) for item in value)
        return f"({items},)" if isinstance(value, tuple) and len(value) == 1 else \
            f"({items})" if isinstance(value, tuple) else f"[{items}]"
    raise ValueError(f"no code for the default {value!r}")


def _annotation(annotation: Any) -> str:
    """A parameter's or return's annotation as it is written (a string, under ``from __future__ import
    annotations``), ``Any`` when it has none."""
    if annotation is inspect.Parameter.empty or annotation is inspect.Signature.empty:
        return "Any"
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def typed_signature(function: Any) -> inspect.Signature:
    """The signature of ``function`` at run time, every annotation a string: that of a declared setting (one of its
    declarations', or one its ``**`` keywords take) what a Python caller may give it."""
    declared = declared_by(function)
    assert declared is not None
    parameters = []
    for parameter in inspect.signature(function).parameters.values():
        spec = declared.named.get(parameter.name) or declared.keywords.get(parameter.name)
        parameters.append(parameter.replace(
            annotation=spec.accepts if spec is not None else _annotation(parameter.annotation)))
    return inspect.Signature(parameters, return_annotation=_annotation(inspect.signature(function).return_annotation))


def _wrapped(line: str, indent: str) -> list[str]:
    """``line`` of code as lines of at most :data:`LINE` characters, broken after a comma inside brackets (outside
    strings), the lines after the first indented by ``indent``."""
    lines: list[str] = []
    start, depth, quoted, last = 0, 0, False, -1
    for i, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "([":
            depth += 1
        elif not quoted and char in ")]":
            depth -= 1
        elif not quoted and char == "," and depth > 0 and line[i + 1:i + 2] == " ":
            if len(line[start:i + 1]) + (len(indent) if lines else 0) > LINE and last >= start:
                lines.append(line[start:last + 1])
                start = last + 2
            last = i
    if len(line[start:]) + (len(indent) if lines else 0) > LINE and last >= start:
        lines.append(line[start:last + 1])
        start = last + 2
    lines.append(line[start:])
    return [lines[0], *(indent + rest for rest in lines[1:])]


def _docstring(function: Any) -> list[str]:
    """The docstring of ``function``'s typed twin: the first paragraph of its help, and where the rest is (the help
    itself stays in the function's own module, once)."""
    summary = inspect.cleandoc(function.__doc__ or "").split("\n\n")[0]
    text = f"{summary}\n\nEvery argument, its default and what it does: ``help(alexnet.{function.__name__})``."
    if '"""' in text or "\\" in text:
        raise ValueError(f"the help of {function.__name__}() holds triple quotes or a backslash")
    lines = [f"    {line}" if line else "" for line in text.split("\n")]
    lines[0] = '    """' + lines[0].lstrip()
    return [*lines, '    """'] if len(lines) > 1 else [lines[0] + '"""']


def _parameter(parameter: inspect.Parameter) -> str:
    """One parameter of a typed signature as code (its annotation a string)."""
    if parameter.kind is parameter.VAR_KEYWORD:
        return f"**{parameter.name}: {parameter.annotation}"
    if parameter.kind in (parameter.VAR_POSITIONAL, parameter.POSITIONAL_ONLY):
        raise ValueError(f"no typed parameter written for {parameter}")
    default = "" if parameter.default is parameter.empty else f" = {code(parameter.default)}"
    return f"{parameter.name}: {parameter.annotation}{default}"


def function_source(name: str, function: Any) -> str:
    """The typed twin of export ``name``: its signature (:func:`typed_signature`), one parameter a line, its help as
    its docstring and ``...`` as its body."""
    signature = typed_signature(function)
    lines = [f"def {name}("]
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "    *," not in lines:
            lines.append("    *,")
        lines += _wrapped(f"    {_parameter(parameter)},", "        ")
    lines.append(f") -> {signature.return_annotation}:")
    return "\n".join([*lines, *_docstring(function), "    ..."]) + "\n"


def _sorted(lines: list[str]) -> list[str]:
    """Import lines as ruff sorts them in one group: ``import`` ones first, then ``from`` ones by module, each one's
    names constants first, then classes, then the rest."""
    froms: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, name = line[len("from "):].split(" import ")
            froms.setdefault(module, set()).add(name)

    def order(name: str) -> tuple[bool, bool, str]:
        return not name.isupper(), not name[:1].isupper(), name

    return [*sorted({line for line in lines if line.startswith("import ")}),
            *(f"from {module} import {', '.join(sorted(froms[module], key=order))}" for module in sorted(froms))]


def _imports(body: str) -> str:
    """The imports of the names of :data:`IMPORTS` that ``body`` uses (its string literals left aside): the standard
    library's, then the others under ``TYPE_CHECKING``."""
    used = set(re.findall(r"\w+", re.sub(r'"[^"\n]*"', "", body)))
    names = [name for name in IMPORTS if name in used]
    later = [IMPORTS[name] for name in names if name in CHECKING_ONLY]
    now = [IMPORTS[name] for name in names if name not in CHECKING_ONLY] + \
        (["from typing import TYPE_CHECKING"] if later else [])
    text = "\n".join(_sorted(now))
    if later:
        groups = [_sorted([line for line in later if line.startswith("from .") == local]) for local in (False, True)]
        text += "\n\nif TYPE_CHECKING:\n" + "\n\n".join("\n".join(f"    {line}" for line in group)
                                                        for group in groups if group)
    return text


def typed_source() -> str:
    """The text of ``alexnet/_typed.py``: every function of :func:`covered`, typed."""
    body = "\n\n".join(function_source(name, function) for name, function in covered().items())
    return f"{HEADER}\n{_imports(body)}\n\n\n{body}"


def main(argv: list[str] | None = None) -> int:
    """Write :func:`typed_source` into the file named by the one argument (``-``: standard output)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m alexnet.cli.to_typed python/alexnet/_typed.py\n")
        return 2
    if args[0] == "-":
        sys.stdout.write(typed_source())
    else:
        Path(args[0]).write_text(typed_source(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
