"""The input pipeline: compressed image bytes -> decode -> augment -> batch -> prefetch, all in tf.data.

Images stay compressed for as long as possible. File paths (cheap strings) are shuffled every pass over them, each
pass's order and each image's crop a function of the seed and the image's place in the stream, the
bytes are read in parallel (and, with ``cache=True``, kept in memory still compressed), and each image is
decoded only when its batch is built, in ``parallel`` calls at once, while the previous batch trains
(``prefetch``). Pixels stay ``uint8`` all the way to the model, whose first layer normalises them, so a
batch costs a quarter of the memory and host-to-device bandwidth of ``float32``. How one image is decoded
is :mod:`alexnet.input.decode`'s job; which images are usable, :mod:`alexnet.input.scan`'s.

As a last line of defence, the training dataset skips any image that still cannot be read or decoded (a file
damaged since it was checked), that image alone, never its batch or the epoch, and keeps its path in a
:class:`DecodeFailures` when given one (an image is entered there before it is read and taken out once decoded:
what is left are the images skipped and those being decoded at that moment). The evaluation datasets, a training
run's validation (:func:`validation_dataset`) and :func:`exact_eval_dataset`, drop nothing: their counts must
be exact, so a decode that fails there stops the iteration.

:func:`synthetic_dataset` is a twin of :func:`train_dataset` made of random ``uint8`` batches of the same
shape, for tests and for measuring the model's speed without the input pipeline.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..data import images as image_checks
from ..errors import AlexnetError
from ..tfimport import tf, unconverted
from .decode import decode_for_eval, decode_for_training, decode_ten_crops

AUTOTUNE = tf.data.AUTOTUNE

logger = logging.getLogger(__name__)


def num_parallel_calls(parallel: int | None) -> int:
    """``parallel`` (checked by the declaration of the setting that gives it) as given to ``Dataset.map``: ``None``
    means ``AUTOTUNE``, one call per usable CPU (see :func:`dataset_options`)."""
    return AUTOTUNE if parallel is None else int(parallel)


def dataset_options(training: bool = True, seeded: bool = False) -> tf.data.Options:
    """tf.data options shared by every dataset of the package.

    Auto-sharding is off because the data is already partitioned per worker (each worker reads its own
    files); training datasets are non-deterministic (elements come out as soon as they are decoded) unless
    ``seeded``: a seeded run's batches hold the same images, cropped alike, in the same order.

    tf.data's autotuning model is off: a map left at ``AUTOTUNE`` then runs one call per CPU this process may use,
    and a prefetch left at ``AUTOTUNE`` grows its buffer whenever its consumer has to wait. With the model on, the
    end of an iterator that Keras's ``fit`` consumed waited for the model's thread to wake from its sleep, which
    doubles in length as the iterator lives: 9 to 33 s after a ``fit`` in the runs measured here, paid at every
    change of image size and at the end of every training run. The model gained nothing on these pipelines:
    decoding for training went as fast on one core and as fast or faster on two without it (the README's
    benchmark section has the numbers).
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = not training or seeded
    options.autotune.enabled = False
    options.experimental_optimization.map_parallelization = True
    return options


@contextlib.contextmanager
def untuned_device_datasets() -> Iterator[None]:
    """While it lasts, the datasets a distribution strategy makes to hand this worker's batches to each of its
    devices run without tf.data's autotuning model, as the package's own pipelines do (:func:`dataset_options`).

    A strategy other than the default one iterates a distributed dataset through a multi-device iterator, which
    builds a small dataset per device (a generator and a prefetch) with TensorFlow's default options: the model is
    on there, and deleting the iterator waits for the model's thread to wake from its sleep. A ``fit`` ends by
    deleting its iterator, so each change of image size and the end of training waited 40 to 50 s on a worker of
    a two-worker run, the other workers waiting for it in the next collective. TensorFlow has no public setting for
    those datasets' options; without the hook this relies on (``multi_device_iterator_ops._create_device_dataset``),
    the datasets keep TensorFlow's defaults and training goes on as before.
    """
    from tensorflow.python.data.ops import multi_device_iterator_ops as devices

    make = getattr(devices, "_create_device_dataset", None)
    if make is None or getattr(make, "untuned", False):  # not there, or already untuned by an enclosing call
        if make is None:
            logger.debug("This TensorFlow has no multi_device_iterator_ops._create_device_dataset: the datasets "
                         "a strategy makes per device keep tf.data's autotuning.")
        yield
        return
    options = tf.data.Options()
    options.autotune.enabled = False

    def untuned(*args: object, **kwargs: object) -> tf.data.Dataset:
        return make(*args, **kwargs).with_options(options)

    untuned.untuned = True  # type: ignore[attr-defined]
    devices._create_device_dataset = untuned
    try:
        yield
    finally:
        devices._create_device_dataset = make


def as_string_list(files: Sequence[str] | np.ndarray, name: str) -> list[str]:
    if isinstance(files, (str, bytes)):
        files = [files]
    out = [f.decode() if isinstance(f, bytes) else str(f) for f in list(files)]
    if not out:
        raise AlexnetError(f"`{name}` is empty: there are no images to read.")
    return out


def _file_dataset(files: Sequence[str], labels: Sequence[int]) -> tf.data.Dataset:
    files = as_string_list(files, "files")
    label_ids = np.asarray(labels, dtype=np.int32).reshape(-1)
    if len(label_ids) != len(files):
        raise AlexnetError(f"There are {len(files)} files but {len(label_ids)} labels: give one label per file.")
    return tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.constant(label_ids)))


def _read(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A file's bytes and its label."""
    return tf.io.read_file(path), label


class DecodeFailures:
    """The training images a :func:`train_dataset` could not read or decode, and skipped: each image is entered here
    (its path) before it is read and taken out once decoded, so that those left are the images skipped, with those
    being read or decoded at that moment (:meth:`pending` holds both: tell them apart by checking the images again).
    One image skipped at several passes is one entry."""

    def __init__(self) -> None:
        self.table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=0)

    def enter(self, path: tf.Tensor) -> tf.Operation:
        return self.table.insert(path[None], tf.constant([1], tf.int64))

    def leave(self, path: tf.Tensor) -> tf.Operation:
        return self.table.remove(path[None])

    def pending(self) -> list[str]:
        """The paths entered and not taken out: images skipped, or being read or decoded now."""
        keys, _ = self.table.export()
        return sorted(key.decode() for key in keys.numpy().tolist())


def train_dataset(
    files: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    image_size: int = 224,
    *,
    parallel: int | None = None,
    cache: bool = False,
    seed: int | None = None,
    start: int = 0,
    repeat: bool = True,
    drop_remainder: bool = True,
    area_range: tuple[float, float] = (0.08, 1.0),
    aspect_ratio_range: tuple[float, float] = (3 / 4, 4 / 3),
    lighting: float = 0.0,
    failures: DecodeFailures | None = None,
) -> tf.data.Dataset:
    """The training dataset: batches ``(uint8 [batch_size, image_size, image_size, 3], int32 [batch_size])``.

    The images come as a stream of passes over the files, each pass every file exactly once in a new random
    order, and each image of the stream cropped, flipped and coloured at random (:func:`decode_for_training`: its
    crop's ``area_range`` and ``aspect_ratio_range``, its colour noise's ``lighting``). Both are functions of
    ``seed`` and the image's place in the stream alone (:func:`stream_orders`, :func:`image_seeds`), not of what
    was drawn before: the dataset of a run resumed at image ``start`` of the stream gives the images, crops and
    order the stream of the same ``seed`` gives from there (``seed`` ``None``: one drawn at random). With ``seed``
    its elements come out in order, rather than as soon as they are decoded. Files are read with ``parallel``
    parallel calls and decoded in ``parallel`` parallel calls (``None``: one per usable CPU); batches are
    prefetched. ``batch_size`` is the images of one batch (training batches per replica, see
    :class:`alexnet.train.datasets.RunDatasets`). With ``repeat=True`` the passes follow one another without end
    (Keras then needs ``steps_per_epoch``), so a batch may straddle two passes; with ``repeat=False`` the dataset
    is the rest of the pass ``start`` is in.

    With ``cache=True`` the compressed bytes of each file are kept in memory once read (never the decoded pixels),
    and read from there at the passes after: the same images in the same order as without it.

    An image that cannot be read or decoded is skipped, the batch filled with the next one; with ``failures``, its
    path is kept there (:class:`DecodeFailures`).
    """
    calls = num_parallel_calls(parallel)
    files = as_string_list(files, "files")
    label_ids = np.asarray(labels, dtype=np.int32).reshape(-1)
    if len(label_ids) != len(files):
        raise AlexnetError(f"There are {len(files)} files but {len(label_ids)} labels: give one label per file.")
    seeded = seed is not None
    key = int(np.random.default_rng().integers(2**62)) if seed is None else int(seed)
    paths, label_table = tf.constant(files), tf.constant(label_ids)
    ds = stream_orders(len(files), key, int(start), repeat=repeat)
    kept = tf.lookup.experimental.MutableHashTable(tf.int64, tf.string, default_value="") if cache else None

    def read(file: tf.Tensor, position: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        path = paths[file]
        with tf.control_dependencies([] if failures is None else [failures.enter(path)]):
            if kept is None:
                contents = tf.io.read_file(path)
            else:  # read once, then from memory (an empty file is read again, and fails again)
                held = kept.lookup(file)
                contents = tf.cond(tf.strings.length(held) > 0, lambda: held, lambda: _read_into(kept, file, path))
            return contents, label_table[file], path, position

    ds = ds.map(unconverted(read), num_parallel_calls=calls, deterministic=seeded)

    def decode(contents: tf.Tensor, label: tf.Tensor, path: tf.Tensor, position: tf.Tensor
               ) -> tuple[tf.Tensor, tf.Tensor]:
        image = decode_for_training(
            contents, image_size, image_seeds(key, position), area_range=area_range,
            aspect_ratio_range=aspect_ratio_range, lighting=lighting,
        )
        if failures is not None:  # taken out once decoded: what stays was skipped
            with tf.control_dependencies([image]):
                left = failures.leave(path)
            with tf.control_dependencies([left]):
                image = tf.identity(image)
        return image, label

    ds = ds.map(unconverted(decode), num_parallel_calls=calls, deterministic=seeded)
    # per image: one that fails costs itself alone. The map is then not fused with the batch, and with `failures` two
    # lookups of its table are added per image: 224 pixels from JPEGs of up to 400, 846 images per CPU second before,
    # 826 now (medians of 12 measures, which went from 750 to 970 on a shared machine)
    ds = ds.ignore_errors()
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(dataset_options(training=True, seeded=seeded))


def _read_into(kept: tf.lookup.experimental.MutableHashTable, file: tf.Tensor, path: tf.Tensor) -> tf.Tensor:
    """The bytes of the file at ``path``, kept in ``kept`` under its index ``file``."""
    contents = tf.io.read_file(path)
    with tf.control_dependencies([kept.insert(file[None], contents[None])]):
        return tf.identity(contents)


def stream_orders(count: int, key: int, start: int = 0, *, repeat: bool = True) -> tf.data.Dataset:
    """The files of a training stream from its image ``start`` on: ``(file, position)`` int64 pairs, the index of
    a file among ``count`` and the place of that image in the stream. Pass ``p`` (the images ``p * count`` to
    ``(p + 1) * count - 1``) is every file once, in the order of a stateless shuffle seeded by ``key`` and ``p``
    alone; ``repeat=False`` ends the stream with the pass ``start`` is in."""
    first, skip = divmod(int(start), count)
    passes = tf.data.Dataset.range(first, 2**62 if repeat else first + 1)
    base = tf.constant([key, 0], tf.int64)

    def one_pass(p: tf.Tensor) -> tf.data.Dataset:
        order = tf.random.experimental.stateless_shuffle(
            tf.range(count, dtype=tf.int64), seed=tf.random.experimental.stateless_fold_in(base, p))
        return tf.data.Dataset.from_tensor_slices((order, p * count + tf.range(count, dtype=tf.int64)))

    return passes.flat_map(unconverted(one_pass)).skip(skip)


def image_seeds(key: int, position: tf.Tensor) -> tf.Tensor:
    """The ``[2]`` int64 seed of the random crop, flip and colour noise of the image at ``position`` of a training
    stream seeded by ``key`` (:func:`decode_for_training`): a function of the two alone."""
    return tf.random.experimental.stateless_fold_in(tf.constant([key, 1], tf.int64), position)


def validation_dataset(
    files: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    image_size: int = 224,
    *,
    length: int,
    parallel: int | None = None,
    cache: bool = False,
) -> tf.data.Dataset:
    """The validation of a training run: ``files`` once, in order, padded to ``length`` images, without end.

    Batches are ``(uint8 [batch_size, image_size, image_size, 3], int32 [batch_size], float32 [batch_size])``:
    :func:`decode_for_eval`'s centre crops, labels, and weights, 1 for an image of ``files`` and 0 for the
    padding after them (black images of label 0), so that sums weighted by them count every file exactly once.
    The ``length`` images (``files`` first; ``files`` may be empty) repeat without end and every batch is whole:
    a run whose workers take ``length / steps`` images a step runs ``steps`` steps per pass, the same on every
    worker, and each pass starts where the last one ended. Nothing is shuffled, and nothing dropped: an image
    that cannot be decoded raises a TensorFlow error when its batch is reached. ``cache=True`` keeps the
    compressed bytes in memory.
    """
    files = list(files)
    if len(files) > length:
        raise AlexnetError(f"{len(files)} validation images do not fit in a pass of {length}; this is a bug.")
    calls = num_parallel_calls(parallel)
    blank = (tf.zeros([image_size, image_size, 3], tf.uint8), tf.constant(0, tf.int32), tf.constant(0.0))
    ds = tf.data.Dataset.from_tensors(blank).repeat(length - len(files))
    if files:
        real = _file_dataset(files, labels).map(unconverted(_read), num_parallel_calls=calls)
        if cache:
            real = real.cache()
        real = real.map(unconverted(lambda contents, label: (decode_for_eval(contents, image_size), label,
                                                         tf.constant(1.0))),
                        num_parallel_calls=calls)
        ds = real.concatenate(ds)
    ds = ds.repeat().batch(batch_size, drop_remainder=True).prefetch(AUTOTUNE)
    return ds.with_options(dataset_options(training=False))


#: Views per image of :func:`exact_eval_dataset`: the centre crop, or the paper's ten crops.
EVAL_CROPS = (1, 10)


def traced_once(fn: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    """``fn``, a function of one string tensor (a file's bytes or path), as a ``tf.function`` traced when first
    called. tf.data traces the function of every ``map`` again for each dataset it builds; a mapped function that
    calls this one finds it traced, so that an evaluation, a scan of images, another model's evaluation in the same
    session cost their reading and decoding alone (tracing the decoding of every format took 2 to 3 s of each)."""
    return tf.function(fn, input_signature=[tf.TensorSpec([], tf.string)], autograph=False)


def eval_decoder(image_size: int, crops: int = 1) -> Callable[[tf.Tensor], tf.Tensor]:
    """An image's bytes decoded into its evaluation views (:func:`decode_for_eval` for ``crops=1``,
    :func:`decode_ten_crops` for 10), traced once per process for each ``image_size`` and pixel limit
    (:data:`alexnet.data.images.MAX_PIXELS`, which the graph holds; :func:`traced_once`)."""
    return _eval_decoder(image_size, crops, image_checks.MAX_PIXELS)


@functools.cache
def _eval_decoder(image_size: int, crops: int, pixel_limit: int) -> Callable[[tf.Tensor], tf.Tensor]:
    decode = decode_for_eval if crops == 1 else decode_ten_crops
    return traced_once(lambda contents: decode(contents, image_size))


def exact_eval_dataset(
    files: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    image_size: int = 224,
    *,
    crops: int = 1,
    parallel: int | None = None,
) -> tf.data.Dataset:
    """Every file once, in order, in batches of ``batch_size`` (the last one smaller), and nothing dropped.

    With ``crops=1`` the images are :func:`decode_for_eval`'s centre crops, ``uint8 [batch, image_size,
    image_size, 3]``; with ``crops=10`` :func:`decode_ten_crops`'s views, ``uint8 [batch, 10, image_size,
    image_size, 3]``. Labels are ``int32 [batch]``. No batch is ever dropped: a
    file that cannot be decoded raises a TensorFlow error when its batch is reached (batch ``k`` holds files
    ``k * batch_size`` onwards), so counts made over it are exact.
    """
    if crops not in EVAL_CROPS:
        raise AlexnetError(f"`crops` must be 1 (the centre crop) or 10 (corners, centre and mirrors), not {crops!r}.")
    calls = num_parallel_calls(parallel)
    decode = eval_decoder(image_size, crops)
    ds = _file_dataset(files, labels)
    ds = ds.map(unconverted(lambda path, label: (decode(tf.io.read_file(path)), label)),
                num_parallel_calls=calls, deterministic=True)
    # a batch of more than every file holds them all (a batch size of 1e10 hung before the first batch)
    ds = ds.batch(max(1, min(int(batch_size), len(files))), drop_remainder=False).prefetch(AUTOTUNE)
    return ds.with_options(dataset_options(training=False))


def synthetic_dataset(
    batch_size: int,
    image_size: int = 224,
    num_classes: int = 1000,
    steps: int | None = None,
    *,
    seed: int | None = None,
    distinct_batches: int = 4,
) -> tf.data.Dataset:
    """Random batches shaped like :func:`train_dataset`'s, for tests and for timing the model alone.

    Yields ``(uint8 [batch_size, image_size, image_size, 3], int32 [batch_size])``. A few distinct batches
    (``distinct_batches``) are made once and repeated, so producing a batch costs next to nothing;
    ``steps`` batches in all, or without end when ``None``.
    """
    rng = np.random.default_rng(seed)
    distinct = max(1, int(distinct_batches))
    images = rng.integers(0, 256, size=(distinct, batch_size, image_size, image_size, 3), dtype=np.uint8)
    labels = rng.integers(0, num_classes, size=(distinct, batch_size), dtype=np.int32)
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    if steps is not None:
        ds = ds.take(int(steps))
    ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(dataset_options(training=True))
