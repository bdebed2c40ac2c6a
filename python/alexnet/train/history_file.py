"""A run's history read back from its ``checkpoint_dir`` (:func:`alexnet_history`), without TensorFlow: the metrics,
schedule and settings the history file (``alexnet-history.json``) keeps beside the checkpoints, as
:func:`alexnet.alexnet_train` returned them (:mod:`.run_history`)."""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from typing import Any

from ..errors import AlexnetError
from ..result import returns_result
from ..storage.location import fs_path, open_filesystem, resolve_location
from .schedule import describe

#: The history file of a folder of checkpoints (:data:`alexnet.train.checkpoint.STATE_FILE`).
HISTORY_FILE = "alexnet-history.json"
#: The history file's record of the model a run saved once its last epoch was done: the digest of its weights
#: (``weights_sha256``), whether every worker ended with them (``weights_agree``: None with one worker) and the
#: position of the checkpoint it ended with (``position``; written by :func:`.trained.record_saved_model`).
SAVED_MODEL = "saved_model"


def saved_model(state: Mapping[str, Any]) -> dict[str, Any]:
    """The record of the model saved (:data:`SAVED_MODEL`) a history file's ``state`` holds when it is of the
    checkpoint the file is at (the model the run ended with), else empty."""
    record = state.get(SAVED_MODEL)
    if not isinstance(record, Mapping) or record.get("position") != list(state.get("position") or []):
        return {}
    return dict(record)


@returns_result
def alexnet_history(checkpoint_dir: str | os.PathLike) -> dict[str, Any]:
    """The history of the training whose ``checkpoint_dir`` (a folder, ``file://``, ``gs://``, ``s3://`` or
    ``https://`` location) is given, read from its history file: what :func:`alexnet.alexnet_train` returned of its
    epochs, without training or loading anything, also while it runs (its epochs done so far).

    Returns a dict: ``metrics`` (each metric's value per epoch done), ``schedule`` (``image_size`` and
    ``learning_rate`` per epoch, and ``summary``, them on one line), ``params`` (the run's own history's, as at its
    newest checkpoint: every training setting and what it resolved to, where the run started (``initial_epoch``,
    ``initial_step``, ``started_from``, ``settings_changed``), what it measured of its communication and the advice
    (``allreduce_seconds``, ..., ``advised_settings``, ``communication_advice``, ``adapted_settings``) and the
    ``seconds`` trained until then; ``initial_model`` as the run named it and no password of a URL; ``data``, the
    board and partition it trained on; ``checkpoint_dir``, where it is read. A history file of an older version keeps
    fewer: those that change what is learnt, ``epochs``, ``steps``, ``global_batch_size``, ``num_classes``, ...),
    ``epochs_done`` and ``position`` (the epoch and step of its newest checkpoint), and once the run's model is saved
    ``weights_sha256`` and ``weights_agree`` as the run returned them (``None`` before, and ``weights_agree`` with one
    worker).
    """
    resolved = resolve_location(checkpoint_dir, "checkpoint_dir")
    fs = open_filesystem(resolved, what="checkpoint_dir")
    path = posixpath.join(fs_path(resolved), HISTORY_FILE)
    try:
        found = fs.exists(path)
        text = fs.cat_file(path) if found else None
    except OSError as error:
        raise AlexnetError(f"`checkpoint_dir` = {resolved}: its {HISTORY_FILE} cannot be read ({error}).") from None
    if text is None:
        try:
            folder, found_at_all = fs.isdir(fs_path(resolved)), fs.exists(fs_path(resolved))
        except OSError:
            folder, found_at_all = True, True  # said as it was
        what = (f"holds no {HISTORY_FILE}" if folder else "is a file, not a folder" if found_at_all
                else "does not exist")
        raise AlexnetError(f"`checkpoint_dir` = {resolved} {what}: give the `checkpoint_dir` a training wrote its "
                           "checkpoints to (its history is written there after its first epoch).")
    try:
        state = json.loads(text)
        settings = dict(state.get("settings") or {})
        metrics = {name: [float(v) for v in values] for name, values in dict(state.get("metrics") or {}).items()}
        schedule: dict[str, Any] = {name: list(values) for name, values in dict(state.get("schedule") or {}).items()}
    except (ValueError, TypeError, AttributeError) as error:
        raise AlexnetError(f"`checkpoint_dir` = {resolved}: its {HISTORY_FILE} is not a training's history "
                           f"({error}).") from None
    params = {**read_params(settings), "checkpoint_dir": resolved}
    schedule["summary"] = describe(schedule, params.get("precision"), params.get("precision_reason"),
                                   params.get("peak_learning_rate"))
    saved = saved_model(state)
    return {"metrics": metrics, "schedule": schedule, "params": params,
            "epochs_done": int(state.get("epochs_done") or 0), "position": list(state.get("position") or []),
            "weights_sha256": saved.get("weights_sha256"), "weights_agree": saved.get("weights_agree")}


def read_params(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The ``params`` of a history read back from a history file's ``settings``: those the run's own history had
    (``params``, kept at each checkpoint: :func:`.run_history.run_params`), then those :func:`recorded_params` gives
    that they lack (all of a history file written before the params were kept)."""
    kept = dict(settings.get("params") or {})
    return {**kept, **{name: value for name, value in recorded_params(settings).items() if name not in kept}}


def recorded_params(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a run recorded beside its checkpoints (a history file's ``settings``) as the ``params`` of its
    history: those that change what is learnt, the others recorded (``epochs``, ``steps``, ``global_batch_size``,
    the model's), and the run's own (``batch_size``, ``strategy``, ``replicas``, ``workers``, ``precision``,
    ``peak_learning_rate``; none in older histories), side by side."""
    rest = {name: value for name, value in settings.items() if name != "params"}
    learnt = dict(rest.pop("learnt_with", None) or {})
    run = dict(rest.pop("run", None) or {})
    return {**learnt, **rest, **run}
