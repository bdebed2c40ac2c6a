"""The model a run ends with, once training is over: with ``keep_best``, the weights of the best epoch taken back
(:func:`take_best_epoch`); the digest of its weights (:func:`weights_digest`, equal on every worker of a synchronous
run); its card (:func:`model_card`: classes, input size, training and data); and, with ``model_pin``, its publication
as a model pin, with the export ``model_format`` asks for beside it (:func:`publish_model`). :func:`save_trained` does
them all, in that order, for a run that trained and for a finished run given again whose model is to be saved
(:mod:`.finished`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tf_keras as keras

    from ..input.inputs import TrainingData
    from ..model.card import ModelCard
    from .checkpoint import CheckpointStore, Resume
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger("alexnet.train.run")  # its lines keep the logger they had in run.py


def weights_digest(model: keras.Model) -> str:
    """sha256 of every weight of ``model``, in order: equal on the workers of a synchronous run."""
    import numpy as np

    digest = hashlib.sha256()
    for weight in model.get_weights():
        array = np.ascontiguousarray(weight)
        digest.update(str((array.dtype.str, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def take_best_epoch(net: keras.Model, best: Any) -> int | None:
    """With ``keep_best`` (``best``, a :class:`.callbacks.BestWeights`), ``net`` takes the weights of the best
    epoch; that epoch (0-based), or None."""
    if best is None or best.weights is None:
        return None
    net.set_weights(best.weights)
    logger.info("keep_best: the model is epoch %d's, of validation top-1 %.4f.", best.epoch + 1, best.best)
    return int(best.epoch)


def model_card(td: TrainingData, data: Mapping[str, Any], settings: TrainSettings,
               metrics: Mapping[str, list[float]], digest: str, epoch: int | None = None,
               started_from: str | None = None) -> ModelCard:
    """The card of the model trained on ``td``: its classes, input size, training and data; with ``epoch``
    (0-based, ``keep_best``), the model is that epoch's and its metrics are that epoch's."""
    from ..model.card import ModelCard, now

    def text(name: str) -> str | None:
        value = data.get(name)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        return None if value is None else str(value)

    at = -1 if epoch is None else epoch
    return ModelCard(image_size=settings.sizes.final, num_classes=td.num_classes, class_ids=list(td.class_ids),
                     class_names=list(td.class_names), epochs=len(metrics.get("loss") or []) or settings.epochs,
                     best_epoch=None if epoch is None else epoch + 1,
                     metrics={name: float(values[at]) for name, values in metrics.items() if len(values) > at},
                     board=text("board"), categories_version=text("categories_version"), weights_sha256=digest,
                     created=now(), initial_model=started_from,
                     architecture={"dense_units": settings.dense_units, "grouped": settings.grouped})


def publish_model(net: keras.Model, settings: TrainSettings, topo: Topology, card: ModelCard, *,
                  again: bool = False) -> dict[str, str] | None:
    """Publish ``net`` without its optimizer state as pin ``settings.model_pin``, with the export ``model_format`` asks
    for beside it (the chief; every worker saves). ``again``: the run had nothing left to train, and a pin whose newest
    version holds these weights already (the run published it when it ended) gets no second version of them."""
    from ..model.export import export_format_of, pinned_already, publish_with_export
    from ..model.saving import inference_copy

    if settings.model_pin is None or (not topo.chief and topo.workers == 1):
        return None
    with inference_copy(net) as local:
        if not topo.chief:
            return None
        format = export_format_of(settings.model_format)
        pin = pinned_already(settings.model_board, settings.model_pin, card, format) if again else None
        if pin is not None:
            return pin
        pin = publish_with_export(settings.model_board, settings.model_pin, local, card, settings.model_format, net)
    logger.info("Published the model as pin %s version %s on %s.", pin["name"], pin["version"], pin["board"])
    return pin


@dataclasses.dataclass(frozen=True)
class Saved:
    """The model a run ended with, as :func:`save_trained` saved it: the digest of its weights, whether every worker
    holds them (``agree``: None with one worker), its card, where it was saved and the pin it was published as (None:
    nowhere, or not on this worker), and with ``keep_best`` the best epoch (0-based) it is the model of."""

    digest: str
    agree: bool | None
    card: ModelCard
    model_path: str | None
    model_pin: dict[str, str] | None
    best_epoch: int | None


def save_trained(strategy: Any, topo: Topology, settings: TrainSettings, net: keras.Model, td: TrainingData,
                 data: Mapping[str, Any], metrics: Mapping[str, list[float]], *, best: Any,
                 started: Mapping[str, Any] | None, start: Resume, store: CheckpointStore | None,
                 callbacks: Sequence[Any] = (), evaluate: Callable[[Any, Any, ModelCard], Any] | None = None) -> Saved:
    """Save the model ``net`` ends with once training is over (or, ``start`` being finished, once its last checkpoint
    is restored): the best epoch's weights taken back (``best``, :func:`take_best_epoch`), ``callbacks`` given the
    model, the digest of its weights compared between the workers, its card (``metrics``, the epochs' metrics;
    ``started``, what the run started from; ``evaluate(strategy, net, card)``, the evaluation it records), the model
    saved in ``model_dir`` and published as ``model_pin``, and the model saved recorded in ``store``'s history file
    (:func:`record_saved_model`), so that the run given again finds it there. A collective with several
    workers: every worker calls it at the same point."""
    from ..model.saving import save_model
    from .agreement import weights_agree

    best_epoch = take_best_epoch(net, best)
    for callback in callbacks:  # the model as the run ends with it, also when no epoch was left to train
        callback.set_model(net)
    digest = weights_digest(net)
    agree = weights_agree(strategy, digest, topo) if topo.workers > 1 else None
    card = model_card(td, data, settings, metrics, digest, best_epoch,
                      started["model"] if started is not None else None)
    if evaluate is not None:
        card = dataclasses.replace(card, evaluation=evaluate(strategy, net, card))
    model_path = save_model(net, settings.model_dir, chief=topo.chief, workers=topo.workers, card=card)
    finished = start.finished(settings.epochs)
    model_pin = publish_model(net, settings, topo, card, again=finished)
    if store is not None and model_path is not None:  # a run given again finds it saved (.finished)
        record_saved_model(store, digest, (start.epoch if finished else settings.epochs, 0), agree)
    return Saved(digest, agree, card, model_path, model_pin, best_epoch)


def record_saved_model(store: CheckpointStore, digest: str, position: tuple[int, int], agree: bool | None) -> None:
    """Record in ``store``'s history file (the chief's; a no-op elsewhere) that the model of weights ``digest`` is
    saved, the model of the checkpoint at ``position``, and whether every worker ended with those weights (``agree``,
    the history's ``weights_agree``), so that the run given again returns them as this one did: only when the history
    file is at that position (one behind its checkpoint records nothing). A record that cannot be written is said: the
    run given again saves the model again."""
    from ..errors import AlexnetError
    from .history_file import SAVED_MODEL

    if not store.chief:
        return
    try:
        state = store.read_state()
        if state is None or list(state.get("position") or []) != list(position):
            return
        store.write_state({**state, SAVED_MODEL: {"weights_sha256": digest, "weights_agree": agree,
                                                 "position": list(position)}})
    except (OSError, AlexnetError) as error:
        logger.warning("%s: the model saved is not recorded in its history (%s); run again with every epoch done, "
                       "the run saves it again.", store.location, error)
