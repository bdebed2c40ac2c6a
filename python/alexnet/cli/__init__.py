"""The ``alexnet`` command line: each command checks its arguments and makes one call into the core.

One module per stage adds its commands: :mod:`.data` (synth, upload, categories, fetch), :mod:`.train` (train),
:mod:`.model` (evaluate, predict, export), :mod:`.cluster` (spark-train, spark-evaluate) and :mod:`.bench` (bench);
:mod:`.common` holds what they share. An option left out is not passed on, so the core's own default applies.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from .. import __version__
from ..child import ChildError
from ..environment import env_set
from ..errors import AlexnetError, WithoutPasswords, missing_module
from ..launch import monitor
from ..progress import BarSafeHandler
from ..scratch import own_temporary_folder
from . import bench, cluster, common, data, model, train

log = logging.getLogger("alexnet")

#: The modules adding commands, in the order of the help's list.
STAGES = (data, train, cluster, model, bench)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, as the commands' own errors are (the usage is one
    ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Program(_Parser):
    """The ``alexnet`` parser, whose ``-v`` and ``-q`` may be typed before the command and after it: typed on either
    side they are one choice, and the two together are refused as argparse refuses them on one side."""

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        _logging_after_command(self, parsed)
        return parsed, rest


def build_parser() -> argparse.ArgumentParser:
    """The ``alexnet`` argument parser."""
    parser = _Program(
        prog="alexnet", allow_abbrev=False,
        description="Train AlexNet on ImageNet from a bucket: upload one zip per category to a board, fetch a "
                    "worker's balanced share, train with TensorFlow.",
        epilog="Run 'alexnet COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"alexnet {__version__}")
    _logging_options(parser, default=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    def add(name: str, run: Callable[[argparse.Namespace], None], help_text: str, description: str = ""
            ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=description or help_text,
                                  argument_default=argparse.SUPPRESS, allow_abbrev=False)
        sub.set_defaults(run=run)
        sub.add_argument("--json", action="store_true", default=False, help="print the result as JSON")
        _logging_options(sub, default=False)  # after the command too: `alexnet train ... -q`
        return sub

    for stage in STAGES:
        stage.register(add)
    calls = common.command_calls(commands.choices)
    for sub in commands.choices.values():
        common.help_as_typed(sub, calls)
    parser.set_defaults(**{common.COMMAND_CALLS: calls})
    return parser


#: Where a command's parser keeps its ``-v`` and ``-q``, by the program's names of them (see
#: :func:`_logging_after_command`).
_AFTER_COMMAND = {"verbose": "command_verbose", "quiet": "command_quiet"}


def _logging_options(parser: argparse.ArgumentParser, *, default: bool) -> None:
    """``-v`` and ``-q``, one or the other, on ``parser``: the program's (with their defaults), or a command's (given
    only when typed, kept apart until :func:`_logging_after_command` reads them)."""
    unset = {} if default else {"default": argparse.SUPPRESS}
    either = parser.add_mutually_exclusive_group()
    either.add_argument("-v", "--verbose", action="count", **({"default": 0} if default else unset),
                        dest="verbose" if default else _AFTER_COMMAND["verbose"],
                        help="log more: -v adds the libraries' INFO lines (pins, gcsfs, ...), alexnet's debugging "
                             "detail and each line's time, -vv everyone's debugging detail")
    either.add_argument("-q", "--quiet", action="store_true", **({"default": False} if default else unset),
                        dest="quiet" if default else _AFTER_COMMAND["quiet"],
                        help="log warnings and errors only, and draw no progress bars")


def _logging_after_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The ``-v`` or ``-q`` typed after the command, in ``args`` (parsed by the program's ``parser``), as the
    program's, in place of what was typed before it; one typed before and the other after are refused by the
    command's parser with argparse's own error."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = commands.choices[args.command]
    typed = {a.dest: a for a in sub._actions if a.dest in _AFTER_COMMAND.values() and hasattr(args, a.dest)}
    before = {a.dest: a for a in parser._actions if a.dest in _AFTER_COMMAND and getattr(args, a.dest)}
    for name, kept in _AFTER_COMMAND.items():
        other = next((action for dest, action in before.items() if dest != name), None)
        if kept in typed and other is not None:
            sub.error(str(argparse.ArgumentError(typed[kept], "not allowed with argument "
                                                 + "/".join(other.option_strings))))
    for name, kept in _AFTER_COMMAND.items():
        if kept in typed:
            setattr(args, name, getattr(args, kept))
            delattr(args, kept)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed; arguments no option takes refused by the command's parser, naming the command and the
    options nearest to each (``--epocs``: ``--epochs``)."""
    import difflib

    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub = commands.choices[args.command]
        known = [option for action in sub._actions for option in action.option_strings if option.startswith("--")]

        def nearest(word: str) -> list[str]:
            """The options spelt nearly so, else those it begins (``--images``: ``--images-per-class``)."""
            return difflib.get_close_matches(word, known, n=2, cutoff=0.7) or [
                option for option in known if option.startswith(word + "-")][:2]

        near = {word: nearest(word.split("=", 1)[0]) for word in unknown if word.startswith("-")}
        hints = [f"{word}: did you mean {' or '.join(found)}?" for word, found in near.items() if found]
        sub.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" ({'; '.join(hints)})" if hints else ""))
    return args


def configure_logging(verbose: int = 0, quiet: bool = False) -> None:
    """Log alexnet's INFO lines and other libraries' warnings only (pins logs a line per pin written), those without
    their tracebacks; ``verbose`` 1 adds the libraries' INFO lines, their tracebacks and alexnet's DEBUG ones, 2 and
    more every library's DEBUG lines, each line with its time (where the seconds of a command go); ``quiet`` leaves
    warnings and errors only."""
    others = logging.WARNING if quiet or verbose < 1 else logging.INFO if verbose == 1 else logging.DEBUG
    own = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    # records written between the progress bars' lines, not after a bar on its line
    logging.basicConfig(level=others, format="%(levelname)s %(name)s: %(message)s", handlers=[BarSafeHandler()])
    logging.getLogger().setLevel(others)
    log.setLevel(own)
    timed = "%(asctime)s.%(msecs)03d " if verbose else ""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, BarSafeHandler):
            handler.setFormatter(logging.Formatter(f"{timed}%(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
        for old in [f for f in handler.filters if isinstance(f, _NoLibraryTracebacks)]:
            handler.removeFilter(old)
        if verbose < 1:
            handler.addFilter(_NoLibraryTracebacks())


class _NoLibraryTracebacks(logging.Filter):
    """Without ``-v``, another library's error is one line: its traceback is left out (gcsfs logs one with every
    request that ran out of its retries; alexnet's own error says what failed and what to do)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("alexnet") and (record.exc_info or record.stack_info):
            text = record.getMessage().strip().splitlines()
            record.msg, record.args = (text[0] if text else ""), ()
            record.exc_info = record.exc_text = record.stack_info = None
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``alexnet`` command line; the exit code: 0, 1 after an error found while the work ran (its settings
    accepted: a worker, a child process or a Spark job that failed, a timeout reached, a cluster out of reach), 2
    after one in the settings or input (as argparse's usage errors), 130 after Ctrl-C."""
    parser = build_parser()
    args = parse(parser, argv)
    configure_logging(args.verbose, args.quiet)
    typed, unsaid = _AsTyped(common.typed(args)), WithoutPasswords()
    monitor.SAID_AS = common.said_as(args, workers=True)  # the workers' warnings shown as a Spark job runs, typed
    monitor.WARNINGS_ONLY = bool(args.quiet)  # and with --quiet, they alone: not the workers' progress
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:  # notes and warnings, as errors, name the options as typed; no URL's password
        handler.addFilter(typed)
        handler.addFilter(unsaid)
    given_back = contextlib.ExitStack()  # what the command set for its run, given back as it was however it ends
    given_back.enter_context(own_temporary_folder())  # its temporary files (autograph's too) go with it, or after
    if args.quiet:  # no bars either (ALEXNET_PROGRESS=0 turns them off without -q), here and in the workers
        given_back.enter_context(env_set("ALEXNET_PROGRESS", "0"))
        if "verbose" in (getattr(args, common.OPTION_NAMES, None) or {}) and not hasattr(args, "setting_verbose"):
            args.setting_verbose = 0  # nor Keras' lines of each epoch, unless --verbose-fit asks for them
    try:
        args.run(args)
    except AlexnetError as error:
        said = typed.said(str(error)) if not isinstance(error, ChildError) else \
            _AsTyped(common.typed(args, workers=True)).said(str(error))  # a worker's words: it reads the pin too
        sys.stderr.write(f"alexnet {args.command}: error: {said}\n")
        return 1 if error.while_running else 2
    except ModuleNotFoundError as error:  # TensorFlow or pyspark missing: what to install, in one line
        missing = missing_module(error)
        if missing is None:
            raise
        sys.stderr.write(f"alexnet {args.command}: error: {missing}\n")
        return 1
    except KeyboardInterrupt:  # Ctrl-C: what the command cleans up on the way out is done; no traceback
        again = rerun_note(args)
        sys.stderr.write(f"alexnet {args.command}: interrupted{'; ' + again if again else ''}\n")
        return 130
    finally:
        for handler in handlers:
            handler.removeFilter(typed)
            handler.removeFilter(unsaid)
        monitor.SAID_AS, monitor.WARNINGS_ONLY = None, False
        given_back.close()
    return 0


def rerun_note(args: argparse.Namespace) -> str | None:
    """What running the interrupted command ``args`` again does, where it carries on from where it stopped:
    a training with a checkpoint folder resumes from its last checkpoint (starts over while the folder holds none),
    an upload skips the categories already on the board, a fetch the zips already in its cache; ``None`` for the
    others (a rerun starts over)."""
    if args.command in ("train", "spark-train"):
        folder = getattr(args, train.setting_dest("checkpoint_dir"), None)
        if not folder:
            return None
        if not _holds_checkpoint(folder):
            return f"no checkpoint was written to {folder} yet: the same command run again starts the training over"
        return f"the same command run again resumes from the last checkpoint in {folder}"
    if args.command == "upload":
        return "the same command run again skips the categories already uploaded"
    if args.command == "fetch":
        return "the same command run again fetches only the zips not in its cache yet"
    return None


def _holds_checkpoint(folder: str) -> bool:
    """Whether the checkpoint folder ``folder`` holds a whole checkpoint; True when it cannot be listed (a rerun
    says what it finds)."""
    from ..storage.location import fs_path, open_filesystem, resolve_location
    from ..train.formats import listed_checkpoints

    try:
        location = resolve_location(folder, "checkpoint_dir")
        return bool(listed_checkpoints(open_filesystem(location, what="checkpoint_dir"), fs_path(location))[1])
    except Exception as error:  # a bucket out of reach: said as before
        log.debug("Could not list %s: %s", folder, error)
        return True


class _AsTyped(logging.Filter):
    """Says alexnet's notes and warnings as a command's errors are said: the core's settings as the command's options,
    its calls as commands (:func:`alexnet.cli.common.as_typed`)."""

    def __init__(self, typed: Callable[[str], str]) -> None:
        super().__init__()
        self.typed = typed

    def said(self, message: str) -> str:
        message = message.replace("logging.getLogger('alexnet').setLevel('DEBUG')", "run the command again with -v")
        return self.typed(message)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("alexnet") and record.levelno >= logging.INFO:
            record.msg, record.args = self.said(record.getMessage()), ()
        return True
