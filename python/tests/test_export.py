"""alexnet_export(): a SavedModel that plain TensorFlow serves without alexnet or Keras, agreeing with
alexnet_predict(); its signatures as saved_model_cli lists them; TF Lite; gs:// and s3://; the export carried by a
model pin; bad input; a bfloat16-trained model exported in float32, its Keras file loaded without alexnet."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from helpers_export import run_without  # noqa: E402
from helpers_images import png_claiming  # noqa: E402
from helpers_model import card_for, save_model_dir, saved_tiny_model  # noqa: E402
from helpers_train import make_tree, write_quirks  # noqa: E402

from alexnet.data import images as image_checks  # noqa: E402
from alexnet.errors import AlexnetError, IntegrityError  # noqa: E402
from alexnet.input.decode import decode_for_eval  # noqa: E402
from alexnet.model.export import alexnet_export  # noqa: E402
from alexnet.model.pin import alexnet_model  # noqa: E402
from alexnet.model.predict import alexnet_predict  # noqa: E402
from alexnet.model.publishing import publish_model  # noqa: E402
from alexnet.model.serving import decode_images  # noqa: E402

CATEGORIES = [{"id": f"n0200000{i}", "name": f"thing {i}"} for i in range(4)]
SIZE = 64

#: Loads the export with tf.saved_model.load only and serves the image files given, then bytes that are no image.
SERVE = """
import json, sys
import tensorflow as tf
served = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
images = [open(path, "rb").read() for path in sys.argv[2:]] + [b"", b"hello, world"]
answer = {k: v.numpy().tolist() for k, v in served(images=tf.constant(images)).items()}
text = {k: [[s.decode() for s in row] if isinstance(row, list) else row.decode() for row in v]
        for k, v in answer.items() if k in ("ids", "names", "error")}
print(json.dumps({**answer, **text}))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    """A tiny 4-class model saved with its card, validation JPEGs and odd images, and its SavedModel export."""
    root = tmp_path_factory.mktemp("export")
    model, model_dir = saved_tiny_model(root / "model", CATEGORIES, seed=7, image_size=None)
    tree = make_tree(root / "tree", classes=2, per_class=0, val_per_class=3, seed=2, min_side=50, max_side=120)
    quirks = write_quirks(root / "quirks")
    images = [*tree["val_image"], *(str(quirks[k]) for k in ("cmyk", "grayscale", "png"))]
    result = alexnet_export(model_dir, str(root / "served"), top=3)
    return {"root": root, "model": model, "model_dir": model_dir, "images": images, "quirks": quirks,
            "result": result, "path": str(root / "served")}


def _predicted(model: str, images: list[str], top: int) -> tuple[list[list[str]], np.ndarray]:
    records = alexnet_predict(model, images, top=top)
    ids = [[r["id"] for r in records if r["image"] == image] for image in images]
    probabilities = np.array([[r["probability"] for r in records if r["image"] == image] for image in images])
    return ids, probabilities


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_plain_tensorflow_without_alexnet_or_keras_serves_the_export_as_predict_does(exported):
    images = exported["images"]
    answer = run_without(SERVE, exported["path"], *images, str(exported["quirks"]["truncated"]),
                         blocked=("alexnet", "keras", "tf_keras"))
    ids, probabilities = _predicted(exported["model_dir"], images, top=3)
    good = len(images)
    assert answer["ok"] == [True] * good + [False] * 3 and answer["error"][:good] == [""] * good
    assert answer["error"][good:] == ["truncated or corrupt", "empty", "not a JPEG, PNG, GIF, BMP or WebP image"]
    assert [row[0] for row in answer["ids"][:good]] == [row[0] for row in ids], "the same top-1 as alexnet_predict"
    assert answer["ids"][:good] == ids
    np.testing.assert_allclose(np.array(answer["probabilities"][:good]), probabilities, atol=1e-3)
    names = {c["id"]: c["name"] for c in CATEGORIES}
    index = {c["id"]: i for i, c in enumerate(CATEGORIES)}
    assert all(names[i] == n for row, names_row in zip(answer["ids"], answer["names"], strict=True)
               for i, n in zip(row, names_row, strict=True) if i)
    assert all(index[i] == k for row, ks in zip(answer["ids"][:good], answer["indices"][:good], strict=True)
               for i, k in zip(row, ks, strict=True))
    for bad in range(good, good + 3):  # a bad image costs only itself
        assert answer["indices"][bad] == [-1] * 3 and answer["probabilities"][bad] == [0.0] * 3
        assert answer["ids"][bad] == [""] * 3 and answer["names"][bad] == [""] * 3


#: Loads the export as README tells a Keras 3 user to (a layer) and serves the image files given through it.
KERAS3 = """
import json, sys
import keras
import tensorflow as tf
layer = keras.layers.TFSMLayer(sys.argv[1], call_endpoint="serving_default")
answer = layer(tf.constant([open(path, "rb").read() for path in sys.argv[2:]]))
answer = {k: v.numpy().tolist() for k, v in answer.items()}
text = {k: [[s.decode() for s in row] if isinstance(row, list) else row.decode() for row in v]
        for k, v in answer.items() if k in ("ids", "names", "error")}
print(json.dumps({"keras": keras.__version__, "backend": keras.backend.backend(), **answer, **text}))
"""


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_keras_3_loads_the_export_as_a_layer_that_answers_as_predict_does(exported):
    """README: Keras 3 loads the export with ``keras.layers.TFSMLayer(path, call_endpoint = "serving_default")``;
    here in a Python without alexnet or tf-keras (and without TF_USE_LEGACY_KERAS), so that ``keras`` is Keras 3."""
    images = exported["images"]
    answer = run_without(KERAS3, exported["path"], *images, str(exported["quirks"]["truncated"]),
                         blocked=("alexnet", "tf_keras"))
    assert answer.pop("keras").split(".")[0] == "3" and answer.pop("backend") == "tensorflow"
    assert set(answer) == {"indices", "ids", "names", "probabilities", "ok", "error"}
    ids, probabilities = _predicted(exported["model_dir"], images, top=3)
    good = len(images)
    assert answer["ok"] == [True] * good + [False] and answer["error"] == [""] * good + ["truncated or corrupt"]
    assert answer["ids"][:good] == ids
    np.testing.assert_allclose(np.array(answer["probabilities"][:good]), probabilities, atol=1e-3)
    names = {c["id"]: c["name"] for c in CATEGORIES}
    assert answer["names"][:good] == [[names[i] for i in row] for row in ids]
    assert answer["indices"][:good] == [[[c["id"] for c in CATEGORIES].index(i) for i in row] for row in ids]
    assert answer["indices"][good] == [-1] * 3 and answer["ids"][good] == [""] * 3


def _encoded(image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def test_an_image_declaring_more_pixels_than_pillow_allows_is_refused_undecoded_and_the_rest_answered(exported):
    served = tf.saved_model.load(exported["path"]).signatures["serving_default"]
    good = Path(exported["images"][0]).read_bytes()
    answer = served(images=tf.constant([png_claiming(20000, 20000), good]))
    limit = image_checks.MAX_PIXELS
    assert answer["ok"].numpy().tolist() == [False, True]
    assert [e.decode() for e in answer["error"].numpy()] == [
        f"too large to decode safely (400000000 pixels, more than the limit {limit})", ""]
    assert answer["indices"].numpy()[0].tolist() == [-1] * 3 and answer["indices"].numpy()[1, 0] >= 0


def test_serving_reads_each_format_predict_reads_and_refuses_above_the_limit_from_headers(monkeypatch):
    from PIL import Image

    monkeypatch.setattr(image_checks, "MAX_PIXELS", 40 * 30)  # read when the graph is built
    picture = Image.new("RGB", (40, 30), (200, 40, 20))
    frames = [Image.new("RGB", (40, 30), (i * 60, 0, 0)) for i in range(3)]
    images = {  # each format at the limit, then one pixel row above it
        **{fmt: _encoded(picture, fmt) for fmt in ("JPEG", "PNG", "GIF", "BMP", "WEBP")},
        "lossless transparent WebP": _encoded(picture.convert("RGBA"), "WEBP", lossless=True),
        "transparent WebP": _encoded(picture.convert("RGBA"), "WEBP"),
        **{f"big {fmt}": _encoded(Image.new("RGB", (40, 31)), fmt) for fmt in ("JPEG", "PNG", "GIF", "BMP", "WEBP")},
        "big lossless WebP": _encoded(Image.new("RGB", (40, 31)), "WEBP", lossless=True),
        "big transparent WebP": _encoded(Image.new("RGBA", (40, 31)), "WEBP"),
        "TIFF": _encoded(picture, "TIFF"),
        "animated WebP": _encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:]),
        "animated GIF": _encoded(frames[2], "GIF", save_all=True, append_images=frames[:2]),  # its first frame read
    }
    pixels, ok, error = decode_images(tf.constant(list(images.values())), 16)
    errors = [e.decode() for e in error.numpy()]
    answers = dict(zip(images, zip(ok.numpy().tolist(), errors, strict=True), strict=True))
    too_large = "too large to decode safely (1240 pixels, more than the limit 1200)"
    assert answers == {**{name: (True, "") for name in list(images)[:7]},
                       **{name: (False, too_large) for name in list(images)[7:14]},
                       "TIFF": (False, "not a JPEG, PNG, GIF, BMP or WebP image"),
                       "animated WebP": (False, "an animated WebP is not read (a still one is)"),
                       "animated GIF": (True, "")}
    assert pixels.numpy()[:7, 8, 8, 0].min() > 150 and pixels.numpy()[7:-1].max() == 0
    assert pixels.numpy()[-1, 8, 8].tolist() == [120, 0, 0], "the first frame of the animated GIF"


def test_the_pixels_signature_takes_what_decoding_gives_and_the_card_is_beside(exported):
    loaded = tf.saved_model.load(exported["path"])
    pixels = np.stack([decode_for_eval(tf.io.read_file(p), SIZE).numpy() for p in exported["images"]])
    by_pixels = loaded.signatures["pixels"](pixels=tf.constant(pixels, tf.float32))
    by_images = loaded.signatures["serving_default"](images=tf.constant([Path(p).read_bytes()
                                                                         for p in exported["images"]]))
    np.testing.assert_array_equal(by_pixels["indices"].numpy(), by_images["indices"].numpy())
    np.testing.assert_allclose(by_pixels["probabilities"].numpy(), by_images["probabilities"].numpy(), rtol=1e-6)
    expected = exported["model"].predict(pixels, verbose=0)
    np.testing.assert_allclose(by_pixels["probabilities"].numpy(), -np.sort(-expected, axis=1)[:, :3], rtol=1e-5)
    empty = loaded.signatures["serving_default"](images=tf.constant([], tf.string))
    assert empty["ids"].shape == (0, 3) and empty["ok"].shape == (0,)
    result = exported["result"]
    assert result["path"] == exported["path"] and result["format"] == "savedmodel" and result["pin"] is None
    assert result["files"][-1] == "alexnet-model.json" and "saved_model.pb" in result["files"]
    assert result["signatures"]["serving_default"]["inputs"] == {"images": "string[?]"}
    assert result["signatures"]["pixels"]["inputs"] == {"pixels": f"float32[?,{SIZE},{SIZE},3]"}
    assert result["signatures"]["serving_default"]["outputs"]["ids"] == "string[?,3]"
    card = Path(exported["path"], "alexnet-model.json").read_text()
    assert card == Path(exported["model_dir"], "alexnet-model.json").read_text()
    assert result["top"] == 3 and result["image_size"] == SIZE and result["num_classes"] == 4


def test_saved_model_cli_lists_both_signatures(exported):
    cli = Path(sys.executable).parent / "saved_model_cli"
    shown = subprocess.run([str(cli), "show", "--dir", exported["path"], "--all"], capture_output=True, text=True,
                           timeout=300, check=True).stdout
    assert "signature_def['serving_default']" in shown and "signature_def['pixels']" in shown
    default = shown.split("signature_def['serving_default']")[1]
    assert "inputs['images'] tensor_info:\n        dtype: DT_STRING" in default
    for output, dtype in (("indices", "DT_INT32"), ("ids", "DT_STRING"), ("names", "DT_STRING"),
                          ("probabilities", "DT_FLOAT"), ("ok", "DT_BOOL"), ("error", "DT_STRING")):
        assert f"outputs['{output}'] tensor_info:\n        dtype: {dtype}" in default


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_tf_lite_converts_the_pixels_signature_and_overwrite_replaces_an_earlier_export(exported, tmp_path, caplog):
    target = tmp_path / "lite"
    result = alexnet_export(exported["model_dir"], str(target), "tflite", top=2)
    assert result["files"] == ["alexnet.tflite", "alexnet-model.json"] and list(result["signatures"]) == ["pixels"]
    interpreter = tf.lite.Interpreter(model_path=str(target / "alexnet.tflite"))
    run = interpreter.get_signature_runner("pixels")
    pixels = np.stack([decode_for_eval(tf.io.read_file(p), SIZE).numpy() for p in exported["images"][:2]])
    answer = run(pixels=pixels.astype(np.float32))
    expected = tf.saved_model.load(exported["path"]).signatures["pixels"](pixels=tf.constant(pixels, tf.float32))
    np.testing.assert_array_equal(answer["indices"], expected["indices"].numpy()[:, :2])
    np.testing.assert_allclose(answer["probabilities"], expected["probabilities"].numpy()[:, :2], atol=1e-5)
    assert [[s.decode() for s in row] for row in answer["ids"]] == \
        [[s.decode() for s in row] for row in expected["ids"].numpy()[:, :2]]
    with pytest.raises(AlexnetError, match=r"exists and is not empty \(2 entries: alexnet-model.json, alexnet.tflite"):
        alexnet_export(exported["model_dir"], str(target))
    with caplog.at_level("WARNING", logger="alexnet.model.export"):
        again = alexnet_export(exported["model_dir"], str(target), overwrite=True, name="mine")
    assert again["pin"] is None and "no `board` is given: no pin is published" in caplog.text
    assert sorted(os.listdir(target)) == sorted({f.split("/")[0] for f in again["files"]} | {"assets"})
    assert not (target / "alexnet.tflite").exists(), "the earlier export was replaced, not added to"


def test_bad_exports_are_refused_before_any_work(exported, tmp_path):
    model_dir = exported["model_dir"]
    other = tmp_path / "notes"
    other.mkdir()
    (other / "thesis.txt").write_text("mine")
    with pytest.raises(AlexnetError, match=r"holds files that are not an export .*thesis.txt"):
        alexnet_export(model_dir, str(other), overwrite=True)
    assert (other / "thesis.txt").read_text() == "mine"
    with pytest.raises(AlexnetError, match="is a file"):
        alexnet_export(model_dir, str(other / "thesis.txt"))
    bare = save_model_dir(exported["model"], tmp_path / "bare")
    with pytest.raises(AlexnetError, match=r"has no card .* names and its image size would be unknown"):
        alexnet_export(str(bare.parent), str(tmp_path / "out"))
    with pytest.raises(AlexnetError, match="has no card"):
        alexnet_export(exported["model"], str(tmp_path / "out"))
    with pytest.raises(AlexnetError, match="`format` must be one of 'savedmodel', 'tflite', not 'onnx'"):
        alexnet_export(model_dir, str(tmp_path / "out"), "onnx")
    with pytest.raises(AlexnetError, match="give `path`"):
        alexnet_export(model_dir)
    # an export given where a model is read: said to be one
    with pytest.raises(AlexnetError, match=r"^the model .*served is an export \(for serving without this package, "
                                           r"alexnet_export\(\)\), not a saved model: give the model it was exported "
                                           r"from"):
        alexnet_export(exported["path"], str(tmp_path / "again"))
    # a file's name: the export would have been a folder of that name
    with pytest.raises(AlexnetError, match=r"^`path` = '.*model\.tflite' names a file, and an export is a folder "
                                           r"\(a SavedModel's files, or alexnet\.tflite in it\): give the folder to "
                                           r"write, e\.g\. '.*/model'\.$"):
        alexnet_export(model_dir, str(tmp_path / "model.tflite"), "tflite")
    assert not (tmp_path / "model.tflite").exists()
    with pytest.raises(AlexnetError, match="`top` must be"):
        alexnet_export(model_dir, str(tmp_path / "out"), top=0)
    with pytest.raises(AlexnetError, match="`name` = 'categories' is the name of one of the data board"):
        alexnet_export(model_dir, board=str(tmp_path / "board"), name="categories")
    assert not (tmp_path / "out").exists()


def _copy_of(export: str, folder: Path) -> Path:
    import shutil

    shutil.copytree(export, folder)
    return folder


@pytest.mark.long  # make test-long (CI)
def test_overwrite_replaces_only_a_folder_holding_an_export_and_nothing_else(exported, tmp_path, monkeypatch):
    import alexnet.model.export as export_module

    model_dir = exported["model_dir"]
    # a project folder that happens to hold an export's file beside its own: refused, and all of it kept
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "analysis.R").write_text("important")
    (project / "data.csv").write_text("x")
    (project / "alexnet.tflite").write_bytes(b"tflite")
    with pytest.raises(AlexnetError, match=r"holds files that are not an export \(data.csv, src\): `overwrite` "
                                           r"replaces only a folder holding an earlier export and nothing else"):
        alexnet_export(model_dir, str(project), "tflite", overwrite=True)
    assert (project / "src" / "analysis.R").read_text() == "important" and (project / "data.csv").read_text() == "x"
    assert (project / "alexnet.tflite").read_bytes() == b"tflite"
    # an earlier SavedModel with one file more, anywhere in it, is not emptied either
    for extra, named in (("NOTES.txt", "NOTES.txt"), ("variables/extra/x.bin", "variables/extra"),
                         ("assets/words.txt", "assets/words.txt"), ("variables/mine.txt", "variables/mine.txt")):
        folder = _copy_of(exported["path"], tmp_path / f"with-{named.replace('/', '-')}")
        (folder / extra).parent.mkdir(parents=True, exist_ok=True)
        (folder / extra).write_text("mine")
        with pytest.raises(AlexnetError, match=rf"holds files that are not an export \({named}\)"):
            alexnet_export(model_dir, str(folder), overwrite=True)
        assert (folder / extra).read_text() == "mine" and (folder / "saved_model.pb").exists()
    # a folder holding the card alone holds no earlier export
    alone = tmp_path / "card-alone"
    alone.mkdir()
    (alone / "alexnet-model.json").write_text("{}")
    with pytest.raises(AlexnetError, match=r"holds no earlier export .*this folder is not emptied"):
        alexnet_export(model_dir, str(alone), overwrite=True)
    assert (alone / "alexnet-model.json").read_text() == "{}"
    # a file that comes while the export is made is seen before anything is removed
    late = _copy_of(exported["path"], tmp_path / "late")
    build = export_module.build_export

    def build_then_drop(*args, **kwargs):
        (late / "NOTES.txt").write_text("came late")
        return build(*args, **kwargs)

    monkeypatch.setattr(export_module, "build_export", build_then_drop)
    with pytest.raises(AlexnetError, match=r"holds files that are not an export \(NOTES.txt\)"):
        alexnet_export(model_dir, str(late), overwrite=True)
    assert (late / "NOTES.txt").read_text() == "came late" and (late / "saved_model.pb").exists()
    monkeypatch.undo()
    # an export and nothing else (with its empty assets/) is replaced
    pure = _copy_of(exported["path"], tmp_path / "pure")
    (pure / "saved_model.pb").write_bytes(b"an older export")
    result = alexnet_export(model_dir, str(pure), overwrite=True, top=2)
    assert (pure / "saved_model.pb").read_bytes() != b"an older export" and result["top"] == 2
    assert sorted(os.listdir(pure)) == ["alexnet-model.json", "assets", "fingerprint.pb", "saved_model.pb",
                                        "variables"]


@pytest.mark.parametrize("scheme", ["gs", pytest.param("s3", marks=pytest.mark.long)])  # s3: make test-long (CI)
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_an_export_is_written_to_a_bucket_and_served_from_it(exported, cloud_env, tmp_path, scheme):
    from alexnet.storage.location import open_filesystem

    location = f"{scheme}://alexnet-outputs/exports-{uuid.uuid4().hex[:8]}/alexnet"
    result = alexnet_export(exported["model_dir"], location, top=3)
    assert result["path"] == location
    fs = open_filesystem(location)
    remote = location.split("://", 1)[1]
    listed = sorted(p[len(remote) + 1:] for p in fs.find(remote))
    assert listed == sorted(result["files"])
    with pytest.raises(AlexnetError, match="exists and is not empty"):
        alexnet_export(exported["model_dir"], location)
    fs.pipe_file(f"{remote}/variables/NOTES.txt", b"mine")
    with pytest.raises(AlexnetError, match=r"holds files that are not an export \(variables/NOTES.txt\)"):
        alexnet_export(exported["model_dir"], location, overwrite=True)
    assert fs.cat_file(f"{remote}/variables/NOTES.txt") == b"mine"
    fs.rm_file(f"{remote}/variables/NOTES.txt")
    local = tmp_path / "copy"
    for rel in listed:
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(fs.cat_file(f"{remote}/{rel}"))
    served = tf.saved_model.load(str(local)).signatures["serving_default"]
    answer = served(images=tf.constant([Path(exported["images"][0]).read_bytes()]))
    assert answer["ids"].numpy()[0, 0].decode() == _predicted(exported["model_dir"], exported["images"][:1], 1)[0][0][0]


@pytest.mark.long  # make test-long (CI)
def test_a_model_pin_carries_the_export_beside_its_keras_file_checked_by_sha256(exported, tmp_path):
    board = str(tmp_path / "board")
    first = publish_model(board, "alexnet", str(Path(exported["model_dir"]) / "alexnet.keras"), card_for(CATEGORIES))
    pin = alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache")
    assert pin["formats"] == ["keras"] and pin["export_path"] is None
    with pytest.raises(AlexnetError, match="carries no export: publish one with alexnet_export"):
        alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache", export=True)
    result = alexnet_export(pin, board=board)  # the pin's own name, a new version
    assert result["path"] is None and result["pin"]["name"] == "alexnet" and result["pin"]["version"] > first["version"]
    carried = alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache", export=True)
    assert carried["formats"] == ["keras", "savedmodel"] and carried["version"] == result["pin"]["version"]
    assert sorted(os.listdir(carried["export_path"])) == ["alexnet-model.json", "fingerprint.pb", "saved_model.pb",
                                                         "variables"]
    served = tf.saved_model.load(carried["export_path"]).signatures["serving_default"]
    answer = served(images=tf.constant([Path(p).read_bytes() for p in exported["images"][:2]]))
    ids, _ = _predicted(carried, exported["images"][:2], top=4)
    assert [[s.decode() for s in row] for row in answer["ids"].numpy()] == ids
    # the previous version is still the Keras file alone; a damaged zip is refused and nothing of it is kept
    assert alexnet_model(board, "alexnet", first["version"], cache_dir=tmp_path / "cache")["formats"] == ["keras"]
    on_board = Path(board, "alexnet", result["pin"]["version"], "alexnet-savedmodel.zip")
    data = bytearray(on_board.read_bytes())
    data[len(data) // 2] ^= 0xFF
    on_board.write_bytes(bytes(data))
    fresh = tmp_path / "fresh"
    with pytest.raises(IntegrityError, match=r"savedmodel export of pin 'alexnet'.*tampered with or damaged"):
        alexnet_model(board, "alexnet", cache_dir=fresh, export=True)
    assert not [p for p in fresh.rglob("*.zip")] and not [p for p in fresh.rglob("saved_model.pb")]
    assert sorted(p.name for p in fresh.rglob("*") if p.is_file()) == ["alexnet-model.json", "alexnet.keras"]
    assert len(list(fresh.iterdir())) == 1, "the folder made for the zip was kept, empty"


@pytest.mark.long  # make test-long (CI)
def test_the_same_export_pinned_again_keeps_the_newest_version(exported, tmp_path, caplog):
    import dataclasses

    from alexnet.model.export import pinned_already
    from alexnet.storage.board import open_board

    card = dataclasses.replace(card_for(CATEGORIES), weights_sha256="ab" * 32)
    model_dir = tmp_path / "model"
    save_model_dir(exported["model"], model_dir, card)
    board = str(tmp_path / "board")
    with caplog.at_level("WARNING", logger="alexnet"):
        first = alexnet_export(str(model_dir), board=board, name="served")["pin"]
    assert f"Board {board} holds no pins: model pin served makes it a new board." in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="alexnet"):
        again = alexnet_export(str(model_dir), board=board, name="served")["pin"]
    assert again == first, "the version that holds it already, returned as what was pinned"
    assert f"Model pin served version {first['version']} on {first['board']} holds this model with its savedmodel " \
        "export already: no new version, that one is kept." in caplog.text
    assert "Published the model" not in caplog.text
    versions = open_board(board).pins.pin_versions("served", as_df=False)
    assert [str(v.version) for v in versions] == [first["version"]]
    # another export of it (other classes per image) is a new version; the Keras file alone (a finished training
    # run again) is there already, and the export pinned beside it stays the newest version's
    assert pinned_already(board, "served", card, "savedmodel", top=4) is not None
    assert pinned_already(board, "served", card, "savedmodel", top=2) is None
    assert pinned_already(board, "served", card, None) == first
    assert pinned_already(board, "served", card, "tflite", top=4) is None
    other = alexnet_export(str(model_dir), board=board, name="served", top=2)["pin"]
    assert other["version"] != first["version"]
    # a card that does not know its weights' SHA-256 gets a new version each time
    unknown = tmp_path / "unknown"
    save_model_dir(exported["model"], unknown, card_for(CATEGORIES))
    once = alexnet_export(str(unknown), board=board, name="plain")["pin"]
    assert alexnet_export(str(unknown), board=board, name="plain")["pin"]["version"] != once["version"]


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_the_export_command_writes_and_pins(exported, tmp_path, capsys, caplog):
    from alexnet.cli import main

    board = str(tmp_path / "board")
    code = main(["export", exported["model_dir"], "--path", str(tmp_path / "cli"), "--top", "2", "--pin", "served",
                 "--pin-board", board])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"Written to {tmp_path / 'cli'}" in printed and "Pinned as served version" in printed
    assert "Signature serving_default: images string[?] -> error string[?], ids string[?,2]" in printed
    assert alexnet_model(board, "served", cache_dir=tmp_path / "cache")["formats"] == ["keras", "savedmodel"]
    assert main(["export", exported["model_dir"], "--path", str(tmp_path / "cli")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    # --pin-board alone publishes, as alexnet_export(board = ...) does: in the pin the model was read from
    assert main(["export", "--model-pin", "served", "--board", board, "--model-cache", str(tmp_path / "cache"),
                 "--pin-board", board, "--format", "tflite"]) == 0
    assert "Pinned as served version" in capsys.readouterr().out
    assert alexnet_model(board, "served", cache_dir=tmp_path / "cache")["formats"] == ["keras", "tflite"]
    # what to give is the core's one message, said with the options typed, before the model pin is read
    assert main(["export", "--model-pin", "missing", "--board", board]) == 2
    assert "give `--path` (a folder, gs:// or s3:// location to write the export to), `--pin-board` (to publish it " \
           "in a model pin), or both." in capsys.readouterr().err
    # a pin named without a board to publish it on: the core's warning, said as typed, and nothing published
    with caplog.at_level("WARNING", logger="alexnet"):
        assert main(["export", exported["model_dir"], "--path", str(tmp_path / "cli2"), "--pin", "other"]) == 0
    assert "`--pin` is the name of the model pin published on `--pin-board`, and no `--pin-board` is given" \
        in caplog.text
    assert main(["export", exported["model_dir"], "--path", str(tmp_path / "cli3"), "--pin", "n01440764",
                 "--pin-board", board]) == 2
    assert "`--pin` 'n01440764' is the name of one of the data board's own pins" in capsys.readouterr().err
    assert not (tmp_path / "cli3").exists()


#: Loads a pinned alexnet.keras with tf_keras alone and prints its probabilities for the pixels saved as .npy.
KERAS_LOAD = """
import json, sys
import numpy as np
import tf_keras
model = tf_keras.models.load_model(sys.argv[1])
print(json.dumps(model.predict(np.load(sys.argv[2]), verbose=0).tolist()))
"""


def _types(saved_model: str) -> set[int]:
    """Every dtype named in the graph and functions of a SavedModel."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(Path(saved_model, "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    found: set[int] = set()
    for node in [*graph.node, *(n for f in graph.library.function for n in f.node_def)]:
        for value in node.attr.values():
            found.add(value.type)
            found.update(value.list.type)
    return found


@pytest.mark.long  # make test-long (CI)
def test_a_bfloat16_trained_model_is_exported_in_float32_and_its_keras_file_loads_without_alexnet(tmp_path):
    from tensorflow.core.framework import types_pb2

    from alexnet.model.saved import load_model
    from alexnet.model.serving import float32_copy
    from alexnet.train.api import alexnet_train

    data = make_tree(tmp_path / "tree", classes=2, per_class=6, val_per_class=2, seed=4, min_side=64, max_side=96)
    board = str(tmp_path / "board")
    history = alexnet_train(4, 1, data, precision="bfloat16", steps_per_epoch=2, image_size=SIZE, dense_units=16,
                            validation=False, verbose=0, seed=1, model_pin="alexnet", model_board=board,
                            model_format="keras+savedmodel")
    assert history["params"]["precision"] == "bfloat16"
    pin = alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache", export=True)
    assert pin["formats"] == ["keras", "savedmodel"]
    keras_model = load_model(pin).model
    assert keras_model.get_layer("conv1").compute_dtype == "bfloat16", "the Keras file keeps its training policy"
    served = tf.saved_model.load(pin["export_path"])
    stored = tf.train.load_checkpoint(str(Path(pin["export_path"], "variables", "variables")))
    variables = {k: v for k, v in stored.get_variable_to_dtype_map().items()
                 if k.endswith("/.ATTRIBUTES/VARIABLE_VALUE")}
    assert len(variables) == 16 and set(variables.values()) == {tf.float32}, variables
    types = _types(pin["export_path"])
    assert types_pb2.DT_FLOAT in types and types_pb2.DT_BFLOAT16 not in types and types_pb2.DT_HALF not in types
    pixels = np.stack([decode_for_eval(tf.io.read_file(p), SIZE).numpy() for p in data["val_image"]])
    expected = float32_copy(keras_model).predict(pixels.astype(np.float32), verbose=0)
    answer = served.signatures["pixels"](pixels=tf.constant(pixels, tf.float32))
    np.testing.assert_allclose(answer["probabilities"].numpy(), -np.sort(-expected, axis=1), rtol=1e-5, atol=1e-6)
    # the pinned alexnet.keras, in a Python where alexnet cannot be imported: tf_keras alone loads it
    np.save(tmp_path / "pixels.npy", pixels)
    elsewhere = run_without(KERAS_LOAD, pin["path"], str(tmp_path / "pixels.npy"))
    np.testing.assert_allclose(np.array(elsewhere), keras_model.predict(pixels, verbose=0), rtol=1e-6, atol=1e-7)


def test_a_bucket_folder_s_placeholder_object_is_a_folder_of_the_export():
    """Some tools write an empty object ``name/`` for a folder in a bucket: an export's ``variables/`` so written is
    its folder, not a file that no export writes."""
    from alexnet.model.export import _not_an_export

    class Bucket:
        def find(self, root):
            return [f"{root}/saved_model.pb", f"{root}/variables/", f"{root}/variables/variables.index",
                    f"{root}/variables/variables.data-00000-of-00001", f"{root}/assets/"]

    assert _not_an_export(Bucket(), "bkt/served", local=False) == []

    class Other(Bucket):
        def find(self, root):
            return [*super().find(root), f"{root}/notes/"]

    assert _not_an_export(Other(), "bkt/served", local=False) == ["notes"]


def test_an_export_leaves_the_root_logger_as_the_program_left_it(exported, tmp_path, monkeypatch):
    """TensorFlow logs through absl while it saves, and absl calls logging.basicConfig() when the root logger has no
    handler: a program that configures its logging after an export found its basicConfig(...) ignored."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # a program that has not configured logging
    alexnet_export(exported["model_dir"], str(tmp_path / "again"))
    assert root.handlers == []
