"""alexnet_features(): the values of one of the model's layers for each image, as the model computes them."""

from __future__ import annotations

import csv
import io
import json
import uuid
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from helpers_model import IMAGE_SIZE, card_for, model_with_old_pooling, save_model_dir, saved_tiny_model  # noqa: E402
from helpers_train import class_image, jpeg_bytes, write_quirks  # noqa: E402

import alexnet  # noqa: E402
from alexnet.cli import main  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.input.decode import decode_for_eval  # noqa: E402
from alexnet.model.features import alexnet_features  # noqa: E402
from alexnet.model.options import FEATURE_LAYERS  # noqa: E402
from alexnet.model.predict import alexnet_predict  # noqa: E402
from alexnet.tfimport import keras  # noqa: E402

CATEGORIES = [{"id": f"n0000200{i}", "name": f"thing number {i}"} for i in range(5)]
#: The dense layers of the tests' small model.
UNITS = 64


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    model, model_dir = saved_tiny_model(root / "model", CATEGORIES, seed=3)
    rng = np.random.default_rng(1)
    photos = root / "photos"
    photos.mkdir()
    for k in range(7):  # written in an order other than their names
        (photos / f"photo-{(3 * k) % 7}.jpg").write_bytes(jpeg_bytes(class_image(rng, k % 5, 60 + 7 * k, 90)))
    (photos / "notes.txt").write_text("not an image")
    return {"model": model, "model_dir": model_dir, "photos": photos, "quirks": write_quirks(root / "quirks")}


def _expected(model, layer: str, images: list[Path]) -> np.ndarray:
    """The values of ``layer`` computed by Keras on each image alone, decoded as evaluation decodes it."""
    inner = keras.Model(model.inputs, model.get_layer(layer).output)
    rows = [inner.predict(decode_for_eval(tf.io.read_file(str(image)), IMAGE_SIZE).numpy()[None], verbose=0)
            for image in images]
    return np.concatenate(rows).reshape(len(images), -1)


@pytest.mark.parametrize(("layer", "width"), [("flatten", 6 * 6 * 256), ("fc1", UNITS), ("fc2", UNITS),
                                              ("logits", len(CATEGORIES))])
def test_each_layer_gives_the_models_own_values_image_by_image_in_name_order(setup, layer, width):
    names = sorted(p.name for p in setup["photos"].glob("*.jpg"))
    result = alexnet_features(setup["model_dir"], str(setup["photos"]), layer=layer, batch_size=3)
    assert result["layer"] == layer
    assert result["image"] == [f"{setup['photos']}/{name}" for name in names]
    features = result["features"]
    assert features.dtype == np.float32 and features.shape == (len(names), width)
    expected = _expected(setup["model"], layer, [setup["photos"] / name for name in names])
    np.testing.assert_allclose(features, expected, rtol=1e-4, atol=1e-5)
    if layer in ("fc1", "fc2", "flatten"):
        assert (features >= 0).all()  # after a ReLU (and max pooling of ReLUs)
    assert len({row.tobytes() for row in features}) == len(names), "each image has values of its own"


def test_the_logits_softmax_is_the_prediction_and_fc2_is_the_default(setup):
    images = [str(p) for p in sorted(setup["photos"].glob("*.jpg"))]
    logits = alexnet_features(setup["model_dir"], images, "logits")["features"]
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    records = alexnet_predict(setup["model_dir"], images, top=len(CATEGORIES))
    ids = [c["id"] for c in CATEGORIES]
    for k, image in enumerate(images):
        rows = [r for r in records if r["image"] == image]
        columns = [ids.index(r["id"]) for r in rows]
        np.testing.assert_allclose([r["probability"] for r in rows], probabilities[k, columns], rtol=1e-5, atol=1e-7)
    default = alexnet.alexnet_features(setup["model_dir"], images)
    assert default["layer"] == "fc2" and default["features"].shape == (len(images), UNITS)


def test_odd_formats_bytes_and_a_model_of_old_pooling_work(setup, tmp_path):
    quirks = setup["quirks"]
    given = [str(quirks["cmyk"]), str(quirks["grayscale"]), str(quirks["png"]), quirks["png"].read_bytes()]
    result = alexnet_features(setup["model_dir"], given, layer="fc2")
    assert result["image"] == [*given[:3], "<bytes 3>"]
    np.testing.assert_array_equal(result["features"][2], result["features"][3])
    # a model saved before the adaptive pooling was built from TensorFlow ops: the same weights, the same values
    old = model_with_old_pooling(len(CATEGORIES), seed=3)
    old_dir = save_model_dir(old, tmp_path / "old", card_for(CATEGORIES)).parent
    np.testing.assert_allclose(alexnet_features(str(old_dir), given, layer="fc2")["features"], result["features"],
                               rtol=1e-5, atol=1e-6)
    # a keras.Model given as it is (no card: decoded at its input's size)
    np.testing.assert_allclose(alexnet_features(setup["model"], given, layer="fc2")["features"], result["features"],
                               rtol=1e-5, atol=1e-6)


def test_bad_images_a_bad_layer_and_a_model_without_the_layer_are_refused(setup, tmp_path):
    quirks = setup["quirks"]
    good = str(next(setup["photos"].glob("*.jpg")))
    with pytest.raises(AlexnetError, match=r"2 of 3 image.*so no features were computed") as raised:
        alexnet_features(setup["model_dir"], [good, str(quirks["truncated"]), str(tmp_path / "missing.jpg")])
    assert "truncated.JPEG" in str(raised.value) and "missing.jpg" in str(raised.value)
    with pytest.raises(AlexnetError, match="`layer` must be one of 'flatten', 'fc1', 'fc2', 'logits', not 'conv9'"):
        alexnet_features(setup["model_dir"], [good], layer="conv9")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AlexnetError, match="holds no image files"):
        alexnet_features(setup["model_dir"], [str(empty)])
    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3), dtype="uint8")
    other = keras.Model(inputs, keras.layers.Dense(2, name="scores")(keras.layers.Flatten()(
        keras.layers.Rescaling(1 / 255)(inputs))))
    with pytest.raises(AlexnetError, match=r"the model has no layer 'fc2' \(it has .*scores"):
        alexnet_features(other, [good])
    assert set(FEATURE_LAYERS) == {"flatten", "fc1", "fc2", "logits"}


def test_the_command_prints_csv_and_json_equal_to_the_call(setup, capsys):
    images = [str(p) for p in sorted(setup["photos"].glob("*.jpg"))[:3]]
    called = alexnet_features(setup["model_dir"], images, layer="fc1")
    assert main(["features", *images, "--model", setup["model_dir"], "--layer", "fc1"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["image", *(f"fc1_{k}" for k in range(1, UNITS + 1))] == ["image", *called["columns"]]
    assert [row[0] for row in rows[1:]] == images
    # written so that each value reads back to the same float32
    np.testing.assert_array_equal(np.array([row[1:] for row in rows[1:]], dtype=np.float32), called["features"])
    assert main(["features", str(setup["photos"]), "--model", setup["model_dir"], "--layer", "logits",
                 "--batch-size", "2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["layer"] == "logits" and len(printed["image"]) == 7
    assert printed["columns"] == [c["id"] for c in CATEGORIES]  # the model's classes, by WordNet id
    np.testing.assert_allclose(np.array(printed["features"], dtype=np.float32),  # batches of 2 against 32
                               alexnet_features(setup["model_dir"], str(setup["photos"]), "logits")["features"],
                               rtol=1e-5, atol=1e-7)


def test_a_bucket_folder_gives_the_local_folders_values(setup, cloud_env):
    from alexnet.storage.location import open_filesystem

    prefix = f"alexnet-test/features-{uuid.uuid4().hex[:8]}"
    fs = open_filesystem(f"s3://{prefix}")
    photos = sorted(setup["photos"].glob("*.jpg"))[:3]
    for photo in photos:
        fs.pipe_file(f"{prefix}/{photo.name}", photo.read_bytes())
    remote = alexnet_features(setup["model_dir"], f"s3://{prefix}/")
    local = alexnet_features(setup["model_dir"], [str(p) for p in photos])
    assert remote["image"] == [f"s3://{prefix}/{p.name}" for p in photos]
    np.testing.assert_array_equal(remote["features"], local["features"])
