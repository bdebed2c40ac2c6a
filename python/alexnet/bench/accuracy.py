"""The ``time_to_accuracy`` stage: the paper's recipe against the package's defaults, in wall time to an accuracy.

Two recipes train AlexNet with :func:`alexnet.train.api.alexnet_train`, on the same images, from the same seeds
(so from the same initial weights, over the same batches in the same order):

- ``paper``: as the AlexNet paper trained: float32, every epoch at the final image size, the rate 0.01
  (``lr_scaling = "none"``) divided by 10 when validation accuracy stops improving (``lr_schedule =
  "plateau"``), hard labels (``label_smoothing = 0``);
- ``defaults``: what ``alexnet_train`` does when left alone: the precision measured to train faster here
  (``precision`` ``None``, unless the benchmark is given one), progressive image sizes ending at the final size
  (:func:`alexnet.train.schedule.progressive_sizes`), the rate scaled linearly with the global batch and brought
  down to zero at the last step, labels smoothed by 0.1.

Each runs ``max_epochs`` epochs in full, with no early stop, so that their accuracies after the same number of
epochs compare. One run of a small data set is a lottery (validation accuracy of short runs swings by 10 to 30
points from epoch to epoch, more with a constant rate), so each recipe trains from ``repeats`` seeds, the two
recipes alternating, and the verdict is on the medians; the range and every seed's curve are kept beside them,
with each run's largest epoch-to-epoch fall in the second half (:func:`late_drop`).

A Keras callback (:class:`alexnet.bench.clock.EpochClock`) records the wall time from the start of training to the
end of each epoch (validation included); the validation accuracy of each epoch comes from the history. The wall
time to ``target_accuracy`` is the clock at the end of the first epoch whose top-1 validation accuracy reaches it.
Each final model is then scored on every validation image at its training size and 32 pixels above.

The images: those of ``data`` with its validation images, or a synthetic ImageNet written for the stage (see
:func:`accuracy_data`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import MIN_IMAGE_SIZE, as_strings
from ..declare import declaration
from ..declare.declaration import setting
from ..errors import AlexnetError
from .images import SOURCE_SIDE_FACTOR
from .link import can_delay, can_shape, link_setting, parse_link
from .recipes import LEVERED, PAPER_LEARNING_RATE, _reached, late_drop, run_recipe
from .stages import ACCURACY_TARGETS, warn_unused

__all__ = ["PAPER_LEARNING_RATE", "RECIPES", "AccuracySettings", "_reached", "accuracy_data", "compare", "late_drop",
           "spread", "summarize", "time_to_accuracy"]

logger = logging.getLogger(__name__)

#: The recipes every run of the stage trains, in the order they train (then one per lever set asked for).
RECIPES = ("paper", "defaults")


@dataclass(frozen=True)
class AccuracySettings:
    """The ``time_to_accuracy`` stage's own settings (a group of the benchmark's declaration, see
    :mod:`alexnet.bench.plan`): what it trains towards, for how long, and its synthetic images."""

    target_accuracy: float = setting(0.75, "number", "the top-1 validation accuracy to reach (a "
                                     "share between 0 and 1)", minimum=0.0, maximum=1.0)
    max_epochs: int = setting(8, "count", "epochs each recipe trains in full (no early stop)",
                              minimum=1)
    repeats: int = setting(3, "count", "seeds each recipe trains from (`seed` and those after "
                           "it); the verdict is on the medians", minimum=1)
    accuracy_classes: int = setting(10, "count", "categories of its synthetic ImageNet (used "
                                    "when `data` is unset)", minimum=2)
    accuracy_images_per_class: int = setting(150, "count", "training images per category of its "
                                             "synthetic ImageNet", minimum=1)
    accuracy_val_per_class: int = setting(50, "count", "validation images per category of its "
                                          "synthetic ImageNet", minimum=1)
    accuracy_image_size: int = setting(176, "count", "the final image size (the defaults train "
                                       "at about half, three quarters and all of it)", minimum=MIN_IMAGE_SIZE)
    accuracy_batch_size: int = setting(128, "count", "images per batch (128: the batch the "
                                       "paper's rate is for)", minimum=1)
    accuracy_dense_units: int = setting(512, "count", "units of the two hidden dense layers",
                                        minimum=1)
    accuracy_workers: int = setting(1, "count", "workers each recipe trains on: with more than one, each a process "
                                    "on CPUs of its own with its share of the categories, joined by `accuracy_link`",
                                    minimum=1)
    accuracy_levers: tuple[str, ...] | None = setting(
        None, "words", "lever sets (as the scaling stage's `levers`) each trained as a recipe of its own: the "
        "defaults with those settings (\"packed\", \"sync_every=4\"); those that train alike, or as the defaults "
        "(today), are trained once, every name keeping its results", optional=True, metavar="LEVERS")
    accuracy_link: str = setting("loopback", "string", "the link joining the workers when there are several: "
                                 "loopback (127.0.0.1), or a rate as tc writes it (1gbit, 100mbit; /0.5ms adds a round "
                                 "trip), each worker in a network namespace of its own (root only)",
                                 check=link_setting, metavar="LINK")

    def recipes(self) -> tuple[str, ...]:
        """The recipes reported, in order: the paper's, the defaults, then the defaults with each lever set (a lever
        set named twice, once)."""
        return tuple(dict.fromkeys((*RECIPES, *(LEVERED + word for word in self.accuracy_levers or ()))))

    def alike(self) -> dict[str, str]:
        """The recipes of :meth:`recipes` that train as one before them, each with the one it trains as
        (:func:`~.lever_sets.alike_lever_sets`, the defaults among them as the lever set of no settings):
        ``defaults+allreduce_precision=bfloat16`` as ``defaults+bfloat16``, ``defaults+today`` and
        ``defaults+accumulate_steps=1`` as ``defaults``. They are trained once, as the first."""
        from .lever_sets import alike_lever_sets, parse_lever_set

        levered = [(RECIPES[1], {}),
                   *((LEVERED + word, parse_lever_set(word)[1]) for word in self.accuracy_levers or ())]
        return {name: first for first, _, names in alike_lever_sets(levered) for name in names[1:]}

    def check(self, common: Any) -> None:
        """The lever sets readable and a CPU for every worker, when the stage runs."""
        from .lever_sets import parse_lever_set

        if "time_to_accuracy" not in common.stages:
            warn_unused(self, "time_to_accuracy")
            return
        for word in self.accuracy_levers or ():
            parse_lever_set(word)
        link = parse_link(self.accuracy_link)
        if link.shaped and self.accuracy_workers < 2:
            raise AlexnetError(f"`accuracy_link` = {link.name!r} joins workers, but `accuracy_workers` = 1: set "
                               "`accuracy_workers` = 2 or more, or leave `accuracy_link` as \"loopback\".")
        reason = can_shape() if link.shaped else None
        if reason is not None:
            raise AlexnetError(f"`accuracy_link` = {link.name!r}, but {reason}: run the benchmark as root, or use "
                               "`accuracy_link` = \"loopback\".")
        reason = can_delay() if link.rtt_ms is not None else None
        if reason is not None:
            raise AlexnetError(f"`accuracy_link` = {link.name!r}, but {reason}.")
        if self.accuracy_workers > int(common.cores or 1):
            raise AlexnetError(f"`accuracy_workers` = {self.accuracy_workers} but the benchmark has {common.cores} "
                               "core(s): every worker gets CPUs of its own; use fewer workers or more `cores`.")

    def record(self, precision: str | None, seed: int) -> dict[str, Any]:
        """The settings recorded in the stage's result, with the ``precision`` and first ``seed`` it trained from."""
        return {**declaration.to_dict(self), "precision": precision, "seed": seed,
                "learning_rate": PAPER_LEARNING_RATE}


# -- the images -----------------------------------------------------------------------------------------------


def _tree_data(root: str | os.PathLike) -> dict[str, Any]:
    from ..data.imagenet import read_imagenet

    tree = read_imagenet(root)
    files, labels = tree.training_files()
    index = {c.id: c.index for c in tree.categories}
    return {"image": files, "label": labels, "num_classes": len(tree.categories),
            "val_image": list(tree.val_files), "val_label": [index[w] for w in tree.val_labels],
            "class_ids": [c.id for c in tree.categories], "class_names": [c.name or c.id for c in tree.categories]}


def accuracy_data(data: Mapping[str, Any] | str | os.PathLike | None, plan: AccuracySettings, seed: int,
                  workdir: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stage's images as ``alexnet_train``'s ``data``, and their description.

    ``data`` is a partition with validation images (``val_image`` and ``val_label`` or ``val_category``), an
    ImageNet folder with a validation set, or ``None``: a synthetic ImageNet (from ``seed``) of
    ``plan.accuracy_classes`` categories, ``plan.accuracy_images_per_class`` training and
    ``plan.accuracy_val_per_class`` validation images each, drawn with their long
    side at :data:`SOURCE_SIDE_FACTOR` times the final size. Every image of ``data`` is used; those a plain
    ``decode_jpeg`` cannot read are left out (and counted in ``skipped``). Raises :class:`AlexnetError` when
    there are no validation images.
    """
    from ..input.inputs import training_data
    from ..input.scan import scan_images

    if data is None:
        from ..data.synthetic import imagenet_synthetic

        dest = Path(workdir) / "accuracy-imagenet"
        side = max(MIN_IMAGE_SIZE, round(plan.accuracy_image_size * SOURCE_SIDE_FACTOR))
        imagenet_synthetic(dest, classes=plan.accuracy_classes, images_per_class=plan.accuracy_images_per_class,
                           val_per_class=plan.accuracy_val_per_class, seed=seed, max_side=side)
        train_data: Mapping[str, Any] = _tree_data(dest)
        source = (f"synthetic ImageNet: {plan.accuracy_classes} categories of {plan.accuracy_images_per_class} "
                  f"training and {plan.accuracy_val_per_class} validation images, long side {side} pixels")
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
                           "validation images: fetch the partition with validation = True, use an ImageNet folder "
                           "with a val folder, or leave `data` unset for a synthetic ImageNet.")
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


#: What :func:`summarize` condenses over the seeds of a recipe.
SUMMED = ("seconds_to_target", "epochs_to_target", "final_accuracy", "best_accuracy", "late_drop",
          "final_eval_accuracy", "final_eval_accuracy_plus32")


def spread(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """``median``, ``min`` and ``max`` of ``values`` (``None``, a target never reached, counts as the slowest),
    and ``count``, how many are not ``None``; a ``median`` or ``max`` that falls on a ``None`` is ``None``."""
    import math

    known = [v for v in values if v is not None]
    ordered = sorted(math.inf if v is None else float(v) for v in values)
    if not ordered:
        return {"median": None, "min": None, "max": None, "count": 0}
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    def finite(value: float) -> float | None:
        return None if math.isinf(value) else round(value, 4)

    return {"median": finite(median), "min": finite(ordered[0]), "max": finite(ordered[-1]), "count": len(known)}


def summarize(recipe: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A recipe over its seeds: what it trained with (from the first run), each of :data:`SUMMED` as
    :func:`spread`, and ``runs``, every seed's :func:`run_recipe` record."""
    first = runs[0]
    kept = ("precision", "precision_reason", "image_sizes", "image_size_epochs", "lr_scaling", "lr_schedule",
            "label_smoothing", "learning_rate", "workers", "link", "communication")
    summary: dict[str, Any] = {"recipe": recipe, **{k: first.get(k) for k in kept}, "seeds": [r["seed"] for r in runs]}
    for name in SUMMED:
        if all(name in r for r in runs):
            summary[name] = spread([r[name] for r in runs])
    summary["best_minus_final"] = spread([r["best_accuracy"] - r["final_accuracy"] for r in runs])
    summary["runs"] = [dict(r) for r in runs]
    return summary


def compare(paper: Mapping[str, Any], defaults: Mapping[str, Any], plan: AccuracySettings) -> dict[str, Any]:
    """The defaults against the paper recipe, on the medians over the seeds (:func:`summarize`'s), each against
    its target (:data:`alexnet.bench.stages.ACCURACY_TARGETS`).

    ``time_ratio``: the defaults' median wall time to the target over the paper recipe's; when only one recipe
    reached it (in the median) its ``value`` is ``None`` and ``met`` says whether it was the defaults; when
    neither did, both are ``None``. ``accuracy_difference``: the defaults' median final accuracy minus the paper
    recipe's. ``final_vs_best``: the defaults' median of (final accuracy minus best accuracy), per seed.
    """
    def target(name: str, value: float | None, what: str, met: bool | None = None) -> dict[str, Any]:
        _, bound, side = ACCURACY_TARGETS[name]
        if met is None and value is not None:
            met = value <= bound if side == "at most" else value >= bound
        return {"what": what, "value": value, "target": bound, "bound": side, "met": met}

    fast, slow = defaults["seconds_to_target"]["median"], paper["seconds_to_target"]["median"]
    seeds = len(defaults["runs"])
    if fast is not None and slow:
        ratio = target("time_ratio", round(fast / slow, 3),
                       f"defaults / paper: median wall time to {plan.target_accuracy:g} accuracy ({seeds} seeds)")
    else:
        ratio = target("time_ratio", None, f"defaults / paper: median wall time to {plan.target_accuracy:g} "
                       f"accuracy ({seeds} seeds)", None if fast is None and slow is None else fast is not None)
    difference = round(defaults["final_accuracy"]["median"] - paper["final_accuracy"]["median"], 4)
    kept = -defaults["best_minus_final"]["median"]
    return {
        "time_ratio": ratio,
        "accuracy_difference": target("accuracy_difference", difference, "defaults - paper: median validation "
                                      f"accuracy after {plan.max_epochs} epochs"),
        "final_vs_best": target("final_vs_best", round(kept, 4), "defaults: median of final - best validation "
                                "accuracy"),
    }


def time_to_accuracy(data: Mapping[str, Any], described: Mapping[str, Any], plan: AccuracySettings, *, seed: int = 0,
                     precision: str | None = None, parallel: int | None = None,
                     workdir: str | os.PathLike | None = None, cpus: Sequence[int] = ()) -> dict[str, Any]:
    """Both recipes on ``data`` (from :func:`accuracy_data`) from each of ``plan.repeats`` seeds (``seed`` and those
    after it), the recipes alternating so that both meet the same machine; the stage's result.

    Returns ``settings`` (:meth:`AccuracySettings.record`), ``data`` (``described``), ``recipes`` (``paper`` and
    ``defaults``, each as :func:`summarize` returns it), ``time_ratio``, ``accuracy_difference`` and
    ``final_vs_best`` (the values of :func:`compare`'s), ``targets`` (:func:`compare`'s result) and ``seconds``
    (the whole stage). With ``workdir`` every final model is saved under it and scored at two sizes
    (:func:`run_recipe`).

    Recipes that train alike (:meth:`AccuracySettings.alike`: ``bfloat16`` and ``allreduce_precision=bfloat16``
    among ``accuracy_levers``, or ``today``, which is the defaults) are trained once, as the first, which the log
    says: every name has its recipe and lever row, those of the others a copy of the one trained with ``same_as``
    naming it.
    """
    began = time.perf_counter()
    same = plan.alike()
    if same:
        told = {first: [first] for first in same.values()}
        for name, first in same.items():
            told[first].append(name)
        logger.info("The time_to_accuracy stage trains once the recipes that train alike, and gives each name its "
                    "results: %s.", "; ".join(f"{', '.join(names[:-1])} and {names[-1]} (trained as {names[0]})"
                                              for names in told.values()))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plan.recipes() if name not in same}
    for repeat in range(plan.repeats):
        for number, name in enumerate(runs):
            model_dir = None if workdir is None else Path(workdir) / f"model-{number}-{repeat}"
            runs[name].append(run_recipe(name, data, plan, seed=seed + repeat, precision=precision,
                                         parallel=parallel, model_dir=model_dir, cpus=cpus))
    trained = {name: summarize(name, records) for name, records in runs.items()}
    recipes = {name: trained[name] if name not in same else {**trained[same[name]], "recipe": name,
                                                              "same_as": same[name]}
               for name in plan.recipes()}
    targets = compare(recipes["paper"], recipes["defaults"], plan)
    levers = {name: {**against_defaults(recipes[name], recipes["defaults"]),
                     **({"same_as": same[name]} if name in same else {})}
              for name in recipes if name.startswith(LEVERED)}
    for name, record in trained.items():
        reached = record["seconds_to_target"]
        logger.info("time_to_accuracy, %s (%d seeds): median %s to %.2f, final accuracy %.3f (best %.3f) after %d "
                    "epochs (%s, sizes %s).", name, plan.repeats,
                    "never" if reached["median"] is None else f"{reached['median']:.0f} s", plan.target_accuracy,
                    record["final_accuracy"]["median"], record["best_accuracy"]["median"], plan.max_epochs,
                    record["precision"], record["image_sizes"])
    return {"settings": plan.record(precision, seed), "data": dict(described), "recipes": recipes,
            **{name: t["value"] for name, t in targets.items()}, "targets": targets, "levers": levers,
            "seconds": round(time.perf_counter() - began, 3)}


def against_defaults(levered: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A recipe that adds a lever set to the defaults, against the defaults, on the medians over the seeds: the epochs
    and seconds to the target of both, their final accuracies, and ``same_epochs_or_fewer``: whether the lever set
    reached the target in no more epochs than the defaults did (``None`` when the defaults never reached it)."""
    def median(record: Mapping[str, Any], name: str) -> Any:
        return (record.get(name) or {}).get("median")

    epochs, baseline = median(levered, "epochs_to_target"), median(defaults, "epochs_to_target")
    return {"epochs_to_target": epochs, "defaults_epochs_to_target": baseline,
            "seconds_to_target": median(levered, "seconds_to_target"),
            "defaults_seconds_to_target": median(defaults, "seconds_to_target"),
            "final_accuracy": median(levered, "final_accuracy"),
            "defaults_final_accuracy": median(defaults, "final_accuracy"),
            "same_epochs_or_fewer": None if baseline is None else epochs is not None and epochs <= baseline}
