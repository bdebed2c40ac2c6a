"""Train AlexNet on ImageNet from a pins board, on one machine or across a Spark cluster.

The public functions are imported lazily, so ``import alexnet`` is cheap and works before TensorFlow,
gcsfs or pyspark are installed; each backend's library is imported by the first call that needs it.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

# tf.keras must mean Keras 2 (tf-keras): Keras 3's model.fit fails under MultiWorkerMirroredStrategy
# (keras-team/keras#20585). Set before anything imports TensorFlow; an explicit user choice wins.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tensors in the machine's memory come from TensorFlow's BFC allocator, which keeps what a step freed for the next
# one. TensorFlow's default hands each tensor above malloc's 32 MB threshold (AlexNet's fully connected weights, their
# gradients, a batch's activations) back to the system and takes it again, page by page, at every step: 20-40% more
# images a second when training on a CPU (README, "Training on CPUs"). An explicit user choice wins here too.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

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
    "alexnet_benchmark": "bench.run",
    "alexnet_spark_train": "launch.api",
    "imagenet_validation": "data.fetch",
    "alexnet_model": "model.pin",
    "alexnet_evaluate": "model.evaluate",
    "alexnet_predict": "model.predict",
    "alexnet_export": "model.export",
    "alexnet_spark_evaluate": "launch.api",
    "tf_config": "train.cluster",
    "tf_config_json": "train.cluster",
    "AlexnetError": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'alexnet' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
