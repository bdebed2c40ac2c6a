"""Keras callbacks that time a training run, step by step and epoch by epoch (TensorFlow is imported with this
module)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ..tfimport import keras

logger = logging.getLogger(__name__)


class EpochClock(keras.callbacks.Callback):
    """The wall seconds from the start of the first ``fit`` to the end of each epoch, in ``seconds``.

    ``alexnet_train`` runs one ``fit`` per image size; the clock starts once, at the first, so the times are
    cumulative over the whole run, the validation after each epoch and the tracing of each new size included
    (Keras calls ``on_epoch_end`` after the epoch's validation)."""

    def __init__(self) -> None:
        super().__init__()
        self.start: float | None = None
        self.seconds: list[float] = []

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        if self.start is None:
            self.start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self.start is None:  # an epoch ended without a fit beginning: time it from here
            self.start = time.perf_counter()
        self.seconds.append(time.perf_counter() - self.start)
        logger.info("Epoch %d: validation accuracy %.3f at %.1f s.", epoch + 1,
                    float((logs or {}).get("val_accuracy", float("nan"))), self.seconds[-1])


class StepClock(keras.callbacks.Callback):
    """The time at the end of every training step (``ends``), from the start of training (``start``), and the CPU
    seconds this process had used by then, all its threads together (``cpu_ends``, from ``cpu_start``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []
        self.cpu_ends: list[float] = []
        self.start = self.cpu_start = 0.0

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        self.start, self.cpu_start = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())
