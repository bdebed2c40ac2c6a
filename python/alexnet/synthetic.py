"""Synthetic ImageNet: a small tree in Kaggle's layout that looks and weighs like the real thing.

Each category is a shape drawn in its own colour family at a random position, scale and angle over a
textured, cluttered background, so a small CNN tells the categories apart at 32-64 pixels while no two images
are alike. Images have the common ImageNet sizes (500x375, 375x500, 500x333, ...) and JPEG quality 85-95, with
enough fine texture that files average near real ImageNet's ~110 KB. Every image is drawn from its own random
stream keyed by (seed, split, category, number), so the same arguments give byte-identical files.
"""

from __future__ import annotations

import colorsys
import io
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from .checks import as_int
from .errors import LayoutError
from .progress import progress_bar

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

# (width, height) of ImageNet photos and roughly how often each occurs: most are 500 pixels on the long side,
# landscape 4:3 first.
_SIZES: tuple[tuple[tuple[int, int], float], ...] = (
    ((500, 375), 0.40),
    ((375, 500), 0.11),
    ((500, 333), 0.12),
    ((333, 500), 0.04),
    ((500, 334), 0.05),
    ((500, 332), 0.03),
    ((500, 500), 0.07),
    ((500, 400), 0.04),
    ((400, 500), 0.02),
    ((500, 281), 0.03),
    ((500, 374), 0.03),
    ((640, 480), 0.03),
    ((500, 335), 0.03),
)
COMMON_SIZES: tuple[tuple[int, int], ...] = tuple(size for size, _ in _SIZES)
QUALITY_RANGE: tuple[int, int] = (85, 95)

# Fine texture: luminance noise octaves (cell size in pixels of a full-size image, relative amplitude) and
# per-pixel grain (in 8-bit levels). Calibrated so that files average near 110 KB at full size.
_OCTAVES: tuple[tuple[float, float], ...] = ((48.0, 0.10), (16.0, 0.12), (6.0, 0.14), (2.5, 0.16), (1.2, 0.10))
_GRAIN = 18.5

_QUIRK_KINDS: tuple[str, ...] = ("cmyk", "grayscale", "png", "truncated", "empty")

_Polygon = list[tuple[float, float]]


def _circle(radius: float, cx: float = 0.0, cy: float = 0.0, n: int = 40) -> _Polygon:
    return [
        (cx + radius * math.cos(2 * math.pi * i / n), cy + radius * math.sin(2 * math.pi * i / n)) for i in range(n)
    ]


def _rect(x0: float, y0: float, x1: float, y1: float) -> _Polygon:
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _rotated(poly: _Polygon, angle: float) -> _Polygon:
    c, s = math.cos(angle), math.sin(angle)
    return [(x * c - y * s, x * s + y * c) for x, y in poly]


def _star(points: int = 5, outer: float = 1.0, inner: float = 0.42) -> _Polygon:
    out = []
    for i in range(2 * points):
        r = outer if i % 2 == 0 else inner
        a = -math.pi / 2 + math.pi * i / points
        out.append((r * math.cos(a), r * math.sin(a)))
    return out


# Each shape: polygons in a unit frame (radius ~1), drawn in order; True fills, False cuts a hole.
_SHAPES: tuple[tuple[tuple[_Polygon, bool], ...], ...] = (
    ((_circle(1.0), True),),  # disc
    ((_rect(-0.8, -0.8, 0.8, 0.8), True),),  # square
    (([(0.0, -1.0), (0.95, 0.75), (-0.95, 0.75)], True),),  # triangle
    ((_circle(1.0), True), (_circle(0.55), False)),  # ring
    ((_rect(-1.0, -0.3, 1.0, 0.3), True), (_rect(-0.3, -1.0, 0.3, 1.0), True)),  # plus
    ((_star(), True),),  # star
    tuple((_rect(-0.9, y, 0.9, y + 0.4), True) for y in (-0.9, -0.2, 0.5)),  # stripes
    tuple(  # checkerboard
        (_rect(-0.9 + 0.6 * i, -0.9 + 0.6 * j, -0.3 + 0.6 * i, -0.3 + 0.6 * j), True)
        for i in range(3)
        for j in range(3)
        if (i + j) % 2 == 0
    ),
    ((_circle(1.0), True), (_circle(0.8, 0.45, -0.25), False)),  # crescent
    (  # diagonal cross
        (_rotated(_rect(-1.0, -0.25, 1.0, 0.25), math.pi / 4), True),
        (_rotated(_rect(-1.0, -0.25, 1.0, 0.25), -math.pi / 4), True),
    ),
)
_HUES = 12  # colour families, 30 degrees apart


@dataclass(frozen=True)
class _Style:
    """How one category looks: a shape, a hue and (past 60 categories) a core of a second hue."""

    shape: int
    hue: float
    core_hue: float | None


def _style(index: int) -> _Style:
    variant = index // (len(_SHAPES) * _HUES // math.gcd(len(_SHAPES), _HUES))
    core = None if variant == 0 else ((index % _HUES) / _HUES + 0.381966 * variant) % 1.0
    return _Style(shape=index % len(_SHAPES), hue=(index % _HUES) / _HUES, core_hue=core)


def _synsets(classes: int) -> list[tuple[str, str]]:
    out = list(_REAL_SYNSETS[:classes])
    for k in range(len(out), classes):
        out.append((f"n{_SYNTHETIC_ID_BASE + k:08d}", f"synthetic category {k}"))
    return out


def _rgb(h: float, s: float, v: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, min(max(s, 0.0), 1.0), min(max(v, 0.0), 1.0))
    return round(r * 255), round(g * 255), round(b * 255)


def _grid_size(w: int, h: int, cells: float) -> tuple[int, int]:
    """Size of a noise grid whose cells are about ``cells`` pixels of a ``w`` x ``h`` image (at most 1 pixel)."""
    return min(w, max(2, math.ceil(w / cells) + 1)), min(h, max(2, math.ceil(h / cells) + 1))


def _upsample(field: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    if field.shape[::-1] == size:
        return field
    return np.asarray(Image.fromarray(field, mode="F").resize(size, Image.Resampling.BICUBIC))


def _texture(rng: np.random.Generator, w: int, h: int, scale: float) -> np.ndarray:
    """Multiplicative light texture around 1: noise octaves summed coarse to fine, as an (h, w) array.

    Each octave is added at its own grid size and the running sum is upsampled to the next, so only the last
    step works at full size.
    """
    total: np.ndarray | None = None
    for cells, amplitude in _OCTAVES:
        gw, gh = _grid_size(w, h, max(cells * scale, 1.0))
        octave = amplitude * rng.standard_normal((gh, gw), dtype=np.float32)
        total = octave if total is None else _upsample(total, (gw, gh)) + octave
    assert total is not None
    return _upsample(total, (w, h)) + np.float32(1.0)


def _image_size(rng: np.random.Generator, max_side: int | None) -> tuple[int, int, float]:
    weights = np.array([p for _, p in _SIZES])
    w, h = _SIZES[int(rng.choice(len(_SIZES), p=weights / weights.sum()))][0]
    scale = 1.0
    if max_side is not None and max(w, h) > max_side:
        scale = max_side / max(w, h)
        w, h = max(1, round(w * scale)), max(1, round(h * scale))
    return w, h, scale


def _render(rng: np.random.Generator, style: _Style, max_side: int | None) -> tuple[Image.Image, tuple]:
    """One RGB image of a category and the bounding box (x1, y1, x2, y2) of its object."""
    w, h, scale = _image_size(rng, max_side)
    m = min(w, h)

    # Background: a muted colour with soft variations of light and tint, and a gentle gradient; all smooth,
    # so they are drawn on a coarse grid and upsampled once.
    base = np.array(_rgb(rng.random(), rng.uniform(0.0, 0.25), rng.uniform(0.25, 0.7)), np.float32)
    gw, gh = _grid_size(w, h, 120 * scale)
    gx, gy = rng.uniform(-30, 30, size=2)
    coarse = (
        base
        + 30.0 * rng.standard_normal((gh, gw, 1), dtype=np.float32)
        + 8.0 * rng.standard_normal((gh, gw, 3), dtype=np.float32)
        + (gx * np.linspace(-1, 1, gw, dtype=np.float32))[None, :, None]
        + (gy * np.linspace(-1, 1, gh, dtype=np.float32))[:, None, None]
    )
    canvas = Image.fromarray(np.clip(coarse, 0, 255).astype(np.uint8)).resize((w, h), Image.Resampling.BICUBIC)

    # Clutter: muted blobs, boxes and sticks.
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(3, 9))):
        r = rng.uniform(0.03, 0.12) * m
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        colour = _rgb(rng.random(), rng.uniform(0.0, 0.3), rng.uniform(0.15, 0.9))
        kind = int(rng.integers(3))
        box = [x - r, y - r * rng.uniform(0.5, 1.0), x + r, y + r * rng.uniform(0.5, 1.0)]
        if kind == 0:
            draw.ellipse(box, fill=colour)
        elif kind == 1:
            draw.rectangle(box, fill=colour)
        else:
            a = rng.uniform(0, math.pi)
            dx, dy = 2 * r * math.cos(a), 2 * r * math.sin(a)
            draw.line(
                [(x - dx, y - dy), (x + dx, y + dy)],
                fill=colour,
                width=max(1, round(0.15 * r)),
            )

    # The object: the category's shape and colour family, large and near the middle.
    radius = rng.uniform(0.22, 0.38) * m
    angle = rng.uniform(-0.35, 0.35)
    sx, sy = radius * rng.uniform(0.88, 1.12), radius * rng.uniform(0.88, 1.12)
    cx = rng.uniform(max(radius, 0.3 * w), max(radius, min(w - radius, 0.7 * w)))
    cy = rng.uniform(max(radius, 0.3 * h), max(radius, min(h - radius, 0.7 * h)))

    def place(poly: _Polygon, shrink: float = 1.0) -> _Polygon:
        return [(cx + x, cy + y) for x, y in _rotated([(px * sx * shrink, py * sy * shrink) for px, py in poly], angle)]

    mask = Image.new("L", (w, h), 0)
    mdraw = ImageDraw.Draw(mask)
    for poly, fill in _SHAPES[style.shape]:
        mdraw.polygon(place(poly), fill=255 if fill else 0)
    bbox = mask.getbbox() or (0, 0, w, h)
    hue = style.hue + rng.uniform(-0.02, 0.02)
    colour = _rgb(hue, rng.uniform(0.65, 1.0), rng.uniform(0.65, 1.0))
    canvas.paste(colour, (0, 0), mask)
    if style.core_hue is not None:
        core = Image.new("L", (w, h), 0)
        cdraw = ImageDraw.Draw(core)
        for poly, fill in _SHAPES[style.shape]:
            cdraw.polygon(place(poly, 0.5), fill=255 if fill else 0)
        canvas.paste(_rgb(style.core_hue, 0.9, 0.9), (0, 0), core)

    # Photographic texture over everything: multi-scale light variation and sensor-like grain.
    out = np.asarray(canvas, np.float32)
    out *= _texture(rng, w, h, scale)[..., None]
    out += _GRAIN * rng.standard_normal((h, w, 1), dtype=np.float32)
    np.clip(out, 0, 255, out=out)
    return Image.fromarray(out.astype(np.uint8)), bbox


def _jpeg(image: Image.Image, quality: int) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _quality(rng: np.random.Generator) -> int:
    return int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))


def _quirk_bytes(kind: str, image: Image.Image, quality: int) -> bytes:
    if kind == "cmyk":
        return _jpeg(image.convert("CMYK"), quality)
    if kind == "grayscale":
        return _jpeg(image.convert("L"), quality)
    if kind == "png":
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()
    if kind == "truncated":
        data = _jpeg(image, quality)
        scan = data.find(b"\xff\xda")  # start of scan: cut halfway through the entropy-coded data
        return data[: scan + (len(data) - scan) // 2]
    return b""


def _train_numbers(seed: int, index: int, count: int) -> list[int]:
    """Distinct, unordered file numbers like ImageNet's (``n01440764_10026``), stable for a seed."""
    rng = np.random.default_rng([seed, 3, index])
    high = max(1000, 13 * count)
    return [int(n) + 1 for n in rng.choice(high, size=count, replace=False)]


def _write(path: Path, data: bytes) -> int:
    path.write_bytes(data)
    return len(data)


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
    extra = len(_QUIRK_KINDS) if quirks else 0
    total_files = classes * images_per_class + extra + classes * val_per_class

    images = val_images = total_bytes = 0
    quirk_paths: dict[str, str] = {}
    with progress_bar(total_files, "synthetic ImageNet", unit="img") as bar:
        for k, wnid in enumerate(wnids):
            style = _style(k)
            folder = train_dir / wnid
            folder.mkdir(parents=True, exist_ok=True)
            # Numbers are drawn for the quirk files too, so regular file names do not depend on `quirks`.
            numbers = _train_numbers(seed, k, images_per_class + len(_QUIRK_KINDS))
            for i in range(images_per_class):
                rng = np.random.default_rng([seed, 0, k, i])
                image, _ = _render(rng, style, max_side)
                total_bytes += _write(folder / f"{wnid}_{numbers[i]}.JPEG", _jpeg(image, _quality(rng)))
                images += 1
                bar.update(1)
            if quirks and k == 0:
                for j, kind in enumerate(_QUIRK_KINDS):
                    rng = np.random.default_rng([seed, 2, k, j])
                    image, _ = _render(rng, style, max_side)
                    path = folder / f"{wnid}_{numbers[images_per_class + j]}.JPEG"
                    total_bytes += _write(path, _quirk_bytes(kind, image, _quality(rng)))
                    quirk_paths[kind] = str(path)
                    images += 1
                    bar.update(1)

        rows: list[str] = []
        if val_per_class:
            val_dir.mkdir(parents=True, exist_ok=True)
            order = np.random.default_rng([seed, 4]).permutation(np.repeat(np.arange(classes), val_per_class))
            for j, k in enumerate(order.tolist()):
                rng = np.random.default_rng([seed, 1, j])
                image, (x1, y1, x2, y2) = _render(rng, _style(k), max_side)
                image_id = f"ILSVRC2012_val_{j + 1:08d}"
                total_bytes += _write(val_dir / f"{image_id}.JPEG", _jpeg(image, _quality(rng)))
                rows.append(f"{image_id},{wnids[k]} {x1} {y1} {x2 - 1} {y2 - 1} ")
                val_images += 1
                bar.update(1)

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
