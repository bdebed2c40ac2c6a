"""The stages that train: the model alone on an in-memory batch, real training, and fetching from a board."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..machine import usable_cpus
from .images import BenchImages
from .measure import load_average


def synthetic_measurement(
    num_classes: int,
    batch_size: int,
    image_size: int,
    *,
    steps: int = 5,
    seconds: float = 5.0,
    dense_units: int = 4096,
    precision: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """AlexNet training steps on one random uint8 batch kept on the device: the model's images per second.

    The model, optimizer and compiled step are those of training: in ``precision`` (``None``: the one training
    would take here, measured by :func:`alexnet.train.measure.resolve_precision`; the record's ``precision``,
    ``precision_reason`` and ``precision_rates`` say which and why), with XLA on a GPU. One warm-up step, then at
    least ``steps`` steps and ``seconds`` seconds (:func:`alexnet.train.measure.step_rate`).

    It runs on one device (the first GPU, else the CPU); the record's ``gpus`` is how many GPUs the machine has,
    so that the model's rate on all of them can be told (:func:`alexnet.bench.report.summarize`).
    """
    from ..input.pipeline import synthetic_dataset
    from ..tfimport import keras, tf
    from ..train.measure import precision_for, step_rate
    from ..train.model import training_model

    gpus = len(tf.config.list_logical_devices("GPU"))
    gpu = gpus > 0
    chosen = precision_for(precision, gpu=gpu, num_classes=num_classes, batch_size=batch_size, image_size=image_size,
                           dense_units=dense_units, grouped=False, jit_compile=gpu)
    keras.utils.set_random_seed(seed)
    net, _ = training_model(num_classes, chosen, image_size=image_size, dense_units=dense_units, jit_compile=gpu)
    batch = next(iter(synthetic_dataset(batch_size, image_size, num_classes, steps=1, seed=seed,
                                        distinct_batches=1)))
    load = load_average()
    start = time.perf_counter()
    rate = step_rate(net, batch, steps=steps, seconds=seconds, jit_compile=gpu, warmup=2)
    elapsed = time.perf_counter() - start
    return {
        "stage": "synthetic",
        "cores": usable_cpus(),
        "images_per_second": rate,
        "images": round(rate * elapsed),
        "seconds": round(elapsed, 3),
        "load_average": load,
        "load_after": load_average(),
        "device": "GPU" if gpu else "CPU",
        "gpus": gpus,
        "precision": chosen.name,
        "precision_reason": chosen.reason,
        "precision_rates": chosen.rates,
    }


def train_measurement(
    bench: BenchImages,
    batch_size: int,
    image_size: int,
    *,
    steps: int = 5,
    parallel: int | None = None,
    cache: bool = True,
    dense_units: int = 4096,
    precision: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """:func:`alexnet.train.api.alexnet_train` for two epochs of ``steps`` steps; images per second of the second.

    Trains in ``precision`` (``None``: the hardware's, as ``alexnet_train`` picks it); the record's ``precision``
    and ``precision_reason`` are those the history's ``params`` report.
    """
    from ..train.api import alexnet_train

    data = {"image": bench.files, "label": bench.labels, "num_classes": bench.num_classes,
            "category": [str(y) for y in bench.labels], "categories": sorted({str(y) for y in bench.labels})}
    load = load_average()
    start = time.perf_counter()
    history = alexnet_train(batch_size=batch_size, epochs=2, data=data, parallel=parallel, image_size=image_size,
                            steps_per_epoch=steps, validation=False, check_images=False, cache=cache, seed=seed,
                            verbose=0, dense_units=dense_units, precision=precision)
    return {
        "stage": "train",
        "cores": usable_cpus(),
        "images_per_second": float(history["images_per_second"] or "nan"),  # None: no step ran
        "images": 2 * steps * batch_size,
        "seconds": round(time.perf_counter() - start, 3),
        "load_average": load,
        "load_after": load_average(),
        "loss": [float(v) for v in history["metrics"].get("loss", [])],
        "precision": history["params"]["precision"],
        "precision_reason": history["params"]["precision_reason"],
    }


def fetch_measurement(
    board: str, *, partition: int = 0, total: int = 1, workers: int = 8, workdir: str | os.PathLike
) -> list[dict[str, Any]]:
    """Fetch partition ``partition`` of ``total`` from ``board`` twice, into empty caches: one download at a time,
    then ``workers`` at a time. Bytes per second of each."""
    from ..data.fetch import imagenet_partition

    results = []
    for count in (1, workers):
        cache = Path(workdir) / f"fetch-{count}"
        shutil.rmtree(cache, ignore_errors=True)
        load = load_average()
        fetched = imagenet_partition(partition, total, board, cache_dir=cache, workers=count, validation=False)
        moved, seconds = int(fetched["downloaded_bytes"]), float(fetched["seconds"])
        results.append({
            "stage": "fetch",
            "workers": count,
            "bytes": moved,
            "seconds": seconds,
            "bytes_per_second": moved / seconds if seconds > 0 else None,
            "images": len(fetched["image"]),
            "load_average": load,
            "load_after": load_average(),
        })
        shutil.rmtree(cache, ignore_errors=True)
    return results
