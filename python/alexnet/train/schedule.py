"""The schedule of a training run: the image size of each epoch and the learning rate of each step.

Pure functions of the epoch and the step, and nothing else: no TensorFlow, no state. Training sets the rate
before every step from :meth:`RateSchedule.at` (:class:`alexnet.train.callbacks.RateSetter`) and trains each
run of equal sizes at :meth:`SizeSchedule.at`; the history, TensorBoard, the command line's summary and the
benchmark's recipes read the same functions, so what they report is what trained.

Image sizes: ``image_size`` is one side or several trained in order; the epochs are split evenly among them,
the later sizes taking any left over (:func:`split_epochs`), unless the epochs at each size are given.

Learning rate: ``learning_rate`` is the rate for a global batch of :data:`REFERENCE_BATCH` (the paper's 0.01 for
128). With ``lr_scaling = "linear"`` it is multiplied by ``global batch / 128`` (the linear scaling rule of Goyal
et al., 2017) and reached by a linear warm-up over ``warmup_epochs`` (default :data:`DEFAULT_WARMUP_EPOCHS`, at
most half the run's epochs so that the rate also comes down, when the rate grows more than :data:`WARMUP_ABOVE`
times, else none); the warm-up starts at the lower of the two rates,
so that a batch below 128 never trains above the rate it leads to. After the warm-up, ``lr_schedule`` says how the
rate ends (:data:`LR_SCHEDULES`):

- ``"linear"``: straight down from the peak to zero at the run's last step (FFCV's ramp);
- ``"cosine"``: down to zero at the last step along half a cosine (timm's default);
- ``"step"``: divided by 10 at the start of each epoch of ``lr_drop_epochs``;
- ``"plateau"``: divided by 10 when the validation top-1 accuracy has not improved for ``patience`` epochs (the
  paper's rule), decided from the accuracies of the epochs done (:func:`plateau_drops`): every worker of a run
  sees the same all-reduced accuracies, so every worker takes the same decision, and a resumed run, whose history
  holds them, continues the same curve.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..checks import MIN_IMAGE_SIZE

#: The global batch the paper's learning rate is for: ``learning_rate`` is the rate of a batch of this size.
REFERENCE_BATCH = 128
#: The ways ``lr_scaling`` may scale the learning rate with the global batch.
LR_SCALINGS = ("linear", "none")
#: How the rate may end after its warm-up (see the module documentation).
LR_SCHEDULES = ("linear", "cosine", "step", "plateau")
#: The warm-up when ``warmup_epochs`` is not given and the rate grows more than :data:`WARMUP_ABOVE` times.
DEFAULT_WARMUP_EPOCHS = 5
WARMUP_ABOVE = 2.0
#: What each drop of the rate multiplies it by.
DROP_FACTOR = 0.1
#: The drops of a ``"plateau"`` schedule at most: the paper's three, to a thousandth of the rate. A run whose
#: validation top-1 no longer grows (it reached 1.0 on categories of one's own, say) kept dividing it by 10, to
#: 1e-102 after 300 epochs, and float32 to exactly 0 after about 43 drops, training nothing.
MAX_PLATEAU_DROPS = 3
#: What a history's ``schedule`` holds per epoch.
SCHEDULE_KEYS = ("image_size", "learning_rate")

V = TypeVar("V")


def schedule_apart(metrics: Mapping[str, V]) -> tuple[dict[str, V], dict[str, V]]:
    """``metrics`` without the schedule (:data:`SCHEDULE_KEYS`), and the schedule taken out of them: the history
    file and the model card of an older version kept the image size and the learning rate among the metrics."""
    kept = dict(metrics)
    return kept, {name: kept.pop(name) for name in SCHEDULE_KEYS if name in kept}


def split_epochs(sizes: int, epochs: int) -> tuple[int, ...]:
    """``epochs`` split evenly among ``sizes`` image sizes, the later sizes taking the epochs left over."""
    share, extra = divmod(epochs, sizes)
    return tuple(share + (1 if index >= sizes - extra else 0) for index in range(sizes))


def progressive_sizes(final: int, epochs: int) -> tuple[int, ...]:
    """Image sizes that end at ``final``: about half, then three quarters, then all of it (multiples of 8, at least
    AlexNet's smallest input), at most one size per epoch (the last ones kept), each used once."""
    smallest = 8 * math.ceil(MIN_IMAGE_SIZE / 8)
    sizes: list[int] = []
    for share in (0.5, 0.75):
        size = max(smallest, 8 * round(final * share / 8))
        if size < final and size not in sizes:
            sizes.append(size)
    sizes.append(final)
    return tuple(sizes[-epochs:])


@dataclass(frozen=True)
class SizeSchedule:
    """The image sizes of a run, in order, and the epochs trained at each (adding up to the run's epochs)."""

    sizes: tuple[int, ...]
    epochs: tuple[int, ...]

    @property
    def final(self) -> int:
        """The last size: the one validation uses and the model card records."""
        return self.sizes[-1]

    def at(self, epoch: int) -> int:
        """The image size of epoch ``epoch`` (0-based); the last size past the schedule's end."""
        end = 0
        for size, count in zip(self.sizes, self.epochs, strict=True):
            end += count
            if epoch < end:
                return size
        return self.final

    def segments(self, first: int, last: int) -> list[tuple[int, int, int]]:
        """Epochs ``first`` to ``last`` (exclusive) as runs of one size: ``(first, last, size)`` each."""
        runs: list[tuple[int, int, int]] = []
        for epoch in range(first, last):
            size = self.at(epoch)
            if runs and runs[-1][2] == size:
                runs[-1] = (runs[-1][0], epoch + 1, size)
            else:
                runs.append((epoch, epoch + 1, size))
        return runs


class Rates(Protocol):
    """What reports a run's rate: a :class:`RateSchedule`, or the callback that holds one being decided."""

    def at(self, step: int) -> float:
        """The rate of step ``step`` (0-based, over the run)."""
        ...

    def of_epoch(self, epoch: int) -> float:
        """The rate of epoch ``epoch``'s last step."""
        ...


def plateau_drops(accuracies: Sequence[float], patience: int) -> tuple[int, ...]:
    """The epochs (0-based) at whose start a ``"plateau"`` schedule divides the rate by 10, from the validation
    top-1 accuracy of each epoch done: after ``patience`` epochs in a row without a new best, the next epoch starts
    lower, and the count starts again; :data:`MAX_PLATEAU_DROPS` times at most."""
    drops: list[int] = []
    best, flat = -math.inf, 0
    for epoch, accuracy in enumerate(accuracies):
        if len(drops) == MAX_PLATEAU_DROPS:
            break
        if accuracy > best:
            best, flat = accuracy, 0
            continue
        flat += 1
        if flat >= patience:
            drops.append(epoch + 1)
            flat = 0
    return tuple(drops)


@dataclass(frozen=True)
class RateSchedule:
    """The learning rate of every step of a run of ``epochs`` epochs of ``steps_per_epoch`` steps.

    ``base`` (the rate for a global batch of :data:`REFERENCE_BATCH`) times ``factor`` is :attr:`peak`, reached by
    a linear warm-up from :attr:`start` over ``warmup_epochs``; then ``kind`` (a name of :data:`LR_SCHEDULES`)
    takes it down: ``"linear"`` and ``"cosine"`` to zero at the last step, ``"step"`` and ``"plateau"`` by
    :data:`DROP_FACTOR` from the first step of each epoch in ``drop_epochs`` (0-based) on (for ``"plateau"``, the
    drops decided so far: see :meth:`with_drops`).
    """

    base: float
    factor: float
    warmup_epochs: int
    drop_epochs: tuple[int, ...]
    steps_per_epoch: int
    epochs: int
    kind: str

    @property
    def total_steps(self) -> int:
        """The run's optimizer steps."""
        return self.epochs * self.steps_per_epoch

    def with_drops(self, drops: Sequence[int]) -> RateSchedule:
        """The same schedule dropping at the start of ``drops`` (a ``"plateau"`` schedule's decisions so far)."""
        return dataclasses.replace(self, drop_epochs=tuple(int(d) for d in drops))

    @property
    def peak(self) -> float:
        """The rate after the warm-up, before any drop."""
        return self.base * self.factor

    @property
    def start(self) -> float:
        """Where the warm-up starts: ``base``, or :attr:`peak` when that is lower (a global batch below
        :data:`REFERENCE_BATCH`), so that a warm-up never trains above the rate it leads to."""
        return min(self.base, self.peak)

    def at(self, step: int) -> float:
        """The rate of optimizer step ``step`` (0-based, counted over the whole run): during the warm-up it grows
        by the same amount every step, and the last warm-up step is the first at :attr:`peak`; a ``"linear"`` or
        ``"cosine"`` schedule is at zero on the last step."""
        warmup = self.warmup_epochs * self.steps_per_epoch
        if warmup > 0 and step < warmup:
            return self.start + (self.peak - self.start) * (step + 1) / warmup
        if self.kind in ("linear", "cosine"):
            top = max(warmup - 1, 0)  # the step at the peak, where the way down starts
            span = self.total_steps - 1 - top
            done = min(1.0, max(0.0, (step - top) / span)) if span > 0 else 0.0
            left = 1.0 - done if self.kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * done))
            return self.peak * left
        epoch = step // self.steps_per_epoch
        return self.peak * DROP_FACTOR ** sum(1 for drop in self.drop_epochs if 0 < drop <= epoch)

    def of_epoch(self, epoch: int) -> float:
        """The rate of epoch ``epoch``'s last step: what the history records for it."""
        return self.at((epoch + 1) * self.steps_per_epoch - 1)


def rate_schedule(learning_rate: float, lr_scaling: str, warmup_epochs: int | None, drop_epochs: Sequence[int],
                  *, epochs: int, global_batch: int, steps_per_epoch: int, kind: str) -> RateSchedule:
    """The :class:`RateSchedule` of a run's settings for ``global_batch`` images a step (see the module
    documentation for ``lr_scaling``, the default warm-up and ``kind``, ``lr_schedule``); ``drop_epochs`` are a
    ``"step"`` schedule's (a ``"plateau"`` schedule starts without drops)."""
    factor = global_batch / REFERENCE_BATCH if lr_scaling == "linear" else 1.0
    if warmup_epochs is None:
        warmup_epochs = min(DEFAULT_WARMUP_EPOCHS, epochs // 2) if factor > WARMUP_ABOVE else 0
    drops = tuple(int(e) for e in drop_epochs) if kind == "step" else ()
    return RateSchedule(float(learning_rate), factor, int(warmup_epochs), drops, max(1, int(steps_per_epoch)),
                        int(epochs), kind)


def one_epoch(sizes: SizeSchedule, rates: RateSchedule, epoch: int) -> dict[str, Any]:
    """What epoch ``epoch`` trains with: ``image_size`` (a whole number) and ``learning_rate`` (the rate of its last
    step). The history's ``schedule`` holds one of each per epoch."""
    image_size, learning_rate = SCHEDULE_KEYS
    return {image_size: sizes.at(epoch), learning_rate: rates.of_epoch(epoch)}


def per_epoch(sizes: SizeSchedule, rates: RateSchedule, epochs: int) -> dict[str, list[Any]]:
    """:func:`one_epoch` of each of the first ``epochs`` epochs, as lists by name."""
    rows = [one_epoch(sizes, rates, epoch) for epoch in range(epochs)]
    return {name: [row[name] for row in rows] for name in SCHEDULE_KEYS}


def _shown(values: Sequence[float]) -> list[float]:
    """What :func:`course` shows of ``values``, in three significant digits."""
    runs: list[float] = []
    for value in (float(f"{v:.3g}") for v in values):
        if not runs or runs[-1] != value:
            runs.append(value)
    if len(runs) > 3:
        peak = max(runs)
        runs = [runs[0], *([peak] if peak not in (runs[0], runs[-1]) else []), runs[-1]]
    return runs


def course(values: Sequence[float]) -> str:
    """``values`` over the epochs, each change shown once (``64 -> 96``); a long course as first, peak and last."""
    return " -> ".join(f"{v:g}" for v in _shown(values))


def describe(schedule: Mapping[str, Sequence[float]], precision: str | None = None, reason: str | None = None,
             peak: float | None = None) -> str:
    """A run's schedule on one line: ``image size 64 -> 96, learning rate 0.0025 -> 0.01, precision float32
    (why)``. Each epoch's rate is that of its last step, so the ``peak``, which may fall inside an epoch (the first
    step of a schedule that comes down from it without warm-up), is said too when it is not among the rates shown
    (``learning rate 0.000953 -> 0 at the epochs' ends (peak 0.00125)``; of one epoch, whose one rate, 0 from a
    linear schedule, says nothing of what it trained at: ``at the epoch's end``). Empty when there is nothing to
    say."""
    parts = []
    if schedule.get("image_size"):
        parts.append(f"image size {course(schedule['image_size'])}")
    rates = schedule.get("learning_rate")
    if rates:
        text = f"learning rate {course(rates)}"
        if peak is not None and float(f"{peak:.3g}") not in _shown(rates):
            ends = "the epoch's end" if len(rates) == 1 else "the epochs' ends"
            text += f" at {ends} (peak {peak:.3g})"
        parts.append(text)
    if precision:
        parts.append(f"precision {precision}" + (f" ({reason})" if reason else ""))
    return ", ".join(parts)
