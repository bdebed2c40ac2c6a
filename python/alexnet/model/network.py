"""AlexNet (Krizhevsky, Sutskever and Hinton, 2012): the network, in Keras 2 (tf-keras).

The layers are the paper's: five convolutions, 96 11x11 filters with stride 4, 256 5x5, 384 3x3, 384 3x3
and 256 3x3, each followed by a ReLU; overlapping max pooling (3x3, stride 2) after the first, second and
fifth; two fully connected layers of 4096 units with ReLU and dropout 0.5; ``num_classes`` outputs with a
softmax. At 224x224 the feature maps are the paper's 55, 27, 13 and 6 pixels square (the first convolution
pads the input by 2 pixels on each side, the usual fix for the paper's 224-versus-227 inconsistency), so
the first dense layer sees 6x6x256 = 9216 inputs.

Where this network differs from the paper, and why:

- No local response normalisation: later work found it adds compute for little or no accuracy, and no
  modern implementation keeps it.
- One tower: the paper split conv2, conv4 and conv5 into two groups of filters only to fit two 3 GB GPUs.
  ``grouped=True`` restores that split (60,965,224 parameters for 1000 classes instead of 62,378,344).
- Inputs are ``uint8`` pixels; the first layer subtracts the ImageNet per-channel mean and divides by its
  standard deviation (the paper subtracted the mean image only).
- Glorot-uniform weights and zero biases instead of N(0, 0.01) weights with some biases at 1: the
  paper's initialisation is known to stall without its exact schedule, and without batch normalisation
  Glorot's scale keeps the first steps at learning rate 0.01 stable where He-normal weights can diverge.
- Dropout follows each of the two hidden dense layers, as in the paper.
- An adaptive average pooling to 6x6 (:func:`adaptive_pooling`) before the dense layers: the identity
  at 224 pixels, where the last feature map is already 6x6, it lets one model take images of any size from
  :data:`~alexnet.checks.MIN_IMAGE_SIZE` on, so that training can start on small images and end on large ones
  (see ``image_size`` in :func:`alexnet.alexnet_train`). It is built from TensorFlow ops that Keras saves as
  its own layers, so an ``alexnet.keras`` loads with ``tf_keras.models.load_model`` alone, without this package.

How the network is trained (optimizer, learning rate) is :mod:`alexnet.train.model`'s.
"""

from __future__ import annotations

from typing import Any

from ..checks import as_image_size
from ..errors import AlexnetError
from ..tfimport import keras, tf

#: ImageNet per-channel mean and standard deviation of RGB pixels in 0-255.
IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
#: The side of the last feature map the dense layers read (the paper's, at 224 pixels).
FEATURE_SIDE = 6


def _pooling_matrix(size: tf.Tensor, bins: int, dtype: tf.DType) -> tf.Tensor:
    """``[bins, size]``: row ``i`` averages positions ``floor(i * size / bins)`` to ``ceil((i + 1) * size / bins)``
    (exclusive), the bins of an adaptive average pooling; the identity when ``size == bins``."""
    positions = tf.range(size)
    index = tf.range(bins)
    start = (index * size) // bins
    end = ((index + 1) * size + bins - 1) // bins
    inside = (positions[None, :] >= start[:, None]) & (positions[None, :] < end[:, None])
    weights = tf.cast(inside, tf.float32)
    return tf.cast(weights / tf.reduce_sum(weights, axis=1, keepdims=True), dtype)


@keras.saving.register_keras_serializable(package="alexnet")
class AdaptiveAveragePooling2D(keras.layers.Layer):
    """The pooling of models saved before :func:`adaptive_pooling` replaced it, kept so that they still load (as
    ``alexnet>AdaptiveAveragePooling2D``) and predict; new models do not use it.

    Average pooling of a ``[batch, height, width, channels]`` map to ``[batch, side, side, channels]`` for any
    height and width: each output cell averages its share of the rows and columns, shares that overlap when the
    map does not divide evenly and repeat the map's cells when it is smaller than ``side``. The identity on a
    ``side`` x ``side`` map."""

    def __init__(self, side: int = FEATURE_SIDE, **kwargs: Any):
        super().__init__(**kwargs)
        self.side = int(side)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        """Pool ``inputs`` to ``side`` x ``side``."""
        shape = tf.shape(inputs)
        rows = _pooling_matrix(shape[1], self.side, inputs.dtype)
        columns = _pooling_matrix(shape[2], self.side, inputs.dtype)
        return tf.einsum("ih,bhwc,jw->bijc", rows, inputs, columns)

    def compute_output_shape(self, input_shape: Any) -> tuple[Any, ...]:
        """``(batch, side, side, channels)``."""
        shape = tf.TensorShape(input_shape).as_list()
        return (shape[0], self.side, self.side, shape[-1])

    def get_config(self) -> dict[str, Any]:
        """The layer's config with ``side``."""
        return {**super().get_config(), "side": self.side}


def _bins(size: Any, side: int) -> Any:
    """``[side, size]`` float32 on Keras tensors: row ``i`` averages positions ``floor(i * size / side)`` to
    ``ceil((i + 1) * size / side)`` (exclusive), 1 / their count each; the identity when ``size == side``.

    Only ops Keras serialises as its own ``TFOpLambda`` layers (no ``*args``, as ``tf.einsum`` has)."""
    index = tf.range(side)
    start = (index * size) // side
    end = ((index + 1) * size + side - 1) // side
    inside = tf.cast(tf.sequence_mask(end, size), tf.float32) - tf.cast(tf.sequence_mask(start, size), tf.float32)
    return inside / tf.cast(end - start, tf.float32)[:, None]


def adaptive_pooling(channels: int, side: int = FEATURE_SIDE, name: str = "pool_to_6x6") -> keras.Model:
    """Adaptive average pooling of ``[batch, height, width, channels]`` maps to ``[batch, side, side, channels]``,
    for any height and width, as a small functional model of built-in TensorFlow ops (a layer of the network).

    Each output cell averages its share of the rows and columns (shares overlap when the map does not divide
    evenly, and repeat the map's cells when it is smaller than ``side``): the rows and then the columns are
    multiplied by :func:`_bins`' matrices. On a ``side`` x ``side`` map those are the identity, so the result is
    exactly the input. It computes in float32 whatever the network's policy (the dense layer after it casts back
    to its own), which keeps the model free of a dtype baked into its saved ops. Gradients flow through the two
    matrix products; ``tf.image.resize(method="area")``, which looks similar, has none (and weighs pixels
    by fractions where this pooling takes whole ones)."""
    inputs = keras.Input((None, None, channels), name=f"{name}_input")
    x = tf.cast(inputs, tf.float32)
    shape = tf.shape(x)
    rows, columns = _bins(shape[1], side), _bins(shape[2], side)
    channels_first = tf.transpose(x, [0, 3, 1, 2])
    pooled = tf.matmul(tf.matmul(rows, channels_first), columns, transpose_b=True)
    return keras.Model(inputs, tf.transpose(pooled, [0, 2, 3, 1]), name=name)


def layer_parameters(num_classes: int, *, dense_units: int = 4096, grouped: bool = False) -> dict[str, int]:
    """The numbers (kernel and bias) each layer of :func:`build_alexnet` holds, by layer name, known without building
    it: a multi-worker run says what building it sends before it does (the test of this function builds it)."""
    groups = 2 if grouped else 1
    convolutions = {"conv1": (11, 3, 96, 1), "conv2": (5, 96, 256, groups), "conv3": (3, 256, 384, 1),
                    "conv4": (3, 384, 384, groups), "conv5": (3, 384, 256, groups)}
    counts = {name: size * size * (inputs // g) * filters + filters
              for name, (size, inputs, filters, g) in convolutions.items()}
    features = FEATURE_SIDE * FEATURE_SIDE * 256
    counts.update(fc1=(features + 1) * dense_units, fc2=(dense_units + 1) * dense_units,
                  logits=(dense_units + 1) * num_classes)
    return counts


def build_alexnet(
    num_classes: int,
    image_size: int | None = None,
    *,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    policy: str = "float32",
    name: str = "alexnet",
) -> keras.Model:
    """AlexNet for ``uint8`` images ``[height, width, 3]`` and ``num_classes`` softmax outputs.

    ``image_size`` fixes the input's side; ``None`` (the default) leaves it open, so that one model takes every
    size from :data:`~alexnet.checks.MIN_IMAGE_SIZE` on (the weights are the same either way).
    ``num_classes`` is the global number of classes (every worker must build the same model).
    ``dense_units`` (4096 in the paper) can be reduced to train small tests quickly; ``grouped=True``
    splits conv2, conv4 and conv5 into two groups as in the paper's two-GPU layout; ``policy`` is the Keras
    dtype policy the layers compute in (``"float32"``, ``"mixed_bfloat16"``, ``"mixed_float16"``: see
    :mod:`alexnet.train.precision`), the weights, the last layer and the softmax staying in float32.
    """
    if num_classes < 1:
        raise AlexnetError(f"`num_classes` must be at least 1, not {num_classes}.")
    if image_size is not None:
        as_image_size(image_size)
    try:
        dtype = keras.mixed_precision.Policy(policy)
    except ValueError:
        raise AlexnetError(f"`policy` must be a Keras dtype policy such as 'float32' or 'mixed_bfloat16', "
                           f"not {policy!r}.") from None
    groups = 2 if grouped else 1

    def conv(filters: int, size: int, layer: str, strides: int = 1, padding: str = "same", g: int = 1) -> Any:
        return keras.layers.Conv2D(
            filters,
            size,
            strides=strides,
            padding=padding,
            groups=g,
            activation="relu",
            kernel_initializer="glorot_uniform",
            name=layer,
            dtype=dtype,
        )

    def pool(layer: str) -> Any:
        return keras.layers.MaxPooling2D(pool_size=3, strides=2, name=layer, dtype=dtype)

    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    x = keras.layers.Normalization(
        mean=IMAGENET_MEAN, variance=[s * s for s in IMAGENET_STD], name="normalize", dtype=dtype
    )(inputs)
    x = keras.layers.ZeroPadding2D(2, name="pad1", dtype=dtype)(x)
    x = conv(96, 11, "conv1", strides=4, padding="valid")(x)
    x = pool("pool1")(x)
    x = conv(256, 5, "conv2", g=groups)(x)
    x = pool("pool2")(x)
    x = conv(384, 3, "conv3")(x)
    x = conv(384, 3, "conv4", g=groups)(x)
    x = conv(256, 3, "conv5", g=groups)(x)
    x = pool("pool3")(x)
    x = adaptive_pooling(256)(x)
    x = keras.layers.Flatten(name="flatten", dtype=dtype)(x)
    for index in (1, 2):
        x = keras.layers.Dense(
            dense_units, activation="relu", kernel_initializer="glorot_uniform", name=f"fc{index}", dtype=dtype
        )(x)
        x = keras.layers.Dropout(dropout, name=f"dropout{index}", dtype=dtype)(x)
    # the last layer in float32 too (its share of the work is small): in 16 bits, classes a few units in the last
    # place apart tie, and a tie ranks the lower label first where the float32 export ranks by value
    x = keras.layers.Dense(num_classes, name="logits", dtype="float32")(x)
    outputs = keras.layers.Activation("softmax", name="probabilities", dtype="float32")(x)
    return keras.Model(inputs, outputs, name=name)
