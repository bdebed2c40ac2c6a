"""How AlexNet (:mod:`alexnet.model.network`) is trained: its optimizer and compiled loss and metrics.

Training follows the paper: SGD with momentum 0.9 and weight decay 5e-4 (:class:`DecayedSGD`: the decay
``weight_decay * w`` is added to the gradient before the momentum, the paper's update rule while the rate holds,
and a changed rate scales the whole step at once; biases are not decayed). The optimizer's learning rate is a
variable that training sets before every step from the run's schedule (:mod:`.schedule`). :func:`training_model`
makes the model, optimizer and compiled step every run trains with, the benchmark's included, its dropout masks
functions of the seed and the step (:func:`step_dropout`), so that a resumed run drops what it would have dropped;
:func:`say_building`
says, before a multi-worker run builds them, what the chief then sends the other workers.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..tfimport import keras, tf

if TYPE_CHECKING:
    from .precision import Precision
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger(__name__)

#: The micro-batch of a training step whose forward pass is being traced (:mod:`.accumulate`; 0: the step's only
#: one), which :func:`step_dropout`'s masks are drawn for.
_MICRO_BATCH: contextvars.ContextVar[Any] = contextvars.ContextVar("micro_batch", default=0)


@keras.saving.register_keras_serializable(package="alexnet")
class DecayedSGD(keras.optimizers.SGD):
    """SGD with momentum whose weight decay enters the momentum, as in the AlexNet paper, and whose rate changes
    take effect at once.

    The paper's update is ``v <- momentum * v - weight_decay * lr * w - lr * grad; w <- w + v``: the decay
    term is added to the gradient. (Keras' own ``weight_decay`` argument is decoupled, applied outside the
    momentum, which with momentum 0.9 decays ten times less; ``decay`` in old Keras was a learning-rate
    decay.) Only kernels (variables of rank 2 or more) are decayed, not biases.

    The momentum slot holds the rate-free sum ``u <- momentum * u + weight_decay * w + grad`` and the step is
    ``w <- w - lr * u`` (with Nesterov, ``w <- w - lr * (weight_decay * w + grad + momentum * u)``). At a constant
    rate this is the paper's update (``v = -lr * u``). When the rate changes, Keras' form keeps the velocity of the
    old rate for about ``1 / (1 - momentum)`` steps while the gradient already pulls at the new one: after a drop by
    10 the weights coast on at the old speed with a tenth of the pull back, and the loss rises before it falls.
    This form scales the whole step with the rate: the momentum correction of Goyal et al. (2017, section 2.1), and
    the form PyTorch's SGD takes. A warm-up's rising rate scales the velocity with it as well.
    """

    def __init__(self, learning_rate: Any = 0.01, momentum: float = 0.9, l2_decay: float = 5e-4, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, momentum=momentum, **kwargs)
        self.l2_decay = float(l2_decay)

    #: What :meth:`aggregate_gradients` does with this replica's gradients, in order, when set: a function returning
    #: the gradients to apply (see :meth:`alexnet.train.communication.Communication.gradient_reducer`); unset,
    #: Keras's own all-reduce. Not part of the optimizer's config: a run sets it.
    gradient_reducer: Callable[[list[Any]], list[Any]] | None = None

    def aggregate_gradients(self, grads_and_vars: Any) -> Any:
        """The gradients summed over the replicas, by :attr:`gradient_reducer` when set."""
        if self.gradient_reducer is None:
            return super().aggregate_gradients(grads_and_vars)
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        reduced = self.gradient_reducer([g for g, _ in pairs])
        return list(zip(reduced, [v for _, v in pairs], strict=True))

    def update_step(self, gradient: Any, variable: tf.Variable) -> Any:
        """One step of ``variable``: ``l2_decay * variable`` added to a kernel's gradient, then the momentum sum
        updated and the variable moved by the rate times it (see the class documentation), in one kernel.

        TensorFlow's ``ApplyMomentum`` is this form: ``u <- momentum * u + g; w <- w - lr * u`` (with Nesterov,
        ``w <- w - lr * (g + momentum * u)``). Written as separate reads and assignments of the two variables, the
        same update left the workers of a multi-worker run with weights a few units in the last place apart in
        AlexNet's largest kernel after a few steps (never with momentum or decay alone, and timing-dependent): the
        one kernel updates both variables together and the workers stay equal bit for bit."""
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        if self.l2_decay and len(variable.shape) >= 2:
            gradient = gradient + tf.cast(self.l2_decay, gradient.dtype) * tf.cast(variable, gradient.dtype)
        total = self.momentums[self._index_dict[self._var_key(variable)]]
        return tf.raw_ops.ResourceApplyMomentum(
            var=variable.handle, accum=total.handle, lr=tf.cast(self.learning_rate, variable.dtype), grad=gradient,
            momentum=tf.cast(self.momentum, variable.dtype), use_locking=False, use_nesterov=self.nesterov)

    def get_config(self) -> dict[str, Any]:
        """The optimizer's config with ``l2_decay``."""
        config = super().get_config()
        config["l2_decay"] = self.l2_decay
        return config


@keras.saving.register_keras_serializable(package="alexnet")
class SmoothedSparseCrossentropy(keras.losses.Loss):
    """Cross-entropy of class indices against labels smoothed by ``label_smoothing``: the true class gets
    ``1 - label_smoothing + label_smoothing / classes`` and every other class ``label_smoothing / classes``
    (Szegedy et al., 2016). With 0 it is the sparse cross-entropy of hard labels. The labels stay indices, so the
    accuracy metrics read them as they are."""

    def __init__(self, label_smoothing: float = 0.0, name: str = "smoothed_sparse_crossentropy", **kwargs: Any):
        super().__init__(name=name, **kwargs)
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true: Any, y_pred: Any) -> Any:
        """The loss of each example: ``y_true`` class indices, ``y_pred`` probabilities."""
        classes = tf.shape(y_pred)[-1]
        indices = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
        target = tf.one_hot(indices, classes, dtype=y_pred.dtype)
        return keras.losses.categorical_crossentropy(target, y_pred, label_smoothing=self.label_smoothing)

    def get_config(self) -> dict[str, Any]:
        """The loss's config with ``label_smoothing``."""
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


def make_optimizer(
    learning_rate: float = 0.01,
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


@keras.saving.register_keras_serializable(package="alexnet")
def top_k_hits(y_true: Any, y_pred: Any, k: int = 5) -> Any:
    """1 for each image whose label is among its ``k`` most probable classes, else 0: classes of equal probability
    ranked by label, the lower first, as validation and ``alexnet_evaluate()`` rank them (Keras's top-k accuracy
    counts every class tied at the k-th place, so a network whose outputs are all equal scored 1)."""
    top = tf.math.top_k(tf.cast(y_pred, tf.float32), k=k).indices
    labels = tf.cast(tf.reshape(y_true, [-1, 1]), tf.int32)
    return tf.cast(tf.reduce_any(tf.equal(top, labels), axis=1), tf.float32)


def compile_alexnet(
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    num_classes: int,
    *,
    label_smoothing: float = 0.0,
    jit_compile: bool = False,
) -> keras.Model:
    """Compile with cross-entropy (of labels smoothed by ``label_smoothing``:
    :class:`SmoothedSparseCrossentropy`) and top-1 (``accuracy``) and top-5 (``top5_accuracy``) accuracy.

    With fewer than 5 classes, ``top5_accuracy`` counts the top ``num_classes`` (and is then always 1). The metrics a
    step reports (Keras's progress bar, a callback's ``on_train_batch_end``) are the run's so far, over every
    replica and worker, as the history records them at the epoch's end.
    """
    model.compile(
        optimizer=optimizer,
        loss=SmoothedSparseCrossentropy(label_smoothing),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.MeanMetricWrapper(top_k_hits, name="top5_accuracy", k=min(5, num_classes)),
        ],
        jit_compile=jit_compile,
    )
    # every replica's step returns the metrics of the whole cluster already (Keras reads them across the replicas);
    # Keras's own choice adds them up over the workers of a multi-worker run, so that its progress bar showed twice
    # the loss and accuracy on two workers: the first replica's are those of the run, with no exchange to add them
    model.distribute_reduction_method = "first"
    return model


def training_model(num_classes: int, precision: Precision, learning_rate: float = 0.01, momentum: float = 0.9,
                   weight_decay: float = 5e-4, *, image_size: int | None = None, dense_units: int = 4096,
                   dropout: float = 0.5, grouped: bool = False, label_smoothing: float = 0.0,
                   jit_compile: bool = False, train_from: str = "conv1", seed: int | None = None
                   ) -> tuple[keras.Model, Any]:
    """AlexNet (:func:`alexnet.model.network.build_alexnet`) in ``precision``, with the paper's optimizer at
    ``learning_rate`` (loss-scaled for float16), compiled (labels smoothed by ``label_smoothing``) and with its
    optimizer built: what every run trains. The layers before ``train_from`` do not learn (their weights are not
    trainable, so the backward pass stops short of them and the optimizer keeps no momentum for them). Its dropout
    masks are functions of ``seed`` and the step (:func:`step_dropout`). Call it under the strategy's scope."""
    from ..model.network import build_alexnet
    from .initial import frozen_layers

    net = build_alexnet(num_classes, image_size, dense_units=dense_units, dropout=dropout, grouped=grouped,
                        policy=precision.policy)
    for name in frozen_layers(train_from):
        net.get_layer(name).trainable = False
    optimizer = make_optimizer(learning_rate, momentum, weight_decay, loss_scaled=precision.loss_scaled)
    compile_alexnet(net, optimizer, num_classes, label_smoothing=label_smoothing, jit_compile=jit_compile)
    optimizer.build(net.trainable_variables)
    step_dropout(net, optimizer, seed)
    return net, optimizer


@contextlib.contextmanager
def micro_batch(index: Any) -> Iterator[None]:
    """While it lasts, the forward passes traced draw their dropout masks for micro-batch ``index`` of the step
    (:func:`step_dropout`)."""
    token = _MICRO_BATCH.set(index)
    try:
        yield
    finally:
        _MICRO_BATCH.reset(token)


def step_dropout(net: keras.Model, optimizer: Any, seed: int | None) -> bool:
    """Make the masks of ``net``'s dropout layers a function of ``seed`` (``None``: one drawn at random), the
    optimizer's step (``optimizer.iterations``, which checkpoints keep), the replica, the layer and the micro-batch
    (:func:`micro_batch`) alone: a run resumed from a checkpoint then drops the units the run would have dropped
    had it not stopped. Keras's own masks come from a random op whose state lives in the process, and start again
    in each new one.

    The layers stay Keras's ``Dropout``, so that the model saves and loads as it did (their config is the same):
    only what their random generator's ``dropout`` draws changes. False, said in a DEBUG line, when a Keras without
    that generator leaves the layers drawing as before."""
    import numpy as np

    key = int(seed) if seed is not None else int(np.random.default_rng().integers(2**62))
    layers = [layer for layer in net.layers if isinstance(layer, keras.layers.Dropout)]
    generators: list[Any] = [getattr(layer, "_random_generator", None) for layer in layers]
    if not all(callable(getattr(generator, "dropout", None)) for generator in generators):
        logger.debug("This Keras's Dropout layers have no random generator with a dropout(): their masks are drawn "
                     "as Keras draws them, and a resumed run drops other units than the run it resumes would have.")
        return False
    for index, generator in enumerate(generators):
        generator.dropout = _dropout_of(key, index, optimizer)
    return True


def _dropout_of(key: int, layer: int, optimizer: Any) -> Callable[..., Any]:
    """The ``dropout(inputs, rate, noise_shape)`` of dropout layer ``layer`` (:func:`step_dropout`)."""

    def dropout(inputs: Any, rate: Any, noise_shape: Any = None) -> Any:
        context = tf.distribute.get_replica_context()
        replica = 0 if context is None else context.replica_id_in_sync_group
        seed = tf.constant([key, layer], tf.int64)
        for data in (optimizer.iterations, replica, _MICRO_BATCH.get()):
            seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(data, tf.int64))
        return tf.nn.experimental.stateless_dropout(inputs, rate, seed, noise_shape=noise_shape)

    return dropout


def initial_values_bytes(num_classes: int, settings: TrainSettings) -> int:
    """Bytes of the values a multi-worker run's chief sends the other workers as the model is built: every weight
    of AlexNet (:func:`~alexnet.model.network.layer_parameters`) and the momentum of those that learn (the layers from
    ``train_from`` on), in float32 whatever the precision. ``MultiWorkerMirroredStrategy`` sends each variable's
    initial value from the chief as it is made under its scope, so that every worker starts alike."""
    from ..model.network import layer_parameters
    from .initial import frozen_layers

    counts = layer_parameters(num_classes, dense_units=settings.dense_units, grouped=settings.grouped)
    frozen = set(frozen_layers(settings.train_from))
    return 4 * (sum(counts.values()) + sum(n for layer, n in counts.items() if layer not in frozen))


def say_building(topology: Topology, num_classes: int, settings: TrainSettings) -> None:
    """The chief's line, before the model is built on several workers, of what building it sends: on a slow link
    that takes long (41 s for 459 MB over 100 Mbit/s) and nothing else is logged meanwhile."""
    if topology.workers <= 1 or not topology.chief:
        return
    others = topology.workers - 1
    logger.info("Building the model on %d workers: the chief sends its initial weights and momentum (%.1f MB) to "
                "the %s.", topology.workers, initial_values_bytes(num_classes, settings) / 1e6,
                "other worker" if others == 1 else f"other {others} workers")
