"""How training scales to many workers, projected from what two of them measured (a pure module).

A synchronous step of N workers computes for ``t`` seconds and all-reduces ``B`` bytes. A ring all-reduce (what
TensorFlow's collectives run between workers) moves ``2 (N - 1) / N x B`` bytes in and out of every worker in
``2 (N - 1)`` rounds, so on links of ``r`` bits per second with a one-way latency ``l`` it takes

    c(N) = 2 (N - 1) / N x 8 B / (u r) + 2 (N - 1) l

where ``u`` is the share of the link's rate the all-reduce reached when it was measured alone on two workers
(software costs included). Part of it is hidden behind computation (packs sent during the backward pass): when
two workers were measured, ``h x t`` seconds of communication were hidden, ``h`` being the hidden seconds over the
compute seconds of a step. A step of two may also have lost more than its all-reduce takes alone (the collective's
work on the worker's CPUs, which the computation then lacks): ``v x t`` seconds, ``v`` that loss over the compute
seconds, kept in proportion to the compute. The step of N workers then takes ``t + max(0, c(N) - h t) + v t`` and
the efficiency, the throughput of N workers over N times that of one, is

    E(N) = t / (t + max(0, c(N) - h t) + v t),

which gives back the efficiency the two workers measured, at their compute time.

:data:`MODEL` says this in one line for the reports; :func:`efficiency` computes it; :data:`MXNET_ALEXNET` is the
reference to beat: MXNet's published AlexNet scaling (images per second on 1 to 256 GPUs, batch 512 per GPU),
from its large-scale image classification tutorial.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The model of :func:`efficiency`, in one line.
MODEL = ("E(N) = t / (t + max(0, c(N) - h*t) + v*t), c(N) = 2(N-1)/N * 8B/(u*r) + 2(N-1)*l: ring all-reduce of B "
         "bytes a step on links of r bit/s and one-way latency l, u the share of r reached, h the share of the compute "
         "t that hid communication and v the share lost beyond the all-reduce alone, all measured on two workers")
#: MXNet's AlexNet on K80 GPUs (batch 512 per GPU, synchronous, 20 Gbit/s Ethernet between 16 machines of 16 GPUs):
#: GPUs -> images per second.
MXNET_ALEXNET: dict[int, float] = {1: 457.07, 2: 870.43, 4: 1514.8, 8: 2852.5, 16: 4244.18, 32: 7945.57,
                                   64: 15840.52, 128: 31334.88, 256: 61938.36}
#: The worker counts projected: powers of two up to 256.
WORKER_COUNTS = (2, 4, 8, 16, 32, 64, 128, 256)


def mxnet_efficiency() -> list[tuple[int, float]]:
    """MXNet's AlexNet table as (GPUs, efficiency): images per second over GPUs times those of one."""
    one = MXNET_ALEXNET[1]
    return [(n, rate / (n * one)) for n, rate in sorted(MXNET_ALEXNET.items())]


def ring_seconds(step_bytes: float, workers: int, rate: float, latency: float = 0.0, share: float = 1.0) -> float:
    """Seconds of a ring all-reduce of ``step_bytes`` over ``workers`` on links of ``rate`` bit/s (of which the
    all-reduce reaches ``share``) and one-way ``latency`` seconds: ``c(N)`` of the module documentation."""
    if workers <= 1 or step_bytes <= 0:
        return 0.0
    return 2 * (workers - 1) / workers * 8 * step_bytes / (share * rate) + 2 * (workers - 1) * latency


def efficiency(compute: float, step_bytes: float, workers: int, rate: float, *, latency: float = 0.0,
               share: float = 1.0, hidden: float = 0.0, overhead: float = 0.0) -> float:
    """``E(N)`` of the module documentation for a step of ``compute`` seconds, ``hidden`` the share of it that hides
    communication, ``overhead`` the share lost beyond the all-reduce (``v``)."""
    if compute <= 0:
        raise ValueError("compute must be positive")
    exposed = max(0.0, ring_seconds(step_bytes, workers, rate, latency, share) - hidden * compute)
    return compute / (compute + exposed + overhead * compute)


@dataclass(frozen=True)
class Measured:
    """What two workers measured on a shaped link: ``compute`` seconds of a step alone, ``step`` seconds of a step of
    the two, ``alone`` seconds of one all-reduce alone, ``step_bytes`` all-reduced per step, ``rate`` of the link and
    its one-way ``latency`` in seconds (the round trip added, halved)."""

    compute: float
    step: float
    alone: float
    step_bytes: float
    rate: float
    latency: float = 0.0

    @property
    def share(self) -> float:
        """The share of the link's rate the all-reduce reached alone (``u``), at most 1: its time less the two rounds
        of latency a ring of two waits, against the time of its bytes at the link's rate."""
        moving = self.alone - 2 * self.latency  # a ring of two waits two rounds
        if moving <= 0 or self.step_bytes <= 0:
            return 1.0
        return min(1.0, ring_seconds(self.step_bytes, 2, self.rate) / moving)

    @property
    def hidden(self) -> float:
        """Seconds of communication hidden behind computation over the compute seconds (``h``), at least 0."""
        exposed = max(0.0, self.step - self.compute)
        return max(0.0, self.alone - exposed) / self.compute if self.compute > 0 else 0.0

    @property
    def overhead(self) -> float:
        """Seconds a step of two lost beyond its all-reduce alone, over the compute seconds (``v``), at least 0."""
        exposed = max(0.0, self.step - self.compute)
        return max(0.0, exposed - self.alone) / self.compute if self.compute > 0 else 0.0


def project(measured: Measured, compute_seconds: Iterable[float], workers: Sequence[int] = WORKER_COUNTS,
            latency: float | None = None) -> list[dict[str, Any]]:
    """The efficiency at every count of ``workers`` for each step time of ``compute_seconds`` (for example a GPU's),
    with ``u``, ``h`` and ``v`` as ``measured``, on links of ``latency`` (``None``: the measured link's); one record
    per step time: ``compute_seconds``, ``workers`` and ``efficiency`` (lists)."""
    latency = measured.latency if latency is None else latency
    out = []
    for compute in compute_seconds:
        values = [efficiency(compute, measured.step_bytes, n, measured.rate, latency=latency, share=measured.share,
                             hidden=measured.hidden, overhead=measured.overhead) for n in workers]
        out.append({"compute_seconds": float(compute), "workers": list(workers),
                    "efficiency": [round(v, 4) for v in values]})
    return out


def measured_from(record: Mapping[str, Any]) -> Measured | None:
    """The :class:`Measured` of one row of the scaling table (None for loopback or a row without what it needs); its
    latency is half the round trip its link added (``rtt_ms``, none when the row has none)."""
    needed = ("compute_seconds", "step_seconds", "allreduce_seconds", "bytes_per_step", "rate")
    if any(record.get(name) in (None, 0) for name in needed):
        return None
    return Measured(float(record["compute_seconds"]), float(record["step_seconds"]),
                    float(record["allreduce_seconds"]), float(record["bytes_per_step"]), float(record["rate"]),
                    float(record.get("rtt_ms") or 0.0) / 2000)
