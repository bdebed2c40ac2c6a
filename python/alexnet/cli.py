"""The ``alexnet`` command line: each subcommand checks its arguments and makes one call into the core.

An option left out is not passed on, so the core's own default applies; help texts show those defaults,
read from the functions' signatures.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import __version__
from .checks import MIN_IMAGE_SIZE
from .errors import AlexnetError

log = logging.getLogger("alexnet")

BOARD_HELP = (
    "board to use: a folder or file:// URL, gs://bucket/prefix, s3://bucket/prefix or https:// (read-only); "
    "default: $ALEXNET_BOARD, else a folder under the user's cache directory"
)
OUTPUT_HELP = "a folder, file://, gs:// or s3:// location"

#: The public function (a name of ``alexnet.__all__``) behind each command, imported when the command runs.
CORE = {
    "synth": "imagenet_synthetic",
    "upload": "imagenet_upload",
    "categories": "imagenet_categories",
    "fetch": "imagenet_partition",
    "train": "alexnet_train",
    "spark-train": "alexnet_spark_train",
    "bench": "alexnet_benchmark",
    "model": "alexnet_model",
    "evaluate": "alexnet_evaluate",
    "predict": "alexnet_predict",
    "spark-evaluate": "alexnet_spark_evaluate",
}


def _public(command: str) -> Callable[..., Any]:
    import alexnet

    return getattr(alexnet, CORE[command])


def core(command: str) -> Callable[..., Any]:
    """The core function behind ``command``, found through the package's one map of public functions."""
    return _public(command)


def default(command: str, name: str) -> Any:
    """The default of argument ``name`` of the core function behind ``command`` (read from its signature)."""
    return inspect.signature(_public(command)).parameters[name].default


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {value}")
    return number


def _non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {value}")
    return number


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options among ``names`` given on the command line (the others keep the core's defaults)."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def _emit(result: Any, as_json: bool, summary: Callable[[Any], str]) -> None:
    sys.stdout.write((json.dumps(result, indent=2, default=str) if as_json else summary(result)) + "\n")


def _cmd_synth(args: argparse.Namespace) -> None:
    result = core("synth")(args.dest, **_given(args, "classes", "images_per_class", "val_per_class", "seed",
                                                "quirks", "max_side"))
    _emit(result, args.json, lambda r: (
        f"Wrote {r['images']} training and {r['val_images']} validation images of {r['classes']} "
        f"categories ({r['bytes'] / 2**20:.1f} MB) to {r['path']}"
        + (f"\nOdd files: {', '.join(sorted(r['quirks']))}" if r["quirks"] else "")))


def _cmd_upload(args: argparse.Namespace) -> None:
    result = core("upload")(args.path, **_given(args, "board", "workers", "min_images", "resize", "quality",
                                                 "keep_versions"))

    def summary(r: dict[str, Any]) -> str:
        lines = [
            f"Board {r['board']}: {len(r['uploaded'])} categories uploaded, {len(r['skipped'])} already there; "
            f"{r['images']} images, {r['bytes'] / 2**20:.1f} MB in {r['seconds']:.1f} s"
        ]
        if r.get("pruned_versions"):
            lines.append(f"{r['pruned_versions']} old pin version(s) deleted")
        bad = r.get("bad_images") or []
        if bad:
            lines.append(f"{len(bad)} image(s) left out:")
            lines += [f"  {b['category']}/{b['file']}: {b['reason']}" for b in bad]
        return "\n".join(lines)

    _emit(result, args.json, summary)


def _cmd_categories(args: argparse.Namespace) -> None:
    rows = core("categories")(**_given(args, "board"))

    def summary(rs: list[dict[str, Any]]) -> str:
        lines = [f"{'index':>5}  {'id':<10}  {'images':>7}  {'MB':>8}  name"]
        lines += [f"{r['index']:>5}  {r['id']:<10}  {r['images']:>7}  {r['bytes'] / 2**20:>8.1f}  {r['name']}"
                  for r in rs]
        return "\n".join(lines)

    _emit(rows, args.json, summary)


_FETCH_OPTIONS = ("partition", "total", "board", "cache_dir", "workers", "verify")


def _fetch(args: argparse.Namespace) -> dict[str, Any]:
    return core("fetch")(**_given(args, *_FETCH_OPTIONS))


def _cmd_fetch(args: argparse.Namespace) -> None:
    result = _fetch(args)
    _emit(result, args.json, lambda r: (
        f"Partition {r['partition']} of {r['total']}: {len(r['image'])} images of {len(r['categories'])} "
        f"categories ({', '.join(r['categories'])}) in {r.get('cache_dir', '')}"))


_TRAIN_OPTIONS = ("batch_size", "epochs", "strategy", "parallel", "image_size", "image_size_epochs", "learning_rate",
                  "lr_scaling", "warmup_epochs", "precision", "checkpoint_dir", "model_dir", "checkpoint_every",
                  "verbose_fit", "model_pin", "model_board", "log_dir", "log_every", "profile_steps")


def _whole_numbers(minimum: int) -> Callable[[str], list[int]]:
    """The type of an option taking whole numbers >= ``minimum``, each word one (``224``) or several separated by
    commas (``128,160,224``)."""

    def parse(value: str) -> list[int]:
        words = [word.strip() for word in value.split(",")]
        if not all(words):
            raise argparse.ArgumentTypeError(f"must be whole numbers separated by spaces or commas, not {value!r}")
        numbers = []
        for word in words:
            try:
                number = int(word)
            except ValueError:
                number = None
            if number is None or number < minimum:
                raise argparse.ArgumentTypeError(f"must be whole numbers >= {minimum}, not {word!r}")
            numbers.append(number)
        return numbers

    return parse


def _train_args(args: argparse.Namespace) -> dict[str, Any]:
    """The training options given, as ``alexnet_train`` takes them: several sizes as a list, one as a number."""
    given = _given(args, *_TRAIN_OPTIONS, "collective_timeout")
    if "verbose_fit" in given:
        given["verbose"] = given.pop("verbose_fit")
    if "image_size" in given:
        sizes = [size for word in given["image_size"] for size in word]
        given["image_size"] = sizes[0] if len(sizes) == 1 else sizes
    if "image_size_epochs" in given:
        given["image_size_epochs"] = [count for word in given["image_size_epochs"] for count in word]
    if given.get("precision") == "auto":
        del given["precision"]
    return given


def check_schedule(train_args: dict[str, Any]) -> None:
    """The image sizes, epochs, learning-rate scaling and precision checked by the core's rules before any data
    is fetched or job launched (options left out take the defaults of ``alexnet_train``)."""
    from .train.api import check_train_schedule

    check_train_schedule(train_args)


#: The per-epoch settings a history records beside its metrics, shown as the run's schedule.
SCHEDULE = ("image_size", "learning_rate")


def _course(values: Sequence[float]) -> str:
    """``values`` over the epochs, each change shown once (``64 -> 96``); a long course as first, peak and last."""
    runs: list[float] = []
    for value in (float(f"{v:.3g}") for v in values):
        if not runs or runs[-1] != value:
            runs.append(value)
    if len(runs) > 3:
        peak = max(runs)
        runs = [runs[0], *([peak] if peak not in (runs[0], runs[-1]) else []), runs[-1]]
    return " -> ".join(f"{v:g}" for v in runs)


def schedule_line(history: dict[str, Any]) -> str | None:
    """A history's schedule on one line (image sizes, learning rate, precision and why), or ``None``."""
    metrics, params = history.get("metrics", {}), history.get("params", {})
    parts = []
    if metrics.get("image_size"):
        parts.append(f"image size {_course(metrics['image_size'])}")
    if metrics.get("learning_rate"):
        parts.append(f"learning rate {_course(metrics['learning_rate'])}")
    if params.get("precision"):
        reason = params.get("precision_reason")
        parts.append(f"precision {params['precision']}" + (f" ({reason})" if reason else ""))
    return "Schedule: " + ", ".join(parts) if parts else None


def _cmd_train(args: argparse.Namespace) -> None:
    train_args = _train_args(args)
    check_schedule(train_args)
    history = core("train")(data=_fetch(args), **train_args)

    def summary(h: dict[str, Any]) -> str:
        metrics = h["metrics"]
        last = ", ".join(f"{k} = {v[-1]:.4g}" for k, v in metrics.items() if v and k not in SCHEDULE)
        lines = [f"Trained {len(metrics.get('loss', []))} epoch(s): {last}"]
        schedule = schedule_line(h)
        if schedule:
            lines.append(schedule)
        if h.get("model_path"):
            lines.append(f"Model: {h['model_path']}")
        pin = h.get("model_pin")
        if pin:
            lines.append(f"Model pin: {pin['name']} version {pin['version']} on {pin['board']}")
        return "\n".join(lines)

    _emit(history, args.json, summary)


def _cmd_spark_train(args: argparse.Namespace) -> None:
    from pyspark.sql import SparkSession

    from .launch.spark import spark_session

    train_args = _train_args(args)
    check_schedule(train_args)
    session = SparkSession.getActiveSession()
    owned = session is None
    if session is None:
        session = spark_session(args.master or f"local[{args.workers}]", "alexnet spark-train")
    try:
        rows = core("spark-train")(session, args.workers, **_given(args, "board", "base_port", "cache_dir",
                                                                     "timeout", "retries"), **train_args)
    finally:
        if owned:
            session.stop()

    def summary(rs: list[dict[str, Any]]) -> str:
        lines = []
        for r in rs:
            loss = r["history"]["metrics"].get("loss") or [float("nan")]
            lines.append(
                f"worker {r['worker']} ({r['tf_address']}{', chief' if r['chief'] else ''}): "
                f"{r['train_images']} images of {len(r['categories'])} categories, {len(loss)} epoch(s), "
                f"loss {loss[0]:.4g} -> {loss[-1]:.4g}, weights {r['history'].get('weights_sha256', '')[:12]}")
        return "\n".join(lines)

    _emit(rows, args.json, summary)


def _cmd_bench(args: argparse.Namespace) -> None:
    from .bench.report import benchmark_table

    data: Any = getattr(args, "data", None)
    if data is None and getattr(args, "board", None) is not None:
        data = _fetch(args)
    given = _given(args, "stages", "images", "batch_size", "image_size", "cores", "seconds", "parallel", "resize",
                   "quality", "model_steps", "dense_units", "board", "fetch_workers", "isolation", "output_dir",
                   "seed", "precision", "target_accuracy", "max_epochs", "accuracy_classes",
                   "accuracy_images_per_class", "accuracy_val_per_class", "accuracy_image_size",
                   "accuracy_batch_size", "accuracy_dense_units")
    given.update({f"fetch_{name}": getattr(args, name) for name in ("partition", "total") if hasattr(args, name)})
    if args.no_cache:
        given["cache"] = False
    result = core("bench")(data, **given)
    _emit(result, args.json, lambda r: f"{benchmark_table(r)}\n\nWrote {r['json']} and {r['png']}")


def _model(args: argparse.Namespace, option: str = "model") -> Any:
    """The model a command names: the location given, or the model pin ``--model-pin`` read from ``--board``."""
    location = getattr(args, option, None)
    pin = getattr(args, "model_pin", None)
    if (location is None) == (pin is None):
        flag = "MODEL" if option == "model" and args.command == "evaluate" else "--model MODEL"
        raise AlexnetError(f"give the model either as {flag} (a model_dir or alexnet.keras location) or as "
                           "--model-pin NAME (a model pin on --board), not both or neither.")
    if location is not None:
        return location
    return core("model")(getattr(args, "board", None), pin, getattr(args, "pin_version", None))


def _board(args: argparse.Namespace) -> str:
    """``--board``, else the default board (evaluation always reads a board)."""
    from .storage.board import default_board

    return getattr(args, "board", None) or default_board()


def _evaluation_summary(r: dict[str, Any]) -> str:
    lines = [
        f"{r['model']}, {r['protocol']}, {r['image_size']} pixels: top-1 {r['top1_accuracy']:.2%} "
        f"({r['top1_correct']}/{r['images']}), top-{r['top_k']} {r['top5_accuracy']:.2%} "
        f"({r['top5_correct']}/{r['images']}); {r['images_per_second']:.1f} images/s"
    ]
    for w in r.get("per_worker") or []:
        lines.append(f"  worker {w['worker']}: {w['images']} images, top-1 {w['top1_correct']}, "
                     f"top-{r['top_k']} {w['top5_correct']}, {w['seconds']:.1f} s")
    bad = r.get("bad_images") or []
    if bad:
        lines.append(f"{len(bad)} unusable image(s) left out:")
        lines += [f"  {b}" for b in bad]
    return "\n".join(lines)


def _cmd_evaluate(args: argparse.Namespace) -> None:
    result = core("evaluate")(_model(args), board=_board(args),
                              **_given(args, "crops", "batch_size", "parallel", "partition", "total", "cache_dir",
                                       "fetch_workers"))
    _emit(result, args.json, _evaluation_summary)


def _cmd_predict(args: argparse.Namespace) -> None:
    records = core("predict")(_model(args), args.images, **_given(args, "top", "batch_size"))

    def summary(rs: list[dict[str, Any]]) -> str:
        lines = [f"{'rank':>4}  {'probability':>11}  {'id':<10}  name"]
        image = None
        for r in rs:
            if r["image"] != image:
                image = r["image"]
                lines.append(str(image))
            lines.append(f"{r['rank']:>4}  {r['probability']:>11.4f}  {r['id']:<10}  {r['name']}")
        return "\n".join(lines)

    _emit(records, args.json, summary)


def _cmd_spark_evaluate(args: argparse.Namespace) -> None:
    from pyspark.sql import SparkSession

    from .launch.spark import spark_session

    model = _model(args)
    session = SparkSession.getActiveSession()
    owned = session is None
    if session is None:
        session = spark_session(args.master or f"local[{args.workers}]", "alexnet spark-evaluate")
    try:
        result = core("spark-evaluate")(session, model, args.workers, _board(args),
                                        **_given(args, "crops", "batch_size", "cache_dir", "fetch_workers", "timeout"))
    finally:
        if owned:
            session.stop()
    _emit(result, args.json, _evaluation_summary)


def _model_options(p: argparse.ArgumentParser, command: str, positional: bool) -> None:
    if positional:
        p.add_argument("model", nargs="?", help="a model_dir or alexnet.keras: a folder, file://, gs:// or s3:// "
                       "location (or give --model-pin)")
    else:
        p.add_argument("--model", help="a model_dir or alexnet.keras: a folder, file://, gs:// or s3:// location")
    p.add_argument("--model-pin", help="the name of a model pin on --board (instead of a model location)")
    p.add_argument("--pin-version", help="the version of --model-pin (default: its latest)")
    p.add_argument("--board", help=BOARD_HELP)
    p.add_argument("--batch-size", type=_positive, help=_with_default(command, "batch_size", "images scored at once"))


def _evaluate_options(p: argparse.ArgumentParser, command: str) -> None:
    p.add_argument("--crops", type=int, choices=[1, 10],
                   help=_with_default(command, "crops", "1: the centre crop; 10: corners, centre and their mirrors"))
    p.add_argument("--cache-dir", help="where validation images are extracted (default: under the user cache "
                   "directory)")
    p.add_argument("--fetch-workers", type=_positive, help=_with_default(command, "fetch_workers",
                                                                          "parallel downloads"))


def _with_default(command: str, name: str, text: str) -> str:
    value = default(command, name)
    return f"{text} (default: {value})" if value is not None and value is not inspect.Parameter.empty else text


def _partition_options(p: argparse.ArgumentParser, command: str = "fetch") -> None:
    p.add_argument("--partition", type=_non_negative, help=_with_default("fetch", "partition", "0-based partition"))
    p.add_argument("--total", type=_positive, help=_with_default("fetch", "total", "number of partitions"))
    p.add_argument("--board", help=BOARD_HELP)
    p.add_argument("--cache-dir", help="where zips are extracted (default: under the user cache directory)")
    p.add_argument("--workers", type=_positive, help=_with_default("fetch", "workers", "parallel downloads"))
    p.add_argument("--verify", action="store_true",
                   help="check every cached file's CRC-32 and fetch damaged categories again")


def _train_options(p: argparse.ArgumentParser, command: str) -> None:
    for flag, kind, text in (("--epochs", _positive, "epochs"),
                             ("--batch-size", _positive, "images per replica in a step"),
                             ("--parallel", _positive, "parallel decodes (default: autotune)"),
                             ("--checkpoint-every", _positive, "also checkpoint every this many steps")):
        name = flag[2:].replace("-", "_")
        p.add_argument(flag, type=kind, help=_with_default("train", name, text))
    p.add_argument("--image-size", type=_whole_numbers(MIN_IMAGE_SIZE), nargs="+", metavar="SIZE",
                   help=_with_default("train", "image_size", "pixels of the model's square input; several sizes "
                                      "(128 160 224, or 128,160,224) are trained in order, the last one validated "
                                      "and saved"))
    p.add_argument("--image-size-epochs", type=_whole_numbers(1), nargs="+", metavar="N",
                   help="epochs at each --image-size, adding up to --epochs (default: split evenly, later sizes "
                        "taking the rest)")
    p.add_argument("--learning-rate", type=float, metavar="RATE",
                   help=_with_default("train", "learning_rate", "the rate for a global batch of 128"))
    p.add_argument("--lr-scaling", choices=["linear", "none"],
                   help=_with_default("train", "lr_scaling", "linear: the rate times global batch / 128, reached "
                                      "by a warm-up; none: the rate as given"))
    p.add_argument("--warmup-epochs", type=_non_negative, metavar="N",
                   help="epochs of linear warm-up to the scaled rate (default: 5 when the rate grows more than "
                        "twice, else 0)")
    p.add_argument("--precision", choices=["auto", "float32", "bfloat16", "float16"],
                   help="what the layers compute in; bfloat16 and float16 are mixed precision (default: auto, the "
                        "hardware's: bfloat16 on CPUs with avx512_bf16 or amx_bf16 and GPUs of compute capability "
                        "8.0+, float16 on older GPUs, else float32)")
    p.add_argument("--checkpoint-dir", help=f"checkpoints, to resume after an interruption: {OUTPUT_HELP}")
    p.add_argument("--model-dir", help=f"where the trained model is saved: {OUTPUT_HELP}")
    p.add_argument("--model-pin", metavar="NAME",
                   help="after training, publish the model (without optimizer state) as a new version of this pin")
    p.add_argument("--model-board", metavar="B", help="board of --model-pin (default: the data's board)")
    p.add_argument("--log-dir", metavar="D",
                   help=f"TensorBoard logs, watched with tensorboard --logdir D: {OUTPUT_HELP}")
    p.add_argument("--log-every", type=_positive, metavar="N",
                   help=_with_default("train", "log_every", "write step scalars to --log-dir every N steps"))
    p.add_argument("--profile-steps", type=_positive, nargs=2, metavar=("FIRST", "LAST"),
                   help="profile these training steps (counted from 1) into --log-dir")
    p.add_argument("--verbose-fit", type=int, choices=[0, 1, 2],
                   help=_with_default("train", "verbose", "Keras fit verbosity"))
    if command == "train":
        p.add_argument("--strategy", choices=["default", "mirrored", "multi_worker"])


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, run: Callable[[argparse.Namespace], None], help_text: str, description: str = ""
            ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=description or help_text,
                                  argument_default=argparse.SUPPRESS)
        sub.set_defaults(run=run)
        sub.add_argument("--json", action="store_true", default=False, help="print the result as JSON")
        return sub

    return {
        "synth": add("synth", _cmd_synth, "write a synthetic ImageNet (Kaggle layout)",
                     "Write a synthetic ImageNet in Kaggle's layout, deterministic for a seed."),
        "upload": add("upload", _cmd_upload, "upload ImageNet to a board, one zip per category",
                      "Upload an ImageNet tree to a board: one pin per category, validation pins, categories last."),
        "categories": add("categories", _cmd_categories, "list the categories on a board"),
        "fetch": add("fetch", _cmd_fetch, "fetch one partition of the categories into the local cache"),
        "train": add("train", _cmd_train, "fetch a partition and train AlexNet on it"),
        "spark-train": add("spark-train", _cmd_spark_train, "train on several workers at once, one Spark barrier "
                           "task each", "Train AlexNet with MultiWorkerMirroredStrategy on WORKERS Spark barrier "
                           "tasks, each on its own partition of the board; prints one row per worker."),
        "evaluate": add("evaluate", _cmd_evaluate, "top-1 and top-5 accuracy of a model on a board's validation "
                        "images", "Evaluate a model (MODEL, or --model-pin NAME) on the validation images of --board, "
                        "or on share --partition of --total of them, with 1 or 10 crops."),
        "predict": add("predict", _cmd_predict, "the most probable classes of images",
                       "Print the --top most probable classes (WordNet id, name, probability) of each IMAGE."),
        "spark-evaluate": add("spark-evaluate", _cmd_spark_evaluate, "evaluate on several workers at once, one "
                              "Spark barrier task each", "Evaluate a model on every validation image of --board, "
                              "split over WORKERS Spark barrier tasks; the counts add up to a one-machine "
                              "evaluation."),
        "bench": add("bench", _cmd_bench, "benchmark the input pipeline, the model and training; name the bottleneck",
                     "Measure images/s of a plain JPEG decode, the original r-tensorflow/alexnet pipeline and this "
                     "package's pipeline (on 1, 2 and all cores), the model on in-memory batches and real training, "
                     "side by side on the same images; write JSON and a PNG chart. Images: --data, else a partition "
                     "of --board, else a synthetic ImageNet."),
    }


def build_parser() -> argparse.ArgumentParser:
    """The ``alexnet`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="alexnet",
        description="Train AlexNet on ImageNet from a bucket: upload one zip per category to a board, fetch a "
                    "worker's balanced share, train with TensorFlow.",
        epilog="Run 'alexnet COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"alexnet {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more: -v adds the libraries' INFO lines (pins, gcsfs, ...) and alexnet's debugging "
                             "detail, -vv everyone's debugging detail")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    subs = _subparsers(parser)

    synth = subs["synth"]
    synth.add_argument("dest", help="folder to write into")
    synth.add_argument("--classes", type=_positive, help=_with_default("synth", "classes", "categories"))
    synth.add_argument("--images-per-class", type=_positive,
                       help=_with_default("synth", "images_per_class", "training images per category"))
    synth.add_argument("--val-per-class", type=_non_negative,
                       help=_with_default("synth", "val_per_class", "validation images per category"))
    synth.add_argument("--seed", type=_non_negative, help=_with_default("synth", "seed", "random seed"))
    synth.add_argument("--quirks", action="store_true", help="add CMYK, grayscale, PNG, truncated and empty files")
    synth.add_argument("--max-side", type=_positive, help="longest image side in pixels (default: ImageNet's)")

    upload = subs["upload"]
    upload.add_argument("path", help="ImageNet folder (Kaggle layout or <wnid>/ folders)")
    upload.add_argument("--board", help=BOARD_HELP)
    upload.add_argument("--workers", type=_positive, help=_with_default("upload", "workers", "categories at once"))
    upload.add_argument("--min-images", type=_non_negative,
                        help=_with_default("upload", "min_images", "leave out smaller categories"))
    upload.add_argument("--resize", type=_positive, help="re-encode to this short side (default: keep the bytes)")
    upload.add_argument("--quality", type=_positive, help=_with_default("upload", "quality", "JPEG quality"))
    upload.add_argument("--keep-versions", type=_positive,
                        help="afterwards keep only this many versions of each pin (default: all)")

    subs["categories"].add_argument("--board", help=BOARD_HELP)
    _partition_options(subs["fetch"])
    _partition_options(subs["train"])
    _train_options(subs["train"], "train")
    _spark_options(subs["spark-train"])
    evaluate = subs["evaluate"]
    _model_options(evaluate, "evaluate", positional=True)
    _evaluate_options(evaluate, "evaluate")
    evaluate.add_argument("--parallel", type=_positive, help="parallel decodes (default: autotune)")
    evaluate.add_argument("--partition", type=_non_negative, help=_with_default("evaluate", "partition",
                                                                                "0-based share of the images"))
    evaluate.add_argument("--total", type=_positive, help=_with_default("evaluate", "total", "number of shares"))
    predict = subs["predict"]
    predict.add_argument("images", nargs="+", metavar="IMAGE",
                         help="image files or locations (file://, gs://, s3://, https://)")
    _model_options(predict, "predict", positional=False)
    predict.add_argument("--top", type=_positive, help=_with_default("predict", "top", "classes shown per image"))
    spark_evaluate = subs["spark-evaluate"]
    spark_evaluate.add_argument("--workers", type=_positive, required=True, help="workers (barrier tasks)")
    spark_evaluate.add_argument("--master", default=None, help="Spark master (default: local[WORKERS])")
    _model_options(spark_evaluate, "spark-evaluate", positional=False)
    _evaluate_options(spark_evaluate, "spark-evaluate")
    spark_evaluate.add_argument("--timeout", type=float, help="cancel the whole job after these seconds")
    _bench_options(subs["bench"])
    return parser


def _spark_options(spark: argparse.ArgumentParser) -> None:
    spark.add_argument("--workers", type=_positive, required=True, help="workers (barrier tasks)")
    spark.add_argument("--master", default=None, help="Spark master (default: local[WORKERS])")
    spark.add_argument("--board", help=BOARD_HELP)
    spark.add_argument("--cache-dir", help="where each worker extracts its partition (default: user cache)")
    _train_options(spark, "spark-train")
    spark.add_argument("--base-port", type=_positive,
                       help=_with_default("spark-train", "base_port", "worker k listens on this + k"))
    spark.add_argument("--collective-timeout", type=float,
                       help=_with_default("train", "collective_timeout", "seconds a worker waits for the others"))
    spark.add_argument("--timeout", type=float, help="cancel the whole job after these seconds")
    spark.add_argument("--retries", type=_non_negative,
                       help=_with_default("spark-train", "retries", "relaunches after a failure, resuming from the "
                                          "last checkpoint"))


def _bench_options(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--data", help="ImageNet folder to take the images from (default: a synthetic one)")
    _partition_options(bench)
    bench.add_argument("--stages", help="comma-separated among decode,naive,naive_auto,io,synthetic,train,fetch,"
                       "time_to_accuracy (default: all but fetch and time_to_accuracy)")
    for flag, kind, text in (("--images", _positive, "images used, and timed per measurement"),
                             ("--batch-size", _positive, "images per batch"),
                             ("--image-size", _positive, "pixels of the model's square input"),
                             ("--seconds", float, "least seconds per measurement"),
                             ("--quality", _positive, "JPEG quality with --resize"),
                             ("--model-steps", _positive, "training steps timed"),
                             ("--dense-units", _positive, "units of the dense layers"),
                             ("--fetch-workers", _positive, "parallel downloads of the fetch stage"),
                             ("--seed", _non_negative, "random seed"),
                             ("--target-accuracy", float, "time_to_accuracy: top-1 validation accuracy to reach"),
                             ("--max-epochs", _positive, "time_to_accuracy: epochs each recipe trains"),
                             ("--accuracy-classes", _positive, "time_to_accuracy: categories of its synthetic data"),
                             ("--accuracy-images-per-class", _positive,
                              "time_to_accuracy: training images per category"),
                             ("--accuracy-val-per-class", _positive,
                              "time_to_accuracy: validation images per category"),
                             ("--accuracy-image-size", _positive, "time_to_accuracy: final image size"),
                             ("--accuracy-batch-size", _positive, "time_to_accuracy: images per batch"),
                             ("--accuracy-dense-units", _positive, "time_to_accuracy: units of the dense layers")):
        bench.add_argument(flag, type=kind, help=_with_default("bench", flag[2:].replace("-", "_"), text))
    bench.add_argument("--cores", type=_positive, help="most cores measured (default: all)")
    bench.add_argument("--parallel", type=_positive, help="parallel decodes (default: autotune)")
    bench.add_argument("--no-cache", action="store_true", default=False,
                       help="read the files every pass instead of caching bytes")
    bench.add_argument("--resize", type=_positive,
                       help="pipelines read the images re-encoded to this short side (as upload --resize)")
    bench.add_argument("--isolation", choices=["process", "threads"],
                       help="pin a child process per core count (default on Linux) or limit threads in-process")
    bench.add_argument("--precision", choices=["float32", "bfloat16", "float16"],
                       help="what synthetic, train and the time_to_accuracy defaults compute in (default: what the "
                            "hardware has)")
    bench.add_argument("--output-dir", help="where the JSON and PNG go (default: a new temporary folder)")


def configure_logging(verbose: int = 0, quiet: bool = False) -> None:
    """Log alexnet's INFO lines and other libraries' warnings only (pins logs a line per pin written); ``verbose``
    1 adds the libraries' INFO lines and alexnet's DEBUG ones, 2 and more every library's DEBUG lines; ``quiet``
    leaves warnings and errors only."""
    others = logging.WARNING if quiet or verbose < 1 else logging.INFO if verbose == 1 else logging.DEBUG
    own = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=others, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(others)
    log.setLevel(own)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``alexnet`` command line; the exit code (2 after an error the user can fix)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet)
    try:
        args.run(args)
    except AlexnetError as error:
        sys.stderr.write(f"alexnet {args.command}: error: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
