"""The image formats read, by their first bytes and by their file names, without TensorFlow: what
:mod:`alexnet.input.decode` decodes, ``alexnet_predict()`` takes and a folder given to it stands for."""

from __future__ import annotations

#: The first bytes of every JPEG (start-of-image marker and the next marker's prefix).
JPEG_MAGIC = b"\xff\xd8\xff"

#: The image formats read (by :func:`~alexnet.input.decode.decode_for_eval`, so by ``alexnet_predict()`` and an
#: export's serving signature), each with the first bytes that mark it: ``(offset, bytes)`` pairs that all match.
#: TensorFlow decodes more (JPEG XL), but only these are sized from their header
#: (:func:`~alexnet.input.headers.header_pixels`) and read; TIFF, HEIC and others are not.
IMAGE_FORMATS: dict[str, tuple[tuple[int, bytes], ...]] = {
    "JPEG": ((0, JPEG_MAGIC),),
    "PNG": ((0, b"\x89PNG"),),
    "GIF": ((0, b"GIF8"),),
    "BMP": ((0, b"BM"),),
    "WebP": ((0, b"RIFF"), (8, b"WEBP")),
}

#: The file name endings of :data:`IMAGE_FORMATS`: the files a folder given to ``alexnet_predict()`` stands for.
IMAGE_EXTENSIONS: frozenset[str] = frozenset({".jpeg", ".jpg", ".png", ".gif", ".bmp", ".webp"})

#: What :func:`image_format` says of an animated WebP, which TensorFlow does not decode to RGB (still WebPs are read).
ANIMATED_WEBP = "animated WebP"
#: Why an animated WebP is not used, as a prediction and an export's serving function say it.
ANIMATED_WEBP_REASON = "an animated WebP is not read (a still one is)"


def formats_read(last: str = "or") -> str:
    """The names of :data:`IMAGE_FORMATS` in a sentence: ``JPEG, PNG, GIF, BMP or WebP``."""
    names = list(IMAGE_FORMATS)
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


def _is_animated_webp(head: bytes) -> bool:
    """Do these first bytes of a WebP declare an animation (the ``VP8X`` chunk's animation flag)?"""
    return head[12:16] == b"VP8X" and len(head) > 20 and bool(head[20] & 0x02)


def image_format(data: bytes) -> str | None:
    """The name of the format of ``data`` among :data:`IMAGE_FORMATS` by its first bytes, :data:`ANIMATED_WEBP`, or
    ``None`` for any other (not read)."""
    for name, marks in IMAGE_FORMATS.items():
        if all(data[offset : offset + len(mark)] == mark for offset, mark in marks):
            return ANIMATED_WEBP if name == "WebP" and _is_animated_webp(data[:32]) else name
    return None


__all__ = ["ANIMATED_WEBP", "IMAGE_EXTENSIONS", "IMAGE_FORMATS", "JPEG_MAGIC", "formats_read", "image_format"]
