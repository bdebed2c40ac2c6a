"""Gradient accumulation: ``accumulate_steps`` micro-batches per all-reduce and optimizer step.

With ``accumulate_steps = k`` > 1 a training step takes ``k x batch_size`` images per replica (the dataset's
batches are that large), splits them into ``k`` micro-batches of ``batch_size``, computes their gradients one
after the other (in a ``tf.while_loop``, so that one micro-batch's activations are held at a time), adds them up
and applies their mean once. A micro-batch's loss is the mean over its images, so the mean of the ``k`` is the
loss of the whole batch: the update is that of one batch of ``k x batch_size`` images, up to the order of the
float additions. The last micro-batch is computed after the loop, so that the all-reduce of the gradients can
start while its backward pass still runs (``allreduce_pack_mb``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tfimport import keras, tf
from .model import micro_batch


def accumulating_step(model: keras.Model, micro_batches: int) -> Callable[[Any], dict[str, Any]]:
    """A ``train_step`` for ``model`` (compiled, with its optimizer) that trains each batch as ``micro_batches``
    micro-batches and one optimizer step; set it as ``model.train_step`` before ``fit``."""
    if micro_batches < 2:
        raise ValueError("accumulating_step needs 2 or more micro-batches")
    k = micro_batches
    optimizer = model.optimizer
    scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)

    def gradients(images: Any, labels: Any, index: Any) -> tuple[list[Any], Any]:
        variables = model.trainable_variables
        with tf.GradientTape() as tape, micro_batch(index):  # each micro-batch its own dropout masks
            predictions = model(images, training=True)
            loss = model.compute_loss(images, labels, predictions)
            if scaled:
                loss = optimizer.get_scaled_loss(loss)
        grads = tape.gradient(loss, variables)
        if scaled:
            grads = optimizer.get_unscaled_gradients(grads)
        return grads, predictions

    def split(tensor: Any) -> Any:
        return tf.reshape(tensor, tf.concat([[k, -1], tf.shape(tensor)[1:]], axis=0))

    def train_step(data: Any) -> dict[str, Any]:
        images, labels, _ = keras.utils.unpack_x_y_sample_weight(data)
        micro_images, micro_labels = split(images), split(labels)
        variables = model.trainable_variables
        first = tf.TensorArray(tf.float32, size=k - 1, element_shape=None)

        def body(i: Any, sums: list[Any], outputs: Any) -> tuple[Any, list[Any], Any]:
            grads, predictions = gradients(micro_images[i], micro_labels[i], i)
            return (i + 1, [s + tf.cast(g, s.dtype) for s, g in zip(sums, grads, strict=True)],
                    outputs.write(i, tf.cast(predictions, tf.float32)))

        zeros = [tf.zeros_like(v) for v in variables]
        _, sums, outputs = tf.while_loop(lambda i, *_: i < k - 1, body, (tf.constant(0), zeros, first),
                                         parallel_iterations=1)
        grads, predictions = gradients(micro_images[k - 1], micro_labels[k - 1], k - 1)
        mean = [(s + tf.cast(g, s.dtype)) / k for s, g in zip(sums, grads, strict=True)]
        optimizer.apply_gradients(zip(mean, variables, strict=True))
        earlier = outputs.stack()
        every = tf.concat([tf.reshape(earlier, tf.concat([[-1], tf.shape(earlier)[2:]], axis=0)),
                           tf.cast(predictions, tf.float32)], axis=0)
        return model.compute_metrics(images, labels, every, None)

    return train_step
