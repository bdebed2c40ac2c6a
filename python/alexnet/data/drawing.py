"""Drawing synthetic ImageNet photos: a category's shape and colour over a textured, cluttered background.

Each category is a shape drawn in its own colour family at a random position, scale and angle, so a small
CNN tells the categories apart at 32-64 pixels while no two images are alike. Images have the common
ImageNet sizes (500x375, 375x500, 500x333, ...) and JPEG quality 85-95, with enough fine texture that files
average near real ImageNet's ~110 KB. Everything is drawn from the random generator it is given.
"""

from __future__ import annotations

import colorsys
import io
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

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

QUIRK_KINDS: tuple[str, ...] = ("cmyk", "grayscale", "png", "truncated", "empty")

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
class Style:
    """How one category looks: a shape, a hue and (past 60 categories) a core of a second hue."""

    shape: int
    hue: float
    core_hue: float | None


def style(index: int) -> Style:
    """How category ``index`` looks: its shape and hue, and past 60 categories a core of a second hue."""
    variant = index // (len(_SHAPES) * _HUES // math.gcd(len(_SHAPES), _HUES))
    core = None if variant == 0 else ((index % _HUES) / _HUES + 0.381966 * variant) % 1.0
    return Style(shape=index % len(_SHAPES), hue=(index % _HUES) / _HUES, core_hue=core)


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
    def octave(cells: float, amplitude: float) -> tuple[np.ndarray, tuple[int, int]]:
        gw, gh = _grid_size(w, h, max(cells * scale, 1.0))
        return amplitude * rng.standard_normal((gh, gw), dtype=np.float32), (gw, gh)

    total, _ = octave(*_OCTAVES[0])
    for cells, amplitude in _OCTAVES[1:]:
        noise, grid = octave(cells, amplitude)
        total = _upsample(total, grid) + noise
    return _upsample(total, (w, h)) + np.float32(1.0)


def _image_size(rng: np.random.Generator, max_side: int | None) -> tuple[int, int, float]:
    weights = np.array([p for _, p in _SIZES])
    w, h = _SIZES[int(rng.choice(len(_SIZES), p=weights / weights.sum()))][0]
    scale = 1.0
    if max_side is not None and max(w, h) > max_side:
        scale = max_side / max(w, h)
        w, h = max(1, round(w * scale)), max(1, round(h * scale))
    return w, h, scale


def render(rng: np.random.Generator, style: Style, max_side: int | None) -> tuple[Image.Image, tuple]:
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


def jpeg(image: Image.Image, quality: int) -> bytes:
    """``image`` encoded as a JPEG of ``quality``."""
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def random_quality(rng: np.random.Generator) -> int:
    """A JPEG quality drawn from :data:`QUALITY_RANGE`, as ImageNet's photos vary."""
    return int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))


def quirk_bytes(kind: str, image: Image.Image, quality: int) -> bytes:
    """The bytes of one of real ImageNet's odd files (:data:`QUIRK_KINDS`), made from ``image``."""
    if kind == "cmyk":
        return jpeg(image.convert("CMYK"), quality)
    if kind == "grayscale":
        return jpeg(image.convert("L"), quality)
    if kind == "png":
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()
    if kind == "truncated":
        data = jpeg(image, quality)
        scan = data.find(b"\xff\xda")  # start of scan: cut halfway through the entropy-coded data
        return data[: scan + (len(data) - scan) // 2]
    return b""
