"""``alexnet_features()``: what a trained AlexNet's inner layers make of images, a row of numbers per image.

The paper judged what the network learned by its last hidden layer: images whose 4096 values there lie close (in
Euclidean distance) look alike to the network, even where their pixels do not. Those values (the layer ``fc2`` of
:mod:`alexnet.model.network`), or those of another layer of :data:`~alexnet.model.options.FEATURE_LAYERS`, are also
what a model trained on ImageNet lends to other tasks: the inputs of a small classifier, a search or a clustering.

Images are taken and decoded as :func:`alexnet.alexnet_predict` takes them (:func:`~alexnet.model.predict.image_list`
and :func:`~alexnet.model.predict.decoded_chunks`: files, locations, folders or bytes; the centre crop at the card's
image size), a chunk at a time, so that memory holds one chunk's pixels and the values computed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..declare import declaration
from ..result import returns_result
from .options import FEATURE_LAYERS, FeaturesOptions
from .predict import decoded_chunks, image_list
from .saved import load_model, named_layer

logger = logging.getLogger(__name__)


def layer_model(model: Any, layer: str) -> Any:
    """A model of ``model``'s input and the output of its layer named ``layer`` (the same weights, computed without
    dropout); an :class:`AlexnetError` naming the layers it has when it has no such layer."""
    from ..tfimport import keras

    chosen = named_layer(model, layer, f"give `layer` as one of {', '.join(FEATURE_LAYERS)} with a model "
                         "alexnet_train() saved.")
    return keras.Model(model.inputs, chosen.output, name=f"{model.name}_{layer}")


#: The defaults of the options: ``layer`` is also given by position.
_DEFAULTS = declaration.defaults(FeaturesOptions)


@returns_result
def alexnet_features(model: Any, images: Any, layer: str = _DEFAULTS["layer"], **options: Any) -> dict[str, Any]:
    """The values of ``layer`` for each image, in the order the images are given: a row of numbers per image.

    ``model`` and ``images`` are taken as :func:`alexnet.alexnet_predict` takes them (a model pin, a ``model_dir`` or
    ``alexnet.keras`` location or, from Python, a ``keras.Model``; image files, locations, folders or encoded images),
    and each image is decoded as evaluation does, at the card's image size. ``layer`` is one of
    :data:`~alexnet.model.options.FEATURE_LAYERS`: ``"fc2"``, the default, holds the 4096 values whose distances the
    paper used to find images the network sees as alike. Its options
    (:class:`~alexnet.model.options.FeaturesOptions`) are listed below.

    Returns a dict: ``image`` (each image's name, as :func:`alexnet.alexnet_predict` gives it: its path or location,
    or ``<bytes i>``), ``layer``, ``features``, a float32 array with a row per image and a column per value of the
    layer, and ``columns``, the names of its columns (:func:`feature_columns`). Images that cannot be read or decoded
    raise one :class:`AlexnetError` naming each of them, and nothing is returned; with ``skip_bad``, they are left
    out, named in a warning.
    """
    items = image_list(images)
    chosen = declaration.check(FeaturesOptions, {"layer": layer, **options}, "alexnet_features()")
    loaded = load_model(model)
    inner = layer_model(loaded.model, chosen.layer)
    names: list[str] = []
    rows: list[np.ndarray] = []
    for chunk_names, pixels in decoded_chunks(items, loaded.card.image_size, "no features were computed", "features",
                                              skip=chosen.skip_bad):
        names.extend(chunk_names)
        for start in range(0, len(pixels), chosen.batch_size):
            # called, not predict_on_batch(): a new model's predict function traced on every call would be retraced
            batch = np.asarray(inner(pixels[start : start + chosen.batch_size], training=False), dtype=np.float32)
            rows.append(batch.reshape(len(batch), -1))
    features = np.concatenate(rows)
    logger.info("%d values of layer %s for each of %d images", features.shape[1], chosen.layer, len(names))
    return {"image": names, "layer": chosen.layer, "features": features,
            "columns": feature_columns(chosen.layer, features.shape[1], loaded.card.class_ids)}


def feature_columns(layer: str, values: int, class_ids: Sequence[str] = ()) -> list[str]:
    """The names of the ``values`` columns of ``layer``'s features: ``<layer>_1`` to ``<layer>_<values>``, and for
    ``logits`` the model's ``class_ids`` (WordNet ids, by label), one column per class."""
    if layer == "logits" and len(class_ids) == values:
        return [str(class_id) for class_id in class_ids]
    return [f"{layer}_{k}" for k in range(1, values + 1)]


declaration.take_declared(alexnet_features, FeaturesOptions, title="Its options, with their defaults:")
