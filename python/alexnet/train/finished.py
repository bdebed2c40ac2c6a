"""A finished run given again: its ``checkpoint_dir`` holds a run that trained every epoch asked for.

The chief finds it before any model is built or the link measured (:func:`saved_finish`), from the history file, and
every worker learns it in one collective. When the model that run ended with is saved wherever this one would save it
(``model_dir``, and ``model_pin``'s newest version), as the history file's record of the model saved says (written
there once the model is whole: :func:`.trained.record_saved_model`) and the card beside that model confirms, the run
returns the history its checkpoints recorded (:func:`.run_history.finished_run_history`), and writes no model, card
or pin. Otherwise (a run stopped after its last checkpoint, before saving; a history without the record; another
``model_dir``; extra callbacks, each given the model; an evaluation) the model is built, the last checkpoint restored
into it and saved as a run saves the model it ends with (:func:`save_finished`, :func:`.trained.save_trained`),
without measuring the link or training, and the run returns the recorded history with that model. Checkpoints the run
refuses (another model, other classes) are refused as a resume refuses them.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import posixpath
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import AlexnetError
from .history_file import saved_model

if TYPE_CHECKING:
    import tf_keras as keras

    from ..input.inputs import TrainingData
    from ..model.card import ModelCard
    from ..tfimport import tf
    from .agreement import Steps
    from .checkpoint import Resume
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger("alexnet.train.checkpoint")  # said as the checkpoints' own lines



class Finish(NamedTuple):
    """What the chief found in ``checkpoint_dir`` before any model is built (:func:`saved_finish`)."""

    #: the history to return: a finished run whose model is saved where this run saves one (None: none)
    history: dict[str, Any] | None
    #: whether its history records every epoch asked for done: nothing to train, the model to save
    done: bool


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


def _own_share(topo: Topology, td: TrainingData, steps: Steps) -> dict[str, Any]:
    """The ``params`` of a history that are each worker's own (:func:`.run_history.run_params`), which the history
    file keeps as the chief's only: on another worker, its training images and its share of the validation images as
    it holds them now (known without building the model); nothing on the chief, whose recorded ones are its own."""
    return {} if topo.chief else {"train_images": len(td.files), "worker_val_images": steps.val_share}


def _every_epoch_done(state: Mapping[str, Any], epochs: int) -> tuple[int, int] | None:
    """The position a history file records (:func:`.resumed.recorded_position`) when it is the end of an epoch at or
    past the ``epochs`` asked for (nothing left to train), else None."""
    from .resumed import recorded_position

    position = recorded_position(state)
    return position if position is not None and position[1] == 0 and position[0] >= epochs else None


def _say_finished(settings: TrainSettings, topo: Topology, data: Mapping[str, Any], td: TrainingData, steps: Steps,
                  start: Resume) -> None:
    """Say that the checkpoints hold a finished run (:func:`.resumed.say_finished`), against what this run would train
    with: the settings its run took when it began (``adapted_settings``) no change."""
    from .resumed import extended, say_finished, trained_on

    taken = dict(start.settings.get("adapted_settings") or {}) if settings.adapt_communication and topo.workers > 1 \
        else {}
    asked = dataclasses.replace(settings, **taken)
    global_batch = topo.global_batch(asked.step_batch)
    say_finished(settings, start, extended(asked, start, global_batch, steps.train),
                 {"learnt_with": asked.learnt_with(), "data": trained_on(data, td, steps, topo),
                  "global_batch_size": global_batch, "steps": steps.train, "epochs": settings.epochs})


def _chief_finish(settings: TrainSettings, topo: Topology, data: Mapping[str, Any], td: TrainingData, steps: Steps,
                  model_settings: Mapping[str, Any], bad: Sequence[str], whole_way: bool) -> Finish:
    """On the chief: whether ``settings.checkpoint_dir`` holds a finished run, and the history to return when its model
    is saved where this run saves one and the run need not go ``whole_way`` (said as the run says it)."""
    from ..model.export import export_format_of, pinned_already
    from ..storage.location import fs_path, open_filesystem
    from .checkpoint import Resume, recorded_history
    from .formats import check_checkpoint_classes
    from .resumed import check_resume
    from .run_history import finished_run_history

    location = str(settings.checkpoint_dir)
    try:
        state = recorded_history(location)
    except AlexnetError:  # the resume says what is wrong with it
        return Finish(None, False)
    position = _every_epoch_done(state, settings.epochs)
    if position is None:
        return Finish(None, False)
    record = saved_model(state)
    if whole_way or record.get("position") != list(position) or not record.get("weights_sha256"):
        return Finish(None, True)
    saved = dict(state.get("settings") or {})
    try:  # refused as a resume refuses them, once the last checkpoint is restored
        check_resume(saved, model_settings, location)
        check_checkpoint_classes(saved, [str(i) for i in td.class_ids], location,
                                 open_filesystem(location, what="checkpoint_dir"), fs_path(location))
    except AlexnetError:
        return Finish(None, True)
    card = _model_there(settings.model_dir, str(record["weights_sha256"]))
    if card is None:
        return Finish(None, True)
    pin = None
    if settings.model_pin is not None:
        pin = pinned_already(settings.model_board, settings.model_pin, card, export_format_of(settings.model_format))
        if pin is None:
            return Finish(None, True)
    start = Resume(position[0], 0, dict(state.get("metrics") or {}), dict(state.get("schedule") or {}), saved,
                   restored=True)
    _say_finished(settings, topo, data, td, steps, start)
    return Finish(finished_run_history(settings, start, card.to_dict(), pin, {
        "model_path": None if settings.model_dir is None else _model_path(settings.model_dir),
        "bad_images": list(bad), "weights_agree": record.get("weights_agree")}), True)


def saved_finish(strategy: tf.distribute.Strategy, topo: Topology, settings: TrainSettings, data: Mapping[str, Any],
                 td: TrainingData, steps: Steps, model_settings: Mapping[str, Any], bad: Sequence[str], *,
                 whole_way: bool) -> Finish:
    """Whether ``settings.checkpoint_dir`` holds a finished run, and the history a finished run given again returns
    without building its model (see the module; None: the model is built, and with every epoch done saved from the
    last checkpoint by :func:`save_finished`). The chief decides (``whole_way``: the model must be built, given
    callbacks or an evaluation), and with several workers sends every worker what it found in one collective (every
    worker calls it at the same point, with a ``checkpoint_dir``); the others return that history without the model's
    path and pin, which are the chief's, and with the params that are their own (:func:`_own_share`)."""
    if not settings.checkpoint_dir:
        return Finish(None, False)
    found = _chief_finish(settings, topo, data, td, steps, model_settings, bad, whole_way) if topo.chief \
        else Finish(None, False)
    if topo.workers > 1:
        from .agreement import all_gather_texts

        sent = base64.b64encode(zlib.compress(json.dumps(found._asdict()).encode())).decode() if topo.chief else ""
        text = next((text for text in all_gather_texts(strategy, sent) if text), "")
        if text and not topo.chief:
            told = json.loads(zlib.decompress(base64.b64decode(text)))
            history = told["history"]
            if history is not None:  # the chief's, but for what is this worker's own
                history = {**history, "params": {**history["params"], **_own_share(topo, td, steps)},
                           "model_path": None, "model_pin": None, "bad_images": list(bad)}
                logger.info("%s holds a finished run, whose model is saved: nothing is left to train.",
                            settings.checkpoint_dir)
            found = Finish(history, bool(told["done"]))
    return found


def save_finished(strategy: tf.distribute.Strategy, topo: Topology, settings: TrainSettings, data: Mapping[str, Any],
                  td: TrainingData, steps: Steps, net: keras.Model, optimizer: Any, model_settings: Mapping[str, Any],
                  bad: Sequence[str], callbacks: Sequence[Any],
                  evaluate: Callable[[Any, Any, ModelCard], Any] | None) -> dict[str, Any] | None:
    """A finished run given again (:func:`saved_finish` found every epoch done), its model ``net`` built: the last
    checkpoint restored into it (refused as a resume refuses it), the model saved as a run saves the one it ends with
    (:func:`.trained.save_trained`: ``callbacks`` given it, ``evaluate`` recorded on its card), without measuring the
    link or training; the history its checkpoints recorded, with that model. None when the checkpoint restored is not
    the end of the last epoch (the newest, damaged, gave way to an older one): the run goes its whole way, and trains
    what is left. A collective with several workers: every worker calls it at the same point."""
    from .agreement import check_agreement
    from .callbacks import BestWeights
    from .checkpoint import CheckpointStore
    from .initial import initial_weights
    from .resumed import refuse_other_classes
    from .run_history import finished_run_history
    from .trained import save_trained

    location = str(settings.checkpoint_dir)
    store = CheckpointStore(location, chief=topo.chief, steps=steps.train,
                            settings={**model_settings, "epochs": settings.epochs})
    try:
        start = store.restore(net, optimizer, checked=model_settings)
        if start.restored:
            refuse_other_classes(strategy, topo, store, start, td.class_ids)
        started = initial_weights(strategy, net, settings.initial_model, td.class_ids, settings.train_from, start,
                                  store)
        if topo.workers > 1:
            check_agreement(strategy, (start.epoch, start.step), steps, location)
        if not start.finished(settings.epochs):
            store.close()  # the run's whole way holds the folder again
            return None
        _say_finished(settings, topo, data, td, steps, start)
        logger.info("%s: every epoch is done; saving the model from its last checkpoint (no link measured, nothing "
                    "trained).", location)
        best = BestWeights(store, start, net) if settings.keep_best else None
    except BaseException:
        store.close()
        raise
    store.close(hold=True)
    try:  # the folder held until the model saved there by default (`model_dir`) is whole
        saved = save_trained(strategy, topo, settings, net, td, data, start.metrics, best=best, started=started,
                             start=start, store=store, callbacks=callbacks, evaluate=evaluate)
    finally:
        store.let_go()
    history = finished_run_history(settings, start, saved.card.to_dict(), saved.model_pin, {
        "model_path": saved.model_path, "bad_images": list(bad), "weights_agree": saved.agree})
    return {**history, "params": {**history["params"], **_own_share(topo, td, steps)}}
