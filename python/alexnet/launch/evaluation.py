"""The evaluation kind of barrier job: each worker scores its share of the board's validation images; the driver adds.

On the driver, :func:`check_evaluation` and :func:`fit_evaluation` make every check before any Spark job (the
model reachable by every worker, ``crops``, the board's validation images and classes). Task ``k`` of
``workers`` runs :func:`evaluate_work` in a fresh Python process: it fetches share ``k`` of the board's validation
images (balanced by validation image count, see :func:`alexnet.data.fetch.imagenet_validation`), loads the
model (a location, or a model pin each worker without its file fetches from its board, into the ``cache_dir`` it
was read with) and counts its correct top-1 and top-5 predictions with :func:`alexnet.alexnet_evaluate`, the one
definition of the counts. A training that ends with its evaluation scores with :func:`score_share` too, on the
validation images its partition already holds.
:func:`combine_shares` adds the workers' counts: the shares cover every validation image exactly once, so the
result equals a one-machine ``alexnet_evaluate(model, board = board)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..checks import as_int
from ..errors import AlexnetError
from ..storage.location import local_path_warning, location_kind
from .task import Evaluation, Task

logger = logging.getLogger(__name__)

#: Columns of a worker's flat row (:func:`evaluate_row`), in order, with their Python types.
EVALUATE_COLUMNS: dict[str, type] = {
    "worker": int,
    "workers": int,
    "images": int,
    "top1_correct": int,
    "top5_correct": int,
    "top_k": int,
    "crops": int,
    "protocol": str,
    "image_size": int,
    "num_classes": int,
    "seconds": float,
    "model": str,
    "log": str,
    "bad_images": str,
    "left_out_at_upload": int,
    "per_class": str,
    "confusions": str,
}
#: ``left_out_at_upload`` in a worker's flat row when the share does not know it (None in a result).
UNKNOWN = -1
#: The columns that hold a list as JSON text (:func:`evaluate_row`).
JSON_COLUMNS = ("bad_images", "per_class", "confusions")
#: How the progress bar of :func:`alexnet.alexnet_evaluate`'s scoring starts its description.
SCORING = "evaluate"
#: Seconds between two progress reports of one worker.
PROGRESS_INTERVAL = 5.0


def _worker_reference(model: Any, local_master: bool) -> Any:
    """What each worker is given to find the model: the location, or the pin's dict; a loaded model is refused."""
    from ..model.saved import model_source

    if not isinstance(model, (str, os.PathLike, Mapping)):
        raise AlexnetError(
            f"a Spark evaluation needs a model every worker can reach: a model_dir or alexnet.keras location "
            f"(gs://, s3://, or a shared folder) or a model pin from alexnet_model(), not a {type(model).__name__} "
            "(save it, or publish it as a pin, first)."
        )
    source = model_source(model)
    if source.kind == "location":
        if location_kind(source.reference) == "file" and not local_master:
            warning = local_path_warning(f"The model {source.reference}", source.reference)
            if warning is not None:
                logger.warning("%s A model pin, which every worker reads from the board, needs no shared folder.",
                               warning)
        return source.reference
    return dict(source.reference)


def check_evaluation(workers: int, board: Any, *, local_master: bool = True, where: str = "alexnet_spark_evaluate()",
                     model: Any = None, **options: Any) -> dict[str, Any]:
    """The driver's checks of an evaluation before the board is read: no argument it does not take (``where``
    names the call), its ``options`` (:func:`alexnet.model.options.check_options`), and a ``model`` that exists (its
    card is read) and that every worker reaches. The :class:`~alexnet.launch.task.Task` fields they settle."""
    from ..declare.declaration import check_names
    from ..model.options import check_options, specs
    from .options import specs as launch_specs

    check_names(options, [*specs(), *launch_specs()], where, "Its options besides `model`")
    if model is None:
        raise AlexnetError(f"{where} needs `model`: a model pin (alexnet_model()) or the location of a saved model.")
    checked = check_options(options)
    return {"evaluation": Evaluation(model=_worker_reference(model, local_master), options=checked)}


def check_validation_shares(workers: int, rows: list[dict[str, Any]], location: str) -> None:
    """The board has validation images, in at least ``workers`` categories (one share each)."""
    from ..data.fetch import validation_counts

    counts = validation_counts(rows, location)
    if workers > len(counts):
        raise AlexnetError(f"{workers} workers need at least {workers} categories with validation images, but board "
                           f"{location} has {len(counts)}: use `workers` <= {len(counts)}.")


def fit_evaluation(task: Task, rows: list[dict[str, Any]]) -> None:
    """The driver's checks of an evaluation against the board's categories ``rows``: validation images for every
    worker, and the model's classes (:func:`alexnet.model.evaluate.check_classes`; a model without a card is loaded
    here to learn how many it has)."""
    from ..model.evaluate import check_classes
    from ..model.saved import load_model, model_source

    source = model_source(_scored_model(task))
    # a model without a card names its classes by number: only their number can be checked
    card, ids = (source.card, [r["id"] for r in rows]) if source.card is not None else (load_model(source).card, None)
    check_classes(card, len(rows), ids, f"board {task.board}")
    check_validation_shares(task.workers, rows, task.board)


def _scored_model(task: Task) -> Any:
    """The model an evaluation task names (a training's evaluation scores the model it trained instead)."""
    if task.evaluation is None or task.evaluation.model is None:
        raise AlexnetError(f"a task of kind {task.kind!r} names no model to evaluate; plan it with plan_job().")
    return task.evaluation.model


class _Reporter:
    """Sends one worker's evaluation progress (images scored of its share, as the evaluation's progress bar counts
    them) to ``send``, at most every :data:`PROGRESS_INTERVAL` seconds, and when its share is done."""

    def __init__(self, send: Callable[[dict[str, Any]], None], worker: int, workers: int):
        self.send, self.worker, self.workers = send, worker, workers
        self.done = self.first = self.start = self.last = 0.0

    def __call__(self, desc: str, steps: float, total: float | None) -> None:
        if not desc.startswith(SCORING):  # the bars of fetching and checking the images
            return
        now = time.monotonic()
        if not self.done:  # the rate counts from the first batch scored (the model loaded, the graph traced)
            self.first, self.start = steps, now
        self.done += steps
        finished = total is not None and self.done >= total
        if now - self.last >= PROGRESS_INTERVAL or finished:
            self.last = now
            record = {"kind": "evaluate", "worker": self.worker, "workers": self.workers, "images": int(self.done),
                      "total": None if total is None else int(total)}
            if now > self.start:
                record["images_per_second"] = round((self.done - self.first) / (now - self.start), 2)
            self.send(record)


def score_share(model: Any, index: int, workers: int, task: Task, *, data: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """Worker ``index`` of ``workers`` scores ``model`` with :func:`alexnet.alexnet_evaluate` as ``task.evaluation``
    says: on ``data``'s validation images (none: nothing to count), or else on share ``index`` of the board's;
    its progress goes to ``task.progress``. The result with ``worker`` and ``workers``."""
    from ..model.evaluate import alexnet_evaluate
    from ..progress import watch_progress
    from ..train.callbacks import progress_writer

    options = (task.evaluation or Evaluation()).options
    where: dict[str, Any] = {"data": data} if data is not None else {
        "board": task.board, "partition": index, "total": workers, "cache_dir": task.options.cache_dir,
        "fetch_workers": task.options.fetch_workers}
    if data is not None and not len(data.get("val_image") or []):
        logger.info("Worker %d of %d holds no validation images: nothing to score.", index, workers)
        return {"worker": int(index), "workers": int(workers), **empty_share(options.crops),
                "left_out_at_upload": data.get("left_out_at_upload")}
    reporter = _Reporter(progress_writer(task.progress), index, workers) if task.progress else None
    with watch_progress(reporter) if reporter is not None else contextlib.nullcontext():
        result = alexnet_evaluate(model, **where, **dataclasses.asdict(options))
    return {"worker": int(index), "workers": int(workers), **result}


def validation_of(data: Mapping[str, Any], *, stored: bool = False) -> dict[str, Any]:
    """What an evaluation of a partition ``data`` (:func:`alexnet.imagenet_partition`'s) takes of it: its validation
    images, their labels, the number of classes, and how many of its validation images the upload left out; with
    ``stored``, also the side the board stored them at (``resize``), which the evaluation warns of when it is below
    the side it reads them at."""
    return {"val_image": list(data["val_image"]), "val_label": list(data["val_label"]),
            "num_classes": data["num_classes"], "left_out_at_upload": data.get("left_out_at_upload"),
            **({"resize": data.get("resize")} if stored else {})}


def empty_share(crops: int) -> dict[str, Any]:
    """The counts of a worker without validation images (which :func:`combine_shares` adds as nothing)."""
    from ..model.options import PROTOCOLS

    return {"images": 0, "top1_correct": 0, "top5_correct": 0, "top_k": 0, "crops": crops,
            "protocol": PROTOCOLS[crops], "image_size": 0, "num_classes": 0, "seconds": 0.0, "model": "",
            "bad_images": [], "left_out_at_upload": None, "per_class": [], "confusions": []}


def evaluate_work(index: int, addresses: Sequence[str], task: Task) -> dict[str, Any]:
    """What each worker of an evaluation runs: :func:`score_share` of ``task.evaluation.model`` on share ``index``
    of ``len(addresses)`` of the board's validation images."""
    addresses = [addresses] if isinstance(addresses, str) else list(addresses)
    return score_share(_scored_model(task), as_int(index, "index"), len(addresses), task)


def evaluate_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A flat row of scalars (the columns of :data:`EVALUATE_COLUMNS`) from a :func:`score_share` result; the lists
    (:data:`JSON_COLUMNS`: ``bad_images`` and the tables by class) as JSON text; ``left_out_at_upload`` not known,
    :data:`UNKNOWN`; ``log``, where the worker's log is (``host:path``, as its launch added it), ``""`` when the
    result does not say."""
    known = {**result, "left_out_at_upload": _left_out(result), "log": str(result.get("log") or "")}
    row = {name: kind(known[name]) for name, kind in EVALUATE_COLUMNS.items() if name not in JSON_COLUMNS}
    for name in JSON_COLUMNS:
        value = result.get(name) or []
        row[name] = value if isinstance(value, str) else json.dumps(list(value))
    return {name: row[name] for name in EVALUATE_COLUMNS}


def _left_out(row: Mapping[str, Any]) -> int:
    """A worker's ``left_out_at_upload`` (a row's or a result's), :data:`UNKNOWN` when not known."""
    value = row.get("left_out_at_upload")
    return UNKNOWN if value is None else int(value)


def left_out_added(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The validation images the upload left out, of every worker's share added (share 0 also counts those of the
    categories left without any, so that the shares add up to the board's); None when a share does not know."""
    counts = [_left_out(row) for row in rows]
    return None if not counts or UNKNOWN in counts else sum(counts)


def _listed(row: Mapping[str, Any], name: str) -> list[Any]:
    """Column ``name`` of a worker's row as a list (JSON text in a flat row, a list in a result)."""
    value = row.get(name) or []
    return json.loads(value) if isinstance(value, str) else list(value)


def class_tables(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``per_class`` and ``confusions`` of the workers' ``rows`` together: each share's tables read once, its counts
    (:meth:`~alexnet.model.class_counts.ClassCounts.from_tables`) added, so that a class scored by several workers
    counts once, with all its images, and its classes named as the tables name them (a class no table names has no
    row, and keeps its index as its name)."""
    from ..model.class_counts import ClassCounts

    classes = max((int(r["num_classes"]) for r in rows), default=0)
    ids, names = [str(i) for i in range(classes)], [str(i) for i in range(classes)]
    total = ClassCounts.empty(classes)
    for row in rows:
        per_class, confusions = _listed(row, "per_class"), _listed(row, "confusions")
        total = total.add(ClassCounts.from_tables(classes, per_class, confusions))
        for record in per_class + confusions:
            ids[int(record["index"])], names[int(record["index"])] = str(record["id"]), str(record["name"])
            if "predicted_index" in record:
                predicted = int(record["predicted_index"])
                ids[predicted], names[predicted] = str(record["predicted_id"]), str(record["predicted_name"])
    return total.tables(ids, names)


def added_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The counts of the workers' ``rows`` added (``images``, ``top1_correct``, ``top5_correct``), the accuracies of
    the sums, and how the images were scored (``top_k``, ``crops``, ``protocol``, ``image_size``, ``num_classes``: the
    first worker's that had images to score): :func:`alexnet.model.evaluate.evaluation_counts` of the sums."""
    from ..model.evaluate import evaluation_counts

    return evaluation_counts(*_sums(rows), **_scoring(rows))


def _sums(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int, int]:
    """The workers' ``images``, ``top1_correct`` and ``top5_correct`` added."""
    return (sum(int(r["images"]) for r in rows), sum(int(r["top1_correct"]) for r in rows),
            sum(int(r["top5_correct"]) for r in rows))


def _scoring(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How the images were scored: the first worker's that had images to score (a worker without any names none)."""
    first = next((r for r in rows if int(r["images"]) > 0), rows[0])
    return {name: int(first[name]) for name in ("top_k", "crops", "image_size", "num_classes")}


def combine_shares(rows: Sequence[Mapping[str, Any]], seconds: float) -> dict[str, Any]:
    """The evaluation of the whole board from the workers' rows: counts added, accuracies from the sums, in the
    dict of one machine's evaluation (:func:`alexnet.model.evaluate.evaluation_result`; ``seconds``: the time it
    took; ``left_out_at_upload``: :func:`left_out_added`), plus ``workers`` and ``per_worker`` (``worker``,
    ``images``, ``top1_correct``, ``top5_correct``, ``seconds`` and ``log``, where the worker's log is, ``host:path``,
    ``""`` when its row does not say, each); ``per_class`` and ``confusions`` are those of the whole
    (:func:`class_tables`). A worker that had no images to score adds nothing. ``images_per_second`` is the workers'
    own: the images over the slowest worker's seconds of scoring (``seconds`` may count more: a Spark
    evaluation's is its stage's, with Spark's start, the fetch and the model's load).
    """
    from ..model.evaluate import evaluation_result

    rows = sorted(rows, key=lambda row: int(row["worker"]))
    bad = [image for row in rows for image in _listed(row, "bad_images")]
    first = next((r for r in rows if int(r["images"]) > 0), rows[0])
    result = evaluation_result(*_sums(rows), **_scoring(rows), seconds=seconds, bad_images=sorted(bad),
                               model=str(first["model"]), tables=class_tables(rows),
                               left_out_at_upload=left_out_added(rows))
    slowest = max(float(r["seconds"]) for r in rows)
    result["images_per_second"] = result["images"] / slowest if slowest > 0 else float("nan")
    return {
        **result, "workers": len(rows),
        "per_worker": [{"worker": int(r["worker"]), "images": int(r["images"]), "top1_correct": int(r["top1_correct"]),
                        "top5_correct": int(r["top5_correct"]), "seconds": float(r["seconds"]),
                        "log": str(r.get("log") or "")} for r in rows],
    }
