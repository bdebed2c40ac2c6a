"""Commands of the data stage: ``synth``, ``upload``, ``categories`` and ``fetch``."""

from __future__ import annotations

import argparse
from typing import Any

from ..checks import count_text
from ..data.options import SyntheticOptions, UploadOptions
from . import common
from .common import BOARD_HELP, emit, given, size_text


def _synth(args: argparse.Namespace) -> None:
    result = common.core("synth")(args.dest, **common.options_given(args, SyntheticOptions))
    emit(result, args.json, lambda r: (
        f"Wrote {r['images']} training and {r['val_images']} validation images of {r['classes']} "
        f"categories ({size_text(r['bytes'])}) to {r['path']} ({r['layout']} layout)"
        + (f"\nOdd files: {', '.join(sorted(r['quirks']))}" if r["quirks"] else "")))


def _upload_summary(r: dict[str, Any]) -> str:
    # the same facts, in the same order, as R's print of an upload
    added = sorted(set(r.get("val_uploaded") or []) - set(r["uploaded"]))  # to categories already there
    lines = [
        f"Board {r['board']}: {count_text(len(r['uploaded']), 'category', 'categories')} uploaded, "
        f"{len(r['skipped']):,} already there" + (f", validation images of {len(added):,} added" if added else "")
        + f"; {count_text(r['images'], 'training image')} and "
        f"{count_text(r['val_images'], 'validation image')}, {size_text(r['bytes'])}",
        f"Read {r['source']} ({r['layout']} layout)",
        f"Wrote {size_text(r['uploaded_bytes'])} in {r['seconds']:.1f} s"
        + (f" ({r['mb_per_s']:.3g} MB/s)" if r.get("mb_per_s") else ""),
    ]
    excluded = r.get("excluded") or []
    if excluded:
        lines.append(f"{count_text(len(excluded), 'category', 'categories')} left out under `min_images`: "
                     + ", ".join(f"{e['category']} ({e['images']})" for e in excluded[:10])
                     + (", ..." if len(excluded) > 10 else ""))
    if r.get("pruned_versions"):
        lines.append(f"{r['pruned_versions']} old pin version(s) deleted")
    bad = r.get("bad_images") or []
    if bad:
        lines.append(f"{len(bad)} image(s) left out:")
        lines += [f"  {b['category']}/{b['file']}: {b['reason']}" for b in bad]
    return "\n".join(lines)


def _upload(args: argparse.Namespace) -> None:
    result = common.core("upload")(args.source, **given(args, "board"), **common.options_given(args, UploadOptions))
    emit(result, args.json, lambda r: common.typed(args)(_upload_summary(r)))


def _categories_summary(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'index':>5}  {'id':<10}  {'images':>7}  {'MB':>8}  name"]
    lines += [f"{r['index']:>5}  {r['id']:<10}  {r['images']:>7}  {r['bytes'] / 2**20:>8.1f}  {r['name']}"
              for r in rows]
    return "\n".join(lines)


def _categories(args: argparse.Namespace) -> None:
    emit(common.core("categories")(**given(args, "board")), args.json, _categories_summary)


def _fetch(args: argparse.Namespace) -> None:
    emit(common.fetch(args), args.json, lambda r: (
        f"Partition {r['partition']} of {r['total']}: {count_text(len(r['image']), 'image')} and "
        f"{count_text(len(r['val_image']), 'validation image')} of "
        f"{count_text(len(r['categories']), 'category', 'categories')} ({', '.join(r['categories'])}) in "
        f"{r.get('cache_dir', '')}"))


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
                                       "Face's parquet folder, or a local Kaggle tree, torchvision's train/ and val/ "
                                       "tree or folder of <wnid>/ folders")
    common.core_option(upload, "board", "--board", help=BOARD_HELP)
    common.options_of(upload, UploadOptions)

    common.core_option(add("categories", _categories, "list the categories on a board"), "board", "--board",
                       help=BOARD_HELP)
    fetch = add("fetch", _fetch, "fetch one partition of the categories into the local cache")
    common.partition_options(fetch)
    common.core_option(fetch, "validation", "--validation", switch=True,
                       help=common.with_default("fetch", "validation", "also fetch the partition's validation images"))
