"""The communication settings of a run put in place: the optimizer's all-reduce, the accumulating step and the
local-SGD averages (see :mod:`.communication`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .communication import Communication, check_wire

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger(__name__)


def check_levers(settings: TrainSettings, topology: Topology) -> Communication:
    """The run's :class:`Communication`, after checking that this worker's devices sum its wire format (before
    any data is read)."""
    from .precision import hardware

    communication = Communication.of(settings, topology.workers)
    if topology.workers > 1 and communication.wire != "float32":
        check_wire(communication.wire, hardware(topology.gpu))
    if settings.sync_every > 1 and topology.workers == 1:
        logger.info("sync_every = %d with one worker: there is nothing to average.", settings.sync_every)
    return communication


def install_levers(strategy: tf.distribute.Strategy, net: keras.Model, optimizer: Any, settings: TrainSettings,
                   communication: Communication, steps_per_epoch: int) -> list[Any]:
    """Set ``net``'s training step and ``optimizer``'s all-reduce for ``communication``; the callbacks the run
    needs for it (local SGD's averages), to be placed before those that checkpoint or validate."""
    from .accumulate import accumulating_step
    from .local_sgd import LocalSGD, ModelAverage

    inner = getattr(optimizer, "inner_optimizer", optimizer)
    inner.gradient_reducer = communication.gradient_reducer()
    if communication.accumulate > 1:
        net.train_step = accumulating_step(net, communication.accumulate)
    logger.info("Communication: %s.", communication.describe())
    if not communication.local_sgd:
        return []
    return [LocalSGD(ModelAverage(strategy, net, optimizer, communication), communication.sync_every,
                     steps_per_epoch, settings.checkpoint_every)]
