"""Decoding one image: random crops, the centre crop, reduced-scale decoding and the odd files of ImageNet.

Each technique that makes the pipeline fast has a test that it gives the picture a plain decode would.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from helpers_train import centroid, jpeg_bytes, marker_image, write_quirks
from PIL import Image

tf = pytest.importorskip("tensorflow")

from alexnet.input import decode  # noqa: E402

SIZE = 64


@pytest.fixture(scope="module")
def quirks(tmp_path_factory):
    return write_quirks(tmp_path_factory.mktemp("decode") / "quirks")


def test_random_crops_are_reproducible_and_vary_with_the_seed():
    rng = np.random.default_rng(0)
    contents = tf.constant(jpeg_bytes(Image.fromarray(rng.integers(0, 255, (120, 90, 3), dtype=np.uint8))))
    a = decode.decode_for_training(contents, SIZE, tf.constant([1, 2]))
    b = decode.decode_for_training(contents, SIZE, tf.constant([1, 2]))
    c = decode.decode_for_training(contents, SIZE, tf.constant([7, 9]))
    assert a.shape == (SIZE, SIZE, 3) and a.dtype == tf.uint8
    assert np.array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())


def test_full_area_crop_is_the_decoded_image_resized():
    rng = np.random.default_rng(1)
    pixels = np.kron(rng.integers(0, 255, (8, 8, 3)), np.ones((10, 10, 1))).astype(np.uint8)  # 80x80 blocks
    contents = tf.constant(jpeg_bytes(Image.fromarray(pixels)))
    crops = [
        decode.decode_for_training(contents, 40, tf.constant([s, 0]), area_range=(1.0, 1.0)).numpy() for s in range(6)
    ]
    whole = tf.image.resize(tf.io.decode_jpeg(contents), [40, 40]).numpy()
    for crop in crops:  # each either the whole image or its mirror image
        diffs = [np.abs(crop.astype(float) - w).mean() for w in (whole, whole[:, ::-1])]
        assert min(diffs) < 3
    flipped = [np.abs(c.astype(float) - whole).mean() > 3 for c in crops]
    assert any(flipped) and not all(flipped), "about half the crops should be flipped left-right"


def test_lighting_noise_has_the_spread_of_imagenets_principal_colour_components():
    # the paper's augmentation: one RGB shift an image, alpha_i * lambda_i along each principal component p_i
    shifts = np.stack([decode.lighting_shift(tf.constant([s, 3]), 0.1).numpy() for s in range(2000)])
    assert np.array_equal(shifts[5], decode.lighting_shift(tf.constant([5, 3]), 0.1).numpy())
    components = np.array(decode.RGB_EIGENVECTORS)
    assert np.allclose(components.T @ components, np.eye(3), atol=2e-3), "unit, orthogonal components"
    along = shifts @ components  # each shift's weight on each component: alpha_i * lambda_i
    expected = 0.1 * np.array(decode.RGB_EIGENVALUES)  # 5.5, 0.48 and 0.11 of 255
    assert np.allclose(along.std(axis=0), expected, rtol=0.08), (along.std(axis=0), expected)
    assert np.all(np.abs(along.mean(axis=0)) < 0.1 * expected)
    # uncorrelated weights: the covariance of the shifts is P diag(lambda^2) P^T, times 0.01
    assert np.allclose(np.cov(shifts.T), components @ np.diag(expected**2) @ components.T, atol=0.1 * expected[0]**2)
    assert np.allclose(decode.lighting_shift(tf.constant([5, 3]), 0.2).numpy(), 2 * shifts[5], rtol=1e-5)


def test_lighting_shifts_every_pixel_of_a_training_image_alike_and_leaves_its_crop_and_flip():
    rng = np.random.default_rng(4)
    pixels = np.kron(rng.integers(40, 200, (6, 8, 3)), np.ones((10, 10, 1))).astype(np.uint8)
    contents = tf.constant(jpeg_bytes(Image.fromarray(pixels)))
    for s in range(4):
        seed = tf.constant([s, 11], tf.int64)
        plain = decode.decode_for_training(contents, SIZE, seed).numpy().astype(float)
        lit = decode.decode_for_training(contents, SIZE, seed, lighting=0.1).numpy().astype(float)
        shift = decode.lighting_shift(tf.constant([s + 2, 11], tf.int64), 0.1).numpy()
        assert np.abs(shift).max() > 0.5, "a shift large enough to see"
        # the same crop and flip, every pixel moved by the one shift (up to the rounding of each)
        assert np.abs(lit - plain - shift).max() <= 1.0, (s, shift)
    assert np.array_equal(decode.decode_for_training(contents, SIZE, seed, lighting=0.0).numpy(), plain)
    # in a graph the shifted image keeps its static shape, which batching the images needs
    traced = tf.function(lambda c: decode.decode_for_training(c, SIZE, seed, lighting=0.1))
    assert traced.get_concrete_function(tf.TensorSpec([], tf.string)).structured_outputs.shape == (SIZE, SIZE, 3)


def test_lighting_keeps_pixels_within_0_to_255():
    white = tf.constant(jpeg_bytes(Image.new("RGB", (80, 80), (255, 255, 255))))
    black = tf.constant(jpeg_bytes(Image.new("RGB", (80, 80), (0, 0, 0))))
    # the first seed whose shift raises one channel and lowers another, each by more than 3
    seed, shift = next((s, shift) for s in range(100)
                       if (shift := decode.lighting_shift(tf.constant([s + 2, 2]), 1.0).numpy()).max() > 3
                       and shift.min() < -3)
    up, down = shift > 0, shift < 0
    for contents, base in ((white, 255.0), (black, 0.0)):
        out = decode.decode_for_training(contents, SIZE, tf.constant([seed, 2]), lighting=1.0).numpy().astype(float)
        assert np.abs(out - np.clip(base + shift, 0, 255)).max() <= 1.0, (base, shift)
        # white stays white where the shift raises it, black stays black where it lowers it
        assert np.all(out[..., up if base else down] == base)
        assert np.all(out[..., down if base else up] != base)


def test_resizing_converted_pixels_gives_what_resizing_uint8_gives():
    # resize_square converts to float32 before the resize, for speed: the result must not change
    rng = np.random.default_rng(2)
    for shape in [(300, 411, 3), (97, 64, 3), (224, 224, 3)]:
        pixels = tf.constant(rng.integers(0, 256, shape).astype(np.uint8))
        expected = tf.image.resize(pixels, [SIZE, SIZE], method="bilinear")
        got = decode.resize_square(pixels, SIZE)
        assert got.dtype == tf.float32 and got.shape == (SIZE, SIZE, 3)
        assert np.array_equal(got.numpy(), expected.numpy())


def test_an_image_decoded_at_full_size_is_resized_as_it_is_not_as_a_float_copy():
    """resize_decoded gives the pixels of a float32 image's resize without making that float32 copy (four times the
    uint8 image: 0.5 to 0.9 GB more for one 8000 x 8000 PNG): no cast of the full-size image in its graph."""
    rng = np.random.default_rng(3)
    for shape, size in [((300, 411, 3), [SIZE, SIZE]), ((40, 50, 3), [SIZE, 2 * SIZE])]:
        pixels = tf.constant(rng.integers(0, 256, shape).astype(np.uint8))
        expected = tf.image.resize(tf.cast(pixels, tf.float32), size, method="bilinear", antialias=True)
        got = decode.resize_decoded(pixels, size)
        assert got.dtype == tf.float32
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=1e-3)
    graph = tf.function(lambda image: decode.resize_decoded(image, [SIZE, SIZE])).get_concrete_function(
        tf.TensorSpec([None, None, 3], tf.uint8)).graph
    casts = [op for op in graph.get_operations() if op.type == "Cast" and op.inputs[0].dtype == tf.uint8
             and op.inputs[0].shape.rank == 3]
    assert casts == []


def test_eval_resizes_the_short_side_and_keeps_the_centre():
    pixels = np.zeros((100, 300, 3), np.uint8)
    pixels[:, :100] = (250, 0, 0)
    pixels[:, 100:200] = (0, 250, 0)
    pixels[:, 200:] = (0, 0, 250)
    for encode in (lambda im: jpeg_bytes(im), lambda im: _png(im)):
        out = decode.decode_for_eval(tf.constant(encode(Image.fromarray(pixels))), SIZE).numpy()
        assert out.shape == (SIZE, SIZE, 3)
        # short side 100 -> 73, long side 300 -> 219: the centre 64 columns are all in the green third
        assert np.abs(out.reshape(-1, 3).mean(0) - (0, 250, 0)).max() < 12


@pytest.mark.parametrize("portrait", [False, True])
def test_ten_crops_are_the_four_corners_and_the_centre_of_the_resized_image_then_their_mirrors(portrait):
    # the paper's protocol: resize the short side to 256/224 of the crop, take the crop-sized squares at the four
    # corners and the centre (offset rounded down), then the same five mirrored left-right
    short = round(SIZE * 256 / 224)  # 73 for 64
    long = short + 28  # 101: the centre's offset along it, (101 - 64) / 2, rounds down
    height, width = (long, short) if portrait else (short, long)
    rng = np.random.default_rng(8)
    small = rng.integers(0, 256, (height, width, 3)).astype(np.uint8)  # every pixel its own, so any shift shows
    bottom, right = height - SIZE, width - SIZE
    corners = [(0, 0), (0, right), (bottom, 0), (bottom, right), (bottom // 2, right // 2)]  # as TEN_CROP_VIEWS
    # a marker of its own colour at each view's top left pixel, to see which view moved when one does
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255)]
    for (y, x), colour in zip(corners, colours, strict=True):
        small[y : y + 3, x : x + 3] = colour
    # the file's short side is already the resized one: every view is ``small``'s pixels, exactly
    views = decode.decode_ten_crops(tf.constant(_png(Image.fromarray(small))), SIZE).numpy()
    assert views.shape == (10, SIZE, SIZE, 3) and views.dtype == np.uint8
    expected = [small[y : y + SIZE, x : x + SIZE] for y, x in corners]
    expected += [crop[:, ::-1] for crop in expected]
    assert len(decode.TEN_CROP_VIEWS) == 10
    for name, view, reference in zip(decode.TEN_CROP_VIEWS, views, expected, strict=True):
        np.testing.assert_array_equal(view, reference, err_msg=f"the {name} view")


@pytest.mark.parametrize("shrink", [3, 10])
def test_an_image_decoded_at_full_size_is_smoothed_as_it_shrinks_as_a_jpeg_is(shrink):
    # black and white pixels at random: shrunk by sampling a few source pixels per output pixel (a bilinear resize
    # without a filter as wide as the shrink) they stay black, white and grey at random (a spread of about 85);
    # averaged over the shrink, they are nearly uniform grey, as Pillow's resize (a spread of 25 and 7) gives
    side = round(SIZE * 256 / 224) * shrink
    rng = np.random.default_rng(shrink)
    noise = (rng.integers(0, 2, (side, side, 1)) * 255).repeat(3, axis=2).astype(np.uint8)
    reference = np.asarray(Image.fromarray(noise).resize((SIZE, SIZE), Image.BILINEAR), np.float32).std()
    png = tf.constant(_png(Image.fromarray(noise)))
    crop = noise[: SIZE * shrink, : SIZE * shrink]
    seen = {"eval": decode.decode_for_eval(png, SIZE).numpy(),
            "ten crops": decode.decode_ten_crops(png, SIZE).numpy()[4],
            "training": decode.decode_for_training(tf.constant(_png(Image.fromarray(crop))), SIZE,
                                                   tf.constant([1, 2]), area_range=(1.0, 1.0),
                                                   aspect_ratio_range=(1.0, 1.0)).numpy()}
    for name, image in seen.items():
        image = image.astype(np.float32)
        assert abs(image.mean() - 127.5) < 5 and image.std() < 1.5 * reference, (name, image.std(), reference)


def test_large_jpeg_decoded_at_reduced_scale_matches_a_full_decode():
    rng = np.random.default_rng(2)
    small = rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)
    big = np.array(Image.fromarray(small).resize((800, 600), Image.BILINEAR))
    contents = tf.constant(jpeg_bytes(Image.fromarray(big)))
    fast = decode.decode_for_eval(contents, SIZE).numpy().astype(float)
    full = tf.io.decode_jpeg(contents)
    resize_to = round(SIZE * 256 / 224)
    full = tf.image.resize(full, [resize_to, round(800 * resize_to / 600)]).numpy()
    top, left = (full.shape[0] - SIZE) // 2, (full.shape[1] - SIZE) // 2
    reference = full[top : top + SIZE, left : left + SIZE]
    assert np.abs(fast - reference).mean() < 8


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "colour"), [("cmyk", (210, 30, 30)), ("png", (210, 30, 30)), ("grayscale", (128, 128, 128))]
)
def test_quirky_files_decode_to_rgb(quirks, name, colour):
    contents = tf.io.read_file(str(quirks[name]))
    for image in (
        decode.decode_for_training(contents, SIZE, tf.constant([3, 4])),
        decode.decode_for_eval(contents, SIZE),
    ):
        assert image.shape == (SIZE, SIZE, 3) and image.dtype == tf.uint8
        assert np.abs(image.numpy().reshape(-1, 3).mean(0) - colour).max() < 8


def test_fused_crop_decode_is_the_same_as_decode_then_crop():
    contents = tf.constant(marker_image(150, 220, (40, 60, 80, 110)))
    window = tf.constant([17, 33, 101, 120])
    fused = decode.decode_jpeg_resized(contents, window, 64, ratio=1).numpy()
    whole = tf.io.decode_jpeg(contents, channels=3)[17:118, 33:153]
    reference = tf.image.resize(whole, [64, 64]).numpy()
    assert np.abs(fused - reference).max() < 1.5  # the crop decode re-runs the IDCT on the same blocks


@pytest.mark.parametrize("ratio", [2, 4, 8])
def test_reduced_scale_decode_gives_the_crop_geometry_of_a_full_decode(ratio):
    # a 1600x1200 picture, a 1000x1200 window not aligned to the 8x8 blocks, a marker off the centre
    contents = tf.constant(marker_image(1200, 1600, (500, 700, 560, 760)))
    window = tf.constant([101, 301, 1000, 1200])
    full = decode.decode_jpeg_resized(contents, window, 100, ratio=1).numpy()
    reduced = decode.decode_jpeg_resized(contents, window, 100, ratio=ratio).numpy()
    assert reduced.shape == full.shape == (100, 100, 3)
    offset = np.abs(centroid(reduced) - centroid(full))
    assert offset.max() < 1.0, f"the marker moved by {offset} output pixels at 1/{ratio} scale"
    # the marker is where the geometry says: rows 500-560 of the window's 101-1101, columns 700-760 of 301-1501
    expected = np.array([(530 - 101) / 1000 * 100 - 0.5, (730 - 301) / 1200 * 100 - 0.5])
    assert np.abs(centroid(reduced) - expected).max() < 1.0


def test_reduced_scale_is_chosen_only_when_the_window_is_more_than_twice_the_output():
    cases = {(447, 900): 1, (449, 449): 1, (450, 450): 2, (900, 1000): 4, (1900, 2000): 8, (5000, 5000): 8}
    cases[(100, 3000)] = 1  # the short side decides
    for (height, width), ratio in cases.items():
        assert int(decode.jpeg_ratio(height, width, 224)) == ratio, (height, width)


def test_scaled_window_holds_the_full_size_window():
    rng = np.random.default_rng(5)
    shape = tf.constant([1031, 1517, 3])
    for _ in range(50):
        y, x = int(rng.integers(0, 1000)), int(rng.integers(0, 1500))
        h, w = int(rng.integers(1, 1031 - y + 1)), int(rng.integers(1, 1517 - x + 1))
        for ratio in (2, 4, 8):
            top, left, height, width = decode.scaled_window(tf.constant([y, x, h, w]), shape, ratio).numpy()
            assert top * ratio <= y and left * ratio <= x
            assert (top + height) * ratio >= y + h or top + height == math.ceil(1031 / ratio)
            assert (left + width) * ratio >= x + w or left + width == math.ceil(1517 / ratio)
            assert (top + height) * ratio - (y + h) < 2 * ratio and (left + width) * ratio - (x + w) < 2 * ratio


def test_one_pass_rounding_to_uint8_matches_round_and_saturate():
    rng = np.random.default_rng(6)
    pixels = tf.constant(rng.integers(0, 256, (37, 53, 3)).astype(np.uint8))
    resized = tf.image.resize(pixels, [29, 71])  # bilinear: a convex combination, so within 0-255
    expected = tf.saturate_cast(tf.round(resized), tf.uint8).numpy().astype(int)
    got = decode._to_uint8(resized).numpy().astype(int)
    # round() rounds halves to even, the one-pass cast rounds them up: at most one level apart, on halves only
    assert np.abs(got - expected).max() <= 1
    assert (got != expected).mean() < 0.01


def _gif(frames: list[Image.Image], **options) -> bytes:
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=len(frames) > 1, append_images=frames[1:], **options)
    return buffer.getvalue()


def test_a_many_frame_gif_is_cut_after_its_first_frame_and_decodes_to_it_alone():
    frames = [Image.new("RGB", (40, 30), colour) for colour in [(250, 0, 0), (0, 250, 0), (0, 0, 250)]]
    frames[1] = frames[1].convert("P").quantize(colors=7)  # a local colour table after the global one
    animated = _gif(frames, duration=100, loop=0, comment=b"extensions before the first image")
    assert tf.io.decode_gif(tf.constant(animated)).shape[0] == 3
    cut = decode.gif_first_frame(tf.constant(animated)).numpy()
    assert len(cut) < len(animated) and cut.endswith(b";") and cut[:-1] == animated[: len(cut) - 1]
    first = tf.io.decode_gif(tf.constant(cut))
    assert first.shape[0] == 1, "only the first frame is left to decode"
    np.testing.assert_array_equal(first[0].numpy(), tf.io.decode_gif(tf.constant(animated))[0].numpy())
    assert decode.decode_any(tf.constant(animated)).numpy()[15, 20].tolist() == [250, 0, 0]
    interlaced = _gif([Image.new("RGB", (40, 30), (0, 250, 0))] * 2, interlace=True)
    assert tf.io.decode_gif(decode.gif_first_frame(tf.constant(interlaced))).shape[0] == 1
    one = _gif(frames[:1])
    assert decode.gif_first_frame(tf.constant(one)).numpy() in (one, one[:-1] + b";")


def test_gif_bytes_whose_first_frame_cannot_be_found_are_left_as_they_are():
    animated = _gif([Image.new("RGB", (40, 30), (250, 0, 0)), Image.new("RGB", (40, 30), (0, 250, 0))])
    first = animated.index(b",", 13)  # the first image descriptor (after the 2-colour global table)
    for broken in (animated[: first + 14], animated[:first] + b"\x99" + animated[first + 1 :], b"GIF89a", b""):
        assert decode.gif_first_frame(tf.constant(broken)).numpy() == broken


def test_an_image_declaring_more_pixels_than_the_limit_is_an_error_before_it_is_decoded(monkeypatch):
    from helpers_images import encoded, png_claiming

    from alexnet.data import images as image_checks

    # training without the scan (check_images off) and evaluation decode through decode_any: a file from elsewhere
    # fails naming the limit instead of taking memory for every pixel it declares
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"too large to decode safely .*89478485 pixels"):
        decode.decode_any(tf.constant(png_claiming(10000, 10000)))
    monkeypatch.setattr(image_checks, "MAX_PIXELS", 40 * 30)  # read when the graph is built
    at_limit, above = Image.new("RGB", (40, 30), (200, 40, 20)), Image.new("RGB", (40, 31))
    for fmt in ("PNG", "GIF", "BMP", "WEBP"):
        assert decode.decode_for_training(tf.constant(encoded(at_limit, fmt)), SIZE).shape == (SIZE, SIZE, 3), fmt
        with pytest.raises(tf.errors.InvalidArgumentError, match="more than the limit 1200 pixels"):
            decode.decode_for_training(tf.constant(encoded(above, fmt)), SIZE)
