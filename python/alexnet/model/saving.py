"""The saved model written: ``alexnet.keras`` in a ``model_dir``, with its card beside it as ``alexnet-model.json``.

Training saves its model with :func:`save_model` (every worker takes part, the chief writes), and publishes a copy
without the optimizer state (:func:`inference_copy`); :func:`write_card` writes a card beside a model file (a pin
fetched into a cache gets its card so). Each is written whole or not at all. Reading them is
:mod:`alexnet.model.saved`'s.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..scratch import make_scratch
from ..storage.location import fs_path, location_kind, open_filesystem, resolve_location
from .card import CARD_FILE, ModelCard

if TYPE_CHECKING:
    import tf_keras as keras

#: The model file in a ``model_dir``.
MODEL_FILE = "alexnet.keras"


def save_model(model: keras.Model, location: str | None, *, chief: bool, workers: int,
               card: ModelCard | None = None) -> str | None:
    """Save ``model`` as ``<location>/alexnet.keras`` on the chief, with ``card`` beside it as
    ``<location>/alexnet-model.json``; the model's location (None elsewhere, or without one).

    Every worker of a multi-worker run takes part in saving; the others write to a scratch folder that is
    deleted at once. The card is written after the model, so a card names a model that is there. A local model is
    written whole or not at all (to a temporary name in the same folder, then renamed): a run killed while saving
    leaves the model it had before, or none.
    """
    if location is None or (not chief and workers == 1):
        return None
    remote = location_kind(location) != "file"
    if chief and not remote:
        os.makedirs(location, exist_ok=True)
        path = os.path.join(location, MODEL_FILE)
        partial = os.path.join(location, f".{os.getpid()}-{MODEL_FILE}")  # Keras saves only to a .keras name
        try:
            model.save(partial)
            os.replace(partial, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)
        if card is not None:
            write_card(path, card)
        return path
    scratch = make_scratch("alexnet-model-")
    try:
        local = os.path.join(scratch, MODEL_FILE)
        model.save(local)
        if not chief:
            return None
        fs = open_filesystem(location, write=True)
        fs.put_file(local, posixpath.join(fs_path(location), MODEL_FILE))
        if card is not None:
            write_card(f"{location}/{MODEL_FILE}", card)
        return f"{location}/{MODEL_FILE}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def inference_copy(model: keras.Model) -> Iterator[str]:
    """``model`` saved without its optimizer state (what inference needs, half the size) and with every layer
    trainable (the layers a run kept as they were are the model's as much as the others), as a local
    ``alexnet.keras`` in a scratch folder deleted on exit; its path.

    Every worker of a multi-worker run must enter it at the same point, as saving takes all of them.
    """
    from ..tfimport import keras

    scratch = make_scratch("alexnet-model-")
    frozen = [layer for layer in model.layers if not layer.trainable]
    try:
        local = os.path.join(scratch, MODEL_FILE)
        # the copy is a model, not a run: every layer trainable, whatever a run's train_from kept as it was
        for layer in frozen:
            layer.trainable = True
        try:
            # the .keras format has no include_optimizer: save an uncompiled model over the same layers and weights
            keras.Model(model.inputs, model.outputs, name=model.name).save(local)
        finally:
            for layer in frozen:
                layer.trainable = False
        yield local
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write_card(model_path: str, card: ModelCard) -> None:
    """Write ``card`` as ``alexnet-model.json`` beside the model file ``model_path`` (a path, ``file://``, ``gs://``
    or ``s3://``): whole or not at all (a local card is written to a temporary name, then renamed)."""
    model_path = resolve_location(model_path, "model")
    if location_kind(model_path) == "file":
        folder = os.path.dirname(model_path)
        temporary = os.path.join(folder, f"{CARD_FILE}.{os.getpid()}.tmp")  # a process's own: two may write one
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(card.to_json())
        os.replace(temporary, os.path.join(folder, CARD_FILE))
        return
    fs = open_filesystem(model_path, write=True)
    fs.pipe_file(posixpath.join(posixpath.dirname(fs_path(model_path)), CARD_FILE), card.to_json().encode())
