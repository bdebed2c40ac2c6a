"""The one rule for a usable image file, and the images that break it, found before training starts.

:func:`scan_images` reads every file once (in parallel, in tf.data) and checks that it is not empty, that a
JPEG header parses and the JPEG ends with its end-of-image marker (a truncated JPEG does not: TensorFlow's
decoder rejects it mid-epoch, and other decoders pad it with grey), and that other formats decode. Bad files
are reported by name, counted and left out (:func:`drop_bad_images`); above a set fraction the run stops with
:class:`~alexnet.errors.BadImagesError`. ``scan_images(full=True)`` decodes every image as well, and
``scan_images(jpeg_only=True)`` (the benchmark's plain-decode reference) counts files of other formats as bad.
Training, evaluation and the benchmark all apply this rule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import BadImagesError
from ..progress import progress_bar
from ..tfimport import tf
from .decode import decode_any, is_jpeg
from .pipeline import AUTOTUNE, as_string_list, dataset_options, num_parallel_calls

logger = logging.getLogger(__name__)

#: A complete JPEG ends with the end-of-image marker FF D9. Some writers append a few bytes after it, so the
#: marker is looked for in this many last bytes. Inside entropy-coded data FF is always followed by 00 or a
#: restart marker (D0-D7), so FF D9 there cannot be a false positive.
EOI_WINDOW = 64


def _has_end_of_image(contents: tf.Tensor) -> tf.Tensor:
    length = tf.strings.length(contents)
    start = tf.maximum(length - EOI_WINDOW, 0)
    tail = tf.io.decode_raw(tf.strings.substr(contents, start, length - start), tf.uint8)
    return tf.reduce_any(tf.logical_and(tf.equal(tail[:-1], 0xFF), tf.equal(tail[1:], 0xD9)))


def _check_image(contents: tf.Tensor) -> tf.Tensor:
    """A zero that can only be computed when ``contents`` is a readable, complete image; else an error."""
    not_empty = tf.debugging.assert_positive(tf.strings.length(contents), message="empty file")

    def jpeg() -> tf.Tensor:
        shape = tf.image.extract_jpeg_shape(contents)
        complete = tf.debugging.assert_equal(
            _has_end_of_image(contents), True, message="truncated JPEG (no end-of-image marker)"
        )
        with tf.control_dependencies([complete]):
            return tf.reduce_min(shape[:2]) * 0

    def other() -> tf.Tensor:
        return tf.reduce_min(tf.shape(decode_any(contents))[:2]) * 0

    with tf.control_dependencies([not_empty]):
        return tf.cond(is_jpeg(contents), jpeg, other)


def _check_image_full(contents: tf.Tensor) -> tf.Tensor:
    with tf.control_dependencies([_check_image(contents)]):
        return tf.reduce_min(tf.shape(decode_any(contents))[:2]) * 0


def _only_jpeg(check: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    """``check``, which also fails for bytes that do not start as a JPEG does."""

    def checked(contents: tf.Tensor) -> tf.Tensor:
        jpeg = tf.debugging.assert_equal(is_jpeg(contents), True, message="not a JPEG")
        with tf.control_dependencies([jpeg]):
            return check(contents)

    return checked


def scan_images(
    files: Sequence[str], parallel: int | None = None, *, full: bool = False, jpeg_only: bool = False
) -> list[str]:
    """The files among ``files`` that cannot be used for training, in their original order.

    Every file is read once, ``parallel`` at a time. A file is bad when it cannot be read, is empty, is
    a JPEG whose header does not parse or that lacks its end-of-image marker (truncated), or is another
    format that does not decode. With ``full=True`` every image is also fully decoded (slower, and
    catches corruption inside the compressed data). With ``jpeg_only=True`` a file of another format (a PNG
    named ``.JPEG``) is bad too, for readers that decode nothing but JPEG.
    """
    files = as_string_list(files, "files")
    check = _check_image_full if full else _check_image
    if jpeg_only:
        check = _only_jpeg(check)
    calls = num_parallel_calls(parallel)
    ds = tf.data.Dataset.from_tensor_slices((tf.range(len(files), dtype=tf.int64), tf.constant(files)))

    def checked(index: tf.Tensor, path: tf.Tensor) -> tf.Tensor:
        return index + tf.cast(check(tf.io.read_file(path)), tf.int64)

    ds = ds.map(checked, num_parallel_calls=calls, deterministic=False).ignore_errors().batch(512)
    ds = ds.prefetch(AUTOTUNE).with_options(dataset_options(training=True))
    ok = np.zeros(len(files), dtype=bool)
    with progress_bar(len(files), "Checking images", unit="img") as bar:
        seen = 0
        for batch in ds.as_numpy_iterator():
            ok[batch] = True
            seen += len(batch)
            bar.n = seen
            bar.refresh()
    return [f for f, good in zip(files, ok, strict=True) if not good]


def drop_bad_images(
    files: Sequence[str],
    labels: Sequence[int],
    bad: Sequence[str],
    max_bad_fraction: float,
    what: str = "training",
) -> tuple[list[str], list[int]]:
    """Leave ``bad`` files out of ``files``/``labels``; raise when there are more than ``max_bad_fraction``.

    Raises :class:`~alexnet.errors.BadImagesError` naming the bad files when their share exceeds
    ``max_bad_fraction``; otherwise logs them by name with their count.
    """
    files = list(files)
    if not bad:
        return files, list(labels)
    fraction = len(bad) / len(files)
    listed = "\n  ".join(bad[:20]) + ("" if len(bad) <= 20 else f"\n  ... and {len(bad) - 20} more")
    if fraction > max_bad_fraction:
        raise BadImagesError(
            f"{len(bad)} of {len(files)} {what} images ({fraction:.2%}) are empty, truncated or cannot be "
            f"decoded, more than max_bad_fraction = {max_bad_fraction:g}:\n  {listed}\n"
            "Replace or remove these files (a board's partition in the cache: fetch it again with verify = True, "
            "which fetches damaged categories again), or raise `max_bad_fraction` to train without them."
        )
    logger.warning("Skipping %d unreadable %s image(s) of %d:\n  %s", len(bad), what, len(files), listed)
    bad_set = set(bad)
    kept = [(f, y) for f, y in zip(files, labels, strict=True) if f not in bad_set]
    return [f for f, _ in kept], [y for _, y in kept]
