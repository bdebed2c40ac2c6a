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

The result names the bottleneck (the input pipeline on every core, or the model's compute on every GPU of the
machine: the ``synthetic`` rate, timed on one device, times their number), the number of cores the pipeline needs
to feed that rate, and the ratios against the targets (:data:`alexnet.bench.stages.TARGETS`). It is written as JSON
and as a PNG chart.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..child import ChildError
from ..declare import declaration
from ..errors import AlexnetError
from ..launch.worker import log_folder
from ..result import returns_result
from ..scratch import make_scratch
from ..storage.mirror import MirroredFolder
from .accuracy import accuracy_data, time_to_accuracy
from .chart import write_chart
from .images import BenchImages, resolve_images, store_resized
from .measure import peak_rss_mb, pipeline_measurements, reset_peak_rss, run_pinned
from .models import fetch_measurement, synthetic_measurement, train_measurement
from .plan import GROUPS, BenchPlan, check_names, check_plan
from .report import machine_info, summarize
from .scaling import measure_scaling
from .stages import IMAGE_STAGES, PIPELINE_STAGES, contended

logger = logging.getLogger(__name__)

JSON_FILE = "alexnet-benchmark.json"
PNG_FILE = "alexnet-benchmark.png"
#: The scaling stage's rows, a JSON line each, written as they are measured: what a stopped run keeps.
ROWS_FILE = "scaling-rows.jsonl"


def _pipeline_records(plan: BenchPlan, bench: BenchImages, originals: list[str]) -> list[dict[str, Any]]:
    """The pipeline stages on every core count, each in a pinned child (or in this process)."""
    common = plan.common
    stages = [s for s in common.stages if s in PIPELINE_STAGES]
    measured: list[dict[str, Any]] = []
    for count in plan.core_counts() if stages else []:
        spec = {"stages": stages, "files": bench.files, "original_files": originals, "labels": bench.labels,
                "cores": count, "batch_size": common.batch_size, "image_size": common.image_size,
                "images": common.images, "seconds": common.seconds, "parallel": common.parallel,
                "cache": common.cache, "seed": common.seed}
        pinned = common.isolation == "process"
        records = run_pinned(spec, plan.cpus[:count]) if pinned else pipeline_measurements(spec)
        for record in records:
            if contended(record):
                logger.warning(
                    "%s on %d core(s) got %.0f%% of its CPUs: other work on the machine took the rest, so its "
                    "images/s are low. Run the benchmark again when the machine is idle.",
                    record["stage"], count, 100 * record["cpu_use"])
        measured += records
    return measured


def _model_records(plan: BenchPlan, bench: BenchImages, workdir: Path) -> list[dict[str, Any]]:
    common = plan.common
    measured = []
    if "synthetic" in common.stages:
        measured.append(synthetic_measurement(bench.num_classes, common.batch_size, common.image_size,
                                              steps=common.model_steps, seconds=common.seconds,
                                              dense_units=common.dense_units, precision=common.precision,
                                              seed=common.seed))
    if "train" in common.stages:
        gc.collect()
        scoped = reset_peak_rss()
        record = train_measurement(bench, common.batch_size, common.image_size, steps=common.model_steps,
                                   parallel=common.parallel, cache=common.cache, dense_units=common.dense_units,
                                   precision=common.precision, seed=common.seed)
        record["peak_rss_mb"] = peak_rss_mb()
        record["peak_rss_scope"] = "stage" if scoped else "process"
        measured.append(record)
    if "fetch" in common.stages:
        fetch = plan.fetch
        measured += fetch_measurement(str(fetch.board), partition=fetch.fetch_partition, total=fetch.fetch_total,
                                      workers=fetch.fetch_workers, workdir=workdir)
    return measured


def _images(plan: BenchPlan, data: Any, workdir: Path) -> tuple[BenchImages, list[str]]:
    """The images the image stages measure (as ``io`` and ``train`` read them: re-encoded with ``resize``), and the
    original files (which ``decode`` and the naive pipelines read)."""
    common = plan.common
    if not set(common.stages) & set(IMAGE_STAGES):  # no images needed: only the board or the recipes
        return BenchImages([], [], 0, "none (only " + ", ".join(common.stages) + ")"), []
    bench = resolve_images(data, common.images, seed=common.seed, workdir=workdir)
    originals = bench.files
    if common.resize is not None and bench.files:
        stored = store_resized(bench.files, common.resize, workdir / "stored", quality=common.quality)
        bench = BenchImages(stored, bench.labels, bench.num_classes, bench.source, bench.skipped)
    if bench.files:
        logger.info("Benchmarking on %d images (%s), %s", len(bench.files), bench.source, ", ".join(common.stages))
    return bench, originals


def _described(plan: BenchPlan, bench: BenchImages, originals: list[str]) -> dict[str, Any]:
    """What the result says of the images measured."""
    resize = plan.common.resize
    return {"source": bench.source, "images": len(bench.files), "skipped": bench.skipped,
            "num_classes": bench.num_classes, "compressed_bytes": bench.compressed_bytes,
            "mean_image_bytes": round(bench.compressed_bytes / max(1, len(bench.files))),
            "io_reads": f"the images re-encoded with short side {resize}" if resize else "the files",
            "decode_and_naive_read": "the original files" if resize else "the same files as io",
            "original_bytes": sum(os.path.getsize(f) for f in originals)}


def _output(output_dir: str | None) -> MirroredFolder:
    """The folder the results are written to: ``output_dir`` (a folder, or a bucket's, written through a local scratch
    folder), or a new temporary folder."""
    return MirroredFolder(output_dir or tempfile.mkdtemp(prefix="alexnet-benchmark-"), "`output_dir`")


class RowLog:
    """The scaling stage's rows written to ``path`` as they come (a JSON line each, with the runs it was measured
    from and what with: :func:`alexnet.bench.scaling.measure_scaling`'s records), so that a run stopped before its
    end keeps what it measured; removed once the whole result is written, which holds them too.

    With ``resume``, the records a stopped run left there are read first (``kept``, for the stage to take again
    where they were measured with the same settings) and stay there, written again without a line cut short by the
    stop, so that a resumed run stopped in turn still holds them; the stage writes only the rows it measures. Without
    it, they are an earlier run's, and left out."""

    def __init__(self, folder: MirroredFolder, resume: bool = False):
        self.folder = folder
        self.path = Path(folder.local) / ROWS_FILE
        if resume:
            folder.fetch(ROWS_FILE)
        self.kept = read_rows(self.path) if resume else []
        self.rows = len(self.kept)  # the rows the file holds
        if resume:
            logger.info("Resuming the scaling stage: %d row(s) of a stopped run in %s, each taken again where it "
                        "was measured with the same settings.", len(self.kept), folder.where(ROWS_FILE))
        self.path.write_text("".join(json.dumps(record) + "\n" for record in self.kept))
        folder.sync()
        logger.info("Each row of the scaling stage is also written to %s as it is measured.",
                    folder.where(ROWS_FILE))

    def __call__(self, record: Mapping[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        self.rows += 1
        self.folder.sync()

    def done(self) -> None:
        self.folder.remove(ROWS_FILE)

    def stopped(self) -> None:
        """The run stopped before its end: the file goes when it holds no row (nothing to resume from)."""
        if not self.rows:
            self.done()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The records of ``path`` (a :class:`RowLog`'s), if it exists: its lines that are whole records, a line cut
    short by the stop or a row written before records kept their runs left out."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("runs"), dict) and "measured_with" in record:
            records.append(record)
    return records


def _write(result: dict[str, Any], out: MirroredFolder) -> dict[str, Any]:
    json_path, png_path = Path(out.local) / JSON_FILE, Path(out.local) / PNG_FILE
    result["json"], result["png"] = out.where(JSON_FILE), out.where(PNG_FILE)
    json_path.write_text(json.dumps(result, indent=2))
    write_chart(result, png_path)
    return result


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler ending the job) raises ``KeyboardInterrupt`` in the block, as Ctrl-C does, so
    that what a stopped benchmark cleans up on its way out is cleaned up then too, where the process ended at once;
    a handler of SIGTERM already in place is left to do what it does, as is a block outside the main thread."""
    previous = signal.getsignal(signal.SIGTERM)
    taken = False
    if previous == signal.SIG_DFL:
        with contextlib.suppress(ValueError):  # not the main thread: Ctrl-C and errors still clean up
            signal.signal(signal.SIGTERM, _stop)
            taken = True
    try:
        yield
    finally:
        if taken:
            signal.signal(signal.SIGTERM, previous)


def run(plan: BenchPlan, data: Mapping[str, Any] | str | os.PathLike | None = None) -> dict[str, Any]:
    """The benchmark of ``plan`` (checked by :func:`alexnet.bench.plan.check_plan`) on ``data``: its result, written.

    A run stopped before its result (an error, Ctrl-C, SIGTERM) leaves no folder it made empty: ``output_dir`` goes
    when the run made it and wrote nothing there (a folder that was there before stays), as does the file of the
    scaling stage's rows when it holds none."""
    with sigterm_stops():
        return _run(plan, data)


def _run(plan: BenchPlan, data: Mapping[str, Any] | str | os.PathLike | None) -> dict[str, Any]:
    common = plan.common
    cores = common.cores
    assert cores is not None  # check_plan gives it: every CPU this process may use when it was not set
    workdir = Path(make_scratch("alexnet-bench-data-"))
    out = _output(common.output_dir)
    written: dict[str, Any] | None = None
    rows: RowLog | None = None
    try:
        accuracy = None
        if "time_to_accuracy" in common.stages:  # its images first: a missing validation set is an error before work
            accuracy = accuracy_data(data, plan.accuracy, common.seed, workdir)
        bench, originals = _images(plan, data, workdir)
        measured = _pipeline_records(plan, bench, originals) + _model_records(plan, bench, workdir)
        reached = None
        if accuracy is not None:
            gc.collect()
            reached = time_to_accuracy(*accuracy, plan.accuracy, seed=common.seed, precision=common.precision,
                                       parallel=common.parallel, workdir=workdir / "models",
                                       cpus=plan.cpus[:common.cores])
        scaled = None
        if "scaling" in common.stages:
            gc.collect()
            if common.output_dir is not None:  # a run stopped before its end keeps the rows it measured there
                rows = RowLog(out, resume=plan.scaling.scaling_resume)
            # the workers' logs outlive the run's scratch folder, so that a failure's "Full log" can be read
            logs = Path(out.local) / "scaling-logs" if common.output_dir is not None else \
                Path(log_folder()) / f"scaling-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
            try:
                scaled = measure_scaling(plan.scaling.plan(common), workdir, plan.cpus[:common.cores], on_row=rows,
                                         kept=rows.kept if rows is not None else (), log_dir=logs)
            except ChildError as error:  # a bucket's log: said where it is uploaded (as it is below, also now)
                raise error.log_at(out.said(error.log)) if error.log else error from None
            if common.output_dir is None:  # kept for a failure only: a run that ended has its results
                shutil.rmtree(logs, ignore_errors=True)
        result: dict[str, Any] = {"machine": machine_info(), "settings": plan.record(),
                                  "data": _described(plan, bench, originals), "stages": measured,
                                  "time_to_accuracy": reached, "scaling": scaled,
                                  "summary": summarize(measured, cores, reached)}
        if scaled is not None:
            result["summary"]["scaling"] = scaled["summary"]["targets"]
        written = _write(result, out)
        if rows is not None:
            rows.done()
        return written
    finally:
        if written is None and rows is not None:
            rows.stopped()
        out.close()  # what it holds uploaded to a bucket, also after a failure (the rows, the workers' logs)
        shutil.rmtree(workdir, ignore_errors=True)
        if common.output_dir is None and written is None:  # a failed run's temporary folder holds no result
            shutil.rmtree(out.local, ignore_errors=True)
        elif written is None:
            out.remove_if_empty()


@returns_result
def alexnet_benchmark(*args: Any, **kwargs: Any) -> dict[str, Any]:
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
    measurement of a second or more that got less than 90% of its CPUs is listed in ``summary$contended``);
    ``synthetic`` and ``train`` run ``model_steps`` steps (``train``: two epochs of them, timed over the second) of
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

    Every setting is checked before any work (:func:`alexnet.bench.plan.check_plan`). Returns a dict: ``machine``,
    ``settings`` (the settings as used, each stage's own under its name), ``data`` (source, images, compressed
    bytes), ``stages`` (one record per measurement: ``stage``, ``cores``, ``images_per_second``, ``images``,
    ``seconds``, ``load_average``, ``peak_rss_mb``, ...), ``summary`` (``ratios`` against the targets,
    ``comparisons`` without a target, ``bottleneck``, ``cores_to_feed_synthetic``, ``model_devices`` and
    ``model_images_per_second`` (the devices the model's rate counts and that rate), ``io_peak_rss_mb``, and with
    ``time_to_accuracy`` its ``time_ratio``, ``accuracy_difference`` and ``final_vs_best`` against their targets,
    each with ``what``, ``value``, ``target``, ``bound`` and ``met``), ``time_to_accuracy`` (``None`` unless asked
    for: ``settings``, ``data``, ``recipes`` (``paper`` and ``defaults``, each with what it trained with,
    ``seconds_to_target``, ``final_accuracy``, ``best_accuracy``, ``late_drop``, ... as median, min and max over
    the seeds, and ``runs``, one record per seed with ``val_accuracy`` and ``seconds`` per epoch: see
    :func:`alexnet.bench.accuracy.summarize`), ``time_ratio``, ``accuracy_difference``, ``final_vs_best``,
    ``targets``, ``seconds``), ``json`` and ``png`` (the files written into ``output_dir``, by default a new
    temporary folder).

    Every setting, with its default (the declaration, :mod:`alexnet.bench.plan`), first those every stage shares:
    """
    try:
        bound = SIGNATURE.bind(*args, **kwargs)
    except TypeError as error:
        check_names([name for name in kwargs if name != "data"], "alexnet_benchmark()")
        raise AlexnetError(f"alexnet_benchmark(): {error}.") from None
    arguments = dict(bound.arguments)
    data = arguments.pop("data", None)
    return run(check_plan(arguments), data)


SIGNATURE = inspect.Signature(
    [inspect.Parameter("data", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                       annotation="Mapping[str, Any] | str | os.PathLike | None"),
     *(parameter for group in GROUPS.values() for parameter in declaration.parameters(group))],
    return_annotation="dict[str, Any]")
alexnet_benchmark.__signature__ = SIGNATURE  # type: ignore[attr-defined]
declaration.record_declared(alexnet_benchmark, *GROUPS.values())
alexnet_benchmark.__doc__ = (alexnet_benchmark.__doc__ or "").rstrip() + "\n\n" + "\n\n".join(
    declaration.help_lines(group, title=f"The {stage} stage's own:" if stage else "") for stage, group in GROUPS.items()
) + "\n"
