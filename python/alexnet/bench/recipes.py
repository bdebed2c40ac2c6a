"""The recipes of the ``time_to_accuracy`` stage, each trained once from one seed (see :mod:`.accuracy`).

A recipe is ``"paper"``, ``"defaults"`` or ``"defaults+<lever set>"``: the defaults with the training settings of a
lever set (:func:`alexnet.bench.lever_sets.parse_lever_set`: ``"defaults+local_sgd"``,
``"defaults+sync_every=4"``). With ``accuracy_workers`` above one, a recipe trains as that many workers, each a
process on CPUs of its own with its share of the categories (training and validation images), joined by the link
``accuracy_link`` names (loopback, or a shaped link of network namespaces: :mod:`.link`) with
``MultiWorkerMirroredStrategy`` (:func:`alexnet.bench.cluster.run_workers`): the chief's history and clock are the
recipe's, and every validation counts every worker's images once.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import AlexnetError
from .link import LinkSpec, parse_link

logger = logging.getLogger(__name__)

#: The learning rate every recipe starts from: the paper's, for a batch of 128.
PAPER_LEARNING_RATE = 0.01
#: The prefix of a recipe that adds a lever set to the defaults.
LEVERED = "defaults+"


def recipe_settings(recipe: str, final_size: int, max_epochs: int, precision: str | None = None) -> dict[str, Any]:
    """``alexnet_train``'s settings of ``recipe`` beyond those every recipe shares (the defaults compute in
    ``precision``), for ``final_size`` pixels after ``max_epochs`` epochs."""
    from ..train.schedule import progressive_sizes
    from .lever_sets import parse_lever_set

    if recipe == "paper":  # as the paper trained: float32, one size, 0.01 divided by 10 on a plateau, hard labels
        return {"image_size": [final_size], "precision": "float32", "lr_scaling": "none",
                "lr_schedule": "plateau", "label_smoothing": 0.0}
    if recipe == "defaults":  # alexnet_train's defaults, with progressive resizing given
        return {"image_size": list(progressive_sizes(final_size, max_epochs)), "precision": precision}
    if recipe.startswith(LEVERED):
        return {**recipe_settings("defaults", final_size, max_epochs, precision),
                **parse_lever_set(recipe[len(LEVERED):])[1]}
    raise AlexnetError(f"Unknown recipe {recipe!r}: use paper, defaults or defaults+<lever set>.")


def split_data(data: Mapping[str, Any], workers: int) -> list[dict[str, Any]]:
    """``data`` shared out among ``workers`` by category (label modulo the workers), training and validation
    images alike, each share keeping every label global (and the ids and names of every class)."""
    shares = []
    for worker in range(workers):
        share: dict[str, Any] = {"num_classes": data["num_classes"],  # and the classes' ids, for the model's card
                                 **{k: list(data[k]) for k in ("class_ids", "class_names") if data.get(k) is not None}}
        for prefix in ("", "val_"):
            labels = list(data.get(prefix + "label") or [])
            keep = [i for i, label in enumerate(labels) if int(label) % workers == worker]
            share[prefix + "image"] = [data[prefix + "image"][i] for i in keep]
            share[prefix + "label"] = [int(labels[i]) for i in keep]
        shares.append(share)
    return shares


def _train(settings: Mapping[str, Any], data: Mapping[str, Any], workers: int, cpus: Sequence[int],
           log_dir: str | os.PathLike | None, link: LinkSpec) -> tuple[dict[str, Any], list[float]]:
    """The history and the epoch clock of one training: in this process, or as ``workers`` workers joined by
    ``link`` (the chief's)."""
    if workers <= 1:
        from ..tfimport import keras
        from ..train.api import alexnet_train
        from .clock import EpochClock

        keras.backend.clear_session()
        gc.collect()
        clock = EpochClock()
        history = alexnet_train(data=data, callbacks=[clock], **settings)
        return history, list(clock.seconds)
    from .cluster import run_workers, split_cpus
    from .scaling_worker import train_worker

    tasks = [{"settings": dict(settings), "data": share} for share in split_data(data, workers)]
    results = run_workers(train_worker, tasks, link=link, cpus=split_cpus(cpus, workers),
                          log_dir=log_dir)
    return results[0]["history"], list(results[0]["epoch_seconds"])


def _reached(accuracies: Sequence[float], target: float) -> int | None:
    """The 1-based epoch at which ``accuracies`` first reach ``target``; None when they never do."""
    return next((epoch for epoch, value in enumerate(accuracies, 1) if value >= target), None)


def late_drop(accuracies: Sequence[float]) -> float:
    """The largest fall of validation accuracy from one epoch to the next in the second half of the epochs (from
    the epoch before the half onwards); 0 when it never falls."""
    half = len(accuracies) // 2
    falls = [before - after for before, after in zip(accuracies[max(half - 1, 0):], accuracies[half:], strict=False)]
    return round(max([0.0, *falls]), 4)


def run_recipe(recipe: str, data: Mapping[str, Any], plan: Any, *, seed: int = 0, precision: str | None = None,
               parallel: int | None = None, model_dir: str | os.PathLike | None = None,
               cpus: Sequence[int] = ()) -> dict[str, Any]:
    """Train one recipe for ``plan.max_epochs`` epochs from ``seed`` (``plan``: the stage's
    :class:`~.accuracy.AccuracySettings`), on ``plan.accuracy_workers`` workers sharing ``cpus``, joined by
    ``plan.accuracy_link``; what it reached, when.

    Returns ``recipe``, ``seed``, ``workers``, ``link`` (what joined the workers: ``plan.accuracy_link``'s name;
    ``None`` for one worker), ``precision`` and ``precision_reason`` (as the history reports them),
    ``communication``, ``adapted`` (with ``adapt_communication``: the settings the run took, as a lever set; else
    empty), ``image_sizes`` and ``image_size_epochs``, ``lr_scaling``, ``lr_schedule``,
    ``label_smoothing``, ``learning_rate`` (the peak), ``epoch_image_size``, ``epoch_learning_rate``,
    ``val_accuracy`` and ``seconds`` (cumulative wall time) per epoch, ``seconds_to_target`` and
    ``epochs_to_target`` (``None`` when the target was never reached), ``final_accuracy`` (after ``max_epochs``),
    ``best_accuracy`` (of any epoch), ``late_drop`` (:func:`late_drop`), ``training_seconds`` (the whole training,
    setup included) and ``images_per_second``. With ``model_dir`` the final model is saved there and scored on every
    validation image at its training size and 32 pixels above (``final_eval_accuracy``,
    ``final_eval_accuracy_plus32``).
    """
    from .lever_sets import lever_text

    workers = int(getattr(plan, "accuracy_workers", 1) or 1)
    link = parse_link(getattr(plan, "accuracy_link", "loopback"))
    chosen = recipe_settings(recipe, plan.accuracy_image_size, plan.max_epochs, precision)
    logger.info("the %s recipe from seed %d, %d epochs at sizes %s%s.", recipe, seed, plan.max_epochs,
                chosen["image_size"], f", {workers} workers over {link.describe()}" if workers > 1 else "")
    settings = {"batch_size": plan.accuracy_batch_size, "epochs": plan.max_epochs, "parallel": parallel,
                "learning_rate": PAPER_LEARNING_RATE, "validation": True, "cache": True, "check_images": False,
                "seed": seed, "verbose": 0, "dense_units": plan.accuracy_dense_units,
                "model_dir": None if model_dir is None else os.fspath(model_dir), **chosen}
    began = time.perf_counter()
    history, clock = _train(settings, data, workers, cpus,
                            None if model_dir is None else Path(model_dir).parent / f"logs-{recipe}-{seed}", link)
    total = time.perf_counter() - began
    params, metrics, schedule = history["params"], history["metrics"], history["schedule"]
    accuracies = [float(v) for v in metrics.get("val_accuracy", [])]
    seconds = [round(s, 3) for s in clock]
    if len(accuracies) != plan.max_epochs or len(seconds) != plan.max_epochs:
        raise AlexnetError(f"The {recipe} recipe recorded {len(accuracies)} validation accuracies and {len(seconds)} "
                           f"epoch times for {plan.max_epochs} epochs: it did not validate after every epoch.")
    epoch = _reached(accuracies, plan.target_accuracy)
    record = {
        "recipe": recipe,
        "seed": seed,
        "workers": workers,
        "link": link.name if workers > 1 else None,
        "precision": params["precision"],
        "precision_reason": params["precision_reason"],
        "communication": params.get("communication"),
        "adapted": lever_text(params.get("adapted_settings") or {}),
        "image_sizes": [int(s) for s in params["image_size"]],
        "image_size_epochs": [int(e) for e in params["image_size_epochs"]],
        "lr_scaling": params["lr_scaling"],
        "lr_schedule": params["lr_schedule"],
        "label_smoothing": float(params["label_smoothing"]),
        "learning_rate": float(params["peak_learning_rate"]),
        "epoch_image_size": [int(s) for s in schedule["image_size"]],
        "epoch_learning_rate": [float(r) for r in schedule["learning_rate"]],
        "val_accuracy": accuracies,
        "seconds": seconds,
        "epochs_to_target": epoch,
        "seconds_to_target": None if epoch is None else seconds[epoch - 1],
        "final_accuracy": accuracies[-1],
        "best_accuracy": max(accuracies),
        "late_drop": late_drop(accuracies),
        "training_seconds": round(total, 3),
        "images_per_second": float(history["images_per_second"] or "nan"),  # None: no step ran
    }
    if model_dir is not None:
        record.update(_final_scores(model_dir, data, record["image_sizes"][-1], parallel))
    return record


def _final_scores(model_dir: str | os.PathLike, data: Mapping[str, Any], size: int,
                  parallel: int | None) -> dict[str, float]:
    """The saved final model's top-1 accuracy on every validation image, at ``size`` and 32 pixels above."""
    from ..model.evaluate import alexnet_evaluate

    scores = {}
    for key, side in (("final_eval_accuracy", size), ("final_eval_accuracy_plus32", size + 32)):
        scores[key] = round(float(alexnet_evaluate(model_dir, data, image_size=side, parallel=parallel)
                                  ["top1_accuracy"]), 4)
    return scores
