"""The measurement a multi-worker run takes of its communication before its first step
(:func:`probe_communication`): one exchange and one step's computation, each alone, and on GPUs a step with packs
(:func:`packed_step_timed`), which :mod:`.levers` advises from (:mod:`.advice`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..environment import interop_threads
from .communication import Communication

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from .strategy import Topology

logger = logging.getLogger(__name__)


def parameter_count(net: keras.Model) -> int:
    """The numbers ``net`` trains: what a step's gradients carry."""
    return int(sum(w.shape.num_elements() for w in net.trainable_weights))


def probe_communication(strategy: tf.distribute.Strategy, net: keras.Model, communication: Communication,
                        topology: Topology, *, batch: int, image_size: int, sixteen_bit: bool = True,
                        steps: int | None = None, checkpoint_every: int | None = None) -> dict[str, float]:
    """What one optimizer step exchanges and how long that takes alone, measured once before training on a
    multi-worker run (empty alone): ``bytes_per_step``, ``allreduce_seconds`` (one exchange alone, per optimizer
    step, with local SGD its averages in epochs of ``steps`` steps as the advice counts them:
    :meth:`~.communication.Communication.exchanges_per_step`; a collective, so every worker measures it); with
    post-local SGD, those of local SGD's epochs, and
    ``synchronous_epochs``, ``synchronous_bytes_per_step`` and ``synchronous_allreduce_seconds`` for the epochs
    before them; ``sixteen_bit_allreduce_seconds`` (float32 on the wire, and ``sixteen_bit``: a run whose settings
    are decided, a resumed run of ``adapt_communication``, times only the exchange it trains with): the same
    exchange in the 16-bit format the devices sum (``communication.sixteen_bit``); and ``compute_seconds``: a forward
    and backward pass of ``batch`` images a replica at ``image_size`` pixels, times ``accumulate_steps``, without
    any exchange (each worker its own; the advice of :func:`~.levers.advise_communication` and TensorBoard's
    hidden share are estimated from them); on GPU workers that synchronise every step (:func:`packed_step_wire`),
    ``hidden_seconds``: what of the exchange one such pass, followed by the all-reduce of its gradients in the packs
    of the run (or those advised) and the wire format the chief's timing advises, hid: the pass and the exchange
    alone, less that step, at least 0 and at most the exchange."""
    import time

    from ..tfimport import tf
    from .advice import ADVISED_PACK_MB
    from .communication import all_reduce, time_all_reduce
    from .watchdog import TRACE_GRACE, watching

    if topology.workers <= 1:
        return {}
    if topology.chief:  # over a slow link this takes a while, with nothing else logged meanwhile
        logger.info("Measuring the link between the %d workers: a step's exchange alone, and its computation.",
                    topology.workers)
    shapes = [tuple(int(d) for d in w.shape) for w in net.trainable_weights]
    parameters = parameter_count(net)

    def timed(prefix: str, phase: Communication) -> dict[str, float]:
        exchange = time_all_reduce(strategy, phase.exchanged(shapes), phase.wire, phase.options(), repeats=2)
        return {f"{prefix}bytes_per_step": phase.bytes_per_step(parameters, steps, checkpoint_every),
                f"{prefix}allreduce_seconds": exchange * phase.exchanges_per_step(steps, checkpoint_every)}

    timing = timed("", communication)
    if communication.wire == "float32" and sixteen_bit:  # what 16 bits would gain on this link, for the advice
        sixteen = replace(communication, wire=communication.sixteen_bit)
        timing["sixteen_bit_allreduce_seconds"] = timed("", sixteen)["allreduce_seconds"]
    first = communication.at_epoch(0)
    if first != communication:  # post-local SGD: synchronous epochs first
        timing.update(timed("synchronous_", first), synchronous_epochs=float(communication.local_after))
    images = tf.zeros([batch, image_size, image_size, 3], tf.uint8)

    def step(exchange: Callable[[list[Any]], list[Any]]) -> float:
        """The shortest of two timed steps (after one warm-up) of a replica's forward and backward pass whose
        gradients then go through ``exchange``."""

        @tf.function
        def once() -> Any:
            def replica() -> Any:
                with tf.GradientTape() as tape:
                    # the cost of the real loss's backward pass: every layer's gradient (the loss itself is small)
                    loss = -tf.reduce_mean(tf.math.log(tf.cast(net(images, training=True), tf.float32) + 1e-7))
                grads = exchange(tape.gradient(loss, net.trainable_variables))
                return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) for g in grads])

            return strategy.run(replica)

        seconds = []
        for k in range(3):
            start = time.perf_counter()
            with watching("a timed step of the workers", TRACE_GRACE if k == 0 else 0.0):
                float(strategy.experimental_local_results(once())[0])
            seconds.append(time.perf_counter() - start)
        return min(seconds[1:])

    backward = step(list)
    timing["compute_seconds"] = backward * communication.accumulate
    wire = packed_step_wire(strategy, communication, topology, timing)
    if wire is not None:
        alone = timing["allreduce_seconds"] if wire == communication.wire else timing["sixteen_bit_allreduce_seconds"]
        packed = replace(communication, wire=wire, pack_mb=communication.pack_mb or ADVISED_PACK_MB)
        options = packed.options()
        together = step(lambda grads: all_reduce(grads, wire, options))
        timing["hidden_seconds"] = min(alone, max(0.0, backward + alone - together))
    logger.info("Communication: %s.", _probed_text(timing, communication, wire))
    return timing


def _probed_text(timing: Mapping[str, float], communication: Communication, packed: str | None) -> str:
    """What :func:`probe_communication` timed, each figure with the wire format it is of: the exchange as the run
    sends it, the same in 16 bits when that was timed, and what the step with packs (sent in ``packed``) hid."""
    said = (f"{timing['bytes_per_step'] / 1e6:.1f} MB a step in {communication.wire}, "
            f"{timing['allreduce_seconds']:.3f} s alone")
    if "sixteen_bit_allreduce_seconds" in timing:
        said += f" ({communication.sixteen_bit}: {timing['sixteen_bit_allreduce_seconds']:.3f} s alone)"
    said += f"; compute {timing['compute_seconds']:.3f} s a step"
    if "hidden_seconds" in timing:
        said += f"; packs hide {timing['hidden_seconds']:.3f} s of the {packed} exchange"
    return said


def packed_step_wire(strategy: tf.distribute.Strategy, communication: Communication, topology: Topology,
                     timing: Mapping[str, float]) -> str | None:
    """The wire format of :func:`probe_communication`'s step with packs, the same on every worker (``None``: no
    worker runs it). It runs where every worker times it (:func:`packed_step_timed`) and the workers synchronise
    every step, in the format the chief's ``timing`` advises (:func:`~.advice.faster_wire`;
    the run's own where its 16-bit exchange was not timed): each worker times the exchanges on its own, and timings
    a few per cent apart may fall on both sides of :data:`~.advice.SIXTEEN_BIT_GAIN`, while one all-reduce must
    carry one format. A collective: every worker calls it at the same point."""
    from .advice import faster_wire
    from .agreement import all_gather_ints

    if communication.local_sgd:
        return None
    own = (faster_wire(communication, timing["allreduce_seconds"], timing["sixteen_bit_allreduce_seconds"])
           if "sixteen_bit_allreduce_seconds" in timing else communication.wire)
    rows = all_gather_ints(strategy, [int(topology.chief), int(packed_step_timed(topology)),
                                      int(own != communication.wire)])
    if not all(row[1] for row in rows):
        return None
    chief = next((row for row in rows if row[0]), rows[0])
    return communication.sixteen_bit if chief[2] else communication.wire


def overlaps(topology: Topology) -> bool:
    """Does a pack's all-reduce run while the backward pass computes on ``topology``'s devices: on GPUs, and on CPUs
    whose process runs two or more inter-op threads (:func:`alexnet.environment.interop_threads`)?"""
    return topology.gpu or interop_threads() >= 2


def packed_step_timed(topology: Topology) -> bool:
    """Does :func:`probe_communication` time a step with packs on ``topology``'s devices, and the advice count what
    it hid: on GPUs. Not on CPUs, even where packs overlap (:func:`overlaps`): the collective's work shares their
    cores, and what such a step hid varied from one probe to the next of the same workers (all, then none)."""
    return topology.gpu
