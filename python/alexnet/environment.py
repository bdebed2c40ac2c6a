"""The environment TensorFlow starts in, declared once in ``tensorflow.env`` beside this file: ``import alexnet``
sets it (see ``alexnet/__init__.py``), and so does R's ``library(alexnet)``, which reads the same file.

One of its variables, ``ALEXNET_MALLOC``, is not read by TensorFlow but here: it sets glibc's malloc of this
process (:func:`set_malloc`), as ``GLIBC_TUNABLES=glibc.malloc.NAME=value:...`` would at the start of a process.
"""

from __future__ import annotations

import logging
import os
import re

from .machine import usable_cpus

log = logging.getLogger(__name__)

#: The file: one ``NAME=value`` a line, each with the reason for it in the comment above it.
ENVIRONMENT_FILE = os.path.join(os.path.dirname(__file__), "tensorflow.env")
#: The variable of glibc's malloc settings: ``NAME=integer`` joined by ``:``, or ``default``.
MALLOC_VARIABLE = "ALEXNET_MALLOC"
#: The settings ``ALEXNET_MALLOC`` may name, as ``GLIBC_TUNABLES`` names them (``glibc.malloc.NAME``): mallopt's
#: parameter for each (malloc.h's ``M_TRIM_THRESHOLD``, ``M_TOP_PAD``, ``M_MMAP_THRESHOLD``, ``M_MMAP_MAX``,
#: ``M_ARENA_MAX``).
MALLOPT = {"trim_threshold": -1, "top_pad": -2, "mmap_threshold": -3, "mmap_max": -4, "arena_max": -8}

_malloc_in_effect = "default"


def tensorflow_environment() -> dict[str, str]:
    """The variables of ``tensorflow.env``: name -> value."""
    with open(ENVIRONMENT_FILE, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def set_tensorflow_environment() -> None:
    """Set each variable of ``tensorflow.env`` that is not set already (a user's choice wins), TensorFlow's inter-op
    threads in a process held to one CPU (:func:`set_interop_threads`), then this process's malloc as
    ``ALEXNET_MALLOC`` says (:func:`set_malloc`)."""
    for name, value in tensorflow_environment().items():
        os.environ.setdefault(name, value)
    set_interop_threads()
    set_malloc()


#: The variable TensorFlow reads for the threads that run independent operations side by side (inter-op), when it
#: starts computing; it defaults to the CPUs the process may run on.
INTEROP_VARIABLE = "TF_NUM_INTEROP_THREADS"
#: TensorFlow's inter-op threads in a process that may run on one CPU only: with one thread, an all-reduce of a pack
#: of gradients (``allreduce_pack_mb``) is not sent until the backward pass is done, and on a worker held to one core
#: packs hid none of the exchange; with two they hid a third to a half of it over 1 Gbit/s (README, "Training on
#: CPUs").
ONE_CPU_INTEROP_THREADS = 2


def interop_threads() -> int:
    """TensorFlow's inter-op threads in this process: ``TF_NUM_INTEROP_THREADS`` when it is a positive number, else
    TensorFlow's default, one per CPU the process may run on."""
    value = os.environ.get(INTEROP_VARIABLE, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else usable_cpus()


def set_interop_threads(cpus: int | None = None) -> str | None:
    """Set ``TF_NUM_INTEROP_THREADS`` to :data:`ONE_CPU_INTEROP_THREADS` when this process may run on ``cpus`` = 1
    CPU (its affinity when not given) and the variable is not set (a user's choice wins); the value in effect, or
    ``None`` (TensorFlow's default: one thread per CPU). Call it again after changing the process's affinity, before
    TensorFlow computes: TensorFlow reads the variable once."""
    if (usable_cpus() if cpus is None else cpus) == 1:
        os.environ.setdefault(INTEROP_VARIABLE, str(ONE_CPU_INTEROP_THREADS))
    return os.environ.get(INTEROP_VARIABLE)


def parse_malloc(value: str) -> dict[str, int]:
    """The settings of an ``ALEXNET_MALLOC`` value, name -> integer (none for ``default``); ``ValueError`` saying
    what to write when it is not ``NAME=integer`` joined by ``:`` with names of :data:`MALLOPT`."""
    value = value.strip()
    if value in ("", "default"):
        return {}
    settings: dict[str, int] = {}
    for part in value.split(":"):
        name, _, number = part.partition("=")
        name, number = name.strip().removeprefix("glibc.malloc."), number.strip()
        if name not in MALLOPT or not re.fullmatch(r"-?[0-9]+", number):
            raise ValueError(f"{MALLOC_VARIABLE}={value!r}: {part!r} is not NAME=integer with NAME one of "
                             f"{', '.join(MALLOPT)}; write them joined by ':' (\"arena_max=1:mmap_max=0\"), or "
                             "'default' for glibc's own")
        settings[name] = int(number)
        if not -2**31 <= settings[name] < 2**31:
            raise ValueError(f"{MALLOC_VARIABLE}={value!r}: {name} must fit a C int (below 2147483648)")
    return settings


def set_malloc() -> str:
    """Set glibc's malloc of this process as ``ALEXNET_MALLOC`` says (with ``mallopt``), unless it is ``default``
    or ``GLIBC_TUNABLES`` already sets malloc (a user's choice wins); what is in effect (:func:`malloc_in_effect`).

    A bad value, or a C library other than glibc, leaves malloc as it is, the first with a warning that says what
    to write. Settings take effect from here on: memory already taken, and the arenas of threads already running,
    stay as they are, so it is set at ``import alexnet``, before TensorFlow starts its threads.
    """
    global _malloc_in_effect
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        _malloc_in_effect = "GLIBC_TUNABLES"
        return _malloc_in_effect
    try:
        settings = parse_malloc(os.environ.get(MALLOC_VARIABLE, "default"))
    except ValueError as err:
        log.warning("%s: malloc is left as it is.", err)
        settings = {}
    if not settings or not _is_glibc():
        return _malloc_in_effect
    import ctypes

    mallopt = ctypes.CDLL(None).mallopt
    failed = [name for name, value in settings.items() if mallopt(MALLOPT[name], value) != 1]
    if failed:  # a value out of the range this glibc takes
        log.warning("%s: glibc refused %s; the others are set.", MALLOC_VARIABLE, ", ".join(failed))
    done = [f"{name}={value}" for name, value in settings.items() if name not in failed]
    if done:
        _malloc_in_effect = ":".join(done)
    return _malloc_in_effect


def malloc_in_effect() -> str:
    """This process's malloc settings as the package set them: ``NAME=value`` joined by ``:``; ``default`` when it
    set none (``ALEXNET_MALLOC=default``, or not glibc); ``GLIBC_TUNABLES`` when that variable set them."""
    return _malloc_in_effect


def _is_glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # not a GNU system
        return False
