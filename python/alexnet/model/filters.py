"""``alexnet_filters()``: the filters of a trained AlexNet's first convolution, as pictures.

The first layer's 96 filters of 11 x 11 pixels look at colour directly, so each can be shown as a small image: the
AlexNet paper's Figure 3 shows them, and they are the first thing to look at after a run. A network that learned
shows smooth oriented edges, stripes of several frequencies and blobs of colour; one that did not (too few steps,
a learning rate that diverged, a broken input pipeline) shows noise much like its random start.

Each filter is scaled on its own, its lowest weight to 0 and its highest to 1 (a filter of equal weights is grey), and
the filters are laid out in a grid (:func:`filter_grid`), in the order of the layer's outputs.
"""

from __future__ import annotations

import io
import logging
import math
import os
import posixpath
from typing import Any

import numpy as np

from ..errors import AlexnetError
from ..result import returns_result
from .saved import load_model, named_layer

logger = logging.getLogger(__name__)

#: The layer drawn: the first convolution of :func:`alexnet.model.network.build_alexnet`.
LAYER = "conv1"
#: Each weight of a filter drawn as a square of this many pixels a side in the grid.
ZOOM = 5
#: Pixels between two filters and around the grid, which is white.
GAP = 3


def scaled_kernels(kernel: np.ndarray) -> np.ndarray:
    """A convolution's kernel ``[height, width, 3, filters]`` as ``[filters, height, width, 3]`` pictures in 0..1: each
    filter scaled on its own, its lowest weight 0 and its highest 1 (0.5 throughout when its weights are all equal)."""
    pictures = np.transpose(np.asarray(kernel, dtype=np.float64), (3, 0, 1, 2))
    low = pictures.min(axis=(1, 2, 3), keepdims=True)
    span = pictures.max(axis=(1, 2, 3), keepdims=True) - low
    scaled = np.divide(pictures - low, span, out=np.full_like(pictures, 0.5), where=span > 0)
    return scaled.astype(np.float32)


def grid_columns(count: int) -> int:
    """The columns of the grid of ``count`` filters: about 4 for every 3 rows (12 x 8 for the paper's 96)."""
    return max(1, min(count, math.ceil(math.sqrt(count * 4 / 3))))


def filter_grid(pictures: np.ndarray, zoom: int = ZOOM, gap: int = GAP) -> np.ndarray:
    """``pictures`` ``[filters, height, width, 3]`` in 0..1 as one ``uint8`` RGB image ``[rows, columns, 3]``: the
    filters side by side, :func:`grid_columns` to a row, each of its weights a ``zoom`` x ``zoom`` square, ``gap``
    white pixels between them and around them."""
    count, height, width, _ = pictures.shape
    columns = grid_columns(count)
    rows = math.ceil(count / columns)
    tile_h, tile_w = height * zoom, width * zoom
    image = np.full((gap + rows * (tile_h + gap), gap + columns * (tile_w + gap), 3), 255, dtype=np.uint8)
    tiles = np.round(np.clip(pictures, 0, 1) * 255).astype(np.uint8).repeat(zoom, axis=1).repeat(zoom, axis=2)
    for k, tile in enumerate(tiles):
        top, left = gap + (k // columns) * (tile_h + gap), gap + (k % columns) * (tile_w + gap)
        image[top : top + tile_h, left : left + tile_w] = tile
    return image


def _png_destination(path: Any) -> tuple[str, Any]:
    """``path`` (a path, ``file://``, ``gs://`` or ``s3://``) resolved and checked to end in .png, its folder
    created or checked writable; with its file system."""
    from ..storage.location import WRITABLE, resolve_location
    from ..storage.outputs import writable_location

    resolved = resolve_location(path, "path", takes=WRITABLE)
    if not resolved.lower().endswith(".png"):
        raise AlexnetError(f"`path` = {resolved} does not end in .png: give the PNG file to write, e.g. conv1.png.")
    folder = posixpath.dirname(resolved.rstrip("/")) if "://" in resolved else os.path.dirname(resolved) or "."
    return resolved, writable_location(folder, "path", keep=False)[1]  # made when the file is written


def _write_png(image: np.ndarray, resolved: str, fs: Any) -> str:
    """Write ``image`` as a PNG file at ``resolved`` (see :func:`_png_destination`); the location written."""
    from PIL import Image

    from ..storage.location import fs_path

    data = io.BytesIO()
    Image.fromarray(image, "RGB").save(data, format="PNG")
    if "://" not in resolved:
        os.makedirs(os.path.dirname(resolved) or ".", exist_ok=True)
    fs.pipe_file(fs_path(resolved), data.getvalue())
    return resolved


@returns_result
def alexnet_filters(model: Any, path: Any = None) -> dict[str, Any]:
    """The filters of ``model``'s first convolution as pictures, and drawn side by side into the PNG file ``path``
    when it is given.

    ``model`` is taken as :func:`alexnet.alexnet_predict` takes it (a model pin, a ``model_dir`` or ``alexnet.keras``
    location or, from Python, a ``keras.Model``). ``path``: a PNG file to write, a path, ``file://``, ``gs://`` or
    ``s3://`` location (its folder created, or a bucket prefix that must be writable).

    Returns a dict: ``layer`` (``"conv1"``), ``filters`` (96 for AlexNet), ``size`` (``[11, 11]``), ``kernels`` (a
    float32 array ``[filters, height, width, 3]``: each filter scaled on its own to 0..1, its lowest weight 0 and its
    highest 1), ``image`` (the grid as a ``uint8`` RGB array ``[rows, columns, 3]``: the filters 12 to a row for 96,
    each weight a 5-pixel square, on white) and ``path`` (the location written, or ``None``).
    """
    destination = None if path is None else _png_destination(path)  # a mistake in it said before the model loads
    layer = named_layer(load_model(model).model, LAYER, "give a model that alexnet_train() saved.")
    kernel = np.asarray(layer.get_weights()[0])
    if kernel.ndim != 4 or kernel.shape[2] != 3:
        raise AlexnetError(f"the layer {LAYER!r} of this model has a kernel of shape {list(kernel.shape)}, not "
                           "[height, width, 3, filters]: give a model that alexnet_train() saved.")
    kernels = scaled_kernels(kernel)
    image = filter_grid(kernels)
    written = None if destination is None else _write_png(image, *destination)
    if written is not None:
        logger.info("%d filters of %s drawn to %s", len(kernels), LAYER, written)
    return {"layer": LAYER, "filters": int(kernel.shape[3]), "size": [int(kernel.shape[0]), int(kernel.shape[1])],
            "kernels": kernels, "image": image, "path": written}
