"""The model a run ends with, once training is over: with ``keep_best``, the weights of the best epoch taken back
(:func:`take_best_epoch`); the digest of its weights (:func:`weights_digest`, equal on every worker of a synchronous
run); its card (:func:`model_card`: classes, input size, training and data); and, with ``model_pin``, its publication
as a model pin, with the export ``model_format`` asks for beside it (:func:`publish_model`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tf_keras as keras

    from ..input.inputs import TrainingData
    from ..model.card import ModelCard
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
