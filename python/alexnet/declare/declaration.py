"""A declaration of settings, and what every front end derives from one.

A declaration is a frozen dataclass whose fields are made with :func:`setting`: each field is one setting, with its
Python type and a :class:`~.kinds.Spec` (the default a caller sees, the kind of value, its limits or choices, its help,
its command-line option). The training settings (:class:`alexnet.train.settings.TrainSettings`), the benchmark's
(:mod:`alexnet.bench.plan`), the launch options of a Spark job (:mod:`alexnet.launch.options`), the options of an
evaluation, a prediction, an export and the model pin read (:mod:`alexnet.model.options`) and those of the data stage
(:mod:`alexnet.data.options`) are declared so; from a declaration come a function's signature and the lines of its help
(:func:`parameters`, :func:`help_lines`, :func:`take_declared`, and :func:`record_declared`, what a function's
signature takes from which setting), the checked and typed values (:func:`convert`,
:func:`restore`, :func:`check`), the command line's options (:func:`alexnet.cli.common.declared_options`) and the R
tables the R functions check their arguments with (:mod:`alexnet.cli.to_r`). This module does not import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..checks import name_hints
from ..errors import AlexnetError
from .kinds import KINDS, Spec, UsedWith

D = TypeVar("D")


def setting(default: Any, kind: str, help: str, **spec: Any) -> Any:
    """A field of a declaration: a setting with ``default`` (as a caller gives it), of ``kind`` (a name of
    :data:`~.kinds.KINDS`), described by ``help``; ``spec`` holds the rest of its :class:`~.kinds.Spec`."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    return field(metadata={"spec": Spec(default=default, kind=kind, help=help, **spec)})


def like(other: Spec, **changes: Any) -> Any:
    """A field of a declaration whose setting is ``other`` (another declaration's) with ``changes``: the same kind,
    choices and limits, so that the two are checked alike."""
    return field(metadata={"spec": dataclasses.replace(other, **changes)})


def specs(declaration: type) -> dict[str, Spec]:
    """Every setting's :class:`~.kinds.Spec` of ``declaration``, by name, in the declaration's order."""
    return {f.name: f.metadata["spec"] for f in dataclasses.fields(declaration)}


def changed(values: Any) -> list[str]:
    """The names of the settings of ``values`` (an instance of a declaration) that are not at their defaults."""
    return [name for name, spec in specs(type(values)).items() if getattr(values, name) != spec.default]


def unused(declaration: type, values: Mapping[str, Any]) -> dict[str, UsedWith]:
    """The settings of ``declaration`` that the others of ``values`` (checked values by name) leave unused, as
    each setting's :class:`~.kinds.UsedWith` says, with what would use them."""
    return {name: spec.used_with for name, spec in specs(declaration).items()
            if spec.used_with is not None and not spec.used_with.used(values)}


def warn_unused(values: Any, log: logging.Logger, declaration: type | None = None) -> None:
    """A warning on ``log`` for each setting of ``values`` (an instance of a declaration, or checked values by name
    of ``declaration``) given, neither ``None`` nor its default, that the others leave unused: what it needs and
    what a run without that does not do."""
    if declaration is None:
        declaration = type(values)
        values = {name: getattr(values, name) for name in specs(declaration)}
    defaults = {name: spec.default for name, spec in specs(declaration).items()}
    for name, used_with in unused(declaration, values).items():
        if values[name] not in (None, defaults[name]):
            log.warning("`%s` is only used with %s: %s.", name, used_with.needed, used_with.missing)


def types(declaration: type) -> dict[str, Any]:
    """The Python type of every setting of ``declaration`` (as written in the declaration), by name."""
    return {f.name: f.type for f in dataclasses.fields(declaration)}


def defaults(declaration: type) -> dict[str, Any]:
    """Every setting's default of ``declaration``, as a caller gives it."""
    return {name: spec.default for name, spec in specs(declaration).items()}


def check_names(names: Iterable[str], known: Iterable[str], where: str, listing: str, *,
                reserved: Mapping[str, str] | None = None, said: Iterable[str] | None = None) -> None:
    """Raise when ``names`` holds one not in ``known`` (with the closest name when one is close); ``where`` names the
    call, ``listing`` what the known names are (``"The training settings"``); ``reserved`` maps names a caller must
    not give to what to say instead; ``said``, when given, are the names the error offers and lists instead of
    ``known`` (a function's every argument, of which ``known`` are those it takes by keyword alone)."""
    names, known = list(names), list(known)
    for name in names:
        if reserved and name in reserved:
            raise AlexnetError(f"`{name}` cannot be given to {where}: {reserved[name]}")
    unknown = [name for name in names if name not in known]
    if unknown:
        offered = known if said is None else list(said)
        raise AlexnetError(f"{where} does not take {name_hints(unknown, offered)}: fix the name, or leave it out. "
                           f"{listing} are: {', '.join(offered)}.")


def _arguments_of(where: str) -> list[str] | None:
    """The names of every argument of the public function ``where`` names (``"imagenet_partition()"``), its own and
    its declared options alike; ``None`` for another ``where``."""
    import alexnet

    function = getattr(alexnet, where[:-2], None) if where.endswith("()") and where[:-2] in alexnet.__all__ else None
    if function is None or not callable(function):
        return None
    return [p.name for p in inspect.signature(function).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


def convert(declaration: type, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting of ``declaration`` from ``arguments`` (by name; those left out at their default), checked and
    converted one by one: an :class:`AlexnetError` naming the first that is refused."""
    return {name: spec.convert(arguments.get(name, spec.default), name)
            for name, spec in specs(declaration).items()}


def check(declaration: type[D], arguments: Mapping[str, Any], where: str) -> D:
    """The settings of ``declaration`` among ``arguments`` (by name; those left out at their defaults), checked and
    converted; an :class:`AlexnetError` naming one that ``where`` (the function given them) does not take, with the
    closest, or the first refused."""
    known = specs(declaration)
    # a name it does not take is said among all the function's arguments, read only then (every call comes here)
    every = _arguments_of(where) if any(name not in known for name in arguments) else None
    check_names(arguments, known, where, "Its options" if every is None else "Its arguments", said=every)
    return declaration(**convert(declaration, arguments))


def to_dict(values: Any) -> dict[str, Any]:
    """A declaration's values as plain values (lists for tuples): what JSON, R and a Spark task carry."""
    return {name: list(value) if isinstance(value, tuple) else value
            for name, value in dataclasses.asdict(values).items()}


def restore(declaration: type[D], values: Mapping[str, Any]) -> D:
    """The values :func:`to_dict` gave, typed again (after a trip through R or JSON), not checked again; a setting
    missing from ``values`` takes its default."""
    return declaration(**{name: spec.restore(values.get(name, spec.default))
                          for name, spec in specs(declaration).items()})


def at_defaults(declaration: type[D]) -> D:
    """The settings of ``declaration``, every one at its default."""
    return restore(declaration, {})


def parameters(declaration: type, kind: inspect._ParameterKind = inspect.Parameter.KEYWORD_ONLY
               ) -> list[inspect.Parameter]:
    """The settings of ``declaration`` as parameters of a signature, of ``kind``, with their defaults and types."""
    typed = types(declaration)
    return [inspect.Parameter(name, kind, default=spec.default, annotation=typed[name])
            for name, spec in specs(declaration).items()]


def help_lines(declaration: type, indent: str = "    ", title: str = "") -> str:
    """One bullet per setting of ``declaration``: its name, default and help, as a docstring lists them (after
    ``title`` when given)."""
    lines = [indent + title] if title else []
    for name, spec in specs(declaration).items():
        text = f"``{name}`` (default ``{spec.default!r}``): {spec.help}."
        lines.append(textwrap.fill(text, 116, initial_indent=indent + "- ", subsequent_indent=indent + "  "))
    return "\n".join(lines)


#: The attribute of a public function that records the declared settings it takes (:func:`record_declared`).
DECLARED = "__alexnet_declared__"


@dataclass(frozen=True)
class Declared:
    """The declared settings a public function takes: ``named``, those its signature lists (by name, each one's
    spec), and ``keywords``, those its ``**`` keywords take besides (a Spark training's settings), each with the
    default the function gives it."""

    named: dict[str, Spec]
    keywords: dict[str, Spec] = field(default_factory=dict)


def record_declared(function: Any, *declarations: type, keywords: Mapping[str, Spec] | None = None) -> None:
    """Record on ``function`` the settings of ``declarations`` that its signature takes, and the ``keywords`` its
    ``**`` keywords take (:func:`declared_by` reads them back): what the typed signatures of the public functions
    (:mod:`alexnet.cli.to_typed`) are made from."""
    setattr(function, DECLARED, Declared({name: spec for group in declarations for name, spec in specs(group).items()},
                                         dict(keywords or {})))


def declared_by(function: Any) -> Declared | None:
    """The declared settings ``function`` takes, as :func:`record_declared` recorded them; ``None`` for a function that
    takes none."""
    return getattr(function, DECLARED, None)


def take_declared(function: Any, *declarations: type, keywords: Mapping[str, Spec] | None = None,
                  title: str = "") -> None:
    """Give ``function``, which takes the settings of ``declarations`` through its ``**`` keywords, their signature and
    help: its own positional parameters, then every declared setting by keyword with its default and type, then its
    own keyword-only parameters, then, with ``keywords`` (the settings its ``**`` keywords take besides: a training's
    settings), each of those by keyword with its default and what a caller may give it, so that ``help()`` and
    :func:`inspect.signature` name every argument it takes; after its docstring, one bullet per setting of
    ``declarations`` (under ``title`` when given). A setting that ``function`` names among its own parameters (so
    that it may be given by position) keeps its place; its default must be the declaration's (a :class:`ValueError`
    otherwise, when the module is imported). Which settings it takes is recorded on it (:func:`record_declared`)."""
    written = inspect.signature(function)
    for group in declarations:
        for name, spec in specs(group).items():
            own_default = written.parameters[name].default if name in written.parameters else spec.default
            if own_default != spec.default:
                raise ValueError(f"{function.__name__}() gives `{name}` the default {own_default!r}, but "
                                 f"{group.__name__} declares {spec.default!r}")
    own = list(written.parameters.values())
    first = [p for p in own if p.kind is p.POSITIONAL_OR_KEYWORD]
    rest = [p for p in own if p.kind is p.KEYWORD_ONLY]
    declared = [p for group in declarations for p in parameters(group) if p.name not in written.parameters]
    taken = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=spec.default, annotation=spec.accepts)
             for name, spec in (keywords or {}).items()]
    function.__signature__ = inspect.Signature([*first, *declared, *rest, *taken],
                                               return_annotation=written.return_annotation)
    helps = "\n".join(help_lines(group) for group in declarations)
    function.__doc__ = "\n\n".join([(function.__doc__ or "").rstrip(), *([f"    {title}"] if title else []),
                                     helps + "\n"])
    record_declared(function, *declarations, keywords=keywords)
