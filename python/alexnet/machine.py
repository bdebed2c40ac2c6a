"""Facts about the machine this process runs on, without importing TensorFlow."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The number of CPUs this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
