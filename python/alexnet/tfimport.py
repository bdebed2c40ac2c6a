"""TensorFlow, imported for the whole package here, without the start-up lines nobody acts on.

Importing TensorFlow prints, whatever ``TF_CPP_MIN_LOG_LEVEL`` says, lines a user of this package cannot act
on: the oneDNN notice (twice per process, once per native library), the CPU instructions TensorFlow was not
built for, "All log messages before absl::InitializeLog() is called are written to STDERR", and on a machine
without a GPU its CUDA probe ("Could not find cuda drivers on your machine", "failed call to cuInit"). During
the import and the first device listing, standard error goes to a file, and what TensorFlow wrote there is
passed on without those lines (the CUDA lines are kept where an NVIDIA device is present, where they say what
was found). Set ``ALEXNET_TF_LOGS=1`` to see everything TensorFlow prints (and ``TF_CPP_MIN_LOG_LEVEL=0`` for
its informational messages too).

Modules of the package write ``from ..tfimport import keras, tf``, never ``import tensorflow`` or ``import
tf_keras`` themselves (tf-keras, Keras 2, because Keras 3's ``fit`` fails under MultiWorkerMirroredStrategy).
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
import tempfile
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .environment import env_switch

if TYPE_CHECKING:  # what the package's modules import from here, for the type checker (__getattr__ at run time)
    import tensorflow as tf  # noqa: F401
    import tf_keras as keras  # noqa: F401

#: Lines TensorFlow prints on every start, which nobody acts on.
STARTUP_NOISE = (
    "oneDNN custom operations are on",
    "cpu_feature_guard.cc",
    "rebuild TensorFlow with the appropriate compiler flags",
    "All log messages before absl::InitializeLog() is called are written to STDERR",
)

#: Lines TensorFlow prints while probing for CUDA on a machine without a GPU.
CUDA_NOISE = (
    "cudart_stub.cc",
    "cuda_platform.cc",
    "cuda_executor.cc",
    "cuda_diagnostics.cc",
    "Could not find cuda drivers",
    "failed call to cuInit",
    "Unable to register cuDNN factory",
    "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
    "computation placer already registered",
)

NOISE = STARTUP_NOISE + CUDA_NOISE


def is_noise(line: str, cuda: bool = True) -> bool:
    """Is ``line`` one of TensorFlow's start-up lines (or, with ``cuda``, of its CUDA probe messages)?"""
    return any(marker in line for marker in (NOISE if cuda else STARTUP_NOISE))


def tf_logs_wanted() -> bool:
    """Did the user ask for everything TensorFlow prints (``ALEXNET_TF_LOGS=1``, or another on word: see
    :func:`alexnet.environment.env_switch`)?"""
    return env_switch("ALEXNET_TF_LOGS")


def has_gpu() -> bool:
    """Is there an NVIDIA device on this machine (whose CUDA lines are then worth showing)?"""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


@contextlib.contextmanager
def filtered_stderr(cuda: bool = True) -> Iterator[None]:
    """Standard error (the file descriptor, as C++ code writes to it) goes to a file for the duration, and what
    was written there is passed on afterwards without TensorFlow's start-up lines (and, with ``cuda``, without
    its CUDA probe messages)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable file descriptor 2: nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not is_noise(line, cuda)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def _import() -> tuple[types.ModuleType, types.ModuleType]:
    """TensorFlow and tf-keras, and the first device listing (where the CUDA probe runs) with the start-up lines
    filtered (see the module's documentation); also when TensorFlow was imported before (by
    ``reticulate::import("tensorflow")`` in R, say), if its devices were not listed yet."""
    if tf_logs_wanted():
        import tensorflow
        import tf_keras

        return tensorflow, tf_keras
    with filtered_stderr(cuda=not has_gpu()):
        import tensorflow
        import tf_keras

        tensorflow.config.list_physical_devices()
    return tensorflow, tf_keras


def cpu_allocator() -> str:
    """Which allocator gives TensorFlow's tensors in the machine's memory, as TensorFlow reports it: "bfc" (a BFC
    allocator, which keeps what a step freed for the next) or "default" (TensorFlow's pool over malloc).

    "bfc" is TensorFlow's BFC allocator, which the package asks for in ``tensorflow.env``, or, where oneDNN is on
    (TensorFlow turns it on by itself on some CPUs; ``TF_ENABLE_ONEDNN_OPTS`` chooses), oneDNN's allocator, which
    keeps every tensor of 4 KB or more in a BFC allocator of its own and is then TensorFlow's default. "default"
    is what TensorFlow takes without oneDNN where ``TF_CPU_ALLOCATOR_USE_BFC=false`` was set, or where it computed
    something before the package was imported (it takes its allocator then)."""
    tf = sys.modules[__name__].tf  # imported on first use (see __getattr__)
    try:
        tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:  # "Allocator stats not available": only the BFC allocator keeps them
        return "default"
    return "bfc"


#: The name TensorFlow's autograph gives each module it writes (and the file it writes it to).
AUTOGRAPH_PREFIX = "__autograph_generated_file"


def remove_autograph_files() -> int:
    """Remove the source files TensorFlow's autograph wrote for the functions this process converted; how many.

    Autograph writes each function it converts to a file in the temporary folder, loads it as a module and removes
    the file when Python ends normally. Python embedded in R (reticulate) never ends that way, so every R session
    that trained or evaluated would leave its files behind, a few dozen each: R removes them when it exits (see
    ``alexnet_core()``). The modules stay loaded; only their files go."""
    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if name.startswith(AUTOGRAPH_PREFIX) and os.path.basename(path).startswith(AUTOGRAPH_PREFIX):
            with contextlib.suppress(OSError):
                os.remove(path)
                removed += 1
    return removed


def __getattr__(name: str) -> types.ModuleType:
    """``tf`` and ``keras``, imported on first use (so that :func:`is_noise` can be used without TensorFlow)."""
    if name in ("tf", "keras"):
        modules = dict(zip(("tf", "keras"), _import(), strict=True))
        globals().update(modules)
        return modules[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
