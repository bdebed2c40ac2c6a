"""Train AlexNet on ImageNet from a pins board, on one machine or across a Spark cluster.

The public functions are imported lazily, so ``import alexnet`` is cheap and works before TensorFlow,
gcsfs or pyspark are installed; each backend's library is imported by the first call that needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .environment import set_tensorflow_environment

# Before anything imports TensorFlow: tf-keras for tf.keras, its C++ log quiet, its BFC allocator, and glibc's malloc
# settings for the threads it starts (tensorflow.env says why each).
set_tensorflow_environment()

__version__ = "0.1.0"

# No handler of the package's own: where a program has not configured logging, Python prints its warnings (and
# worse) on standard error, so that what was left out of an upload is seen; the command line and the R package
# (as R warnings, see alexnet.errors.r_call) show them their own way.

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "read_imagenet": "data.imagenet",
    "imagenet_synthetic": "data.synthetic",
    "imagenet_upload": "data.upload",
    "imagenet_classes": "data.classes",
    "imagenet_categories": "data.fetch",
    "imagenet_partition": "data.fetch",
    "partition_categories": "data.partition",
    "alexnet_train": "train.api",
    "alexnet_history": "train.history_file",
    "alexnet_benchmark": "bench.api",
    "alexnet_spark_train": "launch.api",
    "imagenet_validation": "data.fetch",
    "alexnet_model": "model.pin",
    "alexnet_evaluate": "model.evaluate",
    "alexnet_predict": "model.predict",
    "alexnet_features": "model.features",
    "alexnet_filters": "model.filters",
    "alexnet_export": "model.export",
    "alexnet_spark_evaluate": "launch.api",
    "tf_config": "train.cluster",
    "tf_config_json": "train.cluster",
    "AlexnetError": "errors",
    "BoardError": "errors",
    "LayoutError": "errors",
    "IntegrityError": "errors",
    "BadImagesError": "errors",
    "ChildError": "child",
    "WorkerError": "launch.worker",
    "WorkerLostError": "train.lost",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # the exports as type checkers see them (tests/test_result.py holds these to _EXPORTS)
    # the functions that take declared settings through ** keywords: their typed signatures, generated (_typed.py)
    from ._typed import (  # noqa: F401
        alexnet_benchmark,
        alexnet_evaluate,
        alexnet_export,
        alexnet_features,
        alexnet_model,
        alexnet_predict,
        alexnet_spark_evaluate,
        alexnet_spark_train,
        alexnet_train,
        imagenet_partition,
        imagenet_synthetic,
        imagenet_upload,
        imagenet_validation,
    )
    from .child import ChildError  # noqa: F401
    from .data.classes import imagenet_classes  # noqa: F401
    from .data.fetch import imagenet_categories  # noqa: F401
    from .data.imagenet import read_imagenet  # noqa: F401
    from .data.partition import partition_categories  # noqa: F401
    from .errors import AlexnetError, BadImagesError, BoardError, IntegrityError, LayoutError  # noqa: F401
    from .launch.worker import WorkerError  # noqa: F401
    from .model.filters import alexnet_filters  # noqa: F401
    from .train.cluster import tf_config, tf_config_json  # noqa: F401
    from .train.history_file import alexnet_history  # noqa: F401
    from .train.lost import WorkerLostError  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'alexnet' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
