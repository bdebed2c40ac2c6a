"""``alexnet_predict()``: the most probable classes of images, by WordNet id and name, best first.

Images are decoded as evaluation decodes them (:func:`alexnet.input.decode.decode_for_eval`: the centre crop at
the card's image size), so CMYK and grayscale JPEGs and PNGs named ``.JPEG`` all work. Every image is read and
checked before anything is predicted: the unreadable ones are named together in one error, never dropped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..declare import declaration
from ..errors import AlexnetError
from .options import PredictOptions
from .saved import load_model

logger = logging.getLogger(__name__)


def _image_list(images: Any) -> list[str | bytes]:
    if isinstance(images, (str, bytes, os.PathLike)):
        images = [images]
    if isinstance(images, np.ndarray):
        images = images.reshape(-1).tolist()
    out: list[str | bytes] = [v if isinstance(v, bytes) else os.fspath(v) if isinstance(v, os.PathLike) else str(v)
                              for v in images]
    if not out:
        raise AlexnetError("`images` is empty: give image files, locations or (from Python) bytes.")
    return out


def read_image(location: str) -> bytes:
    """The bytes of the image at ``location`` (a path, ``file://``, ``gs://``, ``s3://`` or ``https://``)."""
    from ..storage.location import fs_path, location_kind, open_filesystem, resolve_location

    resolved = resolve_location(location, "image")
    if location_kind(resolved) == "file":
        with open(resolved, "rb") as f:
            return f.read()
    fs = open_filesystem(resolved, what="image")
    return bytes(fs.cat_file(fs_path(resolved)))


def _decode_all(items: Sequence[str | bytes], names: Sequence[str], image_size: int) -> np.ndarray:
    """Every image decoded at ``image_size``; one :class:`AlexnetError` naming every image that cannot be."""
    from ..data.images import check_image
    from ..input.decode import decode_for_eval
    from ..tfimport import tf

    decoded, problems = [], []
    for item, name in zip(items, names, strict=True):
        try:
            data = item if isinstance(item, bytes) else read_image(item)
        except AlexnetError as error:
            problems.append(f"{name}: {error}")
            continue
        except OSError as error:
            problems.append(f"{name}: cannot be read ({type(error).__name__}: {error})")
            continue
        usable, reason = check_image(data)
        if usable is None:
            problems.append(f"{name}: {reason}")
            continue
        try:
            decoded.append(decode_for_eval(tf.constant(data), image_size).numpy())
        except (tf.errors.OpError, ValueError) as error:
            problems.append(f"{name}: cannot be decoded ({type(error).__name__})")
    if problems:
        raise AlexnetError(f"{len(problems)} of {len(items)} image(s) cannot be used, so nothing was predicted:\n  "
                           + "\n  ".join(problems) + "\nFix or leave out these images.")
    return np.stack(decoded)


#: The defaults of a prediction's options: ``top`` is also given by position.
_DEFAULTS = declaration.defaults(PredictOptions)


def alexnet_predict(model: Any, images: Any, top: int = _DEFAULTS["top"], **options: Any) -> list[dict[str, Any]]:
    """The ``top`` most probable classes of each image, in the order the images are given.

    ``model``: a model pin from :func:`alexnet.alexnet_model`, a ``model_dir`` or ``alexnet.keras`` location,
    or (Python) a ``keras.Model``. ``images``: file paths or locations (folder files, ``file://``, ``gs://``,
    ``s3://``, ``https://``) or, from Python, ``bytes``. Each is decoded as evaluation does, at the card's image
    size, and scored ``batch_size`` at a time. Its options (:class:`~alexnet.model.options.PredictOptions`) are
    listed below.

    Returns one record per image and rank: ``image`` (as given, or ``<bytes i>`` for the ``i``-th image given
    as bytes, 0-based), ``rank`` (1 = most probable), ``id`` (the class's WordNet id, from the model's card),
    ``name`` and ``probability``; within an image, probabilities descend. Images that cannot be read or decoded
    raise one :class:`AlexnetError` naming each of them, before anything is predicted.
    """
    items = _image_list(images)
    chosen = declaration.check(PredictOptions, {"top": top, **options}, "alexnet_predict()")
    batch_size = chosen.batch_size
    loaded = load_model(model)
    card = loaded.card
    top = min(chosen.top, card.num_classes)
    names = [f"<bytes {i}>" if isinstance(item, bytes) else item for i, item in enumerate(items)]
    pixels = _decode_all(items, names, card.image_size)
    records: list[dict[str, Any]] = []
    for start in range(0, len(pixels), batch_size):
        probabilities = np.asarray(loaded.model.predict_on_batch(pixels[start : start + batch_size]))
        for offset, row in enumerate(probabilities):
            order = np.argsort(-row, kind="stable")[:top]
            for rank, label in enumerate(order, start=1):
                records.append({"image": names[start + offset], "rank": rank, "id": card.class_ids[label],
                                "name": card.class_names[label], "probability": float(row[label])})
    return records


declaration.take_declared(alexnet_predict, PredictOptions, title="Its options, with their defaults:")
