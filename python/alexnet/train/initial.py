"""A run that starts from a trained model's weights (``initial_model``), and the layers it leaves as they are
(``train_from``).

:data:`LEARNING_LAYERS` are AlexNet's layers with weights, in order; ``train_from`` names the first that learns, and
:func:`frozen_layers` the ones before it, which keep the weights they start with. :func:`start_from` copies a trained
model's weights into the model a run built: every layer of the same name and shape, and of the last layer
(``logits``) the weights of each class both models have (found by class id), the other classes keeping the run's own
fresh weights. A model of other classes is so the start of training on new categories (fine-tuning), a model of the
same classes the start of more training (another schedule, image size or data). A run that resumes from a checkpoint
takes the checkpoint's weights instead, without reading the initial model again (:func:`initial_weights`): the
checkpoints record what their run started from. This module imports TensorFlow only in :func:`start_from`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import AlexnetError

if TYPE_CHECKING:
    from .checkpoint import CheckpointStore, Resume

logger = logging.getLogger(__name__)

#: AlexNet's layers with weights that training changes, in order: ``train_from`` is one of them.
LEARNING_LAYERS = ("conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2", "logits")


def frozen_layers(train_from: str) -> tuple[str, ...]:
    """The layers before ``train_from``: those a run leaves with the weights it starts with."""
    return LEARNING_LAYERS[:LEARNING_LAYERS.index(train_from)]


def describe_start(taken: dict[str, Any], train_from: str) -> str:
    """One line on where a run started (``taken``, from :func:`start_from`) and what of it learns."""
    classes = taken["classes_kept"] + taken["classes_new"]
    learning = "every layer learning" if train_from == LEARNING_LAYERS[0] else \
        f"the layers from {train_from} on learning, those before it kept"
    return (f"Started from {taken['model']}: its weights in every layer, of the last one for "
            f"{taken['classes_kept']} of {classes} classes; {learning}.")


def check_architecture(reference: Any, dense_units: int, grouped: bool) -> None:
    """Raise, before any work, when the initial model ``reference`` (a checked ``initial_model``) records on its card
    other ``dense_units`` or ``grouped`` than the run's: its weights would not fit (a card that does not record them
    leaves the check to :func:`start_from`)."""
    from ..model.saved import model_source

    source = model_source(reference)
    recorded = (source.card.architecture or {}) if source.card is not None else {}
    for name, ours in (("dense_units", dense_units), ("grouped", grouped)):
        if name in recorded and recorded[name] != ours:
            theirs = recorded[name]
            said = repr(theirs) if isinstance(theirs, bool) else theirs
            raise AlexnetError(f"`initial_model` {source.description} was trained with {name} = {said}, and its "
                               f"weights fit only a run of the same: give the run {name} = {said}.")


def _shape_advice(layer: str, theirs: tuple[int, ...], ours: tuple[int, ...]) -> str:
    """What to give a run so that ``layer``, whose weights have shape ``ours``, takes weights of shape ``theirs``."""
    if layer in ("fc1", "fc2"):
        return f"dense_units = {theirs[-1]}"
    if layer in ("conv2", "conv4", "conv5") and len(theirs) == len(ours) == 4 and theirs[2] != ours[2]:
        # a grouped convolution's kernel sees half the channels: the initial model is grouped when its kernel's are
        return f"grouped = {theirs[2] < ours[2]}"
    return "the initial model's own settings"


def _class_weights(ours: list[Any], theirs: list[Any], our_ids: Sequence[str], their_ids: Sequence[str],
                   where: str) -> tuple[list[Any], int]:
    """The last layer's ``[kernel, bias]``: ``ours`` (fresh) with the columns of the classes ``theirs`` also has
    (by id) taken from it, and how many classes that is."""
    kernel, bias = (w.copy() for w in ours)
    their_kernel, their_bias = theirs
    if their_kernel.shape[0] != kernel.shape[0]:
        raise AlexnetError(f"{where}: its logits take {their_kernel.shape[0]} values where this run's take "
                           f"{kernel.shape[0]}: give the run dense_units = {their_kernel.shape[0]}.")
    position = {class_id: i for i, class_id in enumerate(their_ids)}
    kept = 0
    for j, class_id in enumerate(our_ids):
        i = position.get(class_id)
        if i is not None:
            kernel[:, j], bias[j] = their_kernel[:, i], their_bias[i]
            kept += 1
    return [kernel, bias], kept


def start_from(net: Any, initial: Any, class_ids: Sequence[str]) -> dict[str, Any]:
    """Copy the weights of ``initial`` (a model as :func:`alexnet.model.saved.load_model` takes it) into ``net``,
    whose classes are ``class_ids`` (by label); what was taken: ``model`` (its description), ``layers`` copied whole,
    ``classes_kept`` (classes whose last-layer weights came from it) and ``classes_new`` (the others).

    Every layer of :data:`LEARNING_LAYERS` but ``logits`` must have the same shape in both: a model of other
    ``dense_units`` or ``grouped`` is an :class:`AlexnetError` saying which setting to give."""
    from ..model.loaded import LOADED
    from ..model.saved import load_model, named_layer

    loaded = load_model(initial)
    where = f"`initial_model` {loaded.description}"
    advice = "it is not an AlexNet that alexnet_train() saved; give a model_dir, alexnet.keras or model pin it wrote."
    copied: list[str] = []
    kept = 0
    for name in LEARNING_LAYERS:
        layer = net.get_layer(name)
        ours, values = layer.get_weights(), named_layer(loaded.model, name, advice).get_weights()
        if len(values) != len(ours):
            raise AlexnetError(f"{where} has no layer {name} with a kernel and a bias: {advice}")
        if name == "logits":
            values, kept = _class_weights(ours, values, class_ids, loaded.card.class_ids, where)
        else:
            for mine, their in zip(ours, values, strict=True):
                if mine.shape != their.shape:
                    raise AlexnetError(f"{where}: its {name} has weights of shape {list(their.shape)} where this "
                                       f"run's has {list(mine.shape)}: give the run "
                                       f"{_shape_advice(name, tuple(their.shape), tuple(mine.shape))}.")
            copied.append(name)
        layer.set_weights(values)
        del ours, values  # a full-size fc1 is 150 MB a copy: one of each at a time
    taken = {"model": loaded.description, "layers": copied, "classes_kept": kept,
             "classes_new": len(class_ids) - kept}
    logger.info("Starting from %s: %s copied, the last layer's weights of %d of %d classes taken from it.",
                loaded.description, ", ".join(copied), kept, len(class_ids))
    del loaded
    LOADED.clear()  # the run holds the weights: the model they came from need not stay in memory
    return taken


def initial_description(reference: Any) -> str | None:
    """How a run names its ``initial_model`` (a pin's ``name@version``, or the location), read from its card without
    loading the model; None for none. A checkpoint records it, and a run that resumes must name the same."""
    if reference is None:
        return None
    from ..model.saved import model_source

    return model_source(reference).description


def initial_weights(strategy: Any, net: Any, initial: Any, class_ids: Sequence[str], train_from: str,
                    start: Resume, store: CheckpointStore | None) -> dict[str, Any] | None:
    """Where the weights of a run with ``initial`` (its ``initial_model``; None: none) come from, called once the
    checkpoint, if any, is restored (``start``): what the history calls ``started_from``.

    A fresh start copies the initial model's weights into ``net`` (:func:`start_from`) and records what it took with
    the checkpoints' settings (``store``). A run that resumes keeps the checkpoint's weights and returns what the
    checkpoints recorded, without reading the initial model (a full-size AlexNet is 230 MB, from a bucket a download),
    and its own checkpoints record it again.
    """
    if initial is None:
        return None
    if start.restored:
        recorded = start.settings.get("started_from")
        if not recorded:
            logger.warning("The checkpoints do not record what their run started from: the run resumes from their "
                           "weights, and `initial_model` is not read.")
            return None
        logger.info("Resuming a run that started from %s: its weights come from the checkpoint.", recorded["model"])
        taken = dict(recorded)
    else:
        with strategy.scope():
            taken = start_from(net, initial, class_ids)
        taken["text"] = describe_start(taken, train_from)
    if store is not None:  # each checkpoint records it again: the run may be resumed more than once
        store.settings["started_from"] = taken
    return taken
