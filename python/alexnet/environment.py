"""The environment variables the package reads, declared once (:data:`VARIABLES`), and the environment TensorFlow
starts in, declared once in ``tensorflow.env`` beside this file: ``import alexnet`` sets it (see
``alexnet/__init__.py``), and so does R's ``library(alexnet)``, which reads the same file.

The core reads a variable through :func:`env_value` or, for one that turns something on or off, :func:`env_switch`,
which take the same words everywhere (:data:`ON_WORDS`, :data:`OFF_WORDS`), and sets one for a while with
:func:`env_set`; README's "Environment variables" is :func:`markdown_table`. This module imports nothing of the
package but :mod:`.machine`: ``progress.py`` and ``tfimport.py`` read their variables here and stay light.

One of ``tensorflow.env``'s variables, ``ALEXNET_MALLOC``, is not read by TensorFlow but here: it sets glibc's malloc
of this process (:func:`set_malloc`), as ``GLIBC_TUNABLES=glibc.malloc.NAME=value:...`` would at the start of a
process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

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

#: The words that turn a variable of :func:`env_switch` on, and off (in any case, spaces around ignored).
ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off", "none")


@dataclass(frozen=True)
class Variable:
    """An environment variable the package reads: its ``name``, its ``default`` (what holds when it is unset, said
    for a reader), what it ``means``, and, for one that turns something on or off, its ``switch`` default."""

    name: str
    default: str
    means: str
    switch: bool | None = None


_WORDS = f"on: {', '.join(ON_WORDS)}; off: {', '.join(OFF_WORDS)}"

#: Every environment variable the package reads (Python's core, and R where said), in the order README shows them.
VARIABLES: tuple[Variable, ...] = (
    Variable("ALEXNET_BOARD", "the folder `board` of the user's cache folder",
             "the board used when none is given: a folder, `file://`, `gs://`, `s3://` or `https://` location"),
    Variable("ALEXNET_PROGRESS", "on", f"progress bars on standard error ({_WORDS}); off, a long task logs a line of "
             "where it stands every minute instead; the command line's `--quiet` turns them off (and its lines with "
             "the other notes), and the package's child processes (a Spark job's workers, the benchmark's) take it as "
             "0 unless it is set", switch=True),
    Variable("ALEXNET_TF_LOGS", "off", f"everything TensorFlow prints when it starts ({_WORDS}); off, the lines "
             "nobody acts on (its CPU instructions, the CUDA probe of a machine without a GPU) are left out",
             switch=False),
    Variable("ALEXNET_PRECISION_CACHE", "`precision.json` in the user's cache folder",
             "the file that remembers the precision measured fastest on this machine (`precision` left to choose: "
             "unset, or `auto` on the command line); "
             f"an off word ({', '.join(OFF_WORDS)}) remembers none, every run measures"),
    Variable("ALEXNET_MALLOC", "`tensorflow.env`'s", "glibc's malloc settings of the process: `NAME=integer` joined by "
             "`:` (`arena_max`, `mmap_max`, `mmap_threshold`, `top_pad`, `trim_threshold`), or `default` for glibc's "
             "own (\"Training on CPUs\" below)"),
    Variable("ALEXNET_LOG_DIR", "`alexnet-logs` in the temporary folder",
             "the folder where a Spark job's workers keep their logs, on each host"),
    Variable("ALEXNET_PYTHON", "the Python `install_alexnet()` made",
             "R: the Python executable or virtual environment the R package uses (see `?alexnet_python`)"),
    Variable("WORKON_HOME", "`~/.virtualenvs`", "R: where the virtual environment `r-alexnet` is looked for"),
    Variable("LD_LIBRARY_PATH", "", "R: a Python started from R gets it as it was outside R"),
    Variable("TF_NUM_INTEROP_THREADS", "one per CPU; 2 in a process held to one CPU",
             "TensorFlow's threads that run independent operations side by side (\"Training on CPUs\" below)"),
    Variable("TF_CONFIG", "", "the cluster of a multi-worker run, as TensorFlow takes it (`tf_config()` writes one)"),
    Variable("CUDA_VISIBLE_DEVICES", "every GPU", "the GPUs TensorFlow computes on; set empty or `-1`, none, and a "
             "machine with an NVIDIA GPU is then not warned that TensorFlow lists none (a Spark worker launched from "
             "Python is given its task's GPUs)"),
    Variable("GLIBC_TUNABLES", "", "glibc's own settings: its `glibc.malloc.*` settings win over `ALEXNET_MALLOC`"),
    Variable("STORAGE_EMULATOR_HOST", "", "`gs://` locations are read and written, anonymously, at this Cloud Storage "
             "emulator"),
    Variable("GOOGLE_APPLICATION_CREDENTIALS", "Google's Application Default Credentials",
             "the service-account key file of `gs://` locations; one that gives no credentials is an error, for reads "
             "too (without any credentials, a read is anonymous: a public bucket)"),
    Variable("AWS_ENDPOINT_URL_S3", "`AWS_ENDPOINT_URL`", "the server of `s3://` locations (an S3-compatible store)"),
    Variable("AWS_ENDPOINT_URL", "Amazon's", "the server of `s3://` locations, unless `AWS_ENDPOINT_URL_S3` says"),
    Variable("HADOOP_CONF_DIR", "", "a `yarn` Spark master's cluster configuration (or `YARN_CONF_DIR`)"),
    Variable("YARN_CONF_DIR", "", "a `yarn` Spark master's cluster configuration (or `HADOOP_CONF_DIR`)"),
)
_DECLARED = {variable.name: variable for variable in VARIABLES}
_warned: set[tuple[str, str]] = set()


def declared(name: str) -> Variable:
    """The declaration of the variable ``name``; a ``LookupError`` when :data:`VARIABLES` has none (a variable the
    package reads is declared there)."""
    try:
        return _DECLARED[name]
    except KeyError:
        raise LookupError(f"{name} is not declared in alexnet.environment.VARIABLES") from None


def env_value(name: str) -> str:
    """The value of the declared variable ``name``, spaces around it removed; ``""`` when it is not set."""
    declared(name)
    return os.environ.get(name, "").strip()


@contextlib.contextmanager
def env_set(name: str, value: str | None) -> Iterator[None]:
    """The declared variable ``name`` set to ``value`` (``None``: unset) for the block, then given back as it was:
    unset again when it was unset, its value when it had one, also when the block raises."""
    declared(name)
    before = os.environ.get(name)
    _put(name, value)
    try:
        yield
    finally:
        _put(name, before)


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def switch_word(value: str) -> bool | None:
    """``True`` for an on word (:data:`ON_WORDS`), ``False`` for an off word, in any case; ``None`` for any other."""
    word = value.strip().lower()
    return True if word in ON_WORDS else False if word in OFF_WORDS else None


def env_switch(name: str) -> bool:
    """Whether the declared switch ``name`` is on: its default when it is unset or empty; a value that is neither an
    on nor an off word keeps the default, with a warning (once per value) that says the words: a typo in a variable
    neither stops the work nor turns something on or off unasked."""
    default = declared(name).switch
    if default is None:
        raise LookupError(f"{name} is not a switch in alexnet.environment.VARIABLES")
    value = env_value(name)
    word = switch_word(value) if value else default
    if word is None:
        if (name, value) not in _warned:
            _warned.add((name, value))
            log.warning("%s=%r is neither on (%s) nor off (%s): it stays %s; set it to one of those words.", name,
                        value, ", ".join(ON_WORDS), ", ".join(OFF_WORDS), "on" if default else "off")
        return default
    return word


def markdown_table() -> str:
    """The table of README's "Environment variables": every variable of :data:`VARIABLES`, its default, its meaning."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{v.name}` | {v.default or 'unset'} | {v.means} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"


def tensorflow_environment() -> dict[str, str]:
    """The variables of ``tensorflow.env``: name -> value."""
    with open(ENVIRONMENT_FILE, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def set_tensorflow_environment() -> None:
    """Set each variable of ``tensorflow.env`` that is not set already, or set empty (a user's choice wins; an empty
    value is none, as R's ``library(alexnet)`` reads it before this process starts), TensorFlow's inter-op
    threads in a process held to one CPU (:func:`set_interop_threads`), then this process's malloc as
    ``ALEXNET_MALLOC`` says (:func:`set_malloc`)."""
    for name, value in tensorflow_environment().items():
        if not os.environ.get(name):
            os.environ[name] = value
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
    value = env_value(INTEROP_VARIABLE)
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
    if "glibc.malloc." in env_value("GLIBC_TUNABLES"):
        _malloc_in_effect = "GLIBC_TUNABLES"
        return _malloc_in_effect
    try:
        settings = parse_malloc(env_value(MALLOC_VARIABLE) or "default")
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
