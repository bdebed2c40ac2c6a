"""The benchmark run (``alexnet_benchmark()``, :mod:`.api`): how fast each stage between the JPEG bytes and the model
runs, side by side.

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
from ..launch.worker import log_folder
from ..scratch import make_scratch, outer_temporary_folder
from ..storage.mirror import MirroredFolder
from .accuracy import accuracy_data, time_to_accuracy
from .chart import write_chart
from .images import BenchImages, resolve_images, store_resized
from .measure import peak_rss_mb, pipeline_measurements, reset_peak_rss, run_pinned
from .models import fetch_measurement, synthetic_measurement, train_measurement
from .plan import BenchPlan
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
    outside = outer_temporary_folder()  # the results outlive the command that writes them
    return MirroredFolder(output_dir or tempfile.mkdtemp(prefix="alexnet-benchmark-", dir=outside), "`output_dir`")


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
