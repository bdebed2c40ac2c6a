"""Schedules over the epochs: image sizes (one size-free model, adaptive pooling to 6x6, resumed mid-schedule) and
the learning rate scaled with the global batch (warm-up, drops), in the plan and in real runs."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_train import Interrupted, make_tree, stop_after_first_epoch

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.model.network import AdaptiveAveragePooling2D  # noqa: E402
from alexnet.train import api  # noqa: E402
from alexnet.train import precision as precisions  # noqa: E402
from alexnet.train.api import alexnet_train  # noqa: E402
from alexnet.train.settings import TrainSettings, check_image_sizes, check_settings, rate_plan  # noqa: E402
from alexnet.train.strategy import Topology  # noqa: E402

NOWHERE = {"image": ["/nowhere/a.JPEG"], "category": ["n00000001"], "categories": ["n00000001"]}


def settings(**changes: Any) -> TrainSettings:
    """``alexnet_train``'s defaults with ``changes``, checked as a call would check them."""
    arguments = {name: p.default for name, p in inspect.signature(alexnet_train).parameters.items()}
    return check_settings({**arguments, "data": NOWHERE, **changes})


@pytest.fixture(scope="module")
def colours(tmp_path_factory) -> dict:
    """Two classes of 10 images and 2 validation images each, 64 to 96 pixels: a colour each."""
    return make_tree(tmp_path_factory.mktemp("colours"), classes=2, per_class=10, val_per_class=2, seed=3,
                     min_side=64, max_side=96)


# ---------------------------------------------------------------------------------------------------------
# image sizes: the argument


def test_sizes_split_the_epochs_evenly_the_later_ones_taking_what_is_left():
    assert check_image_sizes(224, None, 90) == ((224,), (90,))
    assert check_image_sizes([64, 96], None, 2) == ((64, 96), (1, 1))
    assert check_image_sizes((64, 80, 96), None, 5) == ((64, 80, 96), (1, 2, 2))
    assert check_image_sizes([64.0, 96.0], [3, 1], 4) == ((64, 96), (3, 1))  # R: doubles
    s = settings(image_size=[64, 80, 96], epochs=5)
    assert s.image_size == 96 and s.image_sizes == (64, 80, 96) and s.image_size_epochs == (1, 2, 2)
    assert [s.size_at(e) for e in range(6)] == [64, 80, 80, 96, 96, 96]
    assert s.size_segments(0, 5) == [(0, 1, 64), (1, 3, 80), (3, 5, 96)]
    assert s.size_segments(2, 5) == [(2, 3, 80), (3, 5, 96)], "a resumed run continues the schedule"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"image_size": [48, 96]}, r"`image_size` must be a whole number >= 63"),
        ({"image_size": [64, 62]}, r"`image_size` must be a whole number >= 63"),
        ({"image_size": []}, r"`image_size` is empty"),
        ({"image_size": [64, 80, 96], "epochs": 2}, r"`image_size` has 3 sizes but `epochs` is 2"),
        ({"image_size": [64, 96], "epochs": 3, "image_size_epochs": [3]}, r"`image_size_epochs` = \[3\] does not fit"),
        ({"image_size": [64, 96], "epochs": 3, "image_size_epochs": [1, 1]}, r"adding up to `epochs` \(3\)"),
        ({"image_size": [64, 96], "epochs": 3, "image_size_epochs": [0, 3]}, r"`image_size_epochs` = \[0, 3\]"),
    ],
)
def test_size_schedules_that_cannot_be_trained_are_refused_before_training(changes, message):
    with pytest.raises(AlexnetError, match=message):
        alexnet_train(data=NOWHERE, **changes)  # the images do not exist: nothing but the check ran


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


def test_adaptive_pooling_is_the_identity_on_a_6x6_map():
    x = np.random.default_rng(0).normal(size=(2, 6, 6, 5)).astype(np.float32)
    out = AdaptiveAveragePooling2D(6)(x).numpy()
    assert out.dtype == np.float32 and np.array_equal(out, x)


@pytest.mark.parametrize("shape", [(13, 13), (1, 1), (7, 11), (3, 20)])
def test_adaptive_pooling_averages_the_share_of_each_cell(shape):
    x = np.random.default_rng(1).normal(size=(2, *shape, 4)).astype(np.float32)
    out = AdaptiveAveragePooling2D(6)(x).numpy()
    assert out.shape == (2, 6, 6, 4)
    np.testing.assert_allclose(out, _reference_pooling(x.astype(np.float64), 6), rtol=1e-5, atol=1e-6)
    if shape == (1, 1):
        assert np.array_equal(out, np.broadcast_to(x, out.shape))


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
    def __init__(self):
        super().__init__()
        self.epochs: list[int] = []
        self.rates: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)

    def on_epoch_end(self, epoch, logs=None):
        self.rates.append(float(self.model.optimizer.learning_rate))  # the rate the epoch's last step used


@pytest.fixture(scope="module")
def sized(colours, tmp_path_factory) -> dict:
    """Sizes (64, 96) over 2 epochs with checkpoints: a run stopped after epoch 1, then the same call again.
    Records the sizes of the training datasets each run fed to Keras."""
    folder = tmp_path_factory.mktemp("sized")
    run = {"image_size": (64, 96), "checkpoint_dir": folder / "ckpt", "dense_units": 16, "learning_rate": 0.01,
           "lr_scaling": "none", "seed": 2, "verbose": 0}
    fed: list[list[Any]] = [[], []]
    original = api._Datasets.train
    stop, epochs = stop_after_first_epoch(), _Epochs()
    with pytest.MonkeyPatch.context() as patch:
        def train(self, size):
            dataset = original(self, size)
            fed[current].append((size, tuple(dataset.element_spec[0].shape[1:3])))
            return dataset

        patch.setattr(api._Datasets, "train", train)
        current = 0
        with pytest.raises(Interrupted):
            alexnet_train(8, 2, colours, callbacks=[stop], **run)
        current = 1
        history = alexnet_train(8, 2, colours, callbacks=[epochs], **run)
    return {"history": history, "fed": fed, "stop": stop, "epochs": epochs, "folder": folder}


def test_a_run_resumed_mid_schedule_continues_it(sized):
    history, fed = sized["history"], sized["fed"]
    assert fed[0] == [(64, (64, 64))], "the first run trained its one epoch at 64 pixels"
    assert fed[1] == [(96, (96, 96))], "the resumed run trains only the second epoch, at 96 pixels"
    assert sized["epochs"].epochs == [1]
    params, metrics = history["params"], history["metrics"]
    assert params["initial_epoch"] == 1 and params["image_sizes"] == [64, 96] and params["image_size_epochs"] == [1, 1]
    assert metrics["image_size"] == [64.0, 96.0]
    assert len(metrics["loss"]) == 2 and metrics["loss"][0] == pytest.approx(sized["stop"].logs["loss"])
    assert metrics["learning_rate"] == [pytest.approx(0.01)] * 2


def test_a_model_trained_over_64_then_96_saves_loads_and_predicts_at_96(sized, colours):
    from alexnet.input.decode import decode_for_eval
    from alexnet.model.predict import alexnet_predict
    from alexnet.model.saved import load_model

    history = sized["history"]
    model_dir = sized["folder"] / "ckpt"
    assert Path(history["model_path"]) == model_dir / "alexnet.keras"
    assert history["card"]["image_size"] == 96 and history["params"]["image_size"] == 96
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


def _schedule(s: TrainSettings, topology: Topology, steps: int, monkeypatch) -> tuple[Any, Any]:
    """The schedule and optimizer ``alexnet_train`` builds for ``s`` on ``topology``."""
    monkeypatch.setattr(precisions, "cpu_flags", lambda: frozenset())
    _, optimizer, _, schedule = api._build(tf.distribute.get_strategy(), 2, s, topology, steps)
    return schedule, optimizer


def _cpus(replicas: int) -> Topology:
    """``replicas`` machines of one CPU each, as a multi-worker run sees them (this process is the chief)."""
    return Topology("multi_worker", replicas, replicas, 0, True, 1, False)


def test_a_global_batch_of_512_warms_up_over_5_epochs_to_4_times_the_rate_then_drops(monkeypatch):
    s = settings(batch_size=32, epochs=90, dense_units=16)  # 16 workers of batch 32: a global batch of 512
    plan = rate_plan(s, 512)
    assert (plan.base, plan.factor, plan.peak, plan.warmup_epochs) == (0.01, 4.0, pytest.approx(0.04), 5)
    assert plan.drop_epochs == (30, 60, 80)
    steps = 10
    schedule, optimizer = _schedule(s, _cpus(16), steps, monkeypatch)
    assert optimizer._learning_rate is schedule
    rate = schedule.rate
    warmup = [rate(step) for step in range(5 * steps)]
    increment = (0.04 - 0.01) / (5 * steps)
    assert warmup[0] == pytest.approx(0.01 + increment), "from the batch of 128's rate, one step up"
    assert rate(24) == pytest.approx(0.01 + 25 * increment) == pytest.approx(0.025), "half-way: half-way up"
    np.testing.assert_allclose(np.diff(warmup), increment, rtol=1e-4)  # linear
    assert rate(5 * steps - 1) == pytest.approx(0.04), "the last warm-up step is at the peak"
    for step in (5 * steps, 17 * steps, 30 * steps - 1):
        assert rate(step) == pytest.approx(0.04)
    assert rate(30 * steps) == pytest.approx(0.004)
    assert rate(60 * steps - 1) == pytest.approx(0.004) and rate(60 * steps) == pytest.approx(0.0004)
    assert rate(80 * steps) == pytest.approx(0.00004) and rate(90 * steps - 1) == pytest.approx(0.00004)


def test_a_rate_that_grows_at_most_twice_needs_no_warm_up_and_none_keeps_it(monkeypatch):
    s = settings(batch_size=32, epochs=10, lr_drop_epochs=[8], dense_units=16)
    plan = rate_plan(s, 256)
    assert (plan.factor, plan.peak, plan.warmup_epochs) == (2.0, pytest.approx(0.02), 0)
    schedule, _ = _schedule(s, _cpus(8), 4, monkeypatch)
    assert [schedule.rate(step) for step in (0, 1, 31)] == [pytest.approx(0.02)] * 3
    assert schedule.rate(32) == pytest.approx(0.002)
    fixed = settings(batch_size=32, epochs=10, lr_drop_epochs=[8], lr_scaling="none", dense_units=16)
    assert rate_plan(fixed, 512) == rate_plan(fixed, 8)
    assert (rate_plan(fixed, 512).peak, rate_plan(fixed, 512).warmup_epochs) == (0.01, 0)
    schedule, _ = _schedule(fixed, _cpus(16), 4, monkeypatch)
    assert [schedule.rate(step) for step in (0, 1, 31)] == [pytest.approx(0.01)] * 3
    # warm-up: fewer epochs than 5 warm up over all of them; an explicit 0 means none
    assert rate_plan(settings(epochs=3), 512).warmup_epochs == 3
    assert rate_plan(settings(epochs=10, warmup_epochs=0), 512).warmup_epochs == 0
    assert rate_plan(settings(epochs=10, warmup_epochs=2), 512).warmup_epochs == 2


def test_a_warm_up_never_starts_above_the_rate_it_reaches(monkeypatch):
    # a global batch below 128 scales the rate down: an explicit warm-up must not start at the larger rate
    s = settings(batch_size=32, epochs=4, warmup_epochs=2, dense_units=16)
    schedule, _ = _schedule(s, _cpus(1), 5, monkeypatch)
    rates = [schedule.rate(step) for step in range(20)]
    assert max(rates) == pytest.approx(0.0025), rates
    assert rates[-1] == pytest.approx(0.0025)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epochs": 3, "warmup_epochs": 4}, r"`warmup_epochs` = 4 is more than `epochs` \(3\)"),
        ({"epochs": 3, "warmup_epochs": 2, "lr_scaling": "none"}, r"lr_scaling = 'none' scales nothing"),
        ({"warmup_epochs": -1}, r"`warmup_epochs`"),
        ({"lr_scaling": "cubic"}, r"`lr_scaling` must be 'linear' or 'none'"),
    ],
)
def test_learning_rate_settings_that_cannot_work_are_refused_before_training(changes, message):
    with pytest.raises(AlexnetError, match=message):
        alexnet_train(data=NOWHERE, **changes)


def test_a_run_records_each_epochs_learning_rate_as_it_trained(colours):
    # 136 images a step (one step an epoch): the rate grows 136 / 128 times, warmed up over 2 epochs (2 steps),
    # then divided by 10 at the third epoch
    epochs = _Epochs()
    history = alexnet_train(136, 3, colours, image_size=64, dense_units=16, learning_rate=0.16, warmup_epochs=2,
                            lr_drop_epochs=[2], steps_per_epoch=1, validation=False, seed=4, verbose=0,
                            callbacks=[epochs])
    params = history["params"]
    assert (params["lr_factor"], params["peak_learning_rate"], params["warmup_epochs"]) == (
        1.0625, pytest.approx(0.17), 2)
    expected = [0.165, 0.17, 0.017]  # half-way up after the first of the 2 warm-up steps, the peak, a tenth
    assert history["metrics"]["learning_rate"] == [pytest.approx(r) for r in expected]
    assert epochs.rates == [pytest.approx(r) for r in expected], "what the optimizer used"
    assert history["metrics"]["image_size"] == [64.0] * 3
