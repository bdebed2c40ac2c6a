"""The model card beside the trained model, and the model as a pin: from a partition of a synthetic board and from
hand-made data; the checks of pin names and model boards before any training, in alexnet_train() and the driver."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers_train import synthetic_data

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.data.fetch import imagenet_partition  # noqa: E402
from alexnet.data.synthetic import imagenet_synthetic  # noqa: E402
from alexnet.data.upload import imagenet_upload  # noqa: E402
from alexnet.errors import AlexnetError, BoardError  # noqa: E402
from alexnet.input.inputs import training_data  # noqa: E402
from alexnet.launch.job import plan_job  # noqa: E402
from alexnet.model.card import CARD_FILE, ModelCard  # noqa: E402
from alexnet.model.pin import MODEL_PIN_KIND  # noqa: E402
from alexnet.model.saved import MODEL_FILE  # noqa: E402
from alexnet.storage.board import open_board  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402
from alexnet.train.trained import weights_digest  # noqa: E402

TINY = {"image_size": 64, "dense_units": 64, "learning_rate": 0.005, "area_range": (0.6, 1.0), "verbose": 0}
NOWHERE = {"image": ["/nowhere/a.JPEG"], "category": ["n1"], "categories": ["n1"]}


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> str:
    """A folder board of a synthetic ImageNet: 3 categories of 6 training and 1 validation image."""
    root = tmp_path_factory.mktemp("card")
    written = imagenet_synthetic(root / "src", classes=3, images_per_class=6, val_per_class=1, seed=2, max_side=48)
    imagenet_upload(written["path"], root / "board", workers=2)
    return str(root / "board")


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_a_partition_carries_every_class_and_the_categories_version(board, tmp_path):
    data = imagenet_partition(0, 2, board, cache_dir=tmp_path / "cache")
    opened = open_board(board)
    table = opened.pins.pin_read("categories").sort_values("index")
    assert data["class_ids"] == list(table["id"]) and data["class_names"] == list(table["name"])
    assert len(data["class_ids"]) == data["num_classes"] == 3
    assert data["categories_version"] == opened.pins.pin_meta("categories").version.version
    td = training_data(data)
    assert td.class_ids == data["class_ids"] and td.class_names == data["class_names"]
    for label, wnid in zip(data["label"], data["category"], strict=True):
        assert td.class_ids[label] == wnid


def test_the_categories_version_named_is_the_one_read_not_a_newer_incomplete_one(board, tmp_path):
    """A newer version of the table that a write left incomplete is passed over: the partition names the one it read."""
    import shutil

    from pins.versions import Version

    copy = tmp_path / "board"
    shutil.copytree(board, copy)
    opened = open_board(str(copy))
    read = opened.pins.pin_meta("categories").version.version
    newer = Version(Version.from_string(read).created.replace(year=2099), "0dead").version
    shutil.copytree(copy / "categories" / read, copy / "categories" / newer)
    (copy / "categories" / newer / "data.txt").unlink()  # a write killed before pins' metadata
    data = imagenet_partition(0, 1, str(copy), cache_dir=tmp_path / "cache")
    assert data["categories_version"] == read != newer


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_the_card_beside_the_model_and_the_model_pin(board, tmp_path):
    data = imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
    history = alexnet_train(4, 2, data, model_dir=tmp_path / "model", model_pin="alexnet", **TINY)

    card_path = tmp_path / "model" / CARD_FILE
    assert (tmp_path / "model" / MODEL_FILE).exists() and card_path.exists()
    card = json.loads(card_path.read_text())
    assert card == history["card"]
    assert ModelCard.from_json(card_path.read_text(), str(card_path)).to_dict() == card
    assert card["class_ids"] == data["class_ids"] and card["class_names"] == data["class_names"]
    assert card["image_size"] == 64 and card["num_classes"] == 3 and card["epochs"] == 2
    assert card["metrics"] == {name: values[-1] for name, values in history["metrics"].items()}
    assert history["schedule"]["image_size"] == [64, 64] and not set(history["schedule"]) & set(card["metrics"])
    assert set(card["metrics"]) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert card["board"] == data["board"] and card["categories_version"] == data["categories_version"]
    assert card["weights_sha256"] == history["weights_sha256"] and card["created"]

    pin = history["model_pin"]
    opened = open_board(board)
    assert pin == {"board": opened.location, "name": "alexnet", "version": pin["version"]}
    meta = opened.pins.pin_meta("alexnet")
    assert meta.version.version == pin["version"]
    user = meta.user
    assert user["kind"] == MODEL_PIN_KIND == "model"
    assert {k: user[k] for k in card} == card
    (pinned,) = opened.pins.pin_download("alexnet", version=pin["version"])
    assert user["sha256"] == sha256(pinned) and user["bytes"] == Path(pinned).stat().st_size
    # the pin holds what inference needs: no optimizer state, so smaller than the model beside the checkpoints
    assert Path(pinned).stat().st_size < (tmp_path / "model" / MODEL_FILE).stat().st_size
    assert opened.pins.pin_versions("alexnet").shape[0] == 1
    loaded = keras.models.load_model(pinned)
    assert loaded.optimizer is None and weights_digest(loaded) == history["weights_sha256"]


def test_hand_made_data_names_classes_by_their_ids(tmp_path):
    data = synthetic_data(tmp_path / "images", classes=2, per_class=4, val_per_class=0)
    data.pop("quirks")
    history = alexnet_train(4, 1, data, model_dir=tmp_path / "model", **TINY)
    card = json.loads((tmp_path / "model" / CARD_FILE).read_text())
    assert card["class_ids"] == card["class_names"] == sorted(data["categories"])
    assert card["board"] is None and card["categories_version"] is None
    assert card["epochs"] == 1 and card == history["card"]
    assert history["model_pin"] is None


def test_a_card_of_an_older_version_keeps_the_schedule_out_of_its_metrics():
    """Cards written before the history kept the schedule apart list the last epoch's image size and learning rate
    among the metrics: read, they are not metrics (as a history file of then is read)."""
    older = {"image_size": 64, "num_classes": 1, "class_ids": ["a"], "class_names": ["a"], "epochs": 2,
             "metrics": {"loss": 0.5, "accuracy": 1.0, "image_size": 64, "learning_rate": 0.01}}
    card = ModelCard.from_json(json.dumps(older), "an older card")
    assert card.metrics == {"loss": 0.5, "accuracy": 1.0} and card.image_size == 64
    assert ModelCard.from_dict(card.to_dict(), "it again") == card
    from alexnet.train.schedule import schedule_apart  # what both readers take the schedule out with

    assert schedule_apart({"loss": [0.5], "learning_rate": [0.01]}) == ({"loss": [0.5]}, {"learning_rate": [0.01]})


def test_class_ids_given_with_data_must_name_every_class():
    data = {"image": ["/a.JPEG"], "label": [0], "num_classes": 2, "class_ids": ["n1"]}
    with pytest.raises(AlexnetError, match="class_ids"):
        training_data(data)
    # a partition-shaped list without them: the classes its images show, the others by number
    td = training_data({"image": ["/a.JPEG"], "category": ["n7"], "label": [1], "num_classes": 3})
    assert td.class_ids == td.class_names == ["0", "n7", "2"]


@pytest.mark.parametrize("name", ["categories", "bad_images", "n01440764", "val-n01440764", "a/b", "", "_pins.yaml",
                                  3])
def test_a_bad_model_pin_name_fails_before_training(name, tmp_path):
    with pytest.raises(AlexnetError, match="model_pin"):
        alexnet_train(data=NOWHERE, model_pin=name, model_board=tmp_path / "models")


def test_a_model_board_that_cannot_be_written_fails_before_training(tmp_path):
    with pytest.raises(AlexnetError, match="model_board"):
        alexnet_train(data=NOWHERE, model_pin="alexnet")  # hand-made data comes from no board
    with pytest.raises(BoardError, match="read only"):
        alexnet_train(data=NOWHERE, model_pin="alexnet", model_board="https://example.invalid/board")
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(BoardError, match="cannot create"):
        alexnet_train(data=NOWHERE, model_pin="alexnet", model_board=tmp_path / "file" / "board")


def test_the_driver_checks_the_model_pin_and_its_board(board, tmp_path):
    with pytest.raises(AlexnetError, match="model_pin"):
        plan_job(2, board, None, model_pin="categories")
    with pytest.raises(BoardError, match="read only"):
        plan_job(2, board, None, model_pin="alexnet", model_board="https://example.invalid/board")
    plan = plan_job(2, board, None, model_pin="alexnet", log_dir=tmp_path / "logs")
    assert plan.task.settings.model_board == open_board(board).location
    assert plan.task.settings.log_dir == str(tmp_path / "logs")
