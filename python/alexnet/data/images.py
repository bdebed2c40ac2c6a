"""What counts as a usable image, in one place, for upload, training and the benchmark.

Real ImageNet holds a few odd files: CMYK and grayscale JPEGs and a PNG named ``.JPEG``, which are usable
(they decode to RGB), and, in copies that were cut short, truncated or empty files, which are not.

- :func:`check_image` decodes an image fully (with Pillow), as an upload does for every file it stores.
- :func:`is_complete_jpeg` is the cheap check: a JPEG start marker and an end-of-image marker near the end.
  The training pipeline makes the same check inside TensorFlow with :data:`JPEG_MAGIC` and
  :data:`EOI_WINDOW` (see :mod:`alexnet.input.scan`).
"""

from __future__ import annotations

import io
import os

#: The first bytes of every JPEG (start-of-image marker and the next marker's prefix).
JPEG_MAGIC = b"\xff\xd8\xff"
#: A complete JPEG ends with the end-of-image marker FF D9. Some writers append a few bytes after it, so the
#: marker is looked for in this many last bytes. Inside entropy-coded data FF is always followed by 00 or a
#: restart marker (D0-D7), so FF D9 there cannot be a false positive.
EOI_WINDOW = 64
_EOI = b"\xff\xd9"


def is_complete_jpeg(path: str | os.PathLike) -> bool:
    """Does the file start like a JPEG and end with its end-of-image marker? (False when it cannot be read.)"""
    try:
        with open(path, "rb") as f:
            head = f.read(len(JPEG_MAGIC))
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - EOI_WINDOW))
            tail = f.read()
    except OSError:
        return False
    return head == JPEG_MAGIC and _EOI in tail


def check_image(data: bytes, *, resize: int | None = None, quality: int = 90) -> tuple[bytes | None, str]:
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
            reencode = resize is not None and (fmt != "JPEG" or mode != "RGB" or min(width, height) > resize)
            if not reencode:
                if fmt == "JPEG":
                    # Decode at 1/8 scale: every entropy-coded byte is still read, so truncation shows,
                    # at a fraction of the cost of a full decode.
                    img.draft(mode, (max(1, width // 8), max(1, height // 8)))
                img.load()
                return data, ""
            assert resize is not None
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
    except Image.DecompressionBombError as err:
        return None, f"too large to decode safely ({err})"
    except (OSError, SyntaxError, ValueError) as err:
        return None, f"truncated or corrupt ({err})"
