"""Time training steps of the full-size AlexNet started from a trained model, with every layer learning and with
``train_from`` later layers: how much a step costs when the backward pass stops early.

The initial model is a full-size AlexNet (4096 hidden units) of random weights, saved with its card; the data is a
synthetic ImageNet (``imagenet_synthetic()``) of ``--classes`` categories. Each ``train_from`` trains
``--steps`` steps of ``--batch`` images at ``--size`` pixels in float32, without validation, ``--rounds`` times
taking turns; the table gives the run's own images per second (its first epoch's warm-up steps left out) and the
float32 gradients a worker of a cluster would send a step (those of the layers that learn).

    .venv/bin/python tools/measure-train-from.py [--layers conv1,fc1,logits] [--steps 24] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="conv1,fc1,logits", help="values of train_from, one table row each")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import alexnet
    from alexnet.model.card import ModelCard, now
    from alexnet.model.network import build_alexnet
    from alexnet.model.saved import CARD_FILE, MODEL_FILE
    from alexnet.train.initial import LEARNING_LAYERS

    layers = [word.strip() for word in args.layers.split(",")]
    with tempfile.TemporaryDirectory(prefix="train-from-") as scratch:
        root = Path(scratch)
        written = alexnet.imagenet_synthetic(root / "tree", classes=args.classes, images_per_class=args.batch,
                                             val_per_class=1, seed=1)
        data = alexnet.imagenet_partition(0, 1, board=str(alexnet.imagenet_upload(written["path"],
                                                                                  board=root / "board")["board"]),
                                          cache_dir=str(root / "cache"))
        initial = root / "initial"
        initial.mkdir()
        build_alexnet(1000).save(initial / MODEL_FILE)
        ids = [f"n{i:08d}" for i in range(1000)]
        (initial / CARD_FILE).write_text(ModelCard(image_size=224, num_classes=1000, class_ids=ids, class_names=ids,
                                                   created=now()).to_json())
        rates: dict[str, list[float]] = {layer: [] for layer in layers}
        net = build_alexnet(args.classes)
        sent = {layer: 4.0 * sum(w.size for name in LEARNING_LAYERS[LEARNING_LAYERS.index(layer):]
                                 for w in net.get_layer(name).get_weights()) for layer in layers}
        for _ in range(args.rounds):
            for layer in layers:
                history = alexnet.alexnet_train(data=data, epochs=1, batch_size=args.batch, image_size=args.size,
                                                steps_per_epoch=args.steps, validation=False, precision="float32",
                                                initial_model=str(initial), train_from=layer, verbose=0)
                rates[layer].append(float(history["images_per_second"]))
    print(f"{args.steps} steps of {args.batch} images at {args.size} pixels, float32, {args.rounds} rounds")
    print("| train_from | images/s (median, range) | x conv1 | float32 gradients a step |")
    print("|---|---|---|---|")
    first = statistics.median(rates[layers[0]])
    for layer in layers:
        median = statistics.median(rates[layer])
        print(f"| {layer} | {median:.1f} ({min(rates[layer]):.1f}-{max(rates[layer]):.1f}) | {median / first:.2f} | "
              f"{sent[layer] / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
