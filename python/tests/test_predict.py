"""alexnet_predict(): the card's ids and names for each image, best first, and one error naming bad images."""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from helpers_model import (  # noqa: E402
    IMAGE_SIZE,
    card_for,
    model_before_pooling,
    model_with_old_pooling,
    save_model_dir,
    saved_tiny_model,
    tiny_model,
)
from helpers_train import class_image, jpeg_bytes, write_quirks  # noqa: E402

from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.input.decode import decode_for_eval  # noqa: E402
from alexnet.model.predict import alexnet_predict  # noqa: E402

CATEGORIES = [{"id": f"n0000100{i}", "name": f"thing number {i}"} for i in range(6)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict")
    model, model_dir = saved_tiny_model(root / "model", CATEGORIES, seed=2)
    rng = np.random.default_rng(0)
    images = []
    for label in range(3):
        path = root / f"image{label}.jpg"
        path.write_bytes(jpeg_bytes(class_image(rng, label, 70 + 10 * label, 100)))
        images.append(str(path))
    return {"model": model, "model_dir": model_dir, "images": images, "quirks": write_quirks(root / "quirks")}


def test_predictions_name_the_cards_classes_in_order_best_first(setup):
    images = list(reversed(setup["images"]))
    records = alexnet_predict(setup["model_dir"], images, top=3, batch_size=2)
    assert len(records) == 3 * len(images)
    assert [r["image"] for r in records] == [image for image in images for _ in range(3)]
    assert [r["rank"] for r in records] == [1, 2, 3] * len(images)
    ids = [c["id"] for c in CATEGORIES]
    names = dict((c["id"], c["name"]) for c in CATEGORIES)
    for k, image in enumerate(images):
        rows = records[3 * k : 3 * k + 3]
        probabilities = [r["probability"] for r in rows]
        assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1 + 1e-6
        assert all(names[r["id"]] == r["name"] for r in rows)
        # the model's own prediction on the image decoded as evaluation decodes it
        pixels = decode_for_eval(tf.io.read_file(image), IMAGE_SIZE).numpy()[None]
        expected = setup["model"].predict(pixels, verbose=0)[0]
        best = np.argsort(-expected)[:3]
        assert [r["id"] for r in rows] == [ids[i] for i in best]
        np.testing.assert_allclose(probabilities, expected[best], rtol=1e-5)


def test_odd_formats_and_bytes_work(setup):
    quirks = setup["quirks"]
    given = [str(quirks["cmyk"]), str(quirks["grayscale"]), str(quirks["png"]), quirks["png"].read_bytes()]
    records = alexnet_predict(setup["model_dir"], given, top=1)
    assert [r["image"] for r in records] == [*given[:3], "<bytes 3>"]
    assert records[2]["id"] == records[3]["id"]
    assert records[2]["probability"] == pytest.approx(records[3]["probability"])


def test_unreadable_images_are_all_named_and_nothing_is_returned(setup, tmp_path):
    quirks = setup["quirks"]
    missing = str(tmp_path / "missing.jpg")
    given = [setup["images"][0], str(quirks["truncated"]), missing, str(quirks["empty"])]
    with pytest.raises(AlexnetError, match="3 of 4 image") as raised:
        alexnet_predict(setup["model_dir"], given)
    message = str(raised.value)
    assert "truncated.JPEG" in message and "missing.jpg" in message and "empty.JPEG" in message
    assert setup["images"][0] not in message


def _by_image(records: list[dict]) -> dict[str, list[tuple[str, float]]]:
    """Each image's ranked ids and probabilities, by the name the records give it."""
    ranked: dict[str, list[tuple[str, float]]] = {}
    for r in records:
        ranked.setdefault(r["image"], []).append((r["id"], r["probability"]))
    return ranked


def _assert_same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]], what: str) -> None:
    assert [i for i, _ in got] == [i for i, _ in expected], what
    np.testing.assert_allclose([p for _, p in got], [p for _, p in expected], rtol=1e-5, err_msg=what)


def _photo_folder(setup, folder: Path, count: int) -> dict[str, str]:
    """``folder`` with ``count`` images (copies of the setup's three, in turn, under names that sort otherwise than
    they were written), a PNG, a text file, a hidden image and a subfolder's image; the source of each image by name."""
    folder.mkdir()
    sources = {}
    for k in range(count):
        name = f"photo-{(7 * k) % count:03d}.{'JPEG' if k % 2 else 'jpg'}"
        sources[name] = setup["images"][k % 3]
        shutil.copy(sources[name], folder / name)
    sources["zz.png"] = str(setup["quirks"]["png"])
    shutil.copy(sources["zz.png"], folder / "zz.png")
    (folder / "notes.txt").write_text("not an image")
    shutil.copy(setup["images"][0], folder / ".hidden.jpg")
    (folder / "sub").mkdir()
    shutil.copy(setup["images"][0], folder / "sub" / "deeper.jpg")
    return sources


def test_a_folder_stands_for_its_image_files_in_the_order_of_their_names(setup, tmp_path):
    # more images than one chunk of reads (4 x READERS), so that chunks follow each other in order
    from alexnet.model.predict import READERS

    folder = tmp_path / "photos"
    sources = _photo_folder(setup, folder, 4 * READERS + 3)
    given = [f"{folder}/", setup["quirks"]["png"].read_bytes(), setup["images"][1]]
    records = alexnet_predict(setup["model_dir"], given, top=2, batch_size=5)
    expected_names = [f"{folder}/{name}" for name in sorted(sources)] + ["<bytes 1>", setup["images"][1]]
    assert [r["image"] for r in records[::2]] == expected_names
    # each image of the folder is predicted as the file itself is
    alone = _by_image(alexnet_predict(setup["model_dir"], [*setup["images"], str(setup["quirks"]["png"])], top=2))
    ranked = _by_image(records)
    for name, source in sources.items():
        _assert_same_ranking(ranked[f"{folder}/{name}"], alone[source], name)
    _assert_same_ranking(ranked["<bytes 1>"], alone[str(setup["quirks"]["png"])], "the bytes")


def _watched(setup, monkeypatch) -> list[tuple[str, int]]:
    """Chunks of 2 readers (8 images), and the events of a prediction in order: ("read", 1) for each image read and
    ("predict", n) for each batch of n images predicted."""
    import alexnet.model.predict as predict
    from alexnet.model.saved import load_model

    events: list[tuple[str, int]] = []
    monkeypatch.setattr(predict, "READERS", 2)
    reader = predict._read
    monkeypatch.setattr(predict, "_read", lambda *a: events.append(("read", 1)) or reader(*a))
    model = load_model(setup["model_dir"]).model  # the one prediction uses: loaded once, kept while in use
    scorer = model.predict_on_batch
    monkeypatch.setattr(model, "predict_on_batch", lambda x: events.append(("predict", len(x))) or scorer(x))
    return events


def test_images_are_predicted_a_chunk_at_a_time_as_they_are_read(setup, tmp_path, monkeypatch):
    folder = tmp_path / "photos"
    _photo_folder(setup, folder, 19)  # and a PNG: 20 images, chunks of 8, 8 and 4
    expected = alexnet_predict(setup["model_dir"], str(folder), top=2)
    events = _watched(setup, monkeypatch)
    got = alexnet_predict(setup["model_dir"], str(folder), top=2, batch_size=5)
    # the same records; a probability to the last bits of float32 only on CPUs whose kernels add the same way in
    # batches of every size
    assert [{**r, "probability": None} for r in got] == [{**r, "probability": None} for r in expected]
    np.testing.assert_allclose([r["probability"] for r in got], [r["probability"] for r in expected], rtol=1e-5)
    # each chunk read (in parallel), then predicted in batches of at most 5, before the next chunk is read
    kinds = "".join("r" if kind == "read" else "p" for kind, _ in events)
    assert kinds == "r" * 8 + "pp" + "r" * 8 + "pp" + "r" * 4 + "p"
    assert [n for kind, n in events if kind == "predict"] == [5, 3, 5, 3, 4]


def test_after_an_unusable_image_nothing_more_is_predicted_and_all_are_named(setup, tmp_path, monkeypatch):
    folder = tmp_path / "photos"
    _photo_folder(setup, folder, 19)
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".txt" and p.name[0] != ".")
    for bad in (names[10], names[18]):  # in the second chunk and the third
        shutil.copy(setup["quirks"]["truncated"], folder / bad)
    # and one that passes the check but fails to decode, after them
    import alexnet.input.decode as decode

    failing = (folder / names[19]).read_bytes()
    decoder = decode.decode_for_eval

    def decode_or_fail(contents, size):
        if contents.numpy() == failing:
            raise ValueError("undecodable")
        return decoder(contents, size)

    monkeypatch.setattr(decode, "decode_for_eval", decode_or_fail)
    events = _watched(setup, monkeypatch)
    with pytest.raises(AlexnetError, match="3 of 20 image") as raised:
        alexnet_predict(setup["model_dir"], str(folder), batch_size=8)
    assert f"{folder}/{names[10]}: truncated" in str(raised.value) and f"{folder}/{names[18]}" in str(raised.value)
    assert f"{folder}/{names[19]}: cannot be decoded (ValueError)" in str(raised.value)
    # the first chunk was predicted; nothing after the first unusable image, yet every image was read
    assert [n for kind, n in events if kind == "predict"] == [8]
    assert sum(n for kind, n in events if kind == "read") == 20


def test_with_skip_bad_the_usable_images_are_predicted_and_the_others_named_in_a_warning(setup, tmp_path, caplog):
    from alexnet.model.features import alexnet_features

    folder = tmp_path / "photos"
    _photo_folder(setup, folder, 11)  # and a PNG: 12 images, two chunks
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".txt" and p.name[0] != ".")
    every = alexnet_predict(setup["model_dir"], str(folder), top=1)
    shutil.copy(setup["quirks"]["truncated"], folder / names[3])
    (folder / names[9]).write_bytes(b"")
    with pytest.raises(AlexnetError, match=r"or give skip_bad = True to go on without them\.$"):
        alexnet_predict(setup["model_dir"], str(folder), top=1)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        kept = alexnet_predict(setup["model_dir"], str(folder), top=1, skip_bad=True)
    left_out = {f"{folder}/{names[3]}", f"{folder}/{names[9]}"}
    assert kept == [r for r in every if r["image"] not in left_out], "the others' records, as without the bad ones"
    assert (f"Left out 2 of 12 image(s) that cannot be used (`skip_bad`):\n  {folder}/{names[3]}: truncated"
            in caplog.text)
    features = alexnet_features(setup["model_dir"], str(folder), layer="logits", skip_bad=True)
    assert features["image"] == [r["image"] for r in kept] and features["features"].shape[0] == 10
    for name in names:  # none left: still an error
        (folder / name).write_bytes(b"")
    with pytest.raises(AlexnetError, match=r"^12 of 12 image\(s\) cannot be used, so nothing was predicted"):
        alexnet_predict(setup["model_dir"], str(folder), skip_bad=True)


def test_a_folder_without_images_or_with_a_bad_one_is_refused(setup, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not an image")
    with pytest.raises(AlexnetError) as raised:
        alexnet_predict(setup["model_dir"], [setup["images"][0], str(empty)])
    assert str(raised.value).startswith(f"the folder {empty} holds no image files (.bmp, .gif, .jpeg, .jpg, .png, "
                                        ".webp; the folders in it are not read)"), "no `images`: the command's IMAGE"
    damaged = tmp_path / "damaged"
    _photo_folder(setup, damaged, 3)
    shutil.copy(setup["quirks"]["truncated"], damaged / "photo-001.jpg")
    with pytest.raises(AlexnetError, match="1 of 5 image") as raised:
        alexnet_predict(setup["model_dir"], str(damaged))
    assert f"{damaged}/photo-001.jpg: truncated or corrupt" in str(raised.value)


def test_every_format_read_is_read_named_and_in_a_folder_and_others_are_named_as_not_read(setup, tmp_path,
                                                                                         monkeypatch):
    import io

    from PIL import Image

    import alexnet.data.images as image_checks

    picture = Image.new("RGB", (40, 30), (200, 40, 20))

    def save(path: Path, image, fmt: str, **options) -> str:
        buffer = io.BytesIO()
        image.save(buffer, fmt, **options)
        path.write_bytes(buffer.getvalue())
        return str(path)

    folder = tmp_path / "formats"
    folder.mkdir()
    for fmt, suffix in [("JPEG", "jpg"), ("PNG", "png"), ("GIF", "gif"), ("BMP", "bmp"), ("WEBP", "webp")]:
        save(folder / f"a.{suffix}", picture, fmt)
    save(folder / "b.webp", picture.convert("RGBA"), "WEBP", lossless=True)  # transparent
    save(folder / "c.tiff", picture, "TIFF")  # not a format read: not one of the folder's images
    records = alexnet_predict(setup["model_dir"], str(folder), top=1)
    assert [Path(r["image"]).name for r in records] == ["a.bmp", "a.gif", "a.jpg", "a.png", "a.webp", "b.webp"]
    frames = [Image.new("RGB", (40, 30), (60 * i, 0, 0)) for i in range(3)]
    odd = [save(tmp_path / "odd.tiff", picture, "TIFF"),
           save(tmp_path / "moving.webp", frames[0], "WEBP", save_all=True, append_images=frames[1:])]
    with pytest.raises(AlexnetError, match="2 of 2 image") as raised:
        alexnet_predict(setup["model_dir"], odd)
    assert f"{odd[0]}: TIFF is not read (only JPEG, PNG, GIF, BMP or WebP images are)" in str(raised.value)
    assert f"{odd[1]}: an animated WebP is not read (a still one is)" in str(raised.value)
    monkeypatch.setattr(image_checks, "MAX_PIXELS", 40 * 30 - 1)  # the limit an export's serving signature applies too
    with pytest.raises(AlexnetError, match="1 of 1 image") as raised:
        alexnet_predict(setup["model_dir"], str(folder / "a.png"))
    assert "a.png: too large to decode safely (1200 pixels, more than the limit 1199)" in str(raised.value)


def test_exif_orientation_is_not_applied_as_the_documentation_says():
    import io

    from PIL import Image

    stored = np.zeros((20, 40, 3), np.uint8)
    stored[:, :20] = (255, 0, 0)  # red left, blue right as stored; a viewer turning it by the tag shows red on top
    stored[:, 20:] = (0, 0, 255)
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    buffer = io.BytesIO()
    Image.fromarray(stored).save(buffer, "JPEG", exif=exif.tobytes(), quality=95)
    decoded = decode_for_eval(tf.constant(buffer.getvalue()), 16).numpy().astype(int)
    assert decoded[8, 0, 0] > 200 and decoded[8, 15, 2] > 200, "scored as stored: red left, blue right"


def test_an_image_pillow_refuses_as_a_bomb_is_said_too_large_as_an_export_says_it(setup):
    from helpers_images import png_claiming

    from alexnet.data.images import MAX_PIXELS

    with pytest.raises(AlexnetError, match="1 of 1 image") as raised:
        alexnet_predict(setup["model_dir"], png_claiming(20000, 20000))
    assert f"<bytes 0>: too large to decode safely (400000000 pixels, more than the limit {MAX_PIXELS})\n" \
        in str(raised.value)


def test_an_image_pillow_would_open_but_above_the_limit_training_applies_is_refused_from_its_header(setup, recwarn):
    from helpers_images import png_claiming
    from PIL import Image

    # 100 million pixels: Pillow only warns, and decoding it would find its pixels missing ("truncated")
    with pytest.raises(AlexnetError, match="1 of 1 image") as raised:
        alexnet_predict(setup["model_dir"], png_claiming(10000, 10000))
    assert "<bytes 0>: too large to decode safely (100000000 pixels, more than the limit 89478485)\n" \
        in str(raised.value)
    # the error says it, without Pillow's own warning of a "decompression bomb DOS attack" beside it
    assert [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)] == []


def test_the_pixel_limits_are_pillows():
    from PIL import Image

    from alexnet.data.images import MAX_PIXELS, MAX_PIXELS_TO_SHRINK

    # the limit of what is stored, trained on and predicted is where Pillow warns; an upload shrinks up to where it
    # refuses to open an image
    assert MAX_PIXELS == Image.MAX_IMAGE_PIXELS and MAX_PIXELS_TO_SHRINK == 2 * Image.MAX_IMAGE_PIXELS


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_a_bucket_folder_and_bucket_images_are_read_and_predicted_as_local_ones(setup, cloud_env, tmp_path, scheme,
                                                                                monkeypatch):
    import alexnet.storage.location as location
    from alexnet.storage.location import open_filesystem

    prefix = f"alexnet-test/photos-{uuid.uuid4().hex[:8]}"
    fs = open_filesystem(f"{scheme}://{prefix}")
    local = tmp_path / "photos"
    sources = _photo_folder(setup, local, 5)
    for path in local.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())
    remote = f"{scheme}://{prefix}"
    opened = []  # the bucket's file system is opened once for the folder and every image, not once an image
    monkeypatch.setattr(location, "open_filesystem", lambda *a, **k: opened.append(a) or open_filesystem(*a, **k))
    records = alexnet_predict(setup["model_dir"], [remote, f"{remote}/zz.png"], top=2)
    assert len(opened) == 1
    expected = alexnet_predict(setup["model_dir"], [str(local), str(local / "zz.png")], top=2)
    assert [r["image"] for r in records] == [r["image"].replace(str(local), remote) for r in expected]
    assert [r["image"] for r in records[::2]] == [f"{remote}/{name}" for name in sorted(sources)] + [f"{remote}/zz.png"]
    assert [r["id"] for r in records] == [r["id"] for r in expected]
    np.testing.assert_allclose([r["probability"] for r in records], [r["probability"] for r in expected], rtol=1e-5)
    with pytest.raises(AlexnetError,
                       match=r"(?s)1 of 1 image.*/missing\.jpg: cannot be read \(No such file or directory\)\n"):
        alexnet_predict(setup["model_dir"], [f"{remote}/missing.jpg"])


def test_an_image_at_a_url_the_server_does_not_have_is_said_as_its_answer(setup):
    """A URL answered 404 was said as "No such file or directory", the words of a file missing on a disk."""
    from servers import http_server

    served = Path(setup["images"][0]).parent
    with http_server(served) as url:
        good, missing = f"{url}/{Path(setup['images'][0]).name}", f"{url}/missing.jpg"
        with pytest.raises(AlexnetError, match="1 of 2 image") as raised:
            alexnet_predict(setup["model_dir"], [good, missing])
        assert f"\n  {missing}: the server answered 404 (not found)\n" in str(raised.value), raised.value
        records = alexnet_predict(setup["model_dir"], [good, missing], top=1, skip_bad=True)
        assert [r["image"] for r in records] == [good]


def test_another_error_status_of_a_url_is_said_as_the_servers_answer():
    """A status other than 404 (aiohttp's ClientResponseError, no OSError) escaped the reading of the images."""
    import aiohttp

    from alexnet.model.predict import _read

    def answering(status: int):
        def cat_file(path: str) -> bytes:
            raise aiohttp.ClientResponseError(None, (), status=status, message="")
        return {"http": type("Server", (), {"cat_file": staticmethod(cat_file)})()}

    assert _read("https://example.org/a.jpg", answering(403)) == (None, "the server answered 403 (forbidden)")
    assert _read("http://example.org/a.jpg", answering(599)) == (None, "the server answered 599 (an error status)")


def test_top_is_at_least_1_and_at_most_the_classes(setup):
    with pytest.raises(AlexnetError, match="`top` must be"):
        alexnet_predict(setup["model_dir"], setup["images"][:1], top=0)
    every = alexnet_predict(setup["model_dir"], setup["images"][:1], top=len(CATEGORIES) + 2)
    assert [r["rank"] for r in every] == list(range(1, len(CATEGORIES) + 1))


def test_a_model_without_a_card_names_classes_by_number(setup, tmp_path, caplog):
    bare = save_model_dir(setup["model"], tmp_path / "bare")
    records = alexnet_predict(str(bare), setup["images"][:1], top=6)
    assert sorted(r["id"] for r in records) == [str(i) for i in range(6)]
    assert records[0]["name"] == records[0]["id"]
    assert any("has no card" in r.getMessage() for r in caplog.records)
    # a loaded keras model, from Python
    direct = alexnet_predict(setup["model"], setup["images"][:1], top=6)
    assert [r["id"] for r in direct] == [r["id"] for r in records]


def _expected_best(model, image: str, size: int, top: int) -> tuple[list[int], np.ndarray]:
    """The ``top`` labels the model itself ranks first for ``image`` decoded at ``size``, and their probabilities."""
    probabilities = model.predict(decode_for_eval(tf.io.read_file(image), size).numpy()[None], verbose=0)[0]
    best = np.argsort(-probabilities, kind="stable")[:top]
    return [int(i) for i in best], probabilities[best]


def test_a_model_saved_before_the_adaptive_pooling_still_loads_and_predicts(setup, tmp_path, caplog):
    from alexnet.model.saved import load_model

    old = model_before_pooling(len(CATEGORIES), seed=3)
    assert "pool_to_6x6" not in [layer.name for layer in old.layers] and old.input_shape[1:3] == (IMAGE_SIZE,) * 2
    with_card = save_model_dir(old, tmp_path / "old", card_for(CATEGORIES))
    records = alexnet_predict(str(with_card), setup["images"][:1], top=2)
    labels, probabilities = _expected_best(old, setup["images"][0], IMAGE_SIZE, 2)
    assert [r["id"] for r in records] == [CATEGORIES[i]["id"] for i in labels]
    np.testing.assert_allclose([r["probability"] for r in records], probabilities, rtol=1e-5)
    # without its card: the fixed input size says how to decode
    bare = save_model_dir(old, tmp_path / "old-bare")
    assert load_model(str(bare)).card.image_size == IMAGE_SIZE
    assert any("has no card" in r.getMessage() and f"input size, {IMAGE_SIZE}" in r.getMessage()
               for r in caplog.records)
    # a card that says another size belongs to another model
    other = save_model_dir(old, tmp_path / "old-other", card_for(CATEGORIES, image_size=IMAGE_SIZE + 32))
    with pytest.raises(AlexnetError, match="takes only 64"):
        alexnet_predict(str(other), setup["images"][:1])


def test_a_size_free_model_predicts_at_its_cards_size_and_at_224_without_one(setup, tmp_path, caplog):
    from alexnet.model.saved import DEFAULT_IMAGE_SIZE, load_model

    free = tiny_model(len(CATEGORIES), seed=4, image_size=None)
    assert tuple(free.input_shape) == (None, None, None, 3)
    with_card = save_model_dir(free, tmp_path / "free", card_for(CATEGORIES, image_size=96))
    records = alexnet_predict(str(with_card), setup["images"][:1], top=2)
    labels, probabilities = _expected_best(free, setup["images"][0], 96, 2)
    assert [r["id"] for r in records] == [CATEGORIES[i]["id"] for i in labels]
    np.testing.assert_allclose([r["probability"] for r in records], probabilities, rtol=1e-5)
    bare = save_model_dir(free, tmp_path / "free-bare")
    assert DEFAULT_IMAGE_SIZE == 224 and load_model(str(bare)).card.image_size == DEFAULT_IMAGE_SIZE
    assert any("has no card" in r.getMessage() and "224, the paper's size" in r.getMessage() for r in caplog.records)
    records = alexnet_predict(str(bare), setup["images"][:1], top=2)
    labels, probabilities = _expected_best(free, setup["images"][0], DEFAULT_IMAGE_SIZE, 2)
    assert [r["id"] for r in records] == [str(i) for i in labels]
    np.testing.assert_allclose([r["probability"] for r in records], probabilities, rtol=1e-5)


def test_the_command_line_prints_a_table_and_json(setup, capsys):
    import json

    from alexnet import cli

    assert cli.main(["predict", *setup["images"][:2], "--model", setup["model_dir"], "--top", "2"]) == 0
    table = capsys.readouterr().out.splitlines()
    expected = alexnet_predict(setup["model_dir"], setup["images"][:2], top=2)
    assert table[1] == setup["images"][0] and table[4] == setup["images"][1]
    assert table[2].split()[2] == expected[0]["id"] and " ".join(table[2].split()[3:]) == expected[0]["name"]
    assert cli.main(["predict", setup["images"][0], "--model", setup["model_dir"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == alexnet_predict(setup["model_dir"], setup["images"][:1])
    assert cli.main(["predict", setup["images"][0]]) == 2
    # neither a location nor a pin: the default pin of the default board, which does not exist here
    assert "give the model as --model MODEL (a model_dir or alexnet.keras location) or as --model-pin NAME" in \
        capsys.readouterr().err


@pytest.mark.long  # make test-long (CI)
def test_a_model_saved_with_the_old_pooling_layer_still_loads_predicts_and_exports(setup, tmp_path):
    from alexnet.model.export import alexnet_export
    from alexnet.model.network import AdaptiveAveragePooling2D
    from alexnet.model.saved import load_model

    old = model_with_old_pooling(len(CATEGORIES), seed=2)
    folder = save_model_dir(old, tmp_path / "old", card_for(CATEGORIES)).parent
    assert isinstance(load_model(str(folder)).model.get_layer("pool_to_6x6"), AdaptiveAveragePooling2D)
    records = alexnet_predict(str(folder), setup["images"], top=2)
    now = alexnet_predict(setup["model_dir"], setup["images"], top=2)  # the same weights, the pooling of today
    assert [r["id"] for r in records] == [r["id"] for r in now]
    np.testing.assert_allclose([r["probability"] for r in records], [r["probability"] for r in now], rtol=1e-5)
    exported = alexnet_export(str(folder), str(tmp_path / "export"), top=2)
    served = tf.saved_model.load(exported["path"]).signatures["serving_default"]
    answer = served(images=tf.constant([Path(p).read_bytes() for p in setup["images"]]))
    assert [s.decode() for s in answer["ids"].numpy().reshape(-1)] == [r["id"] for r in records]


@pytest.mark.parametrize(("images", "message"), [
    (None, r"^`images` must be paths or locations of images, not a NoneType: give image files"),
    (123, r"^`images` must be paths or locations of images, not a int: give image files"),
    (["a.jpg", 5.0], r"^`images` holds a float \(5\.0\), not a path, location or encoded image bytes: give image "
                     r"files"),
    ([], r"^`images` is empty: give image files"),
])
def test_images_that_are_not_paths_are_refused_for_predictions_and_features(setup, images, message):
    from alexnet.model.features import alexnet_features

    for call in (alexnet_predict, alexnet_features):
        with pytest.raises(AlexnetError, match=message):
            call(setup["model_dir"], images)


def test_encoded_images_are_taken_as_bytes_bytearray_or_memoryview(setup):
    data = Path(setup["images"][0]).read_bytes()
    records = alexnet_predict(setup["model_dir"], [data, bytearray(data), memoryview(data)], top=1)
    assert [r["image"] for r in records] == ["<bytes 0>", "<bytes 1>", "<bytes 2>"]
    assert len({r["id"] for r in records}) == 1
    assert [r["probability"] for r in records] == pytest.approx([records[0]["probability"]] * 3, rel=1e-5)
    # one bytearray is one image, not a list of numbers
    one = alexnet_predict(setup["model_dir"], bytearray(data), top=1)
    assert [(r["image"], r["id"]) for r in one] == [("<bytes 0>", records[0]["id"])]


class _Unconverted(np.ndarray):
    """An array that fails when converted to a list or reshaped (what refusing pixels must not do first)."""

    def tolist(self):
        raise AssertionError("converted")

    def reshape(self, *args, **kwargs):
        raise AssertionError("reshaped")


def test_pixels_are_refused_before_any_conversion_saying_how_to_encode_them(setup):
    from alexnet.model.features import alexnet_features

    pixels = np.zeros((4000, 6000, 3), np.uint8)
    expected = r"^`images` takes no pixels, not a NumPy array of uint8 of shape \(4000, 6000, 3\): give image " \
               r"files, folders, locations or encoded image bytes .*; encode pixels first, e\.g\. with PIL: " \
               r"Image\.fromarray\(pixels\)\.save\(buffer, \"PNG\"\)"
    for call in (alexnet_predict, alexnet_features):
        with pytest.raises(AlexnetError, match=expected):
            call(setup["model_dir"], pixels.view(_Unconverted))
    with pytest.raises(AlexnetError, match=r"^`images` takes no pixels, not a NumPy array of float32 of shape \(2, 2"):
        alexnet_predict(setup["model_dir"], [setup["images"][0], np.zeros((2, 2, 3), np.float32)])
    pil = pytest.importorskip("PIL.Image")
    with pytest.raises(AlexnetError, match=r"^`images` takes no pixels, not a PIL image \(Image\): give image files"):
        alexnet_predict(setup["model_dir"], pil.fromarray(pixels[:8, :8]))
    # a NumPy array of paths (as from pandas or R) is still paths
    records = alexnet_predict(setup["model_dir"], np.array(setup["images"][:2]), top=1)
    assert [r["image"] for r in records] == setup["images"][:2]


def test_the_command_line_says_an_image_given_twice_twice():
    from alexnet.cli.model import predict_summary

    record = {"probability": 0.5, "id": "n01", "name": "tench"}
    records = [dict(record, image=image, rank=rank) for image in ("a.jpg", "a.jpg", "b.jpg") for rank in (1, 2)]
    lines = predict_summary(records).splitlines()
    assert [line for line in lines if not line.startswith(" ")] == ["rank  probability  id          name", "a.jpg",
                                                                     "a.jpg", "b.jpg"]
    assert len(lines) == 1 + 3 * 3
