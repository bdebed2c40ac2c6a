"""How AlexNet (:mod:`alexnet.model.network`) is trained: its optimizer, learning rate and compiled metrics.

Training follows the paper: SGD with momentum 0.9 and weight decay 5e-4 (:class:`DecayedSGD`: the decay
``weight_decay * w`` is added to the gradient before the momentum, exactly the paper's update rule;
biases are not decayed), learning rate 0.01 for a batch of 128 divided by 10 at set epochs; for larger
batches the rate grows in proportion, reached by a linear warm-up (:class:`WarmupStepSchedule`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tfimport import keras, tf


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


@keras.saving.register_keras_serializable(package="alexnet")
class WarmupStepSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A linear warm-up from ``initial`` to ``peak`` over ``warmup_epochs``, then ``peak``, multiplied by
    ``factor`` from the first step of each epoch in ``drop_epochs`` (0-based) on.

    During the warm-up the rate grows by the same amount every step and the last warm-up step is the first at
    ``peak`` (Goyal et al., 2017: from the rate of the reference batch to the rate scaled with the batch over
    5 epochs). The paper divided the rate by 10 three times in about 90 epochs, each time the validation error
    stopped improving; fixed epochs 30, 60 and 80 are the usual stand-in. The schedule counts optimizer steps,
    so it carries over when training resumes from a checkpoint.
    """

    def __init__(self, initial: float, peak: float, steps_per_epoch: int, warmup_epochs: int = 0,
                 drop_epochs: Sequence[int] = (30, 60, 80), factor: float = 0.1):
        super().__init__()
        self.initial, self.peak, self.factor = float(initial), float(peak), float(factor)
        self.steps_per_epoch, self.warmup_epochs = int(steps_per_epoch), int(warmup_epochs)
        self.drop_epochs = sorted(int(e) for e in drop_epochs if int(e) > 0)

    def __call__(self, step: Any) -> tf.Tensor:
        """The rate of optimizer step ``step`` (counted from 0)."""
        step = tf.cast(step, tf.float32)
        rate = tf.constant(self.peak, tf.float32)
        warmup = self.warmup_epochs * self.steps_per_epoch
        if warmup > 0:
            share = tf.minimum(1.0, (step + 1.0) / float(warmup))
            rate = self.initial + (self.peak - self.initial) * share
        for epoch in self.drop_epochs:
            rate = tf.where(step >= float(epoch * self.steps_per_epoch), rate * self.factor, rate)
        return rate

    def rate(self, step: int) -> float:
        """The rate of step ``step`` as a Python number."""
        return float(self(step))

    def get_config(self) -> dict[str, Any]:
        """What rebuilds the schedule."""
        return {"initial": self.initial, "peak": self.peak, "steps_per_epoch": self.steps_per_epoch,
                "warmup_epochs": self.warmup_epochs, "drop_epochs": list(self.drop_epochs), "factor": self.factor}


def step_schedule(
    learning_rate: float, steps_per_epoch: int, drop_epochs: Sequence[int] = (30, 60, 80), factor: float = 0.1,
    *, warmup_epochs: int = 0, initial: float | None = None,
) -> WarmupStepSchedule:
    """``learning_rate``, multiplied by ``factor`` at the start of each epoch in ``drop_epochs`` (0-based),
    reached from ``initial`` (default: ``learning_rate``) by a linear warm-up over ``warmup_epochs``
    (see :class:`WarmupStepSchedule`)."""
    return WarmupStepSchedule(learning_rate if initial is None else initial, learning_rate, steps_per_epoch,
                              warmup_epochs, drop_epochs, factor)


def make_optimizer(
    learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    *,
    loss_scaled: bool = False,
) -> keras.optimizers.Optimizer:
    """The paper's optimizer (:class:`DecayedSGD`), wrapped for dynamic loss scaling with ``loss_scaled`` (float16
    mixed precision)."""
    optimizer = DecayedSGD(learning_rate=learning_rate, momentum=momentum, l2_decay=weight_decay)
    if loss_scaled:
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
