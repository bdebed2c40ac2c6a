"""Synthetic ImageNet: a small tree in Kaggle's layout that looks and weighs like the real thing.

The images are drawn by :mod:`alexnet.data.drawing`. Every image is drawn from its own random stream keyed
by (seed, split, category, number), so the same arguments give byte-identical files.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import as_int
from ..errors import LayoutError
from ..progress import progress_bar
from .drawing import COMMON_SIZES, QUALITY_RANGE, QUIRK_KINDS, jpeg, quirk_bytes, random_quality, render, style

log = logging.getLogger(__name__)

# Real ImageNet-1k wnids and names (the first ones of the sorted list); further categories get made-up ids
# above WordNet's range (n2xxxxxxx) so they never collide with a real one and sort after them.
_REAL_SYNSETS: tuple[tuple[str, str], ...] = (
    ("n01440764", "tench, Tinca tinca"),
    ("n01443537", "goldfish, Carassius auratus"),
    ("n01484850", "great white shark, white shark, man-eater, man-eating shark, Carcharodon carcharias"),
    ("n01491361", "tiger shark, Galeocerdo cuvieri"),
    ("n01494475", "hammerhead, hammerhead shark"),
    ("n01496331", "electric ray, crampfish, numbfish, torpedo"),
    ("n01498041", "stingray"),
    ("n01514668", "cock"),
    ("n01514859", "hen"),
    ("n01518878", "ostrich, Struthio camelus"),
    ("n01530575", "brambling, Fringilla montifringilla"),
    ("n01531178", "goldfinch, Carduelis carduelis"),
    ("n01532829", "house finch, linnet, Carpodacus mexicanus"),
    ("n01534433", "junco, snowbird"),
    ("n01537544", "indigo bunting, indigo finch, indigo bird, Passerina cyanea"),
    ("n01558993", "robin, American robin, Turdus migratorius"),
    ("n01560419", "bulbul"),
    ("n01580077", "jay"),
    ("n01582220", "magpie"),
    ("n01592084", "chickadee"),
    ("n01601694", "water ouzel, dipper"),
    ("n01608432", "kite"),
    ("n01614925", "bald eagle, American eagle, Haliaeetus leucocephalus"),
    ("n01616318", "vulture"),
    ("n01622779", "great grey owl, great gray owl, Strix nebulosa"),
    ("n01629819", "European fire salamander, Salamandra salamandra"),
    ("n01630670", "common newt, Triturus vulgaris"),
    ("n01631663", "eft"),
    ("n01632458", "spotted salamander, Ambystoma maculatum"),
    ("n01632777", "axolotl, mud puppy, Ambystoma mexicanum"),
    ("n01641577", "bullfrog, Rana catesbeiana"),
    ("n01644373", "tree frog, tree-frog"),
    ("n01644900", "tailed frog, bell toad, ribbed toad, tailed toad, Ascaphus trui"),
    ("n01664065", "loggerhead, loggerhead turtle, Caretta caretta"),
    ("n01665541", "leatherback turtle, leatherback, leathery turtle, Dermochelys coriacea"),
    ("n01667114", "mud turtle"),
    ("n01667778", "terrapin"),
    ("n01669191", "box turtle, box tortoise"),
)
_SYNTHETIC_ID_BASE = 20_000_000


def _synsets(classes: int) -> list[tuple[str, str]]:
    out = list(_REAL_SYNSETS[:classes])
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


def imagenet_synthetic(
    dest: str | os.PathLike[str],
    classes: int = 10,
    images_per_class: int = 100,
    val_per_class: int = 10,
    seed: int = 0,
    quirks: bool = False,
    max_side: int | None = None,
) -> dict[str, Any]:
    """Write a synthetic ImageNet in Kaggle's layout into ``dest`` and describe it.

    Writes ``ILSVRC/Data/CLS-LOC/train/<wnid>/<wnid>_<n>.JPEG``, ``ILSVRC/Data/CLS-LOC/val/
    ILSVRC2012_val_<8 digits>.JPEG``, ``LOC_synset_mapping.txt`` and ``LOC_val_solution.csv`` (one box per
    validation image: the drawn object). Categories use real ImageNet wnids and names for the first 38, then
    made-up ids ``n2xxxxxxx``.

    Args:
        dest: folder to write into; it must not already hold an ImageNet tree.
        classes: number of categories.
        images_per_class: training images per category.
        val_per_class: validation images per category (0 for none).
        seed: the same seed and arguments give byte-identical files.
        quirks: add the odd files real ImageNet has to the first category's training set: a CMYK JPEG,
            a grayscale JPEG, a PNG named ``.JPEG``, a JPEG cut off mid-scan and an empty file. They come on
            top of ``images_per_class``.
        max_side: shrink every image so its longer side is at most this many pixels (fast tests).

    Returns:
        ``{"path", "classes", "images", "val_images", "bytes", "categories", "quirks"}``: the absolute path
        of ``dest``; ``images`` counts every training file written (quirk files included); ``bytes`` is the
        size of all image files; ``categories`` the sorted wnids; ``quirks`` maps each kind (``cmyk``,
        ``grayscale``, ``png``, ``truncated``, ``empty``) to its file path, empty when ``quirks`` is false.
    """
    classes = as_int(classes, "classes", 1)
    images_per_class = as_int(images_per_class, "images_per_class", 1)
    val_per_class = as_int(val_per_class, "val_per_class", 0)
    seed = as_int(seed, "seed", 0)
    if max_side is not None:
        max_side = as_int(max_side, "max_side", 8)
    quirks = bool(quirks)

    root = Path(os.fspath(dest)).expanduser().absolute()
    if root.exists() and not root.is_dir():
        raise LayoutError(f"Cannot write a synthetic ImageNet to {root}: it is a file. Pass a folder path.")
    existing = [p for p in ("ILSVRC", "LOC_synset_mapping.txt", "LOC_val_solution.csv") if (root / p).exists()]
    if existing:
        raise LayoutError(
            f"{root} already holds an ImageNet tree ({', '.join(existing)}). "
            "Remove it or pass an empty or new folder as `dest`."
        )

    synsets = _synsets(classes)
    wnids = [wnid for wnid, _ in synsets]
    cls_loc = root / "ILSVRC" / "Data" / "CLS-LOC"
    train_dir, val_dir = cls_loc / "train", cls_loc / "val"
    extra = len(QUIRK_KINDS) if quirks else 0
    total_files = classes * images_per_class + extra + classes * val_per_class

    with progress_bar(total_files, "synthetic ImageNet", unit="img") as bar:
        images, train_bytes, quirk_paths = _write_train(train_dir, wnids, images_per_class, seed, quirks, max_side,
                                                        bar.update)
        rows, val_bytes = _write_val(val_dir, wnids, val_per_class, seed, max_side, bar.update)
    val_images, total_bytes = len(rows), train_bytes + val_bytes

    (root / "LOC_synset_mapping.txt").write_text("".join(f"{w} {n}\n" for w, n in synsets), encoding="utf-8")
    if rows:
        (root / "LOC_val_solution.csv").write_text(
            "ImageId,PredictionString\n" + "".join(r + "\n" for r in rows), encoding="utf-8"
        )
    log.info(
        "synthetic ImageNet at %s: %d categories, %d training and %d validation images, %.1f MB (%.1f KB/image)",
        root,
        classes,
        images,
        val_images,
        total_bytes / 1e6,
        total_bytes / max(1, images + val_images) / 1e3,
    )
    return {
        "path": str(root),
        "classes": classes,
        "images": images,
        "val_images": val_images,
        "bytes": total_bytes,
        "categories": wnids,
        "quirks": quirk_paths,
    }


__all__ = ["COMMON_SIZES", "QUALITY_RANGE", "imagenet_synthetic"]
