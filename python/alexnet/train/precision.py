"""The number formats: which the hardware computes in (:func:`candidates`), and one asked for
(:func:`choose_precision`).

``precision`` in :func:`alexnet.alexnet_train` is one of

- ``None`` (auto): float32 on hardware that computes in float32 alone; elsewhere the format among
  :func:`candidates` that trains fastest here, measured (the decision is :mod:`.measure`'s, from these facts);
- ``"float32"``: every layer computes in float32;
- ``"bfloat16"``: mixed precision, layers compute in bfloat16 with float32 weights (Keras' ``mixed_bfloat16``
  policy); bfloat16 has float32's range, so no loss scaling is needed;
- ``"float16"``: mixed precision in float16 with float32 weights (``mixed_float16``), the loss scaled
  dynamically so that small gradients do not vanish.

The softmax always computes in float32. A precision the device only emulates (bfloat16 or float16 on a CPU
without their instructions) trains, more slowly than float32: a warning says so. bfloat16 on a GPU older than
compute capability 8.0 is refused before training.

This module does not import TensorFlow: the devices are described by :class:`Hardware`, which
:func:`hardware` reads.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ..errors import AlexnetError
from ..machine import cpu_flags

logger = logging.getLogger(__name__)

#: The precisions ``precision`` may name.
PRECISIONS = ("float32", "bfloat16", "float16")
#: The Keras dtype policy of each precision.
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
#: CPU flags that mean bfloat16 arithmetic in hardware.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
#: CPU flags that mean float16 arithmetic in hardware.
FP16_CPU_FLAGS = ("avx512_fp16", "amx_fp16")
#: CPU flags that make float16 worth measuring: an Intel Xeon with avx512_fp16 but no AMX for float16 trained
#: AlexNet at 0.07 images/s in float16 (one step took 489 s) against 22 in float32, so that flag alone does not.
FP16_CPU_MEASURED_FLAGS = ("amx_fp16",)
#: The first GPU compute capability with bfloat16 tensor cores (Ampere).
BF16_GPU_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Hardware:
    """The devices a run computes on: its GPUs' compute capabilities (none: the CPU) and the CPU's flags."""

    gpu_capabilities: tuple[tuple[int, int], ...] = ()
    cpu_flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def gpu(self) -> bool:
        """Does the run compute on GPUs?"""
        return bool(self.gpu_capabilities)

    def describe(self, precision: str = "bfloat16") -> str:
        """The devices in a few words, for messages: a CPU by its instructions for ``precision`` (bfloat16 or
        float16)."""
        if self.gpu:
            lowest = min(self.gpu_capabilities)
            return f"GPU of compute capability {lowest[0]}.{lowest[1]}"
        half = "float16" if precision == "float16" else "bfloat16"
        found = [f for f in (FP16_CPU_FLAGS if half == "float16" else BF16_CPU_FLAGS) if f in self.cpu_flags]
        return f"CPU with {' and '.join(found)}" if found else f"CPU without {half} instructions"


@dataclass(frozen=True)
class Precision:
    """The precision a run computes in, why, and whether the hardware only emulates it."""

    name: str
    reason: str
    emulated: bool = False
    rates: dict[str, float] | None = None

    @property
    def policy(self) -> str:
        """The Keras dtype policy: ``float32``, ``mixed_bfloat16`` or ``mixed_float16``."""
        return POLICIES[self.name]

    @property
    def mixed(self) -> bool:
        """Do the layers compute in a 16-bit format?"""
        return self.name != "float32"

    @property
    def loss_scaled(self) -> bool:
        """Does the optimizer scale the loss (float16 only)?"""
        return self.name == "float16"


def hardware(gpu: bool) -> Hardware:
    """The :class:`Hardware` of this process: the compute capability of each visible GPU when ``gpu``, and
    the CPU's flags."""
    capabilities: list[tuple[int, int]] = []
    if gpu:
        from ..tfimport import tf

        for device in tf.config.list_physical_devices("GPU"):
            details = tf.config.experimental.get_device_details(device)
            capability = details.get("compute_capability")
            capabilities.append(tuple(capability) if capability else (0, 0))
    return Hardware(tuple(capabilities), cpu_flags())


def _has(flags: Collection[str], wanted: Sequence[str]) -> bool:
    return any(flag in flags for flag in wanted)


def candidates(device: Hardware) -> tuple[str, ...]:
    """The formats ``device`` computes in hardware: float32, and the 16-bit formats of its GPUs or CPU
    instructions (what precision left to choose is measured among)."""
    if device.gpu:
        if min(device.gpu_capabilities) >= BF16_GPU_CAPABILITY:
            return ("float32", "bfloat16", "float16")
        return ("float32", "float16")
    found = ["float32"]
    if _has(device.cpu_flags, BF16_CPU_FLAGS):
        found.append("bfloat16")
    if _has(device.cpu_flags, FP16_CPU_MEASURED_FLAGS):
        found.append("float16")
    return tuple(found)


def choose_precision(requested: str, device: Hardware) -> Precision:
    """The :class:`Precision` asked for (a name of :data:`PRECISIONS`) on ``device``: emulated, with a warning, on a
    CPU without its instructions (not among :func:`candidates`).

    Raises :class:`AlexnetError` for bfloat16 on a GPU older than compute capability 8.0, which has no
    bfloat16 arithmetic.
    """
    if device.gpu:
        if requested == "bfloat16" and min(device.gpu_capabilities) < BF16_GPU_CAPABILITY:
            raise AlexnetError(f"precision = 'bfloat16' needs a GPU of compute capability 8.0 or more (Ampere or "
                               f"newer); this run has a {device.describe()}: use 'float16' or 'float32'.")
        return Precision(requested, f"asked for, on a {device.describe()}")
    emulated = requested not in candidates(device)
    if emulated:
        logger.warning("precision = %r on a %s: the CPU emulates %s, so training will be slower than in "
                       "float32. Leave `precision` unset to let the hardware decide.",
                       requested, device.describe(requested), requested)
    return Precision(requested, f"asked for, on a {device.describe(requested)}" + (" (emulated)" if emulated else ""),
                     emulated)
