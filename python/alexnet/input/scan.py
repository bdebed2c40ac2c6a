"""The one rule for a usable image file, and the images that break it, found before training starts.

:func:`scan_images` reads every file once (in parallel, in tf.data) and checks that it is not empty, that a
JPEG header parses and the JPEG ends with its end-of-image marker (a truncated JPEG does not: TensorFlow's
decoder rejects it mid-epoch, and other decoders pad it with grey), that its header declares at most
:data:`alexnet.data.images.MAX_PIXELS` pixels (a larger image is refused before anything of it is decoded: decoded,
it would cost hundreds of megabytes every epoch), and that other formats decode. Bad files
are reported by name, counted and left out (:func:`drop_bad_images`); above a set fraction the run stops with
:class:`~alexnet.errors.BadImagesError`. ``scan_images(full=True)`` decodes every image as well, and
``scan_images(jpeg_only=True)`` (the benchmark's plain-decode reference) counts files of other formats as bad.
Training, evaluation and the benchmark all apply this rule. A category folder of the extraction cache is checked once
per fetched zip: the result is kept in the folder and read again by the next run.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..data import images as image_checks
from ..errors import BadImagesError
from ..progress import progress_bar
from ..storage import cache
from ..tfimport import tf, unconverted
from .decode import decode_any, is_jpeg, pixel_limit_check
from .pipeline import AUTOTUNE, as_string_list, dataset_options, num_parallel_calls, traced_once

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
        shape = tf.cast(tf.image.extract_jpeg_shape(contents), tf.int64)
        complete = tf.debugging.assert_equal(
            _has_end_of_image(contents), True, message="truncated JPEG (no end-of-image marker)"
        )
        with tf.control_dependencies([complete, pixel_limit_check(contents, shape[0] * shape[1])]):
            return tf.cast(tf.reduce_min(shape[:2]) * 0, tf.int32)

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


#: The version of the check: raised whenever :func:`_check_image` or what it calls changes which files it finds bad,
#: so that the results the cache recorded of an earlier one are not used.
CHECK_VERSION = 2


def check_kind(full: bool = False, jpeg_only: bool = False) -> str:
    """What the check's result depends on besides the file's bytes: the check's version (:data:`CHECK_VERSION`) and
    kind, the most pixels an image may declare (:data:`alexnet.data.images.MAX_PIXELS`) and TensorFlow's version (its
    decoders read the formats other than JPEG). A result recorded in the cache under another kind is not used."""
    what = ("full" if full else "header") + ("/jpeg-only" if jpeg_only else "")
    return f"{CHECK_VERSION}/{what}/{image_checks.MAX_PIXELS} pixels/tensorflow {tf.__version__}"


@dataclass
class _CacheFolder:
    """A category folder of the extraction cache among the files scanned: its zip, its marker's stamp when first seen,
    its files' sizes as the marker lists them, what earlier scans recorded there, and what this one adds."""

    sha256: str
    stamp: cache.Stamp
    sizes: dict[str, int]
    checked: set[str]
    bad: set[str]
    new_checked: set[str] = field(default_factory=set)
    new_bad: set[str] = field(default_factory=set)


def _cache_folder(folder: str, kind: str) -> _CacheFolder | None:
    """``folder`` as a category folder of the extraction cache, None when it is not one (it has no marker)."""
    stamp = cache.marker_stamp(folder)  # before the marker is read: a marker written anew meanwhile has another
    if stamp is None:
        return None
    marker = cache.read_marker(folder)
    if marker is None or not isinstance(marker.get("sha256"), str):
        return None
    try:
        sizes = {str(entry[0]): int(entry[1]) for entry in marker.get("files", [])}
    except (TypeError, ValueError, IndexError):
        return None
    checked, bad = cache.read_checked(folder, marker["sha256"], kind)
    return _CacheFolder(marker["sha256"], stamp, sizes, checked, bad)


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


@functools.cache
def _checker(full: bool, jpeg_only: bool, kind: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """A file's path to a zero computed only when the file passes the check of :func:`scan_images` (``full``,
    ``jpeg_only``), traced once per process for each ``kind`` (:func:`check_kind`, which names the pixel limit the
    graph holds; :func:`~alexnet.input.pipeline.traced_once`)."""
    check: Callable[[tf.Tensor], tf.Tensor] = _check_image_full if full else _check_image
    if jpeg_only:
        check = _only_jpeg(check)
    return traced_once(lambda path: tf.cast(check(tf.io.read_file(path)), tf.int64))


def _check_files(files: Sequence[str], parallel: int | None, check: Callable[[tf.Tensor], tf.Tensor]) -> np.ndarray:
    """Whether each of ``files`` passes ``check`` (of a file's path, from :func:`_checker`), each read once,
    ``parallel`` at a time."""
    calls = num_parallel_calls(parallel)
    ds = tf.data.Dataset.from_tensor_slices((tf.range(len(files), dtype=tf.int64), tf.constant(list(files))))

    def checked(index: tf.Tensor, path: tf.Tensor) -> tf.Tensor:
        return index + check(path)

    ds = ds.map(unconverted(checked), num_parallel_calls=calls, deterministic=False).ignore_errors().batch(512)
    ds = ds.prefetch(AUTOTUNE).with_options(dataset_options(training=True))
    ok = np.zeros(len(files), dtype=bool)
    with progress_bar(len(files), "Checking images", unit="img") as bar:
        seen = 0
        for batch in ds.as_numpy_iterator():
            ok[batch] = True
            seen += len(batch)
            bar.n = seen
            bar.refresh()
    return ok


def scan_images(
    files: Sequence[str], parallel: int | None = None, *, full: bool = False, jpeg_only: bool = False
) -> list[str]:
    """The files among ``files`` that cannot be used for training, in their original order.

    Every file is read once, ``parallel`` at a time. A file is bad when it cannot be read, is empty, is
    a JPEG whose header does not parse or that lacks its end-of-image marker (truncated), declares more pixels than
    :data:`alexnet.data.images.MAX_PIXELS` in its header (not decoded then), or is another format that does not
    decode. With ``full=True`` every image is also fully decoded (slower, and
    catches corruption inside the compressed data). With ``jpeg_only=True`` a file of another format (a PNG
    named ``.JPEG``) is bad too, for readers that decode nothing but JPEG.

    A file of a category folder of the extraction cache (:mod:`alexnet.storage.cache`: listed in the folder's marker,
    with the marker's size) is checked once per fetched zip: the result is recorded in the folder
    (:func:`~alexnet.storage.cache.record_checked`, for this :func:`check_kind`) and read from there by the next scan
    while the marker names the same zip. Other files are read every time.
    """
    files = as_string_list(files, "files")
    kind = check_kind(full, jpeg_only)
    folders: dict[str, _CacheFolder | None] = {}
    ok = np.zeros(len(files), dtype=bool)
    todo: list[int] = []
    recorded: dict[int, tuple[_CacheFolder, str]] = {}  # the files to scan whose result the cache will keep
    for index, path in enumerate(files):
        folder, name = os.path.split(path)
        if folder not in folders:
            folders[folder] = _cache_folder(folder, kind)
        cached = folders[folder]
        if cached is not None and name in cached.sizes and _size(path) == cached.sizes[name]:
            if name in cached.checked:
                ok[index] = name not in cached.bad
                continue
            recorded[index] = (cached, name)
        todo.append(index)
    if len(todo) < len(files):
        logger.info("%d of %d images were checked when their category was first used (the result is kept in the "
                    "cache); checking the other %d", len(files) - len(todo), len(files), len(todo))
    if todo:
        ok[todo] = _check_files([files[i] for i in todo], parallel, _checker(full, jpeg_only, kind))
    for index, (cached, name) in recorded.items():
        cached.new_checked.add(name)
        if not ok[index]:
            cached.new_bad.add(name)
    for folder, cached in folders.items():
        if cached is not None and cached.new_checked:
            cache.record_checked(folder, cached.sha256, kind, cached.new_checked, cached.new_bad, cached.stamp)
    return [f for f, good in zip(files, ok, strict=True) if not good]


def undecodable_now(files: Sequence[str]) -> list[str]:
    """The files among ``files`` that fail :func:`scan_images`'s check with ``full=True`` read as they are now, in
    their order, whatever the cache recorded of them: a handful at a time (the images a training run skipped, to
    tell them from those it was still decoding; :class:`alexnet.input.pipeline.DecodeFailures`)."""
    check = _checker(True, False, check_kind(full=True))
    bad = []
    for path in files:
        try:
            check(tf.constant(path))
        except (tf.errors.OpError, ValueError):
            bad.append(path)
    return bad


def said(path: str) -> str:
    """A bad file as a listing names it: its path, with why when it cannot be read (missing, no permission), is empty
    or its header declares more pixels than :data:`alexnet.data.images.MAX_PIXELS` (the other reasons, truncated or
    not an image, are not told apart)."""
    try:
        if os.path.getsize(path) == 0:
            return f"{path}: empty"
    except OSError as error:
        return f"{path}: cannot be read ({error.strerror or type(error).__name__})"
    pixels = image_checks.declared_pixels(path)
    if pixels is None or pixels <= image_checks.MAX_PIXELS:
        return path
    return f"{path}: {image_checks.TOO_LARGE.format(pixels=pixels, limit=image_checks.MAX_PIXELS)}"


def listing(paths: Sequence[str], shown: int) -> str:
    """The first ``shown`` of ``paths`` as a listing names them (:func:`said`), one a line, and how many more."""
    return "\n  ".join(said(path) for path in paths[:shown]) + (
        "" if len(paths) <= shown else f"\n  ... and {len(paths) - shown} more")


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
    listed = listing(bad, 20)
    if fraction > max_bad_fraction:
        raise BadImagesError(
            f"{len(bad)} of {len(files)} {what} images ({fraction:.2%}) are missing, empty, truncated, too large or "
            f"cannot be decoded, more than max_bad_fraction = {max_bad_fraction:g}:\n  {listed}\n"
            "Replace, shrink or remove these files (a board's partition in the cache: fetch it again with "
            "verify = True, which fetches damaged categories again), or raise `max_bad_fraction` to train without "
            "them."
        )
    logger.warning("Skipping %d unusable %s image(s) of %d:\n  %s", len(bad), what, len(files), listed)
    bad_set = set(bad)
    kept = [(f, y) for f, y in zip(files, labels, strict=True) if f not in bad_set]
    return [f for f, _ in kept], [y for _, y in kept]
