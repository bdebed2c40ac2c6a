"""Encoded test images made in memory: any format Pillow writes, and a PNG whose header claims a size it does not
hold (a decompression bomb's header, without the bomb)."""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any


def encoded(image: Any, fmt: str, **options: Any) -> bytes:
    """The PIL ``image`` encoded as ``fmt`` (``"PNG"``, ``"JPEG"``, ...) with Pillow's ``options``."""
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A 1x1 grey PNG whose IHDR says ``width`` x ``height`` (with its CRC fixed): a bomb's header, cheap to build.
    Whatever reads its size from the header sees ``width * height`` pixels; a decoder finds the pixels missing."""
    from PIL import Image

    data = bytearray(encoded(Image.new("L", (1, 1), 128), "PNG"))
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)
