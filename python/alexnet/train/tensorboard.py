"""TensorBoard logs of a training run: scalars per epoch and every few steps, and TensorFlow's profiler.

``log_dir`` takes the same strings as ``checkpoint_dir``: a folder, ``file://``, ``gs://`` or ``s3://``. Event
files are written in place in a folder; for a bucket they are written to a local scratch folder, and what is new
there is uploaded after each epoch and at the end (an event file grows as it is written, so it is uploaded again
whenever its size changed). Only the chief (worker 0) of a multi-worker run writes logs.

Scalars are written with ``tf.summary.write`` and the metadata of TensorBoard's scalars plugin, so training
needs no ``tensorboard`` package; watching does: the core's ``tensorboard`` extra installs it (``make setup``
does; from R, ``install_alexnet(extras = "tensorboard")``), then ``tensorboard --logdir <log_dir>``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ..storage.mirror import MirroredFolder
from ..tfimport import keras, tf
from .callbacks import checkpointed_inside, epoch_step, numbers, replicas_summed
from .schedule import Rates, SizeSchedule

logger = logging.getLogger(__name__)

#: Tags of the scalars written every ``log_every`` steps, under :data:`STEP_PREFIX`.
STEP_SCALARS = ("loss", "accuracy", "learning_rate", "images_per_second")
#: Prefix of the tags written once per epoch (x axis: epochs done).
EPOCH_PREFIX = "epoch/"
#: Prefix of the tags written every ``log_every`` steps (x axis: the global step, across resumed runs).
STEP_PREFIX = "step/"
#: Fewest classes for which top-5 accuracy says something (with 5 or fewer, it is always 1).
TOP5_MIN_CLASSES = 6


def _scalar_metadata() -> Any:
    """The summary metadata TensorBoard's scalars plugin reads (what ``tensorboard.summary.scalar`` writes)."""
    plugin = tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars")
    return tf.compat.v1.SummaryMetadata(plugin_data=plugin, data_class=1)  # 1: DATA_CLASS_SCALAR


class LogDir(MirroredFolder):
    """Where this run's event files go (``location``, a resolved location string), seen from the chief."""

    def __init__(self, location: str):
        super().__init__(location, "`log_dir`")


class TensorBoardLog(keras.callbacks.Callback):
    """Writes a run's scalars to ``log_dir`` and profiles steps ``profile_steps``.

    Per epoch (tags ``epoch/<name>``, at the number of epochs done): every metric of the epoch's logs as the run's
    own callbacks leave them (those given to ``alexnet_train`` come after this one)
    (``loss``, ``accuracy``, ``top5_accuracy`` only with :data:`TOP5_MIN_CLASSES` classes or more, the ``val_``
    ones), ``learning_rate``, ``images_per_second`` (training images of every worker per second, validation
    excluded) and ``image_size``, the rate and size from the run's schedule (``rates``, ``sizes``); with
    ``communication`` (a multi-worker run's probe, :func:`alexnet.train.probe.probe_communication`), also
    ``allreduce_mb_per_step``, ``allreduce_seconds`` (one step's exchange alone, with local SGD every average of an
    epoch over its steps, as the advice counts them; with post-local SGD, synchronous training's in its epochs,
    local SGD's after them) and ``hidden_fraction``: the share
    of it hidden behind computation, estimated from the epoch's seconds a step, the compute seconds a step measured
    alone at the final image size and the exchange alone (``1 - max(0, step - compute) / exchange``, between 0 and
    1; written for the epochs at the final size).
    Every ``every`` steps (tags ``step/<name>``, at the global step ``epoch * steps + step``):
    :data:`STEP_SCALARS`, where loss and accuracy are the epoch's running means up to that step, as Keras
    reports them. ``profile_steps = (first, last)`` are counted from 1 over the steps of this call (a resumed
    run counts from where it resumed): the profiler runs from the start of step ``first`` to the end of step
    ``last`` and writes ``plugins/profile/<run>/`` under ``log_dir``. Call :meth:`close` once training is over.

    What is written is flushed (and uploaded to a bucket) at every epoch's end and, with ``checkpoint_every``, at
    each step a checkpoint is saved inside an epoch. Placed before the checkpoint's callback, it has written a step
    or epoch by the time the checkpoint that a resumed run starts after is saved, so that a run killed between the
    two and resumed misses no point (at worst it writes the step again).
    """

    def __init__(self, log_dir: LogDir, *, steps: int, every: int, images_per_step: int, num_classes: int,
                 sizes: SizeSchedule, rates: Rates, profile_steps: tuple[int, int] | None = None,
                 communication: Mapping[str, float] | None = None, checkpoint_every: int | None = None):
        super().__init__()
        self.log_dir, self.steps, self.every = log_dir, steps, every
        self.checkpoint_every = checkpoint_every
        self.sizes, self.rates = sizes, rates
        self.images_per_step = images_per_step
        self.top5 = num_classes >= TOP5_MIN_CLASSES
        self.profile_steps = profile_steps
        self.communication = dict(communication or {})
        self.writer = tf.summary.create_file_writer(log_dir.local)
        self._metadata = _scalar_metadata()
        self._epoch = 0
        self._run_steps = 0  # steps of this call, for profile_steps
        self._profiling = False
        self._epoch_start = self._mark = 0.0
        self._epoch_steps = self._mark_steps = 0
        self._epoch_seconds: float | None = None

    def _write(self, values: Mapping[str, float], prefix: str, step: int) -> None:
        with self.writer.as_default():
            for name, value in values.items():
                tf.summary.write(prefix + name, tf.constant(float(value), tf.float32), step=step,
                                 metadata=self._metadata)

    # -- steps ---------------------------------------------------------------------------------------------

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch
        self._epoch_start = self._mark = time.perf_counter()
        self._epoch_steps = self._mark_steps = 0
        self._epoch_seconds = None

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.profile_steps is not None and self._run_steps + 1 == self.profile_steps[0]:
            self._start_profiler()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._run_steps += 1
        self._epoch_steps += 1
        self._epoch_seconds = time.perf_counter() - self._epoch_start
        if self._profiling and self.profile_steps is not None and self._run_steps >= self.profile_steps[1]:
            self._stop_profiler()
        in_epoch = epoch_step(self, batch, self.steps)
        step = self._epoch * self.steps + in_epoch
        if step % self.every == 0:
            self._write_step(step, logs)
        if checkpointed_inside(in_epoch, self.checkpoint_every, self.steps):
            self._flush()  # the checkpoint saved at this step (after this callback) is resumed after it

    def _write_step(self, step: int, logs: dict[str, Any] | None) -> None:
        now = time.perf_counter()
        elapsed = now - self._mark
        rate = (self._epoch_steps - self._mark_steps) * self.images_per_step / elapsed if elapsed > 0 else 0.0
        self._mark, self._mark_steps = now, self._epoch_steps
        replicas = replicas_summed(self.model)
        values = {name: value / replicas for name, value in numbers(logs).items() if name in ("loss", "accuracy")}
        values.update(learning_rate=self.rates.at(step - 1), images_per_second=rate)
        self._write(values, STEP_PREFIX, step)

    # -- epochs --------------------------------------------------------------------------------------------

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # up to the end of the epoch's last step: the validation at the epoch's end is left out
        seconds = self._epoch_seconds if self._epoch_seconds is not None else time.perf_counter() - self._epoch_start
        values = {name: value for name, value in numbers(logs).items() if self.top5 or "top5" not in name}
        values["learning_rate"] = self.rates.of_epoch(epoch)
        values["images_per_second"] = self._epoch_steps * self.images_per_step / seconds if seconds > 0 else 0.0
        values["image_size"] = float(self.sizes.at(epoch))
        # the compute probe is at the final size: the hidden share is estimated for the epochs at that size only
        at_final = self.sizes.at(epoch) == self.sizes.final
        values.update(self._communication(epoch, seconds / self._epoch_steps if self._epoch_steps and at_final
                                          else None))
        self._write(values, EPOCH_PREFIX, epoch + 1)
        self._flush()

    def _flush(self) -> None:
        self.writer.flush()
        self.log_dir.sync()

    def _communication(self, epoch: int, step_seconds: float | None) -> dict[str, float]:
        timing = self.communication
        if not timing:
            return {}
        phase = "synchronous_" if epoch < timing.get("synchronous_epochs", 0) else ""
        alone, compute = timing[f"{phase}allreduce_seconds"], timing.get("compute_seconds")
        values = {"allreduce_mb_per_step": timing[f"{phase}bytes_per_step"] / 1e6, "allreduce_seconds": alone}
        if step_seconds is not None and compute is not None and alone > 0:
            values["hidden_fraction"] = min(1.0, max(0.0, 1.0 - max(0.0, step_seconds - compute) / alone))
        return values

    # -- the profiler --------------------------------------------------------------------------------------

    def _start_profiler(self) -> None:
        try:
            tf.profiler.experimental.start(self.log_dir.local)
        except Exception as error:  # e.g. another profiler session runs in this process
            logger.warning("Cannot start TensorFlow's profiler (%s); training goes on without it.", error)
            return
        self._profiling = True
        logger.info("Profiling steps %d to %d into %s.", *self.profile_steps, self.log_dir.location)  # type: ignore[misc]

    def _stop_profiler(self) -> None:
        self._profiling = False
        try:
            tf.profiler.experimental.stop()
        except Exception as error:
            logger.warning("Cannot stop TensorFlow's profiler (%s); the profile may be missing.", error)

    def close(self) -> None:
        """Stop the profiler if it still runs (training ended before ``profile_steps``' last), write the last
        events and upload them."""
        if self._profiling:
            logger.warning("Training ended before step %d of `profile_steps`: the profile stops at step %d.",
                           self.profile_steps[1] if self.profile_steps else 0, self._run_steps)
            self._stop_profiler()
        elif self.profile_steps is not None and self._run_steps < self.profile_steps[0]:
            logger.warning("`profile_steps` starts at step %d, but this run trained %d step(s): nothing was profiled.",
                           self.profile_steps[0], self._run_steps)
        self.writer.flush()
        self.writer.close()
        self.log_dir.close()
