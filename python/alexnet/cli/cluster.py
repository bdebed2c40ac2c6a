"""Commands that run over a Spark cluster, one barrier task per worker: ``spark-train`` and ``spark-evaluate``."""

from __future__ import annotations

import argparse
from typing import Any

from . import common
from .common import BOARD_HELP, given, non_negative, positive, with_default
from .model import evaluation_options, evaluation_summary, model_of, model_options
from .train import training_args, training_options


def _train_summary(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        loss = r["history"]["metrics"].get("loss") or [float("nan")]
        lines.append(
            f"worker {r['worker']} ({r['tf_address']}{', chief' if r['chief'] else ''}): "
            f"{r['train_images']} images of {len(r['categories'])} categories, {len(loss)} epoch(s), "
            f"loss {loss[0]:.4g} -> {loss[-1]:.4g}, weights {r['history'].get('weights_sha256', '')[:12]}")
    return "\n".join(lines)


def _spark_train_summary(result: Any) -> str:
    evaluation = getattr(result, "evaluation", None)
    lines = _train_summary(list(result))
    return lines if evaluation is None else f"{lines}\nevaluation of {evaluation_summary(evaluation)}"


def _spark_train(args: argparse.Namespace) -> None:
    from ..launch.training import worker_settings

    # checked once, before Spark starts: the driver's plan takes the checked settings
    settings = worker_settings(training_args(args), getattr(args, "board", None),
                               local_master=common.master(args).startswith("local"), where="alexnet spark-train")
    with common.spark(args, "alexnet spark-train") as session:
        rows = common.core("spark-train")(session, args.workers, settings=settings,
                                          **given(args, "board", "base_port", "cache_dir", "timeout", "retries",
                                                  "evaluate", "crops"))
    evaluation = getattr(rows, "evaluation", None)
    shown = rows if evaluation is None or not args.json else {"workers": list(rows), "evaluation": evaluation}
    common.emit(shown, args.json, _spark_train_summary)


def _spark_evaluate(args: argparse.Namespace) -> None:
    model = model_of(args)
    with common.spark(args, "alexnet spark-evaluate") as session:
        result = common.core("spark-evaluate")(session, model, args.workers, common.default_board(args),
                                               **given(args, "crops", "batch_size", "cache_dir", "fetch_workers",
                                                       "timeout", "retries"))
    common.emit(result, args.json, evaluation_summary)


def _cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=positive, required=True, help="workers (barrier tasks)")
    p.add_argument("--master", default=None, help="Spark master (default: local[WORKERS])")


def register(add: common.AddCommand) -> None:
    """Add ``spark-train`` and ``spark-evaluate`` to the parser."""
    train = add("spark-train", _spark_train, "train on several workers at once, one Spark barrier task each",
                "Train AlexNet with MultiWorkerMirroredStrategy on WORKERS Spark barrier tasks, each on its own "
                "partition of the board; prints one row per worker.")
    _cluster_options(train)
    train.add_argument("--board", help=BOARD_HELP)
    train.add_argument("--cache-dir", help="where each worker extracts its partition (default: user cache)")
    training_options(train)
    train.add_argument("--base-port", type=positive,
                       help=with_default("spark-train", "base_port", "worker k listens on this + k"))
    train.add_argument("--timeout", type=float, help="cancel the whole job after these seconds")
    train.add_argument("--retries", type=non_negative,
                       help=with_default("spark-train", "retries", "relaunches after a failure, resuming from the "
                                         "last checkpoint"))
    train.add_argument("--evaluate", action="store_true", default=argparse.SUPPRESS,
                       help="after the last epoch, each worker scores its partition's validation images with the "
                       "model it holds; prints the evaluation of every validation image of the board (with --json: "
                       "an object with the workers and the evaluation) and records it in the model card and pin")
    train.add_argument("--crops", type=int, choices=[1, 10],
                       help=with_default("spark-train", "crops", "with --evaluate, 1: the centre crop; 10: corners, "
                                         "centre and their mirrors"))

    evaluate = add("spark-evaluate", _spark_evaluate, "evaluate on several workers at once, one Spark barrier task "
                   "each", "Evaluate a model on every validation image of --board, split over WORKERS Spark barrier "
                   "tasks; the counts add up to a one-machine evaluation.")
    _cluster_options(evaluate)
    model_options(evaluate, "spark-evaluate", positional=False)
    evaluation_options(evaluate, "spark-evaluate")
    evaluate.add_argument("--timeout", type=float, help="cancel the whole job after these seconds")
    evaluate.add_argument("--retries", type=non_negative,
                          help=with_default("spark-evaluate", "retries", "relaunches of the whole evaluation after "
                                            "a failure"))
