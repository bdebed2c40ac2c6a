"""``alexnet_evaluate()``: top-1 and top-5 accuracy of a model over validation images, with exact counts.

The images are a data list's validation images (``val_image`` with ``val_label``, as
:func:`alexnet.imagenet_partition` returns them, or made by hand), or a board's (all of them, or share
``partition`` of ``total``, balanced by validation image count: what each Spark worker evaluates). Images that
fail the usable-image check (:func:`alexnet.input.scan.scan_images`) are left out up front and listed; every
other image is counted exactly once, and an image that still fails to decode stops the evaluation with its
name, never dropping a batch. ``crops=1`` scores the centre crop training validates with; ``crops=10``
averages the softmax over the AlexNet paper's ten views (corners, centre and their mirrors). The counts are also
kept class by class (:mod:`.class_counts`): each class's accuracy and what it is most often taken for.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..checks import as_int, as_strings, count_text, entry, some_names
from ..data.partition import check_partition
from ..declare import declaration
from ..errors import AlexnetError, BoardError
from ..progress import progress_bar
from ..result import returns_result
from .card import ModelCard
from .class_counts import ClassCounts
from .options import PROTOCOLS, BoardImagesOptions, EvaluationOptions, check_options, specs
from .saved import load_model, model_source

logger = logging.getLogger(__name__)

#: The largest k of top-k accuracy (smaller when the model has fewer classes).
TOP_K = 5


def _data_images(data: Mapping[str, Any], class_ids: Sequence[str]) \
        -> tuple[list[str], list[int], int | None, list[str] | None]:
    """The validation files and labels of ``data``, its number of classes (None when it does not say) and the ids of
    the classes its labels count (None when it does not name them, or its labels are the model's own, from
    ``val_category`` and the model's ``class_ids``)."""
    files = as_strings(data.get("val_image"), entry("data", "val_image"))
    if not files:
        said = "is empty" if "val_image" in data else "is missing"
        raise AlexnetError(f"`data` has no validation images (`val_image` {said}): fetch a partition of a board "
                           "that has them, or give `board` to evaluate on every validation image of a board.")
    ids = None
    if data.get("val_label") is not None and len(as_strings(data.get("val_label"))) > 0:
        labels = [as_int(v, "val_label") for v in np.asarray(data["val_label"]).reshape(-1).tolist()]
        ids = as_strings(data["class_ids"]) if data.get("class_ids") is not None else None
    elif data.get("val_category") is not None:
        index = {wnid: label for label, wnid in enumerate(class_ids)}
        categories = as_strings(data["val_category"], entry("data", "val_category"))
        unknown = sorted(set(categories) - set(index))
        if unknown:
            raise AlexnetError(f"`{entry('data', 'val_category')}` names categories the model does not know: "
                               f"{unknown[:10]}.")
        labels = [index[c] for c in categories]
    else:
        raise AlexnetError("`data` gives no labels for its validation images: add `val_label` (global indices) or "
                           "`val_category` (WordNet ids).")
    if len(labels) != len(files):
        raise AlexnetError(f"`data` has {len(files)} validation images but {len(labels)} labels: give one per image.")
    classes = data.get("num_classes")
    return files, labels, None if classes is None else as_int(classes, "num_classes", 1), ids


def _numbered(card: ModelCard) -> bool:
    """Whether the model of ``card`` names its classes by their label numbers (trained on data that did not name
    them, or without a card): their ids say nothing."""
    return card.class_ids == [str(i) for i in range(card.num_classes)]


def check_classes(card: ModelCard, classes: int | None, ids: Sequence[str] | None, where: str) -> None:
    """Raise unless the model of ``card`` can score the classes of ``where``: where both name them (``ids``, by
    label; None: not named), each of them must be one of the model's (by WordNet id, in any order: the labels are
    mapped to the model's, :func:`model_labels`); otherwise as many (``classes``; None: not said)."""
    if ids is None or _numbered(card):  # (a model trained on data that did not name its classes names them by number)
        if classes is not None and card.num_classes != classes:
            raise AlexnetError(f"the model has {card.num_classes} outputs but {where} has {classes} classes: evaluate "
                               "it on the board (or data) it was trained for.")
        return
    known = set(card.class_ids)
    unknown = [wnid for wnid in ids if wnid not in known]
    if unknown:
        raise AlexnetError(f"{where} holds {len(unknown)} of its {len(ids)} classes that the model was not trained on "
                           f"({some_names(unknown)}): evaluate it on a board (or data) of its classes, or, from R "
                           "and Python, give the images of the classes both hold as `data` with `val_image` and "
                           "`val_category` (their WordNet ids).")


def model_labels(card: ModelCard, ids: Sequence[str] | None, where: str) -> list[int] | None:
    """The model's label of each label of ``where``, whose classes are ``ids`` (by label), all among the model's
    (:func:`check_classes`); None when the labels are the model's own (the same ids in the same order, or not named
    on either side). Says in one line when they are not."""
    if ids is None or _numbered(card) or list(ids) == list(card.class_ids):
        return None
    index = {wnid: label for label, wnid in enumerate(card.class_ids)}
    logger.info("%s holds %d of the model's %d classes: its images are scored by WordNet id, top-1 and top-%d over "
                "all the model's outputs, and `per_class` has a row for each of its classes with images.", where,
                len(ids), card.num_classes, min(TOP_K, card.num_classes))
    return [index[wnid] for wnid in ids]


def _unused_board_options(board: Any, images: BoardImagesOptions) -> None:
    """Warn about what says which of a board's images to score (``board`` and its options, ``images``) when ``data``
    gives the images instead."""
    unused = [*(["board"] if board is not None else []), *declaration.changed(images)]
    if unused:
        logger.warning("%s: %s which of a board's validation images are scored; with `data`, its own images are "
                       "scored and %s not used.", ", ".join(f"`{name}`" for name in unused),
                       "they say" if len(unused) > 1 else "it says", "they are" if len(unused) > 1 else "it is")


def _scored_size(model: Any, trained: int, wanted: int | None, description: str) -> int:
    """The side ``model`` is scored at: ``wanted``, or the size it ``trained`` at; a model whose input is fixed
    takes only its own size (an :class:`AlexnetError` otherwise)."""
    from .saved import input_size

    if wanted is None:
        return trained
    fixed = input_size(model)
    if fixed is not None and fixed != wanted:
        raise AlexnetError(f"the model {description} takes only images of {fixed} pixels, not image_size = {wanted}: "
                           "leave image_size unset, or evaluate a model trained as alexnet_train() builds them "
                           "(its input takes every size).")
    return wanted


def _failed_file(files: Sequence[str], image_size: int, crops: int) -> list[str]:
    """The files among ``files`` that TensorFlow cannot decode (what a failed batch held)."""
    from ..input.decode import decode_for_eval, decode_ten_crops
    from ..tfimport import tf

    decode = decode_for_eval if crops == 1 else decode_ten_crops
    failed = []
    for path in files:
        try:
            decode(tf.io.read_file(path), image_size).numpy()
        except (tf.errors.OpError, ValueError):
            failed.append(path)
    return failed


def _first_line(error: Any) -> str:
    """The first line of a TensorFlow error's message (the rest is its graph's trace)."""
    return (str(getattr(error, "message", "") or error).strip().splitlines() or ["no message"])[0]


def count_correct(model: Any, files: Sequence[str], labels: Sequence[int], *, image_size: int, crops: int,
                  batch_size: int, parallel: int | None, k: int, classes: int, desc: str = "evaluate") -> ClassCounts:
    """The top-1 predictions and top-``k`` hits of ``model`` over every file, class by class (none dropped; a
    failure names its file), for a model of ``classes`` outputs."""
    from ..input.pipeline import exact_eval_dataset
    from ..tfimport import tf

    dataset = exact_eval_dataset(files, labels, batch_size, image_size, crops=crops, parallel=parallel)
    counts = ClassCounts.empty(classes)
    done = 0
    batches = iter(dataset)
    with progress_bar(len(files), desc, unit="img") as bar:
        while True:
            try:
                images, batch_labels = next(batches)
            except StopIteration:
                break
            except tf.errors.OpError as error:
                held = list(files[done : done + batch_size])
                failed = [] if isinstance(error, tf.errors.ResourceExhaustedError) else \
                    _failed_file(held, image_size, crops)
                if not failed:  # each decodes alone: the batch is what failed
                    raise AlexnetError(
                        f"A batch of {len(held)} validation images ({count_text(crops, 'crop')} of {image_size} "
                        f"pixels each) could not be made ({type(error).__name__}: {_first_line(error)}), though each "
                        "image decodes alone: give a smaller `batch_size`."
                    ) from None
                raise AlexnetError(
                    f"{len(failed)} validation image(s) passed the usable-image check but cannot be decoded "
                    f"({type(error).__name__}): {', '.join(failed)}. Replace or remove them; no image is left out "
                    "silently."
                ) from None
            images = images.numpy()
            if crops == 10:
                count = images.shape[0]
                flat = images.reshape((count * 10, *images.shape[2:]))
                probabilities = np.asarray(model.predict_on_batch(flat)).reshape(count, 10, -1).mean(axis=1)
            else:
                probabilities = np.asarray(model.predict_on_batch(images))
            counts.count(probabilities, batch_labels.numpy(), k)
            done += len(images)
            bar.update(len(images))
    if done != len(files):
        raise AlexnetError(f"{len(files) - done} of {len(files)} images were not evaluated; this is a bug.")
    return counts


@returns_result
def alexnet_evaluate(
    model: Any,
    data: Mapping[str, Any] | None = None,
    board: str | os.PathLike | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over validation images, counted exactly.

    ``model``: a model pin from :func:`alexnet.alexnet_model`, a ``model_dir`` or ``alexnet.keras`` location, or
    (Python) a ``keras.Model``. Images: ``data``'s ``val_image`` with ``val_label`` (or ``val_category``), or,
    with ``board``, the board's validation images, share ``partition`` of ``total`` (default: all of them;
    see :func:`alexnet.data.fetch.imagenet_validation`, which fetches them into ``cache_dir``,
    ``fetch_workers`` downloads at once). ``crops=1`` scores the centre crop; ``crops=10`` the softmax averaged
    over the four corner and the centre squares of the image resized to ``image_size * 256 / 224`` and their
    mirrors. ``batch_size`` images are decoded ``parallel`` at a time (None: one per usable CPU) and scored together.
    ``crops``, ``batch_size``, ``parallel`` and ``image_size`` are the options of an evaluation, and ``partition``,
    ``total``, ``cache_dir`` and ``fetch_workers`` those of a board's images, each declared once with its default
    (:mod:`alexnet.model.options`) and listed below.
    ``image_size``: the side of the crop scored; ``None`` is the size the model trained at last (its card's). A
    model whose input takes every size (as training builds them) can be scored at another size: a model trained
    at a lower size than it is tested at often scores better a little above it (FixRes), so try ``image_size``
    32 pixels above the card's. A model whose input is fixed takes only its own size.

    Without ``data``, ``board`` ``None`` is the default board (``$ALEXNET_BOARD``, see
    :mod:`alexnet.storage.board`); with ``data``, ``board`` and the options of a board's images are not used (a
    warning says so).

    Before any work: ``data`` that is not a partition, no board where one is needed, ``crops`` not 1 or 10,
    ``partition`` not below ``total``, a missing model, data or a board without validation images, or data or a
    board holding classes the model was not trained on (when both name them by WordNet id; else another number of
    them) raise :class:`AlexnetError`. Data or a board of some of the model's classes (or all of them in another
    order) is scored by WordNet id, over all the model's outputs (a line of the log says how many of its classes it
    holds). Images that fail the usable-image check are left out, listed in ``bad_images`` and logged; an image that
    still cannot be decoded raises, naming it.

    Returns a dict: ``images`` (counted), ``top1_correct``, ``top5_correct``, ``top1_accuracy``,
    ``top5_accuracy``, ``top_k`` (min(5, classes): what "top-5" counts), ``crops``, ``protocol``,
    ``image_size``, ``num_classes``, ``images_per_second``, ``seconds``, ``bad_images``, ``left_out_at_upload`` (how
    many validation images of the board's the upload left out, which no evaluation of it can count: those of the
    categories scored, as :func:`alexnet.data.fetch.imagenet_validation` counts them, or ``data``'s own count when it
    came from there; None when not known), ``model`` (its path,
    or ``name@version`` for a pin), and the same counts class by class (:meth:`ClassCounts.tables`):
    ``per_class``, a record per class with images (``index``, ``id``, ``name``, ``images``, ``top1_correct``,
    ``top5_correct``, ``top1_accuracy``, ``top5_accuracy``, ``confused_with``: the id of the class its images were
    most often taken for, ``confused_images``: how many), and ``confusions``, a record per pair of a class and a
    class its images were wrongly taken for (``index``, ``id``, ``name``, ``predicted_index``, ``predicted_id``,
    ``predicted_name``, ``images``), the most frequent first.
    """
    declaration.check_names(options, [*specs(), *declaration.specs(BoardImagesOptions)], "alexnet_evaluate()",
                            "Its options")
    checked = check_options(options)
    images = BoardImagesOptions(**declaration.convert(BoardImagesOptions, options))
    if data is None:  # with data, the board's options are not used (a warning says so)
        check_partition(images.partition, images.total)
    crops, batch_size, parallel, size = checked.crops, checked.batch_size, checked.parallel, checked.image_size
    if data is not None and not isinstance(data, Mapping):
        raise AlexnetError("`data` must be a partition as imagenet_partition() returns (with val_image and val_label),"
                           f" not a {type(data).__name__}: give the board's location as `board` to score its "
                           "validation images.")
    source = model_source(model)
    if data is not None:
        _unused_board_options(board, images)
        class_ids = source.card.class_ids if source.card is not None else None
        if class_ids is None and data.get("val_label") is None:
            class_ids = load_model(source).card.class_ids
        files, labels, classes, ids = _data_images(data, class_ids or [])
        where = "`data`"
    else:
        from ..data.fetch import imagenet_categories, validation_counts
        from ..storage.board import resolve_board

        where = f"board {resolve_board(board)}"
        try:
            rows = imagenet_categories(board)
        except BoardError as error:
            if board is not None:  # the command line always gives one: `data` is offered only where it exists
                raise
            raise AlexnetError(f"{error}; or give the images to evaluate on as `data` (with val_image and val_label, "
                               "as imagenet_partition() returns) or `board`.") from None
        validation_counts(rows, where[len("board "):], data_too=True)
        classes, ids = len(rows), [row["id"] for row in rows]
    if source.card is not None:  # before the model is loaded
        check_classes(source.card, classes, ids, where)
    loaded = load_model(source)
    card = loaded.card
    # a model without a card names its classes by their label numbers: only their number can be checked
    check_classes(card, classes, ids if source.card is not None else None, where)
    size = _scored_size(loaded.model, card.image_size, size, loaded.description)
    cache_folder = ""  # where the board's images are fetched to
    left_out = _known_count(data.get("left_out_at_upload")) if data is not None else None
    if data is None:
        from ..data.fetch import imagenet_validation

        fetched = imagenet_validation(board, images.partition, images.total, cache_dir=images.cache_dir,
                                      workers=images.fetch_workers)
        files, labels, ids = fetched["val_image"], fetched["val_label"], fetched["class_ids"]
        cache_folder = fetched["cache_dir"]
        left_out = _known_count(fetched.get("left_out_at_upload"))
    _warn_of_stored_side(data if data is not None else fetched, size)
    to_model = model_labels(card, ids if source.card is not None else None, where)
    if to_model is not None:
        outside = sorted({y for y in labels if not 0 <= y < len(to_model)})
        if outside:
            raise AlexnetError(f"validation labels {outside[:10]} are outside 0..{len(to_model) - 1}, the classes "
                               f"{where} names: give each image its class's index among them.")
        labels = [to_model[y] for y in labels]
    outside = sorted({y for y in labels if not 0 <= y < card.num_classes})
    if outside:
        raise AlexnetError(f"validation labels {outside[:10]} are outside 0..{card.num_classes - 1}, the classes of "
                           f"the model {loaded.description}: give each image its class's index among the model's.")
    from ..input.scan import said, scan_images  # TensorFlow's: after the checks, which say a mistake at once

    bad = scan_images(files, parallel)
    if bad and len(bad) == len(files):
        shown = "\n  ".join(said(path) for path in bad[:10])
        mend = ("Check the paths given (`val_image`), or replace the images." if data is not None else
                f"They were fetched from {where} into {cache_folder}: fetch them again with "
                "imagenet_validation(verify = TRUE), or delete that folder.")
        raise AlexnetError(f"None of the {len(files)} validation images can be used (empty, truncated, too large, not "
                           f"an image or not there), so nothing is left to score:\n  {shown}"
                           f"{f'{chr(10)}  ... and {len(bad) - 10} more' if len(bad) > 10 else ''}\n{mend}")
    if bad:
        logger.warning("Leaving out %d unusable validation image(s) of %d (empty, truncated, too large or not an "
                       "image):\n  %s", len(bad), len(files), "\n  ".join(said(path) for path in bad))
        dropped = set(bad)
        kept = [(f, y) for f, y in zip(files, labels, strict=True) if f not in dropped]
        files, labels = [f for f, _ in kept], [y for _, y in kept]
    k = min(TOP_K, card.num_classes)
    start = time.monotonic()
    counts = ClassCounts.empty(card.num_classes)
    if files:
        counts = count_correct(loaded.model, files, labels, image_size=size, crops=crops, batch_size=batch_size,
                               parallel=parallel, k=k, classes=card.num_classes,
                               desc=f"evaluate ({PROTOCOLS[crops]})")
    seconds = time.monotonic() - start
    scored, top1, topk = len(files), counts.top1_correct, counts.topk_correct
    logger.info("%s: top-1 %d/%d, top-%d %d/%d (%s, %d pixels) in %.1f s", loaded.description, top1, scored, k,
                topk, scored, PROTOCOLS[crops], size, seconds)
    return evaluation_result(scored, top1, topk, top_k=k, crops=crops, image_size=size, num_classes=card.num_classes,
                             seconds=seconds, bad_images=bad, model=loaded.description,
                             tables=counts.tables(card.class_ids, card.class_names), left_out_at_upload=left_out)


def _warn_of_stored_side(images: Mapping[str, Any], size: int) -> None:
    """Warn when the validation ``images`` (a partition or validation share) were stored on their board with a short
    side below the one evaluation resizes them to for ``size`` (``size * 256 / 224``, before its crops): every crop
    enlarged from fewer pixels (:func:`alexnet.data.options.stored_side_problem`)."""
    from ..data.fetch import stored_side
    from ..data.options import stored_side_problem
    from ..input.decode import EVAL_RESIZE_RATIO

    problem = stored_side_problem(stored_side(images), size, "evaluation", side=round(size * EVAL_RESIZE_RATIO),
                                  uploaded=True)
    if problem is not None:
        logger.warning("%s", problem)


def _known_count(value: Any) -> int | None:
    """A count of images left out at upload as given (R gives a number, perhaps a double; a vector of one), else
    None: not known."""
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    return int(value)


def evaluation_counts(images: int, top1_correct: int, topk_correct: int, *, top_k: int, crops: int, image_size: int,
                      num_classes: int) -> dict[str, Any]:
    """The counts of an evaluation, the accuracies they give (NaN of no image) and how its images were scored: the
    first keys of :func:`evaluation_result`, all that a training's collective adds up."""
    return {
        "images": images, "top1_correct": top1_correct, "top5_correct": topk_correct,
        "top1_accuracy": top1_correct / images if images else float("nan"),
        "top5_accuracy": topk_correct / images if images else float("nan"),
        "top_k": top_k, "crops": crops, "protocol": PROTOCOLS[crops], "image_size": image_size,
        "num_classes": num_classes,
    }


def evaluation_result(images: int, top1_correct: int, topk_correct: int, *, top_k: int, crops: int, image_size: int,
                      num_classes: int, seconds: float, bad_images: Sequence[str], model: str,
                      tables: Mapping[str, list[dict[str, Any]]], left_out_at_upload: int | None = None
                      ) -> dict[str, Any]:
    """The dict of :func:`alexnet_evaluate`, of one machine's evaluation and of a cluster's (whose workers' counts
    are added first, :func:`alexnet.launch.evaluation.combine_shares`): :func:`evaluation_counts`, the speed over
    ``seconds``, the ``bad_images`` left out, the validation images the upload left out (``left_out_at_upload``, None
    when not known), the ``model``'s description, and the ``tables`` by class (``per_class`` and ``confusions``)."""
    return {
        **evaluation_counts(images, top1_correct, topk_correct, top_k=top_k, crops=crops, image_size=image_size,
                            num_classes=num_classes),
        "images_per_second": images / seconds if seconds > 0 else float("nan"), "seconds": round(seconds, 3),
        "bad_images": list(bad_images), "left_out_at_upload": left_out_at_upload, "model": model, **tables,
    }


# the model and the images, then the declared options: an evaluation's, then which of a board's images and how fetched
declaration.take_declared(alexnet_evaluate, EvaluationOptions, BoardImagesOptions,
                          title="Its options, with their defaults:")
