"""Tiny image trees for the pipeline, model and training tests (no TensorFlow import here)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

# Colours far apart, so that a small network can tell the classes apart after a few dozen steps.
PALETTE = [
    (220, 40, 40),
    (40, 200, 60),
    (40, 70, 220),
    (230, 210, 40),
    (200, 50, 210),
    (40, 210, 210),
    (250, 250, 250),
    (20, 20, 20),
]


def class_image(rng: np.random.Generator, label: int, height: int, width: int) -> Image.Image:
    """An RGB image of class ``label``: its colour with noise, and a brighter square at a random place."""
    base = np.array(PALETTE[label % len(PALETTE)], dtype=np.int16)
    pixels = base + rng.integers(-30, 31, size=(height, width, 3))
    side = max(2, min(height, width) // 3)
    top, left = rng.integers(0, height - side + 1), rng.integers(0, width - side + 1)
    pixels[top : top + side, left : left + side] += 25
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def jpeg_bytes(image: Image.Image, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90, **kwargs)
    return buffer.getvalue()


def make_tree(
    root: Path,
    classes: int = 4,
    per_class: int = 12,
    val_per_class: int = 4,
    seed: int = 0,
    min_side: int = 40,
    max_side: int = 90,
) -> dict:
    """Write ``<root>/train/<wnid>/*.JPEG`` and ``<root>/val/*.JPEG``; return the partition-shaped dict."""
    rng = np.random.default_rng(seed)
    categories = [f"n{index:08d}" for index in range(classes)]
    data: dict = {"image": [], "category": [], "label": [], "categories": categories, "num_classes": classes}
    data.update(val_image=[], val_label=[], val_category=[])
    for label, wnid in enumerate(categories):
        folder = root / "train" / wnid
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class + val_per_class):
            h, w = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
            image = class_image(rng, label, h, w)
            if i < per_class:
                path = folder / f"{wnid}_{i}.JPEG"
                prefix = ""
            else:
                (root / "val").mkdir(exist_ok=True)
                path = root / "val" / f"val_{wnid}_{i}.JPEG"
                prefix = "val_"
            path.write_bytes(jpeg_bytes(image))
            data[prefix + "image"].append(str(path))
            data[prefix + "label"].append(label)
            data[prefix + "category"].append(wnid)
    return data


def write_quirks(folder: Path, seed: int = 1, side: int = 64) -> dict[str, Path]:
    """The odd files of real ImageNet, plus broken ones: name -> path. Colours: cmyk/png red, gray mid-grey."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    red = np.zeros((side, side + 16, 3), dtype=np.uint8)
    red[...] = (210, 30, 30)
    red = Image.fromarray(red)
    good = class_image(rng, 1, side, side)
    paths = {name: folder / f"{name}.JPEG" for name in ("cmyk", "grayscale", "png", "truncated", "empty")}
    paths["cmyk"].write_bytes(jpeg_bytes(red.convert("CMYK")))
    paths["grayscale"].write_bytes(jpeg_bytes(Image.fromarray(np.full((side, side), 128, np.uint8), "L")))
    buffer = io.BytesIO()
    red.save(buffer, "PNG")
    paths["png"].write_bytes(buffer.getvalue())
    whole = jpeg_bytes(good)
    paths["truncated"].write_bytes(whole[: len(whole) // 2])
    paths["empty"].write_bytes(b"")
    return paths


def synthetic_data(
    root: Path, classes: int, per_class: int, val_per_class: int, seed: int = 0, quirks: bool = False
) -> dict:
    """The seed's hand-made form (``image``, ``category``, ``categories``, plus ``val_image``/``val_category``)
    for a synthetic ImageNet written with ``imagenet_synthetic`` at 96 pixels (``quirks`` adds odd and
    broken files to the first category)."""
    from alexnet.data.imagenet import read_imagenet
    from alexnet.data.synthetic import imagenet_synthetic

    written = imagenet_synthetic(
        root,
        classes=classes,
        images_per_class=per_class,
        val_per_class=val_per_class,
        seed=seed,
        quirks=quirks,
        max_side=96,
    )
    tree = read_imagenet(written["path"])
    return {
        "image": [f for c in tree.categories for f in c.files],
        "category": [c.id for c in tree.categories for _ in c.files],
        "categories": [c.id for c in tree.categories],
        "val_image": list(tree.val_files),
        "val_category": list(tree.val_labels),
        "quirks": written["quirks"],
    }


# -- validation: each epoch's weights, scored again ------------------------------------------------------------


def keep_epoch_weights(folder: Path):
    """A Keras callback writing every epoch's weights to ``<folder>/epoch-<n>.npz`` (n from 1).

    Among ``alexnet_train``'s extra callbacks it runs after the run's validation, so the weights are those the
    epoch's ``val_`` metrics scored (reading them involves no other worker)."""
    from alexnet.tfimport import keras

    class KeepEpochWeights(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            folder.mkdir(parents=True, exist_ok=True)
            np.savez(folder / f"epoch-{epoch + 1}.npz", *self.model.get_weights())

    return KeepEpochWeights()


def score_epochs(folder: Path, data: dict, image_size: int, *, num_classes: int, dense_units: int,
                 label_smoothing: float = 0.1) -> list[dict]:
    """Each epoch's weights of :func:`keep_epoch_weights` scored on ``data``'s validation images, centre crop at
    ``image_size``: ``alexnet_evaluate()``'s result, with ``loss`` (the mean loss over the images) added."""
    from alexnet.input.pipeline import exact_eval_dataset
    from alexnet.model.evaluate import alexnet_evaluate
    from alexnet.model.network import build_alexnet
    from alexnet.train.model import SmoothedSparseCrossentropy

    net = build_alexnet(num_classes, dense_units=dense_units)
    loss = SmoothedSparseCrossentropy(label_smoothing)
    scores = []
    for epoch in range(1, len(list(folder.glob("epoch-*.npz"))) + 1):
        with np.load(folder / f"epoch-{epoch}.npz") as saved:
            net.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])
        score = alexnet_evaluate(net, data=data, image_size=image_size, batch_size=16)
        losses = [loss.call(labels, net.predict_on_batch(images)).numpy()
                  for images, labels in exact_eval_dataset(data["val_image"], data["val_label"], 16, image_size)]
        scores.append({**score, "loss": float(np.concatenate(losses).mean())})
    return scores


#: Validation images per class of :func:`_mirrored_main`: 4 x 13 = 52, which batches of 16 do not divide.
MIRRORED_VAL_PER_CLASS = 13


def _mirrored_main(root: str, out: str, weights: str) -> None:
    """Train over two logical CPU devices, keeping every epoch's weights in ``weights``; write the history as JSON
    (run in a fresh process)."""
    import json

    import tensorflow as tf

    import alexnet

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from alexnet.train.strategy import resolve_strategy

    by_name = resolve_strategy("mirrored").num_replicas_in_sync
    data = synthetic_data(Path(root), classes=4, per_class=48, val_per_class=MIRRORED_VAL_PER_CLASS, seed=0)
    data.pop("quirks")
    # a strategy object, as tf$distribute$MirroredStrategy() hands it over from R
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    history = alexnet.alexnet_train(
        8,
        8,
        data,
        strategy,
        2,
        image_size=64,
        dense_units=256,
        learning_rate=0.005,
        lr_scaling="none",
        area_range=(0.6, 1.0),
        seed=1,
        verbose=0,
        precision="float32",
        callbacks=[keep_epoch_weights(Path(weights))],
    )
    history["replicas_by_name"] = by_name
    history["data"] = data
    Path(out).write_text(json.dumps(history))


if __name__ == "__main__":
    import sys

    _mirrored_main(sys.argv[1], sys.argv[2], sys.argv[3])


def marker_image(height: int, width: int, box: tuple[int, int, int, int]) -> bytes:
    """A dark noisy JPEG with one bright square ``box`` = (top, left, bottom, right)."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(20, 60, (height, width, 3)).astype(np.uint8)
    top, left, bottom, right = box
    pixels[top:bottom, left:right] = 240
    return jpeg_bytes(Image.fromarray(pixels))


def centroid(image: np.ndarray) -> np.ndarray:
    """Where the bright pixels of ``image`` are, as (row, column)."""
    bright = image.astype(float).mean(axis=2)
    weights = np.clip(bright - 140, 0, None)
    ys, xs = np.mgrid[0 : image.shape[0], 0 : image.shape[1]]
    return np.array([(weights * ys).sum(), (weights * xs).sum()]) / weights.sum()


# -- the benchmark ------------------------------------------------------------------------------------------


class Interrupted(Exception):
    """Raised on purpose in a training run, to stop it the way a crash would."""


def stop_after_first_epoch():
    """A Keras callback that keeps the first epoch's logs (``.logs``), then raises :class:`Interrupted`."""
    from alexnet.tfimport import keras

    class StopAfterFirstEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.logs = dict(logs)
            raise Interrupted("interrupted on purpose")

    return StopAfterFirstEpoch()


def worker_env(folder: Path) -> dict[str, str]:
    """The environment of a worker process a test starts from a script in this folder: quiet, this folder importable,
    and its temporary files in ``folder / "tmp"`` (made here): TensorFlow's autograph writes one for each function
    it converts and removes them only when Python ends normally, which a worker ending with ``os._exit`` does not."""
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ALEXNET_PROGRESS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "TMPDIR": str(folder / "tmp")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")])
    return env


def run_two_workers(script: Path, folder: Path, base: int, timeout: float) -> list[int]:
    """Run ``script`` (a test file whose main runs one worker: its arguments the folder, the worker's index and the
    base port) as workers 0 and 1 at once, each with its log in ``folder / "log-<index>.txt"``; their exit codes,
    once both have ended (a worker still running after ``timeout`` seconds is killed)."""
    env = worker_env(folder)
    logs = [open(folder / f"log-{i}.txt", "w") for i in range(2)]  # noqa: SIM115
    workers = [subprocess.Popen([sys.executable, str(script), str(folder), str(i), str(base)], stdout=logs[i],
                                stderr=subprocess.STDOUT, env=env) for i in range(2)]
    try:
        return [w.wait(timeout=timeout) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        for log in logs:
            log.close()
