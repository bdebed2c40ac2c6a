"""The models a process has loaded are let go when nothing uses them: a session that evaluates checkpoint after
checkpoint stays flat, while a model in use, or asked for again at once, is not loaded twice."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from helpers_model import card_for, save_model_dir, tiny_model

from alexnet.model.loaded import LoadedModels

CHECKPOINTS = 20


class _Model:
    """Stands for a Keras model: an object with a reference cycle, as a model's layers make."""

    def __init__(self, name: str) -> None:
        self.name, self.cycle = name, self


def test_a_model_is_kept_while_used_or_last_asked_for_and_let_go_after():
    loaded, loads = LoadedModels(), []

    def load(name):
        def make():
            loads.append(name)
            return _Model(name)
        return make

    first = loaded.get(("a", "1"), load("a"))
    assert loaded.get(("a", "1"), load("a")) is first and loads == ["a"], "asked for again at once: not loaded again"
    second = loaded.get(("b", "1"), load("b"))
    assert loaded.get(("a", "1"), load("a")) is first and loads == ["a", "b"], "still used here: kept"
    del first
    loaded.get(("b", "1"), load("b"))
    gc.collect()
    assert loaded.get(("a", "1"), load("a")).name == "a" and loads == ["a", "b", "a"], "no longer used: let go"
    assert loaded.get(("b", "1"), load("b")) is second, "the one held here is kept"


#: The session: ``alexnet_evaluate()`` of each checkpoint folder given, one after another, in one fresh Python
#: process, its resident memory read after each (freed heap handed back first, so that only what is held counts).
SESSION = """
import ctypes, gc, json, os, sys
from alexnet.model.evaluate import alexnet_evaluate

trim = ctypes.CDLL("libc.so.6").malloc_trim
data, resident = json.loads(sys.argv[1]), []
for folder in sys.argv[2:]:
    assert alexnet_evaluate(folder, data, batch_size=2)["images"] == 2
    gc.collect()
    trim(0)
    with open("/proc/self/statm") as f:
        resident.append(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20)
print(json.dumps(resident))
"""


@pytest.mark.long
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the resident memory from /proc")
def test_evaluating_checkpoint_after_checkpoint_keeps_resident_memory_flat(tmp_path):
    from alexnet.data.imagenet import read_imagenet
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.model.network import build_alexnet

    imagenet_synthetic(tmp_path / "imagenet", classes=2, images_per_class=1, val_per_class=1, max_side=64)
    tree = read_imagenet(tmp_path / "imagenet")
    index = {c.id: c.index for c in tree.categories}
    data = {"val_image": list(tree.val_files), "val_label": [index[w] for w in tree.val_labels], "num_classes": 2}
    card = card_for([{"id": c.id, "name": c.name or c.id} for c in tree.categories])
    # 20 checkpoints of a small AlexNet (dense layers of 32 units: about 16 MB of weights each), each its own file
    model = build_alexnet(2, image_size=None, dense_units=32)
    folders: list[str] = []
    for k in range(CHECKPOINTS):
        model.set_weights([w + 0.01 for w in model.get_weights()])
        folders.append(str(save_model_dir(model, tmp_path / f"checkpoint-{k}", card).parent))
    size = os.path.getsize(Path(folders[0]) / "alexnet.keras") / 2**20
    done = subprocess.run([sys.executable, "-c", SESSION, json.dumps(data), *folders], capture_output=True,
                          text=True, env={**os.environ, "ALEXNET_PROGRESS": "0"}, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    resident = json.loads(done.stdout.strip().splitlines()[-1])
    grown = [mb - resident[0] for mb in resident]
    assert len(grown) == CHECKPOINTS
    assert max(grown) <= 2 * size, (f"resident memory grew by up to {max(grown):.0f} MB over {CHECKPOINTS} "
                                    f"evaluations of models of {size:.1f} MB: {[round(g) for g in grown]}")


def test_a_model_is_saved_whole_or_not_at_all(tmp_path, monkeypatch):
    """A run killed while saving leaves the model it had before: the new one is written to a temporary name in the
    same folder and renamed."""
    from alexnet.model import saving
    from alexnet.tfimport import keras

    before = saving.save_model(tiny_model(3, seed=1), str(tmp_path), chief=True, workers=1)
    assert before == str(tmp_path / "alexnet.keras")
    kept = (tmp_path / "alexnet.keras").read_bytes()

    def killed(self, path, *args, **kwargs):  # the save stops half way through its file
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04 half a model")
        raise KeyboardInterrupt

    monkeypatch.setattr(keras.Model, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        saving.save_model(tiny_model(3, seed=2), str(tmp_path), chief=True, workers=1)
    assert (tmp_path / "alexnet.keras").read_bytes() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alexnet.keras"]
    monkeypatch.undo()
    saving.save_model(tiny_model(3, seed=2), str(tmp_path), chief=True, workers=1)
    assert (tmp_path / "alexnet.keras").read_bytes() != kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alexnet.keras"]
