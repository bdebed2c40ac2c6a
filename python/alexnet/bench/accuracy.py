"""The ``time_to_accuracy`` stage: the paper's recipe against the package's defaults, in wall time to an accuracy.

Two recipes train AlexNet one after the other with :func:`alexnet.train.api.alexnet_train`, on the same images,
from the same seed (so from the same initial weights, over the same batches in the same order):

- ``paper``: float32, every epoch at the final image size, the rate fixed at 0.01 (``lr_scaling = "none"``);
- ``defaults``: what ``alexnet_train`` does when left alone: the precision the hardware has (``precision``
  ``None``, unless the benchmark is given one), progressive image sizes ending at the final size
  (:func:`alexnet.train.schedule.progressive_sizes`), and the rate scaled linearly with the global batch
  (``lr_scaling = "linear"``).

Each runs ``max_epochs`` epochs in full, with no early stop, so that their accuracies after the same number of
epochs compare. On a small data set the validation accuracy of such short runs swings from one epoch to the next
(by 10 to 30 points on the default synthetic data), so each recipe's best accuracy is reported beside its final
one, and the accuracy difference after the same epochs is best read over several runs.

A Keras callback (:class:`alexnet.bench.clock.EpochClock`) records the wall time from the start of training to the
end of each epoch (validation included); the validation accuracy of each epoch comes from the history. The wall
time to ``target_accuracy`` is the clock at the end of the first epoch whose top-1 validation accuracy reaches it.

The images: those of ``data`` with its validation images, or a synthetic ImageNet written for the stage (see
:func:`accuracy_data`).
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import MIN_IMAGE_SIZE, as_image_size, as_int, as_number, as_strings
from ..errors import AlexnetError
from .stages import ACCURACY_TARGETS

logger = logging.getLogger(__name__)

#: The recipes, in the order they train.
RECIPES = ("paper", "defaults")
#: The learning rate both recipes start from: the paper's, for a batch of 128.
PAPER_LEARNING_RATE = 0.01
#: A synthetic image's long side, as a multiple of the final training size: ImageNet's photos are about 500
#: pixels for the paper's 224, so decoding weighs against the model here as it does on ImageNet.
SOURCE_SIDE_FACTOR = 500 / 224


@dataclass(frozen=True)
class AccuracyPlan:
    """The ``time_to_accuracy`` stage's settings, checked."""

    target_accuracy: float
    max_epochs: int
    image_size: int
    batch_size: int
    dense_units: int
    classes: int
    images_per_class: int
    val_per_class: int
    precision: str | None
    seed: int

    def settings(self) -> dict[str, Any]:
        """The settings recorded in the result."""
        return {"target_accuracy": self.target_accuracy, "max_epochs": self.max_epochs,
                "image_size": self.image_size, "batch_size": self.batch_size, "dense_units": self.dense_units,
                "classes": self.classes, "images_per_class": self.images_per_class,
                "val_per_class": self.val_per_class, "precision": self.precision, "seed": self.seed,
                "learning_rate": PAPER_LEARNING_RATE}


def check_accuracy_plan(arguments: Mapping[str, Any], precision: str | None, seed: int) -> AccuracyPlan:
    """The stage's arguments of ``alexnet_benchmark`` checked: an :class:`AlexnetError` naming the one to change."""
    a = arguments
    target = as_number(a["target_accuracy"], "target_accuracy")
    if not 0.0 <= target <= 1.0:
        raise AlexnetError(f"`target_accuracy` = {target} is not an accuracy: give a share of the validation images "
                           "between 0 and 1 (0.6 for 60% top-1).")
    max_epochs = as_int(a["max_epochs"], "max_epochs", 1)
    image_size = as_image_size(a["accuracy_image_size"], "accuracy_image_size")
    return AccuracyPlan(target, max_epochs, image_size, as_int(a["accuracy_batch_size"], "accuracy_batch_size", 1),
                        as_int(a["accuracy_dense_units"], "accuracy_dense_units", 1),
                        as_int(a["accuracy_classes"], "accuracy_classes", 2),
                        as_int(a["accuracy_images_per_class"], "accuracy_images_per_class", 1),
                        as_int(a["accuracy_val_per_class"], "accuracy_val_per_class", 1), precision, seed)


# -- the images -----------------------------------------------------------------------------------------------


def _tree_data(root: str | os.PathLike) -> dict[str, Any]:
    from ..data.imagenet import read_imagenet

    tree = read_imagenet(root)
    files, labels = tree.training_files()
    index = {c.id: c.index for c in tree.categories}
    return {"image": files, "label": labels, "num_classes": len(tree.categories),
            "val_image": list(tree.val_files), "val_label": [index[w] for w in tree.val_labels],
            "class_ids": [c.id for c in tree.categories], "class_names": [c.name or c.id for c in tree.categories]}


def accuracy_data(data: Mapping[str, Any] | str | os.PathLike | None, plan: AccuracyPlan,
                  workdir: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stage's images as ``alexnet_train``'s ``data``, and their description.

    ``data`` is a partition with validation images (``val_image`` and ``val_label`` or ``val_category``), an
    ImageNet folder with a validation set, or ``None``: a synthetic ImageNet of ``plan.classes`` categories,
    ``plan.images_per_class`` training and ``plan.val_per_class`` validation images each, drawn with their long
    side at :data:`SOURCE_SIDE_FACTOR` times the final size. Every image of ``data`` is used; those a plain
    ``decode_jpeg`` cannot read are left out (and counted in ``skipped``). Raises :class:`AlexnetError` when
    there are no validation images.
    """
    from ..input.inputs import training_data
    from ..input.scan import scan_images

    if data is None:
        from ..data.synthetic import imagenet_synthetic

        dest = Path(workdir) / "accuracy-imagenet"
        side = max(MIN_IMAGE_SIZE, round(plan.image_size * SOURCE_SIDE_FACTOR))
        imagenet_synthetic(dest, classes=plan.classes, images_per_class=plan.images_per_class,
                           val_per_class=plan.val_per_class, seed=plan.seed, max_side=side)
        train_data: Mapping[str, Any] = _tree_data(dest)
        source = (f"synthetic ImageNet: {plan.classes} categories of {plan.images_per_class} training and "
                  f"{plan.val_per_class} validation images, long side {side} pixels")
    elif isinstance(data, (str, os.PathLike)):
        train_data, source = _tree_data(data), f"ImageNet tree in {os.fspath(data)}"
    elif isinstance(data, Mapping):
        train_data, source = data, "the images of `data`"
        if "label" not in data and "categories" not in data:
            train_data = {**data, "categories": sorted(set(as_strings(data.get("category"))))}
    else:
        raise AlexnetError(f"`data` must be a partition (imagenet_partition()'s result), an ImageNet folder or None, "
                           f"not a {type(data).__name__}.")
    td = training_data(train_data)
    if not td.val_files:
        raise AlexnetError(f"The time_to_accuracy stage measures validation accuracy, but {source} has no "
                           "validation images: fetch the partition with validation = TRUE, use an ImageNet folder "
                           "with a val folder, or leave `data` NULL for a synthetic ImageNet.")
    bad_train = set(scan_images(td.files, jpeg_only=True))
    bad_val = set(scan_images(td.val_files, jpeg_only=True))
    train = [(f, y) for f, y in zip(td.files, td.labels, strict=True) if f not in bad_train]
    val = [(f, y) for f, y in zip(td.val_files, td.val_labels, strict=True) if f not in bad_val]
    if not train or not val:
        raise AlexnetError(f"{source} has no readable JPEG {'training' if not train else 'validation'} image: "
                           "nothing to train on.")
    ready = {"image": [f for f, _ in train], "label": [y for _, y in train], "num_classes": td.num_classes,
             "val_image": [f for f, _ in val], "val_label": [y for _, y in val],
             "class_ids": list(td.class_ids), "class_names": list(td.class_names)}
    described = {"source": source, "num_classes": td.num_classes, "train_images": len(train),
                 "val_images": len(val), "skipped": len(bad_train) + len(bad_val),
                 "chance_accuracy": round(1 / td.num_classes, 4)}
    return ready, described


# -- the recipes ----------------------------------------------------------------------------------------------


def _reached(accuracies: Sequence[float], target: float) -> int | None:
    """The 1-based epoch at which ``accuracies`` first reach ``target``; None when they never do."""
    return next((epoch for epoch, value in enumerate(accuracies, 1) if value >= target), None)


def run_recipe(recipe: str, data: Mapping[str, Any], plan: AccuracyPlan, *, parallel: int | None = None
               ) -> dict[str, Any]:
    """Train one recipe (``"paper"`` or ``"defaults"``) for ``plan.max_epochs`` epochs; what it reached, when.

    Returns ``recipe``, ``precision`` and ``precision_reason`` (as the history reports them), ``image_sizes``
    and ``image_size_epochs``, ``lr_scaling``, ``learning_rate`` (the rate reached after any warm-up),
    ``epoch_image_size``, ``epoch_learning_rate``, ``val_accuracy`` and ``seconds`` (cumulative wall time) per
    epoch, ``seconds_to_target`` and ``epochs_to_target`` (``None`` when the target was never reached),
    ``final_accuracy`` (after ``max_epochs``), ``best_accuracy`` (of any epoch), ``training_seconds`` (the whole
    ``alexnet_train`` call, setup included) and ``images_per_second``.
    """
    from ..tfimport import keras
    from ..train.api import alexnet_train
    from ..train.schedule import progressive_sizes
    from .clock import EpochClock

    recipe_settings: dict[str, Any]
    if recipe == "paper":
        recipe_settings = {"image_size": [plan.image_size], "precision": "float32", "lr_scaling": "none",
                           "lr_schedule": "plateau", "label_smoothing": 0.0}
    elif recipe == "defaults":
        recipe_settings = {"image_size": list(progressive_sizes(plan.image_size, plan.max_epochs)),
                           "precision": plan.precision}
    else:
        raise AlexnetError(f"Unknown recipe {recipe!r}: use one of {', '.join(RECIPES)}.")
    keras.backend.clear_session()
    gc.collect()
    clock = EpochClock()
    logger.info("time_to_accuracy: the %s recipe, %d epochs at sizes %s.", recipe, plan.max_epochs,
                recipe_settings["image_size"])
    began = time.perf_counter()
    history = alexnet_train(batch_size=plan.batch_size, epochs=plan.max_epochs, data=data, parallel=parallel,
                            learning_rate=PAPER_LEARNING_RATE, validation=True, cache=True, check_images=False,
                            seed=plan.seed, verbose=0, dense_units=plan.dense_units, callbacks=[clock],
                            **recipe_settings)
    total = time.perf_counter() - began
    params, metrics, schedule = history["params"], history["metrics"], history["schedule"]
    accuracies = [float(v) for v in metrics.get("val_accuracy", [])]
    seconds = [round(s, 3) for s in clock.seconds]
    if len(accuracies) != plan.max_epochs or len(seconds) != plan.max_epochs:
        raise AlexnetError(f"The {recipe} recipe recorded {len(accuracies)} validation accuracies and {len(seconds)} "
                           f"epoch times for {plan.max_epochs} epochs: it did not validate after every epoch.")
    epoch = _reached(accuracies, plan.target_accuracy)
    return {
        "recipe": recipe,
        "precision": params["precision"],
        "precision_reason": params["precision_reason"],
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
        "training_seconds": round(total, 3),
        "images_per_second": float(history["images_per_second"]),
    }


def compare(paper: Mapping[str, Any], defaults: Mapping[str, Any], plan: AccuracyPlan, *,
            bfloat16: bool) -> dict[str, Any]:
    """The defaults against the paper: the time ratio and the accuracy difference, each against its target.

    ``time_ratio``: defaults' wall time to the target over the paper's, against the target for hardware with
    bfloat16 (``bfloat16``) or without (:data:`alexnet.bench.stages.ACCURACY_TARGETS`). When only one recipe
    reached the target its ``value`` is ``None`` and ``met`` says whether it was the defaults; when neither did,
    both are ``None``. ``accuracy_difference``: the defaults' validation accuracy after ``max_epochs`` minus the
    paper's.
    """
    name = "time_ratio_bfloat16" if bfloat16 else "time_ratio"
    _, bound, time_bound = ACCURACY_TARGETS[name]
    fast, slow = defaults["seconds_to_target"], paper["seconds_to_target"]
    if fast is not None and slow:
        value: float | None = round(fast / slow, 3)
        met: bool | None = value <= bound
    else:
        value, met = None, (None if fast is None and slow is None else fast is not None)
    difference = round(defaults["final_accuracy"] - paper["final_accuracy"], 4)
    _, minimum, difference_bound = ACCURACY_TARGETS["accuracy_difference"]
    hardware = "bfloat16 hardware" if bfloat16 else "hardware without bfloat16"
    return {
        "time_ratio": {"what": f"defaults / paper: wall time to {plan.target_accuracy:g} validation accuracy "
                               f"({hardware})", "value": value, "target": bound, "bound": time_bound, "met": met},
        "accuracy_difference": {"what": f"defaults - paper: validation accuracy after {plan.max_epochs} epochs",
                                "value": difference, "target": minimum, "bound": difference_bound,
                                "met": difference >= minimum},
    }


def time_to_accuracy(data: Mapping[str, Any], described: Mapping[str, Any], plan: AccuracyPlan, *,
                     parallel: int | None = None) -> dict[str, Any]:
    """Both recipes on ``data`` (from :func:`accuracy_data`), one after the other; the stage's result.

    Returns ``settings`` (:meth:`AccuracyPlan.settings`), ``data`` (``described``), ``recipes`` (``paper`` and
    ``defaults``, each as :func:`run_recipe` returns it), ``time_ratio`` and ``accuracy_difference`` (the values
    of :func:`compare`'s), ``targets`` (:func:`compare`'s result) and ``seconds`` (the whole stage).
    """
    began = time.perf_counter()
    recipes = {name: run_recipe(name, data, plan, parallel=parallel) for name in RECIPES}
    targets = compare(recipes["paper"], recipes["defaults"], plan,
                      bfloat16=recipes["defaults"]["precision"] == "bfloat16")
    for name, record in recipes.items():
        logger.info("time_to_accuracy, %s: %s to %.2f, final accuracy %.3f after %d epochs (%s, sizes %s).", name,
                    "never" if record["seconds_to_target"] is None else f"{record['seconds_to_target']:.0f} s",
                    plan.target_accuracy, record["final_accuracy"], plan.max_epochs, record["precision"],
                    record["image_sizes"])
    return {"settings": plan.settings(), "data": dict(described), "recipes": recipes,
            "time_ratio": targets["time_ratio"]["value"],
            "accuracy_difference": targets["accuracy_difference"]["value"], "targets": targets,
            "seconds": round(time.perf_counter() - began, 3)}
