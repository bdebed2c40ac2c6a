"""An alexnet.keras read with its weights' member read once (model/keras_file.py)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from helpers_model import save_model_dir, tiny_model

from alexnet.errors import AlexnetError
from alexnet.model.keras_file import check_objects, read_keras_file


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


def _with_config(path, dest, change) -> str:
    """A copy of the Keras file at ``path`` at ``dest`` with its ``config.json`` changed by ``change``."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(dest, "w") as copy:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                change(config)
                data = json.dumps(config).encode()
            copy.writestr(item, data)
    return str(dest)


def _layer(config, name):
    return next(layer for layer in config["config"]["layers"] if layer["name"] == name)


@pytest.mark.parametrize("grouped", [False, True], ids=["plain", "grouped"])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_every_network_alexnet_builds_passes_the_check_of_what_a_file_names(grouped, policy, tmp_path):
    """OBJECTS and OPERATIONS are what alexnet's networks are made of: a network of each variant, saved, loads
    (were a layer or an operation added to the network and not to those lists, every model would be refused)."""
    from alexnet.model.network import build_alexnet
    from alexnet.tfimport import keras

    for size in (None, 64):
        model = build_alexnet(3, size, dense_units=8, grouped=grouped, policy=policy)
        path = tmp_path / f"{size}.keras"
        model.save(path)
        check_objects(str(path))
        loaded = read_keras_file(str(path))
        assert [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]
    keras.mixed_precision.set_global_policy("float32")


def test_models_saved_by_earlier_versions_pass_the_check(tmp_path):
    from helpers_model import model_before_pooling, model_with_old_pooling

    for index, model in enumerate((model_with_old_pooling(3), model_before_pooling(3))):
        path = save_model_dir(model, tmp_path / str(index))
        check_objects(str(path))


def test_a_layer_that_calls_a_function_of_any_module_is_refused_before_it_runs(saved, tmp_path):
    """A Lambda layer naming ``pydoc.pipepager`` runs a shell command when tf-keras builds the model, safe mode or
    not: the file is refused and the command never runs."""
    _, path = saved
    marker = tmp_path / "ran"

    def calls_a_shell(config):
        layer = _layer(config, "normalize")
        layer.update(module="keras.layers", class_name="Lambda", registered_name=None)
        layer["config"] = {"name": "normalize", "trainable": True, "dtype": "float32", "function_type": "function",
                           "function": {"module": "pydoc", "class_name": "function", "config": "pipepager",
                                        "registered_name": "pipepager"},
                           "arguments": {"cmd": f"touch {marker}"}, "output_shape": None, "output_shape_type": "raw",
                           "module": "pydoc"}

    crafted = _with_config(path, tmp_path / "alexnet.keras", calls_a_shell)
    with pytest.raises(AlexnetError, match=r"holds 'Lambda' of module 'keras.layers', which no network of alexnet "
                                           r"is made of: it is not loaded.*from a board you trust"):
        read_keras_file(crafted)
    assert not marker.exists()


def test_an_operation_layer_calling_another_tensorflow_function_is_refused(saved, tmp_path):
    """The pooling's layers of built-in operations name TensorFlow functions: one that writes files is refused."""
    _, path = saved

    def writes_files(config):
        pooling = _layer(config, "pool_to_6x6")
        operation = next(layer for layer in pooling["config"]["layers"] if layer["class_name"] == "TFOpLambda")
        operation["config"]["function"] = "io.write_file"

    crafted = _with_config(path, tmp_path / "alexnet.keras", writes_files)
    with pytest.raises(AlexnetError, match=r"holds the TensorFlow function 'io.write_file'"):
        read_keras_file(crafted)
    check_objects(str(path))  # the file as saved passes
