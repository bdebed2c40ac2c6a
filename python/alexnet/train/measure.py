"""The precision of a run: the one asked for, or, left to choose, the one a measurement finds to train faster here.

The CPU's flags do not say it: an Intel Xeon whose flags list ``avx512_bf16`` (without AMX) trained AlexNet at 22
images/s in bfloat16 against 38 in float32, an AMD EPYC with the same flag 1.5 to 1.8 times faster in bfloat16.
So where the hardware offers more than one format (:func:`.precision.candidates`: a CPU with bfloat16 or float16
instructions, a GPU), a few training steps of the model about to train are timed in each, after a warm-up step
(:func:`step_rate`), and a 16-bit format is taken only when it is at least :data:`MARGIN` times as fast as
float32. Hardware with float32 alone is not measured.

The formats are timed in one fresh Python process (:func:`model_timer`, :func:`alexnet.child.run_child`), not in
the process that then trains: a model whose step was traced stays alive with the traced function, whatever Keras
or Python is asked to free, and its memory with it (TensorFlow's allocator held 1.2 GB more once float32 and
bfloat16 were timed for AlexNet of 1000 classes at 96 pixels, batch 8; on a GPU, of the first GPU's memory). The
child costs one start of Python and TensorFlow. Should it fail, the formats are timed here, with a warning.

The rates are remembered per machine (CPU model and flags, GPUs), TensorFlow version and model shape in one JSON
file, ``precision.json`` in the user's cache folder (``~/.cache/alexnet`` on Linux), so each is measured once. The
environment variable ``ALEXNET_PRECISION_CACHE`` names another file, or with an off word (``0``, ``off``, ...: see
:func:`alexnet.environment.switch_word`) turns the memory off (every run measures). Asking for a precision skips all
of it.

Workers of one run must compute alike: each measures (or reads its cache), then they agree (:func:`agree`): the
format every worker chose, else float32.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..environment import env_value, switch_word
from ..machine import cpu_flags
from .precision import PRECISIONS, Hardware, Precision, candidates, choose_precision, hardware

logger = logging.getLogger(__name__)

#: How much faster than float32 a 16-bit format must train to be chosen.
MARGIN = 1.1
#: The environment variable naming the file of remembered measurements (``0``, ``off``: none kept).
CACHE_ENV = "ALEXNET_PRECISION_CACHE"
#: Timed training steps per format (after one warm-up step), and the least seconds.
STEPS, SECONDS = 3, 1.0
#: A format measured after the first stops being timed once it has taken this many times as long as the first
#: took (at least :data:`BUDGET_FLOOR` seconds): a format the hardware runs far slower (float16 on some CPUs that
#: list its instructions took minutes a step) is then known to lose without waiting for its steps.
BUDGET_FACTOR, BUDGET_FLOOR = 3.0, 10.0


def cache_file() -> Path | None:
    """Where measurements are remembered (see the module documentation); ``None`` when they are not."""
    value = env_value(CACHE_ENV)
    if value and switch_word(value) is False:
        return None
    if value and switch_word(value) is None:  # a file's path (an on word is the default file, below)
        return Path(value).expanduser()
    from ..storage.cache import cache_root

    return Path(cache_root("precision.json"))


def machine_key(device: Hardware, model: Mapping[str, Any]) -> str:
    """The key of a measurement: this CPU (model name and flags), the GPUs, TensorFlow's version and ``model``
    (what decides the cost of a step: classes, image size, batch, dense units, grouping)."""
    from ..tfimport import tf

    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        cpu = next((line.partition(":")[2].strip() for line in f if line.startswith("model name")), "")
    flags = hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:12]
    gpus = ",".join(f"{a}.{b}" for a, b in device.gpu_capabilities) or "none"
    shape = ",".join(f"{k}={model[k]}" for k in sorted(model))
    return f"cpu {cpu} flags {flags}; gpu {gpus}; tensorflow {tf.__version__}; {shape}"


def _read(path: Path | None) -> dict[str, Any]:
    """The rates remembered in ``path``: its entries that map format names to numbers (a file that is not a JSON
    object of them, written by another hand, is measured again, with a warning)."""
    if path is None or not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
    except (OSError, ValueError) as error:
        logger.warning("Cannot read the remembered precision measurements in %s (%s): measuring again.", path, error)
        return {}
    return {key: rates for key, rates in data.items() if isinstance(rates, dict) and
            all(isinstance(rate, (int, float)) and not isinstance(rate, bool) for rate in rates.values())}


def _write(path: Path | None, key: str, rates: Mapping[str, float]) -> None:
    if path is None:
        return
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = _read(path)
        kept[key] = {name: round(rate, 2) for name, rate in rates.items()}
        temporary.write_text(json.dumps(kept, indent=1))
        os.replace(temporary, path)
    except OSError as error:
        logger.warning("Cannot remember the precision measurement in %s (%s); the next run measures again. Set %s "
                       "to another file, or to 0 to stop remembering.", path, error, CACHE_ENV)
    finally:  # nothing left beside it when the file could not be replaced (a folder of its name, ...)
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def describe_rates(rates: Mapping[str, float]) -> str:
    """``float32 38.0, bfloat16 22.3 images/s``."""
    return ", ".join(f"{name} {rate:.1f}" for name, rate in rates.items()) + " images/s"


def pick(rates: Mapping[str, float]) -> str:
    """The format to train in from measured ``rates``: the fastest, if it beats float32 by :data:`MARGIN`."""
    fastest = max(rates, key=lambda name: rates[name])
    if fastest != "float32" and rates[fastest] < MARGIN * rates.get("float32", 0.0):
        return "float32"
    return fastest


def measured_precision(device: Hardware, model: Mapping[str, Any],
                       timer: Callable[[str], float]) -> Precision:
    """The precision chosen by measurement on ``device`` for ``model`` (see :func:`machine_key`): the remembered
    rates when there are some, else ``timer(name)`` (images per second) of each of the device's
    :func:`.precision.candidates`; hardware
    with float32 alone is not measured."""
    names = candidates(device)
    if names == ("float32",):
        return Precision("float32", f"auto: {device.describe()} computes in float32")
    path, key = cache_file(), machine_key(device, model)
    rates: Mapping[str, float] = _read(path).get(key) or {}
    remembered = bool(rates) and set(rates) == set(names)
    if not remembered:
        logger.info("Measuring which precision trains faster here: %s.", ", ".join(names))
        rates = {name: float(timer(name)) for name in names}
        _write(path, key, rates)
    chosen = pick(rates)
    reason = f"measured{' earlier' if remembered else ''}: {describe_rates(rates)}"
    fastest = max(rates, key=lambda name: rates[name])
    if chosen != fastest:  # a 16-bit format faster by less than the margin
        reason += f"; {fastest} not {MARGIN - 1:.0%} faster, float32 kept"
    return Precision(chosen, reason, rates={name: float(rate) for name, rate in rates.items()})


def resolve_precision(requested: str | None, device: Hardware, model: Mapping[str, Any],
                      timer: Callable[[str], float]) -> Precision:
    """The precision of a run: the one ``requested`` (:func:`.precision.choose_precision`), or, left to choose
    (``None``), the measured one (:func:`measured_precision`)."""
    if requested is not None:
        return choose_precision(requested, device)
    return measured_precision(device, model, timer)


def precision_for(requested: str | None, *, gpu: bool, num_classes: int, batch_size: int, image_size: int,
                  dense_units: int, grouped: bool, jit_compile: bool) -> Precision:
    """:func:`resolve_precision` for AlexNet of these settings on this machine's hardware (its GPUs with ``gpu``),
    timed with :func:`model_timer` (every format the hardware offers, in one child process) when it must be
    measured."""
    shape = {"classes": num_classes, "batch": batch_size, "image_size": image_size, "dense_units": dense_units,
             "grouped": grouped, "jit": jit_compile}
    device = hardware(gpu)
    timer = model_timer(num_classes, batch_size, image_size, dense_units=dense_units, grouped=grouped,
                        jit_compile=jit_compile, formats=candidates(device))
    return resolve_precision(requested, device, shape, timer)


def agree(precision: Precision, gather: Callable[[list[int]], Any], worker: int = 0,
          chief: bool = True) -> Precision:
    """The precision of every worker of a run: ``precision`` when all of them chose it, else float32. ``gather``
    is a collective that returns every worker's list of whole numbers (as rows); ``worker`` is this one's index. Where
    they differ, the ``chief`` warns, naming the format each worker chose with the rates it measured, and the setting
    that trains every worker in one format without measuring."""
    rates = precision.rates or {}
    own = [PRECISIONS.index(precision.name), int(worker),
           *(round(rates[name] * 10) if name in rates else -1 for name in PRECISIONS)]
    by_worker = {int(row[1]): [int(value) for value in row] for row in gather(own)}  # a row per replica
    chosen = {PRECISIONS[row[0]] for row in by_worker.values()}
    if chosen == {precision.name}:
        return precision
    (logger.warning if chief else logger.info)("%s", differing_text(by_worker))
    return Precision("float32", f"workers differ ({', '.join(sorted(chosen))}): float32 on every worker",
                     rates=precision.rates)


def differing_text(by_worker: Mapping[int, Sequence[int]]) -> str:
    """What :func:`agree` says of workers that chose different precisions: ``by_worker`` holds each worker's row (its
    choice's index in :data:`PRECISIONS`, its index, then its rate of each format in tenths of an image a second, -1
    where it has none)."""
    def chose(worker: int, row: Sequence[int]) -> str:
        rates = {name: tenths / 10 for name, tenths in zip(PRECISIONS, row[2:], strict=False) if tenths >= 0}
        return f"worker {worker} {PRECISIONS[row[0]]}" + (f" ({describe_rates(rates)})" if rates else "")

    sixteen = sorted({PRECISIONS[row[0]] for row in by_worker.values()} - {"float32"})
    formats = " or ".join(f"'{name}'" for name in [*sixteen, "float32"])
    return (f"The workers chose different precisions: {'; '.join(chose(k, by_worker[k]) for k in sorted(by_worker))}. "
            f"All of them train in float32; give `precision` = {formats} to train every worker in one format without "
            "measuring.")


def step_rate(net: Any, batch: tuple[Any, Any], *, steps: int = STEPS, seconds: float = SECONDS,
              jit_compile: bool = False, warmup: int = 1, budget: float | None = None) -> float:
    """Images per second of ``net``'s compiled training step on one in-memory ``batch``, after ``warmup`` steps:
    at least ``steps`` steps and ``seconds`` seconds, waiting for the device at the end. With ``budget``, the
    measurement stops once it has taken that many seconds, warm-up included: the rate of the steps timed by then,
    or of the warm-up when it alone took longer (a rate too low, never too high)."""
    from ..tfimport import tf

    images = int(batch[0].shape[0])
    began = time.perf_counter()
    step = tf.function(net.train_step, jit_compile=jit_compile)
    for _ in range(warmup):
        float(step(batch)["loss"])
    count, start, elapsed = 0, time.perf_counter(), 0.0
    if budget is not None and start - began > budget:
        return warmup * images / (start - began)
    logs: Any = None
    while count < steps or elapsed < seconds:
        logs = step(batch)
        count += 1
        if count % 5 == 0 or count >= steps or budget is not None:
            float(logs["loss"])  # wait for the device
            elapsed = time.perf_counter() - start
            if budget is not None and time.perf_counter() - began > budget:
                break
    float(logs["loss"])
    elapsed = time.perf_counter() - start
    return count * images / elapsed


def timer_here(num_classes: int, batch_size: int, image_size: int, *, dense_units: int, grouped: bool,
               jit_compile: bool) -> Callable[[str], float]:
    """A timer of the model about to train, in this process: AlexNet of these settings, in a given format, trained
    on one random batch (outside any strategy's scope); its images per second. Every format after the first is
    measured within :data:`BUDGET_FACTOR` times the seconds the first took (:func:`step_rate`'s ``budget``).

    What it measured stays allocated in this process until the process ends (see the module documentation):
    :func:`model_timer` runs it in a child process."""
    spent: list[float] = []

    def timer(name: str) -> float:
        from ..input.pipeline import synthetic_dataset
        from .model import training_model

        began = time.perf_counter()
        net, _ = training_model(num_classes, Precision(name, "measuring"), image_size=image_size,
                                dense_units=dense_units, grouped=grouped, jit_compile=jit_compile)
        batch = next(iter(synthetic_dataset(batch_size, image_size, num_classes, steps=1, seed=0,
                                            distinct_batches=1)))
        budget = max(BUDGET_FLOOR, BUDGET_FACTOR * spent[0]) if spent else None
        rate = step_rate(net, batch, jit_compile=jit_compile, budget=budget)
        spent.append(time.perf_counter() - began)
        logger.info("precision %s: %.1f images/s%s", name, rate,
                    " (stopped at its time budget)" if budget is not None and spent[-1] > budget else "")
        del net
        return rate

    return timer


def rates_here(names: Sequence[str], model: Mapping[str, Any]) -> dict[str, float]:
    """Images per second of each format of ``names``, in that order, timed in this process by :func:`timer_here`
    of ``model`` (its keyword arguments); what a child process of :func:`model_timer` runs."""
    timer = timer_here(**model)
    return {name: float(timer(name)) for name in names}


class ChildTimer:
    """A timer of the model about to train (:func:`timer_here` of ``model``) that times in a fresh Python process,
    so that this process keeps nothing of the measurement. Its first call times the format asked for and then the
    other ``formats`` not yet timed, in one child, in that order (the later ones within the first one's time
    budget, as :func:`timer_here` does); later calls answer from those rates."""

    def __init__(self, model: Mapping[str, Any], formats: Sequence[str] = ()):
        self.model, self.formats = dict(model), tuple(formats)
        self.rates: dict[str, float] = {}

    def __call__(self, name: str) -> float:
        if name not in self.rates:
            names = [name, *(other for other in self.formats if other != name and other not in self.rates)]
            self.rates.update(self._measure(names))
        return self.rates[name]

    def _measure(self, names: list[str]) -> dict[str, float]:
        from ..child import ChildError, run_child

        try:
            rates = run_child(rates_here, names, self.model, what="The precision measurement",
                              prefix="alexnet-precision-")
        except ChildError as error:
            logger.warning("Timing the precisions in a child process failed (%s): timing them in this process "
                           "instead, which keeps what they allocated until it ends (hundreds of MB a format). Set "
                           "`precision` to skip the measurement.", error.error)
            return rates_here(names, self.model)
        for name in names:
            logger.info("precision %s: %.1f images/s", name, rates[name])
        return {name: float(rates[name]) for name in names}


def model_timer(num_classes: int, batch_size: int, image_size: int, *, dense_units: int, grouped: bool,
                jit_compile: bool, formats: Sequence[str] = ()) -> Callable[[str], float]:
    """A timer of the model about to train (:func:`timer_here`: AlexNet of these settings, in a given format, on one
    random batch; its images per second) run in a child process (:class:`ChildTimer`), which times ``formats``
    as well on its first call."""
    model = {"num_classes": num_classes, "batch_size": batch_size, "image_size": image_size,
             "dense_units": dense_units, "grouped": grouped, "jit_compile": jit_compile}
    return ChildTimer(model, formats)
