"""AlexNet's architecture and the paper's optimizer."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.checks import MIN_IMAGE_SIZE  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.model.network import build_alexnet  # noqa: E402
from alexnet.train import model as alexnet_model  # noqa: E402


def conv_params(size: int, in_channels: int, filters: int, groups: int = 1) -> int:
    return size * size * (in_channels // groups) * filters + filters


def dense_params(inputs: int, units: int) -> int:
    return inputs * units + units


def paper_parameter_count(num_classes: int, grouped: bool) -> int:
    """Counted from the paper's layer table, at 224x224 (feature maps 55, 27, 13, 6)."""
    g = 2 if grouped else 1
    side = 6  # after the third pooling: 224 (+2 padding each side) -> 55 -> 27 -> 13 -> 6
    return (
        conv_params(11, 3, 96)
        + conv_params(5, 96, 256, g)
        + conv_params(3, 256, 384)
        + conv_params(3, 384, 384, g)
        + conv_params(3, 384, 256, g)
        + dense_params(side * side * 256, 4096)
        + dense_params(4096, 4096)
        + dense_params(4096, num_classes)
    )


@pytest.mark.parametrize(("num_classes", "grouped"), [(1000, False), (1000, True), (37, False)])
def test_parameter_count_at_224_matches_the_architecture(num_classes, grouped):
    net = build_alexnet(num_classes, 224, grouped=grouped)
    expected = paper_parameter_count(num_classes, grouped)
    assert net.count_params() == expected
    if num_classes == 1000:  # the figures usually quoted for the two variants
        assert expected == (60_965_224 if grouped else 62_378_344)
    # no weights hide in the normalisation layer: its mean and variance are constants
    assert sum(int(np.prod(w.shape)) for w in net.trainable_weights) == expected


def feature_sizes(image_size: int) -> list[int]:
    """Side of the feature maps after conv1, pool1, pool2 and pool3 for a square input of ``image_size``."""
    conv1 = (image_size + 2 * 2 - 11) // 4 + 1
    pool1 = (conv1 - 3) // 2 + 1
    pool2 = (pool1 - 3) // 2 + 1
    pool3 = (pool2 - 3) // 2 + 1
    return [conv1, pool1, pool2, pool3]


def test_feature_maps_have_the_paper_sizes_at_224():
    net = build_alexnet(10, 224, dense_units=8)
    sides = {name: net.get_layer(name).output.shape[1] for name in ("conv1", "pool1", "pool2", "pool3")}
    assert sides == {"conv1": 55, "pool1": 27, "pool2": 13, "pool3": 6}
    assert [net.get_layer(n).output.shape[-1] for n in ("conv1", "conv2", "conv3", "conv4", "conv5")] == [
        96,
        256,
        384,
        384,
        256,
    ]
    assert feature_sizes(224) == [55, 27, 13, 6]
    assert net.get_layer("pool1").pool_size == (3, 3) and net.get_layer("pool1").strides == (2, 2)
    assert [net.get_layer(f"dropout{i}").rate for i in (1, 2)] == [0.5, 0.5]


def test_takes_uint8_pixels_and_returns_probabilities():
    net = build_alexnet(5, 64, dense_units=16)
    assert net.input.dtype == tf.uint8
    images = np.random.default_rng(0).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    out = net(images, training=False).numpy()
    assert out.shape == (3, 5)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    # the first layer normalises: a mid-grey image comes out near zero
    normalize = keras.Model(net.input, net.get_layer("normalize").output)
    grey = normalize(np.full((1, 64, 64, 3), 118, np.uint8)).numpy()
    assert np.abs(grey).max() < 0.3


def test_smallest_image_size_builds_and_smaller_is_refused():
    net = build_alexnet(3, MIN_IMAGE_SIZE, dense_units=8)
    assert net.get_layer("pool3").output.shape[1] == 1
    with pytest.raises(AlexnetError, match="image_size"):
        build_alexnet(3, MIN_IMAGE_SIZE - 1)
    with pytest.raises(AlexnetError, match="num_classes"):
        build_alexnet(0, 64)


def test_float16_precision_computes_in_float16_with_float32_weights_softmax_and_loss_scaling():
    net = build_alexnet(4, 64, dense_units=8, policy="mixed_float16")
    assert net.get_layer("conv1").compute_dtype == "float16"
    assert net.get_layer("conv1").kernel.dtype == tf.float32
    assert net.get_layer("fc2").compute_dtype == "float16" and net.get_layer("logits").compute_dtype == "float32"
    assert net.output.dtype == tf.float32
    assert isinstance(alexnet_model.make_optimizer(0.01, loss_scaled=True), keras.mixed_precision.LossScaleOptimizer)
    plain = alexnet_model.make_optimizer(0.01)
    assert isinstance(plain, alexnet_model.DecayedSGD)
    assert not isinstance(plain, keras.mixed_precision.LossScaleOptimizer)
    assert build_alexnet(4, 64, dense_units=8).get_layer("conv1").compute_dtype == "float32"
    with pytest.raises(AlexnetError, match="policy"):
        build_alexnet(4, 64, dense_units=8, policy="float8")


def test_weight_decay_enters_the_momentum_and_spares_biases():
    lr, momentum, decay = 0.1, 0.9, 0.01
    kernel = tf.Variable(np.full((2, 2), 2.0, np.float32))
    bias = tf.Variable(np.full((2,), 2.0, np.float32))
    opt = alexnet_model.DecayedSGD(learning_rate=lr, momentum=momentum, l2_decay=decay)
    zero = [tf.zeros_like(kernel), tf.zeros_like(bias)]
    opt.apply_gradients(zip(zero, [kernel, bias], strict=True))
    v1 = -lr * decay * 2.0
    np.testing.assert_allclose(kernel.numpy(), 2.0 + v1, rtol=1e-6)
    np.testing.assert_allclose(bias.numpy(), 2.0)
    w1 = 2.0 + v1
    opt.apply_gradients(zip(zero, [kernel, bias], strict=True))
    v2 = momentum * v1 - lr * decay * w1  # the paper's rule: the decay term accumulates in v
    np.testing.assert_allclose(kernel.numpy(), w1 + v2, rtol=1e-6)
    assert opt.get_config()["l2_decay"] == decay


@pytest.mark.parametrize("nesterov", [False, True])
def test_at_a_constant_rate_the_steps_are_keras_sgds(nesterov):
    rng = np.random.default_rng(3)
    gradients = [rng.normal(size=(3, 2)).astype(np.float32) for _ in range(5)]
    ours, theirs = (tf.Variable(np.ones((3, 2), np.float32)) for _ in range(2))
    decayed = alexnet_model.DecayedSGD(learning_rate=0.05, momentum=0.9, l2_decay=0.0, nesterov=nesterov)
    plain = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=nesterov)
    for g in gradients:
        decayed.apply_gradients([(tf.constant(g), ours)])
        plain.apply_gradients([(tf.constant(g), theirs)])
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours.numpy(), 1.0)


def test_a_changed_rate_scales_the_whole_step_at_once():
    # the same gradient every step: the momentum sum after n steps is g * (1 + m + ... + m^(n-1))
    momentum, g = 0.9, 1.0
    weight = tf.Variable(np.zeros((2, 2), np.float32))
    opt = alexnet_model.DecayedSGD(learning_rate=0.1, momentum=momentum, l2_decay=0.0)
    gradient = [(tf.constant(np.full((2, 2), g, np.float32)), weight)]

    def step() -> np.ndarray:
        before = weight.numpy().copy()
        opt.apply_gradients(gradient)
        return before - weight.numpy()

    fast = [step() for _ in range(10)][-1]
    opt.learning_rate.assign(0.01)  # a drop by 10, as a step schedule's
    slow = step()
    total = sum(momentum**k for k in range(11)) * g
    np.testing.assert_allclose(slow, 0.01 * total, rtol=1e-5)
    # a tenth of the step the old rate would take now (Keras' own form would move 0.1 * m * (sum of 10) + 0.01 * g:
    # 8.7 times this step, nearly the old speed)
    np.testing.assert_allclose(fast / slow, 10 * sum(momentum**k for k in range(10)) / total, rtol=1e-5)


def test_compiled_model_reports_top1_and_top5():
    net = build_alexnet(6, 64, dense_units=8)
    alexnet_model.compile_alexnet(net, alexnet_model.make_optimizer(0.01), 6)
    images = np.random.default_rng(1).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
    result = net.evaluate(images, np.array([0, 1, 2, 3]), verbose=0, return_dict=True)
    assert set(result) == {"loss", "accuracy", "top5_accuracy"}
    assert result["top5_accuracy"] >= result["accuracy"]


def test_the_training_top5_ranks_tied_classes_by_label_as_validation_does():
    # a network whose outputs are all equal: top-5 holds labels 0..4 alone, as validation and evaluate() rank them
    from alexnet.model.class_counts import ClassCounts

    net = build_alexnet(1000, 64, dense_units=8)
    alexnet_model.compile_alexnet(net, alexnet_model.make_optimizer(0.01), 1000)
    tied = np.full((4, 1000), 1 / 1000, np.float32)
    labels = np.array([3, 500, 999, 4])
    net.compiled_metrics.build(tf.constant(tied), tf.constant(labels))  # as a step's first update builds them
    top5 = {m.name: m for m in net.compiled_metrics.metrics}["top5_accuracy"]
    top5.update_state(labels, tied)
    counts = ClassCounts.empty(1000)
    counts.count(tied, labels, 5)
    assert float(top5.result()) == counts.topk_correct / 4 == 0.5


def test_the_dropout_masks_of_a_training_model_are_functions_of_its_seed_and_step():
    """A resumed run drops the units the run it resumes would have dropped: each mask is a function of the seed,
    the optimizer's step (which checkpoints keep), the layer and the micro-batch, not of the draws before it; the
    layers save as Keras's own Dropout, with the config a model built without it has."""
    from alexnet.train.precision import Precision

    def model(seed: int):
        net, optimizer = alexnet_model.training_model(3, Precision("float32", "asked"), dense_units=64, seed=seed)
        return [net.get_layer(f"dropout{i}") for i in (1, 2)], optimizer

    units = tf.ones([4, 64])
    (first, second), optimizer = model(seed=3)
    mask = first(units, training=True).numpy()
    assert 0 < (mask == 0).mean() < 1
    np.testing.assert_array_equal(first(units, training=True).numpy(), mask)  # drawn again: the same
    (again, _), _ = model(seed=3)
    np.testing.assert_array_equal(again(units, training=True).numpy(), mask)  # another model of the seed: the same
    assert not np.array_equal(second(units, training=True).numpy(), mask)  # the other layer: other units
    with alexnet_model.micro_batch(1):
        assert not np.array_equal(first(units, training=True).numpy(), mask)
    assert not np.array_equal(model(seed=4)[0][0](units, training=True).numpy(), mask)
    optimizer.iterations.assign_add(1)
    assert not np.array_equal(first(units, training=True).numpy(), mask)  # the next step: other units
    np.testing.assert_array_equal(first(units, training=False).numpy(), units.numpy())
    assert first.get_config() == build_alexnet(3, dense_units=64).get_layer("dropout1").get_config()
