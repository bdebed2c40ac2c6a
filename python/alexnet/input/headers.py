"""What an encoded image's first bytes say, in TensorFlow and without decoding it: its format
(:func:`header_format`), its pixels (:func:`header_pixels`), whether it is a JPEG (:func:`is_jpeg`), and a GIF cut
after its first frame (:func:`gif_first_frame`, since TensorFlow decodes every frame). The formats are
:data:`~alexnet.input.formats.IMAGE_FORMATS`.
"""

from __future__ import annotations

from ..tfimport import tf
from .formats import ANIMATED_WEBP, IMAGE_FORMATS, JPEG_MAGIC


def header_format(contents: tf.Tensor) -> tf.Tensor:
    """:func:`image_format` in TensorFlow, of a scalar string tensor: a scalar string, empty for a format not read."""
    head = _head(contents)
    found = tf.constant("")
    for name, marks in reversed(IMAGE_FORMATS.items()):
        match = tf.constant(True)
        for offset, mark in marks:
            match &= tf.equal(tf.strings.substr(head, offset, len(mark)), mark)
        found = tf.where(match, name, found)
    animated = (tf.equal(tf.strings.substr(head, 12, 4), b"VP8X")
                & tf.not_equal(tf.bitwise.bitwise_and(_head_bytes(contents)[20], 2), 0))
    return tf.where(tf.equal(found, "WebP") & animated, ANIMATED_WEBP, found)


def _head(contents: tf.Tensor) -> tf.Tensor:
    """The first 32 bytes of a scalar string tensor, padded with zero bytes past its end (``substr`` then never
    reads past the end)."""
    return tf.strings.substr(tf.strings.join([tf.strings.substr(contents, 0, 32), b"\0" * 32]), 0, 32)


def _head_bytes(contents: tf.Tensor) -> tf.Tensor:
    """:func:`_head` as int64 ``[32]``."""
    return tf.cast(tf.io.decode_raw(_head(contents), tf.uint8), tf.int64)


def header_pixels(contents: tf.Tensor) -> tf.Tensor:
    """The number of pixels (width times height, int64 scalar) an image of :data:`IMAGE_FORMATS` declares in its
    first bytes, read without decoding it: a JPEG's frame header (:func:`tf.io.extract_jpeg_shape`, which fails on a
    JPEG without one), a PNG's ``IHDR``, a GIF's logical screen, a BMP's info header, a WebP's ``VP8``, ``VP8L`` or
    ``VP8X`` header. 0 for bytes too short to hold the size, or of another format."""
    b = _head_bytes(contents)

    def little(start: int, count: int) -> tf.Tensor:
        return sum((b[start + i] * 256**i for i in range(count)), tf.constant(0, tf.int64))

    def big(start: int, count: int) -> tf.Tensor:
        return sum((b[start + i] * 256 ** (count - 1 - i) for i in range(count)), tf.constant(0, tf.int64))

    def bits(value: tf.Tensor, shift: int) -> tf.Tensor:  # 14 bits of a WebP size, from bit `shift`
        return tf.bitwise.bitwise_and(tf.bitwise.right_shift(value, shift), 0x3FFF)

    def signed32(value: tf.Tensor) -> tf.Tensor:  # a BMP stored top-down gives a negative height
        return tf.abs(tf.where(value >= 2**31, value - 2**32, value))

    vp8l = little(21, 4)
    chunk = tf.strings.substr(_head(contents), 12, 4)
    webp = tf.where(tf.equal(chunk, b"VP8 "), bits(little(26, 2), 0) * bits(little(28, 2), 0),
                    tf.where(tf.equal(chunk, b"VP8L"), (bits(vp8l, 0) + 1) * (bits(vp8l, 14) + 1),
                             tf.where(tf.equal(chunk, b"VP8X"), (little(24, 3) + 1) * (little(27, 3) + 1), 0)))
    sizes = {"PNG": big(16, 4) * big(20, 4), "GIF": little(6, 2) * little(8, 2),
             "BMP": signed32(little(18, 4)) * signed32(little(22, 4)), "WebP": webp, ANIMATED_WEBP: webp}
    name = header_format(contents)
    pixels = tf.constant(0, tf.int64)
    for format_name, size in sizes.items():
        pixels = tf.where(tf.equal(name, format_name), size, pixels)
    long_enough = tf.strings.length(contents) >= 30

    def jpeg() -> tf.Tensor:
        shape = tf.cast(tf.image.extract_jpeg_shape(contents), tf.int64)
        return shape[0] * shape[1]

    return tf.cond(is_jpeg(contents), jpeg, lambda: tf.where(long_enough, pixels, tf.constant(0, tf.int64)))


def webp_with_alpha(contents: tf.Tensor) -> tf.Tensor:
    """Does a WebP declare transparency (the ``VP8X`` alpha flag, or ``VP8L``'s alpha bit)? TensorFlow decodes it
    only to 4 channels."""
    b = _head_bytes(contents)
    chunk = tf.strings.substr(_head(contents), 12, 4)
    return (tf.equal(header_format(contents), "WebP")
            & ((tf.equal(chunk, b"VP8X") & tf.not_equal(tf.bitwise.bitwise_and(b[20], 0x10), 0))
               | (tf.equal(chunk, b"VP8L") & tf.not_equal(tf.bitwise.bitwise_and(b[24], 0x10), 0))))


def is_jpeg(contents: tf.Tensor) -> tf.Tensor:
    """A scalar bool tensor: do these bytes start with the JPEG start-of-image marker?"""
    return tf.equal(tf.strings.substr(contents, 0, 3), JPEG_MAGIC)


def _chain_ends(jump: tf.Tensor) -> tf.Tensor:
    """Where each position's chain of jumps ends: ``jump`` (int32 ``[m]``) gives each position the next, a position
    that is its own next ends a chain. Found by pointer doubling (each round jumps twice as far), so in at most
    ``log2(m)`` rounds of one gather each, whatever the chains."""

    def double(size: tf.Tensor, ends: tf.Tensor, _: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        further = tf.gather(ends, ends)
        return size * 2, further, tf.reduce_any(tf.not_equal(further, ends))

    def going(size: tf.Tensor, ends: tf.Tensor, moved: tf.Tensor) -> tf.Tensor:  # a chain not at its end yet
        return moved & (size < tf.shape(ends)[0])

    return tf.while_loop(going, double, [tf.constant(1), jump, tf.constant(True)])[1]


def gif_first_frame(contents: tf.Tensor) -> tf.Tensor:
    """A GIF's bytes cut after its first image, with the trailer (``;``) put after it: what decodes to the first frame
    alone. TensorFlow's GIF decoding decodes every frame even when it gives only the first (``expand_animations``
    false), so a small GIF of many large frames would cost the time and memory of all of them.

    The GIF's blocks are walked from its header and global colour table: extensions (``!``, a label, then data
    sub-blocks) up to the first image (``,``, a 9-byte descriptor, a local colour table, the LZW code size, then data
    sub-blocks), whose sub-blocks end with an empty one. Each sub-block gives the length of the next, so the walk is
    found for every position at once by pointer doubling (:func:`_chain_ends`), in ``log2`` of the length rounds.
    Bytes whose first image cannot be found (not a GIF, cut short or corrupt) are given as they are: GIF decoding
    then fails at or before that image, as the walk did."""
    data = tf.concat([tf.cast(tf.io.decode_raw(contents, tf.uint8), tf.int32), [0]], 0)  # position n: past the end
    n = tf.size(data) - 1
    at = tf.range(n + 1)

    def read(position: tf.Tensor) -> tf.Tensor:
        return tf.gather(data, tf.clip_by_value(position, 0, n))

    def table(flags: tf.Tensor) -> tf.Tensor:  # the bytes of the colour table a descriptor's flags declare
        return tf.where(tf.bitwise.bitwise_and(flags, 0x80) > 0,
                        3 * tf.bitwise.left_shift(2, tf.bitwise.bitwise_and(flags, 7)), 0)

    # sub-blocks from each position: a length byte, then that many bytes; an empty one ends them
    sub_ends = _chain_ends(tf.where(tf.equal(data, 0) | tf.equal(at, n), at, tf.minimum(at + 1 + data, n)))
    # blocks from each position: an extension is skipped, anything else (an image, the trailer) ends the walk
    after_extension = tf.gather(sub_ends, tf.minimum(at + 2, n)) + 1
    block_ends = _chain_ends(tf.where(tf.equal(data, 0x21) & tf.less(at, n), tf.minimum(after_extension, n), at))
    image = tf.gather(block_ends, tf.minimum(13 + table(read(10)), n))
    end = tf.gather(sub_ends, tf.minimum(image + 11 + table(read(image + 9)), n))
    found = tf.equal(read(image), 0x2C) & tf.less(image, n) & tf.less(end, n)
    return tf.where(found, tf.strings.join([tf.strings.substr(contents, 0, end + 1), b";"]), contents)
