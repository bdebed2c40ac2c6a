"""The ``train`` command, and the training options every training command takes (one per setting the
declaration of :mod:`alexnet.train.settings` puts on the command line)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..checks import count_text
from ..errors import AlexnetError
from . import common

log = logging.getLogger(__name__)


def setting_dest(name: str) -> str:
    """Where the parsed value of setting ``name`` is kept: apart from the command line's own options (the setting
    ``verbose``, Keras' verbosity, is not the logging option ``-v``)."""
    return f"setting_{name}"


def _initial_cache() -> Any:
    """The spec of ``--initial-cache``: the ``cache_dir`` of the model pin read (:class:`ModelPinOptions`), which the
    other commands take as ``--model-cache``; here the training's ``--model-...`` options are those of the model it
    makes, so the initial pin's are ``--initial-...``."""
    from ..declare.declaration import specs
    from ..model.options import ModelPinOptions

    return specs(ModelPinOptions)["cache_dir"]


def training_options(p: argparse.ArgumentParser) -> None:
    """An option for every training setting the declaration puts on the command line, with its help and default;
    and ``--initial-pin``, the command line's way to give ``initial_model`` as a model pin, with its board and the
    folder its file is brought to."""
    from ..train.settings import specs

    common.declared_options(p, specs(), setting_dest)
    p.add_argument("--initial-pin", metavar="NAME[@VERSION]",
                   help="start from the weights of this model pin (its newest version unless @VERSION) on "
                        "--initial-board, in place of --initial-model")
    p.add_argument("--initial-board", metavar="BOARD",
                   help="the board of --initial-pin (unset: --board, the data's)")
    p.add_argument("--initial-cache", metavar="FOLDER",
                   help=f"for --initial-pin, {common.declared_help(_initial_cache())}")


def training_args(args: argparse.Namespace) -> dict[str, Any]:
    """The training settings given on the command line, as ``alexnet_train`` takes them (the options left out are
    not passed, so their defaults apply); ``--initial-pin`` read from its board as ``alexnet_model()`` reads it, as
    ``initial_model``."""
    from ..errors import AlexnetError
    from ..train.settings import specs

    given = common.declared_args(args, specs(), setting_dest)
    pin, cache = getattr(args, "initial_pin", None), getattr(args, "initial_cache", None)
    if pin:
        if "initial_model" in given:
            raise AlexnetError("give the initial model either as --initial-model (a model_dir or alexnet.keras "
                               "location) or as --initial-pin NAME, not both.")
        name, _, version = pin.partition("@")
        board = getattr(args, "initial_board", None) or common.default_board(args)
        cache_dir = None if cache is None else _initial_cache().convert(cache, "--initial-cache")
        # the pin's metadata: its file is brought (into cache_dir) only by a run that starts from it, not by one
        # that resumes
        from ..model.pin import model_pin_reference

        given["initial_model"] = model_pin_reference(board, name, version or None, cache_dir=cache_dir)
    elif getattr(args, "initial_board", None):
        raise AlexnetError("--initial-board is the board of --initial-pin: give --initial-pin NAME too.")
    elif cache is not None:
        raise AlexnetError("--initial-cache is where the file of --initial-pin is brought: give --initial-pin NAME "
                           "too.")
    return given


def communication_line(history: dict[str, Any], typed: Callable[[str], str] = str) -> str | None:
    """"Communication: ..." for a multi-worker run's history: what its exchange and computation, timed before
    training, say (:func:`alexnet.train.advice.advise`), its settings said by ``typed`` (the options of the
    command: :func:`common.typed`); ``None`` for a run of one worker."""
    advice = (history.get("params") or {}).get("communication_advice")
    return f"Communication: {typed(advice)}" if advice else None


def typed_history(history: dict[str, Any], typed: Callable[[str], str]) -> dict[str, Any]:
    """``history`` as ``--json`` prints it: its advice on communication in the command's words (``typed``, as
    :func:`communication_line` says it), not the core's, whose settings and calls are R's."""
    params = history.get("params") or {}
    advice = params.get("communication_advice")
    return {**history, "params": {**params, "communication_advice": typed(advice)}} if advice else history


#: What a summary says of a multi-worker run whose workers ended with the same weights: `alexnet train`'s (the history
#: says so, ``weights_agree``) and `alexnet spark-train`'s (the workers' digests are one), as R's prints say it.
SAME_WEIGHTS = "Every worker holds the same weights"

# The summary below says what R's print of the same history says (print.alexnet_history, R/history.R), line for line
# and in the same words; tests/testthat/test-summaries.R compares them.


def signif_text(value: Any, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits as R's ``format(signif(x, digits))`` writes it: the shorter of the
    fixed and the scientific forms, the fixed one when as short (``1.414``, ``0.5``, ``12350``, ``1e-04``)."""
    if value is None:
        return "NA"
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Inf" if number > 0 else "-Inf"
    if number == 0:
        return "0"
    mantissa, exponent = f"{number:.{digits - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    power = int(exponent)
    scientific = f"{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    rounded = float(f"{number:.{digits - 1}e}")
    fixed = f"{rounded:.{max(0, digits - 1 - power)}f}"
    fixed = fixed.rstrip("0").rstrip(".") if "." in fixed else fixed
    return fixed if len(fixed) <= len(scientific) else scientific


def _shown_metrics(h: dict[str, Any]) -> list[str]:
    """The metrics a summary shows (R's ``shown_metrics``): top-5 accuracy is always 1 with 5 classes or fewer, and
    ``val_images`` is a count, said apart."""
    classes = (h.get("params") or {}).get("num_classes")
    small = isinstance(classes, (int, float)) and not isinstance(classes, bool) and classes <= 5
    return [name for name in h.get("metrics") or {} if name != "val_images" and not (small and "top5" in name)]


def resume_text(h: dict[str, Any]) -> str | None:
    """Where a run started, as R's ``resume_note`` says it: ``None`` for a run from scratch; a sentence for a run
    that resumed from its checkpoint, or found every epoch done there."""
    params = h.get("params") or {}
    epoch, step = params.get("initial_epoch") or 0, params.get("initial_step") or 0
    if not epoch and not step:
        return None
    where = params.get("checkpoint_dir") or "its checkpoint"
    asked = params.get("epochs")
    if not step and asked is not None and epoch >= asked:
        return (f"All {count_text(epoch, 'epoch')} were trained before, in {where}: nothing was left to train "
                "(a larger `epochs` trains further).")
    return f"Resumed from {where} at epoch {epoch + 1}, step {step}."


def _scalar(value: Any) -> Any:
    """A setting of one value (a list of one as R simplifies it), else ``None``."""
    if isinstance(value, (list, tuple)):
        return value[0] if len(value) == 1 else None
    return None if isinstance(value, dict) else value


def history_summary(h: dict[str, Any], typed: Callable[[str], str] = str) -> str:
    """The lines printed for a training history (R's ``print.alexnet_history``), the core's names said by ``typed``
    (the options of the command: :func:`common.typed`)."""
    params = h.get("params") or {}
    metrics = h.get("metrics") or {}
    epochs = max((len(v) for v in metrics.values()), default=0)
    head = f"AlexNet training history: {count_text(epochs, 'epoch')}"
    if params.get("strategy") is not None:
        head += f", {params['strategy']} strategy"
    if params.get("replicas") is not None:
        head += f", {count_text(params['replicas'], 'replica')}"
    lines = [head]
    shown = {name: _scalar(params.get(name)) for name in
             ("batch_size", "global_batch_size", "steps", "image_size", "num_classes")}
    shown = {name: value for name, value in shown.items() if value is not None}
    if shown:
        lines.append(", ".join(f"{name}: {value}" for name, value in shown.items()))
    resumed = resume_text(h)
    if resumed:
        lines.append(typed(resumed))
    started = (params.get("started_from") or {}).get("text")
    if started:
        lines.append(started)
    schedule = (h.get("schedule") or {}).get("summary")
    if schedule:
        lines.append(f"Schedule: {schedule}")
    communication = communication_line(h, typed)
    if communication:
        lines.append(communication)
    if epochs:
        last = ", ".join(f"{name} = {signif_text(metrics[name][-1] if metrics[name] else None)}"
                         for name in _shown_metrics(h))
        images = metrics.get("val_images") or []
        validated = f" (validation over {int(images[-1]):,} images)" if images else ""
        lines.append(f"Final epoch: {last}{validated}")
    best = h.get("best_epoch")
    if isinstance(best, int) and not isinstance(best, bool):
        lines.append(f"Kept the best epoch: {best} (val_accuracy = {signif_text(metrics['val_accuracy'][best - 1])})")
    if h.get("weights_agree") is False:
        lines.append("The workers ended with different weights: the chief's model is the one saved and published "
                     "(its log names the workers apart).")
    elif h.get("weights_agree") is True:  # a run of several workers (one worker's history says None)
        lines.append(SAME_WEIGHTS)
    return "\n".join([*lines, *weights_lines(h), *model_lines(h)])


def weights_lines(h: dict[str, Any]) -> list[str]:
    """The digest of the weights a run ended with, ``Weights: sha256 DIGEST``, when its history has one (none for a
    run under way read back, or one whose model was not saved): R's ``weights_note``."""
    digest = h.get("weights_sha256")
    return [f"Weights: sha256 {digest}"] if isinstance(digest, str) and digest else []


def model_lines(h: dict[str, Any]) -> list[str]:
    """Where a run's model went, from its history (a chief's): ``Model: PATH`` and ``Model pin: NAME version V on
    BOARD``, each when there is one (R's ``model_notes``)."""
    pin = h.get("model_pin")
    return [*([f"Model: {h['model_path']}"] if h.get("model_path") else []),
            *([f"Model pin: {pin['name']} version {pin['version']} on {pin['board']}"] if pin else [])]


def _train(args: argparse.Namespace) -> None:
    from ..train.api import train
    from ..train.cluster import tf_config_value
    from ..train.settings_check import check_settings

    # checked once, before any data is fetched; a model pin goes to --board unless --model-board names another
    settings = check_settings(training_args(args), data_board=common.default_board(args), where="alexnet train")
    # Keras writes its progress (bar or epoch lines) to stdout: with --json, stdout is the JSON alone
    strategy = getattr(args, "strategy", None)
    if strategy == "multi_worker" and tf_config_value():  # a port taken said before the fetch, maybe long
        from ..train.cluster import check_port_free, read_tf_config

        check_port_free(read_tf_config())
    if settings.checkpoint_dir is not None:  # checkpoints the run would refuse: said before a partition is fetched
        from ..storage.board import open_board
        from ..storage.layout import read_categories
        from ..train.formats import check_checkpoints_fit

        try:
            rows = read_categories(open_board(common.default_board(args)))
        except AlexnetError:  # a board that cannot be read: the fetch says what is wrong with it
            rows = None
        if rows is not None:
            check_checkpoints_fit(settings, rows)
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        data = common.fetch(args)
        _warn_of_a_default_share(args, data)
        emit_history = train(settings, data, strategy)
    typed = common.typed(args)
    common.emit(typed_history(emit_history, typed) if args.json else emit_history, args.json,
                lambda h: history_summary(h, typed))


def _warn_of_a_default_share(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """Warn when ``alexnet train`` without ``--total``, on one machine (no TF_CONFIG), trains on a share of the board:
    the default ``--total`` is a cluster's, and one machine then sees a few of the categories alone."""
    from ..data.options import PartitionOptions
    from ..train.cluster import tf_config_value

    total = int(data.get("total") or 1)
    if total == 1 or "total" in common.options_given(args, PartitionOptions) or tf_config_value():
        return
    log.warning("alexnet train trains on partition %s of %d (the default --total): %d of the board's %s, %s; give "
                "--total 1 to train on every category on this machine.", data.get("partition"), total,
                len(data.get("categories") or []), count_text(int(data.get("num_classes") or 0), "category",
                                                              "categories"),
                count_text(len(data.get("image") or []), "training image"))


def _history(args: argparse.Namespace) -> None:
    # said as `alexnet train` said the run's own history: its lines and JSON in the words of its options
    typed = as_trained(args)
    history = common.core("history")(args.checkpoint_dir)
    common.emit(typed_history(history, typed) if args.json else history, args.json,
                lambda h: history_summary(h, typed))


def as_trained(args: argparse.Namespace) -> Callable[[str], str]:
    """The core's words as ``alexnet train`` says them (:func:`common.typed` of that command): the training settings
    they name as its options, for what another command prints of a training (``alexnet history``)."""
    calls = getattr(args, common.COMMAND_CALLS, None) or {}
    options: Mapping[str, tuple[str, bool] | None] = (calls.get("alexnet_train") or (None, {}))[1]
    return lambda text: common.as_typed(text, options, calls)


def _strategy(value: str) -> str | None:
    """A strategy's name as the core takes it (in any case, ``-`` for ``_``); another word as given, for argparse to
    refuse among its choices."""
    from ..train.strategy import check_strategy

    try:
        return check_strategy(value)
    except AlexnetError:
        return value


def register(add: common.AddCommand) -> None:
    """Add the ``train`` and ``history`` commands to the parser."""
    from ..train.strategy import STRATEGIES, STRATEGY_NAMES

    p = add("train", _train, "fetch a partition and train AlexNet on it")
    common.partition_options(p)
    training_options(p)
    common.core_option(p, "strategy", "--strategy", choices=STRATEGY_NAMES, type=_strategy,
                       help="how training is spread (in any case, - for _): "
                            + "; ".join(f"{name}, {what}" + (" (when not given)" if name == "default" else "")
                                        for name, what in STRATEGIES.items()))
    history = add("history", _history, "print a training's history, read back from its checkpoint folder",
                  "Print the history of a training (also one under way: its epochs done so far), read from the "
                  "history file its checkpoint_dir holds, without training or loading anything.")
    history.add_argument("checkpoint_dir", help="the --checkpoint-dir a training wrote to: a folder, or a "
                                                "gs://, s3:// or https:// location")
