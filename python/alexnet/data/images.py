"""An image checked as an upload stores it: decoded fully with Pillow, and re-encoded when asked.

Real ImageNet holds a few odd files: CMYK and grayscale JPEGs and a PNG named ``.JPEG``, which are usable
(they decode to RGB), and, in copies that were cut short, truncated or empty files, which are not.
:func:`check_image` tells them apart by decoding each one, as ``imagenet_upload()`` does for every file it
stores and ``alexnet_predict()`` for every image it is given. The quick rule that training, evaluation and the
benchmark apply to files, in TensorFlow and in parallel, is :func:`alexnet.input.scan.scan_images`.
"""

from __future__ import annotations

import io
import re

from .options import DEFAULT_QUALITY

#: The most pixels (width times height) an image may declare: more is refused without decoding it, as a possible
#: decompression bomb (a small file that decodes to gigabytes). Pillow's own limit (twice its ``MAX_IMAGE_PIXELS``),
#: which :func:`check_image` and an export's serving signature both apply.
MAX_PIXELS = 178_956_970

#: Why an image above :data:`MAX_PIXELS` is refused, with its ``pixels`` and the ``limit``.
TOO_LARGE = "too large to decode safely ({pixels} pixels, more than the limit {limit})"


def check_image(data: bytes | bytearray, *, resize: int | None = None, quality: int = DEFAULT_QUALITY) \
        -> tuple[bytes | bytearray | None, str]:
    """Decode ``data`` fully; return ``(bytes to store, "")`` or ``(None, reason)`` for a bad image.

    CMYK, grayscale and PNG-in-JPEG files decode and are kept as they are. With ``resize``, images whose
    short side is above ``resize``, or that are not RGB JPEGs, are re-encoded as RGB JPEG at ``quality``
    with the short side at most ``resize`` pixels; other images keep their original bytes.
    """
    from PIL import Image, UnidentifiedImageError

    if not data:
        return None, "empty file"
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt, mode, (width, height) = img.format, img.mode, img.size
            if width * height > MAX_PIXELS:
                return None, TOO_LARGE.format(pixels=width * height, limit=MAX_PIXELS)
            if resize is None or (fmt == "JPEG" and mode == "RGB" and min(width, height) <= resize):
                if fmt == "JPEG":
                    # Decode at 1/8 scale: every entropy-coded byte is still read, so truncation shows,
                    # at a fraction of the cost of a full decode.
                    img.draft(mode, (max(1, width // 8), max(1, height // 8)))
                img.load()
                return data, ""
            scale = min(1.0, resize / min(width, height))
            target = (max(1, round(width * scale)), max(1, round(height * scale)))
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
    except Image.DecompressionBombError as err:  # Pillow refuses before the size is known here: its message has it
        found = re.search(r"\((\d+) pixels\)", str(err))
        return None, TOO_LARGE.format(pixels=found.group(1) if found else "too many", limit=MAX_PIXELS)
    except (OSError, SyntaxError, ValueError) as err:
        return None, f"truncated or corrupt ({err})"
