"""``alexnet_benchmark()``: how fast each stage between the JPEG bytes and the model runs, side by side.

Stages, all on the same images:

- ``decode``: a plain full-size :func:`tf.io.decode_jpeg` of the images' bytes (held in memory), nothing
  else: the reference a pipeline is measured against, per core;
- ``naive``: the input pipeline of the original r-tensorflow/alexnet ``alexnet_train``
  (:func:`alexnet.bench.pipelines.naive_dataset`): file names, read and decode in one sequential map, convert
  to float32, resize to the model's size, random brightness, contrast and saturation (the only map with
  ``num_parallel_calls``), batch; no shuffle, no prefetch;
- ``naive_auto``: the same pipeline with TensorFlow's default graph rewrites left on: recent TensorFlow
  parallelises stateless maps by itself (the ``map_parallelization`` optimisation), which turns the
  sequential decode into a parallel one; ``naive`` switches that rewrite off so that it runs as its code
  reads, ``naive_auto`` shows what the same code gets today;
- ``io``: this package's training pipeline (:func:`alexnet.input.pipeline.train_dataset`) into a consumer that
  does nothing with the batches;
- ``synthetic``: AlexNet training steps on one random batch that stays on the device: the compute bound;
- ``train``: :func:`alexnet.train.api.alexnet_train`, the pipeline feeding the model;
- ``fetch`` (only when asked, with a board): a partition downloaded one category at a time, then with
  parallel downloads;
- ``time_to_accuracy`` (only when asked: it trains for minutes): the paper's recipe and the package's defaults
  trained one after the other on the same images with a validation set, the wall time each takes to reach a
  validation accuracy, and their accuracies after the same epochs (see :mod:`alexnet.bench.accuracy`).

``synthetic``, ``train`` and the defaults recipe of ``time_to_accuracy`` compute in ``precision`` (``None``: the
one measured to train faster here, as ``alexnet_train`` picks it; each record names the precision used).

``decode``, ``naive``, ``naive_auto`` and ``io`` are measured on 1 core, on 2 and on every core given (see
:mod:`alexnet.bench.measure` for how). Peak resident memory is measured per stage (Linux: the peak is reset
before each stage).

With ``resize``, this package's pipeline (``io``, ``train``) reads the images as
``imagenet_upload(resize = ...)`` would store them (pre-resized storage), while ``decode`` and ``naive``
keep reading the original full-size files, as the original pipeline did: the comparison is then between
the two whole designs, storage included.

The result names the bottleneck (the input pipeline on every core, or the model's compute), the number of
cores the pipeline needs to feed the measured ``synthetic`` rate, and the ratios against the targets
(:data:`alexnet.bench.stages.TARGETS`). It is written as JSON and as a PNG chart.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import MIN_IMAGE_SIZE, as_int, as_optional_int, as_parallel, as_seconds, as_strings
from ..errors import AlexnetError
from ..machine import usable_cpus
from ..scratch import make_scratch
from .accuracy import AccuracyPlan, accuracy_data, check_accuracy_plan, time_to_accuracy
from .chart import write_chart
from .images import BenchImages, resolve_images, store_resized
from .measure import peak_rss_mb, pipeline_measurements, reset_peak_rss, run_pinned
from .models import fetch_measurement, synthetic_measurement, train_measurement
from .report import machine_info, summarize
from .stages import DEFAULT_STAGES, IMAGE_STAGES, PIPELINE_STAGES, STAGES, contended

logger = logging.getLogger(__name__)

JSON_FILE = "alexnet-benchmark.json"
PNG_FILE = "alexnet-benchmark.png"


def _stages_arg(stages: Sequence[str] | str | None) -> list[str]:
    if stages is None:
        return list(DEFAULT_STAGES)
    names = [s.strip().lower() for s in (stages.split(",") if isinstance(stages, str) else as_strings(stages))]
    unknown = [s for s in names if s not in STAGES]
    if unknown or not names:
        raise AlexnetError(f"Unknown stage(s) {unknown or names}: use some of {', '.join(STAGES)}.")
    return list(dict.fromkeys(names))  # in the order asked


@dataclass(frozen=True)
class _Plan:
    """The benchmark's arguments, checked."""

    stages: list[str]
    images: int
    batch_size: int
    image_size: int
    cores: int
    cpus: list[int]
    seconds: float
    parallel: int | None
    cache: bool
    resize: int | None
    quality: int
    model_steps: int
    dense_units: int
    isolation: str
    seed: int
    precision: str | None
    accuracy: AccuracyPlan

    def settings(self) -> dict[str, Any]:
        """The settings recorded in the result."""
        return {"stages": self.stages, "images": self.images, "batch_size": self.batch_size,
                "image_size": self.image_size, "cores": self.cores, "core_counts": self.core_counts(),
                "seconds": self.seconds, "parallel": self.parallel, "cache": self.cache, "resize": self.resize,
                "quality": self.quality if self.resize else None, "model_steps": self.model_steps,
                "dense_units": self.dense_units, "isolation": self.isolation, "seed": self.seed,
                "precision": self.precision,
                "time_to_accuracy": self.accuracy.settings() if "time_to_accuracy" in self.stages else None}

    def core_counts(self) -> list[int]:
        """The core counts the pipelines are measured on: 1, 2 and all."""
        return sorted({1, min(2, self.cores), self.cores})


def _isolation(isolation: str | None) -> str:
    pinning = hasattr(os, "sched_setaffinity")
    isolation = isolation if isolation is not None else "process" if pinning else "threads"
    if isolation not in ("process", "threads"):
        raise AlexnetError(f"`isolation` must be \"process\" or \"threads\", not {isolation!r}.")
    if isolation == "process" and not pinning:
        raise AlexnetError("isolation = \"process\" pins CPUs with os.sched_setaffinity, which this system lacks: "
                           "use isolation = \"threads\".")
    return isolation


def _plan(arguments: Mapping[str, Any]) -> _Plan:
    from ..train.settings import specs

    a = arguments
    stages = _stages_arg(a["stages"])
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(usable_cpus()))
    cores = len(available) if a["cores"] is None else as_int(a["cores"], "cores", 1)
    if cores > len(available):
        raise AlexnetError(f"`cores` = {cores} but this process may use only {len(available)} CPU(s): use at most "
                           f"{len(available)}.")
    image_size = as_int(a["image_size"], "image_size", 1)
    if image_size < MIN_IMAGE_SIZE and ({"synthetic", "train"} & set(stages)):
        raise AlexnetError(f"`image_size` = {image_size} is too small for AlexNet: use at least {MIN_IMAGE_SIZE} "
                           "(224 as in the paper), or leave out the synthetic and train stages.")
    if "fetch" in stages and not a["board"]:
        raise AlexnetError("The `fetch` stage needs `board`: the board to fetch a partition from.")
    precision, seed = specs()["precision"].convert(a["precision"], "precision"), as_int(a["seed"], "seed", 0)
    return _Plan(stages, as_int(a["images"], "images", 1), as_int(a["batch_size"], "batch_size", 1), image_size,
                 cores, available, as_seconds(a["seconds"], "seconds", allow_none=False, allow_zero=True) or 0.0,
                 as_parallel(a["parallel"]), bool(a["cache"]),
                 as_optional_int(a["resize"], "resize", 1), as_int(a["quality"], "quality", 1),
                 as_int(a["model_steps"], "model_steps", 1), as_int(a["dense_units"], "dense_units", 1),
                 _isolation(a["isolation"]), seed, precision, check_accuracy_plan(a, precision, seed))


def _pipeline_records(plan: _Plan, bench: BenchImages, originals: list[str]) -> list[dict[str, Any]]:
    """The pipeline stages on every core count, each in a pinned child (or in this process)."""
    stages = [s for s in plan.stages if s in PIPELINE_STAGES]
    measured: list[dict[str, Any]] = []
    for count in plan.core_counts() if stages else []:
        spec = {"stages": stages, "files": bench.files, "original_files": originals, "labels": bench.labels,
                "cores": count, "batch_size": plan.batch_size, "image_size": plan.image_size, "images": plan.images,
                "seconds": plan.seconds, "parallel": plan.parallel, "cache": plan.cache, "seed": plan.seed}
        records = run_pinned(spec, plan.cpus[:count]) if plan.isolation == "process" else pipeline_measurements(spec)
        for record in records:
            if contended(record):
                logger.warning(
                    "%s on %d core(s) got %.0f%% of its CPUs: other work on the machine took the rest, so its "
                    "images/s are low. Run the benchmark again when the machine is idle.",
                    record["stage"], count, 100 * record["cpu_use"])
        measured += records
    return measured


def _model_records(plan: _Plan, bench: BenchImages) -> list[dict[str, Any]]:
    measured = []
    if "synthetic" in plan.stages:
        measured.append(synthetic_measurement(bench.num_classes, plan.batch_size, plan.image_size,
                                              steps=plan.model_steps, seconds=plan.seconds,
                                              dense_units=plan.dense_units, precision=plan.precision,
                                              seed=plan.seed))
    if "train" in plan.stages:
        gc.collect()
        scoped = reset_peak_rss()
        record = train_measurement(bench, plan.batch_size, plan.image_size, steps=plan.model_steps,
                                   parallel=plan.parallel, cache=plan.cache, dense_units=plan.dense_units,
                                   precision=plan.precision, seed=plan.seed)
        record["peak_rss_mb"] = peak_rss_mb()
        record["peak_rss_scope"] = "stage" if scoped else "process"
        measured.append(record)
    return measured


def _write(result: dict[str, Any], output_dir: str | os.PathLike | None) -> dict[str, Any]:
    out = Path(output_dir) if output_dir is not None else Path(tempfile.mkdtemp(prefix="alexnet-benchmark-"))
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / JSON_FILE, out / PNG_FILE
    result["json"], result["png"] = str(json_path), str(png_path)
    json_path.write_text(json.dumps(result, indent=2))
    write_chart(result, png_path)
    return result


def alexnet_benchmark(
    data: Mapping[str, Any] | str | os.PathLike | None = None,
    *,
    stages: Sequence[str] | str | None = None,
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
    board: str | None = None,
    fetch_partition: int = 0,
    fetch_total: int = 1,
    fetch_workers: int = 8,
    isolation: str | None = None,
    output_dir: str | os.PathLike | None = None,
    seed: int = 0,
    precision: str | None = None,
    target_accuracy: float = 0.75,
    max_epochs: int = 8,
    repeats: int = 3,
    accuracy_classes: int = 10,
    accuracy_images_per_class: int = 150,
    accuracy_val_per_class: int = 50,
    accuracy_image_size: int = 176,
    accuracy_batch_size: int = 128,
    accuracy_dense_units: int = 512,
) -> dict[str, Any]:
    """Benchmark the input pipeline against a plain decode, the original pipeline and the model; name the bottleneck.

    ``data`` is a partition (``imagenet_partition()``'s result), an ImageNet folder, or ``None`` for a
    synthetic ImageNet of ``images`` images written to a temporary folder; at most ``images`` of its
    images are used. ``stages`` picks among ``decode``, ``naive``, ``naive_auto``, ``io``, ``synthetic``,
    ``train`` (the default: all six), ``fetch`` (serial against parallel download of partition
    ``fetch_partition`` of ``fetch_total`` from ``board``, with ``fetch_workers`` downloads at once) and
    ``time_to_accuracy`` (below). See the module documentation for what each stage measures.

    ``decode``, ``naive``, ``naive_auto`` and ``io`` are measured on 1 core, 2 cores and ``cores`` (default:
    every CPU this process may use); ``isolation`` is ``"process"`` (a child pinned to those CPUs; the default
    on Linux) or ``"threads"`` (this process, tf.data's thread pool limited instead). ``io`` uses ``parallel``
    decodes (``None``: one per usable CPU, as in training) and, with ``cache``, keeps the compressed bytes in
    memory as the ``decode`` reference does.

    ``resize`` measures pre-resized storage: ``io`` and ``train`` then read copies of the images
    re-encoded as ``imagenet_upload(resize = resize, quality = quality)`` stores them, while ``decode`` and
    the naive pipelines still read the original full-size files (pass a partition of a board uploaded with
    ``resize`` instead to run every stage on the stored bytes).

    Each measurement runs for at least ``images`` images and ``seconds`` seconds after a warm-up (a
    measurement that got less than 90% of its CPUs is listed in ``summary$contended``); ``synthetic``
    and ``train`` run ``model_steps`` steps (``train``: two epochs of them, timed over the second) of
    AlexNet with ``dense_units`` units in its dense layers, on batches of ``batch_size`` images of
    ``image_size`` pixels, computing in ``precision`` (``None``: the hardware's; ``"float32"``, ``"bfloat16"``,
    ``"float16"``: see :mod:`alexnet.train.precision`).

    ``time_to_accuracy`` trains two recipes, each for ``max_epochs`` epochs in full, on the same images from each
    of ``repeats`` seeds (``seed`` and those after it), the recipes alternating: the paper's (float32, every epoch
    at ``accuracy_image_size``, the rate 0.01 divided by 10 on a plateau, hard labels) and the package's defaults
    (``precision``, sizes of about half, three quarters and all of ``accuracy_image_size`` over equal shares of
    the epochs, the rate scaled linearly with the batch and brought down to zero, labels smoothed by 0.1). For
    each recipe it reports the median and range over the seeds of the wall time to ``target_accuracy`` top-1
    validation accuracy, the final and the best accuracy and the largest epoch-to-epoch fall in the second half,
    and each final model scored at its training size and 32 pixels above; the verdict is on the medians (see
    :mod:`alexnet.bench.accuracy`). Its images are ``data``'s
    (with validation images), or a synthetic ImageNet of ``accuracy_classes`` categories of
    ``accuracy_images_per_class`` training and ``accuracy_val_per_class`` validation images; its batches
    are of ``accuracy_batch_size`` images, its dense layers of ``accuracy_dense_units`` units (``batch_size``,
    ``image_size`` and ``dense_units`` keep their meaning for the other stages).

    The defaults of ``time_to_accuracy`` are calibrated for a small CPU (2 cores without bfloat16): one seed of both
    recipes takes about ten minutes there, and the paper's recipe reaches the target near the middle of its epochs.
    ``accuracy_batch_size`` is 128, the batch the paper's rate is for: with ``lr_scaling = "linear"`` the defaults
    then start from the same 0.01 peak, so that the comparison is about precision, image sizes and how the rate ends
    (a smaller batch would also lower the defaults' rate, by ``batch / 128``, and with it their accuracy per epoch:
    what the linear rule is for is larger batches, on clusters). Ten categories put chance at 0.1 and the target of
    0.75 well above it; 1,500 training images make 11 steps an epoch, and the paper's recipe passed the target after
    3 to 5 of its 8 epochs in the calibration runs; 500 validation images measure accuracy to about 2 points. The
    final size of 176 pixels (and dense layers of 512 units) keeps a paper epoch near 35 seconds there, while the
    defaults' smallest size (88) is still above AlexNet's minimum.

    Returns a dict: ``machine``, ``settings``, ``data`` (source, images, compressed bytes), ``stages`` (one record
    per measurement: ``stage``, ``cores``, ``images_per_second``, ``images``, ``seconds``, ``load_average``,
    ``peak_rss_mb``, ...), ``summary`` (``ratios`` against the targets, ``comparisons`` without a target,
    ``bottleneck``, ``cores_to_feed_synthetic``, ``io_peak_rss_mb``, and with ``time_to_accuracy`` its
    ``time_ratio``, ``accuracy_difference`` and ``final_vs_best`` against their targets, each with ``what``,
    ``value``, ``target``, ``bound`` and ``met``), ``time_to_accuracy`` (``None`` unless asked for: ``settings``,
    ``data``, ``recipes`` (``paper`` and ``defaults``, each with what it trained with, ``seconds_to_target``,
    ``final_accuracy``, ``best_accuracy``, ``late_drop``, ... as median, min and max over the seeds, and ``runs``,
    one record per seed with ``val_accuracy`` and ``seconds`` per epoch: see
    :func:`alexnet.bench.accuracy.summarize`), ``time_ratio``, ``accuracy_difference``, ``final_vs_best``,
    ``targets``, ``seconds``), ``json`` and ``png`` (the files written into ``output_dir``, by default a new
    temporary folder).
    """
    plan = _plan(dict(locals()))
    workdir = Path(make_scratch("alexnet-bench-data-"))
    try:
        accuracy = None
        if "time_to_accuracy" in plan.stages:  # its images first: a missing validation set is an error before work
            accuracy = accuracy_data(data, plan.accuracy, workdir)
        if not set(plan.stages) & set(IMAGE_STAGES):  # no images needed: only the board or the recipes
            bench = BenchImages([], [], 0, "none (only " + ", ".join(plan.stages) + ")")
        else:
            bench = resolve_images(data, plan.images, seed=plan.seed, workdir=workdir)
        originals = bench.files
        if plan.resize is not None and bench.files:
            stored = store_resized(bench.files, plan.resize, workdir / "stored", quality=plan.quality)
            bench = BenchImages(stored, bench.labels, bench.num_classes, bench.source, bench.skipped)
        if bench.files:
            logger.info("Benchmarking on %d images (%s), %s", len(bench.files), bench.source, ", ".join(plan.stages))
        measured = _pipeline_records(plan, bench, originals) + _model_records(plan, bench)
        if "fetch" in plan.stages:
            measured += fetch_measurement(str(board), partition=fetch_partition, total=fetch_total,  # _plan checked it
                                          workers=as_int(fetch_workers, "fetch_workers", 2), workdir=workdir)
        reached = None
        if accuracy is not None:
            gc.collect()
            reached = time_to_accuracy(*accuracy, plan.accuracy, parallel=plan.parallel, workdir=workdir / "models")
        resize = plan.resize
        result: dict[str, Any] = {
            "machine": machine_info(),
            "settings": plan.settings(),
            "data": {"source": bench.source, "images": len(bench.files), "skipped": bench.skipped,
                     "num_classes": bench.num_classes, "compressed_bytes": bench.compressed_bytes,
                     "mean_image_bytes": round(bench.compressed_bytes / max(1, len(bench.files))),
                     "io_reads": f"the images re-encoded with short side {resize}" if resize else "the files",
                     "decode_and_naive_read": "the original files" if resize else "the same files as io",
                     "original_bytes": sum(os.path.getsize(f) for f in originals)},
            "stages": measured,
            "time_to_accuracy": reached,
            "summary": summarize(measured, plan.cores, reached),
        }
        return _write(result, output_dir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
