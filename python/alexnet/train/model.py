"""AlexNet (Krizhevsky, Sutskever and Hinton, 2012) in Keras 2 (tf-keras), and its optimizer.

The layers are the paper's: five convolutions, 96 11x11 filters with stride 4, 256 5x5, 384 3x3, 384 3x3
and 256 3x3, each followed by a ReLU; overlapping max pooling (3x3, stride 2) after the first, second and
fifth; two fully connected layers of 4096 units with ReLU and dropout 0.5; ``num_classes`` outputs with a
softmax. At 224x224 the feature maps are the paper's 55, 27, 13 and 6 pixels square (the first convolution
pads the input by 2 pixels on each side, the usual fix for the paper's 224-versus-227 inconsistency), so
the first dense layer sees 6x6x256 = 9216 inputs.

Where this model differs from the paper, and why:

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

Training follows the paper: SGD with momentum 0.9 and weight decay 5e-4 (:class:`DecayedSGD`: the decay
``weight_decay * w`` is added to the gradient before the momentum, exactly the paper's update rule;
biases are not decayed), learning rate 0.01 divided by 10 at set epochs (:func:`step_schedule`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..checks import as_image_size
from ..errors import AlexnetError
from ..tfimport import keras, tf

#: ImageNet per-channel mean and standard deviation of RGB pixels in 0-255.
IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

def build_alexnet(
    num_classes: int,
    image_size: int = 224,
    *,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    mixed_precision: bool = False,
    name: str = "alexnet",
) -> keras.Model:
    """AlexNet for ``uint8`` images ``[image_size, image_size, 3]`` and ``num_classes`` softmax outputs.

    ``num_classes`` is the global number of classes (every worker must build the same model).
    ``dense_units`` (4096 in the paper) can be reduced to train small tests quickly; ``grouped=True``
    splits conv2, conv4 and conv5 into two groups as in the paper's two-GPU layout; ``mixed_precision``
    computes in float16 with float32 weights (worth it on GPUs only), the softmax staying in float32.
    """
    if num_classes < 1:
        raise AlexnetError(f"`num_classes` must be at least 1, not {num_classes}.")
    as_image_size(image_size)
    policy = keras.mixed_precision.Policy("mixed_float16" if mixed_precision else "float32")
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
            dtype=policy,
        )

    def pool(layer: str) -> Any:
        return keras.layers.MaxPooling2D(pool_size=3, strides=2, name=layer, dtype=policy)

    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    x = keras.layers.Normalization(
        mean=IMAGENET_MEAN, variance=[s * s for s in IMAGENET_STD], name="normalize", dtype=policy
    )(inputs)
    x = keras.layers.ZeroPadding2D(2, name="pad1", dtype=policy)(x)
    x = conv(96, 11, "conv1", strides=4, padding="valid")(x)
    x = pool("pool1")(x)
    x = conv(256, 5, "conv2", g=groups)(x)
    x = pool("pool2")(x)
    x = conv(384, 3, "conv3")(x)
    x = conv(384, 3, "conv4", g=groups)(x)
    x = conv(256, 3, "conv5", g=groups)(x)
    x = pool("pool3")(x)
    x = keras.layers.Flatten(name="flatten", dtype=policy)(x)
    for index in (1, 2):
        x = keras.layers.Dense(
            dense_units, activation="relu", kernel_initializer="glorot_uniform", name=f"fc{index}", dtype=policy
        )(x)
        x = keras.layers.Dropout(dropout, name=f"dropout{index}", dtype=policy)(x)
    x = keras.layers.Dense(num_classes, name="logits", dtype=policy)(x)
    outputs = keras.layers.Activation("softmax", name="probabilities", dtype="float32")(x)
    return keras.Model(inputs, outputs, name=name)


@keras.saving.register_keras_serializable(package="alexnet")
class DecayedSGD(keras.optimizers.SGD):
    """SGD with momentum whose weight decay enters the momentum, as in the AlexNet paper.

    The paper's update is ``v <- momentum * v - weight_decay * lr * w - lr * grad; w <- w + v``: the decay
    term is added to the gradient. (Keras' own ``weight_decay`` argument is decoupled, applied outside the
    momentum, which with momentum 0.9 decays ten times less; ``decay`` in old Keras was a learning-rate
    decay.) Only kernels (variables of rank 2 or more) are decayed, not biases.
    """

    def __init__(self, learning_rate: Any = 0.01, momentum: float = 0.9, l2_decay: float = 5e-4, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, momentum=momentum, **kwargs)
        self.l2_decay = float(l2_decay)

    def update_step(self, gradient: Any, variable: tf.Variable) -> Any:
        """Add ``l2_decay * variable`` to a kernel's gradient, then take the momentum step."""
        if self.l2_decay and len(variable.shape) >= 2 and not isinstance(gradient, tf.IndexedSlices):
            gradient = gradient + tf.cast(self.l2_decay, gradient.dtype) * tf.cast(variable, gradient.dtype)
        return super().update_step(gradient, variable)

    def get_config(self) -> dict[str, Any]:
        """The optimizer's config with ``l2_decay``."""
        config = super().get_config()
        config["l2_decay"] = self.l2_decay
        return config


def step_schedule(
    learning_rate: float, steps_per_epoch: int, drop_epochs: Sequence[int] = (30, 60, 80), factor: float = 0.1
) -> keras.optimizers.schedules.LearningRateSchedule:
    """``learning_rate``, multiplied by ``factor`` at the start of each epoch in ``drop_epochs`` (0-based).

    The paper divided the rate by 10 three times in about 90 epochs, each time the validation error
    stopped improving; fixed epochs 30, 60 and 80 are the usual stand-in. The schedule counts optimizer
    steps, so it carries over when training resumes from a checkpoint.
    """
    drops = sorted(int(e) for e in drop_epochs if int(e) > 0)
    if not drops:
        return keras.optimizers.schedules.PiecewiseConstantDecay([0], [learning_rate, learning_rate])
    # PiecewiseConstantDecay switches after a boundary: step e * steps_per_epoch is the first of epoch e
    boundaries = [e * steps_per_epoch - 1 for e in drops]
    values = [learning_rate * factor**k for k in range(len(drops) + 1)]
    return keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, values)


def make_optimizer(
    learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    *,
    mixed_precision: bool = False,
) -> keras.optimizers.Optimizer:
    """The paper's optimizer (:class:`DecayedSGD`), wrapped for loss scaling under mixed precision."""
    optimizer = DecayedSGD(learning_rate=learning_rate, momentum=momentum, l2_decay=weight_decay)
    if mixed_precision:
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


def compile_alexnet(
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    num_classes: int,
    *,
    jit_compile: bool = False,
) -> keras.Model:
    """Compile with sparse cross-entropy and top-1 (``accuracy``) and top-5 (``top5_accuracy``) accuracy.

    With fewer than 5 classes, ``top5_accuracy`` counts the top ``num_classes`` (and is then always 1).
    """
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseTopKCategoricalAccuracy(k=min(5, num_classes), name="top5_accuracy"),
        ],
        jit_compile=jit_compile,
    )
    return model
