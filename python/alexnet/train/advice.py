"""What a multi-worker run's measurements before training say about its communication, and what a run of
``adapt_communication`` takes of it.

:func:`advise` turns the exchange and the computation a run timed (:func:`alexnet.train.probe.probe_communication`)
into the settings of :mod:`.communication` that would keep its workers busy, in the order the training article's
"How to choose" gives, micro-batches up to the global batch AlexNet keeps its accuracy at on the run's images
(:func:`~.batch_bound.largest_batch`); with ``adapt_communication`` the run takes those that change how the
gradients travel (:func:`adaptable`), every worker the chief's (:func:`settings_row`, :func:`row_settings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

from ..checks import count_text, held_text, shown
from .batch_bound import LARGEST_GLOBAL_BATCH, held_back
from .communication import MB, WIRE_FORMATS, Communication, averages_in_epoch, averages_per_step

#: The share of linear scaling below which a multi-worker run is told which settings would send less: the
#: computation of a step against the same computation plus one exchange alone, as if nothing overlapped.
ADVISED_EFFICIENCY = 0.9
#: The largest ``sync_every`` advised: beyond it the workers' models drift apart for long.
MOST_LOCAL_STEPS = 16
#: 16-bit gradients are advised when their exchange, timed, takes at most this share of the float32 one's: where the
#: collective's own work on the CPU, not the link, sets its time, half the bytes gain little.
SIXTEEN_BIT_GAIN = 0.9
#: The share of a step's exchange that packs must have hidden, timed, to be advised: at or below it they hid nothing.
NOTHING_HIDDEN = 0.01


def faster_wire(communication: Communication, exchange_seconds: float, sixteen_bit_seconds: float | None) -> str:
    """The wire format :func:`advise` names for ``communication``: its 16-bit format when the run sends float32 and
    the exchange in 16 bits, timed (``sixteen_bit_seconds``; unset: half of ``exchange_seconds`` assumed), takes
    at most :data:`SIXTEEN_BIT_GAIN` of the float32 one's; else the run's own."""
    if communication.wire != "float32":
        return communication.wire
    sixteen = exchange_seconds / 2 if sixteen_bit_seconds is None else sixteen_bit_seconds
    return communication.sixteen_bit if sixteen <= SIXTEEN_BIT_GAIN * exchange_seconds else communication.wire


#: The packs advised where they overlap the backward pass, megabytes.
ADVISED_PACK_MB = 25
#: The most of an epoch's batches a step of micro-batches may leave out (a worker's epoch trains whole steps only).
MOST_LEFT_OUT = 0.05


def epoch_micro_batches(batches: int, whole: bool = True) -> int:
    """The most micro-batches, a power of two, a step may take when an epoch holds ``batches`` batches on a worker:
    its whole steps leave at most :data:`MOST_LEFT_OUT` of them out (7 batches take steps of 1: steps of 4 would train
    4 of them and leave out 3 every epoch). Not ``whole``, an epoch of ``steps_per_epoch`` steps, which covers what
    it covers of the images anyway: as many as it holds."""
    most = 2 ** math.floor(math.log2(max(1, batches)))
    while whole and most > 1 and batches % most > MOST_LEFT_OUT * batches:
        most //= 2
    return most


def linear(efficiency: float) -> str:
    """A share of linear scaling (or any measure held against a bound) in two decimals, rounded down: 0.8997 is below
    :data:`ADVISED_EFFICIENCY`, said "0.89", not "0.90", beside the advice it gets; a ratio of 1.797 "1.79" beside a
    target of 1.8 it misses; a share below 0.01 its first significant digit, never "0.00" (0.0075: "0.007")."""
    return held_text(efficiency)


def _held_by_the_epoch(most: int, batches: int, whole: bool = True) -> str:
    """What the advice says when an epoch of ``batches`` batches holds the micro-batches back at ``most`` a step
    (``whole``: as :func:`epoch_micro_batches` takes it)."""
    held = count_text(batches, "batch", "batches")
    if not whole:
        return f"Micro-batches stop at {most} a step: an epoch of `steps_per_epoch` steps holds {held} on each worker."
    if most <= 1:
        return (f"No micro-batches: an epoch holds {held} on each worker, and steps of several would leave "
                f"out more than {MOST_LEFT_OUT:.0%} of them every epoch (more training images, or a smaller "
                "`batch_size`, make room for them).")
    return (f"Micro-batches stop at {most} a step: an epoch holds {held} on each worker, and steps of more "
            f"would leave out more than {MOST_LEFT_OUT:.0%} of them every epoch.")


@dataclass(frozen=True)
class Advice:
    """What a multi-worker run's measurements before training say about its communication (:func:`advise`)."""

    #: the share of linear scaling with the run's settings: a step's computation over the same plus one exchange
    efficiency: float
    #: the settings advised, in the order to take them (empty: none would help enough, or none is needed)
    settings: dict[str, int | float | str] = field(default_factory=dict)
    #: the share of linear with them, estimated the same way
    advised_efficiency: float = 0.0
    #: the advice in a few sentences, for the log and the history
    text: str = ""


def _share(compute: float, exchange: float) -> float:
    """The share of linear scaling of a step that computes for ``compute`` seconds and waits ``exchange``."""
    return compute / (compute + exchange)


@dataclass(frozen=True)
class _Exchange:
    """What a step of a run waits for, over its epochs, as :func:`advise` counts it: ``synchronous``, the exposed
    exchange of a synchronous step's gradients; ``gradients``, that exchange whole (local SGD's average carries twice
    its bytes, behind nothing); the other fields are :func:`advise`'s, ``accumulate`` the run's own."""

    synchronous: float
    gradients: float
    accumulate: int
    local_after: int = 0
    epochs: int | None = None
    micro_batches: int | None = None
    whole_epochs: bool = True
    checkpoint_every: int | None = None

    def steps(self, accumulate: int) -> int | None:
        """An epoch's optimizer steps with ``accumulate`` micro-batches a step (``None``: not known)."""
        if self.micro_batches is None:
            return None
        return max(1, self.micro_batches // (accumulate if self.whole_epochs else self.accumulate))

    def local(self, accumulate: int, every: int) -> float:
        """Local SGD's averages once in ``every`` steps, seconds a step (:func:`~.communication.averages_per_step`)."""
        return 2 * self.gradients * averages_per_step(self.steps(accumulate), every, self.checkpoint_every)

    def split(self, every: int) -> tuple[int, float, float]:
        """The epochs trained synchronously before local SGD of ``every`` steps (``every`` 1: every epoch, said 0),
        and the shares of the run's steps trained synchronously and locally."""
        if every <= 1:
            return 0, 1.0, 0.0
        if not self.epochs:
            return 0, 0.0, 1.0
        first = min(self.local_after, self.epochs)
        return first, first / self.epochs, 1 - first / self.epochs

    def per_step(self, accumulate: int, every: int) -> float:
        """The seconds a step waits, over the run, with ``accumulate`` micro-batches a step and local SGD's average
        once in ``every`` steps (1: synchronous), the synchronous epochs and local SGD's weighted by their number."""
        _, synchronous, local = self.split(every)
        return synchronous * self.synchronous + (local * self.local(accumulate, every) if local else 0.0)

    def phases(self, compute: float, accumulate: int, every: int) -> str:
        """The share of linear in each phase of post-local SGD, a clause of the advice (``""`` in one phase)."""
        first, synchronous, local = self.split(every)
        if not (synchronous and local):
            return ""
        return (f" ({linear(_share(compute, self.synchronous))} for the {count_text(first, 'synchronous epoch')}, "
                f"{linear(_share(compute, self.local(accumulate, every)))} after)")


def advise(communication: Communication, exchange_seconds: float, compute_seconds: float, *, global_batch: int,
           overlaps: bool = False, sixteen_bit_seconds: float | None = None, hidden_seconds: float | None = None,
           rate_scaled: bool = True, most_batch: int = LARGEST_GLOBAL_BATCH, micro_batches: int | None = None,
           whole_epochs: bool = True, parameters: int | None = None, train_images: int | None = None,
           checkpoint_every: int | None = None, synchronous_seconds: float | None = None,
           epochs: int | None = None) -> Advice | None:
    """Advice for a run of ``communication`` whose exchange alone takes ``exchange_seconds`` per optimizer step
    (a step's gradients; with local SGD, its averages a step in epochs of ``micro_batches``:
    :meth:`~.communication.Communication.exchanges_per_step`, as the run reports them) and whose step computes for
    ``compute_seconds`` (every micro-batch of it) with ``global_batch`` images over every worker; ``None`` with
    one worker or nothing measured.

    Its efficiency is ``compute / (compute + exchange)``: the share of linear scaling if no exchange overlaps any
    computation (packs hide part of it where they travel while the backward pass computes). With local SGD it counts
    every average an epoch of ``micro_batches`` takes (:func:`~.communication.averages_in_epoch`, with
    ``checkpoint_every``); with post-local SGD, the synchronous epochs' exchange (``synchronous_seconds``; unset: half
    an average) weighed with local SGD's by their number of the run's ``epochs`` (unset: local SGD's alone). Below
    :data:`ADVISED_EFFICIENCY` it names what would bring a run back above it, in the order the training article
    gives: the gradients in 16 bits (the format the hardware sums, ``communication.sixteen_bit``) for half the bytes;
    then packs where ``overlaps``: on GPUs, and on CPUs whose process runs two or more inter-op threads
    (:func:`alexnet.environment.interop_threads`), with which a pack's all-reduce starts while the backward pass
    computes (README, "Training on CPUs"); then ``accumulate_steps``, a power of two, for as many times the
    computation per exchange, up to a global batch of ``most_batch`` (:func:`~.batch_bound.largest_batch`;
    micro-batches held back by it are said, on the run's ``train_images`` when given: :func:`~.batch_bound.held_back`);
    then local SGD's ``sync_every`` (up to :data:`MOST_LOCAL_STEPS`), which
    changes what is learnt and is only named with the measurement its cost in accuracy needs. ``sixteen_bit_seconds``,
    the same exchange timed in 16 bits, says what 16 bits gain (:func:`faster_wire`); without it, half the time is
    assumed. ``hidden_seconds``: the seconds of the exchange a step with packs hid behind its backward pass, timed in
    the wire format advised (:func:`alexnet.train.probe.probe_communication`; timed and passed on GPUs only, see
    :func:`alexnet.train.probe.packed_step_timed`); where packs overlap (the run's own or
    those advised) the estimate counts only the rest as exposed, so that fewer micro-batches (a smaller global batch,
    which learns better) are advised; a step of micro-batches hides as much, behind its last. Without it packs are
    credited nothing. Otherwise bytes and seconds are taken as proportional. ``rate_scaled``: does the run's
    learning rate follow the global batch (``lr_scaling``)? Said with the micro-batches advised.

    ``micro_batches``, what an epoch of the run holds on a worker, bounds the micro-batches of a step (so that its
    whole steps leave few out, when its epochs go through the images, ``whole_epochs``: :func:`epoch_micro_batches`;
    said when it holds them back) and local SGD's steps
    (which average at every epoch's end anyway); ``parameters``, the numbers all-reduced, keeps packs from being
    advised where the whole exchange fits in one (packs of :data:`ADVISED_PACK_MB` MB would hide nothing)."""
    if communication.workers <= 1 or exchange_seconds <= 0 or compute_seconds <= 0:
        return None
    local_sgd = communication.local_sgd
    every = communication.sync_every if local_sgd else 1
    measured = _Exchange(0.0, 0.0, communication.accumulate, communication.local_after, epochs, micro_batches,
                         whole_epochs, checkpoint_every)
    # the synchronous exchange of one optimizer step's gradients (half an average of local SGD's, untimed)
    gradients = exchange_seconds / (2 * communication.exchanges_per_step(
        measured.steps(communication.accumulate), checkpoint_every) if local_sgd else 1.0)
    synchronous = synchronous_seconds if local_sgd and synchronous_seconds is not None else gradients
    measured = replace(measured, synchronous=synchronous, gradients=gradients)
    efficiency = _share(compute_seconds, measured.per_step(communication.accumulate, every))
    said = _said(communication, measured, compute_seconds, efficiency)
    if efficiency >= ADVISED_EFFICIENCY:
        return Advice(efficiency, {}, efficiency, said)
    settings: dict[str, int | float | str] = {}
    reasons: list[str] = []
    if faster_wire(communication, exchange_seconds, sixteen_bit_seconds) != communication.wire:
        ratio = 0.5 if sixteen_bit_seconds is None else sixteen_bit_seconds / exchange_seconds
        gradients, synchronous = gradients * ratio, synchronous * ratio
        settings["allreduce_precision"] = communication.sixteen_bit
        sixteen = measured.per_step(communication.accumulate, every) * ratio  # the exchange a step, in 16 bits
        reasons.append("half the bytes" if sixteen_bit_seconds is None else
                       f"half the bytes: {sixteen:.3g} s a step alone, timed")
    # what packs hide of the synchronous exchange (local SGD's average travels after the step, behind nothing)
    hidden = min(gradients, hidden_seconds or 0.0) if overlaps and not local_sgd else 0.0
    wire_bytes = 2 if "allreduce_precision" in settings else communication.wire_bytes
    one_pack = parameters is not None and parameters * wire_bytes <= ADVISED_PACK_MB * MB
    # a timing of packs that hid (next to) nothing of the exchange is a reason not to advise them
    hid_nothing = hidden_seconds is not None and hidden <= NOTHING_HIDDEN * gradients
    if overlaps and not communication.pack_bytes and not one_pack and not hid_nothing:
        settings["allreduce_pack_mb"] = ADVISED_PACK_MB
        reasons.append("packs that travel while the backward pass computes the rest" + (
            f": {hidden:.3g} s of the exchange hidden, timed" if hidden_seconds is not None else
            ", not counted in the estimate, as what a step hides on CPUs varies from run to run"))
    # what a step waits for: the exposed exchange of synchronous steps, local SGD's averages (twice the gradients'
    # bytes) at their share of a step
    waits = replace(measured, synchronous=synchronous - hidden, gradients=gradients)
    micro = compute_seconds / communication.accumulate
    micro_batch = global_batch / communication.accumulate
    enough = ADVISED_EFFICIENCY / (1 - ADVISED_EFFICIENCY)  # computation per second waited at the share advised

    def power(most: float) -> int:
        return 2 ** max(0, math.floor(math.log2(max(1.0, most))))

    bound = power(most_batch / micro_batch)  # the largest global batch's
    by_epoch = None if micro_batches is None else epoch_micro_batches(micro_batches, whole_epochs)  # and an epoch's
    largest = bound if by_epoch is None else min(bound, by_epoch)
    wanted = 1  # the fewest micro-batches, a power of two, whose computation reaches the share (an epoch of fewer
    # steps averages local SGD's models more often a step)
    while wanted < 2 ** 40 and wanted < math.ceil(waits.per_step(wanted, every) * enough / micro):
        wanted *= 2
    accumulate = min(wanted, largest)
    held = ""
    if wanted > max(largest, communication.accumulate):
        held = " " + (_held_by_the_epoch(largest, int(micro_batches or 0), whole_epochs) if largest < bound
                      else held_back(most_batch, global_batch, train_images,
                                     max(communication.workers, communication.replicas), communication.accumulate))
    if accumulate > communication.accumulate:
        settings["accumulate_steps"] = accumulate
        reasons.append(f"one exchange for {accumulate} micro-batches, a global batch of "
                       f"{int(micro_batch * accumulate)}" + (" with the learning rate scaled to it" if rate_scaled
                                                             else "; lr_scaling = 'none' keeps the learning rate"))
    else:
        accumulate = communication.accumulate
    compute = micro * accumulate
    exchange = waits.per_step(accumulate, every)
    if _share(compute, exchange) < ADVISED_EFFICIENCY:
        local = _local_steps(waits, accumulate, communication.sync_every, compute, exchange)
        if local is not None:
            settings["sync_every"], every = local, local
            exchange = waits.per_step(accumulate, local)
            reasons.append(f"local SGD: weights and momentum averaged once in {local} steps, which changes what is "
                           "learnt: measure its cost in accuracy first (alexnet_benchmark(stages = "
                           f"\"time_to_accuracy\", accuracy_levers = \"sync_every={local}\"), with "
                           "\"+local_sgd_after=N\" added to the lever set for N synchronous epochs first) and start "
                           "it late (`local_sgd_after`)")
    advised = _share(compute, exchange)
    slower = _slower_than_one(communication.workers, advised, bool(settings))
    if not settings:
        if advised >= ADVISED_EFFICIENCY:  # the run's own packs hide enough
            return Advice(efficiency, {}, advised, f"{said} Its packs hid {hidden:.3g} s of it behind the backward "
                          f"pass, timed: about {linear(advised)} of linear, nothing to add.")
        return Advice(efficiency, {}, advised, said + " The settings that send less are already as far as they go: "
                      f"a faster link, or fewer workers, is what is left.{held}{slower}")
    named = "; ".join(f"{name} = {shown(value)} ({reason})" for (name, value), reason in
                      zip(settings.items(), reasons, strict=True))
    return Advice(efficiency, settings, advised,
                  f"{said} To keep the workers busy: {named}; about {linear(advised)} of linear with them"
                  f"{waits.phases(compute, accumulate, every)}.{held}{slower}")


def _said(communication: Communication, measured: _Exchange, compute: float, efficiency: float) -> str:
    """The advice's first sentence: the exchange ``measured`` against ``compute`` seconds of a step's computation,
    at ``efficiency`` of linear scaling."""
    every, accumulate = communication.sync_every if communication.local_sgd else 1, communication.accumulate
    first, synchronous, local = measured.split(every)
    steps = measured.steps(accumulate)
    averages = "" if not local or steps is None else (
        f"; {count_text(averages_in_epoch(steps, every, measured.checkpoint_every), 'average')} in an epoch of "
        f"{count_text(steps, 'step')}")
    takes = (f"{measured.synchronous:.3g} s a step in the {count_text(first, 'synchronous epoch')} and "
             f"{measured.local(accumulate, every):.3g} s after," if synchronous and local else
             f"{measured.per_step(accumulate, every):.3g} s a step")
    over = f" over the {count_text(int(measured.epochs or 0), 'epoch')}" if synchronous and local else ""
    return (f"One exchange alone takes {takes} against {compute:.3g} s of computation ({communication.describe()}"
            f"{averages}): about {linear(efficiency)} of linear scaling{over} if none of it overlaps"
            f"{measured.phases(compute, accumulate, every)}.")


def _local_steps(waits: _Exchange, accumulate: int, sync_every: int, compute: float, exchange: float) -> int | None:
    """The ``sync_every`` :func:`advise` names for a run that waits ``exchange`` seconds a step (``waits``) and
    computes ``compute`` with ``accumulate`` micro-batches, the run's own ``sync_every`` or 1: the fewest steps
    above it (and above 2), up to :data:`MOST_LOCAL_STEPS` and an epoch's steps, whose averages leave the share
    advised, else the fewest that average least often; ``None`` when none waits less than the run."""
    steps = waits.steps(accumulate)
    best: tuple[float, int] = (exchange, 0)
    for every in range(max(2, sync_every) + 1, min(MOST_LOCAL_STEPS, steps or MOST_LOCAL_STEPS) + 1):
        waited = waits.per_step(accumulate, every)
        if _share(compute, waited) >= ADVISED_EFFICIENCY:
            return every
        best = min(best, (waited, every), key=lambda pair: pair[0])
    return best[1] or None


def _slower_than_one(workers: int, efficiency: float, advised: bool) -> str:
    """What the advice adds when ``workers`` at ``efficiency`` of linear (with the settings advised: ``advised``)
    train fewer images a second than one worker alone (of fewer workers, not measured, that they may): else ``""``."""
    if (rate := workers * efficiency) >= 1:
        return ""
    return (f" {'Even with them, ' if advised else 'So '}{workers} workers train at about {rate:.2g} times the images "
            "per second of one worker alone: one worker alone trains faster over this link"
            f"{'' if workers <= 2 else f', and fewer than {workers} workers may too'}.")


#: The advised settings ``adapt_communication`` takes: those that change how the gradients travel (micro-batches
#: only as far as :func:`~.batch_bound.largest_batch` lets them be advised), never local SGD's ``sync_every``, which
#: changes what the workers learn apart and is only advised.
ADAPTABLE = ("allreduce_precision", "accumulate_steps", "allreduce_pack_mb")


class Adapted(TypedDict, total=False):
    """The settings of :data:`ADAPTABLE` a run of ``adapt_communication`` took, typed (the others left out)."""

    allreduce_precision: str
    accumulate_steps: int
    allreduce_pack_mb: float


def adaptable(advice: Advice | None, accumulate: int, most_accumulate: int,
              whole_epochs: bool = True) -> dict[str, int | float | str]:
    """What a run of ``adapt_communication`` takes of ``advice``: its settings of :data:`ADAPTABLE`, with
    ``accumulate_steps`` at most what an epoch of ``most_accumulate`` batches allows (:func:`epoch_micro_batches`,
    ``whole_epochs`` as :func:`advise` takes it;
    dropped when that is no more than the run's ``accumulate``)."""
    taken = {name: value for name, value in (advice.settings if advice else {}).items() if name in ADAPTABLE}
    if "accumulate_steps" in taken:
        steps = min(int(taken["accumulate_steps"]), epoch_micro_batches(most_accumulate, whole_epochs))
        if steps <= accumulate:
            del taken["accumulate_steps"]
        else:
            taken["accumulate_steps"] = steps
    return taken


def settings_row(settings: Mapping[str, int | float | str]) -> list[int]:
    """Settings of :data:`ADAPTABLE` as integers (0: not set) for a collective (:func:`row_settings` reads them)."""
    wire = settings.get("allreduce_precision")
    return [WIRE_FORMATS.index(str(wire)) + 1 if wire else 0, int(settings.get("accumulate_steps", 0)),
            round(float(settings.get("allreduce_pack_mb", 0)) * 1000)]


def row_settings(row: Sequence[int]) -> Adapted:
    """The settings :func:`settings_row` wrote as ``row``, in the order of :data:`ADAPTABLE`."""
    wire, accumulate, pack = (int(v) for v in row)
    settings: Adapted = {}
    if wire:
        settings["allreduce_precision"] = WIRE_FORMATS[wire - 1]
    if accumulate:
        settings["accumulate_steps"] = accumulate
    if pack:
        settings["allreduce_pack_mb"] = pack / 1000
    return settings


def adaptation_text(taken: Mapping[str, object]) -> str:
    """What a run of ``adapt_communication`` took, in a sentence, a whole number of megabytes as one (25, not 25.0)."""
    said = ", ".join(f"`{name}` = {shown(value)}" for name, value in taken.items()) or "nothing"
    return f"With `adapt_communication` the run took {said}."


def adapted_timing(timing: Mapping[str, float], before: Communication, after: Communication, parameters: int,
                   steps: tuple[int, int] | None = None, checkpoint_every: int | None = None) -> dict[str, float]:
    """A probe's ``timing`` of a run of ``before`` (see :func:`alexnet.train.probe.probe_communication`), told
    for the settings ``after`` it took with ``adapt_communication``: the exchange in the 16-bit format when that was
    taken (the probe timed it; the exchange as ``before`` sends it kept as ``asked_allreduce_seconds``), its bytes,
    local SGD's averages a step in the epochs of ``after`` (``steps``: an epoch's steps before and after), and the
    computation of ``after``'s micro-batches."""
    told, ratio, (was_steps, steps_after) = dict(timing), 1.0, steps or (None, None)
    if after.wire != before.wire and "sixteen_bit_allreduce_seconds" in told:
        told["asked_allreduce_seconds"] = told["allreduce_seconds"]
        ratio = told.pop("sixteen_bit_allreduce_seconds") / told["allreduce_seconds"]
    for prefix, was, phase in (("", before, after), ("synchronous_", before.at_epoch(0), after.at_epoch(0))):
        if f"{prefix}allreduce_seconds" in told:
            told[f"{prefix}allreduce_seconds"] *= ratio * (phase.exchanges_per_step(steps_after, checkpoint_every) /
                                                           was.exchanges_per_step(was_steps, checkpoint_every))
            told[f"{prefix}bytes_per_step"] = phase.bytes_per_step(parameters, steps_after, checkpoint_every)
    if "compute_seconds" in told:
        told["compute_seconds"] *= after.accumulate / before.accumulate
    return told
