"""Keras callbacks of a training run: per-epoch metrics and checkpoints, throughput, progress reports."""

from __future__ import annotations

import json
import logging
import math
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import run_error
from ..tfimport import keras, tf
from .checkpoint import CheckpointStore, Resume
from .schedule import RateSchedule, plateau_drops

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


def epoch_step(callback: keras.callbacks.Callback, batch: int, steps: int) -> int:
    """The step of its epoch (from 1) that Keras's ``batch`` of the current ``fit`` is, for epochs of ``steps``.

    A ``fit`` of fewer steps per epoch than ``steps`` finishes an epoch resumed mid-way (see
    :func:`alexnet.train.api.alexnet_train`), so its first batch is step ``steps - fit's steps + 1``. Keras
    gives every callback the fit's steps per epoch in ``params``: no callback keeps resume state of its own.
    """
    fit_steps = (getattr(callback, "params", None) or {}).get("steps") or steps
    return steps - int(fit_steps) + batch + 1


def checkpointed_inside(step: int, every: int | None, steps: int) -> bool:
    """Whether a checkpoint is saved after ``step`` (from 1) of an epoch of ``steps`` steps inside the epoch, every
    ``every`` steps (None: only at epochs' ends, which are not inside)."""
    return every is not None and every > 0 and step % every == 0 and step < steps


class RunProgress(keras.callbacks.ProgbarLogger):
    """Keras' progress of a fit (a bar, or a line per epoch) in place of its own, its epoch headers counting the run's
    ``epochs`` ("Epoch 2/3"), where a run fitted in parts (one per image size, the rest of an epoch it resumed inside)
    would count to each part's last epoch, and say none for a part of one epoch."""

    def __init__(self, epochs: int) -> None:
        super().__init__(count_mode="steps")
        self.run_epochs = epochs

    def set_params(self, params: dict[str, Any]) -> None:
        super().set_params(params)
        self.epochs = self.run_epochs


class RateSetter(keras.callbacks.Callback):
    """Sets ``optimizer``'s learning rate before every step to ``rates.at(step)``, the run's global step counted
    over every epoch (so a resumed run continues the same curve).

    A ``"plateau"`` schedule's drops are decided at the start of every epoch from the validation top-1 of the
    epochs before it (``accuracies()``: the history's, restored ones included) and ``patience``
    (:func:`.schedule.plateau_drops`). :attr:`rates` is the schedule as decided so far: what the history and
    TensorBoard record.
    """

    def __init__(self, rates: RateSchedule, optimizer: Any, *, patience: int = 1,
                 accuracies: Callable[[], list[float]] = list):
        super().__init__()
        self.rates, self.optimizer = rates, optimizer
        self.patience, self.accuracies = patience, accuracies
        self._epoch = 0

    def at(self, step: int) -> float:
        """The rate of step ``step`` (0-based, over the run) as the schedule stands now."""
        return self.rates.at(step)

    def of_epoch(self, epoch: int) -> float:
        """The rate of epoch ``epoch``'s last step as the schedule stands now."""
        return self.rates.of_epoch(epoch)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch
        if self.rates.kind == "plateau":
            drops = plateau_drops(self.accuracies()[:epoch], self.patience)
            if drops != self.rates.drop_epochs:
                if drops and drops[-1] == epoch:
                    logger.info("Validation top-1 flat for %d epoch(s): the rate drops to %g from epoch %d.",
                                self.patience, self.rates.with_drops(drops).of_epoch(epoch), epoch + 1)
                self.rates = self.rates.with_drops(drops)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        steps = self.rates.steps_per_epoch
        step = self._epoch * steps + epoch_step(self, batch, steps) - 1
        self.optimizer.learning_rate.assign(self.rates.at(step))


class Recorder(keras.callbacks.Callback):
    """Records each epoch's metrics and, apart from them, what it trained with (``schedule_of(epoch)``: its image
    size and learning rate), starting from ``start`` (the epochs done), and with a checkpoint ``store`` saves a
    checkpoint after every epoch and, with ``every``, every ``every`` steps inside an epoch of ``steps`` steps."""

    def __init__(self, steps: int, schedule_of: Callable[[int], Mapping[str, Any]], *, start: Resume | None = None,
                 store: CheckpointStore | None = None, every: int | None = None):
        super().__init__()
        self.steps, self.store, self.every, self.schedule_of = steps, store, every, schedule_of
        start = start or Resume()
        self.metrics: dict[str, list[float]] = {k: list(v) for k, v in start.metrics.items()}
        self.schedule: dict[str, list[Any]] = {k: list(v) for k, v in start.schedule.items()}
        self._epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.store is not None:  # a bucket's folder another run took over: stopped now, not at the next checkpoint
            self.store.raise_if_taken()
        step = epoch_step(self, batch, self.steps)
        if self.store is not None and checkpointed_inside(step, self.every, self.steps):
            check_finite(self.model, self._epoch, step, logs)
            self._save(self._epoch, step)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        check_finite(self.model, epoch + 1, 0, logs)
        for record, values in ((self.metrics, numbers(logs)), (self.schedule, self.schedule_of(epoch))):
            for name, value in values.items():
                kept = record.setdefault(name, [])
                del kept[epoch:]
                kept.append(value)
        self._save(epoch + 1, 0)

    def _save(self, epoch: int, step: int) -> None:
        if self.store is not None:
            self.store.save(epoch, step, self.metrics, self.schedule)


def check_finite(model: keras.Model | None, epoch: int, step: int, logs: dict[str, Any] | None) -> None:
    """Raise an :class:`AlexnetError` when a weight of ``model`` is no longer a finite number (the run diverged), at
    ``epoch`` epochs and ``step`` steps done, before anything of it is kept (a checkpoint, the best epoch's weights,
    the model, its pin). Every worker of a synchronous run holds the same weights at these points (local SGD's averages
    come first), so all of them stop alike."""
    if model is None:
        return
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(weight)) for weight in model.trainable_weights
                            if weight.dtype.is_floating])
    if bool(finite):
        return
    where = f"after epoch {epoch}" if step == 0 else f"at step {step} of epoch {epoch + 1}"
    loss = numbers(logs).get("loss")
    said = "" if loss is None else f" (loss {loss:g})"
    raise run_error(  # found while the work ran: the command line's status 1, as a worker's failure
        f"Training diverged {where}: the model's weights are no longer finite numbers{said}, and nothing of it was "
        "kept (no checkpoint, best epoch, model or pin was written from it). Lower `learning_rate`, or warm up to it "
        "(`warmup_epochs`); with a `checkpoint_dir`, the run resumes from the checkpoint before this point."
    )


class BestWeights(keras.callbacks.Callback):
    """Keeps a copy of the weights of the epoch with the best validation top-1 (``val_accuracy``; the first of
    equals), for ``keep_best``, and with a checkpoint ``store`` keeps them beside the checkpoints too, so that a
    resumed run (whose ``start`` holds the accuracies of the epochs done) still knows them.

    It comes after the :class:`Recorder` among a run's callbacks: an epoch's checkpoint is written before its weights
    are kept as the best. A run stopped between the two resumes from that epoch's end, whose weights ``model`` holds
    once restored: they are taken as the best when that epoch's top-1 is the best so far."""

    def __init__(self, store: CheckpointStore | None = None, start: Resume | None = None,
                 model: keras.Model | None = None):
        super().__init__()
        self.store = store
        self.best, self.epoch, self.weights = -math.inf, None, None
        start = start or Resume()
        accuracies = [float(a) for a in start.metrics.get("val_accuracy", [])]
        kept = store.read_best() if store is not None and start.epoch > 0 else None
        if kept is not None and kept[0] < len(accuracies):
            self.epoch, self.weights = kept
            self.best = accuracies[kept[0]]
        last = len(accuracies) - 1
        if start.restored and start.step == 0 and last >= 0 and model is not None \
                and accuracies[last] > max([self.best, *accuracies[:last]]):
            self.best, self.epoch = accuracies[last], last
            self.weights = model.get_weights()  # copies already
            if store is not None:
                store.save_best(last, self.weights)
        elif accuracies and self.weights is None:
            first = accuracies.index(max(accuracies))
            logger.warning("keep_best: the weights of epoch %d, the best so far (validation top-1 %.4f), are not "
                           "kept in %s: the run ends with the best of the epochs it trains from here on.", first + 1,
                           accuracies[first], store.location if store is not None else "its checkpoints")

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        accuracy = numbers(logs).get("val_accuracy")
        if accuracy is not None and accuracy > self.best:
            self.best, self.epoch = accuracy, epoch
            self.weights = self.model.get_weights()  # copies already
            if self.store is not None:
                self.store.save_best(epoch, self.weights)


class Throughput(keras.callbacks.Callback):
    """Training steps and the seconds they took, per epoch: from the epoch's start to the end of its last step, so
    the validation after it (:mod:`.validation`, a callback at the epoch's end) is left out."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[tuple[int, float]] = []
        self._start = self._last = 0.0
        self._steps = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._start, self._steps = time.perf_counter(), 0
        self._last = self._start

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._steps += 1
        self._last = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epochs.append((self._steps, self._last - self._start))

    def images_per_second(self, worker_batch: int) -> float | None:
        """Training images per second on this worker, over the epochs after the first when there are several;
        ``None`` when no step was timed (a run that found every epoch trained before)."""
        timed = self.epochs[1:] if len(self.epochs) > 1 else self.epochs
        steps, seconds = sum(s for s, _ in timed), sum(t for _, t in timed)
        rate = steps * worker_batch / seconds if steps and seconds > 0 else None
        return rate if rate is not None and math.isfinite(rate) else None


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
    the end of every epoch (with the validation metrics). Images per second are those of every worker's steps of the
    epoch so far, over the seconds since it began until its last step ended (the validation and checkpoint at its
    end left out)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], *, epochs: int, steps: int, worker_batch: int,
                 workers: int, interval: float = 2.0):
        super().__init__()
        self.send, self.epochs, self.steps = send, epochs, steps
        self.images_per_step = worker_batch * workers
        self.interval = interval
        self._epoch = 0
        self._last = 0.0
        self._start = 0.0
        self._stepped = 0.0
        self._done = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch, self._start, self._done = epoch, time.perf_counter(), 0
        self._stepped = self._start

    def _record(self, step: int, logs: dict[str, Any] | None, kind: str) -> dict[str, Any]:
        elapsed = self._stepped - self._start
        rate = self._done * self.images_per_step / elapsed if elapsed > 0 else 0.0
        return {"kind": kind, "time": time.time(), "epoch": self._epoch + 1, "epochs": self.epochs, "step": step,
                "steps": self.steps, "images_per_second": round(rate, 2), **numbers(logs)}

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._done += 1
        now = self._stepped = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            replicas = replicas_summed(self.model)
            mean = {name: value / replicas for name, value in numbers(logs).items()}
            self.send(self._record(epoch_step(self, batch, self.steps), mean, "step"))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.send(self._record(self.steps, logs, "epoch"))
