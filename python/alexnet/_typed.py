# Generated from the declarations of the settings and the public functions' signatures: do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_typed python/alexnet/_typed.py`, when one changes.
# mypy: disable-error-code="empty-body"
"""The public functions that take declared settings, with the signatures type checkers and editors read.

At run time these functions take their settings through ``**`` keywords, and their signature is built from the
declarations when their module is imported; ``alexnet/__init__.py`` imports the functions below in their place under
``TYPE_CHECKING`` alone, so that every setting is completed and checked (its name, and a value of the kind it takes)
without any change to what runs (see :mod:`alexnet.cli.to_typed`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from .launch.api import SparkRun
    from .train.settings import TrainSettings


def alexnet_benchmark(
    data: Mapping[str, Any] | str | os.PathLike | None = None,
    *,
    stages: str | Sequence[Literal["decode", "naive", "naive_auto", "io", "synthetic", "train", "fetch",
        "time_to_accuracy", "scaling"]] = ("decode", "naive", "naive_auto", "io", "synthetic", "train"),
    images: int = 2000,
    batch_size: int = 32,
    image_size: int = 224,
    cores: int | None = None,
    seconds: float = 5.0,
    parallel: int | None = None,
    cache: bool = True,
    resize: int | None = None,
    quality: int = 90,
    model_steps: int = 5,
    dense_units: int = 4096,
    isolation: Literal["process", "threads"] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half", "mixed_bfloat16",
        "mixed_float16"] | None = None,
    board: str | os.PathLike[str] | None = None,
    fetch_partition: int = 0,
    fetch_total: int = 16,
    fetch_workers: int = 8,
    target_accuracy: float = 0.75,
    max_epochs: int = 8,
    repeats: int = 3,
    accuracy_classes: int = 10,
    accuracy_images_per_class: int = 150,
    accuracy_val_per_class: int = 50,
    accuracy_image_size: int = 176,
    accuracy_batch_size: int = 128,
    accuracy_dense_units: int = 512,
    accuracy_workers: int = 1,
    accuracy_levers: str | Sequence[str] | None = None,
    accuracy_link: str | os.PathLike[str] = "loopback",
    scaling_workers: int = 2,
    links: str | Sequence[str] = ("loopback", "1gbit", "10gbit"),
    levers: str | Sequence[str] = ("today", "bfloat16", "packed", "accumulate", "local_sgd", "combined"),
    scaling_steps: int = 5,
    scaling_warmup_steps: int = 2,
    step_seconds: float | Sequence[float] = (0.15,),
    scaling_classes: int = 8,
    scaling_images_per_class: int = 40,
    scaling_timeout: float = 3600.0,
    scaling_resume: bool = False,
) -> dict[str, Any]:
    """Benchmark the input pipeline against a plain decode, the original pipeline and the model; name the bottleneck.

    Every argument, its default and what it does: ``help(alexnet.alexnet_benchmark)``.
    """
    ...


def alexnet_evaluate(
    model: Any,
    data: Mapping[str, Any] | None = None,
    board: str | os.PathLike | None = None,
    *,
    crops: Literal[1, 10] = 1,
    batch_size: int = 64,
    parallel: int | None = None,
    image_size: int | None = None,
    partition: int = 0,
    total: int = 1,
    cache_dir: str | os.PathLike[str] | None = None,
    fetch_workers: int = 8,
) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over validation images, counted exactly.

    Every argument, its default and what it does: ``help(alexnet.alexnet_evaluate)``.
    """
    ...


def alexnet_export(
    model: Any,
    path: str | os.PathLike | None = None,
    format: Literal["savedmodel", "tflite"] = "savedmodel",
    *,
    top: int = 5,
    overwrite: bool = False,
    board: str | os.PathLike | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Export ``model`` for serving without this package: a TensorFlow SavedModel, or a TF Lite file.

    Every argument, its default and what it does: ``help(alexnet.alexnet_export)``.
    """
    ...


def alexnet_features(
    model: Any,
    images: Any,
    layer: Literal["flatten", "fc1", "fc2", "logits"] = "fc2",
    *,
    batch_size: int = 32,
    skip_bad: bool = False,
) -> dict[str, Any]:
    """The values of ``layer`` for each image, in the order the images are given: a row of numbers per image.

    Every argument, its default and what it does: ``help(alexnet.alexnet_features)``.
    """
    ...


def alexnet_model(
    board: str | os.PathLike | None = None,
    name: str = "alexnet",
    version: str | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    export: bool = False,
) -> dict[str, Any]:
    """Read model pin ``name`` (its latest version, or ``version``; ``name@version`` reads that version too) from
    ``board`` and bring its file here.

    Every argument, its default and what it does: ``help(alexnet.alexnet_model)``.
    """
    ...


def alexnet_predict(
    model: Any,
    images: Any,
    top: int = 5,
    *,
    batch_size: int = 32,
    skip_bad: bool = False,
) -> list[dict[str, Any]]:
    """The ``top`` most probable classes of each image, in the order the images are given.

    Every argument, its default and what it does: ``help(alexnet.alexnet_predict)``.
    """
    ...


def alexnet_spark_evaluate(
    spark: Any,
    model: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    crops: Literal[1, 10] = 1,
    batch_size: int = 64,
    parallel: int | None = None,
    image_size: int | None = None,
    base_port: int = 8000,
    cache_dir: str | os.PathLike[str] | None = None,
    fetch_workers: int = 8,
    timeout: float | None = None,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    progress: bool = True,
    probe: bool = True,
) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over every validation image of ``board``, split over ``workers``
    Spark barrier tasks; the same result as a one-machine :func:`alexnet.alexnet_evaluate`.

    Every argument, its default and what it does: ``help(alexnet.alexnet_spark_evaluate)``.
    """
    ...


def alexnet_spark_train(
    spark: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    evaluate: bool = False,
    crops: Literal[1, 10] = 1,
    base_port: int = 8000,
    cache_dir: str | os.PathLike[str] | None = None,
    fetch_workers: int = 8,
    timeout: float | None = None,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    progress: bool = True,
    probe: bool = True,
    settings: TrainSettings | None = None,
    callbacks: Sequence[Any] | None = None,
    batch_size: int = 32,
    epochs: int = 2,
    parallel: int | None = None,
    image_size: int | Sequence[int] = 224,
    image_size_epochs: int | Sequence[int] | None = None,
    learning_rate: float = 0.01,
    lr_scaling: Literal["linear", "none"] = "linear",
    lr_schedule: Literal["linear", "cosine", "step", "plateau"] = "linear",
    warmup_epochs: int | None = None,
    momentum: float = 0.9,
    weight_decay: float = 0.0005,
    lr_drop_epochs: int | Sequence[int] | None = (30, 60, 80),
    patience: int = 2,
    label_smoothing: float = 0.1,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    model_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    steps_per_epoch: int | None = None,
    validation: bool = True,
    validation_steps: int | None = None,
    keep_best: bool = False,
    cache: bool = False,
    max_bad_fraction: float = 0.01,
    check_images: bool = True,
    seed: int | None = None,
    verbose: int = 2,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    initial_model: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    train_from: Literal["conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2", "logits"] = "conv1",
    area_range: Sequence[float] = (0.08, 1.0),
    lighting: float = 0.0,
    precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half", "mixed_bfloat16",
        "mixed_float16"] | None = None,
    mixed_precision: bool | None = None,
    jit_compile: bool | None = None,
    collective_timeout: float | None = 1800.0,
    allreduce_precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half"] = "float32",
    allreduce_pack_mb: float = 0.0,
    accumulate_steps: int = 1,
    sync_every: int = 1,
    local_sgd_after: int = 0,
    adapt_communication: bool = False,
    largest_global_batch: int | None = None,
    progress_file: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    log_every: int = 100,
    profile_steps: Sequence[int] | None = None,
    model_pin: str | None = None,
    model_board: str | os.PathLike[str] | None = None,
    model_format: Literal["keras", "keras+savedmodel", "keras+tflite"] = "keras",
) -> SparkRun:
    """Train AlexNet on ``workers`` Spark tasks at once, each on its own partition of ``board``; with
    ``evaluate``, end with the model's evaluation on every validation image of the board, in the same job.

    Every argument, its default and what it does: ``help(alexnet.alexnet_spark_train)``.
    """
    ...


def alexnet_train(
    batch_size: int = 32,
    epochs: int = 2,
    data: Mapping[str, Any] | None = None,
    strategy: str | tf.distribute.Strategy | None = None,
    parallel: int | None = None,
    *,
    image_size: int | Sequence[int] = 224,
    image_size_epochs: int | Sequence[int] | None = None,
    learning_rate: float = 0.01,
    lr_scaling: Literal["linear", "none"] = "linear",
    lr_schedule: Literal["linear", "cosine", "step", "plateau"] = "linear",
    warmup_epochs: int | None = None,
    momentum: float = 0.9,
    weight_decay: float = 0.0005,
    lr_drop_epochs: int | Sequence[int] | None = (30, 60, 80),
    patience: int = 2,
    label_smoothing: float = 0.1,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    model_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    steps_per_epoch: int | None = None,
    validation: bool = True,
    validation_steps: int | None = None,
    keep_best: bool = False,
    cache: bool = False,
    max_bad_fraction: float = 0.01,
    check_images: bool = True,
    seed: int | None = None,
    verbose: int = 1,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    initial_model: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    train_from: Literal["conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2", "logits"] = "conv1",
    area_range: Sequence[float] = (0.08, 1.0),
    lighting: float = 0.0,
    precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half", "mixed_bfloat16",
        "mixed_float16"] | None = None,
    mixed_precision: bool | None = None,
    jit_compile: bool | None = None,
    collective_timeout: float | None = 1800.0,
    allreduce_precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half"] = "float32",
    allreduce_pack_mb: float = 0.0,
    accumulate_steps: int = 1,
    sync_every: int = 1,
    local_sgd_after: int = 0,
    adapt_communication: bool = False,
    largest_global_batch: int | None = None,
    progress_file: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    log_every: int = 100,
    profile_steps: Sequence[int] | None = None,
    model_pin: str | None = None,
    model_board: str | os.PathLike[str] | None = None,
    model_format: Literal["keras", "keras+savedmodel", "keras+tflite"] = "keras",
    callbacks: Sequence[keras.callbacks.Callback] | None = None,
) -> dict[str, Any]:
    """Train AlexNet on ``data`` and return its history.

    Every argument, its default and what it does: ``help(alexnet.alexnet_train)``.
    """
    ...


def imagenet_partition(
    partition: int = 0,
    total: int = 16,
    board: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int = 8,
    verify: bool = False,
    retries: int = 3,
    validation: bool = True,
) -> dict[str, Any]:
    """Fetch partition ``partition`` (0-based) of ``total`` from ``board`` into a local cache.

    Every argument, its default and what it does: ``help(alexnet.imagenet_partition)``.
    """
    ...


def imagenet_synthetic(
    dest: str | os.PathLike[str],
    *,
    classes: int = 10,
    images_per_class: int = 100,
    val_per_class: int = 10,
    seed: int = 0,
    quirks: bool = False,
    max_side: int | None = None,
    layout: Literal["kaggle", "archives", "kaggle_zip", "kaggle_targz", "parquet", "imagefolder", "folders"] = "kaggle",
) -> dict[str, Any]:
    """Write a synthetic ImageNet into ``dest``, in Kaggle's layout or another one people have ImageNet in.

    Every argument, its default and what it does: ``help(alexnet.imagenet_synthetic)``.
    """
    ...


def imagenet_upload(
    source: str | os.PathLike | None = None,
    board: str | os.PathLike | None = None,
    *,
    workers: int = 8,
    min_images: int = 0,
    resize: int | None = None,
    quality: int = 90,
    keep_versions: int | None = None,
    scratch: str | os.PathLike[str] | None = None,
    retries: int = 3,
    val_share: float = 0.0,
    max_pixels: int = 89478485,
    path: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Upload the ImageNet at ``source`` to ``board``, one zip per category, read in place, resumably.

    Every argument, its default and what it does: ``help(alexnet.imagenet_upload)``.
    """
    ...


def imagenet_validation(
    board: str | os.PathLike | None = None,
    partition: int = 0,
    total: int = 1,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int = 8,
    verify: bool = False,
    retries: int = 3,
) -> dict[str, Any]:
    """Fetch the validation images of ``board`` (all of them, or share ``partition`` of ``total``) into a local cache.

    Every argument, its default and what it does: ``help(alexnet.imagenet_validation)``.
    """
    ...
