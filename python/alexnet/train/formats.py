"""Which checkpoints this version of the package can resume: the format a checkpoint records, what each format's
saved state means, what the model saved beside them tells (:func:`holds_model`, :func:`card_class_ids`), and what to
do with one that cannot be resumed (start from the model saved beside it).

Checkpoints trained on other classes than a run's are refused (:func:`check_checkpoint_classes`): by the run that
resumes them, and, before a Spark job reserves its workers, by the driver (:func:`check_classes_before_launch`), from
the history file and the card beside the checkpoints, without reading their weights.

A checkpoint's history records its format (:data:`CHECKPOINT_FORMAT`); a checkpoint of another format is refused
rather than resumed with its state misread (:func:`check_format`), and one that records none (all written before the
format was) is read as :data:`UNRECORDED_FORMAT`. A checkpoint of an older optimizer, whose state cannot be restored
into today's, is refused as such (:func:`check_optimizer`), not as one of another model.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import AlexnetError
from ..model.card import CARD_FILE
from ..model.saved import MODEL_FILE, read_card
from ..storage.location import fs_path, open_filesystem
from .resumed import check_classes

logger = logging.getLogger(__name__)

#: The key of the optimizer's learning rate in a checkpoint, and the one versions before 7bc07fc kept it under: their
#: optimizer's state cannot be restored into today's optimizer (its weights can: the model saved beside them).
RATE_KEY = "optimizer/_learning_rate/.ATTRIBUTES/VARIABLE_VALUE"
OLD_RATE_KEY = "optimizer/_current_learning_rate/.ATTRIBUTES/VARIABLE_VALUE"
#: The format of what a checkpoint saves, recorded in its history (``format``): a checkpoint of another format is
#: refused, not resumed. Bump it whenever the meaning of saved state changes (what the optimizer's slots hold, the
#: position, the history kept), and say here what the new one means.
#: 1: the optimizer's momentum slot holds the rate-free sum ``u <- momentum * u + gradient`` (``w <- w - lr * u``;
#: before, Keras' velocity ``v <- momentum * v - lr * gradient``).
CHECKPOINT_FORMAT = 1
#: The format of a checkpoint whose history records none (every one written before the format was recorded): read
#: as format 1 (the few written before the momentum sum, which held Keras' velocity, cannot be told from them).
UNRECORDED_FORMAT = 1
#: The file of a folder of checkpoints whose lock its run holds (in a bucket, its lease).
RUN_LOCK = ".alexnet-run.lock"
#: Seconds a run waits for another run's lock on its folder of checkpoints (one that ends, or is being relaunched).
RUN_LOCK_PATIENCE = 60.0


def check_optimizer(reader: Any, latest: str, location: str, fs: Any, root: str) -> None:
    """Raise when the checkpoint ``latest`` of ``location`` (``root`` on ``fs``), read by ``reader``, holds the state
    of the optimizer of versions before 7bc07fc (:data:`OLD_RATE_KEY`)."""
    if reader.has_tensor(OLD_RATE_KEY) and not reader.has_tensor(RATE_KEY):
        raise AlexnetError(
            f"The checkpoint {latest} of {location} was written by an older version of alexnet, whose optimizer "
            "state cannot be resumed (it keeps the learning rate as _current_learning_rate): "
            f"{start_over(location, fs, root)}."
        )


def check_format(state: Mapping[str, Any], location: str, fs: Any, root: str) -> None:
    """Raise when ``state``, the history of the checkpoints at ``location`` (``root`` on ``fs``), records another
    format than :data:`CHECKPOINT_FORMAT` (none: :data:`UNRECORDED_FORMAT`)."""
    found = state.get("format", UNRECORDED_FORMAT)
    if found != CHECKPOINT_FORMAT:
        raise AlexnetError(
            f"The checkpoints in {location} are of checkpoint format {found}, and this version of alexnet writes and "
            f"resumes format {CHECKPOINT_FORMAT} only (its saved state means another thing): "
            f"{start_over(location, fs, root)}."
        )


def holds_model(fs: Any, root: str) -> bool:
    """Is there a model saved in the checkpoints' folder ``root`` on ``fs`` (its ``model_dir`` too)?"""
    try:
        return bool(fs.exists(posixpath.join(root, MODEL_FILE)))
    except OSError:
        return False


def card_class_ids(fs: Any, root: str) -> list[str] | None:
    """The class ids on the card of the model saved beside the checkpoints in ``root`` on ``fs`` (None: no card
    there, or one that cannot be read)."""
    path = posixpath.join(root, CARD_FILE)
    try:
        card = read_card(fs, path, path)
    except AlexnetError as error:
        logger.debug("The card %s cannot be read: %s", path, error)
        return None
    return None if card is None else card.class_ids


def check_model_dir(model_dir: str, checkpoint_dir: str | None) -> None:
    """Refuse a ``model_dir`` (resolved) that is the folder of checkpoints of a run other than this one (whose
    ``checkpoint_dir`` it is not): one of its checkpoints is there, or the lock (a lease) a run holds on it. The model
    that run saved there belongs with those checkpoints, and this run's would replace it when it ends. Warn of a
    model alone there (a run's without checkpoints, an export's source), which this run's replaces, as Keras' ``save``
    does."""
    if model_dir == checkpoint_dir:
        return
    listed, numbers = listed_checkpoints(open_filesystem(model_dir, what="model_dir"), fs_path(model_dir))
    if numbers or RUN_LOCK in listed:
        raise AlexnetError(
            f"`model_dir` = {model_dir} is the folder of another training run's checkpoints, where that run saves its "
            "model: this run's model would replace it. Give this run a `model_dir` of its own, or `checkpoint_dir` = "
            f"{model_dir} to go on with that run.")
    if MODEL_FILE in listed:
        logger.warning("`model_dir` = %s holds a model already (%s): this run's model replaces it when the run ends; "
                       "give another `model_dir` to keep it.", model_dir, MODEL_FILE)


def listed_checkpoints(fs: Any, root: str) -> tuple[list[str], dict[str, int]]:
    """The names in the checkpoints' folder ``root`` on ``fs`` (none when there is no such folder), and the
    checkpoints among them by name (``ckpt-N``, whose ``ckpt-N.index`` and every data file ``ckpt-N.data-K-of-M`` are
    there: one whose upload was cut short is not one) with their numbers ``N``."""
    try:
        listed = [posixpath.basename(f) for f in fs.ls(root, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        listed = []
    shards: dict[str, set[tuple[int, int]]] = {}
    for name in listed:
        data = re.fullmatch(r"(ckpt-\d+)\.data-(\d+)-of-(\d+)", name)
        if data:
            shards.setdefault(data.group(1), set()).add((int(data.group(2)), int(data.group(3))))

    def whole(name: str) -> bool:
        found = shards.get(name, set())
        return bool(found) and all(found == {(k, m) for k in range(m)} for _, m in found)

    numbers = {m.group(1): int(m.group(2)) for m in (re.fullmatch(r"(ckpt-(\d+))\.index", f) for f in listed)
               if m and whole(m.group(1))}
    return listed, numbers


def check_checkpoint_classes(saved: Mapping[str, Any], class_ids: Sequence[str], location: str, fs: Any,
                             root: str) -> None:
    """Raise when the checkpoints at ``location`` (``root`` on ``fs``), whose run recorded ``saved``, were trained on
    other classes than ``class_ids`` (:func:`.resumed.check_classes`, told by the card beside them when ``saved`` does
    not record them)."""
    check_classes(saved, [str(i) for i in class_ids], location, lambda: card_class_ids(fs, root),
                  lambda: holds_model(fs, root))


def check_checkpoints_fit(settings: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, before any data is fetched or any worker launched, checkpoints in ``settings.checkpoint_dir`` (of a
    :class:`~alexnet.train.settings.TrainSettings`) that the run would refuse once it had its data: of another format,
    written for another model, or trained on other classes than those of the board's categories ``rows``. Read from the
    history file and the card beside them, not from their weights; nothing without a ``checkpoint_dir``."""
    from .checkpoint import recorded_settings
    from .initial import initial_description
    from .resumed import check_resume

    if not settings.checkpoint_dir:
        return
    saved = recorded_settings(settings.checkpoint_dir)
    check_resume(saved, {"num_classes": len(rows), **settings.model_settings(),
                         "initial_model": initial_description(settings.initial_model)}, settings.checkpoint_dir)
    check_classes_before_launch(saved, [str(row["id"]) for row in rows], settings.checkpoint_dir)


def check_classes_before_launch(saved: Mapping[str, Any], class_ids: Sequence[str], location: str) -> None:
    """On the driver of a Spark job, before it launches the workers: raise what the chief of a run resuming the
    checkpoints at ``location`` (whose history records ``saved``) would raise once launched, when they were trained on
    other classes than ``class_ids``, the board's (:func:`check_checkpoint_classes`); nothing when no checkpoint is
    there, a run that resumes nothing. Reads the folder's listing and the card beside the checkpoints, not their
    weights."""
    fs, root = open_filesystem(location, what="checkpoint_dir"), fs_path(location)
    if listed_checkpoints(fs, root)[1]:
        check_checkpoint_classes(saved, class_ids, location, fs, root)


def start_over(location: str, fs: Any, root: str) -> str:
    """What to do with the checkpoints at ``location`` (``root`` on ``fs``) that cannot be resumed: start from the
    model saved beside them, when there is one, or afresh."""
    if holds_model(fs, root):
        return (f'start from the model saved there with `initial_model` = "{location}" and a new `checkpoint_dir`, '
                "or start afresh with a new `checkpoint_dir`")
    return ("use a new `checkpoint_dir` (with `initial_model` = the `model_dir` its run saved a model to, to start "
            "from that model)")
