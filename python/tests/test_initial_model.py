"""Training that starts from a trained model (``initial_model``) and leaves its first layers as they are
(``train_from``): what is copied, what learns, what is refused, and two workers that start from one model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from helpers_model import card_for, save_model_dir, saved_tiny_model, tiny_model  # noqa: E402
from helpers_train import make_tree  # noqa: E402

import alexnet  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.model.card import CARD_FILE, ModelCard  # noqa: E402
from alexnet.train.initial import LEARNING_LAYERS, frozen_layers, start_from  # noqa: E402
from alexnet.train.settings import TrainSettings  # noqa: E402
from alexnet.train.settings_check import check_settings  # noqa: E402

#: The hidden units of every model here (the tree's runs use the same).
UNITS = 64
#: What a tiny run of these tests is given besides its data.
TINY = {"epochs": 1, "batch_size": 4, "image_size": 64, "dense_units": UNITS, "precision": "float32", "verbose": 0}


def _categories(ids: list[str]) -> list[dict]:
    return [{"id": i, "name": f"class {i}"} for i in ids]


def _saved(folder: Path, ids: list[str], seed: int = 3):
    """A tiny model of the classes ``ids`` saved with its card in ``folder``: the model and the folder."""
    return saved_tiny_model(folder, _categories(ids), seed, image_size=None)


def _weights(model, name: str) -> list[np.ndarray]:
    return model.get_layer(name).get_weights()


def test_the_layers_before_train_from_are_frozen():
    assert frozen_layers("conv1") == ()
    assert frozen_layers("fc1") == ("conv1", "conv2", "conv3", "conv4", "conv5")
    assert frozen_layers("logits") == LEARNING_LAYERS[:-1]


def test_every_layer_is_copied_and_the_last_one_for_the_classes_both_models_have(tmp_path):
    theirs, folder = _saved(tmp_path / "m", ["n2", "x", "n0", "y"])
    ours = tiny_model(3, seed=11, image_size=None)
    fresh = [w.copy() for w in _weights(ours, "logits")]
    taken = start_from(ours, folder, ["n0", "n1", "n2"])
    assert taken == {"model": str(tmp_path / "m" / "alexnet.keras"), "layers": list(LEARNING_LAYERS[:-1]),
                     "classes_kept": 2, "classes_new": 1}
    for name in LEARNING_LAYERS[:-1]:
        for mine, source in zip(_weights(ours, name), _weights(theirs, name), strict=True):
            np.testing.assert_array_equal(mine, source, err_msg=name)
    kernel, bias = _weights(ours, "logits")
    their_kernel, their_bias = _weights(theirs, "logits")
    # n0 is their class 2, n2 their class 0; n1 is new and keeps the fresh weights
    np.testing.assert_array_equal(kernel[:, 0], their_kernel[:, 2])
    np.testing.assert_array_equal(kernel[:, 2], their_kernel[:, 0])
    assert bias[0] == their_bias[2] and bias[2] == their_bias[0]
    np.testing.assert_array_equal(kernel[:, 1], fresh[0][:, 1])
    assert bias[1] == fresh[1][1]
    assert not np.array_equal(fresh[0][:, 0], their_kernel[:, 2])  # the copy is seen, not a coincidence


def test_a_model_of_the_same_classes_is_copied_whole(tmp_path):
    theirs, folder = _saved(tmp_path / "m", ["a", "b"])
    ours = tiny_model(2, seed=5, image_size=None)
    assert start_from(ours, folder, ["a", "b"])["classes_kept"] == 2
    for mine, source in zip(ours.get_weights(), theirs.get_weights(), strict=True):
        np.testing.assert_array_equal(mine, source)


def test_a_model_of_another_shape_is_refused_with_the_setting_to_give(tmp_path):
    from alexnet.model.network import build_alexnet

    _, folder = _saved(tmp_path / "m", ["a", "b"])
    with pytest.raises(AlexnetError, match=r"its fc1 has weights of shape \[9216, 64\] where this run's has "
                                           r"\[9216, 32\]: give the run dense_units = 64"):
        start_from(build_alexnet(2, dense_units=32), folder, ["a", "b"])
    with pytest.raises(AlexnetError, match=r"its conv2 has weights .* give the run grouped = False\.$"):
        start_from(build_alexnet(2, dense_units=UNITS, grouped=True), folder, ["a", "b"])
    grouped = tmp_path / "grouped"
    save_model_dir(build_alexnet(2, dense_units=UNITS, grouped=True), grouped, card_for(_categories(["a", "b"])))
    with pytest.raises(AlexnetError, match=r"its conv2 has weights .* give the run grouped = True\.$"):
        start_from(build_alexnet(2, dense_units=UNITS), str(grouped), ["a", "b"])
    # the command line says it as the option
    from alexnet.cli.common import as_typed

    assert as_typed("give the run grouped = FALSE.", {"grouped": ("--grouped", True)}) == "give the run --no-grouped."


def test_the_settings_check_the_model_and_carry_it_as_plain_values(tmp_path):
    _, folder = _saved(tmp_path / "m", ["a", "b"])
    settings = check_settings({"initial_model": Path(folder), "train_from": "FC1"})
    assert settings.initial_model == folder and settings.train_from == "fc1"
    assert settings.model_settings()["train_from"] == "fc1"
    pin = {"board": str(tmp_path / "b"), "name": "base", "version": "v1", "path": folder + "/alexnet.keras",
           "image_size": 64, "num_classes": 2, "class_ids": ["a", "b"], "class_names": ["a", "b"]}
    again = TrainSettings.from_dict(json.loads(json.dumps(check_settings({"initial_model": pin}).to_dict())))
    assert again.initial_model == pin  # what a Spark worker gets
    with pytest.raises(AlexnetError, match=r"train_from = 'fc2' keeps the layers before it .* start from a trained "
                       r"model, `initial_model` as a model_dir or a model pin \(alexnet_model\(\)\)") as no_start:
        check_settings({"train_from": "fc2"})
    # the command line gives a pin as --initial-pin, not --initial-model
    from helpers_cli import help_as_said

    assert "`--initial-model` as a model_dir or a model pin (`--initial-pin NAME`), or leave `--train-from` at " \
        "'conv1'." in help_as_said("train", str(no_start.value))
    with pytest.raises(AlexnetError, match=r"`initial_model`: the model .*nowhere does not exist"):
        check_settings({"initial_model": str(tmp_path / "nowhere")})
    with pytest.raises(AlexnetError, match="`initial_model` must be a model pin from alexnet_model"):
        check_settings({"initial_model": 3})
    # a pin named by hand, not what alexnet_model() returns: refused as such, not as a model training did not write
    with pytest.raises(AlexnetError, match=r"^`initial_model`: a model given as a dict must be what alexnet_model\(\) "
                       r"returns \(.*\); this one lacks image_size, num_classes, class_ids, class_names: give "
                       r"alexnet_model\(board, name, version\), or the location of a model_dir or alexnet\.keras\.$"):
        check_settings({"initial_model": {"board": pin["board"], "name": "base", "version": "v1"}})
    with pytest.raises(AlexnetError, match=r"`train_from` must be one of 'conv1', .* 'logits', not 'conv6'"):
        check_settings({"train_from": "conv6"})
    # a card that records the settings that shape the weights is checked against the run's before any work
    recorded = {**pin, "architecture": {"dense_units": 64, "grouped": True}}
    with pytest.raises(AlexnetError, match=r"^`initial_model` base@v1 was trained with dense_units = 64, and its "
                                           r"weights fit only a run of the same: give the run dense_units = 64\.$"):
        check_settings({"initial_model": recorded})
    with pytest.raises(AlexnetError, match=r"trained with grouped = True, .* give the run grouped = True\.$"):
        check_settings({"initial_model": recorded, "dense_units": 64})
    assert check_settings({"initial_model": recorded, "dense_units": 64, "grouped": True}).grouped


@pytest.mark.long  # make test-long (CI)
def test_a_run_from_a_pinned_model_of_other_classes_trains_only_the_layers_from_train_from(tmp_path, monkeypatch):
    # the base: a model trained on classes 0..3, published as a pin
    base_data = make_tree(tmp_path / "base", classes=4, per_class=6, val_per_class=1)
    board = str(tmp_path / "models")
    alexnet.alexnet_train(data=base_data, model_pin="base", model_board=board, **TINY)
    pin = alexnet.alexnet_model(board, "base")
    base = keras.models.load_model(pin["path"], compile=False)
    # the new categories: two of the base's and one of its own
    new = make_tree(tmp_path / "new", classes=3, per_class=6, val_per_class=1, seed=4)
    new["class_ids"] = ["n00000000", "n00000002", "z_own"]  # by label: the base's classes 0 and 2, then a new one
    history = alexnet.alexnet_train(data=new, initial_model=pin, train_from="fc1", model_dir=str(tmp_path / "out"),
                                    checkpoint_dir=str(tmp_path / "ckpt"), **TINY)
    started = history["params"]["started_from"]
    assert started == {"model": f"base@{pin['version']}", "layers": list(LEARNING_LAYERS[:-1]),
                       "classes_kept": 2, "classes_new": 1,
                       "text": f"Started from base@{pin['version']}: its weights in every layer, of the last one for 2 "
                               "of 3 classes; the layers from fc1 on learning, those before it kept."}
    trained = keras.models.load_model(str(tmp_path / "out" / "alexnet.keras"), compile=False)
    for name in frozen_layers("fc1"):
        for mine, source in zip(_weights(trained, name), _weights(base, name), strict=True):
            np.testing.assert_array_equal(mine, source, err_msg=name)
    for name in ("fc1", "fc2"):
        assert not np.array_equal(_weights(trained, name)[0], _weights(base, name)[0]), f"{name} learnt nothing"
    # the command line gives the pin by name, read from its board as alexnet_model() reads it
    from alexnet.cli import build_parser
    from alexnet.cli.train import training_args

    def given(*words: str) -> dict:
        return training_args(build_parser().parse_args(["train", "--board", str(tmp_path / "data"), *words]))

    read = given("--initial-pin", f"base@{pin['version']}", "--initial-board", board, "--train-from", "fc1")
    assert read["train_from"] == "fc1"
    fields = ("board", "name", "version", "sha256")
    assert [read["initial_model"][k] for k in fields] == [pin[k] for k in fields]
    assert read["initial_model"]["path"] is None  # the file is brought by a run that starts from it, if any
    assert given("--initial-pin", "base", "--initial-board", board)["initial_model"]["version"] == pin["version"]
    with pytest.raises(AlexnetError, match=r"either as --initial-model .* or as --initial-pin NAME, not both"):
        given("--initial-pin", "base", "--initial-board", board, "--initial-model", "/somewhere")
    with pytest.raises(AlexnetError, match="--initial-board is the board of --initial-pin"):
        given("--initial-board", board)
    card = ModelCard.from_json((tmp_path / "out" / CARD_FILE).read_text(), "card")
    assert card.initial_model == f"base@{pin['version']}" and card.class_ids == ["n00000000", "n00000002", "z_own"]
    assert card.architecture == {"dense_units": UNITS, "grouped": False} == pin["architecture"]
    # the checkpoints hold the optimizer of the dense layers alone: resuming with every layer learning is refused
    with pytest.raises(AlexnetError, match="`train_from`: fc1 then, conv1 now"):
        alexnet.alexnet_train(data=new, initial_model=pin, model_dir=str(tmp_path / "out2"),
                              checkpoint_dir=str(tmp_path / "ckpt"), **{**TINY, "epochs": 2})
    # so is resuming from another initial model
    with pytest.raises(AlexnetError, match=rf"`initial_model`: base@{pin['version']} then, .*alexnet.keras now"):
        alexnet.alexnet_train(data=new, initial_model=str(tmp_path / "out"), train_from="fc1",
                              model_dir=str(tmp_path / "out2"), checkpoint_dir=str(tmp_path / "ckpt"),
                              **{**TINY, "epochs": 2})
    # a resumed run takes the checkpoint's weights and what they recorded, without reading the initial model again

    def read_again(*args, **kwargs):
        raise AssertionError("a resumed run read its initial model again")

    monkeypatch.setattr("alexnet.train.initial.start_from", read_again)
    resumed = alexnet.alexnet_train(data=new, initial_model=pin, train_from="fc1", model_dir=str(tmp_path / "out2"),
                                    checkpoint_dir=str(tmp_path / "ckpt"), **{**TINY, "epochs": 2})
    assert resumed["params"]["started_from"] == started and len(resumed["metrics"]["loss"]) == 2
    # and its checkpoints say it again, for the next resume
    state = json.loads((tmp_path / "ckpt" / "alexnet-history.json").read_text())
    assert state["settings"]["started_from"] == started and state["epochs_done"] == 2
    assert resumed["card"]["initial_model"] == f"base@{pin['version']}"
    again = keras.models.load_model(str(tmp_path / "out2" / "alexnet.keras"), compile=False)
    for name in frozen_layers("fc1"):
        for mine, source in zip(_weights(again, name), _weights(base, name), strict=True):
            np.testing.assert_array_equal(mine, source, err_msg=name)
    assert not np.array_equal(_weights(again, "fc1")[0], _weights(trained, "fc1")[0]), "the second epoch learnt nothing"


@pytest.mark.slow
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_train_from_logits_leaves_every_hidden_layer_as_it_was(tmp_path):
    data = make_tree(tmp_path / "d", classes=2, per_class=6, val_per_class=1)
    base, folder = _saved(tmp_path / "m", data["categories"])
    history = alexnet.alexnet_train(data=data, initial_model=folder, train_from="logits",
                                    model_dir=str(tmp_path / "out"), model_pin="tuned",
                                    model_board=str(tmp_path / "models"), **TINY)
    # the pin is a model, every layer of it trainable; the model_dir keeps the run as it was (its optimizer too)
    pinned = keras.models.load_model(alexnet.alexnet_model(str(tmp_path / "models"), "tuned")["path"], compile=False)
    assert all(pinned.get_layer(name).trainable for name in LEARNING_LAYERS)
    kept = keras.models.load_model(str(tmp_path / "out" / "alexnet.keras"), compile=False)
    assert [kept.get_layer(name).trainable for name in LEARNING_LAYERS] == [False] * 7 + [True]
    assert history["params"]["train_from"] == "logits"
    from alexnet.cli.train import history_summary

    # what `alexnet train` prints
    assert history["params"]["started_from"]["text"] in history_summary(history).splitlines()
    assert history["params"]["started_from"]["text"].endswith("the layers from logits on learning, those before "
                                                              "it kept.")
    assert history["card"]["initial_model"] == str(tmp_path / "m" / "alexnet.keras")
    trained = keras.models.load_model(str(tmp_path / "out" / "alexnet.keras"), compile=False)
    for name in LEARNING_LAYERS[:-1]:
        for mine, source in zip(_weights(trained, name), _weights(base, name), strict=True):
            np.testing.assert_array_equal(mine, source, err_msg=name)
    assert not np.array_equal(_weights(trained, "logits")[0], _weights(base, "logits")[0])
