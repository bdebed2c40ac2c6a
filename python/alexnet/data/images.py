"""An image checked as an upload stores it: sized from its header, decoded fully with Pillow, and re-encoded when
asked.

Real ImageNet holds a few odd files: CMYK and grayscale JPEGs and a PNG named ``.JPEG``, which are usable
(they decode to RGB), and, in copies that were cut short, truncated or empty files, which are not.
:func:`check_image` tells them apart by decoding each one, as ``imagenet_upload()`` does for every file it
stores and ``alexnet_predict()`` for every image it is given. The quick rule that training, evaluation and the
benchmark apply to files, in TensorFlow and in parallel, is :func:`alexnet.input.scan.scan_images`.

Before anything of an image is decoded, its size is read from its header (Pillow's lazy open): an image of more
than :data:`MAX_PIXELS` is refused, by the upload (unless ``resize`` shrinks it), by training's and evaluation's
scan, by prediction and by an export's serving signature alike.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Iterator

#: The JPEG quality of the images an upload re-encodes, unless told otherwise (the benchmark's copies too).
DEFAULT_QUALITY = 90

#: The most pixels (width times height) an image may declare to be stored on a board as it is, trained on,
#: evaluated or predicted: a larger one is refused from its header, without being decoded. It is Pillow's default
#: ``MAX_IMAGE_PIXELS``, above which Pillow warns of a possible decompression bomb (a small file that decodes to
#: gigabytes), and over twice the 5980 x 6430 pixels that NVIDIA DALI's ImageNet examples size their decoder's
#: buffers for as ImageNet's largest image; decoded, an image at the limit takes 270 MB as RGB, every epoch that
#: reads it. An upload's ``max_pixels`` may only lower it.
MAX_PIXELS = 89_478_485

#: The most bytes an image file of an archive may take: an upload reads no more of a member than that into memory,
#: whatever its header says it holds (a small archive can declare, or inflate to, gigabytes). Far above any image
#: within :data:`MAX_PIXELS_TO_SHRINK` in JPEG, and of the order of one decoded at that limit.
MAX_IMAGE_BYTES = 256 << 20

#: Why a member over :data:`MAX_IMAGE_BYTES` is left out, with its ``size``.
TOO_MANY_BYTES = ("says it holds {size:,} bytes, more than an image file may take ({limit:,}): it is left out "
                  "unread; remove it from the archive if it is not an image")


def too_many_bytes(size: int) -> str | None:
    """Why a member of ``size`` bytes (as its archive declares it) is not read, or None when it may be."""
    return TOO_MANY_BYTES.format(size=size, limit=MAX_IMAGE_BYTES) if size > MAX_IMAGE_BYTES else None


#: The most pixels of an image an upload decodes to shrink it under ``resize``: Pillow's own limit (twice its
#: ``MAX_IMAGE_PIXELS``), above which it refuses to open an image. A larger image is refused, resized or not.
MAX_PIXELS_TO_SHRINK = 2 * MAX_PIXELS

#: Why an image above a limit of decoding is refused, with its ``pixels`` and the ``limit`` (an export's serving
#: signature says it too).
TOO_LARGE = "too large to decode safely ({pixels} pixels, more than the limit {limit})"

#: Why an upload leaves out an image above :data:`MAX_PIXELS_TO_SHRINK` (the ``limit``), which nothing it is given
#: would store.
TOO_LARGE_FOR_ANY = ("too large to decode safely ({pixels} pixels, more than the limit {limit}, the most an upload "
                     "decodes, whatever `resize` and `max_pixels` say)")

#: Why an upload leaves out an image of more than its ``max_pixels`` (the ``limit``) stored as it is.
TOO_LARGE_TO_STORE = ("too large to store as it is ({pixels} pixels, more than max_pixels = {limit}): give `resize` "
                      "to store it shrunk")

#: Why an upload leaves out an image still above its ``max_pixels`` once shrunk under ``resize`` (a panorama).
TOO_LARGE_SHRUNK = ("too large to store even shrunk ({pixels} pixels at {width}x{height}, more than "
                    "max_pixels = {limit})")


@contextlib.contextmanager
def own_pixel_limit() -> Iterator[None]:
    """While the package opens images with Pillow under its own limit (:data:`MAX_PIXELS`, read from each header and
    named in what it says of each image it refuses or shrinks), Pillow's warning of a possible decompression bomb
    ("could be decompression bomb DOS attack", for an image above the same limit) is not shown.

    Python's warning filters belong to the whole process: the thread that starts the work (an upload, a prediction)
    enters this once, and the threads it starts are covered while it lasts, where entering it in each of them would
    let one thread's exit put back the filters another still relies on. Other threads of the process do not see
    Pillow's warning meanwhile either."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        yield


def declared_pixels(path: str) -> int | None:
    """The pixels (width times height) the image file ``path`` declares in its header, read by Pillow's lazy open
    (nothing is decoded); None when Pillow cannot read it as an image."""
    from PIL import Image

    try:
        with own_pixel_limit(), Image.open(path) as img:  # the caller says what it finds
            width, height = img.size
            return width * height
    except Image.DecompressionBombError as err:  # above Pillow's own limit
        return _bomb_pixels(err)
    except (OSError, SyntaxError, ValueError):
        return None


def check_image(data: bytes | bytearray, *, resize: int | None = None, quality: int = DEFAULT_QUALITY,
                max_pixels: int | None = None) -> tuple[bytes | bytearray | None, str]:
    """Decode ``data`` fully; return ``(bytes to store, "")`` or ``(None, reason)`` for a bad image.

    CMYK, grayscale and PNG-in-JPEG files decode and are kept as they are. With ``resize``, images whose
    short side is above ``resize``, or that are not RGB JPEGs, are re-encoded as RGB JPEG at ``quality``
    with the short side at most ``resize`` pixels; other images keep their original bytes.

    The image's size is read from its header first, and nothing of it is decoded when it is too large: an image kept
    as it is may have at most :data:`MAX_PIXELS`, or ``max_pixels`` (an upload's, which then names it in the reason
    with what to give instead); one re-encoded under ``resize`` at most :data:`MAX_PIXELS_TO_SHRINK`, and
    ``max_pixels`` once shrunk.
    """
    from PIL import Image, UnidentifiedImageError

    limit = MAX_PIXELS if max_pixels is None else max_pixels  # read when called: a test may lower MAX_PIXELS
    if not data:
        return None, "empty file"
    try:
        with Image.open(io.BytesIO(data)) as img:  # lazy: the header is read, nothing decoded
            fmt, mode, (width, height) = img.format, img.mode, img.size
            pixels = width * height
            if resize is None or (fmt == "JPEG" and mode == "RGB" and min(width, height) <= resize):
                if pixels > limit:
                    return None, _too_large((width, height), limit, max_pixels, resize)
                if fmt == "JPEG":
                    # Decode at 1/8 scale: every entropy-coded byte is still read, so truncation shows,
                    # at a fraction of the cost of a full decode.
                    img.draft(mode, (max(1, width // 8), max(1, height // 8)))
                img.load()
                return data, ""
            if pixels > MAX_PIXELS_TO_SHRINK:
                return None, TOO_LARGE_FOR_ANY.format(pixels=pixels, limit=MAX_PIXELS_TO_SHRINK)
            scale = min(1.0, resize / min(width, height))
            target = (max(1, round(width * scale)), max(1, round(height * scale)))
            if target[0] * target[1] > limit:
                return None, TOO_LARGE_SHRUNK.format(pixels=target[0] * target[1], width=target[0], height=target[1],
                                                     limit=limit)
            if fmt == "JPEG":
                img.draft("RGB", target)
            rgb = img.convert("RGB")
            if rgb.size != target:
                rgb = rgb.resize(target, Image.Resampling.BICUBIC, reducing_gap=3.0)
            out = io.BytesIO()
            rgb.save(out, format="JPEG", quality=quality)
            return out.getvalue(), ""
    except UnidentifiedImageError:
        return None, "not a recognised image format"
    except Image.DecompressionBombError as err:  # Pillow refuses before the size is known here
        declared = _bomb_pixels(err)
        pixels_said = "too many" if declared is None else declared
        if resize is None and max_pixels is None:
            return None, TOO_LARGE.format(pixels=pixels_said, limit=limit)
        return None, TOO_LARGE_FOR_ANY.format(pixels=pixels_said, limit=MAX_PIXELS_TO_SHRINK)
    except (OSError, SyntaxError, ValueError) as err:
        return None, f"truncated or corrupt ({err})"


def _bomb_pixels(error: Exception) -> int | None:
    """The pixels of the image Pillow refused to open as a decompression bomb, as its message says them."""
    found = re.search(r"\((\d+) pixels\)", str(error))
    return int(found.group(1)) if found else None


def _too_large(size: tuple[int, int], limit: int, max_pixels: int | None, resize: int | None) -> str:
    """Why an image of ``size`` kept as it is, above ``limit``, is refused. An upload's (``max_pixels`` given) says
    what to give instead: ``resize``, unless it is given already (the image's short side is within it) or could not
    decode the image either."""
    pixels = size[0] * size[1]
    if max_pixels is None:
        return TOO_LARGE.format(pixels=pixels, limit=limit)
    if pixels > MAX_PIXELS_TO_SHRINK:
        return TOO_LARGE_FOR_ANY.format(pixels=pixels, limit=MAX_PIXELS_TO_SHRINK)
    if resize is not None:
        return TOO_LARGE_SHRUNK.format(pixels=pixels, width=size[0], height=size[1], limit=limit)
    return TOO_LARGE_TO_STORE.format(pixels=pixels, limit=limit)
