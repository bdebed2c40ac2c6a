"""The serving graph of an export: a float32 copy of a trained model and the signatures TensorFlow serves it with.

:func:`save_serving` writes a TensorFlow SavedModel that plain TensorFlow loads (``tf.saved_model.load``, TensorFlow
Serving, ``saved_model_cli``, other languages' bindings), without this package or Keras. Its signatures:

``serving_default``
    ``images``: a ``[batch]`` string tensor of encoded images (JPEG, PNG, GIF, BMP, WebP; CMYK and grayscale JPEGs
    too; of a GIF, its first frame, as in ``alexnet_predict()``; not an animated WebP).
    Each is decoded and centre-cropped at the card's image size by :func:`alexnet.input.decode.decode_for_eval`,
    the function ``alexnet_predict()`` decodes with, inside the graph. Returns, per image, the ``top`` most
    probable classes, best first: ``indices`` (int32 label numbers), ``ids`` (WordNet ids), ``names`` and
    ``probabilities`` (float32), each ``[batch, top]``, and ``ok`` (bool ``[batch]``) and ``error`` (string
    ``[batch]``). An image that cannot be decoded does not fail the call: its ``ok`` is false, its ``error`` says why
    (``empty``, ``not a JPEG, PNG, GIF, BMP or WebP image``, ``an animated WebP is not read (a still one is)``,
    ``truncated or corrupt``, ``too large to decode safely (N pixels, more than the limit 89478485)``), its ``indices``
    are -1, its ``ids`` and ``names`` empty and its ``probabilities`` 0. As in ``alexnet_predict()``, a JPEG is read to
    its end first (at 1/8 scale), so a truncated one is reported even when its centre could be decoded, and an image
    whose header declares more pixels than :data:`alexnet.data.images.MAX_PIXELS` (the limit ``alexnet_predict()``,
    training and evaluation apply too) is refused before anything of it is decoded: a small file can decode to
    gigabytes.
``pixels``
    ``pixels``: float32 ``[batch, size, size, 3]``, RGB values in 0-255 already cropped to the card's size (what
    ``decode_for_eval`` gives, as floats). Returns ``indices``, ``ids``, ``names`` and ``probabilities``. This is
    the signature a TF Lite conversion takes: TF Lite has no image decoding, the application decodes.

The model runs in float32 whatever precision it trained in: :func:`float32_copy` rebuilds it with float32 layers
and a float32 input (the network's first layer normalises pixels itself) and gives it the trained weights.
"""

from __future__ import annotations

import os
from typing import Any

from ..data import images as image_checks
from ..input.formats import ANIMATED_WEBP, ANIMATED_WEBP_REASON, IMAGE_FORMATS, formats_read
from ..tfimport import keras, tf, unconverted
from .card import ModelCard

#: The signature taking encoded images, and the one taking decoded pixels.
IMAGES_SIGNATURE = "serving_default"
PIXELS_SIGNATURE = "pixels"

#: The reason given for an image of a format not read, and for an animated WebP.
NOT_READ = f"not a {formats_read()} image"
ANIMATED = ANIMATED_WEBP_REASON


def float32_copy(model: keras.Model) -> keras.Model:
    """``model`` rebuilt with every layer computing in float32 and a float32 input of the same shape, holding
    ``model``'s weights (a model trained in mixed bfloat16 or float16 keeps float32 weights, but computes in 16
    bits, and its saved policy says so)."""

    def float32_layer(layer: Any) -> Any:
        config = layer.get_config()
        if "dtype" in config:
            config["dtype"] = "float32"
        return layer.__class__.from_config(config)

    shape = model.input_shape[0] if isinstance(model.input_shape, list) else model.input_shape
    inputs = keras.Input(shape[1:], dtype="float32", name="pixels")
    copy = keras.models.clone_model(model, input_tensors=inputs, clone_function=float32_layer)
    copy.set_weights(model.get_weights())
    return copy


def decode_images(images: tf.Tensor, image_size: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``[batch]`` encoded images to uint8 pixels ``[batch, image_size, image_size, 3]`` (zeros where an image cannot
    be decoded), ``ok`` (bool ``[batch]``) and ``error`` (string ``[batch]``, empty where ok).

    Each image goes through :func:`~alexnet.input.decode.decode_for_eval` in a tf.data map whose errors are
    skipped, so one bad image costs only itself; the decoded ones are put back in place by their index. An image of
    a format not read (:data:`~alexnet.input.decode.IMAGE_FORMATS`), or whose header declares more pixels than
    :data:`alexnet.data.images.MAX_PIXELS` (its value when the graph is built), is refused without being decoded."""
    from ..input.decode import decode_for_eval
    from ..input.headers import header_format, header_pixels, is_jpeg

    count = tf.shape(images)[0]
    limit = image_checks.MAX_PIXELS
    read = tf.constant(list(IMAGE_FORMATS))

    def decode(index: tf.Tensor, contents: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        def read_to_the_end() -> tf.Tensor:  # every entropy-coded byte is read at 1/8 scale: truncation shows
            return tf.shape(tf.io.decode_jpeg(contents, channels=3, ratio=8))[0] > 0

        def decoded() -> tf.Tensor:
            with tf.control_dependencies([tf.cond(is_jpeg(contents), read_to_the_end, lambda: tf.constant(True))]):
                return decode_for_eval(contents, image_size)

        pixels = header_pixels(contents)  # fails on a JPEG without a frame header: that image is then skipped
        refused = (pixels > limit) | ~tf.reduce_any(tf.equal(header_format(contents), read))
        image = tf.cond(refused, lambda: tf.zeros([image_size, image_size, 3], tf.uint8), decoded)
        return index, image, pixels

    decoded = (tf.data.Dataset.from_tensor_slices((tf.range(count), images))
               .map(unconverted(decode), num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
               .ignore_errors()
               .batch(1024))
    empty = (tf.zeros([0], tf.int32), tf.zeros([0, image_size, image_size, 3], tf.uint8), tf.zeros([0], tf.int64))
    index, pixels, sizes = decoded.reduce(empty, unconverted(lambda kept, batch: tuple(
        tf.concat([k, b], 0) for k, b in zip(kept, batch, strict=True))))
    where = index[:, None]
    pixels = tf.scatter_nd(where, pixels, tf.stack([count, image_size, image_size, 3]))
    sizes = tf.scatter_nd(where, sizes, [count])
    formats = tf.map_fn(unconverted(header_format), images, fn_output_signature=tf.string)
    too_large = sizes > limit
    before, after = image_checks.TOO_LARGE.format(pixels="\0", limit=limit).split("\0")
    ok = (tf.scatter_nd(where, tf.ones_like(index), [count]) > 0) & ~too_large \
        & tf.reduce_any(tf.equal(formats[:, None], read[None, :]), axis=1)
    reason = tf.where(tf.equal(tf.strings.length(images), 0), "empty",
                      tf.where(tf.equal(formats, ANIMATED_WEBP), ANIMATED,
                               tf.where(tf.equal(formats, ""), NOT_READ,
                                        tf.where(too_large,
                                                 tf.strings.join([before, tf.strings.as_string(sizes), after]),
                                                 "truncated or corrupt"))))
    return pixels, ok, tf.where(ok, "", reason)


class ServingModule(tf.Module):
    """The exported object: the float32 model, its classes' ids and names, and the two signature functions."""

    def __init__(self, model: keras.Model, card: ModelCard, top: int):
        super().__init__(name="alexnet")
        self.model = float32_copy(model)
        self.card_size = int(card.image_size)
        self.num_classes = int(card.num_classes)
        self.top = min(int(top), self.num_classes)
        self.class_ids = tf.constant(list(card.class_ids))
        self.class_names = tf.constant(list(card.class_names))
        size = self.card_size
        self.images = tf.function(self._images, input_signature=[tf.TensorSpec([None], tf.string, name="images")])
        self.pixels = tf.function(self._pixels,
                                  input_signature=[tf.TensorSpec([None, size, size, 3], tf.float32, name="pixels")])

    def _probabilities(self, pixels: tf.Tensor) -> tf.Tensor:
        # the convolutions refuse an empty batch: an empty request gets an empty answer
        return tf.cond(tf.shape(pixels)[0] > 0, lambda: self.model(pixels, training=False),
                       lambda: tf.zeros([0, self.num_classes], tf.float32))

    def _ranked(self, pixels: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities, indices = tf.math.top_k(self._probabilities(pixels), k=self.top)
        return {"indices": indices, "ids": tf.gather(self.class_ids, indices),
                "names": tf.gather(self.class_names, indices), "probabilities": probabilities}

    def _images(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
        pixels, ok, error = decode_images(images, self.card_size)
        ranked = self._ranked(tf.cast(pixels, tf.float32))
        keep = ok[:, None]
        return {"indices": tf.where(keep, ranked["indices"], -1), "ids": tf.where(keep, ranked["ids"], ""),
                "names": tf.where(keep, ranked["names"], ""),
                "probabilities": tf.where(keep, ranked["probabilities"], 0.0), "ok": ok, "error": error}

    def _pixels(self, pixels: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._ranked(pixels)


def _spec(tensor: Any) -> str:
    dims = ",".join("?" if d is None else str(d) for d in tensor.shape.as_list())
    return f"{tensor.dtype.name}[{dims}]"


def signature_summary(function: Any) -> dict[str, dict[str, str]]:
    """A concrete function's inputs and outputs by name, as ``dtype[dims]`` strings (``?`` for any)."""
    args, kwargs = function.structured_input_signature
    inputs = {**{spec.name: spec for spec in args}, **kwargs}
    return {"inputs": {name: _spec(spec) for name, spec in sorted(inputs.items())},
            "outputs": {name: _spec(spec) for name, spec in sorted(function.structured_outputs.items())}}


def save_serving(model: keras.Model, card: ModelCard, top: int, folder: str) -> dict[str, dict[str, Any]]:
    """Write ``model`` as a SavedModel into the local ``folder`` (see the module documentation); its signatures
    (:func:`signature_summary` of each, by name)."""
    module = ServingModule(model, card, top)
    functions = {IMAGES_SIGNATURE: module.images.get_concrete_function(),
                 PIXELS_SIGNATURE: module.pixels.get_concrete_function()}
    tf.saved_model.save(module, os.fspath(folder), signatures=functions)
    return {name: signature_summary(function) for name, function in functions.items()}


def tflite_bytes(saved_model: str) -> bytes:
    """The TF Lite flatbuffer of the :data:`PIXELS_SIGNATURE` of the SavedModel in ``saved_model``, converted by
    TensorFlow's ``tf.lite.TFLiteConverter.from_saved_model`` (float32, no quantisation)."""
    converter = tf.lite.TFLiteConverter.from_saved_model(os.fspath(saved_model), signature_keys=[PIXELS_SIGNATURE])
    return bytes(converter.convert())
