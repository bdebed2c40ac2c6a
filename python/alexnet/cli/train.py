"""The ``train`` command, and the training options every training command takes (one per setting the
declaration of :mod:`alexnet.train.settings` puts on the command line)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from typing import Any

from ..checks import count_text
from . import common


def setting_dest(name: str) -> str:
    """Where the parsed value of setting ``name`` is kept: apart from the command line's own options (the setting
    ``verbose``, Keras' verbosity, is not the logging option ``-v``)."""
    return f"setting_{name}"


def training_options(p: argparse.ArgumentParser) -> None:
    """An option for every training setting the declaration puts on the command line, with its help and default;
    and ``--initial-pin``, the command line's way to give ``initial_model`` as a model pin."""
    from ..train.settings import specs

    common.declared_options(p, specs(), setting_dest)
    p.add_argument("--initial-pin", metavar="NAME[@VERSION]",
                   help="start from the weights of this model pin (its newest version unless @VERSION) on "
                        "--initial-board, in place of --initial-model")
    p.add_argument("--initial-board", metavar="BOARD",
                   help="the board of --initial-pin (unset: --board, the data's)")


def training_args(args: argparse.Namespace) -> dict[str, Any]:
    """The training settings given on the command line, as ``alexnet_train`` takes them (the options left out are
    not passed, so their defaults apply); ``--initial-pin`` read from its board as ``alexnet_model()`` reads it, as
    ``initial_model``."""
    from ..errors import AlexnetError
    from ..train.settings import specs

    given = common.declared_args(args, specs(), setting_dest)
    pin = getattr(args, "initial_pin", None)
    if pin:
        if "initial_model" in given:
            raise AlexnetError("give the initial model either as --initial-model (a model_dir or alexnet.keras "
                               "location) or as --initial-pin NAME, not both.")
        name, _, version = pin.partition("@")
        board = getattr(args, "initial_board", None) or common.default_board(args)
        # the pin's metadata: its file is brought only by a run that starts from it, not by one that resumes
        from ..model.pin import model_pin_reference

        given["initial_model"] = model_pin_reference(board, name, version or None)
    elif getattr(args, "initial_board", None):
        raise AlexnetError("--initial-board is the board of --initial-pin: give --initial-pin NAME too.")
    return given


def communication_line(history: dict[str, Any], typed: Callable[[str], str] = str) -> str | None:
    """"Communication: ..." for a multi-worker run's history: what its exchange and computation, timed before
    training, say (:func:`alexnet.train.advice.advise`), its settings said by ``typed`` (the options of the
    command: :func:`common.typed`); ``None`` for a run of one worker."""
    advice = (history.get("params") or {}).get("communication_advice")
    return f"Communication: {typed(advice)}" if advice else None


def _summary(h: dict[str, Any], typed: Callable[[str], str] = str) -> str:
    metrics = h["metrics"]
    last = ", ".join(f"{k} = {v[-1]:.4g}" for k, v in metrics.items() if v)
    lines = [f"Trained {count_text(len(metrics.get('loss', [])), 'epoch')}: {last}"]
    params = h.get("params") or {}
    done, asked = params.get("initial_epoch") or 0, params.get("epochs")
    if done and not params.get("initial_step") and asked is not None and done >= asked:
        lines.insert(0, typed(f"All {count_text(done, 'epoch')} were trained before, in "
                              f"{params.get('checkpoint_dir')}: nothing was left to train (a larger `epochs` trains "
                              "further)."))
    started = (h.get("params") or {}).get("started_from")
    if started:
        lines.append(started["text"])
    schedule = (h.get("schedule") or {}).get("summary")
    if schedule:
        lines.append(f"Schedule: {schedule}")
    communication = communication_line(h, typed)
    if communication:
        lines.append(communication)
    if h.get("model_path"):
        lines.append(f"Model: {h['model_path']}")
    pin = h.get("model_pin")
    if pin:
        lines.append(f"Model pin: {pin['name']} version {pin['version']} on {pin['board']}")
    return "\n".join(lines)


def _train(args: argparse.Namespace) -> None:
    from ..train.api import train
    from ..train.settings import check_settings

    # checked once, before any data is fetched; a model pin goes to --board unless --model-board names another
    settings = check_settings(training_args(args), data_board=common.default_board(args), where="alexnet train")
    # Keras writes its progress (bar or epoch lines) to stdout: with --json, stdout is the JSON alone
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        emit_history = train(settings, common.fetch(args), getattr(args, "strategy", None))
    common.emit(emit_history, args.json, lambda h: _summary(h, common.typed(args)))


def register(add: common.AddCommand) -> None:
    """Add the ``train`` command to the parser."""
    from ..train.strategy import STRATEGY_NAMES

    p = add("train", _train, "fetch a partition and train AlexNet on it")
    common.partition_options(p)
    training_options(p)
    common.core_option(p, "strategy", "--strategy", choices=STRATEGY_NAMES,
                       help="how training is spread: default, one device (when not given); mirrored, every GPU "
                            "of this machine; multi_worker, the workers TF_CONFIG names, this one among them")
