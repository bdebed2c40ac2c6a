"""Facts about the machine this process runs on, without importing TensorFlow."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The number of CPUs this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``avx512_bf16``, ``amx_bf16``, ...), from Linux's
    ``/proc/cpuinfo``; empty where that file does not exist or says nothing."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def available_memory() -> int | None:
    """The bytes of memory the system can give processes without swapping (Linux's ``MemAvailable``), None where it
    cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
