"""Commands that run over a Spark cluster, one barrier task per worker: ``spark-train`` and ``spark-evaluate``."""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

from ..checks import count_text
from . import common
from .common import BOARD_HELP, positive
from .model import evaluation_args, evaluation_options, evaluation_summary, model_of, model_options
from .train import (
    SAME_WEIGHTS,
    communication_line,
    model_lines,
    resume_text,
    training_args,
    training_options,
    weights_lines,
)

# The summary of a Spark run says what R's print of it says (print.alexnet_spark_run, R/results.R), line for line and
# in the same words: R prints the workers' flat rows (`alexnet.launch.training.train_row`), the command line the
# rows of the core, whose histories hold the same values; tests/testthat/test-summaries.R compares them.


def _worker_line(r: dict[str, Any]) -> str:
    history = r.get("history") or {}
    metrics = history.get("metrics") or {}
    finals = {name: float(metrics[name][-1]) for name in ("loss", "accuracy", "val_accuracy") if metrics.get(name)}
    finals = {name: value for name, value in finals.items() if not math.isnan(value)}
    rate = history.get("images_per_second")
    parts = [count_text(len(r["categories"]), "category", "categories"), count_text(r["train_images"], "image"),
             count_text(len(metrics.get("loss") or []), "epoch")]
    if finals:
        parts.append(", ".join(f"{name} {value:.3f}" for name, value in finals.items()))
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        parts.append(f"{rate:.1f} images/s")
    # where its TensorFlow listened (the port the workers must reach each other at), else its Spark task's address
    where = r.get("tf_address") or r.get("address")
    log = f"; log {r['log']}" if r.get("log") else ""  # on its host
    return (f"  worker {r['worker']}{' (chief)' if r['chief'] else ''}{f' at {where}' if where else ''}: "
            f"{', '.join(parts)}{log}")


def _train_summary(rows: list[dict[str, Any]], typed: Callable[[str], str] = str) -> str:
    attempts = [r["attempt"] for r in rows if r.get("attempt") is not None]
    attempt = f" (attempt {max(attempts)})" if attempts else ""
    lines = [f"AlexNet trained on {count_text(len(rows), 'Spark worker')}{attempt}", *map(_worker_line, rows)]
    chief: dict[str, Any] = next((r["history"] for r in rows if r["chief"]), {})
    resumed = resume_text(chief)  # a run called again on checkpoints whose epochs were all trained: nothing left
    if resumed:
        lines.append(typed(resumed))
    if len(rows) > 1:
        same = len({(r.get("history") or {}).get("weights_sha256") for r in rows}) == 1
        lines.append(SAME_WEIGHTS if same else "The workers' weights differ")
    lines.extend(weights_lines(chief))  # the digest of the weights the chief saved, as a history's summary says it
    # the chief's (every worker timed the same exchange; its computation is a worker's like the others'), but for
    # what the driver has just said, as the chief's warning that settings would keep the workers busier: what
    # `adapt_communication` took, which the warning does not say, is said still. R, whose print comes later than the
    # warnings, always says it whole
    communication = communication_line(unsaid_advice(chief), typed)
    # where the chief saved and published the model, as `alexnet train` says it
    return "\n".join([*lines, *([communication] if communication else []), *model_lines(chief)])


def unsaid_advice(history: dict[str, Any]) -> dict[str, Any]:
    """``history`` with its ``communication_advice`` less what its warnings said already (``Communication: ...``, the
    advice after what ``adapt_communication`` took): that sentence alone, or none."""
    params = history.get("params") or {}
    advice = str(params.get("communication_advice") or "")
    for warning in map(str, history.get("warnings") or []):
        said = warning.removeprefix("Communication: ")
        if said != warning and advice.endswith(said):
            advice = advice[: len(advice) - len(said)].strip()
    return {**history, "params": {**params, "communication_advice": advice or None}}


def _spark_train_summary(result: Any, typed: Callable[[str], str] = str) -> str:
    evaluation = getattr(result, "evaluation", None)
    lines = _train_summary(list(result), typed)
    if evaluation is None:
        return lines
    # as R's print of the run says it
    return (f"{lines}\nEvaluation of the model on every validation image of the board ({evaluation['model']}):\n"
            f"{evaluation_summary(evaluation)}")


def launch_dest(name: str) -> str:
    """Where the parsed value of a job's option ``name`` is kept."""
    return f"launch_{name}"


def _job_specs(training: bool) -> dict[str, Any]:
    """The options of a job (:mod:`alexnet.launch.options`): a training job's own first, then the launch options."""
    from ..launch.options import specs, training_job_specs

    return {**(training_job_specs() if training else {}), **specs()}


@contextlib.contextmanager
def _spark(args: argparse.Namespace, app_name: str) -> Iterator[Any]:
    """The active Spark session, else one on ``--master`` (default ``local[WORKERS]``) that the job starts once its
    driver's checks have passed (:class:`~alexnet.launch.session.SparkToStart`), stopped afterwards."""
    from ..errors import importing
    from ..launch.session import SparkToStart

    with importing():
        from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        yield session
        return
    later = SparkToStart(_master(args), app_name)
    try:
        yield later
    finally:
        later.stop()


def _master(args: argparse.Namespace) -> str:
    """The Spark master of a cluster command: ``--master``, else ``local[WORKERS]``."""
    return args.master or f"local[{args.workers}]"


def _spark_train(args: argparse.Namespace) -> None:
    from ..launch.training import worker_settings

    # checked once, before Spark starts: the driver's plan takes the checked settings
    settings = worker_settings(training_args(args), getattr(args, "board", None),
                               local_master=_master(args).startswith("local"), where="alexnet spark-train")
    job = common.declared_args(args, _job_specs(True), launch_dest)  # each checked before Spark starts too
    with _spark(args, "alexnet spark-train") as session:
        rows = common.core("spark-train")(session, args.workers, getattr(args, "board", None), settings=settings,
                                          **job)
    evaluation = getattr(rows, "evaluation", None)
    shown = rows if evaluation is None or not args.json else {"workers": list(rows), "evaluation": evaluation}
    common.emit(shown, args.json, lambda result: _spark_train_summary(result, common.typed(args)))


def _spark_evaluate(args: argparse.Namespace) -> None:
    # checked before a model pin is read and before Spark starts
    job = {**evaluation_args(args), **common.declared_args(args, _job_specs(False), launch_dest)}
    model = model_of(args)
    with _spark(args, "alexnet spark-evaluate") as session:
        result = common.core("spark-evaluate")(session, model, args.workers, common.default_board(args), **job)
    common.emit(result, args.json, evaluation_summary)


def _cluster_options(p: argparse.ArgumentParser) -> None:
    common.core_option(p, "workers", "--workers", type=positive, required=True, help="workers (barrier tasks)")
    common.core_option(p, "master", "--master", default=None, help="Spark master (default: local[WORKERS])")


def register(add: common.AddCommand) -> None:
    """Add ``spark-train`` and ``spark-evaluate`` to the parser."""
    train = add("spark-train", _spark_train, "train on several workers at once, one Spark barrier task each",
                "Train AlexNet with MultiWorkerMirroredStrategy on WORKERS Spark barrier tasks, each on its own "
                "partition of the board; prints one row per worker.")
    _cluster_options(train)
    common.core_option(train, "board", "--board", help=BOARD_HELP)
    training_options(train)
    common.declared_options(train.add_argument_group("the job's options"), _job_specs(True), launch_dest)

    evaluate = add("spark-evaluate", _spark_evaluate, "evaluate on several workers at once, one Spark barrier task "
                   "each", "Evaluate a model on every validation image of --board, split over WORKERS Spark barrier "
                   "tasks; the counts add up to a one-machine evaluation.")
    _cluster_options(evaluate)
    model_options(evaluate, positional=False, pin_board=True)
    evaluation_options(evaluate)
    common.declared_options(evaluate.add_argument_group("the job's options"), _job_specs(False), launch_dest)
