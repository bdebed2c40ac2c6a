"""A finished run given again: its ``checkpoint_dir`` holds a run that trained every epoch asked for, and the model
that run ended with is saved wherever this one would save it (``model_dir``, and ``model_pin``'s newest version).

The chief finds it before any model is built or the link measured (:func:`saved_finish`), from the history file, the
record of the model saved that a run writes there once its model is whole (:func:`record_saved_model`) and the card
beside that model, and every worker learns it in one collective. The run then returns the history its checkpoints
recorded (:func:`.run_history.finished_run_history`), and writes no model, card or pin. A finished run whose model
is not there (a run stopped after its last checkpoint, before saving; a history without the record; another
``model_dir``), one given extra callbacks (each is given the model) or an evaluation, and one whose checkpoints
the run refuses (another model, other classes) take the run's whole way: the model restored from the last checkpoint
and saved, or the refusal.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import posixpath
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import AlexnetError

if TYPE_CHECKING:
    from ..input.inputs import TrainingData
    from ..model.card import ModelCard
    from ..tfimport import tf
    from .agreement import Steps
    from .checkpoint import CheckpointStore
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger("alexnet.train.checkpoint")  # said as the checkpoints' own lines

#: The history file's record of the model a run saved once its last epoch was done: the digest of its weights
#: (``weights_sha256``) and the position of the checkpoint it ended with (``position``).
SAVED_MODEL = "saved_model"


def record_saved_model(store: CheckpointStore, digest: str, position: tuple[int, int]) -> None:
    """Record in ``store``'s history file (the chief's; a no-op elsewhere) that the model of weights ``digest`` is
    saved, the model of the checkpoint at ``position``: only when the history file is at that position (one behind
    its checkpoint records nothing). A record that cannot be written is said: the run given again saves the model
    again."""
    if not store.chief:
        return
    try:
        state = store.read_state()
        if state is None or list(state.get("position") or []) != list(position):
            return
        store.write_state({**state, SAVED_MODEL: {"weights_sha256": digest, "position": list(position)}})
    except (OSError, AlexnetError) as error:
        logger.warning("%s: the model saved is not recorded in its history (%s); run again with every epoch done, "
                       "the run saves it again.", store.location, error)


def _model_there(location: str | None, digest: str) -> ModelCard | None:
    """The card of the model saved in ``location`` when it is the model of weights ``digest`` (None otherwise: no
    model there, another, or a card that cannot be read)."""
    from ..model.card import CARD_FILE
    from ..model.saved import read_card
    from ..storage.location import fs_path, open_filesystem

    if location is None:
        return None
    try:
        card = read_card(open_filesystem(location, what="model_dir"), posixpath.join(fs_path(location), CARD_FILE),
                         location)
    except (OSError, AlexnetError):
        return None
    return card if card is not None and card.weights_sha256 == digest else None


def _model_path(location: str) -> str:
    """Where :func:`alexnet.model.saving.save_model` says it saved the model of ``location``."""
    from ..model.saving import MODEL_FILE
    from ..storage.location import location_kind

    return os.path.join(location, MODEL_FILE) if location_kind(location) == "file" else f"{location}/{MODEL_FILE}"


def _chief_finish(settings: TrainSettings, topo: Topology, data: Mapping[str, Any], td: TrainingData, steps: Steps,
                  model_settings: Mapping[str, Any], bad: Sequence[str]) -> dict[str, Any] | None:
    """On the chief: the history to return when ``settings.checkpoint_dir`` holds a finished run whose model is
    saved where this run saves one (said as the run says it), else None."""
    from ..model.export import export_format_of, pinned_already
    from ..storage.location import fs_path, open_filesystem
    from .checkpoint import Resume, recorded_history
    from .formats import check_checkpoint_classes
    from .resumed import check_resume, extended, recorded_position, say_finished, trained_on
    from .run_history import finished_run_history

    location = str(settings.checkpoint_dir)
    try:
        state = recorded_history(location)
    except AlexnetError:  # the resume says what is wrong with it
        return None
    position, record = recorded_position(state), state.get(SAVED_MODEL) or {}
    if position is None or position[1] != 0 or position[0] < settings.epochs or \
            record.get("position") != list(position) or not record.get("weights_sha256"):
        return None
    saved = dict(state.get("settings") or {})
    try:  # refused as a resume refuses them, by the run's whole way
        check_resume(saved, model_settings, location)
        check_checkpoint_classes(saved, [str(i) for i in td.class_ids], location,
                                 open_filesystem(location, what="checkpoint_dir"), fs_path(location))
    except AlexnetError:
        return None
    card = _model_there(settings.model_dir, str(record["weights_sha256"]))
    if card is None:
        return None
    pin = None
    if settings.model_pin is not None:
        pin = pinned_already(settings.model_board, settings.model_pin, card, export_format_of(settings.model_format))
        if pin is None:
            return None
    start = Resume(position[0], 0, dict(state.get("metrics") or {}), dict(state.get("schedule") or {}), saved,
                   restored=True)
    taken = dict(saved.get("adapted_settings") or {}) if settings.adapt_communication and topo.workers > 1 else {}
    asked = dataclasses.replace(settings, **taken)  # what the run took when it began is no change
    global_batch = topo.global_batch(asked.step_batch)
    say_finished(settings, start, extended(asked, start, global_batch, steps.train),
                 {"learnt_with": asked.learnt_with(), "data": trained_on(data, td, steps, topo),
                  "global_batch_size": global_batch, "steps": steps.train, "epochs": settings.epochs})
    return finished_run_history(settings, start, card.to_dict(), pin, {
        "model_path": None if settings.model_dir is None else _model_path(settings.model_dir),
        "bad_images": list(bad)})


def saved_finish(strategy: tf.distribute.Strategy, topo: Topology, settings: TrainSettings, data: Mapping[str, Any],
                 td: TrainingData, steps: Steps, model_settings: Mapping[str, Any], bad: Sequence[str], *,
                 whole_way: bool) -> dict[str, Any] | None:
    """The history a finished run given again returns without building its model (see the module), or None: the
    run goes its whole way. The chief decides (``whole_way``: it must, given callbacks or an evaluation), and with
    several workers sends every worker that history in one collective (every worker calls it at the same point, with
    a ``checkpoint_dir``); the others return it without the model's path and pin, which are the chief's."""
    if not settings.checkpoint_dir:
        return None
    history = _chief_finish(settings, topo, data, td, steps, model_settings, bad) \
        if topo.chief and not whole_way else None
    if topo.workers > 1:
        from .agreement import all_gather_texts

        sent = base64.b64encode(zlib.compress(json.dumps(history).encode())).decode() if history else ""
        text = next((text for text in all_gather_texts(strategy, sent) if text), "")
        if text and not topo.chief:
            history = {**json.loads(zlib.decompress(base64.b64decode(text))), "model_path": None, "model_pin": None,
                       "bad_images": list(bad)}
            logger.info("%s holds a finished run, whose model is saved: nothing is left to train.",
                        settings.checkpoint_dir)
    return history
