"""Commands of a trained model: ``evaluate``, ``predict``, ``features``, ``filters`` and ``export`` (and the options
naming a model, which the cluster's ``spark-evaluate`` shares)."""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
from typing import Any

from ..checks import count_text
from ..declare import declaration
from ..errors import AlexnetError
from ..model.options import BoardImagesOptions, ExportOptions, FeaturesOptions, ModelPinOptions, PredictOptions
from . import common
from .common import BOARD_HELP, given, size_text

#: How many of the lowest classes, and of the most frequent confusions, an evaluation's summary names.
SHOWN_CLASSES = 3

#: The k of top-k when an evaluation does not say it (R's print says 5 too).
TOP_K = 5


def model_pin_dest(name: str) -> str:
    """Where the parsed value of the option ``name`` of the model pin read (:class:`ModelPinOptions`) is kept."""
    return f"model_pin_{name}"


def model_of(args: argparse.Namespace) -> Any:
    """The model a command names: the location given, or else the model pin read from ``--board`` as
    :func:`alexnet.alexnet_model` reads it (``--model-pin``, default ``alexnet``, and the other options of
    :class:`ModelPinOptions` given)."""
    location = getattr(args, "model", None)
    spelled = getattr(args, "model_option", None)
    if location is not None and spelled is not None and spelled != location:
        raise AlexnetError(f"give the model once, as MODEL or as --model, not both ({location!r}, {spelled!r}).")
    location = spelled if location is None else location
    pin = common.declared_args(args, declaration.specs(ModelPinOptions), model_pin_dest)
    flag = "MODEL" if args.command in ("evaluate", "export", "filters") else "--model MODEL"
    if location is not None and pin:
        raise AlexnetError(f"give the model either as {flag} (a model_dir or alexnet.keras location) or as a model "
                           f"pin on --board ({', '.join(map(option_of, pin))}), not both.")
    if location is not None and getattr(args, "model_board", None):
        raise AlexnetError(f"--model-board is the board of a model pin: give it with --model-pin, not with {flag}.")
    if location is not None:
        return location
    board = getattr(args, "model_board", None) or getattr(args, "board", None)
    try:
        with common.reading_as(getattr(args, common.PIN_OPTION_NAMES, None) or {}):
            return common.core("model")(board, **pin)
    except AlexnetError as err:
        if {"name", "version"} & set(pin):  # a pin was meant: what is wrong with it is the whole answer
            raise
        default = declaration.specs(ModelPinOptions)["name"].default
        raise AlexnetError(f"give the model as {flag} (a model_dir or alexnet.keras location) or as --model-pin NAME "
                           f"(a model pin on --board): without either, the model pin {default!r} was read, and {err}"
                           ) from None


def _no_model_among_images(args: argparse.Namespace) -> None:
    """Refuse a model given first among the images of ``predict`` or ``features`` (``predict M img.jpg``, as
    ``evaluate M`` takes it), when the command names no model otherwise: it was read as an image, and the model pin
    ``alexnet`` sought on the default board."""
    from ..model.saved import MODEL_FILE

    if getattr(args, "model_option", None) is not None or getattr(args, "model", None) is not None or \
            common.declared_args(args, declaration.specs(ModelPinOptions), model_pin_dest):
        return
    first = str(args.images[0])
    if first.endswith(".keras") or os.path.isfile(os.path.join(first, MODEL_FILE)):
        raise AlexnetError(f"{first} is a model, given where the images go: give it as --model {first} (the images "
                           f"follow: alexnet {args.command} --model {first} IMAGE ...).")


def option_of(name: str) -> str:
    """The command line's option of setting ``name`` of the model pin read."""
    from ..declare.kinds import option_name

    return str(option_name(name, declaration.specs(ModelPinOptions)[name]))


def first_name(name: str) -> str:
    """The first of a class's synonyms (``tench`` of ``tench, Tinca tinca``)."""
    return name.split(",")[0]


def percent_text(value: float | None) -> str:
    """An accuracy as R's print of an evaluation writes it: ``61.2%``, ``n/a`` when there is none."""
    if value is None:
        return "n/a"
    return "NaN%" if math.isnan(value) else f"{100 * value:.1f}%"


def evaluation_summary(r: dict[str, Any]) -> str:
    """The lines printed for an evaluation, one machine's or a cluster's: those of R's print of it
    (``print.alexnet_evaluation``), then the bad images left out, listed (R has them in ``$bad_images``). A Spark
    evaluation's (with the launch that succeeded, ``attempt``) first names the model it scored; a cluster's rate is
    the workers' own, over the slowest worker's seconds."""
    top_k = r.get("top_k") or TOP_K
    shown = r.get("num_classes") is None or r["num_classes"] > top_k  # top-k of k classes or fewer is always 100%
    workers = r.get("per_worker") or []
    lines: list[str] = []
    if r.get("attempt") is not None:  # as spark-train says its evaluation, and its attempt
        model = f" ({r['model']})" if r.get("model") else ""
        lines.append(f"Evaluation of the model on every validation image of the board{model}, on "
                     f"{count_text(len(workers), 'Spark worker')} (attempt {r['attempt']}):")
    lines.append(f"Top-1 accuracy {percent_text(r.get('top1_accuracy'))} ({r['top1_correct']:,} of "
                 f"{count_text(r['images'], 'image')})"
                 + (f", top-{top_k} {percent_text(r.get('top5_accuracy'))} ({r['top5_correct']:,})" if shown else ""))
    rate = r.get("images_per_second")
    slowest = max((float(w["seconds"]) for w in workers), default=None)
    over = "" if slowest is None else f" over the slowest worker's {slowest:.1f} s"
    bad = r.get("bad_images") or []
    details = [
        r.get("protocol") or (count_text(r["crops"], "crop") if r.get("crops") is not None else None),
        f"{r['image_size']} pixels" if r.get("image_size") is not None else None,
        count_text(r["num_classes"], "class", "classes") if r.get("num_classes") is not None else None,
        f"{rate:.1f} images/s{over}" if isinstance(rate, (int, float)) and math.isfinite(rate) else None,
        count_text(len(workers), "worker") if workers else None,
        f"{count_text(len(bad), 'bad image')} left out" if bad else None,
        f"{count_text(r['left_out_at_upload'], 'validation image')} left out at upload"
        if r.get("left_out_at_upload") else None,
    ]
    if any(details):
        lines.append("; ".join(d for d in details if d))
    classes = r.get("per_class") or []
    # of the classes below 100% only: one all right is not among the lowest, however few the classes
    missed = [c for c in classes if c["top1_accuracy"] < 1] if len(classes) > 1 else []
    lowest = sorted(missed, key=lambda c: (c["top1_accuracy"], c["index"]))[:SHOWN_CLASSES]
    if lowest:
        lines.append("Lowest top-1: " + ", ".join(f"{first_name(c['name'])} {percent_text(c['top1_accuracy'])} "
                                                  f"({c['top1_correct']} of {c['images']})" for c in lowest))
    confusions = (r.get("confusions") or [])[:SHOWN_CLASSES]  # also of one class: taken for classes not scored
    if confusions:
        lines.append("Most confused: " + ", ".join(
            f"{first_name(c['name'])} taken for {first_name(c['predicted_name'])} ({count_text(c['images'], 'image')})"
            for c in confusions))
    if bad:  # said by the details above; listed here, where R has them in `$bad_images`
        lines += ["Bad images left out:", *(f"  {b}" for b in bad)]
    return "\n".join(lines)


def model_options(p: argparse.ArgumentParser, positional: bool, pin_board: bool = False) -> None:
    """The options naming a model (a location, or a pin on a board); with ``pin_board``, the pin's board apart from
    ``--board`` (the validation images' of an evaluation)."""
    where = "a model_dir or alexnet.keras: a folder, file://, gs:// or s3:// location"
    if positional:  # the model first, as `--model` too (the spelling of the commands that take images)
        p.add_argument("model", nargs="?", help=f"{where} (unset: --model, else the model pin --model-pin on --board)")
        p.add_argument("--model", dest="model_option", metavar="MODEL", help="the same as MODEL")
    else:
        p.add_argument("--model", help=f"{where} (unset: the model pin --model-pin on --board)")
    # the model pin read instead (its name, version and where it is brought), from the declaration
    common.declared_options(p, declaration.specs(ModelPinOptions), model_pin_dest, names=common.PIN_OPTION_NAMES)
    common.core_option(p, "board", "--board", help=BOARD_HELP)
    if pin_board:
        p.add_argument("--model-board", metavar="BOARD", help="the board of --model-pin, when another than the "
                       "validation images' (unset: --board)")


def evaluation_dest(name: str) -> str:
    """Where the parsed value of evaluation option ``name`` is kept."""
    return f"evaluation_{name}"


def evaluation_options(p: argparse.ArgumentParser) -> None:
    """An option for every option of an evaluation (its declaration, :mod:`alexnet.model.options`)."""
    from ..model.options import specs

    common.declared_options(p, specs(), evaluation_dest)


def evaluation_args(args: argparse.Namespace) -> dict[str, Any]:
    """The options of an evaluation given on the command line, by name (those left out keep their defaults)."""
    from ..model.options import specs

    return common.declared_args(args, specs(), evaluation_dest)


def _evaluate(args: argparse.Namespace) -> None:
    options = {**evaluation_args(args), **common.options_given(args, BoardImagesOptions)}  # before a pin is read
    result = common.core("evaluate")(model_of(args), board=common.default_board(args), **options)
    common.emit(result, args.json, evaluation_summary)


def predict_summary(records: list[dict[str, Any]]) -> str:
    """The lines printed for predictions: each image given, by name, then its classes by rank (an image given twice
    is said twice: its ranks start again)."""
    lines = [f"{'rank':>4}  {'probability':>11}  {'id':<10}  name"]
    image = None
    for r in records:
        if r["image"] != image or r["rank"] == 1:
            image = r["image"]
            lines.append(str(image))
        lines.append(f"{r['rank']:>4}  {r['probability']:>11.4f}  {r['id']:<10}  {r['name']}")
    return "\n".join(lines)


def _predict(args: argparse.Namespace) -> None:
    options = common.options_given(args, PredictOptions)  # checked before a model pin is read
    _no_model_among_images(args)
    records = common.core("predict")(model_of(args), args.images, **options)
    common.emit(records, args.json, predict_summary)


def features_table(result: dict[str, Any]) -> str:
    """The features of :func:`alexnet.alexnet_features` as CSV: a header (``image`` and the layer's columns,
    ``fc2_1`` to ``fc2_4096``), then a row per image, each value written so that it reads back to the same float32."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    features = result["features"]
    writer.writerow(["image", *result["columns"]])
    for image, row in zip(result["image"], features, strict=True):
        writer.writerow([image, *(format(value, ".9g") for value in row.tolist())])
    return out.getvalue().rstrip("\n")


def _features(args: argparse.Namespace) -> None:
    options = common.options_given(args, FeaturesOptions)  # checked before a model pin is read
    _no_model_among_images(args)
    result = common.core("features")(model_of(args), args.images, **options)
    if args.json:
        result = {**result, "features": result["features"].tolist()}
    common.emit(result, args.json, features_table)


def filters_summary(r: dict[str, Any]) -> str:
    """The line printed for the filters of a model."""
    height, width = r["size"]
    where = f"drawn to {r['path']}" if r["path"] else "give --path FILE.png to draw them"
    return f"{r['layer']}: {r['filters']} filters of {height}x{width} pixels, each scaled to its own range; {where}"


def _filters(args: argparse.Namespace) -> None:
    result = common.core("filters")(model_of(args), **given(args, "path"))
    if args.json:
        result = {**result, "kernels": result["kernels"].tolist(), "image": list(result["image"].shape)}
    common.emit(result, args.json, filters_summary)


def export_summary(r: dict[str, Any]) -> str:
    """The lines printed for an export (R's ``print.alexnet_export``, in the same words; tests/testthat/
    test-summaries.R compares them)."""
    kind = "TF Lite" if r.get("format") == "tflite" else "SavedModel"
    lines = [f"{kind} export of {r.get('model') or 'a model'}: {count_text(r['num_classes'], 'class', 'classes')}, "
             f"images of {r['image_size']} pixels, top {r['top']}"]
    if r.get("path"):
        lines.append(f"Written to {r['path']} ({count_text(len(r['files']), 'file')}, {size_text(r['bytes'])})")
    if r.get("pin"):
        lines.append(f"Pinned as {r['pin']['name']} version {r['pin']['version']} on {r['pin']['board']}")
    for name, signature in r["signatures"].items():
        shown = [", ".join(f"{k} {v}" for k, v in signature[part].items()) for part in ("inputs", "outputs")]
        lines.append(f"Signature {name}: {shown[0]} -> {shown[1]}")
    return "\n".join(lines)


def _export(args: argparse.Namespace) -> None:
    from ..model.export import check_destination
    from ..model.options import check_model_pin

    # as alexnet_export() takes them: `board` (--pin-board) publishes, in the pin `name` (--pin) or else the pin the
    # model came from; checked before a model pin is read, with the core's words (said as typed)
    board, name = getattr(args, "pin_board", None), getattr(args, "pin", None)
    check_destination(getattr(args, "path", None), board)
    if name is not None:
        check_model_pin(name, "name")
    options = common.options_given(args, ExportOptions)
    result = common.core("export")(model_of(args), **given(args, "path"), **options, board=board, name=name)
    common.emit(result, args.json, export_summary)


def register(add: common.AddCommand) -> None:
    """Add ``evaluate``, ``predict``, ``features``, ``filters`` and ``export`` to the parser."""
    evaluate = add("evaluate", _evaluate, "top-1 and top-5 accuracy of a model on a board's validation images",
                   "Evaluate a model (MODEL, or --model-pin NAME) on the validation images of --board, or on share "
                   "--partition of --total of them, with 1 or 10 crops.")
    model_options(evaluate, positional=True, pin_board=True)
    evaluation_options(evaluate)
    common.options_of(evaluate, BoardImagesOptions)

    # the commands of images: each IMAGE given, the model as --model or a pin, and its declared options
    for name, run, declared, summary, description in (
        ("predict", _predict, PredictOptions, "the most probable classes of images",
         "Print the --top most probable classes (WordNet id, name, probability) of each IMAGE."),
        ("features", _features, FeaturesOptions, "the values of one of a model's layers for each image",
         "Print as CSV (or --json) a row for each IMAGE: its name and the values of the model's --layer (fc2, the "
         "default: the 4096 values whose distances tell the images the network sees as alike)."),
    ):
        command = add(name, run, summary, description)
        command.add_argument("images", nargs="+", metavar="IMAGE",
                             help="image files or locations (file://, gs://, s3://, https://), or folders of them "
                             "(local, gs://, s3://: their image files by name)")
        model_options(command, positional=False)
        common.options_of(command, declared)

    filters = add("filters", _filters, "the filters of a model's first convolution, drawn as a PNG grid",
                  "Draw the filters of the first convolution of a model (MODEL, or --model-pin NAME on --board) side "
                  "by side into the PNG file --path, each scaled to its own range (the AlexNet paper's Figure 3); "
                  "--json gives their values.")
    model_options(filters, positional=True)
    common.core_option(filters, "path", "--path",
                       help="the PNG file to write: a path, file://, gs:// or s3:// location")

    export = add("export", _export, "the model as a TensorFlow SavedModel or TF Lite file, for serving without alexnet",
                 "Export a model (MODEL, or --model-pin NAME on --board) to --path (a folder, gs:// or s3://) and/or "
                 "into a model pin on --pin-board (beside its alexnet.keras): a SavedModel whose serving_default "
                 "signature takes encoded images and returns the --top classes' indices, ids, names and "
                 "probabilities, in float32, loadable with tf.saved_model.load alone.")
    model_options(export, positional=True)
    common.core_option(export, "path", "--path", help="the folder to write: a path, file://, gs:// or s3:// location")
    common.options_of(export, ExportOptions)
    export.add_argument("--pin-board", metavar="BOARD",
                        help="also publish the export in a model pin on this board, beside its alexnet.keras")
    export.add_argument("--pin", metavar="NAME", help="the model pin published on --pin-board (default: the pin the "
                                                      "model was read from, else alexnet)")
    # the core's `board` and `name` are alexnet_export()'s, the pin published: its messages name them so (the model's
    # own board and pin, --board and --model-pin, are read by the command before it calls the core)
    export.set_defaults(**{common.OPTION_NAMES: {**export.get_default(common.OPTION_NAMES),
                                                 "board": ("--pin-board", False), "name": ("--pin", False)}})
