"""alexnet_filters(): the first convolution's filters as pictures, each scaled to its own range, and drawn as a grid."""

from __future__ import annotations

import io
import json
import uuid

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from helpers_model import saved_tiny_model
from PIL import Image

from alexnet.cli import main
from alexnet.errors import AlexnetError
from alexnet.model.filters import GAP, ZOOM, alexnet_filters, filter_grid, grid_columns, scaled_kernels
from alexnet.tfimport import keras

CATEGORIES = [{"id": f"n0000300{i}", "name": f"thing number {i}"} for i in range(3)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return saved_tiny_model(tmp_path_factory.mktemp("filters") / "model", CATEGORIES, seed=5)


def test_each_filter_is_its_weights_scaled_to_its_own_range(saved):
    model, model_dir = saved
    result = alexnet_filters(model_dir)
    weights = model.get_layer("conv1").get_weights()[0]  # [11, 11, 3, 96]
    assert (result["layer"], result["filters"], result["size"], result["path"]) == ("conv1", 96, [11, 11], None)
    kernels = result["kernels"]
    assert kernels.dtype == np.float32 and kernels.shape == (96, 11, 11, 3)
    for k in (0, 41, 95):
        w = weights[..., k]
        np.testing.assert_allclose(kernels[k], (w - w.min()) / (w.max() - w.min()), rtol=1e-5, atol=1e-6)
        assert kernels[k].min() == 0 and kernels[k].max() == 1
    # the same from the loaded keras.Model itself
    np.testing.assert_array_equal(alexnet_filters(model)["kernels"], kernels)


def test_a_filter_of_equal_weights_is_grey_and_the_grid_has_about_4_columns_for_3_rows():
    kernel = np.zeros((2, 2, 3, 2), dtype=np.float32)
    kernel[..., 1] = [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]]
    scaled = scaled_kernels(kernel)
    assert scaled.shape == (2, 2, 2, 3)
    assert (scaled[0] == 0.5).all()
    np.testing.assert_allclose(scaled[1].reshape(-1), np.arange(12) / 11)
    assert [grid_columns(n) for n in (1, 2, 5, 12, 96, 256)] == [1, 2, 3, 4, 12, 19]


def test_the_grid_holds_each_filter_zoomed_in_its_place_on_white(saved):
    _, model_dir = saved
    result = alexnet_filters(model_dir)
    image, kernels = result["image"], result["kernels"]
    tile = 11 * ZOOM
    assert image.dtype == np.uint8 and image.shape == (GAP + 8 * (tile + GAP), GAP + 12 * (tile + GAP), 3)
    for k in (0, 13, 95):
        top, left = GAP + (k // 12) * (tile + GAP), GAP + (k % 12) * (tile + GAP)
        expected = np.round(kernels[k] * 255).astype(np.uint8).repeat(ZOOM, axis=0).repeat(ZOOM, axis=1)
        np.testing.assert_array_equal(image[top : top + tile, left : left + tile], expected)
        assert (image[top - GAP : top, left : left + tile] == 255).all()  # the white gap above
    # fewer filters than a full last row (5 in 3 columns): the rest of the row is white
    partial = filter_grid(kernels[:5], zoom=1, gap=1)
    assert partial.shape == (1 + 2 * 12, 1 + 3 * 12, 3) and (partial[13:, 25:] == 255).all()
    assert not (partial[14:25, 13:24] == 255).all()  # the fifth filter


def test_the_png_is_the_grid_written_locally_or_to_a_bucket(saved, tmp_path, cloud_env):
    from alexnet.storage.location import open_filesystem

    _, model_dir = saved
    local = tmp_path / "new" / "folder" / "conv1.png"
    result = alexnet_filters(model_dir, str(local))
    assert result["path"] == str(local)
    np.testing.assert_array_equal(np.asarray(Image.open(local).convert("RGB")), result["image"])
    location = f"s3://alexnet-test/filters-{uuid.uuid4().hex[:8]}/conv1.png"
    assert alexnet_filters(model_dir, location)["path"] == location
    written = open_filesystem(location).cat_file(location[len("s3://"):])
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(written)).convert("RGB")), result["image"])


def test_a_path_that_is_not_a_png_and_a_model_without_conv1_are_refused(saved, tmp_path):
    _, model_dir = saved
    with pytest.raises(AlexnetError, match=r"does not end in \.png"):
        alexnet_filters(model_dir, str(tmp_path / "conv1.jpg"))
    assert not (tmp_path / "conv1.jpg").exists()
    inputs = keras.Input((16, 16, 3))
    other = keras.Model(inputs, keras.layers.Conv2D(4, 3, name="first")(inputs))
    with pytest.raises(AlexnetError, match=r"the model has no layer 'conv1' \(it has .*first"):
        alexnet_filters(other)


def test_the_command_draws_the_png_and_prints_the_values_as_json(saved, tmp_path, capsys):
    _, model_dir = saved
    png = tmp_path / "conv1.png"
    assert main(["filters", model_dir, "--path", str(png)]) == 0
    assert capsys.readouterr().out.strip() == (f"conv1: 96 filters of 11x11 pixels, each scaled to its own range; "
                                               f"drawn to {png}")
    assert Image.open(png).size == (GAP + 12 * (11 * ZOOM + GAP), GAP + 8 * (11 * ZOOM + GAP))
    assert main(["filters", model_dir, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(np.array(printed["kernels"], dtype=np.float32), alexnet_filters(model_dir)["kernels"])
    assert printed["image"] == [467, 699, 3] and printed["path"] is None
