"""TensorFlow, imported for the whole package here, without the start-up lines nobody acts on.

Importing TensorFlow prints, whatever ``TF_CPP_MIN_LOG_LEVEL`` says, lines a user of this package cannot act
on: the oneDNN notice (twice per process, once per native library), the CPU instructions TensorFlow was not
built for, "All log messages before absl::InitializeLog() is called are written to STDERR", and on a machine
without a GPU its CUDA probe ("Could not find cuda drivers on your machine", "failed call to cuInit"). During
the import and the first device listing, standard error goes to a file, and what TensorFlow wrote there is
passed on without those lines (the CUDA lines are kept where an NVIDIA device is present, where they say what
was found). Set ``ALEXNET_TF_LOGS=1`` to see everything TensorFlow prints (and ``TF_CPP_MIN_LOG_LEVEL=0`` for
its informational messages too). R's package has TensorFlow's first import filtered alike when it comes from
elsewhere (``reticulate::import("tensorflow")`` before any call of the package: :func:`filter_tensorflow_import`).

A machine with an NVIDIA device whose TensorFlow lists no GPU trains on the CPU, and TensorFlow says why ("Cannot
dlopen some GPU libraries": its CUDA libraries, the ``and-cuda`` extra, are missing) only in a line
``TF_CPP_MIN_LOG_LEVEL=2`` hides: the first device listing is followed by a warning, once, that names the cause and
the fix (:func:`unused_gpu_warning`).

Modules of the package write ``from ..tfimport import keras, tf``, never ``import tensorflow`` or ``import
tf_keras`` themselves (tf-keras, Keras 2, because Keras 3's ``fit`` fails under MultiWorkerMirroredStrategy).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .environment import env_switch

if TYPE_CHECKING:  # what the package's modules import from here, for the type checker (__getattr__ at run time)
    import tensorflow as tf  # noqa: F401
    import tf_keras as keras  # noqa: F401

log = logging.getLogger(__name__)

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


def nvidia_devices() -> list[str]:
    """The NVIDIA GPUs of this machine, as their device files: ``/dev/nvidia0``, ``/dev/nvidia1``, ..."""
    return sorted(glob.glob("/dev/nvidia[0-9]*"))


def has_gpu() -> bool:
    """Is there an NVIDIA device on this machine (whose CUDA lines are then worth showing)?"""
    return bool(nvidia_devices())


_told_of_unused_gpu = False


def unused_gpu_warning(tensorflow: types.ModuleType) -> str | None:
    """What to tell a user whose machine has an NVIDIA GPU that ``tensorflow`` lists none of (it then computes on the
    CPU, and says why only in lines ``TF_CPP_MIN_LOG_LEVEL=2`` hides): the likely cause and the fix; ``None`` when
    there is nothing to tell (no NVIDIA device, a GPU listed, or the GPUs hidden on purpose with an empty or ``-1``
    ``CUDA_VISIBLE_DEVICES``)."""
    devices = nvidia_devices()
    if not devices or os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return None
    if tensorflow.config.list_physical_devices("GPU"):
        return None
    version = tensorflow.__version__
    return (f"This machine has an NVIDIA GPU ({', '.join(devices)}), but TensorFlow {version} found none it can use: "
            "everything runs on the CPU. Most likely TensorFlow's CUDA libraries (cuDNN, cuBLAS, NCCL: its "
            "`and-cuda` extra) are not installed: install them with install_alexnet(gpu = TRUE) from R, or "
            f"pip install 'tensorflow[and-cuda]=={version}' into this Python ({sys.executable}). If they are, the "
            "NVIDIA driver may be older than this TensorFlow's CUDA needs: run with TF_CPP_MIN_LOG_LEVEL=0 to see "
            "TensorFlow's own reason (\"Cannot dlopen some GPU libraries\").")


def warn_of_unused_gpu(tensorflow: types.ModuleType) -> None:
    """Log :func:`unused_gpu_warning`, once per process."""
    global _told_of_unused_gpu
    if _told_of_unused_gpu:
        return
    warning = unused_gpu_warning(tensorflow)
    if warning is not None:
        _told_of_unused_gpu = True
        log.warning("%s", warning)


@contextlib.contextmanager
def root_logging_untouched() -> Iterator[None]:
    """While in the block, TensorFlow may log through absl, which calls ``logging.basicConfig()`` when the root logger
    has no handler (a program that has not configured logging yet): the handlers it puts on the root logger are
    taken off after, so that the program's own ``logging.basicConfig(...)`` later still takes effect."""
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)


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
    ``reticulate::import("tensorflow")`` in R, say), if its devices were not listed yet. A machine with an NVIDIA GPU
    that TensorFlow does not list is warned of (:func:`unused_gpu_warning`)."""
    from .errors import importing

    with importing():  # what to install, said once here for every caller
        if tf_logs_wanted():
            import tensorflow
            import tf_keras

            warn_of_unused_gpu(tensorflow)
            return tensorflow, tf_keras
        with filtered_stderr(cuda=not has_gpu()):
            import tensorflow
            import tf_keras

            tensorflow.config.list_physical_devices()
    warn_of_unused_gpu(tensorflow)
    return tensorflow, tf_keras


class _FilteredLoader(importlib.abc.Loader):
    """TensorFlow's own loader, its module executed and its devices listed with the start-up lines filtered, as
    :func:`_import` does."""

    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        with filtered_stderr(cuda=not has_gpu()):
            self.loader.exec_module(module)
            with contextlib.suppress(Exception):  # a TensorFlow that cannot list its devices says so when used
                module.config.list_physical_devices()
        warn_of_unused_gpu(module)


class _FilteredImport(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` once, as the finders after it do, and has it loaded by a :class:`_FilteredLoader`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "tensorflow":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _FilteredLoader(spec.loader)
        return spec


def filter_tensorflow_import() -> None:
    """Have TensorFlow's first import, wherever it comes from (``reticulate::import("tensorflow")`` in R before any
    call of the package, a user's own ``import tensorflow``), filtered as the package's own is (see the module's
    documentation): called by R as its Python starts. Nothing when TensorFlow is imported already, or with
    ``ALEXNET_TF_LOGS`` on."""
    if "tensorflow" in sys.modules or tf_logs_wanted() or any(isinstance(f, _FilteredImport) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _FilteredImport())


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


_F = TypeVar("_F", bound=Callable[..., Any])


def unconverted(fn: _F) -> _F:
    """``fn``, traced by TensorFlow as it is written, without autograph's rewrite of its Python source.

    The functions the input pipeline hands to ``Dataset.map`` (reading, decoding any format, the crops, the checks
    of the images before training, an export's decoding) use TensorFlow's own control flow (``tf.cond``,
    ``tf.where``), and Python's only on Python values (a setting, a tuple of scales): autograph's conversion leaves
    their graphs as they are and only costs time, at the start of every run, evaluation and prediction (2.3 s of the
    14.7 s of a small training run from the command line). A Python ``if`` on a tensor in such a function fails when
    it is traced ("using a tf.Tensor as a Python bool is not allowed"): write ``tf.cond`` instead. Functions it
    calls are not converted either."""
    tf = sys.modules[__name__].tf  # imported on first use (see __getattr__)
    return cast(_F, tf.autograph.experimental.do_not_convert(fn))


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
