"""The training kind of barrier job: every worker trains one model with the others, each on its own partition.

On the driver, :func:`check_training` checks the training settings once (:func:`worker_settings`) and
:func:`fit_training` the board. Task ``k`` of ``workers`` runs :func:`train_work` in a fresh Python process: it
fetches partition ``k`` of the board, sets TF_CONFIG from the barrier addresses
(:func:`alexnet.train.cluster.tf_config`) and trains with ``MultiWorkerMirroredStrategy``. A training asked to end
with its evaluation (``evaluate``) then scores, on each worker, the validation images of its partition with the
model it holds (:func:`alexnet.launch.evaluation.score_share`): every category is in one partition, so the
workers' counts add up to the one-machine evaluation of the saved model. The driver adds them
(:func:`combine_training`) and records the evaluation in the model card (:func:`record_evaluation`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import as_int
from ..errors import AlexnetError
from ..train.cluster import tf_config
from ..train.settings import TrainSettings
from .evaluation import EVALUATE_COLUMNS, combine_shares, evaluate_row, score_share
from .task import Evaluation, Task

logger = logging.getLogger(__name__)

#: Columns of a training worker's flat row (:func:`train_row`), in order, with their Python types; a training
#: that ends with its evaluation adds its share's columns (:data:`EVALUATE_COLUMNS`) prefixed with ``eval_``.
TRAIN_COLUMNS: dict[str, type] = {
    "worker": int,
    "workers": int,
    "address": str,
    "tf_address": str,
    "chief": bool,
    "categories": str,
    "train_images": int,
    "val_images": int,
    "steps": int,
    "global_batch_size": int,
    "epochs": int,
    "loss": float,
    "accuracy": float,
    "val_accuracy": float,
    "images_per_second": float,
    "fetch_seconds": float,
    "train_seconds": float,
    "weights_sha256": str,
    "model_path": str,
    "history": str,
}
#: The share's columns in a training row, without the worker's own (``worker``, ``workers``).
SHARE_COLUMNS = [name for name in EVALUATE_COLUMNS if name not in ("worker", "workers")]
#: Arguments a worker sets itself, which callers must not give, and what to say when they do.
RESERVED = {name: "each worker trains on its own partition with strategy = 'multi_worker'. Leave it out."
            for name in ("data", "strategy")}
#: Keras verbosity of a worker whose output goes to a log file: one line per epoch.
WORKER_VERBOSE = 2


def worker_settings(train_args: Mapping[str, Any], board: str | os.PathLike | None, *, local_master: bool = True,
                    where: str = "alexnet_spark_train()") -> TrainSettings:
    """The training settings every worker of a distributed run gets, checked once on the driver
    (:func:`alexnet.train.settings.check_settings`: names, values, output locations writable, the board of
    ``model_pin``, by default ``board``): not ``data`` or ``strategy``, which the workers set; Keras prints one line
    per epoch unless ``verbose`` says otherwise (a worker's output goes to its log)."""
    from ..storage.board import default_board
    from ..train.settings import check_settings

    arguments = dict(train_args)
    if arguments.get("strategy", "multi_worker") in (None, "multi_worker"):
        arguments.pop("strategy", None)
    arguments.setdefault("verbose", WORKER_VERBOSE)
    return check_settings(arguments, data_board=os.fspath(board) if board is not None else default_board(),
                          shared=not local_master, where=where, reserved=RESERVED)


def check_training(workers: int, board: Any, *, local_master: bool = True, where: str = "alexnet_spark_train()",
                   settings: TrainSettings | None = None, **arguments: Any) -> dict[str, Any]:
    """The driver's checks of a training before the board is read: the training job's own options
    (:class:`alexnet.launch.options.TrainingJobOptions`: ``evaluate``, ``crops``) and the training settings (the
    rest of ``arguments``, by name, see :func:`worker_settings`, or ``settings`` already checked). The
    :class:`~alexnet.launch.task.Task` fields they settle."""
    from ..declare import declaration
    from ..model.options import check_options
    from .options import TrainingJobOptions

    own = {name: arguments.pop(name) for name in declaration.specs(TrainingJobOptions) if name in arguments}
    job = TrainingJobOptions(**declaration.convert(TrainingJobOptions, own))
    if settings is None:
        settings = worker_settings(arguments, board, local_master=local_master, where=where)
    elif arguments:
        raise AlexnetError(f"{where}: give the training settings either checked (`settings`) or by name, not both.")
    evaluation = Evaluation(options=check_options({"crops": job.crops})) if job.evaluate else None
    return {"settings": settings, "evaluation": evaluation}


def fit_training(task: Task, rows: list[dict[str, Any]]) -> None:
    """The driver's checks of a training against the board's categories ``rows``: one category at least per
    worker; with an evaluation, validation images on the board."""
    from ..data.fetch import validation_counts

    if task.workers > len(rows):
        raise AlexnetError(f"{task.workers} workers need at least {task.workers} categories, but board {task.board} "
                           f"has {len(rows)}: use workers <= {len(rows)}.")
    if task.evaluation is not None:
        validation_counts(rows, task.board)


def train_work(index: int, addresses: Sequence[str], task: Task, callbacks: Sequence[Any] | None = None
               ) -> dict[str, Any]:
    """One worker's part of a multi-worker training: fetch its partition, set TF_CONFIG, train; with
    ``task.evaluation``, score its partition's validation images with the model it trained.

    Worker ``index`` of ``len(addresses)`` (the barrier addresses, in partition order) fetches partition
    ``index`` of ``len(addresses)`` from ``task.board`` (into the options' ``cache_dir``, ``fetch_workers``
    downloads at once), sets ``TF_CONFIG`` from the addresses and the options' ``base_port`` and calls
    :func:`alexnet.train.api.train` with ``strategy = "multi_worker"``, ``task.settings`` (checked on the driver)
    and ``callbacks``. It must run in a process where TensorFlow has not started yet. Every worker of the job calls
    it at about the same time (each blocks until all have joined).

    Returns a dict: ``worker``, ``workers``, ``address`` (the barrier address), ``tf_address`` (where this
    worker's TensorFlow server listens), ``chief``, ``categories`` (the partition's wnids), ``train_images``,
    ``val_images``, ``downloaded_bytes``, ``fetch_seconds``, ``history`` (what ``alexnet_train()`` returns) and,
    with an evaluation, ``evaluation`` (this worker's counts, see :func:`score_share`). :func:`train_row` makes a
    flat row of it.
    """
    addresses = [addresses] if isinstance(addresses, str) else [str(a) for a in addresses]
    index = as_int(index, "index")
    config = tf_config(addresses, index, task.options.base_port)
    os.environ["TF_CONFIG"] = json.dumps(config)
    logger.info("Worker %d of %d: TF_CONFIG %s", index, len(addresses), os.environ["TF_CONFIG"])

    from ..data.fetch import imagenet_partition
    from ..tfimport import keras
    from ..train.api import train
    from ..train.settings import check_settings

    data = imagenet_partition(index, len(addresses), task.board, cache_dir=task.options.cache_dir,
                              workers=task.options.fetch_workers)
    settings = task.settings if task.settings is not None else check_settings({"verbose": WORKER_VERBOSE})
    holder = keras.callbacks.Callback()  # given the model the run ends with
    history = train(settings, data, "multi_worker", [*(callbacks or []), holder])
    result = {
        "worker": index,
        "workers": len(addresses),
        "address": addresses[index],
        "tf_address": config["cluster"]["worker"][index],
        "chief": index == 0,
        "categories": list(data["categories"]),
        "train_images": len(data["image"]),
        "val_images": len(data["val_image"]),
        "downloaded_bytes": int(data.get("downloaded_bytes", 0)),
        "fetch_seconds": float(data.get("seconds", 0.0)),
        "history": history,
    }
    if task.evaluation is not None:
        result["evaluation"] = _score_trained(holder.model, history, data, index, len(addresses), task)
    return result


def _score_trained(model: Any, history: Mapping[str, Any], data: Mapping[str, Any], index: int, workers: int,
                   task: Task) -> dict[str, Any]:
    """This worker's counts of the model it trained on its partition's validation images, scored as the saved
    model is: its copy for inference with its card beside it (every worker makes the copy at the same point)."""
    from ..model.card import ModelCard
    from ..model.saved import inference_copy, write_card

    card = ModelCard.from_dict(history["card"], "the card of the model just trained")
    validation = {"val_image": list(data["val_image"]), "val_label": list(data["val_label"]),
                  "num_classes": data["num_classes"]}
    with inference_copy(model) as local:
        write_card(local, card)
        return score_share(local, index, workers, task, data=validation)


def train_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A flat row of scalars from a :func:`train_work` result: the columns of :data:`TRAIN_COLUMNS` (final-epoch
    ``loss``, ``accuracy`` and ``val_accuracy``, NaN without validation; ``categories`` joined with commas; the
    whole history as JSON in ``history``), then, with an evaluation, the share's counts as ``eval_<column>``."""
    history = result["history"]
    metrics = history.get("metrics", {})
    params = history.get("params", {})

    def last(name: str) -> float:
        values = metrics.get(name) or []
        return float(values[-1]) if values else float("nan")

    row = {
        "worker": int(result["worker"]),
        "workers": int(result["workers"]),
        "address": str(result["address"]),
        "tf_address": str(result["tf_address"]),
        "chief": bool(result["chief"]),
        "categories": ",".join(result["categories"]),
        "train_images": int(result["train_images"]),
        "val_images": int(result["val_images"]),
        "steps": int(params.get("steps", 0)),
        "global_batch_size": int(params.get("global_batch_size", 0)),
        "epochs": len(metrics.get("loss") or []),
        "loss": last("loss"),
        "accuracy": last("accuracy"),
        "val_accuracy": last("val_accuracy"),
        "images_per_second": float(history.get("images_per_second", 0.0)),
        "fetch_seconds": float(result.get("fetch_seconds", 0.0)),
        "train_seconds": float(params.get("seconds", 0.0)),
        "weights_sha256": str(history.get("weights_sha256", "")),
        "model_path": str(history.get("model_path") or ""),
        "history": json.dumps(history),
    }
    row = {name: row[name] for name in TRAIN_COLUMNS}  # in the columns' order, as spark_apply() wants
    if result.get("evaluation") is not None:
        share = evaluate_row(result["evaluation"])
        row.update({f"eval_{name}": share[name] for name in SHARE_COLUMNS})
    return row


def train_columns(task: Task) -> dict[str, type]:
    """The columns of a training worker's flat row for ``task``, in order (see :func:`train_row`)."""
    shares = {f"eval_{name}": EVALUATE_COLUMNS[name] for name in SHARE_COLUMNS} if task.evaluation else {}
    return {**TRAIN_COLUMNS, **shares}


def combine_training(task: Task, rows: Sequence[Mapping[str, Any]], seconds: float) -> dict[str, Any] | None:
    """The driver's end of a training: without an evaluation, nothing; with one, the workers' shares added
    (:func:`combine_shares`, ``seconds`` the slowest share's) and recorded in the model card
    (:func:`record_evaluation`), from the workers' flat rows."""
    if task.evaluation is None:
        return None
    shares = [{"worker": row["worker"], "workers": row["workers"],
               **{name: row[f"eval_{name}"] for name in SHARE_COLUMNS}} for row in rows]
    evaluation = combine_shares(shares, max(float(share["seconds"]) for share in shares))
    chief = min(rows, key=lambda row: int(row["worker"]))
    history = chief["history"]
    return record_evaluation(json.loads(history) if isinstance(history, str) else history, evaluation, task.board)


def card_evaluation(evaluation: Mapping[str, Any], board: str) -> dict[str, Any]:
    """What a model card records of an evaluation: the counts, the accuracies, how it was scored, and on what."""
    kept = ("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy", "top_k", "crops", "protocol",
            "image_size")
    return {**{name: evaluation[name] for name in kept}, "bad_images": len(evaluation.get("bad_images") or []),
            "board": board}


def record_evaluation(history: Mapping[str, Any], evaluation: dict[str, Any], board: str) -> dict[str, Any]:
    """``evaluation`` of the model a training saved (``history`` is its chief's), recorded where the model is: the
    card beside it in ``model_dir`` is written again with the evaluation, and the model pin gets a new version
    whose card has it (the same file: see :func:`alexnet.model.pin.republish_model`). Returns ``evaluation`` with
    ``model`` (the pin's ``name@version``, else the model's path) and ``model_pin`` (the new version, or ``None``).
    """
    from ..model.card import ModelCard
    from ..model.pin import republish_model
    from ..model.saved import write_card

    card = ModelCard.from_dict(history["card"], "the card of the model just trained")
    card = dataclasses.replace(card, evaluation=card_evaluation(evaluation, board))
    evaluation = {**evaluation, "model": str(history.get("model_path") or "the model trained over Spark"),
                  "model_pin": None}
    pin = history.get("model_pin")
    try:
        if history.get("model_path"):
            write_card(str(history["model_path"]), card)
            logger.info("Recorded the evaluation in the card of %s.", history["model_path"])
        if pin:
            republished = republish_model(pin["board"], pin["name"], pin["version"], card)
            logger.info("Recorded the evaluation in pin %s version %s on %s.", republished["name"],
                        republished["version"], republished["board"])
            evaluation.update(model=f"{republished['name']}@{republished['version']}", model_pin=republished)
    except Exception as error:  # storage of any kind: the run and its evaluation are returned all the same
        where = f"pin {pin['name']} on {pin['board']}" if pin else str(history.get("model_path"))
        logger.warning("The evaluation could not be recorded in the card of %s (%s: %s); the run's result holds it.",
                       where, type(error).__name__, error)
    return evaluation
