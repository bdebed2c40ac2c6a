"""Decoding one image's bytes in TensorFlow, for training (a random crop) and for evaluation (the centre).

Training (:func:`decode_for_training`): a random crop is chosen from the JPEG header alone
(:func:`tf.image.extract_jpeg_shape`) and only that window is decoded (:func:`tf.image.decode_and_crop_jpeg`),
then resized to ``image_size`` and flipped left-right half of the time. The crop is Inception-style: 8% to
100% of the image area, aspect ratio 3/4 to 4/3 (``area_range`` and ``aspect_ratio_range`` change it); the
AlexNet paper instead cut fixed 224x224 patches out of images resized to 256x256, which is close to
``area_range=(0.77, 0.77)``. ``lighting`` adds the paper's other augmentation, its PCA colour noise
(:func:`lighting_shift`). Evaluation (:func:`decode_for_eval`): the short side is resized to
``image_size * 256 / 224`` and the centre ``image_size`` square is kept. In both, a window more than twice
the output is decoded at a reduced DCT scale (1/2, 1/4, 1/8) that still covers it, which is much cheaper than
a full decode.

Files that are not JPEG (ImageNet has a PNG named ``.JPEG``), CMYK and grayscale JPEGs all decode to
3-channel RGB: the first bytes are checked in the graph and non-JPEG bytes go through
:func:`tf.io.decode_image`. Pixels stay ``uint8``: the model's first layer normalises them. The formats read are
:data:`~alexnet.input.formats.IMAGE_FORMATS` (:data:`~alexnet.input.formats.IMAGE_EXTENSIONS` by file name);
:func:`~alexnet.input.headers.header_pixels` gives an image's size from its first bytes, without decoding it.
"""

from __future__ import annotations

import math

from ..data import images as image_checks
from ..errors import AlexnetError
from ..tfimport import tf
from .headers import gif_first_frame, header_format, header_pixels, is_jpeg, webp_with_alpha

#: Evaluation resizes the short side to ``image_size * EVAL_RESIZE_RATIO`` before the centre crop (256/224).
EVAL_RESIZE_RATIO = 256 / 224

#: The DCT scales libjpeg decodes at directly: 1/1, 1/2, 1/4 and 1/8.
JPEG_RATIOS = (1, 2, 4, 8)

#: The principal components of ImageNet's RGB pixels (pixel values 0-255): the eigenvalues of their 3x3 covariance,
#: largest first, and the matching unit eigenvectors as columns (R, G, B rows). These are the values widely used
#: for AlexNet's colour augmentation (those of fb.resnet.torch's ``Lighting``, computed on ImageNet's training
#: images, there on pixels of 0-1 and here times 255).
RGB_EIGENVALUES = (0.2175 * 255, 0.0188 * 255, 0.0045 * 255)
RGB_EIGENVECTORS = ((-0.5675, 0.7192, 0.4009),
                    (-0.5808, -0.0045, -0.8140),
                    (-0.5836, -0.6948, 0.4203))


def pixel_limit_check(contents: tf.Tensor, pixels: tf.Tensor | None = None) -> tf.Operation:
    """An assertion that fails, naming the limit, when the image ``contents`` declares more pixels than
    :data:`alexnet.data.images.MAX_PIXELS` (its value when the graph is built) in its header: ``pixels`` when given
    (a JPEG's height times width), else :func:`~alexnet.input.headers.header_pixels`. Nothing is decoded to know."""
    limit = image_checks.MAX_PIXELS
    if pixels is None:
        pixels = header_pixels(contents)
    return tf.debugging.assert_less_equal(
        tf.cast(pixels, tf.int64), tf.constant(limit, tf.int64),
        message=f"too large to decode safely (more than the limit {limit} pixels)")


def decode_any(contents: tf.Tensor) -> tf.Tensor:
    """Decode bytes of any format of :data:`IMAGE_FORMATS` to a uint8 RGB image (a transparent one's colours, without
    its alpha, as Pillow's ``convert("RGB")`` gives them; a GIF's first frame, :func:`gif_first_frame`, as Pillow
    gives it too). An image whose header declares more than :data:`alexnet.data.images.MAX_PIXELS` is an error
    before anything of it is decoded (:func:`pixel_limit_check`): a PNG of a few kilobytes can declare gigabytes."""
    with tf.control_dependencies([pixel_limit_check(contents)]):
        contents = tf.identity(contents)
    contents = tf.cond(tf.equal(header_format(contents), "GIF"), lambda: gif_first_frame(contents), lambda: contents)

    def decode(channels: int) -> tf.Tensor:
        image = tf.io.decode_image(contents, channels=channels, dtype=tf.uint8, expand_animations=False)
        return image if channels == 3 else image[:, :, :3]  # a slice is a copy of the whole image

    # a WebP with transparency decodes only to 4 channels, the others to 3 (an animated WebP to neither)
    image = tf.cond(webp_with_alpha(contents), lambda: decode(4), lambda: decode(3))
    image.set_shape([None, None, 3])
    return image


def _crop_window(
    shape: tf.Tensor,
    seed: tf.Tensor,
    area_range: tuple[float, float],
    aspect_ratio_range: tuple[float, float],
) -> tuple[tf.Tensor, tf.Tensor]:
    """A random crop (offset, size), each [y, x], of an image of ``shape`` [height, width, ...]."""
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        image_size=tf.cast(shape, tf.int32),
        bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        seed=seed,
        min_object_covered=area_range[0],
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    return begin[:2], size[:2]


def lighting_shift(seed: tf.Tensor, lighting: float) -> tf.Tensor:
    """The AlexNet paper's PCA colour noise for one image: the ``[3]`` float32 RGB shift (pixel values 0-255) that
    is added to every pixel of it, ``sum_i alpha_i * lambda_i * p_i`` over the principal components ``p_i`` of
    ImageNet's pixels and their eigenvalues ``lambda_i`` (:data:`RGB_EIGENVECTORS`, :data:`RGB_EIGENVALUES`), each
    ``alpha_i`` drawn from a normal distribution of standard deviation ``lighting`` (the paper's 0.1), from the
    ``[2]`` int ``seed``. It changes the intensity and colour of the light, not what the image shows."""
    alpha = tf.random.stateless_normal([3], seed=seed, stddev=lighting)
    return tf.linalg.matvec(tf.constant(RGB_EIGENVECTORS), alpha * tf.constant(RGB_EIGENVALUES))


def _to_uint8(image: tf.Tensor, shift: tf.Tensor | None = None) -> tf.Tensor:
    """Round a float image whose values are already within 0-255 (as any bilinear resize of uint8 pixels is); with
    ``shift`` (``[3]``, RGB), every pixel shifted by it first, the result kept within 0-255."""
    # A bilinear resize without antialiasing is a convex combination of input pixels, so it cannot leave 0-255;
    # adding 0.5 and truncating rounds in one pass, where round + saturate_cast would take three.
    if shift is None:
        return tf.cast(image + 0.5, tf.uint8)
    # The shift and the rounding's half are added at once, then kept within what rounds to 0-255. A [3] vector
    # added along the last axis is broadcast pixel by pixel, three to four times slower than the whole image's
    # rounding; the same values repeated along a row ([width * 3]) and added to each row cost about as little.
    shape = tf.shape(image)
    rows = tf.reshape(image, [shape[0], -1]) + tf.tile(shift + 0.5, [shape[1]])
    return tf.cast(tf.clip_by_value(tf.reshape(rows, shape), 0.0, 255.5), tf.uint8)


def resize_square(image: tf.Tensor, size: int) -> tf.Tensor:
    """Resize a uint8 image to ``[size, size, 3]`` float32, bilinear, with the pixels converted first.

    TensorFlow's bilinear resize computes in float32 whatever its input, and reads float32 input faster than
    uint8, so converting the (larger) crop first and resizing that costs less CPU. The pixels are the same
    either way.
    """
    return tf.image.resize(tf.cast(image, tf.float32), [size, size], method="bilinear")


def resize_decoded(image: tf.Tensor, size: tf.Tensor | list[int]) -> tf.Tensor:
    """Resize an image decoded at full size (any format but JPEG, which is shrunk by its decoder's DCT scale first)
    to ``size``, float32: bilinear over every source pixel the shrink covers (``antialias``), so that a PNG shrunk
    ten times reaches the model smoothed as a JPEG does, not with the fine detail of every tenth pixel folded into
    false patterns. Enlarging is plain bilinear either way. The uint8 image is resized as it is (the same float32
    pixels): a copy of it in float32, four times its size, cost a worker 0.5 to 0.9 GB for one 8000 x 8000 PNG."""
    return tf.image.resize(image, size, method="bilinear", antialias=True)


def jpeg_ratio(height: tf.Tensor, width: tf.Tensor, min_side: int | tf.Tensor) -> tf.Tensor:
    """The DCT scale to decode a ``height`` x ``width`` window at: 1, 2, 4 or 8 (an int32 tensor).

    The largest ``ratio`` for which both ``height // ratio`` and ``width // ratio`` are still larger than
    ``min_side`` (the output size): decoding at ``1/ratio`` then never loses resolution the output needs, and
    the bilinear resize that follows shrinks by less than 2x, so it does not alias either. A window that is
    not more than twice ``min_side`` is decoded at full scale (ratio 1).
    """
    short = tf.minimum(tf.cast(height, tf.int32), tf.cast(width, tf.int32))
    ratio = tf.constant(1, tf.int32)
    for candidate in JPEG_RATIOS[1:]:
        ratio = tf.where(short // candidate > min_side, tf.constant(candidate, tf.int32), ratio)
    return ratio


def scaled_window(window: tf.Tensor, shape: tf.Tensor, ratio: int | tf.Tensor) -> tf.Tensor:
    """The smallest window of a JPEG decoded at ``1/ratio`` that holds ``window`` of the full-size image.

    ``window`` is ``[y, x, height, width]`` in full-size pixels of an image of ``shape``. libjpeg's output at
    ``1/ratio`` has ``ceil(side / ratio)`` pixels per side, and its pixel ``i`` covers the full-size pixels
    ``ratio * i`` to ``ratio * i + ratio - 1``; the result is in those pixels, rounded outwards.
    """
    window = tf.cast(window, tf.int32)
    ratio = tf.cast(ratio, tf.int32)
    limit = (tf.cast(shape[:2], tf.int32) + ratio - 1) // ratio
    begin = window[:2] // ratio
    end = tf.minimum((window[:2] + window[2:] + ratio - 1) // ratio, limit)
    return tf.concat([begin, tf.maximum(end - begin, 1)], axis=0)


def _subpixel_boxes(window: tf.Tensor, decoded: tf.Tensor, ratio: int, size: int) -> tf.Tensor:
    """``crop_and_resize`` box that samples ``window`` (full-size pixels) out of ``decoded`` (a scaled window).

    ``decoded`` is :func:`scaled_window`'s ``[y, x, height, width]`` at ``1/ratio``. Output pixel ``i`` must
    sample the point a plain resize of the full-size window would (half-pixel centres), which in the decoded
    pixels is ``start + (i + 0.5) * length / size - 0.5``; ``crop_and_resize`` samples
    ``y1 * (n - 1) + i * (y2 - y1) * (n - 1) / (size - 1)``, so the box is those points for the first and
    last ``i``, divided by ``n - 1``.
    """
    window = tf.cast(window, tf.float32)
    decoded = tf.cast(decoded, tf.float32)
    start = window[:2] / ratio - decoded[:2]
    length = window[2:] / ratio
    first = start + 0.5 * length / size - 0.5
    last = start + (size - 0.5) * length / size - 0.5
    span = tf.maximum(decoded[2:] - 1.0, 1.0)
    return tf.reshape(tf.concat([first / span, last / span], axis=0), [1, 4])


def decode_jpeg_resized(
    contents: tf.Tensor,
    window: tf.Tensor,
    size: int,
    *,
    shape: tf.Tensor | None = None,
    ratio: int | None = None,
) -> tf.Tensor:
    """Decode ``window`` ``[y, x, height, width]`` of a JPEG and resize it to ``[size, size, 3]`` (float32, bilinear).

    Only the window is decoded, straight from the compressed bytes: rows below it are never decoded and
    pixels beside it are not transformed. When it is more than twice ``size`` on both sides it is decoded
    at a reduced DCT scale of 1/2, 1/4 or 1/8 (:func:`jpeg_ratio`; ``ratio`` forces one), which skips most
    of the inverse DCT, chroma upsampling and colour conversion; the window is then sampled with sub-pixel
    precision (:func:`tf.image.crop_and_resize`), so the result covers exactly the part of the picture that a
    full-size decode of the window resized to ``size`` covers. ``shape`` is the JPEG's
    :func:`tf.image.extract_jpeg_shape`, when already known.
    """
    if shape is None:
        shape = tf.image.extract_jpeg_shape(contents)
    window = tf.cast(window, tf.int32)
    if ratio is not None and ratio not in JPEG_RATIOS:
        raise AlexnetError(f"`ratio` must be one of {JPEG_RATIOS} or None (automatic), not {ratio!r}.")

    def full() -> tf.Tensor:
        return resize_square(tf.image.decode_and_crop_jpeg(contents, window, channels=3), size)

    def at(r: int) -> tf.Tensor:
        decoded = scaled_window(window, shape, r)
        image = tf.image.decode_and_crop_jpeg(contents, decoded, channels=3, ratio=r)
        boxes = _subpixel_boxes(window, decoded, r, size)
        return tf.image.crop_and_resize(image[None], boxes, tf.zeros([1], tf.int32), [size, size])[0]

    if ratio is not None:
        image = full() if ratio == 1 else at(ratio)
    else:
        chosen = jpeg_ratio(window[2], window[3], size)
        # `ratio` is an attribute of the decode op, so each scale is a branch of its own; at full training
        # size most windows are decoded at full scale, so that path stays free of the switch
        index = tf.cast(tf.math.log(tf.cast(chosen, tf.float32)) / math.log(2.0) + 0.5, tf.int32) - 1
        branches = [(lambda r=r: at(r)) for r in JPEG_RATIOS[1:]]
        image = tf.cond(chosen > 1, lambda: tf.switch_case(index, branches), full)
    image.set_shape([size, size, 3])
    return image


def decode_for_training(
    contents: tf.Tensor,
    image_size: int,
    seed: tf.Tensor | None = None,
    *,
    area_range: tuple[float, float] = (0.08, 1.0),
    aspect_ratio_range: tuple[float, float] = (3 / 4, 4 / 3),
    lighting: float = 0.0,
) -> tf.Tensor:
    """Decode one image's bytes into an augmented ``[image_size, image_size, 3]`` uint8 training image.

    A random window (``area_range`` of the area, ``aspect_ratio_range`` width/height) is sampled from the
    image's size; for a JPEG only that window is decoded, straight from the compressed bytes, and at a
    reduced DCT scale when it is more than twice ``image_size`` (:func:`decode_jpeg_resized`). The crop is
    resized to ``image_size`` squared and flipped left-right with probability 1/2. With ``lighting`` above 0,
    every pixel is shifted by the image's PCA colour noise (:func:`lighting_shift`), the result kept within 0-255.
    ``seed`` is a ``[2]``-shaped int tensor for the stateless random ops (random when ``None``).
    """
    if seed is None:
        seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int64)
    seed = tf.cast(seed, tf.int64)
    crop_seed = seed
    flip_seed = tf.stack([seed[1], seed[0] + 1])

    def jpeg() -> tf.Tensor:
        shape = tf.image.extract_jpeg_shape(contents)
        begin, size = _crop_window(shape, crop_seed, area_range, aspect_ratio_range)
        return decode_jpeg_resized(contents, tf.concat([begin, size], axis=0), image_size, shape=shape)

    def other() -> tf.Tensor:
        image = decode_any(contents)
        begin, size = _crop_window(tf.shape(image), crop_seed, area_range, aspect_ratio_range)
        return resize_decoded(tf.slice(image, tf.concat([begin, [0]], 0), tf.concat([size, [3]], 0)),
                              [image_size, image_size])

    shift = lighting_shift(tf.stack([seed[0] + 2, seed[1]]), lighting) if lighting > 0 else None
    image = _to_uint8(tf.cond(is_jpeg(contents), jpeg, other), shift)
    # flipping the uint8 result moves a quarter of the bytes that flipping the float image would
    return tf.image.stateless_random_flip_left_right(image, flip_seed)


def _centre_window(shape: tf.Tensor, image_size: int) -> tf.Tensor:
    """The window ``[y, x, height, width]`` of an image of ``shape`` that evaluation keeps.

    Evaluation resizes the short side to ``round(image_size * 256 / 224)`` and keeps the centre ``image_size``
    square (its offset rounded down, as slicing the resized image would). This is that square mapped back
    to the full-size image, so that it can be cut first and resized once.
    """
    full = tf.cast(shape[:2], tf.float32)
    resize_to = round(image_size * EVAL_RESIZE_RATIO)
    resized = tf.maximum(tf.round(full * (resize_to / tf.reduce_min(full))), resize_to)
    offset = tf.math.floordiv(resized - image_size, 2.0)
    scale = full / resized
    begin = tf.cast(tf.round(offset * scale), tf.int32)
    end = tf.cast(tf.round((offset + image_size) * scale), tf.int32)
    end = tf.minimum(tf.maximum(end, begin + 1), tf.cast(full, tf.int32))
    return tf.concat([begin, end - begin], axis=0)


def decode_for_eval(contents: tf.Tensor, image_size: int) -> tf.Tensor:
    """Decode one image's bytes into a centre-cropped ``[image_size, image_size, 3]`` uint8 image.

    The result is what resizing the short side to ``round(image_size * 256 / 224)`` (keeping the aspect ratio)
    and keeping the centre ``image_size`` square gives, as in the AlexNet paper's evaluation at 224 out of
    256. For a JPEG only that centre square is decoded, at a reduced DCT scale when it is more than twice
    ``image_size`` (:func:`decode_jpeg_resized`), and resized once.
    """

    def jpeg() -> tf.Tensor:
        shape = tf.image.extract_jpeg_shape(contents)
        return decode_jpeg_resized(contents, _centre_window(shape, image_size), image_size, shape=shape)

    def other() -> tf.Tensor:
        image = decode_any(contents)
        window = _centre_window(tf.shape(image), image_size)
        image = tf.slice(image, tf.concat([window[:2], [0]], 0), tf.concat([window[2:], [3]], 0))
        return resize_decoded(image, [image_size, image_size])

    return _to_uint8(tf.cond(is_jpeg(contents), jpeg, other))


#: The ten views of :func:`decode_ten_crops`, in order: the four corners and the centre, then their mirrors.
TEN_CROP_VIEWS = ("top left", "top right", "bottom left", "bottom right", "centre",
                  "top left, mirrored", "top right, mirrored", "bottom left, mirrored", "bottom right, mirrored",
                  "centre, mirrored")


def _decode_at_least(contents: tf.Tensor, min_side: int) -> tf.Tensor:
    """Decode a whole image to uint8 RGB; a JPEG at the smallest DCT scale whose short side still exceeds
    ``min_side`` (:func:`jpeg_ratio`), any other format at full size."""

    def jpeg() -> tf.Tensor:
        shape = tf.image.extract_jpeg_shape(contents)
        chosen = jpeg_ratio(shape[0], shape[1], min_side)
        index = tf.cast(tf.math.log(tf.cast(chosen, tf.float32)) / math.log(2.0) + 0.5, tf.int32)
        branches = [(lambda r=r: tf.image.decode_jpeg(contents, channels=3, ratio=r)) for r in JPEG_RATIOS]
        return tf.switch_case(index, branches)

    image = tf.cond(is_jpeg(contents), jpeg, lambda: decode_any(contents))
    image.set_shape([None, None, 3])
    return image


def decode_ten_crops(contents: tf.Tensor, image_size: int) -> tf.Tensor:
    """Decode one image's bytes into the ten views of the AlexNet paper's test protocol: uint8
    ``[10, image_size, image_size, 3]``.

    The image is resized (bilinear, keeping its aspect ratio) so that its short side is
    ``round(image_size * 256 / 224)``, as :func:`decode_for_eval` does; the views are the ``image_size``
    squares at its four corners (top left, top right, bottom left, bottom right) and at its centre (offset
    rounded down), then the same five mirrored left-right (:data:`TEN_CROP_VIEWS`). Every format
    :func:`decode_for_eval` takes works (CMYK and grayscale JPEGs, PNG named ``.JPEG``); a large JPEG is
    decoded at a reduced DCT scale that still covers the resized size.
    """
    resize_to = round(image_size * EVAL_RESIZE_RATIO)
    image = _decode_at_least(contents, resize_to)
    full = tf.cast(tf.shape(image)[:2], tf.float32)
    resized = tf.cast(tf.maximum(tf.round(full * (resize_to / tf.reduce_min(full))), resize_to), tf.int32)
    image = _to_uint8(tf.cond(is_jpeg(contents),
                              lambda: tf.image.resize(tf.cast(image, tf.float32), resized, method="bilinear"),
                              lambda: resize_decoded(image, resized)))
    height, width = resized[0], resized[1]
    bottom, right = height - image_size, width - image_size
    offsets = [(0, 0), (0, right), (bottom, 0), (bottom, right), (bottom // 2, right // 2)]
    crops = [tf.image.crop_to_bounding_box(image, y, x, image_size, image_size) for y, x in offsets]
    views = tf.stack(crops + [tf.reverse(crop, axis=[1]) for crop in crops])
    views.set_shape([10, image_size, image_size, 3])
    return views
