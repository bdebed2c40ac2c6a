"""Schedules in real runs: image sizes (one size-free model, adaptive pooling to 6x6, resumed mid-schedule) and the
learning rate set before every step; settings that cannot train refused first. The schedule's arithmetic on its own
is test_schedule.py's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_train import Interrupted, make_tree, stop_after_first_epoch

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.model.network import AdaptiveAveragePooling2D, adaptive_pooling  # noqa: E402
from alexnet.train import datasets as run_datasets  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402
from alexnet.train.settings_check import check_settings  # noqa: E402
from alexnet.train.trained import weights_digest  # noqa: E402

NOWHERE = {"image": ["/nowhere/a.JPEG"], "category": ["n00000001"], "categories": ["n00000001"]}


@pytest.fixture(scope="module")
def colours(tmp_path_factory) -> dict:
    """Two classes of 10 images and 2 validation images each, 64 to 96 pixels: a colour each."""
    return make_tree(tmp_path_factory.mktemp("colours"), classes=2, per_class=10, val_per_class=2, seed=3,
                     min_side=64, max_side=96)


# ---------------------------------------------------------------------------------------------------------
# image sizes: the argument


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"image_size": [48, 96]}, r"`image_size` must be whole numbers >= 63, not 48"),
        ({"image_size": [64, 62]}, r"`image_size` must be whole numbers >= 63, not 62"),
        ({"image_size": []}, r"`image_size` is empty"),
        ({"image_size": [64, 80, 96], "epochs": 2}, r"`image_size` has 3 sizes but `epochs` is 2"),
        ({"image_size": [64, 96], "epochs": 3, "image_size_epochs": [3]}, r"`image_size_epochs` = \[3\] does not fit"),
        ({"image_size": [64, 96], "epochs": 3, "image_size_epochs": [1, 1]}, r"adding up to `epochs` \(3\)"),
        ({"image_size": [64, 96], "epochs": 3, "image_size_epochs": [0, 3]},
         r"`image_size_epochs` must be whole numbers >= 1"),
    ],
)
def test_size_schedules_that_cannot_be_trained_are_refused_before_training(changes, message):
    with pytest.raises(AlexnetError, match=message):
        alexnet_train(data=NOWHERE, **changes)  # the images do not exist: nothing but the check ran


def test_arguments_of_the_wrong_shape_are_said_with_what_was_given():
    with pytest.raises(AlexnetError, match=r"^`image_size` must be whole numbers, not 64\.5\.$"):
        alexnet_train(data=NOWHERE, image_size=64.5)
    with pytest.raises(AlexnetError, match=r"^`data` is empty: there are no images to train on"):
        alexnet_train(data=[])  # R's list()
    with pytest.raises(AlexnetError, match=r"`image`, `category` and `categories` named, not 2 values without "
                                           r"names\.$"):
        alexnet_train(data=[1, 2])  # R's list(1, 2)
    with pytest.raises(AlexnetError, match=r"`categories` named, not a str\.$"):
        alexnet_train(data="/a/folder")


def test_a_run_refused_before_it_writes_leaves_no_folder_of_its_outputs(tmp_path):
    outputs = {name: str(tmp_path / "runs" / name) for name in ("checkpoint_dir", "model_dir", "log_dir")}
    with pytest.raises(AlexnetError, match="images"):
        alexnet_train(data=NOWHERE, **outputs)  # refused at its images, after its outputs were proven writable
    assert list(tmp_path.iterdir()) == [], "no folder made only to prove it writable is left"


# ---------------------------------------------------------------------------------------------------------
# image sizes: the pooling that makes the model size-free


def _reference_pooling(x: np.ndarray, side: int) -> np.ndarray:
    """Adaptive average pooling in plain numpy: cell (i, j) averages rows floor(i h / side) to
    ceil((i + 1) h / side) and the same for columns."""
    _, h, w, _ = x.shape
    out = np.empty((x.shape[0], side, side, x.shape[3]), dtype=np.float64)
    for i in range(side):
        r0, r1 = math.floor(i * h / side), math.ceil((i + 1) * h / side)
        for j in range(side):
            c0, c1 = math.floor(j * w / side), math.ceil((j + 1) * w / side)
            out[:, i, j, :] = x[:, r0:r1, c0:c1, :].mean(axis=(1, 2))
    return out


def _new_pooling(side: int = 6):
    return lambda x: adaptive_pooling(x.shape[-1], side)(x)


#: The pooling the network uses (built-in ops) and the layer of models saved before it (kept for reading them).
POOLINGS = {"built-in ops": _new_pooling, "old layer": lambda side=6: AdaptiveAveragePooling2D(side)}


@pytest.mark.parametrize("pooling", POOLINGS)
def test_adaptive_pooling_is_the_identity_on_a_6x6_map(pooling):
    x = np.random.default_rng(0).normal(size=(2, 6, 6, 5)).astype(np.float32)
    out = POOLINGS[pooling]()(x).numpy()
    assert out.dtype == np.float32 and np.array_equal(out, x)


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("shape", [(13, 13), (1, 1), (7, 11), (3, 20)])
def test_adaptive_pooling_averages_the_share_of_each_cell(shape, pooling):
    x = np.random.default_rng(1).normal(size=(2, *shape, 4)).astype(np.float32)
    out = POOLINGS[pooling]()(x).numpy()
    assert out.shape == (2, 6, 6, 4)
    np.testing.assert_allclose(out, _reference_pooling(x.astype(np.float64), 6), rtol=1e-5, atol=1e-6)
    if shape == (1, 1):
        assert np.array_equal(out, np.broadcast_to(x, out.shape))


def test_the_built_in_pooling_has_the_old_layers_gradients_and_computes_in_float32():
    x = tf.constant(np.random.default_rng(4).normal(size=(2, 9, 14, 3)).astype(np.float32))
    weights = tf.constant(np.random.default_rng(5).normal(size=(2, 6, 6, 3)).astype(np.float32))
    gradients = []
    for pooling in POOLINGS.values():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(pooling()(x) * weights)
        gradients.append(tape.gradient(loss, x).numpy())
    assert np.abs(gradients[0]).sum() > 0
    np.testing.assert_allclose(gradients[0], gradients[1], rtol=1e-5, atol=1e-6)
    half = adaptive_pooling(3)(tf.cast(x, tf.bfloat16))
    assert half.dtype == tf.float32 and half.shape == (2, 6, 6, 3)


def test_adaptive_pooling_round_trips_through_its_config_and_a_saved_model(tmp_path):
    layer = AdaptiveAveragePooling2D(4, name="pool")
    copy = AdaptiveAveragePooling2D.from_config(layer.get_config())
    assert copy.side == 4 and copy.name == "pool"
    inputs = keras.Input((None, None, 2))
    model = keras.Model(inputs, AdaptiveAveragePooling2D(4, name="pool")(inputs))
    assert model.output_shape == (None, 4, 4, 2)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")  # registered: no custom_objects needed
    assert isinstance(loaded.get_layer("pool"), AdaptiveAveragePooling2D) and loaded.get_layer("pool").side == 4
    x = np.random.default_rng(2).normal(size=(1, 9, 10, 2)).astype(np.float32)
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


# ---------------------------------------------------------------------------------------------------------
# image sizes: a run over 64 then 96 pixels, interrupted after its first epoch and resumed


class _Epochs(keras.callbacks.Callback):
    """The epochs a run trained, the rate each epoch's last step used, and each epoch's weights (their digest) and
    validation accuracy, by epoch."""

    def __init__(self):
        super().__init__()
        self.epochs: list[int] = []
        self.rates: list[float] = []
        self.digests: dict[int, str] = {}
        self.accuracies: dict[int, float] = {}

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)

    def on_epoch_end(self, epoch, logs=None):
        self.rates.append(float(self.model.optimizer.learning_rate))  # the rate the epoch's last step used
        self.digests[epoch] = weights_digest(self.model)
        if logs and "val_accuracy" in logs:
            self.accuracies[epoch] = float(logs["val_accuracy"])


@pytest.fixture(scope="module")
def sized(colours, tmp_path_factory) -> dict:
    """Sizes (64, 96) over 2 epochs with checkpoints, keeping the best epoch: a run stopped after epoch 1, then the
    same call again. Records the sizes of the training datasets each run fed to Keras, and each epoch's weights."""
    folder = tmp_path_factory.mktemp("sized")
    run = {"image_size": (64, 96), "checkpoint_dir": folder / "ckpt", "dense_units": 16, "learning_rate": 0.01,
           "lr_scaling": "none", "seed": 2, "verbose": 0, "keep_best": True}
    fed: list[list[Any]] = [[], []]
    original = run_datasets.RunDatasets.train
    stop, epochs, first = stop_after_first_epoch(), _Epochs(), _Epochs()
    with pytest.MonkeyPatch.context() as patch:
        def train(self, size, epoch=0, step=0):
            dataset = original(self, size, epoch, step)
            fed[current].append((size, tuple(dataset.element_spec[0].shape[1:3])))
            return dataset

        patch.setattr(run_datasets.RunDatasets, "train", train)
        current = 0
        with pytest.raises(Interrupted):
            alexnet_train(8, 2, colours, callbacks=[first, stop], **run)
        current = 1
        history = alexnet_train(8, 2, colours, callbacks=[epochs], **run)
    return {"history": history, "fed": fed, "stop": stop, "epochs": epochs, "first": first, "folder": folder,
            "run": run}


def test_a_run_resumed_mid_schedule_continues_it(sized):
    history, fed = sized["history"], sized["fed"]
    assert fed[0] == [(64, (64, 64))], "the first run trained its one epoch at 64 pixels"
    assert fed[1] == [(96, (96, 96))], "the resumed run trains only the second epoch, at 96 pixels"
    assert sized["epochs"].epochs == [1]
    params, metrics, schedule = history["params"], history["metrics"], history["schedule"]
    assert params["initial_epoch"] == 1 and params["image_size"] == [64, 96] and params["image_size_epochs"] == [1, 1]
    assert schedule["image_size"] == [64, 96], "both epochs, the one done before the interruption too"
    assert len(metrics["loss"]) == 2 and metrics["loss"][0] == pytest.approx(sized["stop"].logs["loss"])
    assert "image_size" not in metrics and "learning_rate" not in metrics
    # the default linear schedule continues its curve across the interruption, to zero at the last step
    rates = check_settings({**sized["run"], "epochs": 2}).rates(8, params["steps"])
    assert rates.kind == "linear" and rates.of_epoch(1) == 0.0
    assert schedule["learning_rate"] == [pytest.approx(rates.of_epoch(0)), 0.0]
    assert sized["first"].rates == [pytest.approx(rates.of_epoch(0))] and sized["epochs"].rates == [0.0]


def test_keep_best_saves_the_best_epochs_weights_even_across_a_resume(sized):
    history = sized["history"]
    accuracies = history["metrics"]["val_accuracy"]
    best = accuracies.index(max(accuracies))  # the first of equals
    digests = {**sized["first"].digests, **sized["epochs"].digests}
    assert history["best_epoch"] == best + 1 and history["card"]["best_epoch"] == best + 1
    assert history["weights_sha256"] == digests[best], "the model is the best epoch's"
    assert history["card"]["metrics"]["val_accuracy"] == pytest.approx(accuracies[best])
    assert (sized["folder"] / "ckpt" / "alexnet-best-weights.npz").exists()


def test_keras_epoch_headers_count_the_runs_epochs_across_its_sizes(colours, capsys):
    """A run fitted in parts, one per image size, says its epochs as one run does: Epoch 1/3 to 3/3, where each
    part counted to its own last epoch (none said for the first, 2/3 and 3/3 for the second)."""
    alexnet_train(8, 3, colours, image_size=(64, 80), image_size_epochs=(1, 2), dense_units=16, steps_per_epoch=1,
                  validation=False, precision="float32", verbose=2)
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Epoch ")]
    assert headers == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]


def test_a_model_trained_over_64_then_96_saves_loads_and_predicts_at_96(sized, colours):
    from alexnet.input.decode import decode_for_eval
    from alexnet.model.predict import alexnet_predict
    from alexnet.model.saved import load_model

    history = sized["history"]
    model_dir = sized["folder"] / "ckpt"
    assert Path(history["model_path"]) == model_dir / "alexnet.keras"
    assert history["card"]["image_size"] == 96 and history["params"]["image_size"] == [64, 96]
    loaded = load_model(str(model_dir))
    assert loaded.card.image_size == 96 and loaded.card.weights_sha256 == history["weights_sha256"]
    assert loaded.model.input_shape == (None, None, None, 3), "one model takes every size"
    image = colours["val_image"][0]
    named = alexnet_predict(str(model_dir), [image], top=2)
    assert [r["rank"] for r in named] == [1, 2] and {r["id"] for r in named} == set(colours["categories"])
    pixels = decode_for_eval(tf.constant(Path(image).read_bytes()), 96).numpy()
    assert pixels.shape == (96, 96, 3)
    expected = np.asarray(loaded.model.predict_on_batch(pixels[None]))[0]
    by_id = {r["id"]: r["probability"] for r in named}
    np.testing.assert_allclose([by_id[c] for c in colours["categories"]], expected, rtol=1e-6)
    small = decode_for_eval(tf.constant(Path(image).read_bytes()), 64).numpy()
    assert loaded.model.predict_on_batch(small[None]).shape == (1, 2), "and still takes 64 pixels"


# ---------------------------------------------------------------------------------------------------------
# the learning rate


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epochs": 3, "warmup_epochs": 4}, r"`warmup_epochs` = 4 is more than `epochs` \(3\)"),
        ({"epochs": 3, "warmup_epochs": 3}, r"`warmup_epochs` = 3 is every epoch: the linear schedule would end at its "
                                            "peak and never come down"),
        ({"epochs": 3, "warmup_epochs": 3, "lr_schedule": "cosine"}, r"the cosine schedule would end at its peak"),
        ({"epochs": 3, "warmup_epochs": 2, "lr_scaling": "none"}, r"lr_scaling = 'none' scales nothing"),
        ({"warmup_epochs": -1}, r"`warmup_epochs`"),
        ({"lr_scaling": "cubic"}, r"`lr_scaling` must be one of 'linear', 'none', not 'cubic'"),
    ],
)
def test_learning_rate_settings_that_cannot_work_are_refused_before_training(changes, message):
    with pytest.raises(AlexnetError, match=message):
        alexnet_train(data=NOWHERE, **changes)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_run_records_each_epochs_learning_rate_as_it_trained(colours):
    # 136 images a step (one step an epoch): the rate grows 136 / 128 times, warmed up over 2 epochs (2 steps),
    # then divided by 10 at the third epoch
    epochs = _Epochs()
    history = alexnet_train(136, 3, colours, image_size=64, dense_units=16, learning_rate=0.16, warmup_epochs=2,
                            lr_schedule="step", lr_drop_epochs=[2], steps_per_epoch=1, validation=False, seed=4,
                            verbose=0,
                            callbacks=[epochs])
    params = history["params"]
    assert (params["lr_factor"], params["peak_learning_rate"], params["warmup_epochs"]) == (
        1.0625, pytest.approx(0.17), 2)
    expected = [0.165, 0.17, 0.017]  # half-way up after the first of the 2 warm-up steps, the peak, a tenth
    assert history["schedule"]["learning_rate"] == [pytest.approx(r) for r in expected]
    assert epochs.rates == [pytest.approx(r) for r in expected], "what the optimizer used"
    assert history["schedule"]["image_size"] == [64] * 3


def test_the_rate_setter_drops_a_plateau_schedule_from_the_history_it_is_given():
    from types import SimpleNamespace

    from alexnet.train.callbacks import RateSetter
    from alexnet.train.schedule import rate_schedule

    rates = rate_schedule(0.01, "none", None, (), epochs=6, global_batch=128, steps_per_epoch=2, kind="plateau")
    optimizer = SimpleNamespace(learning_rate=tf.Variable(0.0))
    history: list[float] = []
    setter = RateSetter(rates, optimizer, patience=2, accuracies=lambda: history)
    used = []
    for epoch, accuracy in enumerate([0.5, 0.6, 0.6, 0.55, 0.7, 0.7]):
        setter.on_epoch_begin(epoch)
        for batch in range(2):
            setter.on_train_batch_begin(batch)
            used.append(float(optimizer.learning_rate.numpy()))
        history.append(accuracy)
    # epochs 2 and 3 without a better accuracy: epoch 4 starts at a tenth
    assert used == [pytest.approx(r) for r in [0.01] * 8 + [0.001] * 4]
    assert setter.rates.drop_epochs == (4,)
    # a resumed run (a new setter, the history of the epochs done) takes the same decision
    resumed = RateSetter(rates, optimizer, patience=2, accuracies=lambda: history[:5])
    resumed.on_epoch_begin(5)
    resumed.on_train_batch_begin(0)
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(0.001)


def test_label_smoothing_spreads_the_share_over_every_class():
    from alexnet.train.model import SmoothedSparseCrossentropy

    probabilities = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], dtype=np.float32)
    labels = np.array([0, 1])
    for smoothing in (0.0, 0.1, 0.3):
        target = np.full((2, 3), smoothing / 3)
        target[np.arange(2), labels] += 1 - smoothing
        expected = -(target * np.log(probabilities)).sum(axis=1).mean()
        loss = SmoothedSparseCrossentropy(smoothing)(labels, probabilities)
        assert float(loss) == pytest.approx(expected, rel=1e-5)
    hard = keras.losses.SparseCategoricalCrossentropy()(labels, probabilities)
    assert float(SmoothedSparseCrossentropy(0.0)(labels, probabilities)) == pytest.approx(float(hard), rel=1e-5)
    config = SmoothedSparseCrossentropy(0.1).get_config()
    assert SmoothedSparseCrossentropy.from_config(config).label_smoothing == 0.1
