"""Commands of the data stage: ``synth``, ``upload``, ``categories`` and ``fetch``."""

from __future__ import annotations

import argparse
from typing import Any

from ..data.parts import LAYOUT_NAMES
from . import common
from .common import BOARD_HELP, emit, given, non_negative, positive, size_text, with_default


def _synth(args: argparse.Namespace) -> None:
    result = common.core("synth")(args.dest, **given(args, "classes", "images_per_class", "val_per_class", "seed",
                                                      "quirks", "max_side", "layout"))
    emit(result, args.json, lambda r: (
        f"Wrote {r['images']} training and {r['val_images']} validation images of {r['classes']} "
        f"categories ({size_text(r['bytes'])}) to {r['path']} ({r['layout']} layout)"
        + (f"\nOdd files: {', '.join(sorted(r['quirks']))}" if r["quirks"] else "")))


def _upload_summary(r: dict[str, Any]) -> str:
    # the same facts, in the same order, as R's print of an upload
    lines = [
        f"Board {r['board']}: {len(r['uploaded'])} categories uploaded, {len(r['skipped'])} already there; "
        f"{r['images']} training and {r['val_images']} validation images, {size_text(r['bytes'])}",
        f"Read {r['source']} ({r['layout']} layout)",
        f"Wrote {size_text(r['uploaded_bytes'])} in {r['seconds']:.1f} s"
        + (f" ({r['mb_per_s']:.3g} MB/s)" if r.get("mb_per_s") else ""),
    ]
    if r.get("pruned_versions"):
        lines.append(f"{r['pruned_versions']} old pin version(s) deleted")
    bad = r.get("bad_images") or []
    if bad:
        lines.append(f"{len(bad)} image(s) left out:")
        lines += [f"  {b['category']}/{b['file']}: {b['reason']}" for b in bad]
    return "\n".join(lines)


def _upload(args: argparse.Namespace) -> None:
    result = common.core("upload")(args.source, **given(args, "board", "workers", "min_images", "resize",
                                                         "quality", "keep_versions", "scratch"))
    emit(result, args.json, _upload_summary)


def _categories_summary(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'index':>5}  {'id':<10}  {'images':>7}  {'MB':>8}  name"]
    lines += [f"{r['index']:>5}  {r['id']:<10}  {r['images']:>7}  {r['bytes'] / 2**20:>8.1f}  {r['name']}"
              for r in rows]
    return "\n".join(lines)


def _categories(args: argparse.Namespace) -> None:
    emit(common.core("categories")(**given(args, "board")), args.json, _categories_summary)


def _fetch(args: argparse.Namespace) -> None:
    emit(common.fetch(args), args.json, lambda r: (
        f"Partition {r['partition']} of {r['total']}: {len(r['image'])} images of {len(r['categories'])} "
        f"categories ({', '.join(r['categories'])}) in {r.get('cache_dir', '')}"))


def register(add: common.AddCommand) -> None:
    """Add the data stage's commands to the parser (``add`` as in :func:`alexnet.cli.build_parser`)."""
    synth = add("synth", _synth, "write a synthetic ImageNet (Kaggle's layout or another)",
                "Write a synthetic ImageNet, deterministic for a seed, in the layout people have ImageNet in.")
    synth.add_argument("dest", help="folder to write into")
    synth.add_argument("--classes", type=positive, help=with_default("synth", "classes", "categories"))
    synth.add_argument("--images-per-class", type=positive,
                       help=with_default("synth", "images_per_class", "training images per category"))
    synth.add_argument("--val-per-class", type=non_negative,
                       help=with_default("synth", "val_per_class", "validation images per category"))
    synth.add_argument("--seed", type=non_negative, help=with_default("synth", "seed", "random seed"))
    synth.add_argument("--quirks", action="store_true", help="add CMYK, grayscale, PNG, truncated and empty files")
    synth.add_argument("--max-side", type=positive, help="longest image side in pixels (default: ImageNet's)")
    synth.add_argument("--layout", choices=LAYOUT_NAMES,
                       help=with_default("synth", "layout", "kaggle: extracted Kaggle tree; archives: the official "
                                         "ILSVRC2012 tars and devkit; kaggle_zip: Kaggle's zip; kaggle_targz: its "
                                         "earlier tar.gz; parquet: Hugging Face's shards; folders: <wnid>/ folders"))

    upload = add("upload", _upload, "upload ImageNet to a board, one zip per category",
                 "Upload ImageNet to a board, read in place: one pin per category, validation pins, categories last.")
    upload.add_argument("source", help="the ImageNet source, a path or a gs:// or s3:// URL: the official "
                                       "ILSVRC2012 archives' folder, Kaggle's zip (or its earlier tar.gz), Hugging "
                                       "Face's parquet folder, or a local Kaggle tree or folder of <wnid>/ folders")
    upload.add_argument("--board", help=BOARD_HELP)
    upload.add_argument("--workers", type=positive, help=with_default(
        "upload", "workers", "categories in flight (at most one packed per CPU at a time)"))
    upload.add_argument("--min-images", type=non_negative,
                        help=with_default("upload", "min_images", "leave out smaller categories"))
    upload.add_argument("--resize", type=positive, help="re-encode to this short side (default: keep the bytes)")
    upload.add_argument("--quality", type=positive, help=with_default("upload", "quality", "JPEG quality"))
    upload.add_argument("--keep-versions", type=positive,
                        help="afterwards keep only this many versions of each pin (default: all)")
    upload.add_argument("--scratch", help="local folder for the upload's scratch folder: the zips on their way to "
                        "the board, categories waiting to be packed (default: the system's temporary folder, TMPDIR)")

    add("categories", _categories, "list the categories on a board").add_argument("--board", help=BOARD_HELP)
    common.partition_options(add("fetch", _fetch, "fetch one partition of the categories into the local cache"))
