"""Evaluation across a Spark cluster: each barrier task scores its share of the board's validation images.

Task ``k`` of ``workers`` runs :func:`evaluate_worker` in a fresh Python process: it fetches partition ``k``
of the board's validation images (balanced by validation image count, see
:func:`alexnet.data.fetch.imagenet_validation`), loads the model (a location every worker reaches, or a model
pin, which each worker fetches from its board) and counts its correct top-1 and top-5 predictions. The driver
adds the counts: the shares cover every validation image exactly once, so the result equals a one-machine
``alexnet_evaluate(model, board = board)``.

From Python, :func:`alexnet_spark_evaluate` launches the stage with pyspark (:func:`alexnet.launch.spark.run_barrier`).
From R, ``sparklyr::spark_apply(barrier = TRUE)`` launches it: :func:`r_evaluate` is the driver's one call,
:func:`evaluate_row` each task's, and :func:`evaluate_columns` the columns of a task's row.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..checks import as_int
from ..data.fetch import DEFAULT_DOWNLOADS
from ..errors import AlexnetError
from ..storage.location import location_kind
from .job import check_probe, check_slots, failure_of
from .task import EvaluateTask
from .worker import WorkerError, run_worker

logger = logging.getLogger(__name__)

#: Columns of a task's row (:func:`evaluate_row`), in order, with their Python types.
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
    "bad_images": str,
}


def evaluate_worker(index: int, addresses: Sequence[str], model: Any, board: str, *, crops: int = 1,
                    batch_size: int = 64, cache_dir: str | None = None,
                    fetch_workers: int = DEFAULT_DOWNLOADS) -> dict[str, Any]:
    """One task's part: :func:`alexnet.alexnet_evaluate` of ``model`` on partition ``index`` of
    ``len(addresses)`` of ``board``'s validation images; its result with ``worker`` and ``workers``."""
    from ..model.evaluate import alexnet_evaluate

    addresses = [addresses] if isinstance(addresses, str) else list(addresses)
    result = alexnet_evaluate(model, board=board, crops=crops, batch_size=batch_size, partition=index,
                              total=len(addresses), cache_dir=cache_dir, fetch_workers=fetch_workers)
    return {"worker": int(index), "workers": len(addresses), **result}


def worker_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A flat row of scalars (the columns of :data:`EVALUATE_COLUMNS`) from an :func:`evaluate_worker` result;
    ``bad_images`` as a JSON list."""
    row = {name: kind(result[name]) for name, kind in EVALUATE_COLUMNS.items() if name != "bad_images"}
    row["bad_images"] = json.dumps(list(result.get("bad_images") or []))
    return {name: row[name] for name in EVALUATE_COLUMNS}


def combine_rows(rows: Sequence[Mapping[str, Any]], seconds: float) -> dict[str, Any]:
    """The evaluation of the whole board from the workers' rows: counts added, accuracies from the sums.

    The dict of :func:`alexnet.alexnet_evaluate` (``seconds`` is the stage's wall time), plus ``workers`` and
    ``per_worker`` (``worker``, ``images``, ``top1_correct``, ``top5_correct``, ``seconds`` each).
    """
    rows = sorted(rows, key=lambda row: int(row["worker"]))
    images = sum(int(r["images"]) for r in rows)
    top1 = sum(int(r["top1_correct"]) for r in rows)
    topk = sum(int(r["top5_correct"]) for r in rows)
    bad: list[str] = []
    for row in rows:
        value = row.get("bad_images") or []
        bad.extend(json.loads(value) if isinstance(value, str) else list(value))
    first = rows[0]
    return {
        "images": images, "top1_correct": top1, "top5_correct": topk,
        "top1_accuracy": top1 / images if images else float("nan"),
        "top5_accuracy": topk / images if images else float("nan"),
        "top_k": int(first["top_k"]), "crops": int(first["crops"]), "protocol": str(first["protocol"]),
        "image_size": int(first["image_size"]), "num_classes": int(first["num_classes"]),
        "images_per_second": images / seconds if seconds > 0 else float("nan"), "seconds": round(seconds, 3),
        "bad_images": sorted(bad), "model": str(first["model"]), "workers": len(rows),
        "per_worker": [{"worker": int(r["worker"]), "images": int(r["images"]), "top1_correct": int(r["top1_correct"]),
                        "top5_correct": int(r["top5_correct"]), "seconds": float(r["seconds"])} for r in rows],
    }


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
            logger.warning("The model %s is a path: on a cluster every node has its own, unless it is on a shared "
                           "file system; use gs:// or s3:// storage every worker reaches, or a model pin.",
                           source.reference)
        return source.reference, source
    return dict(source.reference), source


def plan_evaluation(model: Any, workers: Any, board: str | os.PathLike | None, slots: int | None, *,
                    crops: Any = 1, batch_size: Any = 64, cache_dir: Any = None,
                    fetch_workers: Any = DEFAULT_DOWNLOADS, python: str | None = None,
                    env: Mapping[str, str] | None = None, local_master: bool = True) -> EvaluateTask:
    """Every check made on the driver before a Spark evaluation, and the task each worker is handed.

    ``workers`` must fit in ``slots`` and not exceed the board's categories with validation images; the
    board must have validation images and as many categories as the model has outputs; the model must exist
    (its card is read; a model without one is loaded here to learn its outputs) and be something every worker
    reaches; ``crops`` must be 1 or 10. Returns the :class:`~alexnet.launch.task.EvaluateTask` every worker is
    handed.
    """
    from ..data.fetch import validation_counts
    from ..model.evaluate import check_crops
    from ..model.saved import load_model
    from ..storage.board import open_board
    from ..storage.layout import read_categories

    workers = check_slots(workers, slots)
    crops = check_crops(crops)
    batch_size = as_int(batch_size, "batch_size", 1)
    reference, source = _worker_reference(model, local_master)
    opened = open_board(board)
    rows = read_categories(opened)
    counts = validation_counts(rows, opened.location)
    outputs = source.card.num_classes if source.card is not None else load_model(source).card.num_classes
    if outputs != len(rows):
        raise AlexnetError(f"the model has {outputs} outputs but board {opened.location} has {len(rows)} classes: "
                           "evaluate it on the board it was trained for.")
    if workers > len(counts):
        raise AlexnetError(f"{workers} workers need at least {workers} categories with validation images, but board "
                           f"{opened.location} has {len(counts)}: use workers <= {len(counts)}.")
    return EvaluateTask(model=reference, board=opened.location, crops=crops, batch_size=batch_size, workers=workers,
                        cache_dir=None if cache_dir is None else os.path.abspath(os.fspath(cache_dir)),
                        fetch_workers=as_int(fetch_workers, "fetch_workers", 1), python=python,
                        env={str(k): str(v) for k, v in (env or {}).items()})


def alexnet_spark_evaluate(
    spark: Any,
    model: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    crops: int = 1,
    batch_size: int = 64,
    cache_dir: str | os.PathLike | None = None,
    fetch_workers: int = DEFAULT_DOWNLOADS,
    timeout: float | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    probe: bool = True,
) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over every validation image of ``board``, split over ``workers``
    Spark barrier tasks; the same result as a one-machine :func:`alexnet.alexnet_evaluate`.

    Task ``k`` evaluates partition ``k`` of ``workers`` of the validation images in a fresh Python process
    (``python``, default the executor's; ``env`` extra environment variables; fetched into ``cache_dir``,
    ``fetch_workers`` downloads at once); the driver adds the correct counts. ``model`` must be something
    every worker reaches: a ``model_dir`` or ``alexnet.keras`` location (``gs://``, ``s3://``; a local path with a
    non-local master gets a warning) or a model pin from :func:`alexnet.alexnet_model` (each worker fetches it
    from its board); a loaded ``keras.Model`` is an error. ``spark`` is a SparkSession or SparkContext;
    ``timeout`` bounds the stage in seconds.

    Before anything runs: the checks of :func:`plan_evaluation`, then, with ``probe``, a short job checks that
    the executors' Python imports alexnet and TensorFlow. Returns the dict of :func:`alexnet.alexnet_evaluate`
    plus ``workers`` and ``per_worker``.
    """
    from .spark import PYTHON_ADVICE, _spark_context, barrier_slots, probe_executors, run_barrier

    context = _spark_context(spark)
    task = plan_evaluation(model, workers, board, barrier_slots(context), crops=crops, batch_size=batch_size,
                           cache_dir=cache_dir, fetch_workers=fetch_workers, python=python, env=env,
                           local_master=(context.master or "").startswith("local"))
    count = task.workers
    if probe:
        slots = barrier_slots(context) or count
        check_probe(probe_executors(context, max(count, slots), task.python, task.env), PYTHON_ADVICE)
    start = time.monotonic()
    results = run_barrier(context, count, task.worker_function(), timeout=timeout, python=task.python, env=task.env)
    return combine_rows([worker_row(result) for result in results], time.monotonic() - start)


def evaluate_row(addresses: Sequence[str], partition: int, task: Mapping[str, Any]) -> dict[str, Any]:
    """What an R barrier task (``spark_apply(barrier = TRUE)``) does: :func:`evaluate_worker` for ``partition`` in a
    fresh Python process, as one flat row (:func:`worker_row`, the columns of :func:`evaluate_columns`).

    ``addresses`` is the closure's ``barrier$address`` (every task's ``"host:port"``, in partition order),
    ``partition`` its ``barrier$partition`` (0-based) and ``task`` the list :func:`r_evaluate` hands ``launch``,
    unchanged. When the worker fails, the row is ``{"failure": <message>}``, for the task to ``stop()`` with.
    """
    job = EvaluateTask.from_dict(task)
    try:
        result = run_worker(job.worker_function(), as_int(partition, "barrier$partition"),
                            [str(a) for a in addresses], python=job.python, env=job.env)
    except WorkerError as error:
        return {"failure": error.task_failure()}
    return worker_row(result)


def evaluate_columns() -> dict[str, str]:
    """The columns of :func:`evaluate_row`'s row and their Python types (``int``, ``float``, ``str``), in order."""
    return {name: kind.__name__ for name, kind in EVALUATE_COLUMNS.items()}


def r_evaluate(workers: int, board: str | os.PathLike | None, default_parallelism: int, task_cpus: int | str,
               dynamic_allocation: bool | str, driver_host: str | None, launch: Callable[[dict[str, Any]], Any],
               probe: Callable[[], Any] | None = None, *, model: Any, local_master: bool = True,
               on_retry: Callable[[str], Any] | None = None, **options: Any) -> dict[str, Any]:
    """The driver's part of a Spark evaluation launched from R with ``sparklyr::spark_apply(barrier = TRUE)``.

    The same call as :func:`alexnet.launch.spark.r_train`, so that R drives both through one function. What the R
    side passes: ``workers``, ``board``; ``default_parallelism``, ``task_cpus`` (``spark.task.cpus``) and
    ``dynamic_allocation`` (``spark.dynamicAllocation.enabled``) as sparklyr reads them; ``driver_host`` (not
    used: the evaluation shows no progress); ``model`` (a location string, or the list ``alexnet_model()``
    returned); ``local_master`` (false on a cluster, where a model path on this machine gets a warning);
    ``on_retry`` (not used: an evaluation is not relaunched, it is quick to run again); ``launch``, an R
    function of one argument, ``task`` (a list), that runs ``spark_apply()`` with ``workers`` barrier tasks whose
    closure calls ``evaluate_row(barrier$address, barrier$partition, task)`` with ``columns =
    evaluate_columns()``, and returns the collected rows (a data frame), or ``list(failure = <the error's
    message>)`` when the stage failed (returned, not raised: an R error reaching Python is shortened);
    ``probe`` (optional), an R function of no arguments returning one row per executor task as
    :func:`alexnet.launch.probe_task.check_python` makes them. ``options``: ``crops``, ``batch_size``,
    ``cache_dir``, ``fetch_workers``, ``python``, ``env``.

    Makes the checks of :func:`plan_evaluation`, runs ``probe`` and ``launch``, and returns what
    :func:`alexnet_spark_evaluate` returns.
    """
    from .spark import R_ADVICE, slots_from

    task = plan_evaluation(model, workers, board, slots_from(default_parallelism, task_cpus, dynamic_allocation),
                           local_master=bool(local_master), **options)

    def records(value: Any) -> list[dict[str, Any]]:
        if hasattr(value, "to_dict"):  # a data frame, as pandas
            return list(value.to_dict(orient="records"))
        return [dict(row) for row in value]

    if probe is not None:
        check_probe(records(probe()), R_ADVICE)
    start = time.monotonic()
    try:
        value = launch(task.to_dict())
    except AlexnetError:
        raise
    except Exception as error:  # a failure of Spark, through R
        raise failure_of(error, task.workers) from None
    if isinstance(value, Mapping) and "failure" in value:
        raise failure_of(RuntimeError(str(value["failure"])), task.workers)
    return combine_rows(records(value), time.monotonic() - start)
