"""The ``bench`` command: the input pipeline, the model and training measured side by side."""

from __future__ import annotations

import argparse
from typing import Any

from . import common
from .common import non_negative, positive, with_default

#: Options passed on to :func:`alexnet.alexnet_benchmark` as they are.
_PASSED = ("stages", "images", "batch_size", "image_size", "cores", "seconds", "parallel", "resize", "quality",
           "model_steps", "dense_units", "board", "fetch_workers", "isolation", "output_dir", "seed", "precision",
           "target_accuracy", "max_epochs", "repeats", "accuracy_classes", "accuracy_images_per_class",
           "accuracy_val_per_class", "accuracy_image_size", "accuracy_batch_size", "accuracy_dense_units")

#: Options of a number: flag, type, help.
_NUMBERS = (("--images", positive, "images used, and timed per measurement"),
            ("--batch-size", positive, "images per batch"),
            ("--image-size", positive, "pixels of the model's square input"),
            ("--seconds", float, "least seconds per measurement"),
            ("--quality", positive, "JPEG quality with --resize"),
            ("--model-steps", positive, "training steps timed"),
            ("--dense-units", positive, "units of the dense layers"),
            ("--fetch-workers", positive, "parallel downloads of the fetch stage"),
            ("--seed", non_negative, "random seed"),
            ("--target-accuracy", float, "time_to_accuracy: top-1 validation accuracy to reach"),
            ("--max-epochs", positive, "time_to_accuracy: epochs each recipe trains"),
            ("--repeats", positive, "time_to_accuracy: seeds each recipe trains from (the verdict is on medians)"),
            ("--accuracy-classes", positive, "time_to_accuracy: categories of its synthetic data"),
            ("--accuracy-images-per-class", positive, "time_to_accuracy: training images per category"),
            ("--accuracy-val-per-class", positive, "time_to_accuracy: validation images per category"),
            ("--accuracy-image-size", positive, "time_to_accuracy: final image size"),
            ("--accuracy-batch-size", positive, "time_to_accuracy: images per batch"),
            ("--accuracy-dense-units", positive, "time_to_accuracy: units of the dense layers"))


def _bench(args: argparse.Namespace) -> None:
    from ..bench.report import benchmark_table

    data: Any = getattr(args, "data", None)
    if data is None and getattr(args, "board", None) is not None:
        data = common.fetch(args)
    chosen = common.given(args, *_PASSED)
    chosen.update({f"fetch_{name}": getattr(args, name) for name in ("partition", "total") if hasattr(args, name)})
    if args.no_cache:
        chosen["cache"] = False
    result = common.core("bench")(data, **chosen)
    common.emit(result, args.json, lambda r: f"{benchmark_table(r)}\n\nWrote {r['json']} and {r['png']}")


def register(add: common.AddCommand) -> None:
    """Add ``bench`` to the parser."""
    bench = add("bench", _bench, "benchmark the input pipeline, the model and training; name the bottleneck",
                "Measure images/s of a plain JPEG decode, the original r-tensorflow/alexnet pipeline and this "
                "package's pipeline (on 1, 2 and all cores), the model on in-memory batches and real training, side "
                "by side on the same images; write JSON and a PNG chart. Images: --data, else a partition of "
                "--board, else a synthetic ImageNet.")
    bench.add_argument("--data", help="ImageNet folder to take the images from (default: a synthetic one)")
    common.partition_options(bench)
    bench.add_argument("--stages", help="comma-separated among decode,naive,naive_auto,io,synthetic,train,fetch,"
                       "time_to_accuracy (default: all but fetch and time_to_accuracy)")
    for flag, kind, text in _NUMBERS:
        bench.add_argument(flag, type=kind, help=with_default("bench", flag[2:].replace("-", "_"), text))
    bench.add_argument("--cores", type=positive, help="most cores measured (default: all)")
    bench.add_argument("--parallel", type=positive, help="parallel decodes (default: one per CPU)")
    bench.add_argument("--no-cache", action="store_true", default=False,
                       help="read the files every pass instead of caching bytes")
    bench.add_argument("--resize", type=positive,
                       help="pipelines read the images re-encoded to this short side (as upload --resize)")
    bench.add_argument("--isolation", choices=["process", "threads"],
                       help="pin a child process per core count (default on Linux) or limit threads in-process")
    bench.add_argument("--precision", choices=["float32", "bfloat16", "float16"],
                       help="what synthetic, train and the time_to_accuracy defaults compute in (default: the one "
                            "measured to train faster here)")
    bench.add_argument("--output-dir", help="where the JSON and PNG go (default: a new temporary folder)")
