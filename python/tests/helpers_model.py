"""Tiny saved models and boards with validation images, for the tests of the model in use."""

from __future__ import annotations

from pathlib import Path

import numpy as np

IMAGE_SIZE = 64


def tiny_model(num_classes: int, seed: int = 0, image_size: int = IMAGE_SIZE):
    """An untrained AlexNet small enough to load and run in a second, its weights fixed by ``seed``."""
    from alexnet.model.network import build_alexnet
    from alexnet.tfimport import keras

    keras.utils.set_random_seed(seed)
    return build_alexnet(num_classes, image_size=image_size, dense_units=64)


def model_before_pooling(num_classes: int, seed: int = 0, image_size: int = IMAGE_SIZE):
    """An untrained AlexNet as training built it before the adaptive pooling to 6x6: the same layers without
    ``pool_to_6x6``, its input fixed to ``image_size`` (what an ``alexnet.keras`` saved then holds)."""
    from alexnet.tfimport import keras

    current = tiny_model(num_classes, seed, image_size)
    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    x = inputs
    for layer in current.layers[1:]:
        if layer.name != "pool_to_6x6":
            x = type(layer).from_config(layer.get_config())(x)
    return keras.Model(inputs, x, name="alexnet")


def model_with_old_pooling(num_classes: int, seed: int = 0):
    """An untrained AlexNet as training built it with the custom ``AdaptiveAveragePooling2D`` layer, before the pooling
    of built-in ops replaced it (what an ``alexnet.keras`` saved then holds), with :func:`tiny_model`'s weights."""
    from alexnet.model.network import FEATURE_SIDE, AdaptiveAveragePooling2D
    from alexnet.tfimport import keras

    current = tiny_model(num_classes, seed, image_size=None)
    inputs = keras.Input(shape=(None, None, 3), dtype="uint8", name="image")
    x = inputs
    for layer in current.layers[1:]:
        if layer.name == "pool_to_6x6":
            x = AdaptiveAveragePooling2D(FEATURE_SIDE, name="pool_to_6x6")(x)
        else:
            x = type(layer).from_config(layer.get_config())(x)
    old = keras.Model(inputs, x, name="alexnet")
    old.set_weights(current.get_weights())
    return old


def card_for(categories: list[dict], image_size: int = IMAGE_SIZE, board: str | None = None):
    """The card of a model trained on ``categories`` (a board's table)."""
    from alexnet.model.card import ModelCard, now

    return ModelCard(image_size=image_size, num_classes=len(categories), class_ids=[c["id"] for c in categories],
                     class_names=[c["name"] for c in categories], epochs=1, metrics={"accuracy": 0.5},
                     board=board, categories_version="v1", created=now())


def save_model_dir(model, folder: Path, card=None) -> Path:
    """Save ``model`` for inference as ``folder/alexnet.keras``, with ``card`` beside it when given."""
    from alexnet.model.card import CARD_FILE

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "alexnet.keras"
    model.save(path)  # an uncompiled model: no optimizer state (the .keras format has no include_optimizer)
    if card is not None:
        (folder / CARD_FILE).write_text(card.to_json())
    return path


def saved_tiny_model(folder: Path, categories: list[dict], seed: int, image_size: int | None = IMAGE_SIZE):
    """A :func:`tiny_model` for ``categories`` saved with its card in ``folder`` (a ``model_dir``): the model and the
    folder's path as a string."""
    model = tiny_model(len(categories), seed=seed, image_size=image_size)
    save_model_dir(model, folder, card_for(categories))
    return model, str(folder)


def pinned_bytes(root: Path, name: str = "alexnet") -> str:
    """A folder board ``root/board`` with one model pin, ``name``, of one class, whose file is a few bytes: for the
    tests of where a pin is brought, which load nothing."""
    from alexnet.model.publishing import publish_model

    file = root / "pinned-bytes" / "alexnet.keras"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"not a model, a few bytes")
    board = str(root / "board")
    publish_model(board, name, str(file), card_for([{"id": "n00000001", "name": "one"}], board="/data"))
    return board


def synthetic_board(root: Path, classes: int = 4, val_per_class: int = 3, seed: int = 0,
                    resize: int | None = None) -> str:
    """A folder board of a synthetic ImageNet at 96 pixels, with ``val_per_class`` validation images a category;
    stored with short side ``resize`` when given."""
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    written = imagenet_synthetic(root / "tree", classes=classes, images_per_class=2, val_per_class=val_per_class,
                                 seed=seed, max_side=96)
    imagenet_upload(written["path"], board=root / "board", resize=resize)
    return str(root / "board")


def break_in_place(path: str) -> None:
    """Cut a JPEG short but keep its size (zeros instead of its second half), as a cache does not notice."""
    data = Path(path).read_bytes()
    half = len(data) // 2
    Path(path).write_bytes(data[:half] + bytes(len(data) - half))


def by_hand(model, files, labels, image_size: int, crops: int = 1) -> tuple[int, int]:
    """Top-1 and top-k correct counts from ``model.predict`` on each image alone, k = min(5, classes)."""
    from alexnet.input.decode import decode_for_eval, decode_ten_crops
    from alexnet.tfimport import tf

    top1 = topk = 0
    for path, label in zip(files, labels, strict=True):
        contents = tf.io.read_file(path)
        if crops == 1:
            probabilities = model.predict(decode_for_eval(contents, image_size).numpy()[None], verbose=0)[0]
        else:
            views = decode_ten_crops(contents, image_size).numpy()
            probabilities = model.predict(views, verbose=0).mean(axis=0)
        k = min(5, len(probabilities))
        best = np.argsort(-probabilities, kind="stable")
        top1 += int(best[0] == label)
        topk += int(label in best[:k])
    return top1, topk


def file_on_a_worker(carried: str) -> str:
    """What a worker of a Spark evaluation does with the model of the task it is handed (``carried``: the task as
    JSON, as it reaches a worker launched from R): the local file of that model, brought here when it is missing.
    Run in a process of its own, it needs no TensorFlow."""
    import json

    from alexnet.launch.task import Task
    from alexnet.model.saved import _local_file, model_source

    evaluation = Task.from_dict(json.loads(carried)).evaluation
    assert evaluation is not None
    return _local_file(model_source(evaluation.model))[0]
