"""What every command of the ``alexnet`` command line shares: the core function behind a command, option types
and help texts that show the core's defaults, and printing a result.

A command's options left out are not passed on, so the core's own defaults apply; help texts read those
defaults from the functions' signatures.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..declare.kinds import Spec

BOARD_HELP = (
    "board to use: a folder or file:// URL, gs://bucket/prefix, s3://bucket/prefix or https:// (read-only); "
    "default: $ALEXNET_BOARD, else a folder under the user's cache directory"
)

#: The public function (a name of ``alexnet.__all__``) behind each command, imported when the command runs.
CORE = {
    "synth": "imagenet_synthetic",
    "upload": "imagenet_upload",
    "categories": "imagenet_categories",
    "fetch": "imagenet_partition",
    "validation": "imagenet_validation",
    "train": "alexnet_train",
    "history": "alexnet_history",
    "spark-train": "alexnet_spark_train",
    "bench": "alexnet_benchmark",
    "model": "alexnet_model",
    "evaluate": "alexnet_evaluate",
    "predict": "alexnet_predict",
    "features": "alexnet_features",
    "filters": "alexnet_filters",
    "export": "alexnet_export",
    "spark-evaluate": "alexnet_spark_evaluate",
}

#: Adds a command: its name, the function that runs it, a one-line help and an optional longer description.
AddCommand = Callable[..., argparse.ArgumentParser]


def core(command: str) -> Callable[..., Any]:
    """The public function behind ``command`` (found through :data:`CORE` when the command runs)."""
    import alexnet

    return getattr(alexnet, CORE[command])


def default(command: str, name: str) -> Any:
    """The default of argument ``name`` of the core function behind ``command`` (read from its signature)."""
    return inspect.signature(core(command)).parameters[name].default


def with_default(command: str, name: str, text: str) -> str:
    """``text`` followed by the default of argument ``name`` of ``command``'s core function, when it has one."""
    value = default(command, name)
    if value is None or value is inspect.Parameter.empty:
        return text
    return f"{text} (default: {('yes' if value else 'no') if isinstance(value, bool) else value})"


#: Where a command's parser keeps its declared options by the core's names (see :func:`as_typed`).
OPTION_NAMES = "declared_option_names"


def declared_options(p: argparse._ActionsContainer, table: Mapping[str, Spec], dest: Callable[[str], str], *,
                     names: str | None = OPTION_NAMES) -> None:
    """An option for every setting of ``table`` (a declaration's specs) that the declaration puts on the command
    line (of the parser ``p`` or of a group of its options), with its help and default, its value kept at
    ``dest(name)``; values are only converted here (words to numbers), and checked by the declaration's checks
    (:func:`declared_args`). Each is recorded by its core name at the parser's default ``names`` (:data:`OPTION_NAMES`:
    the command's own messages say it so; another: the messages of a call of its own, :func:`reading_as`)."""
    from ..declare.kinds import KINDS, option_name

    for name, spec in table.items():
        flag = option_name(name, spec)
        if flag is None:
            continue
        kind = KINDS[spec.kind]
        shown = spec.default is not None or spec.none_word is not None  # an unset default is said in the help
        options: dict[str, Any] = {"dest": dest(name), "help": declared_help(spec)
                                   + (f" (default: {spec.shown_default()})" if shown else "")}
        if spec.kind == "flag":
            options["action"] = argparse.BooleanOptionalAction
        else:
            parse = kind.parse
            assert parse is not None, f"`{name}` ({spec.kind}) has no command-line form: declare it with option=None"
            options["type"] = parse if spec.none_word is None else _or_word(parse, spec.none_word)
            if kind.nargs is not None:
                options["nargs"] = kind.nargs
            words = [*map(str, spec.choices), *([spec.none_word] if spec.none_word else [])]
            # a number that has a word for none: either
            metavar = "{" + ",".join(words) + "}" if spec.choices else \
                name.upper() + (f"|{spec.none_word}" if spec.none_word else "")
            options["metavar"] = spec.metavar or metavar
        p.add_argument(flag, **options)
        if names is not None:
            _name_option(p, name, flag, spec.kind == "flag", names)


def declared_help(spec: Spec) -> str:
    """The help of a declared setting as its option says it: the declaration's "unset" (None) said as the word the
    option takes for it (``auto``, ``never``)."""
    return spec.help.replace("(unset: ", f"({spec.none_word}: ") if spec.none_word else spec.help


def _or_word(parse: Callable[[str], Any], word: str) -> Callable[[str], Any]:
    """``parse``, but for ``word`` (a setting's word for None), which is kept as it is for :func:`declared_args`."""
    def parsed(value: str) -> Any:
        return value if value == word else parse(value)

    parsed.__name__ = getattr(parse, "__name__", "value")  # argparse names the type in its errors
    return parsed


def core_option(p: argparse.ArgumentParser, name: str, flag: str, switch: bool = False, **options: Any) -> None:
    """The option ``flag`` (``options`` as ``add_argument`` takes them), written by a command rather than declared,
    that gives the core's argument ``name``: messages of the core naming ``name`` name the option instead
    (``switch``: an on/off option, ``--no-...`` turning it off)."""
    if switch:
        options = {"action": argparse.BooleanOptionalAction, "default": argparse.SUPPRESS, **options}
    p.add_argument(flag, **options)
    _name_option(p, name, flag, switch)


def _name_option(p: argparse._ActionsContainer, name: str, flag: str, switch: bool, names: str = OPTION_NAMES) -> None:
    """Record that the core's setting ``name`` is given as ``flag`` on this command (``switch``: an on/off option,
    ``--no-...`` turning it off), at the parser's default ``names``; a name given by two options of one command is
    recorded as neither. ``p`` is the command's parser or a group of its options, whose defaults are the parser's."""
    known = dict(p.get_default(names) or {})
    known[name] = (flag, switch) if known.get(name, (flag, switch)) == (flag, switch) else None
    p.set_defaults(**{names: known})


#: Where a command's parser keeps the options of the model pin it reads by the core's names (said so only while it
#: is read: :func:`reading_as`).
PIN_OPTION_NAMES = "model_pin_option_names"

#: The options of a call the command makes of its own (the model pin a command reads), by the core's names, while it
#: runs (:func:`reading_as`): said so in its errors and warnings, rather than as the command's options of the same
#: names (evaluate's `cache_dir` is --cache-dir; the pin's, --model-cache).
_READING: dict[str, tuple[str, bool] | None] = {}


@contextlib.contextmanager
def reading_as(options: Mapping[str, tuple[str, bool] | None]) -> Iterator[None]:
    """While the block runs, the core's names of ``options`` are said as these options (warnings too), and the
    message of an :class:`~alexnet.errors.AlexnetError` it raises is said so before it leaves."""
    from ..errors import AlexnetError

    _READING.update(options)
    try:
        yield
    except AlexnetError as error:
        if error.args and isinstance(error.args[0], str):
            error.args = (as_typed(error.args[0], options), *error.args[1:])
        raise
    finally:
        for name in options:
            _READING.pop(name, None)


#: Where the top parser keeps, for each core function a command runs, the command and its options by the core's names
#: (see :func:`as_typed`).
COMMAND_CALLS = "command_calls"

#: Calls of the core in its messages, found to be said as commands: ``name(arguments)``.
_CALL = re.compile(r"\b([a-z]+_[a-z_]+)\(([^()]*)\)")
#: R's vectors in the core's messages, ``c(128, 160, 224)``: a list option takes its values one after another.
_VECTOR = re.compile(r"(?<![\w$.])c\(([^()]*)\)")
#: A name the core may give a setting by, in a message: ```name```, with `` = `` after it or not, or the name alone
#: followed by `` = `` and, for a switch, its value; the name alone not part of another (`data$image`, x.name) nor
#: an argument of a call shown (f(a, name = 1)).
_SETTING = re.compile(r"`(?P<quoted>[a-z_][a-z0-9_]*)`(?P<given> = )?"
                      r"|(?<![\w`$.(-])(?<!, )(?P<bare>[a-z_][a-z0-9_]*) = (?:(?P<value>TRUE|True|FALSE|False)\b)?")


def as_typed(message: str, options: Mapping[str, tuple[str, bool] | None],
             calls: Mapping[str, tuple[str, Mapping[str, tuple[str, bool] | None]]] | None = None) -> str:
    """A message of the core as the command line's user reads it: each of the command's declared settings that it
    names (``options``, as :func:`declared_options` recorded them) said as its option. ```warmup_epochs``` becomes
    ```--warmup-epochs```, ``lr_scaling = 'linear'`` becomes ``--lr-scaling 'linear'``, and an on/off setting's
    ``keep_best = TRUE`` and ``validation = FALSE`` become ``--keep-best`` and ``--no-validation``. Messages about
    several settings at once are the core's checks of them together; a single setting's refusal already names the
    option (:func:`declared_args`).

    A call of the core that a command runs (``calls``: the function's command and that command's options) is said
    as the command, its arguments as that command's options: ``imagenet_upload(..., board = 'b')`` becomes
    ```alexnet upload ... --board 'b'```. ``alexnet_model()``, which reads a model pin, becomes ```--model-pin
    NAME```, the option of every command that reads one, and R's ``c(128, 160, 224)`` becomes ``128 160 224``."""
    options = {**options, **_READING} if _READING else options
    message = _CALL.sub(lambda match: _as_command(match, calls or {}, options), message)
    message = _VECTOR.sub(lambda match: " ".join(value.strip() for value in match[1].split(",")), message)
    return _SETTING.sub(lambda match: _as_option(match, options), message)


def _as_option(match: re.Match[str], options: Mapping[str, tuple[str, bool] | None]) -> str:
    """The name ``match`` (of :data:`_SETTING`) as its option, or as it is when it is none of ``options``."""
    option = options.get(match["quoted"] or match["bare"])
    if option is None:
        return match[0]
    flag, switch = option
    if match["quoted"]:
        return f"`{flag}`" + (" " if match["given"] else "")
    value = match["value"]
    if switch and value:
        return flag if value in ("TRUE", "True") else "--no-" + flag[2:]
    return f"{flag} {value or ''}"


def _as_command(match: re.Match[str], calls: Mapping[str, tuple[str, Mapping[str, tuple[str, bool] | None]]],
                options: Mapping[str, tuple[str, bool] | None] | None = None) -> str:
    """The call ``match`` (of :data:`_CALL`) as a command line, or as it is when no command runs that function;
    ``options``: those of the command whose message it is."""
    function, arguments = match[1], match[2]
    if function == CORE["model"]:  # a training reads a model pin only to start from it
        return "`--initial-pin NAME`" if "initial_model" in (options or {}) else "`--model-pin NAME`"
    if function not in calls:
        return match[0]
    command, options = calls[function]
    words = ["alexnet", command, *(_argument_as_typed(argument.strip(), options) for argument in arguments.split(",")
                                   if argument.strip())]
    return "`" + " ".join(words) + "`"


def _argument_as_typed(argument: str, options: Mapping[str, tuple[str, bool] | None]) -> str:
    """An argument of a call shown as a command's words: ``name = value`` as the option and its value, ``name =``
    (the argument named, its value left to the reader) as the option alone."""
    named = re.fullmatch(r"([a-z_][a-z0-9_]*) =", argument)
    option = options.get(named[1]) if named else None
    return option[0] if option else as_typed(argument, options)


def typed(args: argparse.Namespace, *, workers: bool = False) -> Callable[[str], str]:
    """:func:`as_typed` with the options and commands of the command ``args`` ran (``workers``: as
    :func:`said_as` says its workers' words): for the core's words that a command prints rather than logs (its logged
    warnings and errors are said so already)."""
    spec = said_as(args, workers=workers)
    return lambda text: as_typed(text, spec["options"], spec["calls"])


def said_as(args: argparse.Namespace, *, workers: bool = False) -> dict[str, Any]:
    """The options and commands of the command ``args`` ran, by the core's names, as :func:`as_typed` takes them
    (plain values: the driver's progress monitor, a process of its own, says the workers' warnings with them). With
    ``workers``, for what its workers say: they read the model pin too (spark-evaluate), and a name its options give
    otherwise than the pin's (``cache_dir``: --cache-dir, the pin's --model-cache) is said as neither."""
    options = dict(getattr(args, OPTION_NAMES, None) or {})
    if workers:
        pin = getattr(args, PIN_OPTION_NAMES, None) or {}
        options.update({name: None for name, option in pin.items() if name in options and options[name] != option})
    return {"options": options, "calls": getattr(args, COMMAND_CALLS, None) or {}}


def command_calls(commands: Mapping[str, argparse.ArgumentParser]) \
        -> dict[str, tuple[str, Mapping[str, tuple[str, bool] | None]]]:
    """For each core function a command runs (:data:`CORE`), the command and its options by the core's names."""
    return {CORE[name]: (name, parser.get_default(OPTION_NAMES) or {}) for name, parser in commands.items()
            if name in CORE}


def help_as_typed(parser: argparse.ArgumentParser,
                  calls: Mapping[str, tuple[str, Mapping[str, tuple[str, bool] | None]]]) -> None:
    """Say the help of a command's options and its description with its own options (:func:`as_typed`): the
    declared help names the settings as the core does (``image_size``, ``lr_schedule = "step"``,
    ``alexnet_export()``)."""
    options = parser.get_default(OPTION_NAMES) or {}
    if parser.description:
        parser.description = as_typed(parser.description, options, calls)
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = as_typed(action.help, options, calls)


def declared_args(args: argparse.Namespace, table: Mapping[str, Spec], dest: Callable[[str], str]) -> dict[str, Any]:
    """The settings of ``table`` given on the command line (see :func:`declared_options`), by name, as the core takes
    them; the options left out are not passed, so their defaults apply.

    Each value given is put through its setting's own check here first, the one the core runs, named as the option
    typed: a refused value is told as ``--model-pin`` and ``--min-images`` are, not as the core's ``name`` and
    ``min_images``. The core checks the values again, with what it checks of them together."""
    from ..declare.kinds import flatten_words, option_name

    chosen = {}
    for name, spec in table.items():
        if hasattr(args, dest(name)):
            value = flatten_words(getattr(args, dest(name)))
            value = None if spec.none_word is not None and value == spec.none_word else value
            spec.convert(value, option_name(name, spec) or name)
            chosen[name] = value
    return chosen


def positive(value: str) -> int:
    """An option's whole number of at least 1 (a command's own option; a declared one is checked by its
    declaration)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {value}")
    return number


def given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options among ``names`` given on the command line (the others keep the core's defaults)."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def size_text(count: float) -> str:
    """A number of bytes as people read it, in powers of 1000 (``"4.7 MB"``, ``"912.0 kB"``), as R's prints say it."""
    units = ("bytes", "kB", "MB", "GB", "TB")
    power = 0
    while power < len(units) - 1 and count >= 1000 ** (power + 1):
        power += 1
    return f"{int(count)} bytes" if power == 0 else f"{count / 1000 ** power:.1f} {units[power]}"


def emit(result: Any, as_json: bool, summary: Callable[[Any], str]) -> None:
    """Print ``result``: as JSON (a number that is not finite as ``null``, which JSON has no other word for), or as
    the lines ``summary`` makes of it; either with a URL's password said as ``***`` (a board on a server given as
    ``https://user:password@host/...``), as logs and errors say it: what a command prints ends up in job logs."""
    from ..errors import without_passwords

    text = json.dumps(finite_json(result), indent=2, default=str, allow_nan=False) if as_json else summary(result)
    sys.stdout.write(without_passwords(text) + "\n")


def finite_json(value: Any) -> Any:
    """``value`` with every float that is NaN or infinite, at any depth of its dicts, lists and tuples, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def options_of(p: argparse.ArgumentParser, declaration: type) -> None:
    """An option for every option of ``declaration`` (the data stage's, :mod:`alexnet.data.options`; a prediction's
    or an export's, :mod:`alexnet.model.options`) that it puts on the command line, kept under its own name."""
    from ..declare.declaration import specs

    declared_options(p, specs(declaration), str)


def options_given(args: argparse.Namespace, declaration: type) -> dict[str, Any]:
    """The options of ``declaration`` given on the command line (see :func:`options_of`), by name."""
    from ..declare.declaration import specs

    return declared_args(args, specs(declaration), str)


def partition_options(p: argparse.ArgumentParser, board_help: str = BOARD_HELP) -> None:
    """The options of :func:`alexnet.imagenet_partition`: which partition (:class:`alexnet.data.options.
    PartitionOptions`) of which board (``board_help``: what ``--board`` says), and how it is fetched
    (:class:`alexnet.data.options.FetchOptions`)."""
    from ..data.options import FetchOptions, PartitionOptions

    options_of(p, PartitionOptions)
    core_option(p, "board", "--board", help=board_help)
    options_of(p, FetchOptions)


def fetch(args: argparse.Namespace) -> dict[str, Any]:
    """The partition the options of :func:`partition_options` name, fetched into the local cache."""
    from ..data.options import FetchOptions, PartitionOptions

    return core("fetch")(**options_given(args, PartitionOptions), **given(args, "board"),
                         **options_given(args, FetchOptions))


def default_board(args: argparse.Namespace) -> str:
    """``--board``, else the default board."""
    from ..storage.board import default_board as board

    return getattr(args, "board", None) or board()

