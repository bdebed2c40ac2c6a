"""Synthetic ImageNet: a small ImageNet that looks and weighs like the real thing, in any layout people have it.

The images are drawn by :mod:`alexnet.data.drawing`. Every image is drawn from its own random stream keyed
by (seed, split, category, number), so the same arguments give byte-identical files. The tree is drawn in
Kaggle's layout and, for another ``layout``, packed as that layout packs it (:mod:`alexnet.data.layouts`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# numpy loads numpy.random on first use; a Ctrl-C that lands while it is loaded is now and then lost (the command
# went on writing), and the first image of a synthetic ImageNet is drawn right after its folders are made
import numpy.random

from ..checks import count_text
from ..declare import declaration
from ..errors import LayoutError, reason
from ..progress import progress_bar
from ..result import returns_result
from ..scratch import scratch_folder
from ..storage.outputs import local_location
from .classes import imagenet_classes
from .drawing import COMMON_SIZES, QUALITY_RANGE, QUIRK_KINDS, jpeg, quirk_bytes, random_quality, render, style
from .layouts import LAYOUT_FILES, MEMBER_PATHS, write_layout
from .options import SyntheticOptions

log = logging.getLogger(__name__)

# The ILSVRC2012 classes, in label order, then made-up ids above WordNet's range (n2xxxxxxx) so they never
# collide with a real one and sort after them.
_SYNTHETIC_ID_BASE = 20_000_000


def _synsets(classes: int) -> list[tuple[str, str]]:
    out = [(c["id"], c["name"]) for c in imagenet_classes()[:classes]]
    for k in range(len(out), classes):
        out.append((f"n{_SYNTHETIC_ID_BASE + k:08d}", f"synthetic category {k}"))
    return out


def _train_numbers(seed: int, index: int, count: int) -> list[int]:
    """Distinct, unordered file numbers like ImageNet's (``n01440764_10026``), stable for a seed."""
    rng = np.random.default_rng([seed, 3, index])
    high = max(1000, 13 * count)
    return [int(n) + 1 for n in rng.choice(high, size=count, replace=False)]


def _write(path: Path, data: bytes) -> int:
    path.write_bytes(data)
    return len(data)


def _write_train(train_dir: Path, wnids: list[str], per_class: int, seed: int, quirks: bool,
                 max_side: int | None, advance: Callable[[int], Any]) -> tuple[int, int, dict[str, str]]:
    """Every category's training images (and the odd files, in the first): files and bytes written, quirk paths."""
    images = total_bytes = 0
    quirk_paths: dict[str, str] = {}
    for k, wnid in enumerate(wnids):
        category_style = style(k)
        folder = train_dir / wnid
        folder.mkdir(parents=True, exist_ok=True)
        # Numbers are drawn for the quirk files too, so regular file names do not depend on `quirks`.
        numbers = _train_numbers(seed, k, per_class + len(QUIRK_KINDS))
        for i in range(per_class):
            rng = np.random.default_rng([seed, 0, k, i])
            image, _ = render(rng, category_style, max_side)
            total_bytes += _write(folder / f"{wnid}_{numbers[i]}.JPEG", jpeg(image, random_quality(rng)))
            images += 1
            advance(1)
        if quirks and k == 0:
            for j, kind in enumerate(QUIRK_KINDS):
                rng = np.random.default_rng([seed, 2, k, j])
                image, _ = render(rng, category_style, max_side)
                path = folder / f"{wnid}_{numbers[per_class + j]}.JPEG"
                total_bytes += _write(path, quirk_bytes(kind, image, random_quality(rng)))
                quirk_paths[kind] = str(path)
                images += 1
                advance(1)
    return images, total_bytes, quirk_paths


def _write_val(val_dir: Path, wnids: list[str], per_class: int, seed: int, max_side: int | None,
               advance: Callable[[int], Any]) -> tuple[list[str], int]:
    """The validation images, in a shuffled order as ImageNet's: their solution rows and the bytes written."""
    rows: list[str] = []
    total_bytes = 0
    if not per_class:
        return rows, total_bytes
    val_dir.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng([seed, 4]).permutation(np.repeat(np.arange(len(wnids)), per_class))
    for j, k in enumerate(order.tolist()):
        rng = np.random.default_rng([seed, 1, j])
        image, (x1, y1, x2, y2) = render(rng, style(k), max_side)
        image_id = f"ILSVRC2012_val_{j + 1:08d}"
        total_bytes += _write(val_dir / f"{image_id}.JPEG", jpeg(image, random_quality(rng)))
        rows.append(f"{image_id},{wnids[k]} {x1} {y1} {x2 - 1} {y2 - 1} ")
        advance(1)
    return rows, total_bytes


def _write_kaggle(root: Path, synsets: list[tuple[str, str]], images_per_class: int, val_per_class: int,
                  seed: int, quirks: bool, max_side: int | None) -> tuple[int, int, int, dict[str, str]]:
    """Kaggle's tree in ``root``: training images, validation images, bytes of images, quirk paths."""
    wnids = [wnid for wnid, _ in synsets]
    cls_loc = root / "ILSVRC" / "Data" / "CLS-LOC"
    extra = len(QUIRK_KINDS) if quirks else 0
    total_files = len(wnids) * (images_per_class + val_per_class) + extra
    with progress_bar(total_files, "synthetic ImageNet", unit="img") as bar:
        images, train_bytes, quirk_paths = _write_train(cls_loc / "train", wnids, images_per_class, seed, quirks,
                                                        max_side, bar.update)
        rows, val_bytes = _write_val(cls_loc / "val", wnids, val_per_class, seed, max_side, bar.update)
    (root / "LOC_synset_mapping.txt").write_text("".join(f"{w} {n}\n" for w, n in synsets), encoding="utf-8")
    if rows:
        (root / "LOC_val_solution.csv").write_text(
            "ImageId,PredictionString\n" + "".join(r + "\n" for r in rows), encoding="utf-8"
        )
    return images, len(rows), train_bytes + val_bytes, quirk_paths


def _remove_written(root: Path, made: bool) -> None:
    """Remove what a synthetic ImageNet cut short wrote in ``root`` (none of :data:`LAYOUT_FILES` was there before
    it), and ``root`` itself when it ``made`` it and it is left empty."""
    for name in LAYOUT_FILES:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    if made:
        with contextlib.suppress(OSError):
            root.rmdir()


@returns_result
def imagenet_synthetic(dest: str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """Write a synthetic ImageNet into ``dest``, in Kaggle's layout or another one people have ImageNet in.

    In Kaggle's layout it writes ``ILSVRC/Data/CLS-LOC/train/<wnid>/<wnid>_<n>.JPEG``, ``ILSVRC/Data/CLS-LOC/val/
    ILSVRC2012_val_<8 digits>.JPEG``, ``LOC_synset_mapping.txt`` and ``LOC_val_solution.csv`` (one box per
    validation image: the drawn object). Categories are the ILSVRC2012 classes in label order (the first
    ``classes`` of :func:`~alexnet.data.classes.imagenet_classes`), then made-up ids ``n2xxxxxxx``. The other
    layouts hold the same images byte for byte (:mod:`alexnet.data.layouts`), each what
    :func:`~alexnet.data.upload.imagenet_upload` reads from ``dest``. ``dest``, a folder to write into, must not
    already hold a synthetic ImageNet. Its options (:class:`~alexnet.data.options.SyntheticOptions`) are listed
    below; the same options give byte-identical files.

    Returns:
        ``{"path", "layout", "classes", "images", "val_images", "bytes", "categories", "quirks"}``: the absolute
        path of ``dest``; ``images`` counts every training file written (quirk files included); ``bytes`` is the
        size of all image files; ``categories`` the sorted wnids; ``quirks`` maps each kind (``cmyk``,
        ``grayscale``, ``png``, ``truncated``, ``empty``) to its file path (inside its archive for an archive
        layout: ``<archive>/<member>``), empty when ``quirks`` is false.
    """
    chosen = declaration.check(SyntheticOptions, options, "imagenet_synthetic()")
    classes, images_per_class, val_per_class = chosen.classes, chosen.images_per_class, chosen.val_per_class
    seed, quirks, max_side, layout = chosen.seed, chosen.quirks, chosen.max_side, chosen.layout

    root = Path(local_location(dest, "dest", "a synthetic ImageNet"))
    existing = [p for p in LAYOUT_FILES if (root / p).exists()]
    if existing:
        raise LayoutError(
            f"{root} already holds an ImageNet tree ({', '.join(existing)}). "
            "Remove it or pass an empty or new folder as `dest`."
        )
    if layout != "kaggle" and classes > len(imagenet_classes()) and layout != "folders":
        raise LayoutError(f"the {layout} layout holds ILSVRC2012's classes only: use classes <= "
                          f"{len(imagenet_classes())}")
    made = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise LayoutError(f"Cannot write a synthetic ImageNet to {root} ({reason(error)}): "
                          "pass as `dest` a folder this process may write.") from None

    synsets = _synsets(classes)
    try:
        if layout == "kaggle":
            images, val_images, total_bytes, quirk_paths = _write_kaggle(root, synsets, images_per_class,
                                                                         val_per_class, seed, quirks, max_side)
        else:
            with scratch_folder("alexnet-synthetic-") as scratch:
                kaggle = Path(scratch) / "kaggle"  # beside the scratch folder's owner file, which no layout holds
                images, val_images, total_bytes, quirk_paths = _write_kaggle(
                    kaggle, synsets, images_per_class, 0 if layout == "folders" else val_per_class, seed, quirks,
                    max_side)
                train = write_layout(layout, kaggle, root, synsets)["train"]
            quirk_paths = {kind: f"{train}/" + MEMBER_PATHS[layout].format(wnid=synsets[0][0],
                                                                           name=os.path.basename(p))
                           for kind, p in quirk_paths.items()}
    except BaseException:  # Ctrl-C, a full disk: no half tree, which the same call run again would refuse
        _remove_written(root, made)
        raise
    log.info(
        "synthetic ImageNet (%s layout) at %s: %s, %d training and %d validation images, %.1f MB "
        "(%.1f KB/image)",
        layout,
        root,
        count_text(classes, "category", "categories"),
        images,
        val_images,
        total_bytes / 1e6,
        total_bytes / max(1, images + val_images) / 1e3,
    )
    return {
        "path": str(root),
        "layout": layout,
        "classes": classes,
        "images": images,
        "val_images": val_images,
        "bytes": total_bytes,
        "categories": [wnid for wnid, _ in synsets],
        "quirks": quirk_paths,
    }


declaration.take_declared(imagenet_synthetic, SyntheticOptions, title="Its options, with their defaults:")

__all__ = ["COMMON_SIZES", "QUALITY_RANGE", "imagenet_synthetic"]
