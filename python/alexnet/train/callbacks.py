"""Keras callbacks of a training run: per-epoch metrics and checkpoints, throughput, progress reports."""

from __future__ import annotations

import json
import logging
import math
import socket
import time
from collections.abc import Callable
from typing import Any

from ..tfimport import keras, tf
from .checkpoint import CheckpointStore

logger = logging.getLogger(__name__)


def numbers(logs: dict[str, Any] | None) -> dict[str, float]:
    """The values of Keras ``logs`` that are numbers, as floats."""
    out = {}
    for name, value in (logs or {}).items():
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            continue
    return out


def replicas_summed(model: keras.Model | None) -> int:
    """How many replicas' values a step's logs add up: Keras sums each replica's running means into the
    step logs ("auto" reduction off TPUs), while the epoch's logs are the metrics' global results."""
    if model is None or getattr(model, "distribute_reduction_method", "auto") not in ("auto", "sum"):
        return 1
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None or "TPU" in type(strategy).__name__:
        return 1
    return max(1, int(getattr(strategy, "num_replicas_in_sync", 1)))


class Recorder(keras.callbacks.Callback):
    """Records each epoch's metrics and, with a checkpoint store, saves checkpoints and the history file.

    A checkpoint is saved after every epoch and, with ``every``, every ``every`` steps inside an epoch.
    ``offset`` is the number of steps of the current epoch done before this ``fit`` started (a run resumed
    mid-epoch finishes that epoch in a ``fit`` of its own).
    """

    def __init__(self, metrics: dict[str, list[float]], settings: dict[str, Any], steps: int, *,
                 store: CheckpointStore | None = None, manager: tf.train.CheckpointManager | None = None,
                 position: tuple[tf.Variable, tf.Variable] | None = None, every: int | None = None):
        super().__init__()
        self.metrics, self.settings, self.steps = metrics, settings, steps
        self.store, self.manager, self.position, self.every = store, manager, position, every
        self.offset = 0
        self._epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        step = self.offset + batch + 1
        if self.every and step % self.every == 0 and step < self.steps:
            self._save(self._epoch, step)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        for name, number in numbers(logs).items():
            values = self.metrics.setdefault(name, [])
            del values[epoch:]
            values.append(number)
        self._save(epoch + 1, 0)

    def _save(self, epoch: int, step: int) -> None:
        if self.store is None or self.manager is None or self.position is None:
            return
        self.position[0].assign(epoch)
        self.position[1].assign(step)
        self.store.save(self.manager, epoch * self.steps + step)
        self.store.write_state({"epochs_done": epoch, "position": [epoch, step], "settings": self.settings,
                                "metrics": self.metrics})
        logger.info("Checkpoint after epoch %d%s.", epoch, f", step {step}" if step else "")


class Throughput(keras.callbacks.Callback):
    """Training steps and the seconds they took, per epoch (validation excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[tuple[int, float]] = []
        self._start = 0.0
        self._steps = 0
        self._open = False

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._start, self._steps, self._open = time.perf_counter(), 0, True

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._steps += 1

    def _close(self) -> None:
        if self._open:
            self.epochs.append((self._steps, time.perf_counter() - self._start))
            self._open = False

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._close()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._close()

    def images_per_second(self, worker_batch: int) -> float:
        """Training images per second on this worker, over the epochs after the first when there are several."""
        timed = self.epochs[1:] if len(self.epochs) > 1 else self.epochs
        steps, seconds = sum(s for s, _ in timed), sum(t for _, t in timed)
        rate = steps * worker_batch / seconds if seconds > 0 else 0.0
        return rate if math.isfinite(rate) else 0.0


def progress_writer(target: str) -> Callable[[dict[str, Any]], None]:
    """A function sending one progress record to ``target``: ``tcp://host:port`` (a line of JSON to the
    launcher's monitor, see :mod:`alexnet.launch.monitor`) or a local file path (a line appended).

    Reporting never stops training: a record that cannot be sent is dropped, with one warning.
    """
    warned = False
    connection: socket.socket | None = None

    def send(record: dict[str, Any]) -> None:
        nonlocal warned, connection
        line = (json.dumps(record) + "\n").encode()
        try:
            if target.startswith("tcp://"):
                if connection is None:
                    host, _, port = target[len("tcp://"):].rpartition(":")
                    connection = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
                connection.sendall(line)
            else:
                with open(target, "ab") as f:
                    f.write(line)
        except (OSError, ValueError) as error:
            connection = None
            if not warned:
                logger.warning("Cannot report progress to %s (%s); training goes on.", target, error)
                warned = True

    return send


class Progress(keras.callbacks.Callback):
    """Reports epoch, step, loss, accuracy and images per second at most every ``interval`` seconds, and at
    the end of every epoch (with the validation metrics)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], *, epochs: int, steps: int, worker_batch: int,
                 workers: int, interval: float = 2.0):
        super().__init__()
        self.send, self.epochs, self.steps = send, epochs, steps
        self.images_per_step = worker_batch * workers
        self.interval = interval
        self.offset = 0
        self._epoch = 0
        self._last = 0.0
        self._start = 0.0
        self._done = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch, self._start, self._done = epoch, time.perf_counter(), 0

    def _record(self, step: int, logs: dict[str, Any] | None, kind: str) -> dict[str, Any]:
        elapsed = time.perf_counter() - self._start
        rate = self._done * self.images_per_step / elapsed if elapsed > 0 else 0.0
        return {"kind": kind, "time": time.time(), "epoch": self._epoch + 1, "epochs": self.epochs, "step": step,
                "steps": self.steps, "images_per_second": round(rate, 2), **numbers(logs)}

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._done += 1
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            replicas = replicas_summed(self.model)
            mean = {name: value / replicas for name, value in numbers(logs).items()}
            self.send(self._record(self.offset + batch + 1, mean, "step"))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.send(self._record(self.steps, logs, "epoch"))
