"""The reference pipelines the input pipeline is measured against: a plain decode, and the original one.

TensorFlow is imported by the functions, after a pinned child has pinned its CPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf


def decode_dataset(contents: Sequence[bytes], batch_size: int, parallel: int) -> tf.data.Dataset:
    """The reference: each image's bytes, already in memory, through a plain full-size ``decode_jpeg``.

    Batches of the decoded images' shapes (the pixels are decoded, then dropped), endlessly.
    """
    from ..tfimport import tf

    ds = tf.data.Dataset.from_tensor_slices(tf.constant(list(contents), dtype=tf.string)).repeat()
    ds = ds.map(lambda c: tf.shape(tf.io.decode_jpeg(c, channels=3)), num_parallel_calls=parallel,
                deterministic=False)
    return ds.batch(batch_size)


def naive_dataset(
    files: Sequence[str], batch_size: int, image_size: int, parallel: int, *, repeat: bool = True,
    sequential: bool = True,
) -> tf.data.Dataset:
    """The input pipeline of the original r-tensorflow/alexnet ``alexnet_train``, for comparison.

    File names; read and ``decode_jpeg`` in one sequential map; convert to float32 in 0-1; resize to
    ``image_size`` squared; random brightness (up to 0.2), contrast and saturation (0.8-1.2) in the only
    map given ``num_parallel_calls`` (``parallel``); batches of ``batch_size``. No shuffle, no prefetch.

    With ``sequential`` (the default) tf.data's ``map_parallelization`` rewrite is switched off, so the maps
    without ``num_parallel_calls`` stay sequential as written (the TensorFlow releases that pipeline was written
    for did not apply that rewrite by default; recent ones do). ``sequential=False`` keeps the rewrite on: the
    ``naive_auto`` stage.
    """
    from ..tfimport import tf

    def jitter(image: tf.Tensor) -> tf.Tensor:
        image = tf.image.random_brightness(image, 0.2)
        image = tf.image.random_contrast(image, 0.8, 1.2)
        return tf.image.random_saturation(image, 0.8, 1.2)

    ds = tf.data.Dataset.from_tensor_slices(tf.constant(list(files)))
    if repeat:
        ds = ds.repeat()
    ds = ds.map(lambda path: tf.io.decode_jpeg(tf.io.read_file(path), channels=3))
    ds = ds.map(lambda image: tf.image.convert_image_dtype(image, tf.float32))
    ds = ds.map(lambda image: tf.image.resize(image, [image_size, image_size]))
    ds = ds.map(jitter, num_parallel_calls=parallel).batch(batch_size)
    if sequential:
        options = tf.data.Options()
        options.experimental_optimization.map_parallelization = False
        ds = ds.with_options(options)
    return ds
