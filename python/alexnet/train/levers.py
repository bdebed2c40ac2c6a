"""The communication settings of a run put in place: the optimizer's all-reduce, the accumulating step and the
local-SGD averages (see :mod:`.communication`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ..checks import count_text
from ..declare import declaration
from . import probe
from .advice import ADVISED_EFFICIENCY, Adapted, Advice, advise
from .batch_bound import large_batch_warning
from .communication import Communication, check_wire, sixteen_bit_wire
from .probe import overlaps, parameter_count, probe_communication

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from .agreement import Steps
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger(__name__)


#: The settings of how the replicas' gradients travel, between the GPUs of one machine as between workers: a run of
#: one replica does not use them.
BETWEEN_REPLICAS = ("allreduce_precision", "allreduce_pack_mb")
#: The settings of what the workers exchange, and of the measurement before a multi-worker run: a run of one worker
#: does not use them (its replicas all-reduce their gradients every step, in the format and packs asked for).
BETWEEN_WORKERS = ("sync_every", "local_sgd_after", "adapt_communication")


def check_global_batch(settings: TrainSettings, topology: Topology) -> None:
    """The chief's warning when the run's own global batch is beyond what AlexNet keeps its accuracy at
    (:func:`~.batch_bound.large_batch_warning`)."""
    large = large_batch_warning(topology.global_batch(settings.step_batch), settings.largest_global_batch,
                                settings.lr_scaling != "none")
    if large is not None and topology.chief:
        logger.warning("%s", large)


def check_levers(settings: TrainSettings, topology: Topology) -> Communication:
    """The run's :class:`Communication`, after checking that this worker's devices sum its wire format (before
    any data is read), with the 16-bit format they sum; a warning for each kind of lever the run does not use (those
    of :data:`BETWEEN_REPLICAS` with one replica, those of :data:`BETWEEN_WORKERS` with one worker)."""
    from .precision import hardware

    communication = Communication.of(settings, topology.workers, topology.replicas)
    if communication.exchanging:
        device = hardware(topology.gpu)
        if communication.wire != "float32":
            check_wire(communication.wire, device)
        communication = replace(communication, sixteen_bit=sixteen_bit_wire(device))
    changed = declaration.changed(settings)
    if topology.replicas <= 1:
        _warn_unused([name for name in changed if name in BETWEEN_REPLICAS], "replicas",
                     "a run of one exchanges nothing")
    if topology.workers <= 1:
        _warn_unused([name for name in changed if name in BETWEEN_WORKERS], "workers",
                     "a run of one exchanges nothing" if topology.replicas <= 1 else
                     f"the {topology.replicas} replicas of one worker all-reduce their gradients every step")
    if settings.local_sgd_after and settings.sync_every == 1:
        logger.info("local_sgd_after = %d with sync_every = 1: training is synchronous throughout.",
                    settings.local_sgd_after)
    return communication


def _warn_unused(given: list[str], several: str, alone: str) -> None:
    """The warning that the levers ``given`` are only used with several ``several`` (replicas, workers), and what a
    run without them does (``alone``)."""
    if given:
        logger.warning("%s %s only used with several %s: %s, and %s.", ", ".join(f"`{name}`" for name in given),
                       "are" if len(given) > 1 else "is", several, alone,
                       "they change nothing" if len(given) > 1 else "it changes nothing")


def agree_on_sixteen_bit(strategy: tf.distribute.Strategy, communication: Communication,
                         topology: Topology) -> Communication:
    """``communication`` with the 16-bit wire format every worker's devices sum: float16 on every worker when any
    worker's GPUs have no bfloat16 sums (:func:`~.communication.sixteen_bit_wire`), so that a cluster of mixed GPU
    generations times, advises and takes one format. A collective with several workers: every worker calls it at
    the same point."""
    from .agreement import all_gather_ints

    if topology.workers <= 1:
        return communication
    rows = all_gather_ints(strategy, [int(communication.sixteen_bit == "float16")])
    return replace(communication, sixteen_bit="float16") if any(row[0] for row in rows) else communication


def install_levers(strategy: tf.distribute.Strategy, net: keras.Model, optimizer: Any, settings: TrainSettings,
                   communication: Communication, steps_per_epoch: int) -> list[Any]:
    """Set ``net``'s training step and ``optimizer``'s all-reduce for ``communication``; the callbacks the run
    needs for it (local SGD's averages), to be placed before those that checkpoint or validate."""
    from .accumulate import accumulating_step
    from .local_sgd import LocalSGD, ModelAverage

    inner = getattr(optimizer, "inner_optimizer", optimizer)
    # the first epoch's (post-local SGD starts synchronous: LocalSGD sets the local reducer in its first local epoch)
    inner.gradient_reducer = communication.at_epoch(0).gradient_reducer()
    if communication.accumulate > 1:
        net.train_step = accumulating_step(net, communication.accumulate)
    logger.info("Communication: %s.", communication.describe())
    if not communication.local_sgd:
        return []
    return [LocalSGD(ModelAverage(strategy, net, optimizer, communication), communication.sync_every,
                     steps_per_epoch, settings.checkpoint_every)]


def warn_of_averages_beyond_an_epoch(settings: TrainSettings, topology: Topology, steps: int) -> None:
    """Warn (the chief) when local SGD's ``sync_every`` is more steps than an epoch has: the weights are averaged at
    every epoch's end as well, so every ``steps`` steps (which the communication estimate counts), more often than
    ``sync_every`` says."""
    if topology.workers > 1 and topology.chief and settings.sync_every > steps:
        logger.warning("`sync_every` = %d is more steps than an epoch's %d: the weights are averaged at every epoch's "
                       "end too, so every %d steps; give `sync_every` <= %d for the period it names.",
                       settings.sync_every, steps, steps, steps)


def advise_communication(timing: Mapping[str, float], communication: Communication, topology: Topology, *,
                         global_batch: int, most_batch: int, rate_scaled: bool = True,
                         warn: bool = True, micro_batches: int | None = None, whole_epochs: bool = True,
                         parameters: int | None = None, train_images: int | None = None, epochs: int | None = None,
                         checkpoint_every: int | None = None) -> Advice | None:
    """The :func:`~.advice.advise` of a multi-worker run from its :func:`probe_communication` (``None`` alone), with
    micro-batches up to a global batch of ``most_batch`` (:func:`~.batch_bound.largest_batch` of its ``train_images``)
    and the rest of its arguments as :func:`~.advice.advise` takes them; what a step with packs hid counted where
    the probe times it (:func:`~.probe.packed_step_timed`). The chief logs it: a warning when settings are advised and
    ``warn`` (false: a run about to take its advice), or when none is left to advise and the workers would still
    wait for the network for more than a tenth of a step, else one line."""
    if "compute_seconds" not in timing:
        return None
    advice = advise(communication, timing["allreduce_seconds"], timing["compute_seconds"], global_batch=global_batch,
                    overlaps=overlaps(topology), sixteen_bit_seconds=timing.get("sixteen_bit_allreduce_seconds"),
                    hidden_seconds=timing.get("hidden_seconds") if probe.packed_step_timed(topology) else None,
                    rate_scaled=rate_scaled, most_batch=most_batch, micro_batches=micro_batches,
                    whole_epochs=whole_epochs, parameters=parameters, train_images=train_images,
                    checkpoint_every=checkpoint_every, epochs=epochs,
                    synchronous_seconds=timing.get("synchronous_allreduce_seconds"))
    if advice is not None and topology.chief:
        nothing_left = not advice.settings and advice.advised_efficiency < ADVISED_EFFICIENCY
        (logger.warning if (advice.settings and warn) or nothing_left else logger.info)("Communication: %s",
                                                                                          advice.text)
    return advice


def _within(recorded: dict[str, Any], settings: TrainSettings, topology: Topology, most_batch: int) -> dict[str, Any]:
    """``recorded``, the settings a resumed run took when it began, with no more micro-batches a step than make a
    global batch of ``most_batch`` (the run's own ``accumulate_steps`` at least), said when fewer."""
    then = int(recorded.get("accumulate_steps", 0))
    if not then or topology.global_batch(settings.batch_size * then) <= most_batch:
        return recorded
    now = max(settings.accumulate_steps, most_batch // topology.global_batch(settings.batch_size), 1)
    recorded.pop("accumulate_steps")
    recorded.update({"accumulate_steps": now} if now > settings.accumulate_steps else {})
    logger.warning("The run resumes with %s a step where it took %d when it began: a global batch of %d is above "
                   "the largest now, %d (`largest_global_batch`).", count_text(now, "micro-batch", "micro-batches"),
                   then, topology.global_batch(settings.batch_size * then), most_batch)
    return recorded


def launch_record(settings: TrainSettings, topology: Topology) -> dict[str, Any]:
    """What the checkpoints in ``checkpoint_dir`` recorded of the run that began there (:func:`.checkpoint.
    recorded_settings`), read by the chief of a run of ``adapt_communication`` over several workers (else empty)."""
    from .checkpoint import recorded_settings

    if not settings.adapt_communication or topology.workers <= 1 or not topology.chief:
        return {}
    return recorded_settings(settings.checkpoint_dir)


def recorded_adaptation(strategy: tf.distribute.Strategy, settings: TrainSettings, topology: Topology, *,
                        most_batch: int | None = None, record: Mapping[str, Any] | None = None) -> Adapted | None:
    """What a resumed run of ``adapt_communication`` over several workers took when it began, as its checkpoints in
    ``checkpoint_dir`` recorded it (``record``, the chief's :func:`launch_record`, read here when not given; its
    micro-batches fewer, said, where they now make a global batch above ``most_batch``, a ``largest_global_batch``
    lowered since): the chief's reading, on every worker (``None``: no record, or not asked). A collective with
    ``adapt_communication`` and several workers: every worker calls it at the same point, before the measurement,
    which then times only the settings the run trains with."""
    from .advice import adaptation_text, row_settings, settings_row
    from .agreement import all_gather_ints

    if not settings.adapt_communication or topology.workers <= 1:
        return None
    # the chief's reading is every worker's: only it reads the record
    record = launch_record(settings, topology) if record is None else record
    recorded = record.get("adapted_settings") if topology.chief else None
    if recorded is not None and most_batch is not None:
        recorded = _within(dict(recorded), settings, topology, most_batch)
    rows = all_gather_ints(strategy, [int(topology.chief), int(recorded is not None), *settings_row(recorded or {})])
    chief = next((row for row in rows if row[0]), rows[0])
    if not chief[1]:
        return None
    taken = row_settings(chief[2:])
    if topology.chief:
        logger.info("Communication: %s It resumes, and keeps what it took when it began.", adaptation_text(taken))
    return taken


def adapt_communication(strategy: tf.distribute.Strategy, settings: TrainSettings, advice: Advice | None,
                        topology: Topology, *, steps: int) -> Adapted:
    """The settings a run of ``adapt_communication`` over several workers takes of ``advice`` (empty: none, or not
    asked): the chief's decision on every worker, the :func:`~.advice.adaptable` part of its ``advice``, with at most
    as many micro-batches as an epoch has ``steps`` (a resumed run keeps what it took when it began instead:
    :func:`recorded_adaptation`). A collective: every worker calls it at the same point."""
    from .advice import adaptable, adaptation_text, row_settings, settings_row
    from .agreement import all_gather_ints

    if not settings.adapt_communication or topology.workers <= 1:
        return {}
    own = adaptable(advice, settings.accumulate_steps, settings.accumulate_steps * steps,
                    settings.steps_per_epoch is None)
    rows = all_gather_ints(strategy, [int(topology.chief), *settings_row(own)])
    chief = next((row for row in rows if row[0]), rows[0])
    taken = row_settings(chief[1:])
    if topology.chief:
        logger.info("Communication: %s", adaptation_text(taken))
    return taken


class Measurement(NamedTuple):
    """What a run measured before its first step (:func:`measure_communication`), the settings, communication and
    steps it trains with (those ``adapt_communication`` took: ``adapted``), its :func:`~.batch_bound.largest_batch`."""

    settings: TrainSettings
    communication: Communication
    steps: Steps
    timing: dict[str, float]
    advice: Advice | None
    adapted: Adapted
    most_batch: int


def measure_communication(strategy: tf.distribute.Strategy, net: keras.Model, settings: TrainSettings,
                          communication: Communication, topology: Topology, steps: Steps,
                          agree_steps: Callable[[TrainSettings], Steps]) -> Measurement:
    """The measurement before a run's first step, its advice and, with ``adapt_communication``, the settings taken
    (``agree_steps``: an epoch's steps every worker agrees on for the settings given, a collective). A resumed run
    of ``adapt_communication`` decides first (:func:`recorded_adaptation`) and times only the wire format it took
    (the chief keeps the float32 exchange its launch timed, ``asked_allreduce_seconds``, where its record has it).
    Any other run times the exchange as asked (:func:`probe_communication`), is advised (:func:`advise_communication`)
    and takes what the chief decides of it (:func:`adapt_communication`), its timing and advice then told for the
    settings taken (:func:`~.advice.adapted_timing`). A collective: every worker calls it at the same point, and
    takes the same branches (each decided by the chief or by settings the workers agreed on)."""
    from .advice import adapted_timing
    from .batch_bound import largest_batch

    communication = agree_on_sixteen_bit(strategy, communication, topology)
    most_batch = largest_batch(steps.train_images, settings.largest_global_batch)
    parameters = parameter_count(net)

    def advised(timing: dict[str, float], taken: TrainSettings, communication: Communication, steps: Steps,
                warn: bool = True) -> Advice | None:
        # an epoch's micro-batches of the steps timed: the advice counts local SGD's averages in them as the probe
        return advise_communication(timing, communication, topology, global_batch=topology.global_batch(
            taken.step_batch), most_batch=most_batch, rate_scaled=taken.lr_scaling != "none", warn=warn,
            micro_batches=taken.accumulate_steps * steps.train, whole_epochs=taken.steps_per_epoch is None,
            parameters=parameters, train_images=steps.train_images, epochs=taken.epochs,
            checkpoint_every=taken.checkpoint_every)

    def taking(adapted: Adapted) -> tuple[TrainSettings, Communication, Steps]:
        taken = replace(settings, **adapted)
        # the 16-bit format the workers agreed on stays theirs: no second gather
        return taken, replace(check_levers(taken, topology), sixteen_bit=communication.sixteen_bit), agree_steps(taken)

    record = launch_record(settings, topology)
    recorded = recorded_adaptation(strategy, settings, topology, most_batch=most_batch, record=record)
    if recorded is not None:  # decided when the run began: measured and advised (said as a launch says it) as taken
        taken, took, steps = taking(recorded) if recorded else (settings, communication, steps)
        timing = probe_communication(strategy, net, took, topology, batch=taken.batch_size, sixteen_bit=False,
                                     image_size=taken.sizes.final, steps=steps.train,
                                     checkpoint_every=taken.checkpoint_every)
        # the float32 exchange the launch timed before it took 16 bits, as the chief's record keeps it (not timed)
        asked = (record.get("params") or {}).get("asked_allreduce_seconds")
        timing.update({} if asked is None else {"asked_allreduce_seconds": float(asked)})
        # a record without 16 bits is the launch's judgement of them (timed no faster, or not to take): not advised
        kept = took if "allreduce_precision" in recorded else replace(took, sixteen_bit=took.wire)
        advice = advised(timing, taken, kept, steps, warn=bool(recorded))
        return Measurement(taken, took, steps, timing, advice, recorded, most_batch)
    timing = probe_communication(strategy, net, communication, topology, batch=settings.batch_size,
                                 image_size=settings.sizes.final, steps=steps.train,
                                 checkpoint_every=settings.checkpoint_every)
    advice = advised(timing, settings, communication, steps, warn=not settings.adapt_communication)
    adapted = adapt_communication(strategy, settings, advice, topology, steps=steps.train)
    if not adapted:
        return Measurement(settings, communication, steps, timing, advice, adapted, most_batch)
    taken, took, after = taking(adapted)  # the measurement and its advice told again for the settings taken
    timing = adapted_timing(timing, communication, took, parameters, steps=(steps.train, after.train),
                            checkpoint_every=taken.checkpoint_every)
    steps = after
    return Measurement(taken, took, steps, timing, advised(timing, taken, took, steps), adapted, most_batch)
