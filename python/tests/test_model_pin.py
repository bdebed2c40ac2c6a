"""alexnet_model(): a model pin read back from a board, checked against its SHA-256, loaded with the same weights."""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from helpers_model import card_for, file_on_a_worker, save_model_dir, tiny_model

from alexnet.child import run_child
from alexnet.errors import AlexnetError, IntegrityError
from alexnet.launch.task import Evaluation, Task
from alexnet.model.card import CARD_FILE
from alexnet.model.pin import alexnet_model, model_pin_reference
from alexnet.model.publishing import publish_model
from alexnet.model.saved import load_model
from alexnet.model.saving import write_card
from alexnet.storage.transfer import sha256_file
from alexnet.train.settings import TrainSettings
from alexnet.train.settings_check import check_settings

CATEGORIES = [{"id": f"n0000000{i}", "name": f"thing {i}"} for i in range(3)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny 3-class model saved for inference, and its card."""
    folder = tmp_path_factory.mktemp("pin-model")
    model = tiny_model(3, seed=5)
    card = card_for(CATEGORIES, board="/data/board")
    return {"model": model, "card": card, "file": str(save_model_dir(model, folder))}


def _same_weights(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights(), strict=True))


def _round_trip(board: str, saved, cache: Path) -> dict:
    published = publish_model(board, "alexnet", saved["file"], saved["card"])
    pin = alexnet_model(board, "alexnet", cache_dir=cache)
    assert pin["version"] == published["version"] and pin["board"] == published["board"]
    assert pin["name"] == "alexnet" and pin["bytes"] == os.path.getsize(saved["file"])
    assert pin["class_ids"] == saved["card"].class_ids and pin["class_names"] == saved["card"].class_names
    assert pin["image_size"] == 64 and pin["num_classes"] == 3 and pin["board_trained_from"] == "/data/board"
    assert Path(pin["path"]).read_bytes() == Path(saved["file"]).read_bytes()
    loaded = load_model(pin)
    assert _same_weights(loaded.model, saved["model"])
    assert loaded.description == f"alexnet@{pin['version']}" and loaded.card.class_ids == pin["class_ids"]
    # the file brought, given by its path alone, is read with the pin's card (it was "a model without a card",
    # its classes numbered, its images decoded at 224)
    alone = load_model(pin["path"])
    assert alone.card is not None and alone.card.class_ids == pin["class_ids"] and alone.card.image_size == 64
    return pin


def test_publish_then_read_round_trips_on_a_folder_board(saved, tmp_path):
    board = str(tmp_path / "board")
    pin = _round_trip(board, saved, tmp_path / "cache")
    # a second version; the first stays readable by its version
    first = pin["version"]
    other = tiny_model(3, seed=6)
    other_file = save_model_dir(other, tmp_path / "other")
    second = publish_model(board, "alexnet", str(other_file), saved["card"])["version"]
    assert second != first
    latest = alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache")
    assert latest["version"] == second and _same_weights(load_model(latest).model, other)
    assert alexnet_model(board, "alexnet", first, cache_dir=tmp_path / "cache")["version"] == first
    assert alexnet_model(board, f"alexnet@{first}", cache_dir=tmp_path / "cache")["version"] == first
    with pytest.raises(AlexnetError, match="has no version 'nope'"):
        alexnet_model(board, "alexnet", "nope", cache_dir=tmp_path / "cache")
    # a cached file is reused; a damaged one is fetched again
    cached = Path(pin["path"])
    cached.write_bytes(b"damaged")
    again = alexnet_model(board, "alexnet", first, cache_dir=tmp_path / "cache")
    assert Path(again["path"]).read_bytes() == Path(saved["file"]).read_bytes()
    # the dict, its local file gone, fetches the pin again (as a worker on another machine does)
    cached.unlink()
    assert _same_weights(load_model(dict(pin, path=str(tmp_path / "elsewhere.keras"))).model, saved["model"])


def test_publish_then_read_round_trips_on_the_gcs_emulator(saved, cloud_env, tmp_path):
    _round_trip(f"gs://alexnet-test/models-{uuid.uuid4().hex[:8]}", saved, tmp_path / "cache")


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_a_model_is_pinned_to_a_new_prefix_of_a_bucket(saved, cloud_env, tmp_path, scheme):
    from alexnet.model.publishing import check_model_board, check_pin_holds_models
    from alexnet.storage.board import open_board

    new = f"{scheme}://alexnet-test/models-{uuid.uuid4().hex[:8]}"  # as a training's model_board, or an export's
    board = check_model_board(new, None)
    check_pin_holds_models(board, "m")  # holds nothing yet: a board to write to, not a board to refuse
    publish_model(board, "m", saved["file"], saved["card"])
    assert alexnet_model(board, "m", cache_dir=tmp_path / "cache")["name"] == "m"
    check_pin_holds_models(board, "m")
    open_board(board).pins.pin_write({"a": 1}, name="settings", type="json")
    with pytest.raises(AlexnetError, match=f"board {board} has a pin 'settings' that holds no model"):
        check_pin_holds_models(board, "settings")


def test_a_tampered_pin_file_is_refused_and_nothing_is_cached(saved, tmp_path):
    board = tmp_path / "board"
    version = publish_model(str(board), "alexnet", saved["file"], saved["card"])["version"]
    on_board = board / "alexnet" / version / "alexnet.keras"
    data = bytearray(on_board.read_bytes())
    data[len(data) // 2] ^= 0xFF
    on_board.write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(IntegrityError, match="tampered with or damaged") as refused:
        alexnet_model(str(board), "alexnet", cache_dir=cache)
    assert not list(cache.rglob("*")), "a file that failed its check, or the folder made for it, was kept"
    # the one checked download of every pin: its message names the pin it read, and what to do
    assert f"but the metadata of pin 'alexnet' version {version} says " in str(refused.value)
    assert "publish the model again" in str(refused.value) and "categories pin" not in str(refused.value)
    # a file the board no longer has leaves nothing either
    on_board.unlink()
    with pytest.raises(AlexnetError, match="cannot be read"):
        alexnet_model(str(board), "alexnet", cache_dir=cache)
    assert not list(cache.rglob("*")), "the folder made for a file that never came was kept"


def test_a_pins_cached_file_damaged_since_it_was_read_is_fetched_again_when_it_cannot_be_loaded(saved, tmp_path,
                                                                                                  caplog):
    board = str(tmp_path / "board")
    publish_model(board, "alexnet", saved["file"], saved["card"])
    pin = alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache")
    cached = Path(pin["path"])
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size, a member's bytes no longer those of its CRC-32
    cached.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        loaded = load_model(pin)
    assert _same_weights(loaded.model, saved["model"])
    assert "is not the pin's (its SHA-256 differs: damaged since it was fetched); fetching it again" in caplog.text
    assert cached.read_bytes() == Path(saved["file"]).read_bytes()
    with pytest.raises(AlexnetError, match=r"is a board, not a saved model: read a model pin from it with "
                                           r"alexnet_model\("):
        load_model(board)  # the board given where its model pin goes
    # a model file that is not a model, named by no pin: the loading error stands
    (tmp_path / "not-a-model.keras").write_bytes(b"x" * 100)
    with pytest.raises(AlexnetError, match="cannot be loaded as a Keras model"):
        load_model(str(tmp_path / "not-a-model.keras"))


def test_a_pin_whose_metadata_names_paths_writes_nothing_outside_the_cache(tmp_path):
    import hashlib

    import pins

    # a board not one's own (a public one, say) whose metadata names files above the cache, with their true hashes
    model, evil = b"not a model", b"written where it should not be\n"
    (tmp_path / "m.keras").write_bytes(model)
    (tmp_path / "evil.txt").write_bytes(evil)
    board = pins.board_folder(str(tmp_path / "board"))
    meta = {"alexnet": 1, "kind": "model", "sha256": hashlib.sha256(model).hexdigest(), "bytes": len(model),
            "image_size": 64, "num_classes": 1, "class_ids": ["n1"], "class_names": ["x"],
            "export": {"format": "tflite", "file": "../../../evil.txt", "sha256": hashlib.sha256(evil).hexdigest(),
                       "bytes": len(evil)}}
    board.pin_upload([str(tmp_path / "m.keras")], name="file", metadata=meta)
    board.pin_upload([str(tmp_path / "m.keras")], name="hash", metadata={**meta, "sha256": "../../up", "export": None})
    cache = tmp_path / "c" / "a" / "b"
    with pytest.raises(AlexnetError, match=r"names its export '\.\./\.\./\.\./evil\.txt', not a file an export is "
                       r"pinned as \(.*alexnet\.tflite.*\): it was not written by alexnet"):
        alexnet_model(str(tmp_path / "board"), "file", cache_dir=cache, export=True)
    with pytest.raises(AlexnetError, match=r"gives '\.\./\.\./up' as a SHA-256: it was not written by alexnet"):
        alexnet_model(str(tmp_path / "board"), "hash", cache_dir=cache)
    # the model's own file named as a path out of the pin's folder: refused before it is read
    board.pin_upload([str(tmp_path / "m.keras")], name="path", metadata={**meta, "export": None})
    (data_txt,) = (tmp_path / "board" / "path").glob("*/data.txt")
    data_txt.write_text(data_txt.read_text().replace("file: m.keras", "file: ../../../m.keras"))
    with pytest.raises(AlexnetError, match=r"names its model file '\.\./\.\./\.\./m\.keras', which is not a file of "
                                           r"the pin's folder .*it was not written by alexnet"):
        alexnet_model(str(tmp_path / "board"), "path", cache_dir=cache)
    written = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert written and all(cache in p.parents for p in written), "nothing is written outside the cache"
    assert all(p.read_bytes() == model for p in written if p.name != CARD_FILE), \
        "the model's file alone (its hash is its folder), and its card"


def test_a_pin_that_is_not_a_model_or_does_not_exist_is_refused(tmp_path):
    import pins

    board = tmp_path / "board"
    pins.board_folder(str(board)).pin_write({"a": 1}, name="settings", type="json")
    with pytest.raises(AlexnetError, match=r"'settings' .* is not a model pin"):
        alexnet_model(str(board), "settings", cache_dir=tmp_path / "cache")
    with pytest.raises(AlexnetError, match="has no pin 'alexnet'"):
        alexnet_model(str(board), cache_dir=tmp_path / "cache")


def test_a_saved_model_given_as_the_board_is_named_as_such_and_an_unwritable_cache_too(saved, tmp_path):
    model_file = save_model_dir(saved["model"], tmp_path / "model_dir", saved["card"])  # as alexnet_train() saves
    for given in (str(model_file.parent), str(model_file)):  # a model_dir, and its alexnet.keras
        with pytest.raises(AlexnetError, match=r"alexnet.keras is a saved model \(a model_dir or alexnet.keras\), "
                                               r"not a board: alexnet_model\(\) reads model pins; give the saved "
                                               r"model as it is where a model is taken"):
            alexnet_model(given, cache_dir=tmp_path / "cache")
    # a model without its card is no proof: the board's own error stands
    with pytest.raises(AlexnetError, match=r"has no pin 'alexnet'"):
        alexnet_model(os.path.dirname(saved["file"]), cache_dir=tmp_path / "cache")
    publish_model(str(tmp_path / "board"), "alexnet", saved["file"], saved["card"])
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(AlexnetError, match=r"^`cache_dir` = .*a-file/models cannot hold the model \(it, or a folder "
                                           r"above it, is a file, not a folder\)"):
        alexnet_model(str(tmp_path / "board"), cache_dir=blocker / "models")


def test_a_model_pin_is_read_over_https_and_an_upload_keeps_it_in_the_manifest(saved, tmp_path):
    """A model published twice is listed in the manifest with both versions, oldest first (it listed the newest
    alone), and an upload after keeps them; this package reads the newest over https://."""
    import yaml
    from servers import http_server

    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    board = tmp_path / "served" / "board"
    source = imagenet_synthetic(tmp_path / "imagenet", classes=2, images_per_class=2, val_per_class=0, max_side=64)
    imagenet_upload(source["path"], board=str(board))
    other = tmp_path / "other" / "alexnet.keras"
    other.parent.mkdir()
    other.write_bytes(Path(saved["file"]).read_bytes() + b"another model")
    first = publish_model(str(board), "alexnet", str(other), saved["card"])
    published = publish_model(str(board), "alexnet", saved["file"], saved["card"])
    assert first["version"] < published["version"]
    imagenet_upload(source["path"], board=str(board))  # nothing to upload: the manifest is written again
    listed = yaml.safe_load((board / "_pins.yaml").read_text())
    assert listed["alexnet"] == [f"alexnet/{first['version']}/", f"alexnet/{published['version']}/"]
    with http_server(tmp_path / "served") as url:
        pin = alexnet_model(f"{url}/board", "alexnet", cache_dir=tmp_path / "cache")
        # this package reads the current version alone there (said with the scheme the board is read over)
        with pytest.raises(AlexnetError, match=rf"^board {url}/board is read over http://, where only the current "
                                               rf"version of pin 'alexnet' \({published['version']}\) can be read"):
            alexnet_model(f"{url}/board", f"alexnet@{first['version']}", cache_dir=tmp_path / "cache")
    assert pin["version"] == published["version"]
    assert _same_weights(load_model(pin).model, saved["model"])


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_run_that_ends_with_its_evaluation_writes_its_card_and_its_pin_once_with_it(tmp_path, monkeypatch):
    import json

    from helpers_train import synthetic_data

    from alexnet.model import saving
    from alexnet.storage.board import open_board
    from alexnet.train.api import train
    from alexnet.train.settings_check import check_settings

    board = str(tmp_path / "board")
    first = publish_model(board, "alexnet", *_earlier_model(tmp_path))["version"]  # the pin has a version already
    written, seen = [], []
    real = saving.write_card
    monkeypatch.setattr(saving, "write_card", lambda path, card: written.append(card) or real(path, card))

    def evaluate(strategy, model, card):  # what a Spark training's workers add up (alexnet.launch.training)
        seen.append((model, card))
        return {"images": 4, "top1_correct": 3, "top5_correct": 4, "crops": 1, "board": "the data's board"}

    data = synthetic_data(tmp_path / "imagenet", classes=2, per_class=4, val_per_class=2)
    settings = check_settings({"epochs": 1, "batch_size": 4, "image_size": 64, "dense_units": 8, "verbose": 0,
                               "precision": "float32", "model_dir": str(tmp_path / "model"), "model_pin": "alexnet",
                               "model_board": board})
    history = train(settings, data, None, evaluate=evaluate)
    assert len(seen) == 1 and seen[0][1].evaluation is None, "called once, with the card before it records anything"
    recorded = history["card"]["evaluation"]
    assert recorded["top1_correct"] == 3
    assert [card.evaluation for card in written] == [recorded], "the card beside the model: written once, with it"
    assert json.loads((tmp_path / "model" / CARD_FILE).read_text())["evaluation"] == recorded
    versions = [v.version for v in open_board(board).pins.pin_versions("alexnet", as_df=False)]
    assert len(versions) == 2 and versions[0] == first, "one new version of the pin"
    pinned = alexnet_model(board, "alexnet", cache_dir=tmp_path / "cache")
    assert pinned["version"] == versions[-1] == history["model_pin"]["version"] and pinned["evaluation"] == recorded


def _earlier_model(tmp_path: Path) -> tuple[str, object]:
    """An earlier model of the same classes, saved, and its card."""
    model = tiny_model(2, seed=3)
    return str(save_model_dir(model, tmp_path / "earlier")), card_for(CATEGORIES[:2], board="/data/board")


def test_a_card_written_again_beside_a_saved_model_is_what_loading_it_reads(saved, tmp_path):
    import dataclasses
    import json

    from alexnet.model.card import CARD_FILE

    evaluation = {"images": 6, "top1_correct": 4, "top5_correct": 6, "top1_accuracy": 4 / 6, "crops": 10}
    card = dataclasses.replace(saved["card"], evaluation=evaluation)
    model_dir = tmp_path / "model"
    model_file = save_model_dir(saved["model"], model_dir, saved["card"])
    write_card(str(model_file), card)
    assert json.loads((model_dir / CARD_FILE).read_text())["evaluation"] == evaluation
    assert load_model(str(model_dir)).card.evaluation == evaluation


def test_a_new_version_of_other_classes_gets_a_warning_that_it_is_now_the_one_read(saved, tmp_path, caplog):
    board = str(tmp_path / "board")
    publish_model(board, "alexnet", saved["file"], saved["card"])
    with caplog.at_level("WARNING", logger="alexnet.model.publishing"):
        publish_model(board, "alexnet", saved["file"], saved["card"])  # retrained on the same classes
    assert "other classes" not in caplog.text
    flowers = card_for([{"id": name, "name": name} for name in ("daisy", "roses", "tulips")])
    with caplog.at_level("WARNING", logger="alexnet.model.publishing"):
        publish_model(board, "alexnet", saved["file"], flowers)
    assert "Model pin alexnet on" in caplog.text and "held a model of other classes (3: n00000000, n00000001, " \
        "n00000002) in its version" in caplog.text and "of 3 classes (daisy, roses, tulips), is now the one read" \
        in caplog.text


def test_a_model_pinned_on_a_board_with_no_pins_is_said_to_make_a_new_board(saved, tmp_path, caplog):
    from helpers_train import synthetic_data

    from alexnet.train.api import train
    from alexnet.train.settings_check import check_settings

    board = tmp_path / "noboard" / "sub"
    with caplog.at_level("WARNING", logger="alexnet.model.publishing"):
        published = publish_model(str(board), "alexnet", saved["file"], saved["card"])
    assert f"Board {board} holds no pins: model pin alexnet makes it a new board. If you meant an existing board, " \
        "its location is mistyped." in caplog.text
    assert published["board"] == str(board)
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.model.publishing"):
        publish_model(str(board), "alexnet", saved["file"], saved["card"])
        publish_model(str(board), "other", saved["file"], saved["card"])
    assert "new board" not in caplog.text, "a board that holds pins is no new board"
    # training's model_pin too, on a board its check made as an empty folder: said by the check, before the run (a
    # mistyped --model-board was said once a run of days had ended), and not again when the pin is published
    data = synthetic_data(tmp_path / "imagenet", classes=2, per_class=4, val_per_class=0)
    models = tmp_path / "typo" / "models"
    with caplog.at_level("WARNING", logger="alexnet.model.publishing"):
        settings = check_settings({"epochs": 1, "batch_size": 4, "image_size": 64, "dense_units": 8, "verbose": 0,
                                   "precision": "float32", "validation": False, "model_pin": "alexnet",
                                   "model_board": str(models)})
    assert [r.getMessage() for r in caplog.records if r.name == "alexnet.model.publishing"] == [
        f"Board {models} holds no pins: model pin alexnet makes it a new board. If you meant an existing board, its "
        "location is mistyped."]
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.model.publishing"):
        history = train(settings, data, None)
    assert history["model_pin"]["board"] == str(models)
    assert "new board" not in caplog.text, "said once"


def test_a_pin_reference_reads_the_metadata_alone_and_loading_it_brings_the_file(saved, tmp_path, monkeypatch):
    board = str(tmp_path / "board")
    published = publish_model(board, "alexnet", saved["file"], saved["card"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the default model cache, empty
    reference = model_pin_reference(board, "alexnet")
    assert reference["path"] is None and reference["version"] == published["version"]
    assert reference["class_ids"] == saved["card"].class_ids and not (tmp_path / "xdg").exists()
    assert _same_weights(load_model(reference).model, saved["model"])


def test_a_worker_without_the_models_file_fetches_it_into_the_cache_dir_it_was_read_with(saved, tmp_path,
                                                                                          monkeypatch):
    board = str(tmp_path / "board")
    publish_model(board, "alexnet", saved["file"], saved["card"])
    chosen = tmp_path / "chosen"
    pin = alexnet_model(board, "alexnet", cache_dir=chosen)
    assert pin["cache_dir"] == str(chosen) and pin["path"].startswith(str(chosen) + os.sep)
    assert model_pin_reference(board, "alexnet")["cache_dir"] is None  # unset: each machine's own user cache
    worker_cache = tmp_path / "xdg"  # the user cache of the worker's machine, which has no copy of the file
    defaults = worker_cache / "alexnet" / "models"
    # a Spark evaluation's worker: the model as its task carries it (JSON, as through R), read in a process of its own
    os.remove(pin["path"])
    carried = json.dumps(Task("evaluate", board, 1, evaluation=Evaluation(model=pin)).to_dict())
    env = {"XDG_CACHE_HOME": str(worker_cache),
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    read = run_child(file_on_a_worker, carried, what="an evaluation's worker", env=env)
    assert read == pin["path"] and sha256_file(read) == pin["sha256"]
    assert not defaults.exists()
    # a training's worker: initial_model as the settings carry it, loaded with the same weights
    os.remove(pin["path"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(worker_cache))
    settings = TrainSettings.from_dict(json.loads(json.dumps(check_settings({"initial_model": pin}).to_dict())))
    assert _same_weights(load_model(settings.initial_model).model, saved["model"])
    assert os.path.isfile(pin["path"]) and not defaults.exists()
    # a cache_dir the worker cannot write is said to be one, not replaced by its user cache
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    elsewhere = {**pin, "cache_dir": str(blocker / "models"), "path": str(blocker / "models" / "alexnet.keras")}
    with pytest.raises(AlexnetError, match=rf"^`cache_dir` = .*a-file/models cannot hold the model "
                                           rf"alexnet@{pin['version']} on .+, which fetches its file again \(it, or "
                                           r"a folder above it, is a file, not a folder\): give alexnet_model\(\) a "
                                           r"`cache_dir` that every machine using the model may write .*, or leave it "
                                           r"unset for each machine's own "
                                           r"user cache\.$"):
        load_model(elsewhere)
    assert not defaults.exists()


def test_a_pin_read_takes_its_version_with_its_name_and_one_published_to_takes_none():
    """A pin read as NAME@VERSION was refused by every command but training's --initial-pin, which takes it so; the
    command line's refusal named the version as the core does (`version = ...`, for --pin-version)."""
    from alexnet.model.options import check_model_pin, check_read_pin, pin_and_version

    assert check_model_pin("alexnet") == "alexnet"
    assert check_read_pin("alexnet@20261206T065246Z-4e93f", "name") == "alexnet@20261206T065246Z-4e93f"
    assert pin_and_version("alexnet@20261206T065246Z-4e93f", None) == ("alexnet", "20261206T065246Z-4e93f")
    assert pin_and_version("alexnet@v1", "v1") == ("alexnet", "v1") and pin_and_version("alexnet", "v2") == (
        "alexnet", "v2")
    with pytest.raises(AlexnetError, match=r"^`name` = 'alexnet@v1' reads version 'v1' of pin 'alexnet', and "
                                           r"`version` = 'v2' another: give the version once\.$"):
        pin_and_version("alexnet@v1", "v2")
    with pytest.raises(AlexnetError, match=r"^`name` must be a pin name .*, not 'alexnet@v@1'"):
        check_read_pin("alexnet@v@1", "name")
    # a pin published to: no version to give
    with pytest.raises(AlexnetError, match=r"not 'alexnet@v1': each publication is a new version of the pin; give "
                                           r"model_pin = 'alexnet'\.$"):
        check_model_pin("alexnet@v1")
    with pytest.raises(AlexnetError, match=r"not 'my model': e\.g\. model_pin = 'alexnet'\.$"):
        check_model_pin("my model")
