"""Local SGD: workers that train alone for ``sync_every`` steps, then average their models.

SparkNet trained this way on Spark (each worker ``tau`` steps on its own data, then the parameters averaged);
Lin et al. (2018, "Don't use large mini-batches, use local SGD") call it local SGD. With ``sync_every = tau`` > 1
on several workers the optimizer applies each replica's own gradients (no all-reduce: see
:meth:`alexnet.train.communication.Communication.gradient_reducer`), so the workers' weights drift apart; then
:class:`LocalSGD` averages the weights and the momentum over every replica, after which every worker holds the
same model again. It averages after every ``tau``-th step of an epoch, after the epoch's last step, and after
every step at which a checkpoint is written (``checkpoint_every``): validation, checkpoints, ``keep_best`` and
the saved model always see one model, the same everywhere. Steps are counted from the start of the epoch, so a
run resumed mid-epoch averages at the steps an uninterrupted run would.

What travels is the change of each weight since the last average (so that a 16-bit ``allreduce_precision``
rounds the change, not the weight) and the momentum, in the run's wire format and packs: ``2 x parameters``
numbers every ``tau`` steps, where synchronous training sends ``parameters`` every step.

Post-local SGD (Lin et al., 2020, "Don't use large mini-batches, use local SGD"): with ``local_sgd_after = e`` the
first ``e`` epochs train synchronously (the gradients all-reduced every step, as with ``sync_every = 1``) and local
SGD begins with epoch ``e + 1``. Early in training, while the rate is high and the weights move fast, the workers'
models drift furthest apart between averages; later local steps cost little. :class:`LocalSGD` switches the
optimizer's reducer when that epoch begins (a run resumed later switches at once) and has Keras trace the training
step again.

An average takes as long as the all-reduce of the whole model, longer than a step over a slow link, and runs in
``on_train_batch_end``: tf-keras's check of its callbacks' timing would warn that this hook "is slow compared to the
batch time" and say "Check your callbacks", which points at nothing a user wrote. While a fit trains with
:class:`LocalSGD` (:func:`averages_excused`), that warning is dropped when the seconds of the averages explain it, and
kept when the other callbacks' own time is beyond the step's.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..tfimport import keras, tf
from .callbacks import epoch_step
from .communication import Communication, all_reduce, averaged_after
from .watchdog import TRACE_GRACE, watching


class ModelAverage:
    """Averages ``model``'s weights and ``optimizer``'s momentum over every replica of ``strategy``; made under the
    strategy's scope after the model is built (it keeps a copy of the weights: the last average)."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model, optimizer: Any,
                 communication: Communication):
        self.strategy, self.communication = strategy, communication
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        self.weights = list(model.trainable_weights)  # a frozen layer (train_from) is the same everywhere
        self.momenta = [v for v in getattr(inner, "momentums", []) if v is not None]
        with strategy.scope():
            self.anchors = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="last_average")
                            for v in self.weights]
        self._average = tf.function(self._average_replicas)
        self._reset = tf.function(lambda: strategy.run(self._reset_replicas))

    def reset(self) -> None:
        """Take the current weights (the same on every worker) as the last average."""
        self._reset()

    def average(self) -> None:
        """Average the weights and momentum of every replica (a collective: every worker calls it at the same
        step)."""
        with watching("an average of the workers' weights", TRACE_GRACE):
            self._average()

    def _assign(self, pairs: list[tuple[Any, Any]]) -> None:
        def update(strategy: tf.distribute.Strategy, pairs: list[tuple[Any, Any]]) -> None:
            for variable, value in pairs:
                strategy.extended.update(variable, lambda v, x: v.assign(x), args=(value,), group=False)

        tf.distribute.get_replica_context().merge_call(update, args=(pairs,))

    def _reset_replicas(self) -> None:
        self._assign([(a, tf.identity(w)) for a, w in zip(self.anchors, self.weights, strict=True)])

    def _average_replicas(self) -> None:
        def replica() -> None:
            replicas = float(self.strategy.num_replicas_in_sync)
            changes = [w - a for w, a in zip(self.weights, self.anchors, strict=True)]
            momenta = [tf.identity(m) for m in self.momenta]
            summed = all_reduce(changes + momenta, self.communication.wire, self.communication.options())
            weights = [a + s / replicas for a, s in zip(self.anchors, summed[:len(changes)], strict=True)]
            self._assign([*zip(self.weights, weights, strict=True), *zip(self.anchors, weights, strict=True),
                          *((m, s / replicas) for m, s in zip(self.momenta, summed[len(changes):], strict=True))])

        self.strategy.run(replica)


#: tf-keras's warning (on TensorFlow's logger) when the callbacks' ``on_train_batch_end`` took longer, on average over
#: the first steps of a fit, than a step: the step's seconds and the hook's.
SLOW_BATCH_END = re.compile(r"Callback method `on_train_batch_end` is slow compared to the batch time "
                            r"\(batch time: ([0-9.]+)s vs `on_train_batch_end` time: ([0-9.]+)s\)")


class AveragesExcused(logging.Filter):
    """Drops :data:`SLOW_BATCH_END` when the hook, without the seconds of the averages made in it since the fit
    began (``seconds`` over ``calls`` of ``on_train_batch_end``, which :class:`LocalSGD` counts), would not have
    been slower than the step; every other record passes."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds, self.calls = 0.0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        found = SLOW_BATCH_END.search(record.getMessage())
        if found is None or not self.calls:
            return True
        step, hook = float(found[1]), float(found[2])
        return hook - self.seconds / self.calls > step


@contextlib.contextmanager
def averages_excused(callbacks: Sequence[Any]) -> Iterator[None]:
    """While the block runs (a fit with ``callbacks``), TensorFlow's logger leaves out tf-keras's warning of a slow
    ``on_train_batch_end`` that the averages of a :class:`LocalSGD` among ``callbacks`` explain; nothing changes
    without one, and the filter is removed after, also when the fit raises."""
    excused = [callback.excused for callback in callbacks if isinstance(callback, LocalSGD)]
    tensorflow_logger = logging.getLogger("tensorflow")
    for excuse in excused:
        tensorflow_logger.addFilter(excuse)
    try:
        yield
    finally:
        for excuse in excused:
            tensorflow_logger.removeFilter(excuse)


class LocalSGD(keras.callbacks.Callback):
    """Averages the workers' models (``average``, a :class:`ModelAverage`) after every ``every``-th step of an epoch
    of ``steps`` steps, after its last step and after every ``checkpoint_every``-th step
    (:func:`~.communication.averaged_after`, which the estimate before training counts). Place it before the
    callbacks that checkpoint or validate. ``excused`` counts its calls of ``on_train_batch_end`` and the seconds of
    its averages since its fit began (:func:`averages_excused`)."""

    def __init__(self, average: ModelAverage, every: int, steps: int, checkpoint_every: int | None = None):
        super().__init__()
        self.average, self.every, self.steps, self.checkpoint_every = average, every, steps, checkpoint_every
        self.averages = 0
        self.excused = AveragesExcused()
        #: whether the workers train alone yet (post-local SGD: not in its synchronous epochs)
        self.local = average.communication.at_epoch(0).local_sgd

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.average.reset()
        self.excused.seconds, self.excused.calls = 0.0, 0  # tf-keras times the hooks of each fit anew

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        phase = self.average.communication.at_epoch(epoch)
        if self.local or not phase.local_sgd:
            return
        self.local = True
        optimizer = self.model.optimizer
        getattr(optimizer, "inner_optimizer", optimizer).gradient_reducer = phase.gradient_reducer()
        self.average.reset()  # the weights are the same everywhere after synchronous steps
        self.model.train_function = self.model.make_train_function(force=True)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.excused.calls += 1
        if not self.local:
            return
        step = epoch_step(self, batch, self.steps)
        if averaged_after(step, self.steps, self.every, self.checkpoint_every):
            began = time.perf_counter()
            self.average.average()
            self.excused.seconds += time.perf_counter() - began
            self.averages += 1
