"""The saved model read: ``alexnet.keras`` with its card beside it as ``alexnet-model.json``.

Training writes a ``model_dir`` with :func:`alexnet.model.saving.save_model` (and a copy without the optimizer state
for a pin with :func:`~alexnet.model.saving.inference_copy`). Evaluation, prediction and export take a ``model``
argument, resolved here, given as one of:

- a dict from :func:`alexnet.alexnet_model` (a model pin): its ``path`` when that file is on this machine,
  else the pin is fetched again from its ``board``, ``name`` and ``version`` into the ``cache_dir`` it was read
  with (how a Spark worker on another machine gets it);
- a location string: a ``model_dir`` folder or the path of an ``alexnet.keras``, on a folder, ``file://``,
  ``gs://`` or ``s3://`` (a remote file is downloaded into a cache folder first), with its card read from
  ``alexnet-model.json`` beside it;
- from Python only, a loaded ``keras.Model``.

A model without a card still works: its class ids and names are then its label numbers as strings and its
image size is its input size, or, for a model that takes every size (as training builds them), the paper's
224 (:data:`DEFAULT_IMAGE_SIZE`), with a warning either way. :func:`model_source` finds the model and its card without
loading it (no TensorFlow when the card is there); :func:`load_model` loads it, once per process for the same
file while it is in use (:class:`~alexnet.model.loaded.LoadedModels`: a long session stays flat).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import AlexnetError
from ..storage.location import fs_path, location_kind, open_filesystem, resolve_location
from .card import CARD_FILE, CARD_KEYS, ModelCard
from .keras_file import read_keras_file
from .loaded import LOADED
from .saving import MODEL_FILE

logger = logging.getLogger(__name__)

#: The image size of a model without a card whose input takes every size: the paper's.
DEFAULT_IMAGE_SIZE = 224
#: Keys a dict from ``alexnet_model()`` must have to be fetched again.
PIN_KEYS = ("board", "name", "version")


@dataclass(frozen=True)
class ModelSource:
    """Where a model is, found and checked but not loaded.

    ``kind`` is ``"pin"``, ``"location"`` or ``"object"``; ``description`` names it in results and errors (the
    path, or ``name@version`` for a pin); ``card`` is ``None`` for a model without a card (known once loaded);
    ``reference`` is what was given (the pin's dict, the resolved location, the ``keras.Model``).
    """

    kind: str
    description: str
    card: ModelCard | None
    reference: Any


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to use: the ``keras.Model``, its card (never ``None`` here) and its description."""

    model: Any
    card: ModelCard
    description: str


def _is_keras_model(value: Any) -> bool:
    return hasattr(value, "predict") and hasattr(value, "get_weights") and hasattr(value, "input_shape")


def _pin_card(values: Mapping[str, Any], where: str) -> ModelCard:
    card = dict(values)
    card["board"] = card.get("board_trained_from")
    return ModelCard.from_dict(card, where)


def _location_paths(resolved: str) -> tuple[Any, str, str]:
    """The file system of ``resolved``, the model file's path on it and the card's path beside it."""
    kind = location_kind(resolved)
    fs = open_filesystem(resolved, what="model")
    path = fs_path(resolved)
    try:
        folder = kind != "http" and fs.isdir(path)
        if folder:
            path = posixpath.join(path, MODEL_FILE) if kind != "file" else os.path.join(path, MODEL_FILE)
        exists = fs.exists(path) if kind != "file" else os.path.isfile(path)
    except Exception as error:
        raise AlexnetError(f"cannot reach the model {resolved}: {type(error).__name__}: {error}") from None
    if not exists and folder and _is_board(fs, fs_path(resolved)):
        raise AlexnetError(
            f"the model {resolved} is a board, not a saved model: read a model pin from it with alexnet_model("
            f"{resolved!r}, name), name being the `model_pin` training published, and give what it returns.")
    if not exists and folder and _is_export(fs, fs_path(resolved)):
        raise AlexnetError(
            f"the model {resolved} is an export (for serving without this package, alexnet_export()), not a saved "
            "model: give the model it was exported from (its model_dir, alexnet.keras or model pin).")
    if not exists:
        raise AlexnetError(
            f"the model {resolved} does not exist{' (the folder has no ' + MODEL_FILE + ')' if folder else ''}: give "
            "a model_dir that training saved to, the path of an alexnet.keras, or a model pin (alexnet_model())."
        )
    parent = os.path.dirname(path) if kind == "file" else posixpath.dirname(path)
    card = os.path.join(parent, CARD_FILE) if kind == "file" else posixpath.join(parent, CARD_FILE)
    return fs, path, card


def _is_export(fs: Any, folder: str) -> bool:
    """Does ``folder`` hold an export of :func:`alexnet.alexnet_export` (a SavedModel, or a TF Lite file)?"""
    from .options import EXPORT_MARKS

    try:
        return any(fs.exists(posixpath.join(folder, name)) for name in EXPORT_MARKS)
    except Exception:  # unknown: not said
        return False


def _is_board(fs: Any, folder: str) -> bool:
    """Does ``folder`` hold a pins board (its manifest)?"""
    from ..storage.board import MANIFEST

    try:
        return bool(fs.exists(posixpath.join(folder, MANIFEST)))
    except Exception:
        return False


def read_card(fs: Any, card_path: str, where: str) -> ModelCard | None:
    """The model card at ``card_path`` on ``fs`` (None when there is none); ``AlexnetError`` when it cannot be read."""
    try:
        text = fs.cat_file(card_path)
    except FileNotFoundError:
        return None
    except Exception as error:
        raise AlexnetError(f"cannot read the model card {card_path}: {type(error).__name__}: {error}") from None
    return ModelCard.from_json(text, where)


def model_source(model: Any) -> ModelSource:
    """Find ``model`` (see the module documentation) and read its card, without loading it.

    A model that does not exist, a dict that is not from ``alexnet_model()``, or anything else raises an
    :class:`AlexnetError` naming it, before any work.
    """
    if isinstance(model, ModelSource):
        return model
    if isinstance(model, Mapping):
        values = dict(model)
        findable = all(values.get(k) for k in PIN_KEYS) or values.get("path")
        missing = [*([] if findable else [k for k in PIN_KEYS if not values.get(k)]),
                   *(k for k in CARD_KEYS if values.get(k) is None)]
        if missing:
            raise AlexnetError(
                "a model given as a dict must be what alexnet_model() returns (a model pin: its board, name and "
                f"version with its card's {', '.join(CARD_KEYS)}); this one lacks {', '.join(missing)}: give "
                "alexnet_model(board, name, version), or the location of a model_dir or alexnet.keras."
            )
        description = f"{values.get('name')}@{values.get('version')}" if values.get("name") else str(values["path"])
        return ModelSource("pin", description, _pin_card(values, f"the model {description}"), values)
    if isinstance(model, (str, os.PathLike)):
        resolved = resolve_location(model, "model")
        fs, path, card_path = _location_paths(resolved)
        remote_folder = location_kind(resolved) != "file" and path != fs_path(resolved)
        shown = f"{resolved}/{MODEL_FILE}" if remote_folder else resolved if location_kind(resolved) != "file" else path
        return ModelSource("location", shown, read_card(fs, card_path, card_path), resolved)
    if _is_keras_model(model):
        return ModelSource("object", f"keras model {getattr(model, 'name', '')}".strip(), None, model)
    raise AlexnetError(
        f"`model` must be a model pin from alexnet_model(), the location of a model_dir or alexnet.keras (folder, "
        f"file://, gs://, s3://) or a keras model, not a {type(model).__name__}."
    )


def model_reference(model: Any, setting: str) -> str | dict[str, Any]:
    """``model``, the value of ``setting`` (a location or a dict from ``alexnet_model()``), found and its card read
    (:func:`model_source`), as the plain value a Spark worker is sent: the resolved location, or the pin's dict."""
    try:
        source = model_source(model)
    except AlexnetError as error:
        raise AlexnetError(f"`{setting}`: {error}") from None
    if source.kind == "object":
        raise AlexnetError(f"`{setting}` must be a model pin from alexnet_model() or the location of a model_dir or "
                           "alexnet.keras (what every worker can read), not a loaded keras model: save it first.")
    return source.reference if isinstance(source.reference, str) else dict(source.reference)


def _remote_copy(resolved: str) -> tuple[str, str]:
    """A local copy of the model file at ``resolved`` (remote), and the key it is cached under."""
    from ..storage.cache import location_key
    from ..storage.transfer import download
    from .pin import default_model_cache

    fs, path, _ = _location_paths(resolved)
    stamp = str(fs.checksum(path))
    folder = os.path.join(default_model_cache(), "remote", location_key(resolved))
    local = os.path.join(folder, MODEL_FILE)
    marker = os.path.join(folder, "source.json")
    try:
        with open(marker, encoding="utf-8") as f:
            if json.load(f) == {"location": resolved, "stamp": stamp} and os.path.isfile(local):
                return local, stamp
    except (OSError, ValueError):
        pass
    os.makedirs(folder, exist_ok=True)
    logger.info("Downloading the model %s", resolved)
    download(fs, path, local)
    with open(marker, "w", encoding="utf-8") as f:
        json.dump({"location": resolved, "stamp": stamp}, f)
    return local, stamp


def _local_file(source: ModelSource) -> tuple[str, str]:
    """The local model file of ``source`` and its cache key (SHA-256, or size and modification time)."""
    if source.kind == "pin":
        values = source.reference
        path = values.get("path")
        if path and os.path.isfile(path) and (not values.get("bytes") or os.path.getsize(path) == int(values["bytes"])):
            return str(path), str(values.get("sha256") or os.stat(path).st_mtime_ns)
        if not all(values.get(k) for k in PIN_KEYS):
            raise AlexnetError(f"the model file {path} does not exist here, and the dict names no pin to fetch it "
                               "from: call alexnet_model() again.")
        from .pin import fetch_again

        fetched = fetch_again(values)
        return fetched["path"], fetched["sha256"]
    resolved = source.reference
    if location_kind(resolved) != "file":
        return _remote_copy(resolved)
    path = os.path.join(resolved, MODEL_FILE) if os.path.isdir(resolved) else resolved
    info = os.stat(path)
    return path, f"{info.st_size}-{info.st_mtime_ns}"


def input_size(model: Any) -> int | None:
    """The image side ``model``'s input is fixed to, or ``None`` when it takes every size (a model built with
    ``image_size=None``, as training builds them since the adaptive pooling to 6x6)."""
    shape = model.input_shape
    if isinstance(shape, list):  # a model with several inputs: AlexNet has one
        shape = shape[0]
    height, width = shape[1], shape[2]
    if height is None or width is None or int(height) != int(width):
        return None
    return int(height)


def card_of(model: Any, card: ModelCard | None, description: str) -> ModelCard:
    """``card`` checked against the loaded ``model``, or, without one, a card made from the model itself: its
    classes named by their label numbers and its image size its input's, or :data:`DEFAULT_IMAGE_SIZE` when the
    input takes every size."""
    outputs = int(model.output_shape[-1])
    fixed = input_size(model)
    if card is None:
        size = DEFAULT_IMAGE_SIZE if fixed is None else fixed
        where = f"its input size, {size}" if fixed is not None else \
            f"{size}, the paper's size (its input takes every size; save the model with its card to use the size it " \
            "was trained at)"
        logger.warning("The model %s has no card (%s): its classes are named by their label numbers, and images are "
                       "decoded at %s.", description, CARD_FILE, where)
        names = [str(i) for i in range(outputs)]
        return ModelCard(image_size=size, num_classes=outputs, class_ids=names, class_names=list(names))
    if card.num_classes != outputs:
        raise AlexnetError(f"the card of the model {description} names {card.num_classes} classes, but the model has "
                           f"{outputs} outputs: the card belongs to another model; save them together again.")
    if fixed is not None and fixed != card.image_size:
        raise AlexnetError(f"the card of the model {description} says images of {card.image_size} pixels, but the "
                           f"model takes only {fixed}: the card belongs to another model; save them together again.")
    return card


def load_model(model: Any) -> LoadedModel:
    """``model`` (anything :func:`model_source` takes, or a :class:`ModelSource`) loaded and ready to predict.

    Loading registers alexnet's custom objects, and a file loaded in this process is not loaded again while it is in
    use or the last one asked for (by its path and SHA-256, or size and modification time; see
    :class:`LoadedModels`).
    """
    source = model_source(model)
    if source.kind == "object":
        return LoadedModel(source.reference, card_of(source.reference, None, source.description), source.description)
    path, stamp = _local_file(source)

    def load() -> Any:
        logger.info("Loading the model %s", path)
        return read_keras_file(path)

    try:
        loaded = LOADED.get((os.path.realpath(path), stamp), load)
    except AlexnetError:
        again = _damaged_pin_fetched_again(source, path)
        if again is None:
            raise
        path, stamp = again
        loaded = LOADED.get((os.path.realpath(path), stamp), load)
    return LoadedModel(loaded, card_of(loaded, source.card, source.description), source.description)


def _damaged_pin_fetched_again(source: ModelSource, path: str) -> tuple[str, str] | None:
    """A model pin's cached file at ``path`` that could not be loaded, fetched again (its path and cache key) when its
    bytes are not the pin's (damaged in the cache since alexnet_model() read it); None when they are, or when the
    dict names no pin to fetch it from."""
    from ..storage.transfer import sha256_file

    values = source.reference if source.kind == "pin" else {}
    if not (values.get("sha256") and all(values.get(k) for k in PIN_KEYS)) or sha256_file(path) == values["sha256"]:
        return None
    logger.warning("The cached model file %s is not the pin's (its SHA-256 differs: damaged since it was fetched); "
                   "fetching it again.", path)
    from .pin import fetch_again

    fetched = fetch_again(values)
    return fetched["path"], fetched["sha256"]


def named_layer(model: Any, name: str, advice: str) -> Any:
    """The layer ``name`` of the Keras ``model``; an :class:`AlexnetError` naming the layers it has, followed by
    ``advice``, when it has none of that name."""
    names = [layer.name for layer in model.layers]
    if name not in names:
        raise AlexnetError(f"the model has no layer {name!r} (it has {', '.join(names)}): {advice}")
    return model.get_layer(name)

