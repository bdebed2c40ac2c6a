"""What the replicas of a run send each other, and the settings that make it less or hide it.

Synchronous training all-reduces every gradient after every step between the replicas of a run (the GPUs of one
machine, and the machines of a multi-worker run): for AlexNet 62.4 million numbers, 250 MB in float32, which a ring
all-reduce moves about ``2 (N - 1) / N`` times in and out of every one. Four settings of :mod:`.settings` change that,
each off unless asked for: the first two change what travels between replicas (over NVLink or PCIe between the GPUs of
one machine, over the network between machines), ``accumulate_steps`` how often, on any run, and ``sync_every`` what
the workers of a multi-worker run exchange:

- ``allreduce_precision``: the gradients cast to ``bfloat16`` or ``float16`` before the all-reduce, the sum cast
  back to float32 before the optimizer uses it: half the bytes. Where the sums are rounded: each replica's gradient
  once, to 16 bits; then TensorFlow's ring all-reduce adds the chunks in that format, so each of the ``N - 1``
  partial sums of a chunk is rounded again. One rounding of a normal number errs by at most ``2^-8`` of it in
  bfloat16 (8 significant bits) and ``2^-11`` in float16 (11 bits), so the sum by at most about ``N`` times that of
  the gradients' magnitudes, less on average (rounding errors of both signs cancel). bfloat16 keeps float32's range,
  and that bound. float16 narrows the range: a sum above 65504 is infinity, and below ``2^-14`` (6.1e-5) its numbers
  are subnormal, with fewer significant bits the smaller they are (a fixed step of ``2^-24``, 6e-8, under half of
  which a gradient becomes 0), where the bound does not hold. A replica's gradients are small: Keras divides each
  replica's loss by the replicas in sync, and with float16 layers the loss-scaling optimizer unscales the gradients
  before the all-reduce, so the more replicas, the more of them are subnormal. AlexNet's gradients of one batch of 32
  synthetic images (1000 classes), divided as between 8 replicas: 82% of the nonzero numbers subnormal in float16,
  one rounding's median error 8.4e-4 of a number (0.5% of them 0), against 2.3e-4 undivided; between 32 replicas:
  98%, 3.4e-3 (1.6% of them 0), an error of 0.8e-3 to 1.2e-3 of the whole gradient's L2 norm. bfloat16 is the
  16-bit format to take where the devices sum it.
- ``allreduce_pack_mb``: the gradients grouped in packs of about that many megabytes, last layer first (TensorFlow's
  collective all-reduce reverses the list before packing), each pack one all-reduce that starts as soon as its
  gradients exist: the fully connected layers' gradients (94% of AlexNet's bytes, computed first by the backward
  pass) travel while the convolutions' are still being computed. ``0``: one all-reduce of every gradient once
  the backward pass has ended.
- ``accumulate_steps`` (:mod:`.accumulate`): the gradients of ``k`` micro-batches added up on each replica before
  one all-reduce and one optimizer step, the same mathematics as a ``k`` times larger batch.
- ``sync_every`` (:mod:`.local_sgd`): local SGD: each worker takes that many optimizer steps alone, then the
  workers average their weights and momentum; with ``local_sgd_after``, only after that many epochs of synchronous
  training (post-local SGD).

:class:`Communication` holds the four for one run and says how many bytes a step all-reduces; :mod:`.advice`
turns what a multi-worker run measured before training into the settings that would keep its workers busy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..checks import count_text
from ..errors import AlexnetError

if TYPE_CHECKING:
    from .precision import Hardware

#: Number formats of the gradients on the wire.
WIRE_FORMATS = ("float32", "bfloat16", "float16")
#: Bytes per number of each wire format.
WIRE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: The first GPU compute capability whose collectives sum bfloat16 (Ampere).
BF16_WIRE_CAPABILITY = (8, 0)
MB = 1_000_000

@dataclass(frozen=True)
class Communication:
    """How a run of ``workers`` workers and ``replicas`` replicas in all exchanges gradients or weights: the four
    settings of the module documentation."""

    wire: str = "float32"
    pack_mb: float = 0.0
    accumulate: int = 1
    sync_every: int = 1
    workers: int = 1
    #: with local SGD: the epochs trained synchronously before it begins
    local_after: int = 0
    #: the 16-bit wire format the run's devices sum (:func:`sixteen_bit_wire`), timed and advised against float32
    sixteen_bit: str = "bfloat16"
    #: the replicas in sync over every worker (at least ``workers``: fewer count as ``workers``)
    replicas: int = 1

    @classmethod
    def of(cls, settings: Any, workers: int, replicas: int | None = None) -> Communication:
        """The communication of a run of ``workers`` workers and ``replicas`` replicas in all (unset: one a worker)
        with :class:`~.settings.TrainSettings` ``settings``."""
        return cls(settings.allreduce_precision, float(settings.allreduce_pack_mb), settings.accumulate_steps,
                   settings.sync_every, workers, settings.local_sgd_after,
                   replicas=workers if replicas is None else replicas)

    @property
    def exchanging(self) -> bool:
        """Do the replicas exchange anything: several replicas, on one worker or several?"""
        return max(self.workers, self.replicas) > 1

    @property
    def local_sgd(self) -> bool:
        """Do the workers take steps alone between averages (``sync_every`` > 1 with several workers)?"""
        return self.sync_every > 1 and self.workers > 1

    @property
    def pack_bytes(self) -> int:
        """``allreduce_pack_mb`` in bytes (0: one pack)."""
        return round(self.pack_mb * MB)

    @property
    def wire_bytes(self) -> int:
        """Bytes per number on the wire."""
        return WIRE_BYTES[self.wire]

    def options(self, timeout: float | None = None) -> Any:
        """TensorFlow's ``CommunicationOptions`` for these packs (and a collective ``timeout``, seconds). Their
        implementation is left at ``AUTO``, which keeps the strategy's own: NCCL on GPUs (``MirroredStrategy`` takes
        it by itself, ``"multi_worker"`` asks for it: :func:`~.strategy.multi_worker_options`)."""
        from ..tfimport import tf

        return tf.distribute.experimental.CommunicationOptions(bytes_per_pack=self.pack_bytes,
                                                               timeout_seconds=timeout)

    def gradient_reducer(self, timeout: float | None = None) -> Callable[[list[Any]], list[Any]] | None:
        """What the optimizer does with each replica's gradients before applying them (see
        :class:`alexnet.train.model.DecayedSGD`): ``None`` for TensorFlow's own all-reduce (float32, one pack,
        every step); with local SGD, :func:`alone` (each worker applies its own); else :func:`all_reduce` in the wire
        format and packs."""
        if self.local_sgd:
            return alone
        return self.synchronous_reducer(timeout)

    def synchronous_reducer(self, timeout: float | None = None) -> Callable[[list[Any]], list[Any]] | None:
        """The :meth:`gradient_reducer` of synchronous training in this wire format and packs: the one of local SGD's
        first ``local_after`` epochs."""
        if self.wire == "float32" and not self.pack_bytes:
            return None
        options = self.options(timeout)
        return lambda gradients: all_reduce(gradients, self.wire, options)

    def at_epoch(self, epoch: int) -> Communication:
        """The communication of the 0-based ``epoch``: with post-local SGD, synchronous training's (gradients every
        step) before epoch ``local_after``; else this one."""
        if self.local_sgd and epoch < self.local_after:
            return replace(self, sync_every=1, local_after=0)
        return self

    def exchanged(self, shapes: Sequence[Sequence[int]]) -> list[Sequence[int]]:
        """The shapes of what one exchange all-reduces, for a model of trainable weights of ``shapes``: the
        gradients, or with local SGD the weights' changes and the momentum."""
        return list(shapes) * (2 if self.local_sgd else 1)

    def exchanges_per_step(self, steps: int | None = None, checkpoint_every: int | None = None) -> float:
        """The exchanges of an optimizer step: one, or with local SGD its averages in an epoch of ``steps`` steps
        (:func:`averages_per_step`, ``checkpoint_every`` as it takes it)."""
        return averages_per_step(steps, self.sync_every, checkpoint_every) if self.local_sgd else 1.0

    def bytes_per_step(self, parameters: int, steps: int | None = None, checkpoint_every: int | None = None) -> float:
        """Bytes each replica puts into the all-reduce per optimizer step, for a model of ``parameters`` numbers: the
        gradients every step, or with local SGD the weights and momentum at every average of an epoch of ``steps``
        steps (:meth:`exchanges_per_step`; 0 with one replica)."""
        if not self.exchanging:
            return 0.0
        if self.local_sgd:
            return 2.0 * parameters * self.wire_bytes * self.exchanges_per_step(steps, checkpoint_every)
        return float(parameters * self.wire_bytes)

    def describe(self) -> str:
        """The settings in a few words, for logs and the history."""
        if not self.exchanging:
            return "one replica: nothing to all-reduce" + (
                f"; {self.accumulate} micro-batches a step" if self.accumulate > 1 else "")
        wire = (f"{self.wire} on the wire" if self.workers > 1 else
                f"{self.wire} between the {self.replicas} replicas of one worker")
        parts = [wire, f"packs of {self.pack_mb:g} MB" if self.pack_bytes else "one pack"]
        if self.accumulate > 1:
            parts.append(f"{self.accumulate} micro-batches a step")
        parts.append(f"weights and momentum averaged every {self.sync_every} steps" if self.local_sgd else
                     "gradients all-reduced every step")
        if self.local_sgd and self.local_after:
            parts[-1] += f" after {count_text(self.local_after, 'synchronous epoch')}"
        return ", ".join(parts)


def averaged_after(step: int, steps: int, every: int, checkpoint_every: int | None = None) -> bool:
    """Does local SGD average the workers' models after ``step`` (from 1) of an epoch of ``steps`` steps: after
    every ``every``-th step, after the epoch's last, and after every ``checkpoint_every``-th (a checkpoint holds
    one model, the same everywhere)? :class:`~.local_sgd.LocalSGD` averages where it says so."""
    checkpoint = checkpoint_every or 0
    return step % every == 0 or step == steps or (checkpoint > 0 and step % checkpoint == 0)


def averages_in_epoch(steps: int, every: int, checkpoint_every: int | None = None) -> int:
    """How many times local SGD averages the workers' models in an epoch of ``steps`` steps (at least one): the
    steps of :func:`averaged_after`, ``ceil(steps / every)`` without ``checkpoint_every``."""
    checkpoint = checkpoint_every or 0
    count = steps // every
    if checkpoint > 0:
        count += steps // checkpoint - steps // math.lcm(every, checkpoint)
    counted = steps % every == 0 or (checkpoint > 0 and steps % checkpoint == 0)
    return count + (0 if counted else 1)  # the epoch's last step, when no multiple counted it


def averages_per_step(steps: int | None, every: int, checkpoint_every: int | None = None) -> float:
    """Local SGD's averages a step, once in ``every`` steps, in epochs of ``steps`` steps: every average of
    :func:`averages_in_epoch` (the epoch's end's and the checkpoints' too) over its steps (``sync_every`` = 4 in
    epochs of 5 steps: 2/5, not 1/4); ``1 / every`` where ``steps`` is not known. What the run reports a step and
    what its advice counts (:func:`~.advice.advise`) both come from it."""
    if steps is None:
        return 1 / every
    return averages_in_epoch(steps, every, checkpoint_every) / steps


def alone(gradients: list[Any]) -> list[Any]:
    """A replica's own gradients as the gradients of its own loss, to apply without any exchange (local SGD).

    Keras divides each replica's loss by the replicas in sync, so that the all-reduced sum of their gradients is the
    gradient of the mean loss over the global batch; a replica that applies its gradients alone multiplies them back,
    so that each step moves its weights as a run of one replica would at the same rate (the weight decay is added
    after, unscaled, as in synchronous training)."""
    from ..tfimport import tf

    replicas = tf.distribute.get_replica_context().num_replicas_in_sync
    if replicas == 1:
        return list(gradients)
    return [None if g is None else g * tf.cast(replicas, g.dtype) for g in gradients]


def all_reduce(gradients: Sequence[Any], wire: str, options: Any) -> list[Any]:
    """The sum over every replica of each of ``gradients`` (in the replica context of a training step), sent in
    the ``wire`` format in the packs of ``options``, returned in the gradients' own formats."""
    from ..tfimport import tf

    dtype = tf.as_dtype(wire)
    sent = [g if g.dtype == dtype else tf.cast(g, dtype) for g in gradients]
    summed = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, sent, options=options)
    return [s if s.dtype == g.dtype else tf.cast(s, g.dtype) for s, g in zip(summed, gradients, strict=True)]


def time_all_reduce(strategy: Any, shapes: Sequence[Sequence[int]], wire: str, options: Any,
                    repeats: int = 3) -> float:
    """Seconds one all-reduce of float32 tensors of ``shapes`` takes over every replica of ``strategy``, sent as
    :func:`all_reduce` sends them (``wire``, the packs of ``options``): the median of ``repeats`` after one warm-up.
    A collective: every worker calls it at the same point. 0 with one worker."""
    import statistics
    import time

    from ..tfimport import tf

    if strategy.num_replicas_in_sync <= 1:
        return 0.0
    tensors = [tf.zeros(shape, tf.float32) for shape in shapes]

    @tf.function
    def once() -> Any:
        def replica() -> Any:
            summed = all_reduce(tensors, wire, options)
            return tf.add_n([tf.reshape(s, [-1])[0] for s in summed])

        return strategy.run(replica)

    from .watchdog import TRACE_GRACE, watching

    times = []
    for k in range(repeats + 1):
        start = time.perf_counter()
        with watching("a timed exchange of the workers", TRACE_GRACE if k == 0 else 0.0):
            float(strategy.experimental_local_results(once())[0])
        times.append(time.perf_counter() - start)
    return float(statistics.median(times[1:]))


def sixteen_bit_wire(device: Hardware) -> str:
    """The 16-bit wire format ``device`` sums: bfloat16, but float16 on GPUs older than compute capability 8.0,
    which have no bfloat16 arithmetic for their collectives (CPUs sum either format)."""
    return "float16" if device.gpu and min(device.gpu_capabilities) < BF16_WIRE_CAPABILITY else "bfloat16"


def check_wire(wire: str, device: Hardware) -> None:
    """Raise when ``device`` cannot sum numbers of the ``wire`` format (see :func:`sixteen_bit_wire`)."""
    if wire == "bfloat16" and sixteen_bit_wire(device) != wire:
        raise AlexnetError(f"allreduce_precision = 'bfloat16' needs GPUs of compute capability 8.0 or more (Ampere or "
                           f"newer) to add up bfloat16 gradients; this run has a {device.describe()}: use "
                           "allreduce_precision = 'float16' (the same bytes, summed by every GPU) or 'float32'.")
