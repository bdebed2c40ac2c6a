"""Commands of the data stage: ``synth``, ``upload``, ``categories``, ``fetch`` and ``validation``."""

from __future__ import annotations

import argparse
import logging
import math
from typing import Any

from ..checks import count_text, some_names
from ..data.options import (
    FetchOptions,
    SyntheticOptions,
    UploadOptions,
    ValidationFetchOptions,
    ValidationPartitionOptions,
)
from ..declare.declaration import specs
from ..errors import without_passwords
from . import common
from .common import BOARD_HELP, emit, given, size_text

# The summaries below say what R's print methods of the same results say (R/results.R), line for line and in the
# same words, each front end naming things its own way: the core's names (`min_images`), which the command line says
# as its options, and what R lets be read from the object (`see $bad_images`) that the command line lists instead.
# tests/testthat/test-summaries.R compares each with R's print of the same result.


def synth_summary(r: dict[str, Any]) -> str:
    """The lines printed for a synthetic ImageNet (R's ``print.alexnet_imagenet``)."""
    layout = f" ({r['layout']} layout)" if r.get("layout") not in (None, "kaggle") else ""
    lines = [f"Synthetic ImageNet at {r['path']}{layout}: {count_text(r['classes'], 'category', 'categories')}, "
             f"{count_text(r['images'], 'training image')} and {count_text(r['val_images'], 'validation image')}"
             + (f", {size_text(r['bytes'])}" if r.get("bytes") is not None else "")]
    quirks = [name for name, paths in (r.get("quirks") or {}).items() if paths]
    if quirks:
        lines.append(f"Odd files as real ImageNet has them: {', '.join(quirks)}")
    return "\n".join(lines)


def _synth(args: argparse.Namespace) -> None:
    result = common.core("synth")(args.dest, **common.options_given(args, SyntheticOptions))
    emit(result, args.json, synth_summary)


def rate_text(value: float) -> str:
    """A rate to 3 significant digits, as R's ``format(signif(x, 3))`` writes it (``1230``, ``0.726``)."""
    return f"{float(f'{value:.3g}'):g}"


def upload_summary(r: dict[str, Any]) -> str:
    """The lines printed for an upload (R's ``print.alexnet_upload``): the bad images and the categories left out
    are listed, where R says which field holds them."""
    from ..data.upload import bad_image_line

    added = sorted(set(r.get("val_uploaded") or []) - set(r.get("uploaded") or []))  # to categories already there
    lines = [
        f"ImageNet on board {r['board']}: {count_text(r['categories'], 'category', 'categories')} "
        f"({len(r['uploaded']):,} uploaded, {len(r['skipped']):,} already there"
        + (f", validation images of {len(added):,} added" if added else "")
        + f"), {count_text(r['images'], 'training image')} and {count_text(r['val_images'], 'validation image')}, "
        f"{size_text(r['bytes'])}",
    ]
    if r.get("source") is not None:
        lines.append(f"Read {r['source']}" + (f" ({r['layout']} layout)" if r.get("layout") is not None else ""))
    if r.get("seconds") is not None:
        rate = r.get("mb_per_s")
        lines.append(f"Wrote {size_text(r['uploaded_bytes'])} in {r['seconds']:.1f} s"
                     + (f" ({rate_text(rate)} MB/s)" if isinstance(rate, (int, float)) and math.isfinite(rate)
                        else ""))
    bad = r.get("bad_images") or []
    if bad:
        lines.append(f"{count_text(len(bad), 'bad image')} left out:")
        lines += [f"  {bad_image_line(b)}" for b in bad]
    excluded = r.get("excluded") or []
    if excluded:
        lines.append(f"{count_text(len(excluded), 'category', 'categories')} left out under `min_images`: "
                     + some_names([f"{e['category']} ({e['images']})" for e in excluded], 10))
    if r.get("pruned_versions"):
        lines.append(f"{count_text(r['pruned_versions'], 'older version')} deleted")
    return "\n".join(lines)


def _upload(args: argparse.Namespace) -> None:
    from ..data.upload import BAD_IMAGES_NAMED_MARK

    def unnamed(record: logging.LogRecord) -> bool:  # the summary lists every bad image: the warning is left out
        return args.json or not getattr(record, BAD_IMAGES_NAMED_MARK, False)

    uploader = logging.getLogger("alexnet.data.upload")
    uploader.addFilter(unnamed)
    try:
        result = common.core("upload")(args.source, **given(args, "board"),
                                       **common.options_given(args, UploadOptions))
    finally:
        uploader.removeFilter(unnamed)
    emit(result, args.json, lambda r: common.typed(args)(upload_summary(r)))


def _categories_summary(rows: list[dict[str, Any]]) -> str:
    # sizes in MB of 1000 kB, as every size alexnet prints (size_text, R's format_bytes)
    lines = [f"{'index':>5}  {'id':<10}  {'images':>7}  {'MB':>8}  name"]
    lines += [f"{r['index']:>5}  {r['id']:<10}  {r['images']:>7}  {r['bytes'] / 1e6:>8.1f}  {r['name']}"
              for r in rows]
    return "\n".join(lines)


def _categories(args: argparse.Namespace) -> None:
    emit(common.core("categories")(**given(args, "board")), args.json, _categories_summary)


def partition_summary(r: dict[str, Any]) -> str:
    """The lines printed for a fetched partition (R's ``print.alexnet_partition``)."""
    which = (f"Partition {r['partition']} of {r['total']} (0-based)"
             if r.get("partition") is not None and r.get("total") is not None else "Partition")
    of = f" of {r['num_classes']}" if r.get("num_classes") is not None else ""
    lines = [f"{which}: {count_text(len(r['categories']), 'category', 'categories')}{of}, "
             f"{count_text(len(r['image']), 'training image')} and "
             f"{count_text(len(r.get('val_image') or []), 'validation image')}"]
    where = [f"{kind} {without_passwords(str(r[key]))}" for kind, key in (("board", "board"), ("cache", "cache_dir"))
             if r.get(key) is not None]
    if where:
        lines.append(f"From {', '.join(where)}")
    if r.get("downloaded_bytes") is not None:  # a fetch's: what came from the board, and whether the cache held it all
        lines.append(f"Downloaded {size_text(r['downloaded_bytes'])} in {float(r.get('seconds') or 0):.1f} s"
                     if r["downloaded_bytes"] else "Nothing downloaded: every category was in the cache")
    return "\n".join(lines)


def _fetch(args: argparse.Namespace) -> None:
    emit(common.fetch(args), args.json, partition_summary)


def validation_summary(r: dict[str, Any]) -> str:
    """The lines printed for a board's validation images fetched alone (R's ``print.alexnet_validation``)."""
    which = ("All the board's validation images" if r["total"] == 1
             else f"Share {r['partition']} of {r['total']} (0-based) of the board's validation images")
    lines = [f"{which}: {count_text(len(r['val_image']), 'image')} of "
             f"{count_text(len(r['categories']), 'category', 'categories')} (of {r['num_classes']})",
             f"From board {without_passwords(str(r['board']))}, cache {r['cache_dir']}"]
    if r.get("left_out_at_upload"):
        lines.append(f"{count_text(r['left_out_at_upload'], 'validation image')} left out at upload (the board's "
                     "bad_images pin names them)")
    return "\n".join(lines)


def _validation(args: argparse.Namespace) -> None:
    emit(common.core("validation")(**common.options_given(args, ValidationPartitionOptions), **given(args, "board"),
                                   **common.options_given(args, ValidationFetchOptions)), args.json,
         validation_summary)


def register(add: common.AddCommand) -> None:
    """Add the data stage's commands to the parser (``add`` as in :func:`alexnet.cli.build_parser`)."""
    synth = add("synth", _synth, "write a synthetic ImageNet (Kaggle's layout or another)",
                "Write a synthetic ImageNet, deterministic for a seed, in the layout people have ImageNet in.")
    synth.add_argument("dest", help="folder to write into")
    common.options_of(synth, SyntheticOptions)

    upload = add("upload", _upload, "upload ImageNet to a board, one zip per category",
                 "Upload ImageNet to a board, read in place: one pin per category, validation pins, categories last.")
    upload.add_argument("source", help="the ImageNet source, a path or a gs:// or s3:// URL: the official "
                                       "ILSVRC2012 archives' folder, Kaggle's zip (or its earlier tar.gz), Hugging "
                                       "Face's parquet folder, or an extracted Kaggle tree, torchvision's train/ and "
                                       "val/ tree or folder of <wnid>/ folders")
    common.core_option(upload, "board", "--board", help=BOARD_HELP)
    common.options_of(upload, UploadOptions)

    common.core_option(add("categories", _categories, "list the categories on a board"), "board", "--board",
                       help=BOARD_HELP)
    fetch = add("fetch", _fetch, "fetch one partition of the categories into the local cache")
    common.partition_options(fetch)
    common.core_option(fetch, "validation", "--validation", switch=True,
                       help=common.with_default("fetch", "validation",
                                                common.declared_help(specs(FetchOptions)["validation"])))
    validation = add("validation", _validation, "fetch a board's validation images alone into the local cache",
                     "Fetch a board's validation images into the local cache: all of them, or one share of the "
                     "categories that have some, balanced by their counts (as an evaluation's workers share them).")
    common.options_of(validation, ValidationPartitionOptions)
    common.core_option(validation, "board", "--board", help=BOARD_HELP)
    common.options_of(validation, ValidationFetchOptions)
