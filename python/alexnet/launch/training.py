"""The training kind of barrier job: every worker trains one model with the others, each on its own partition.

On the driver, :func:`check_training` checks the training settings once (:func:`worker_settings`) and
:func:`fit_training` the board. Task ``k`` of ``workers`` runs :func:`train_work` in a fresh Python process: it
fetches partition ``k`` of the board, sets TF_CONFIG from the barrier addresses
(:func:`alexnet.train.cluster.tf_config`) and trains with ``MultiWorkerMirroredStrategy``. A training asked to end
with its evaluation (``evaluate``) then scores, on each worker, the validation images of its partition with the
model it holds (:func:`alexnet.launch.evaluation.score_share`): every category is in one partition, so the
workers' counts add up to the one-machine evaluation of the saved model. The workers add them up among themselves,
in the training's own collective (:func:`added_up`), before the model is saved: the card beside the model and the
model pin, written once by the chief, record the evaluation. The driver adds the same counts from the workers' rows,
with each worker's share (:func:`combine_training`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..checks import as_int
from ..declare.kinds import Spec
from ..errors import AlexnetError, KeptWarnings
from ..train.cluster import tf_config
from ..train.settings import TrainSettings, specs
from .evaluation import EVALUATE_COLUMNS, added_counts, combine_shares, evaluate_row, score_share, validation_of
from .monitor import StatusRelay
from .task import Evaluation, Task

if TYPE_CHECKING:
    from ..model.card import ModelCard

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
    "model_pin": str,
    "model_board": str,
    "log": str,
    "history": str,
}
#: The share's columns in a training row, without the worker's own (``worker``, ``workers``, ``log``).
SHARE_COLUMNS = [name for name in EVALUATE_COLUMNS if name not in ("worker", "workers", "log")]
#: Arguments a worker sets itself, which callers must not give, and what to say when they do.
RESERVED = {name: "each worker trains on its own partition with strategy = 'multi_worker'. Leave it out."
            for name in ("data", "strategy")}
#: The counts of a worker's share of an evaluation its workers add up among themselves (see :func:`added_up`).
GATHERED = ("images", "top1_correct", "top5_correct", "top_k", "image_size", "num_classes")
#: Keras verbosity of a worker whose output goes to a log file: one line per epoch.
WORKER_VERBOSE = 2
#: The training settings whose default a worker does not take from the declaration, and the default it takes.
WORKER_DEFAULTS: dict[str, Any] = {"verbose": WORKER_VERBOSE}


def worker_settings(train_args: Mapping[str, Any], board: str | os.PathLike | None, *, local_master: bool = True,
                    where: str = "alexnet_spark_train()") -> TrainSettings:
    """The training settings every worker of a distributed run gets, checked once on the driver
    (:func:`alexnet.train.settings_check.check_settings`: names, values, output locations writable, the board of
    ``model_pin``, by default ``board``): not ``data`` or ``strategy``, which the workers set; Keras prints one line
    per epoch unless ``verbose`` says otherwise (a worker's output goes to its log)."""
    from ..storage.board import default_board
    from ..train.settings_check import check_settings

    arguments = dict(train_args)
    if arguments.get("strategy", "multi_worker") in (None, "multi_worker"):
        arguments.pop("strategy", None)
    for name, default in WORKER_DEFAULTS.items():
        arguments.setdefault(name, default)
    return check_settings(arguments, data_board=os.fspath(board) if board is not None else default_board(),
                          shared=not local_master, where=where, reserved=RESERVED)


def worker_specs() -> dict[str, Spec]:
    """The training settings a Spark training takes by name, each with the default its workers train with (the
    declaration's, or that of :data:`WORKER_DEFAULTS`)."""
    return {name: dataclasses.replace(spec, default=WORKER_DEFAULTS.get(name, spec.default))
            for name, spec in specs().items()}


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
    declaration.warn_unused(job, logger)
    return {"settings": settings, "evaluation": evaluation}


def fit_training(task: Task, rows: list[dict[str, Any]]) -> None:
    """The driver's checks of a training against the board's categories ``rows``: one category at least per
    worker; with an evaluation, validation images on the board; checkpoints in ``checkpoint_dir`` that the run can
    resume (of this version's format, written for the same model and trained on the board's classes: every worker
    would refuse them, once per launch, after the job had taken its slots). Read from the history file and the card
    beside the checkpoints, not from their weights."""
    from ..data.fetch import validation_counts
    from ..train.formats import check_checkpoints_fit

    if task.workers > len(rows):
        raise AlexnetError(f"{task.workers} workers need at least {task.workers} categories, but board {task.board} "
                           f"has {len(rows)}: use `workers` <= {len(rows)}.")
    if task.evaluation is not None:
        validation_counts(rows, task.board)
    if task.settings is not None:
        check_checkpoints_fit(task.settings, rows)


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
    from ..train.api import train
    from ..train.datasets import stored_side_said
    from ..train.settings_check import check_settings

    data = imagenet_partition(index, len(addresses), task.board, cache_dir=task.options.cache_dir,
                              workers=task.options.fetch_workers)
    check_same_table(task, data, index)
    settings = task.settings if task.settings is not None else check_settings(dict(WORKER_DEFAULTS))
    shares: list[dict[str, Any]] = []  # this worker's share of the evaluation, when there is one

    def evaluate(strategy: Any, model: Any, card: ModelCard) -> dict[str, Any]:
        try:  # the images' stored side said once a job: by the chief, unless its training said it
            shares.append(_score_trained(model, card, data, index, len(addresses), task,
                                         stored=index == 0 and not said))
        except Exception as err:  # said in the collective, so that no worker waits there for this one
            return card_evaluation(added_up(strategy, err, index, len(addresses)), task.board)
        return card_evaluation(added_up(strategy, shares[0], index, len(addresses)), task.board)

    # said again on the driver, where the user is (this worker's log is on its host): as they happen, through the
    # driver's monitor when there is one, and with the rows at the end
    kept = KeptWarnings(_warning_relay(task, index, len(addresses)))
    # and the chief's lines of start-up, which come before its first progress, minutes after the job began
    relays = [kept, *filter(None, [_status_relay(task, index, len(addresses))])]
    for handler in relays:
        logging.getLogger("alexnet").addHandler(handler)
    try:
        with stored_side_said() as said:
            history = train(settings, data, "multi_worker", callbacks,
                            evaluate if task.evaluation is not None else None)
    finally:
        for handler in relays:
            logging.getLogger("alexnet").removeHandler(handler)
    history["warnings"] = list(dict.fromkeys(kept.messages))
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
    if shares:
        result["evaluation"] = shares[0]
    return result


def _warning_relay(task: Task, index: int, workers: int) -> Callable[[str], None] | None:
    """What sends each warning of worker ``index`` to the driver's monitor as it is logged (None without one)."""
    if not task.progress:
        return None
    from ..train.callbacks import progress_writer

    send = progress_writer(task.progress)
    return lambda message: send({"kind": "warning", "worker": index, "workers": workers, "message": message})


def _status_relay(task: Task, index: int, workers: int) -> StatusRelay | None:
    """What sends the chief's lines of start-up to the driver's monitor as they are logged (None on another worker,
    or without a monitor)."""
    if not task.progress or index != 0:
        return None
    from ..train.callbacks import progress_writer

    return StatusRelay(progress_writer(task.progress), index, workers)


def check_same_table(task: Task, data: Mapping[str, Any], index: int) -> None:
    """Raise when worker ``index`` fetched its partition (``data``) from another version of the board's categories
    table than the driver planned the job with: the board was uploaded to meanwhile, and the workers could split
    the categories otherwise, or count other partition sizes, and train steps apart."""
    planned, read = task.categories_version, data.get("categories_version")
    if planned and read and planned != read:
        raise AlexnetError(
            f"board {task.board} was uploaded to after this job began: the driver planned it with version {planned} "
            f"of its categories table, and worker {index} read version {read}, so that the workers could split the "
            "categories otherwise. Run the job again once the upload is over."
        )


def _score_trained(model: Any, card: ModelCard, data: Mapping[str, Any], index: int, workers: int,
                   task: Task, *, stored: bool = False) -> dict[str, Any]:
    """This worker's counts of the model it trained on its partition's validation images, scored as the saved
    model is: its copy for inference with its ``card`` beside it (every worker makes the copy at the same point).
    ``stored``: the evaluation says when the board's images were stored smaller than it reads them (one worker
    does, where the training said nothing of it)."""
    from ..model.saving import inference_copy, write_card

    validation = validation_of(data, stored=stored)
    with inference_copy(model) as local:
        write_card(local, card)
        return score_share(local, index, workers, task, data=validation)


def added_up(strategy: Any, share: Mapping[str, Any] | Exception, index: int, workers: int) -> dict[str, Any]:
    """Every worker's ``share`` of an evaluation added up, on every worker: the counts gathered in one collective of
    the training's ``strategy`` (every worker calls it at the same point), then added as the driver adds the rows
    (:func:`alexnet.launch.evaluation.added_counts`); ``bad_images`` is their number.

    A worker whose scoring failed passes its error as ``share``: the collective says so to every worker, and every
    worker raises at once (that one its own error, the others an :class:`AlexnetError` naming it) rather than
    wait for it until the collective's timeout."""
    from ..train.agreement import all_gather_ints

    failed = isinstance(share, Exception)
    counts = [0] * (len(GATHERED) + 1) if isinstance(share, Exception) else [
        *(int(share[name]) for name in GATHERED), len(share.get("bad_images") or [])]
    gathered = all_gather_ints(strategy, [index, int(failed), *counts])
    by_worker = {int(row[0]): row for row in gathered}  # a row per replica: one per worker
    if sorted(by_worker) != list(range(workers)):
        raise AlexnetError(f"internal: the evaluation's counts came from workers {sorted(by_worker)} of {workers}.")
    if isinstance(share, Exception):
        raise share
    others = [k for k, row in sorted(by_worker.items()) if row[1]]
    if others:
        raise AlexnetError(f"the evaluation failed on worker {', '.join(map(str, others))} of {workers} (its log "
                           "says why), after training and before the model was saved: launch again with `evaluate` "
                           "off (a run resumed from a checkpoint of its last epoch trains nothing more), then score "
                           "the model with alexnet_evaluate().")
    rows = [{"worker": k, **dict(zip(GATHERED, (int(v) for v in row[2:-1]), strict=True)), "crops": share["crops"],
             "protocol": share["protocol"]} for k, row in sorted(by_worker.items())]
    return {**added_counts(rows), "bad_images": sum(int(row[-1]) for row in by_worker.values())}


def train_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A flat row of scalars from a :func:`train_work` result: the columns of :data:`TRAIN_COLUMNS` (final-epoch
    ``loss``, ``accuracy`` and ``val_accuracy``, NaN without validation; ``images_per_second``, NaN when no step
    ran; ``categories`` joined with commas; the model the chief saved, ``model_path``, and published, ``model_pin``
    (``name@version``) on ``model_board``, each ``""`` on the other workers or when there is none; where the worker's
    log is, ``log`` (``host:path``); the whole history as JSON in ``history``), then, with an evaluation, the share's
    counts as ``eval_<column>``."""
    history = result["history"]
    metrics = history.get("metrics", {})
    params = history.get("params", {})
    pin = history.get("model_pin")  # the chief's, which published it
    rate = history.get("images_per_second")  # None when no step ran

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
        "images_per_second": float("nan") if rate is None else float(rate),
        "fetch_seconds": float(result.get("fetch_seconds", 0.0)),
        "train_seconds": float(params.get("seconds", 0.0)),
        "weights_sha256": str(history.get("weights_sha256", "")),
        "model_path": str(history.get("model_path") or ""),
        "model_pin": f"{pin['name']}@{pin['version']}" if pin else "",
        "model_board": str(pin["board"]) if pin else "",
        "log": str(result.get("log") or ""),
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


def combine_training(task: Task, rows: Sequence[Mapping[str, Any]], seconds: float,
                     shown: Collection[str] = ()) -> dict[str, Any] | None:
    """The driver's end of a training: the workers' warnings said, but those the driver's monitor ``shown`` as
    they were logged (:func:`relay_warnings`); without an evaluation, nothing; with one, the workers' shares added
    (:func:`combine_shares`, ``seconds`` the slowest share's), from the workers' flat rows, with ``model`` (the pin's
    ``name@version`` when the chief published one, else the model's path) and ``model_pin`` (the version whose card
    records this evaluation, or ``None``)."""
    relay_warnings(rows, shown)
    if task.evaluation is None:
        return None
    shares = [{"worker": row["worker"], "workers": row["workers"], "log": row.get("log", ""),
               **{name: row[f"eval_{name}"] for name in SHARE_COLUMNS}} for row in rows]
    evaluation = combine_shares(shares, max(float(share["seconds"]) for share in shares))
    chief = min(rows, key=lambda row: int(row["worker"]))
    history = json.loads(chief["history"]) if isinstance(chief["history"], str) else chief["history"]
    pin = history.get("model_pin")
    model = f"{pin['name']}@{pin['version']}" if pin else str(history.get("model_path") or "the model trained over "
                                                               "Spark")
    return {**evaluation, "model": model, "model_pin": pin}


def relay_warnings(rows: Sequence[Mapping[str, Any]], shown: Collection[str] = ()) -> None:
    """Log on the driver the warnings the workers logged while they trained (their histories' ``warnings``), each
    once, with the workers that gave it: a worker's log stays on its host, and the chief's advice (a global batch
    beyond what AlexNet keeps its accuracy at, the exchange that settings would shorten) is for the user. Those the
    driver's monitor has ``shown`` already, as they were logged, are not said again."""
    said: dict[str, list[int]] = {}
    for row in sorted(rows, key=lambda row: int(row["worker"])):
        history = json.loads(row["history"]) if isinstance(row["history"], str) else row["history"]
        for message in history.get("warnings") or []:
            if str(message) not in shown:
                said.setdefault(str(message), []).append(int(row["worker"]))
    for message, workers in said.items():
        whose = "Every worker" if len(workers) == len(rows) > 1 else (
            f"Worker {workers[0]}" if len(workers) == 1 else f"Workers {', '.join(map(str, workers))}")
        logger.warning("%s: %s", whose, message)


def card_evaluation(evaluation: Mapping[str, Any], board: str) -> dict[str, Any]:
    """What a model card records of an evaluation (:func:`added_up`'s): the counts, the accuracies, how it was
    scored, and on what."""
    kept = ("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy", "top_k", "crops", "protocol",
            "image_size", "bad_images")
    return {**{name: evaluation[name] for name in kept}, "board": board}
