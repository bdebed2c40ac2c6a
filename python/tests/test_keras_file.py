"""An alexnet.keras read with its weights' member read once (model/keras_file.py)."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
from helpers_model import save_model_dir, tiny_model

from alexnet.errors import AlexnetError
from alexnet.model.keras_file import read_keras_file


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = tiny_model(3, seed=4)
    return model, save_model_dir(model, tmp_path_factory.mktemp("model"))


def test_a_model_loads_with_its_weights_without_a_seek_in_the_zip(saved, monkeypatch):
    """h5py seeks back and forth in model.weights.h5; Python 3.11's zip reader answers a seek backwards by reading
    the member again from its start, so every seek it is asked is time lost: none is asked."""
    model, path = saved
    seeks: list[int] = []
    seek = zipfile.ZipExtFile.seek

    def counted(self, offset, whence=0):
        seeks.append(offset)
        return seek(self, offset, whence)

    monkeypatch.setattr(zipfile.ZipExtFile, "seek", counted)
    loaded = read_keras_file(str(path))
    assert seeks == []
    for mine, theirs in zip(loaded.weights, model.weights, strict=True):
        assert mine.name == theirs.name
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    images = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    np.testing.assert_array_equal(loaded.predict(images, verbose=0), model.predict(images, verbose=0))


def test_a_model_saved_and_loaded_again_after_a_load_is_the_same(saved, tmp_path):
    """The weight store replaced for reading writes as before, and is replaced once however many loads."""
    from tf_keras.src.saving import saving_lib

    model, path = saved
    first = read_keras_file(str(path))
    store = saving_lib.H5IOStore
    again = save_model_dir(first, tmp_path / "again")
    second = read_keras_file(str(again))
    assert saving_lib.H5IOStore is store and store.__name__ == "H5IOStore"
    assert sum(getattr(c, "reads_member_once", False) and "reads_member_once" in vars(c) for c in store.__mro__) == 1
    for mine, theirs in zip(second.weights, model.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_a_damaged_model_file_is_named_with_what_to_give_instead(saved, tmp_path):
    _, path = saved
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        member = archive.getinfo("model.weights.h5")
    damaged = tmp_path / "alexnet.keras"
    start = member.header_offset + 30 + len(member.filename) + len(member.extra) + 100
    damaged.write_bytes(data[:start] + bytes(64) + data[start + 64:])  # inside the weights' member: its CRC fails
    with pytest.raises(AlexnetError, match=r"alexnet\.keras cannot be loaded as a Keras model .*give the alexnet\."
                                           r"keras that training saved"):
        read_keras_file(str(damaged))
