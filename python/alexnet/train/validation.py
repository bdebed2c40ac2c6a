"""Validation after every epoch of a training run: every validation image counted exactly once, on any number of
workers and replicas.

Each worker's share of the validation images (:func:`alexnet.input.pipeline.validation_dataset`: centre crops at
the final image size, in order) is padded to the steps every worker agreed on (:mod:`.agreement`) with images of
weight 0. Every step sums, on every replica, the weighted top-1 and top-k hits, the weighted loss and the
weights, and all-reduces the four sums over the whole cluster; the epoch's metrics are ratios of those exact
sums, so padding counts for nothing, no image counts twice, and the numbers are the same on every worker. They
are what :func:`alexnet.alexnet_evaluate` gives for the same weights and images with ``crops = 1`` (top-k ties
go to the lower label, as there).

This replaces Keras's own validation: its ``val_loss`` is a mean over every example of every batch, padding
included, and its accuracy metrics ignore sample weights unless compiled as weighted metrics.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..errors import AlexnetError
from ..tfimport import keras, tf
from .watchdog import TRACE_GRACE, watching

logger = logging.getLogger(__name__)

#: The metrics :class:`Validation` adds to every epoch's logs (and so to the history), in order.
VALIDATION_METRICS = ("val_loss", "val_accuracy", "val_top5_accuracy", "val_images")


def _replica_sums(model: keras.Model, loss: Any, k: int, images: tf.Tensor, labels: tf.Tensor,
                  weights: tf.Tensor) -> tf.Tensor:
    """float64 ``[top-1 hits, top-k hits, loss, images]`` of one replica's batch, summed with ``weights``."""
    probabilities = tf.cast(model(images, training=False), tf.float32)
    labels = tf.cast(labels, tf.int32)
    counted = weights > 0
    top = tf.math.top_k(probabilities, k=k).indices  # ties: the lower label first, as alexnet_evaluate() ranks
    hits = tf.equal(top, labels[:, tf.newaxis])
    per_image = tf.where(counted, tf.cast(loss.call(labels, probabilities), tf.float32), 0.0)
    weight = tf.cast(weights, tf.float64)
    sums = tf.stack([
        tf.reduce_sum(weight * tf.cast(hits[:, 0], tf.float64)),
        tf.reduce_sum(weight * tf.cast(tf.reduce_any(hits, axis=1), tf.float64)),
        tf.reduce_sum(weight * tf.cast(per_image, tf.float64)),
        tf.reduce_sum(weight),
    ])
    return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, sums)


class Validation(keras.callbacks.Callback):
    """Scores ``dataset`` (this worker's validation share, padded and repeated, as ``strategy`` hands it to this
    worker's replicas: see :func:`alexnet.input.pipeline.validation_dataset`) for ``steps`` steps at the end of every
    epoch, and adds ``val_loss`` (mean loss, ``loss``'s per-image values), ``val_accuracy``, ``val_top5_accuracy``
    (top ``k``) and ``val_images`` (the images counted, over every worker) to the epoch's logs.

    Put it first among the callbacks: the others then see these metrics in the same logs (Keras hands every
    callback the same dict). ``images`` is the count the workers agreed on; a step that counts another number
    raises, since it would mean the workers do not validate what they agreed to.
    """

    def __init__(self, strategy: tf.distribute.Strategy, dataset: Any, *, steps: int, images: int,
                 k: int, loss: Any):
        super().__init__()
        self.strategy, self.dataset = strategy, dataset
        self.steps, self.images, self.k, self.loss = int(steps), int(images), int(k), loss
        self._iterator: Any = None
        self._step: Any = None

    def _make_step(self) -> Any:
        model, loss, k, strategy = self.model, self.loss, self.k, self.strategy

        @tf.function
        def step(iterator: Any) -> Any:
            images, labels, weights = next(iterator)
            return strategy.run(lambda *batch: _replica_sums(model, loss, k, *batch), args=(images, labels, weights))

        return step

    def evaluate(self) -> dict[str, float]:
        """One pass: the validation metrics of the model's weights now (every worker must call it together)."""
        if self._iterator is None:
            with self.strategy.scope():
                self._iterator = iter(self.dataset)
            self._step = self._make_step()
        totals = np.zeros(4, dtype=np.float64)
        try:
            for k in range(self.steps):
                with watching("a validation step", TRACE_GRACE if k == 0 else 0.0):
                    totals += np.asarray(self.strategy.experimental_local_results(self._step(self._iterator))[0])
        except tf.errors.InvalidArgumentError as error:
            raise AlexnetError(
                f"A validation image cannot be decoded ({error.message.splitlines()[0][:300]}). Validation counts "
                "every image once, so it does not skip one: leave check_images on (the default) to find unusable "
                "images and leave them out before training, or remove the file."
            ) from None
        top1, topk, loss, counted = totals
        if round(counted) != self.images:
            raise AlexnetError(f"Validation counted {counted:.0f} images where the workers agreed on {self.images}; "
                               "this is a bug.")
        return dict(zip(VALIDATION_METRICS, (loss / counted, top1 / counted, topk / counted, float(self.images)),
                        strict=True))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        metrics = self.evaluate()
        logger.info("Epoch %d: validation over %d images: top-1 %.4f, top-%d %.4f, loss %.4f.", epoch + 1,
                    self.images, metrics["val_accuracy"], self.k, metrics["val_top5_accuracy"],
                    metrics["val_loss"])
        if logs is not None:
            logs.update(metrics)
