"""Tiny image trees for the pipeline, model and training tests (no TensorFlow import here)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

# Colours far apart, so that a small network can tell the classes apart after a few dozen steps.
PALETTE = [
    (220, 40, 40),
    (40, 200, 60),
    (40, 70, 220),
    (230, 210, 40),
    (200, 50, 210),
    (40, 210, 210),
    (250, 250, 250),
    (20, 20, 20),
]


def class_image(rng: np.random.Generator, label: int, height: int, width: int) -> Image.Image:
    """An RGB image of class ``label``: its colour with noise, and a brighter square at a random place."""
    base = np.array(PALETTE[label % len(PALETTE)], dtype=np.int16)
    pixels = base + rng.integers(-30, 31, size=(height, width, 3))
    side = max(2, min(height, width) // 3)
    top, left = rng.integers(0, height - side + 1), rng.integers(0, width - side + 1)
    pixels[top : top + side, left : left + side] += 25
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def jpeg_bytes(image: Image.Image, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90, **kwargs)
    return buffer.getvalue()


def make_tree(
    root: Path,
    classes: int = 4,
    per_class: int = 12,
    val_per_class: int = 4,
    seed: int = 0,
    min_side: int = 40,
    max_side: int = 90,
) -> dict:
    """Write ``<root>/train/<wnid>/*.JPEG`` and ``<root>/val/*.JPEG``; return the partition-shaped dict."""
    rng = np.random.default_rng(seed)
    categories = [f"n{index:08d}" for index in range(classes)]
    data: dict = {"image": [], "category": [], "label": [], "categories": categories, "num_classes": classes}
    data.update(val_image=[], val_label=[], val_category=[])
    for label, wnid in enumerate(categories):
        folder = root / "train" / wnid
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class + val_per_class):
            h, w = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
            image = class_image(rng, label, h, w)
            if i < per_class:
                path = folder / f"{wnid}_{i}.JPEG"
                prefix = ""
            else:
                (root / "val").mkdir(exist_ok=True)
                path = root / "val" / f"val_{wnid}_{i}.JPEG"
                prefix = "val_"
            path.write_bytes(jpeg_bytes(image))
            data[prefix + "image"].append(str(path))
            data[prefix + "label"].append(label)
            data[prefix + "category"].append(wnid)
    return data


def write_quirks(folder: Path, seed: int = 1, side: int = 64) -> dict[str, Path]:
    """The odd files of real ImageNet, plus broken ones: name -> path. Colours: cmyk/png red, gray mid-grey."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    red = np.zeros((side, side + 16, 3), dtype=np.uint8)
    red[...] = (210, 30, 30)
    red = Image.fromarray(red)
    good = class_image(rng, 1, side, side)
    paths = {name: folder / f"{name}.JPEG" for name in ("cmyk", "grayscale", "png", "truncated", "empty")}
    paths["cmyk"].write_bytes(jpeg_bytes(red.convert("CMYK")))
    paths["grayscale"].write_bytes(jpeg_bytes(Image.fromarray(np.full((side, side), 128, np.uint8), "L")))
    buffer = io.BytesIO()
    red.save(buffer, "PNG")
    paths["png"].write_bytes(buffer.getvalue())
    whole = jpeg_bytes(good)
    paths["truncated"].write_bytes(whole[: len(whole) // 2])
    paths["empty"].write_bytes(b"")
    return paths
