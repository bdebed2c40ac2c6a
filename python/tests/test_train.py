"""alexnet_train(): data forms, strategies, learning, bad images, Mirrored over two CPUs, resume."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_train import (
    MIRRORED_VAL_PER_CLASS,
    Interrupted,
    make_tree,
    score_epochs,
    stop_after_first_epoch,
    synthetic_data,
)

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.errors import AlexnetError, BadImagesError  # noqa: E402
from alexnet.model.saved import MODEL_FILE  # noqa: E402
from alexnet.train import strategy as strategies  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402

HELPER = Path(__file__).with_name("helpers_train.py")
# Settings under which a short run on the synthetic ImageNet learns at 64 pixels (see the learning test): the rate
# is fixed, not scaled down with the small batches (0.005 * 16/128 learns nothing in 8 epochs).
FAST = {
    "image_size": 64,
    "dense_units": 256,
    "learning_rate": 0.005,
    "lr_scaling": "none",
    "lr_drop_epochs": [6],
    "area_range": (0.6, 1.0),
    "verbose": 0,
}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """4 categories x 48 training images (plus the quirky and broken files), 16 validation images each."""
    return synthetic_data(tmp_path_factory.mktemp("imagenet"), classes=4, per_class=48, val_per_class=16, quirks=True)


def _data(synthetic: dict) -> dict:
    return {k: v for k, v in synthetic.items() if k != "quirks"}


# ---------------------------------------------------------------------------------------------------------
# arguments


def test_missing_data_and_bad_arguments_fail_before_any_work(tmp_path):
    with pytest.raises(AlexnetError, match="imagenet_partition"):
        alexnet_train()
    data = {"image": ["/nowhere/a.JPEG"], "category": ["n1"], "categories": ["n1"]}
    with pytest.raises(AlexnetError, match="'default', 'mirrored', 'multi_worker'"):
        alexnet_train(data=data, strategy="parameter_server")
    # a misspelt name gets the closest, before the settings' checks make the output folders
    with pytest.raises(AlexnetError, match=r"^`strategy` must be None, one of 'default', 'mirrored', 'multi_worker' "
                       r"or a tf.distribute.Strategy object, not `mirored` \(did you mean `mirrored`\?\)\.$"):
        alexnet_train(data=data, strategy="mirored", checkpoint_dir=str(tmp_path / "new" / "ckpt"))
    with pytest.raises(AlexnetError, match="batch_size"):
        alexnet_train(batch_size=0, data=data)
    with pytest.raises(AlexnetError, match="image_size"):
        alexnet_train(data=data, image_size=32)
    with pytest.raises(AlexnetError, match=r"^`batch_size`, the first argument, was given a partition: pass it by "
                       r"name, as `data`, or after `batch_size` and `epochs`\.$"):
        alexnet_train(data)
    with pytest.raises(AlexnetError, match=r"^`callbacks` is a str, not a Keras callback: give a list of "):
        alexnet_train(data=data, callbacks="x", checkpoint_dir=str(tmp_path / "new" / "ckpt"))
    assert not (tmp_path / "new").exists()  # refused before the settings' checks make the output folders
    with pytest.raises(AlexnetError, match=r"^`callbacks` item 2 is a dict, not a Keras callback"):
        alexnet_train(data=data, callbacks=[keras.callbacks.Callback(), {}])


def test_callbacks_are_a_list_also_when_one_is_given():
    from alexnet.train.api import check_callbacks

    one = keras.callbacks.Callback()
    assert check_callbacks(one) == [one] and check_callbacks((one,)) == [one] and check_callbacks(None) == []


# ---------------------------------------------------------------------------------------------------------
# strategies


def test_a_run_that_keeps_nothing_is_warned_before_it_trains(synthetic, tmp_path, monkeypatch, caplog):
    """A run without `checkpoint_dir`, `model_dir` or `model_pin` ended with its model saved nowhere, and a run of
    hours stopped half way could not resume, without a word; one that keeps them, or whose own callbacks may, is not
    warned, and neither is a call refused for its data."""
    from alexnet.train import agreement

    class Stopped(Exception):
        """Where the run stops here: once its data is checked and the warning said, before the workers agree."""

    def stop(*args, **kwargs):
        raise Stopped

    monkeypatch.setattr(agreement, "agree_on_settings", stop)
    said = "Nothing of this run is kept once it ends: the model it trains is saved nowhere"
    for settings, callbacks, warned in [({}, None, True), ({"model_dir": str(tmp_path / "model")}, None, False),
                                        ({"checkpoint_dir": str(tmp_path / "ckpt")}, None, False),
                                        ({}, [keras.callbacks.Callback()], False)]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="alexnet"), pytest.raises(Stopped):
            alexnet_train(data=_data(synthetic), callbacks=callbacks, max_bad_fraction=0.1, **settings, **FAST)
        assert (said in caplog.text) is warned, settings
        if warned:
            assert "Give `checkpoint_dir` (checkpoints and the model), `model_dir` or `model_pin` to keep it." \
                in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet"), pytest.raises(AlexnetError, match=r'`data\["categories"\]`'):
        alexnet_train(data={"image": ["a.JPEG"]})
    assert said not in caplog.text


def test_images_stored_smaller_than_the_crops_are_warned_of_once_before_training(tmp_path, monkeypatch, caplog):
    """A board uploaded with `resize` below the crops training takes (the largest of a schedule too), or below the
    short side validation resizes the images to (image_size * 256 / 224), had every crop enlarged without a word; the
    partition carries the board's `resize`, and the chief warns once, before training, with what to change. A run
    resumed with every epoch done reads no image: it says nothing of them (it warned, before)."""
    from alexnet.data.fetch import imagenet_partition
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload
    from alexnet.train import callbacks

    class Stopped(Exception):
        """Where the run stops here: once it knows what is left to train and the warning is said, before training."""

    def stop(*args, **kwargs):
        raise Stopped

    tree = imagenet_synthetic(tmp_path / "tree", classes=2, images_per_class=3, val_per_class=2, max_side=96)
    small, whole = str(tmp_path / "small"), str(tmp_path / "whole")
    imagenet_upload(tree["path"], board=small, resize=64)
    imagenet_upload(tree["path"], board=whole)
    data = imagenet_partition(0, 1, small, cache_dir=str(tmp_path / "cache"))
    as_stored = imagenet_partition(0, 1, whole, cache_dir=str(tmp_path / "cache-whole"))
    assert data["resize"] == 64 and as_stored["resize"] is None

    def warned(data: dict, stopped: bool = True, **settings) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="alexnet"), monkeypatch.context() as patched:
            if stopped:
                patched.setattr(callbacks, "RateSetter", stop)
                with pytest.raises(Stopped):
                    alexnet_train(data=data, model_dir=str(tmp_path / "model"), **{**FAST, **settings})
            else:
                alexnet_train(data=data, **{**FAST, **settings})
        return [r.getMessage() for r in caplog.records if "`resize`" in r.getMessage()]

    again = "(the paper cropped 224 out of a short side of 256) with imagenet_upload()"
    training = (
        "The board's images were stored with `resize` = 64, below `image_size` = 96: training would enlarge every crop "
        f"of the stored images to 96 pixels; upload them again with `resize` of at least 96 {again}, or give an "
        "`image_size` of at most 64.")
    assert warned(data, image_size=96) == [training]
    assert warned(data, image_size=(64, 96), image_size_epochs=(1, 1), epochs=2) == [
        "The board's images were stored with `resize` = 64, below 96, the largest of `image_size`: training would "
        f"enlarge every crop of the stored images to 96 pixels; upload them again with `resize` of at least 96 {again}"
        ", or give every size of `image_size` at most 64."]
    # crops of 64 from a short side of 64, but validation takes the centre 64 of the short side resized to 73
    validation = (
        "The board's images were stored with `resize` = 64: validation resizes the short side of each image to 73 "
        "before it crops `image_size` = 64 out of it, and would enlarge every image it reads from 64 to 73 pixels; "
        f"upload them again with `resize` of at least 73 {again}, or give an `image_size` of at most 56.")
    assert warned(data, image_size=64) == [validation]
    # not validating, images stored as they were, or a list made by hand: nothing said
    assert warned(data, image_size=64, validation=False) == []
    assert warned(as_stored, image_size=96) == []
    assert warned({k: v for k, v in data.items() if k != "resize"}, image_size=96) == []
    # a run resumed with every epoch done trains and validates on nothing: nothing said; one with an epoch left, again
    checkpoints = {"checkpoint_dir": str(tmp_path / "ckpt"), "epochs": 1, "batch_size": 2}
    assert warned(data, False, image_size=96, **checkpoints) == [training]
    assert warned(data, False, image_size=96, **checkpoints) == []
    assert warned(data, False, image_size=64, **checkpoints) == []
    assert warned(data, False, image_size=96, **{**checkpoints, "epochs": 2}) == [training]


def test_a_strategy_name_is_checked_before_tensorflow_is_imported_and_the_command_line_offers_the_same_names():
    code = ("import sys\nfrom alexnet import alexnet_train\nfrom alexnet.errors import AlexnetError\n"
            "try:\n    alexnet_train(data={'image': ['a.JPEG'], 'category': ['n1'], 'categories': ['n1']}, "
            "strategy='Mirored')\nexcept AlexnetError as error:\n    print(error)\n"
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["`strategy` must be None, one of 'default', 'mirrored', 'multi_worker' or a "
                                "tf.distribute.Strategy object, not `Mirored` (did you mean `mirrored`?).", "False"]
    # one message for a name and an object alike; names in any case, with - for _
    with pytest.raises(AlexnetError, match=r"^`strategy` must be None, .* not an object of type int\.$"):
        strategies.check_strategy(3)
    assert strategies.check_strategy("Multi-Worker") == "multi_worker" and strategies.check_strategy(None) is None
    assert strategies.check_strategy(tf.distribute.get_strategy()) is None
    from alexnet.cli import build_parser

    train = build_parser()._subparsers._group_actions[0].choices["train"]  # type: ignore[union-attr]
    assert next(a for a in train._actions if a.dest == "strategy").choices == strategies.STRATEGY_NAMES


def test_strategies_by_name_and_object(monkeypatch):
    default = strategies.resolve_strategy(None)
    assert strategies.resolve_strategy("default") is default
    assert strategies.strategy_name(default) == "default"
    assert strategies.is_chief(default) and strategies.num_workers(default) == 1
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert strategies.resolve_strategy(mirrored) is mirrored
    assert strategies.strategy_name(mirrored) == "mirrored"
    assert strategies.strategy_name(strategies.resolve_strategy("Mirrored")) == "mirrored"
    with pytest.raises(AlexnetError, match="type int"):
        strategies.resolve_strategy(3)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(AlexnetError, match="TF_CONFIG"):
        strategies.resolve_strategy("multi_worker")
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}})
    )
    with pytest.raises(AlexnetError, match="index 3"):
        strategies.resolve_strategy("multi_worker")


def _cluster(jobs: dict, task_type: str, task_id: int) -> SimpleNamespace:
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(jobs), task_type=task_type, task_id=task_id
    )
    return SimpleNamespace(cluster_resolver=resolver, num_replicas_in_sync=sum(map(len, jobs.values())) * 2)


def test_only_one_process_of_a_cluster_is_chief():
    workers = {"worker": ["h1:8000", "h2:8001", "h3:8002"]}
    assert [strategies.is_chief(_cluster(workers, "worker", i)) for i in range(3)] == [True, False, False]
    assert strategies.num_workers(_cluster(workers, "worker", 1)) == 3
    assert strategies.local_replicas(_cluster(workers, "worker", 1)) == 2
    with_chief = {"chief": ["h0:7999"], **workers}
    assert strategies.is_chief(_cluster(with_chief, "chief", 0))
    assert not strategies.is_chief(_cluster(with_chief, "worker", 0))


# ---------------------------------------------------------------------------------------------------------
# training


def test_bad_images_above_the_threshold_stop_the_run_naming_them(synthetic):
    with pytest.raises(BadImagesError) as error:
        alexnet_train(data=_data(synthetic), max_bad_fraction=0.001, **FAST)
    message = str(error.value)
    assert synthetic["quirks"]["truncated"] in message and synthetic["quirks"]["empty"] in message
    assert "max_bad_fraction" in message


def test_an_image_damaged_in_the_cache_after_its_check_is_skipped_alone_counted_and_named(tmp_path, caplog):
    from alexnet.input.scan import scan_images
    from alexnet.storage import cache

    data = make_tree(tmp_path, classes=2, per_class=16, val_per_class=0, seed=4)
    for wnid in data["categories"]:  # the categories as a fetch leaves them in the cache, checked by a first run
        folder = tmp_path / "train" / wnid
        cache.write_marker(str(folder), "b" * 64, [(p.name, p.stat().st_size, cache.crc32_file(str(p)))
                                                    for p in sorted(folder.iterdir())])
    assert scan_images(data["image"]) == []
    damaged = data["image"][5]
    with open(damaged, "r+b") as file:  # damaged since, its size kept: the cache's quick check sees nothing
        file.write(bytes(64))
    settings = dict(validation=False, precision="float32", seed=1, **{**FAST, "dense_units": 16})
    with caplog.at_level(logging.WARNING, logger="alexnet.train.datasets"):
        history = alexnet_train(16, 2, data, max_bad_fraction=0.05, **settings)
    # the image alone is skipped: the epoch's two batches are whole, of the other images
    assert history["bad_images"] == [] and history["skipped_images"] == [damaged]
    assert history["params"]["train_images"] == 32 and history["params"]["steps"] == 2
    said = [r.getMessage() for r in caplog.records if r.name == "alexnet.train.datasets"]
    assert len(said) == 1 and damaged in said[0] and "1 of 32 so far" in said[0]
    assert "fetch it again with verify = True" in said[0]
    with pytest.raises(BadImagesError) as error:  # 1 of 32 is more than 1%
        alexnet_train(16, 2, data, max_bad_fraction=0.01, **settings)
    message = str(error.value)
    assert damaged in message and "max_bad_fraction = 0.01" in message and "1 of 32 training images" in message
    assert "fetch it again with verify = True" in message


def test_the_colour_augmentation_reaches_the_training_images_and_the_history(synthetic, monkeypatch):
    from alexnet.input import pipeline

    asked: list[float] = []
    original = pipeline.train_dataset

    def train_dataset(*args, **kwargs):
        asked.append(kwargs.get("lighting", 0.0))
        return original(*args, **kwargs)

    monkeypatch.setattr(pipeline, "train_dataset", train_dataset)
    history = alexnet_train(16, 1, _data(synthetic), seed=1, steps_per_epoch=1, validation=False,
                            max_bad_fraction=0.05, precision="float32", lighting=0.1,
                            **{**FAST, "dense_units": 16})
    assert asked == [0.1] and history["params"]["lighting"] == 0.1
    with pytest.raises(AlexnetError, match="lighting"):
        alexnet_train(data=_data(synthetic), lighting=2)


@pytest.mark.slow
def test_a_short_run_learns_and_returns_the_history(synthetic, tmp_path):
    # float32: the thresholds below hold for it; left unset, the precision is the one measured faster, which
    # differs between machines (bfloat16 where AMX or avx512_bf16 wins) and so would the last epochs of this tiny run
    history = alexnet_train(16, 8, _data(synthetic), None, 2, seed=1, lr_schedule="step", model_dir=tmp_path,
                            max_bad_fraction=0.05, precision="float32", **FAST)
    metrics, params = history["metrics"], history["params"]
    assert set(metrics) == {"loss", "accuracy", "top5_accuracy", "val_loss", "val_accuracy", "val_top5_accuracy",
                            "val_images"}
    assert all(len(values) == 8 and all(type(v) is float for v in values) for values in metrics.values())
    schedule = history["schedule"]  # apart from the metrics: what each epoch trained with
    assert schedule["image_size"] == [64] * 8 and all(type(v) is int for v in schedule["image_size"])
    assert schedule["learning_rate"] == pytest.approx([0.005] * 6 + [0.0005] * 2)  # divided by 10 at epoch 6
    assert schedule["summary"].startswith("image size 64, learning rate 0.005 -> 0.0005, precision ")
    assert params["lr_factor"] == 1.0 and params["peak_learning_rate"] == pytest.approx(0.005)
    assert params["warmup_epochs"] == 0
    # 4 classes: chance is 0.25
    assert metrics["val_accuracy"][-1] >= 0.55, metrics["val_accuracy"]
    assert max(metrics["val_accuracy"]) >= 0.75, metrics["val_accuracy"]
    assert metrics["loss"][-1] < metrics["loss"][0]
    # the truncated and empty files were skipped and reported; the CMYK, grayscale and PNG ones were used
    assert sorted(history["bad_images"]) == sorted([synthetic["quirks"]["truncated"], synthetic["quirks"]["empty"]])
    assert params["train_images"] == 4 * 48 + 5 - 2
    validated = [f for f in synthetic["val_image"] if f not in history["bad_images"]]
    assert params["val_images"] == len(validated) and metrics["val_images"] == [float(len(validated))] * 8
    assert params["num_classes"] == 4 and params["replicas"] == 1 and params["strategy"] == "default"
    assert params["steps"] == params["train_images"] // 16 and params["global_batch_size"] == 16
    assert history["images_per_second"] > 0
    model = keras.models.load_model(history["model_path"])
    assert model.output.shape[-1] == 4 and model.input.dtype == tf.uint8
    json.dumps(history)  # plain Python values only: it crosses to R

    # the trained model names its training images: the saved model_dir carries the categories in its card
    from alexnet.model.predict import alexnet_predict

    data = _data(synthetic)
    sample = [i for i, path in enumerate(data["image"]) if path not in history["bad_images"]][::6]
    named = alexnet_predict(str(tmp_path), [data["image"][i] for i in sample], top=1)
    assert [r["image"] for r in named] == [data["image"][i] for i in sample]
    assert {r["id"] for r in named} <= set(data["categories"]) and all(r["name"] == r["id"] for r in named)
    right = sum(r["id"] == data["category"][i] for r, i in zip(named, sample, strict=True))
    assert right / len(sample) >= 0.6, (right, len(sample))


@pytest.mark.long
def test_mirrored_over_two_cpu_devices_learns_too_and_validates_every_image_once(tmp_path):
    out = tmp_path / "history.json"
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "ALEXNET_PROGRESS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    run = subprocess.run(
        [sys.executable, str(HELPER), str(tmp_path / "imagenet"), str(out), str(tmp_path / "weights")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    history = json.loads(out.read_text())
    assert history["replicas_by_name"] == 2, "strategy='mirrored' should use both logical CPU devices"
    params = history["params"]
    assert params["replicas"] == 2 and params["strategy"] == "mirrored"
    assert params["batch_size"] == 8 and params["global_batch_size"] == 16
    assert len(history["metrics"]["val_accuracy"]) == 8
    assert history["metrics"]["val_accuracy"][-1] >= 0.55, history["metrics"]["val_accuracy"]
    # validation: 52 images in 4 steps of 16 (8 a replica), the last step's second replica padded with 4 images that
    # count for nothing, none dropped or seen twice: each epoch's numbers are alexnet_evaluate()'s of its weights
    data = history["data"]
    images = 4 * MIRRORED_VAL_PER_CLASS
    assert params["val_images"] == images and history["metrics"]["val_images"] == [float(images)] * 8
    data["val_label"] = [sorted(data["categories"]).index(c) for c in data["val_category"]]
    scores = score_epochs(tmp_path / "weights", data, 64, num_classes=4, dense_units=256)
    assert len(scores) == 8
    for epoch, score in enumerate(scores):
        assert score["images"] == images
        assert history["metrics"]["val_accuracy"][epoch] == score["top1_correct"] / images, (epoch, score)
        assert history["metrics"]["val_loss"][epoch] == pytest.approx(score["loss"], rel=1e-5), epoch
    assert len({score["top1_correct"] for score in scores}) > 1, "the epochs' predictions differ"


class _Record(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs: list[int] = []
        self.iterations_at_start = -1

    def on_train_begin(self, logs=None):
        self.iterations_at_start = int(self.model.optimizer.iterations.numpy())

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_finished_run_run_again_trains_nothing_and_publishes_no_second_version(synthetic, tmp_path, caplog):
    """Run again with the same checkpoint_dir once every epoch is done: no training, the run's history, model and pin
    as it ended (no second version of the same weights), said as such rather than as a resume at an epoch past the
    last; fewer epochs asked returns the same; the command line's summary says it too."""
    from alexnet.cli.train import history_summary
    from alexnet.storage.board import open_board

    data = _data(synthetic)
    keep = [i for i, c in enumerate(data["category"]) if c in data["categories"][:2]][:16]
    small = {"image": [data["image"][i] for i in keep], "category": [data["category"][i] for i in keep],
             "categories": data["categories"][:2]}
    settings = dict(FAST, dense_units=32, max_bad_fraction=0.1, steps_per_epoch=2, checkpoint_dir=tmp_path / "ckpt",
                    model_pin="alexnet", model_board=str(tmp_path / "models"))
    first = alexnet_train(8, 2, small, **settings)
    for epochs in (2, 1):
        record = _Record()
        caplog.clear()
        with caplog.at_level("INFO", logger="alexnet"):
            again = alexnet_train(4 if epochs == 1 else 8, epochs, small, callbacks=[record], **settings,
                                  **({"momentum": 0.5, "precision": "bfloat16"} if epochs == 1 else {}))
        assert record.epochs == [], "nothing trained"
        # the settings its model was trained with, not those given now, which trained nothing
        assert {name: again["params"][name] for name in ("batch_size", "global_batch_size", "epochs", "momentum",
                                                         "precision", "steps", "peak_learning_rate")} == {
            name: first["params"][name] for name in ("batch_size", "global_batch_size", "epochs", "momentum",
                                                     "precision", "steps", "peak_learning_rate")}
        assert again["schedule"]["summary"] == first["schedule"]["summary"]
        # left to choose, the precision is the finished run's, not measured again (asked for, it is built so)
        assert (f"(as the finished run in {tmp_path / 'ckpt'} trained: nothing is left to train)" in caplog.text
                ) == (epochs == 2)
        assert history_summary(again).splitlines()[1] == history_summary(first).splitlines()[1]
        assert ("trained otherwise than asked now: `momentum`: 0.9 then, 0.5 now; a global batch of 8 images then, 4 "
                "now (other workers, `batch_size` or `accumulate_steps`: a learning rate scaled to the new batch). "
                "Nothing is trained with these"
                in caplog.text) == (epochs == 1), "the setting left unused named"
        assert "Resuming" not in caplog.text and "Training AlexNet" not in caplog.text
        done = "all 2 epochs asked for" if epochs == 2 else "2, more than the 1 epochs asked for"
        assert f"{tmp_path / 'ckpt'} holds a finished run: it trained {done}" in caplog.text
        assert "give a larger `epochs` to train further" in caplog.text
        assert again["metrics"] == first["metrics"] and again["weights_sha256"] == first["weights_sha256"]
        assert again["model_pin"] == first["model_pin"], "the pin's version of these weights"
        assert "holds this model already: no new version" in caplog.text
    assert len(open_board(str(tmp_path / "models")).pins.pin_versions("alexnet")) == 1
    summary = history_summary(again, lambda text: text.replace("`epochs`", "`--epochs`")).splitlines()
    assert summary[0] == "AlexNet training history: 2 epochs, default strategy, 1 replica"
    assert summary[2] == (f"All 2 epochs were trained before, in {tmp_path / 'ckpt'}: nothing was left to train (a "
                          "larger `--epochs` trains further)."), summary
    assert not any(line.startswith("All") for line in history_summary(first).splitlines())
    # a larger `epochs`: the linear schedule, which ended at 0, is laid out again over the new total, as the finished
    # run says (4 epochs of 2 steps at 0.005: epoch 3 starts at 0.005 * 3/7) and the run extended warns
    assert first["schedule"]["learning_rate"][-1] == 0.0
    assert ("give a larger `epochs` to train further: the `lr_schedule` is then laid out again over the new `epochs`, "
            "as for a run of that many from the start (with epochs = 4, epoch 3 starts at a rate of 0.00214, where "
            "epoch 2 ended at 0)") in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="alexnet"):
        longer = alexnet_train(8, 4, small, **settings)
    assert (f"The checkpoints in {tmp_path / 'ckpt'} were written by a run that trained otherwise: `epochs`: 2 then, "
            "4 now (the `lr_schedule` is laid out again over 4 epochs, as for a run of 4 from the start: epoch 3 "
            "starts at a rate of 0.00214, where epoch 2 ended at 0). What is left trains so") in caplog.text
    assert longer["schedule"]["learning_rate"] == pytest.approx([0.005 * 2 / 3, 0.0, 0.005 * 2 / 7, 0.0])
    assert longer["params"]["settings_changed"] == [{"epoch": 3, "step": 0, "changed": {"epochs": [2, 4]}}]


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_resume_on_other_images_or_with_another_rate_is_warned_of_and_recorded(synthetic, tmp_path, caplog):
    """Checkpoints of one run resumed on more images of its classes, with another rate, schedule and momentum: one
    warning naming each change, then and now; the history's `settings_changed` says from which epoch, and keeps
    saying it when the run resumes again (with the same, then no warning)."""
    data = _data(synthetic)

    def two(categories, images=16):
        keep = [i for i, c in enumerate(data["category"]) if c in categories][:images]
        return {"image": [data["image"][i] for i in keep], "category": [data["category"][i] for i in keep],
                "categories": list(categories)}

    settings = dict(FAST, dense_units=32, max_bad_fraction=0.1, steps_per_epoch=2, validation=False,
                    checkpoint_dir=tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        alexnet_train(8, 3, two(data["categories"][1:3]), callbacks=[stop_after_first_epoch()], **settings)
    changed = dict(settings, learning_rate=0.05, lr_schedule="cosine", momentum=0.5)
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet"), pytest.raises(Interrupted):
        alexnet_train(8, 3, two(data["categories"][1:3], 24), callbacks=[stop_after_first_epoch()], **changed)
    warned = [r.getMessage() for r in caplog.records if "trained otherwise" in r.getMessage()]
    assert warned == [f"The checkpoints in {tmp_path / 'ckpt'} were written by a run that trained otherwise: other "
                      "images (training images 16 then, 24 now); `learning_rate`: 0.005 then, 0.05 now; "
                      "`lr_schedule`: 'linear' then, 'cosine' now; `momentum`: 0.9 then, 0.5 now. What is left "
                      "trains so, and the history holds the metrics of both (its `settings_changed` says from which "
                      "epoch); resume with the same to continue the run as it began."]
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet"):
        history = alexnet_train(8, 3, two(data["categories"][1:3], 24), **changed)
    assert "trained otherwise" not in caplog.text, "resumed again with the same: nothing changed"
    assert history["params"]["initial_epoch"] == 2
    [record] = history["params"]["settings_changed"]
    assert record["epoch"] == 2 and record["step"] == 0
    assert record["changed"]["learning_rate"] == [0.005, 0.05] and record["changed"]["momentum"] == [0.9, 0.5]
    assert list(record["changed"]) == ["data", "learning_rate", "lr_schedule", "momentum"]
    assert record["changed"]["data"] == {"train_images": [16, 24]}, "the same classes, more images"


@pytest.mark.slow
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_resume_from_a_checkpoint_continues_at_the_next_epoch(synthetic, tmp_path):
    data = _data(synthetic)
    keep = [i for i, c in enumerate(data["category"]) if c in data["categories"][:2]][:32]
    small = {
        "image": [data["image"][i] for i in keep],
        "category": [data["category"][i] for i in keep],
        "categories": data["categories"][:2],
    }
    settings = dict(FAST, dense_units=32, max_bad_fraction=0.1, checkpoint_dir=tmp_path / "ckpt")
    stop = stop_after_first_epoch()
    with pytest.raises(Interrupted):
        alexnet_train(8, 3, small, callbacks=[stop], **settings)
    record = _Record()
    history = alexnet_train(8, 3, small, callbacks=[record], **settings)
    steps = history["params"]["steps"]
    assert history["params"]["initial_epoch"] == 1
    assert record.epochs == [1, 2], "the resumed run must start at the second epoch"
    assert record.iterations_at_start == steps, "the optimizer state (and learning-rate schedule) is restored"
    assert len(history["metrics"]["loss"]) == 3, "the history covers the interrupted run's epoch too"
    assert history["metrics"]["loss"][0] == pytest.approx(stop.logs["loss"])
    assert Path(history["model_path"]) == tmp_path / "ckpt" / MODEL_FILE and Path(history["model_path"]).exists()
    # everything done: nothing more to train, the same history comes back
    again = alexnet_train(8, 3, small, **settings)
    assert again["params"]["initial_epoch"] == 3 and again["metrics"] == history["metrics"]
    # a checkpoint of another model is refused; another image size is not (one model takes every size)
    with pytest.raises(AlexnetError, match="dense_units"):
        alexnet_train(8, 3, small, **dict(settings, dense_units=16))
    longer = alexnet_train(8, 4, small, **dict(settings, image_size=72))
    assert longer["params"]["initial_epoch"] == 3
    assert longer["schedule"]["image_size"] == [64, 64, 64, 72], "what each epoch trained with, kept across resumes"
    assert longer["metrics"]["loss"][:3] == history["metrics"]["loss"]
