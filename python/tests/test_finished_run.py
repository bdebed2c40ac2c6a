"""A finished run given again: found before any model is built or measured when its model is saved already, and
returned as its checkpoints recorded it; saved from its last checkpoint when its model is not there."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from helpers_train import synthetic_data

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.cli.train import history_summary  # noqa: E402
from alexnet.model.card import CARD_FILE  # noqa: E402
from alexnet.model.saved import MODEL_FILE  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402
from alexnet.train.checkpoint import STATE_FILE  # noqa: E402
from alexnet.train.history_file import SAVED_MODEL  # noqa: E402
from alexnet.train.run_history import MEASURED  # noqa: E402

SMALL = {"image_size": 64, "dense_units": 16, "learning_rate": 0.005, "area_range": (0.6, 1.0), "verbose": 0}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2 categories x 16 training images: 2 steps of 8 per epoch."""
    return synthetic_data(tmp_path_factory.mktemp("finished"), classes=2, per_class=16, val_per_class=0)


def _neither_built_nor_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args, **kwargs):
        raise AssertionError("built or measured")

    monkeypatch.setattr("alexnet.train.model.training_model", refused)
    monkeypatch.setattr("alexnet.train.levers.measure_communication", refused)
    monkeypatch.setattr("alexnet.train.measure.precision_for", refused)


def _files(folder) -> dict[str, tuple[int, int, bytes]]:
    return {name: (os.stat(folder / name).st_mtime_ns, os.stat(folder / name).st_size, (folder / name).read_bytes())
            for name in (MODEL_FILE, CARD_FILE, STATE_FILE) if (folder / name).exists()}


def test_a_finished_run_whose_model_is_saved_is_returned_as_recorded_without_building_it(data, tmp_path, monkeypatch,
                                                                                        caplog):
    folders = {"checkpoint_dir": str(tmp_path / "ckpt"), "model_dir": str(tmp_path / "model")}
    first = alexnet_train(8, 1, data, steps_per_epoch=2, **folders, **SMALL)
    state = json.loads((tmp_path / "ckpt" / STATE_FILE).read_text())
    assert state[SAVED_MODEL] == {"weights_sha256": first["weights_sha256"], "weights_agree": None, "position": [1, 0]}
    before = _files(tmp_path / "model")
    _neither_built_nor_measured(monkeypatch)
    caplog.clear()  # the first run's lines, caught when an earlier test left alexnet's logger at INFO
    with caplog.at_level("INFO", logger="alexnet"):
        again = alexnet_train(8, 1, data, steps_per_epoch=2, momentum=0.5, **folders, **SMALL)
    assert _files(tmp_path / "model") == before, "the model and its card as they were"
    assert f"{tmp_path / 'ckpt'} holds a finished run: it trained all 1 epochs asked for" in caplog.text
    assert "trained otherwise than asked now: `momentum`: 0.9 then, 0.5 now" in caplog.text
    assert "Training AlexNet" not in caplog.text and "Resuming" not in caplog.text
    assert again["metrics"] == first["metrics"] and again["schedule"] == first["schedule"]
    assert again["card"] == first["card"] and again["weights_sha256"] == first["weights_sha256"]
    assert again["model_path"] == first["model_path"] == str(tmp_path / "model" / MODEL_FILE)
    recorded = ("batch_size", "global_batch_size", "epochs", "momentum", "precision", "precision_reason", "steps",
                "peak_learning_rate", "jit_compile", *MEASURED)
    assert {name: again["params"][name] for name in recorded} == {name: first["params"][name] for name in recorded}
    assert (again["params"]["initial_epoch"], again["params"]["initial_step"]) == (1, 0)
    assert history_summary(again).splitlines()[2] == (f"All 1 epoch were trained before, in {tmp_path / 'ckpt'}: "
                                                      "nothing was left to train (a larger `epochs` trains further).")
    assert history_summary(again).splitlines()[1] == history_summary(first).splitlines()[1]


def test_a_finished_run_whose_model_is_not_there_saves_it_from_its_last_checkpoint(data, tmp_path, monkeypatch,
                                                                                     caplog):
    """Built and restored, its model saved and recorded, without measuring the link or fitting: the history returned
    is the one its checkpoints recorded, not one of a measurement made again."""
    folders = {"checkpoint_dir": str(tmp_path / "ckpt"), "model_dir": str(tmp_path / "model")}
    first = alexnet_train(8, 1, data, steps_per_epoch=2, **folders, **SMALL)
    for name in (MODEL_FILE, CARD_FILE):  # a run stopped after its last checkpoint, before its model was saved
        (tmp_path / "model" / name).unlink()
    state = json.loads((tmp_path / "ckpt" / STATE_FILE).read_text())
    del state[SAVED_MODEL]
    (tmp_path / "ckpt" / STATE_FILE).write_text(json.dumps(state))

    def refused(*args, **kwargs):
        raise AssertionError("measured or fitted")

    seen = []
    callback = keras.callbacks.LambdaCallback()
    callback.set_model = seen.append  # given the model, as a run's end gives it
    caplog.clear()
    with monkeypatch.context() as patched, caplog.at_level("INFO", logger="alexnet"):
        patched.setattr("alexnet.train.levers.measure_communication", refused)
        patched.setattr(keras.Model, "fit", refused)
        again = alexnet_train(8, 1, data, steps_per_epoch=2, **folders, **SMALL)
        # given a callback, a finished run whose model is saved builds it too, and gives it the model
        called = alexnet_train(8, 1, data, steps_per_epoch=2, callbacks=[callback], **folders, **SMALL)
    assert f"{tmp_path / 'ckpt'}: every epoch is done; saving the model from its last checkpoint" in caplog.text
    assert "Training AlexNet" not in caplog.text
    assert again["model_path"] == str(tmp_path / "model" / MODEL_FILE) and (tmp_path / "model" / MODEL_FILE).exists()
    assert json.loads((tmp_path / "model" / CARD_FILE).read_text())["weights_sha256"] == first["weights_sha256"]
    assert again["weights_sha256"] == first["weights_sha256"] == called["weights_sha256"]
    assert again["metrics"] == first["metrics"] and again["schedule"] == first["schedule"]
    recorded = ("batch_size", "global_batch_size", "steps", "precision", "peak_learning_rate", *MEASURED)
    assert {name: again["params"][name] for name in recorded} == {name: first["params"][name] for name in recorded}
    assert (again["params"]["initial_epoch"], again["params"]["seconds"]) == (1, 0.0)
    assert len(seen) == 1 and called["params"]["initial_epoch"] == 1
    # recorded as saved: given again, returned as recorded without building it
    state = json.loads((tmp_path / "ckpt" / STATE_FILE).read_text())
    assert state[SAVED_MODEL] == {"weights_sha256": first["weights_sha256"], "weights_agree": None, "position": [1, 0]}
    with monkeypatch.context() as patched:
        _neither_built_nor_measured(patched)
        assert alexnet_train(8, 1, data, steps_per_epoch=2, **folders, **SMALL)["card"] == called["card"]
    # another model_dir holds none of it: saved there too
    other = alexnet_train(8, 1, data, steps_per_epoch=2, checkpoint_dir=folders["checkpoint_dir"],
                          model_dir=str(tmp_path / "other"), **SMALL)
    assert (tmp_path / "other" / MODEL_FILE).exists() and other["weights_sha256"] == first["weights_sha256"]


def test_a_finished_run_given_again_says_whether_its_workers_agreed_and_each_worker_its_own_share(data, tmp_path,
                                                                                                  monkeypatch):
    """The short path returns the weights_agree the run ended with, which the history file records beside the model
    saved; the chief tells every worker what it found in one collective, and each keeps its own training images and
    share of the validation images, where it said the chief's."""
    from alexnet.train import agreement, run
    from alexnet.train.finished import saved_finish

    folders = {"checkpoint_dir": str(tmp_path / "ckpt"), "model_dir": str(tmp_path / "model")}
    first = alexnet_train(8, 1, data, steps_per_epoch=2, **folders, **SMALL)
    path = tmp_path / "ckpt" / STATE_FILE
    state = json.loads(path.read_text())
    state[SAVED_MODEL]["weights_agree"] = True  # as a run of two workers that ended with the same weights records it
    path.write_text(json.dumps(state))
    calls = []
    monkeypatch.setattr(run, "saved_finish", lambda *args, **kwargs: calls.append((args, kwargs)) or saved_finish(
        *args, **kwargs))
    again = alexnet_train(8, 1, data, steps_per_epoch=2, **folders, **SMALL)
    assert (again["weights_agree"], again["weights_sha256"]) == (True, first["weights_sha256"])
    # two workers: the chief's history, sent to the other, whose training images are 12 and validation share 3
    (strategy, topo, settings, given, td, steps, *rest), kwargs = calls[0]
    chief = dataclasses.replace(topo, workers=2)
    sent = []
    monkeypatch.setattr(agreement, "all_gather_texts", lambda strategy, text: sent.append(text) or [text, ""])
    told = saved_finish(strategy, chief, settings, given, td, steps, *rest, **kwargs)
    monkeypatch.setattr(agreement, "all_gather_texts", lambda strategy, text: [sent[0], text])
    other = saved_finish(strategy, dataclasses.replace(chief, worker_index=1, chief=False), settings, given,
                         dataclasses.replace(td, files=td.files[:12]), dataclasses.replace(steps, val_share=3), *rest,
                         **kwargs)
    assert told.done and other.done and told.history is not None and other.history is not None
    assert told.history["weights_agree"] is other.history["weights_agree"] is True
    assert {name: told.history["params"][name] for name in ("train_images", "worker_val_images")} == {
        "train_images": 32, "worker_val_images": first["params"]["worker_val_images"]}
    assert {name: other.history["params"][name] for name in ("train_images", "worker_val_images")} == {
        "train_images": 12, "worker_val_images": 3}
    assert other.history["model_path"] is None and other.history["metrics"] == first["metrics"]
