"""The tf.data input pipeline: shapes, shuffling, odd and broken files."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from helpers_train import make_tree, write_quirks

tf = pytest.importorskip("tensorflow")

from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.input import pipeline  # noqa: E402
from alexnet.train.settings import specs as training_specs  # noqa: E402

SIZE = 64


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    data = make_tree(root, classes=3, per_class=6, val_per_class=2, seed=3)
    data["quirks"] = write_quirks(root / "quirks")
    return data


def _labels(ds) -> list[int]:
    return [int(v) for _, y in ds for v in y.numpy()]


def test_train_batches_have_the_model_input_shape_and_dtype(tree):
    files = tree["image"]
    ds = pipeline.train_dataset(files, tree["label"], batch_size=4, image_size=SIZE, parallel=2, repeat=False)
    batches = list(ds)
    assert len(batches) == len(files) // 4  # drop_remainder by default
    for images, labels in batches:
        assert images.shape == (4, SIZE, SIZE, 3)
        assert images.dtype == tf.uint8
        assert labels.shape == (4,)
        assert labels.dtype == tf.int32
    # Keras needs the batch dimension known for a fixed-size training step
    assert ds.element_spec[0].shape.as_list() == [4, SIZE, SIZE, 3]


@pytest.mark.parametrize("cache", [False, True])
def test_validation_pads_every_pass_to_whole_batches_with_images_that_count_for_nothing(tree, cache):
    files, labels = tree["image"][:7], list(range(1, 8))
    ds = pipeline.validation_dataset(files, labels, batch_size=4, image_size=SIZE, length=12, parallel=2, cache=cache)
    assert ds.element_spec[0].shape.as_list() == [4, SIZE, SIZE, 3]  # whole batches: every worker steps alike
    batches = list(ds.take(6))  # two passes of 12
    images = tf.concat([b[0] for b in batches], 0).numpy()
    got = [int(v) for b in batches for v in b[1].numpy()]
    weights = [float(v) for b in batches for v in b[2].numpy()]
    assert got == (labels + [0] * 5) * 2, "in order, each pass starting where the last one ended"
    assert weights == ([1.0] * 7 + [0.0] * 5) * 2
    assert images[7:12].max() == 0 and images[:7].max() > 0
    # the centre crop alexnet_evaluate() scores
    exact = next(iter(pipeline.exact_eval_dataset(files, labels, 7, SIZE)))[0].numpy()
    assert (images[:7] == exact).all() and (images[12:19] == exact).all()
    # a worker whose share is empty pads all of it
    empty = list(pipeline.validation_dataset([], [], batch_size=4, image_size=SIZE, length=8).take(2))
    assert [float(w) for b in empty for w in b[2].numpy()] == [0.0] * 8
    with pytest.raises(AlexnetError, match="do not fit"):
        pipeline.validation_dataset(files, labels, batch_size=4, image_size=SIZE, length=4)


def test_synthetic_twin_matches_the_training_batches():
    ds = pipeline.synthetic_dataset(batch_size=6, image_size=SIZE, num_classes=7, steps=5, seed=0)
    batches = list(ds)
    assert len(batches) == 5
    for images, labels in batches:
        assert images.shape == (6, SIZE, SIZE, 3) and images.dtype == tf.uint8
        assert labels.dtype == tf.int32
        assert int(tf.reduce_min(labels)) >= 0 and int(tf.reduce_max(labels)) < 7
    # random pixels, not a constant
    assert float(tf.math.reduce_std(tf.cast(batches[0][0], tf.float32))) > 50


@pytest.mark.parametrize("cache", [False, True])
def test_every_image_once_per_pass_in_a_new_order(tree, cache):
    files = tree["image"]  # 18 images, batches of 3: six batches per pass
    index = list(range(len(files)))
    ds = pipeline.train_dataset(files, index, batch_size=3, image_size=SIZE, parallel=2, cache=cache, seed=5)
    seen = _labels(ds.take(18))
    passes = [seen[i * len(files):(i + 1) * len(files)] for i in range(3)]
    for order in passes:
        assert sorted(order) == index, "each pass must see each image exactly once"
    assert len({tuple(order) for order in passes}) == 3, "the order must change every pass"
    assert passes[0] != index


@pytest.mark.parametrize("cache", [False, True])
def test_a_stream_started_at_an_image_gives_what_the_stream_gives_from_there(tree, cache):
    """The order and the crops are functions of the seed and the image's place in the stream: a run resumed at a
    step takes the images, crops and colours the run would have taken had it not stopped, also inside a pass."""
    files = tree["image"]  # 18 images, batches of 3
    index = list(range(len(files)))

    def batches(start: int, count: int, seed: int = 5) -> list[tuple[np.ndarray, list[int]]]:
        ds = pipeline.train_dataset(files, index, batch_size=3, image_size=SIZE, parallel=2, cache=cache, seed=seed,
                                    start=start, lighting=0.1)
        return [(images.numpy(), labels.numpy().tolist()) for images, labels in ds.take(count)]

    whole = batches(0, 14)
    for start in (9, 18, 27):  # inside the first pass, the second pass's first image, inside the second pass
        later = batches(start, 14 - start // 3)
        assert [labels for _, labels in later] == [labels for _, labels in whole[start // 3:]], start
        assert all((a == b).all() for (a, _), (b, _) in zip(later, whole[start // 3:], strict=True)), start
    assert [labels for _, labels in batches(0, 6, seed=6)] != [labels for _, labels in whole[:6]]
    alone = pipeline.train_dataset(files, index, batch_size=3, image_size=SIZE, seed=5, start=27, repeat=False)
    assert _labels(alone) == [v for _, labels in whole[9:12] for v in labels], "the rest of the pass started in"


def test_an_undecodable_file_costs_itself_alone_and_is_kept_among_the_failures(tree):
    quirks = tree["quirks"]
    good = tree["image"][:6]
    files = [*good, str(quirks["truncated"]), str(quirks["empty"]), str(quirks["png"])]

    def passes(ds) -> None:
        for _ in range(3):  # whatever batches the bad files fall in, only they are missing: 7 images, 3 + 3 + 1
            batches = [y.numpy().tolist() for _, y in ds]
            assert [len(b) for b in batches] == [3, 3, 1]
            assert sorted(v for b in batches for v in b) == [0, 1, 2, 3, 4, 5, 8]

    passes(pipeline.train_dataset(files, list(range(len(files))), batch_size=3, image_size=SIZE, repeat=False,
                                  drop_remainder=False))
    for cache in (False, True):  # their paths kept, also at the passes read from the cache
        failures = pipeline.DecodeFailures()
        passes(pipeline.train_dataset(files, list(range(len(files))), batch_size=3, image_size=SIZE, repeat=False,
                                      drop_remainder=False, cache=cache, failures=failures))
        assert failures.pending() == sorted([str(quirks["truncated"]), str(quirks["empty"])])


def test_options_turn_auto_sharding_and_the_autotuning_model_off_and_parallel_is_checked(tree):
    files, labels = tree["image"], tree["label"]
    for ds in (pipeline.train_dataset(files, labels, batch_size=2, image_size=SIZE),
               pipeline.validation_dataset(files, labels, 2, SIZE, length=len(files)),
               pipeline.exact_eval_dataset(files, labels, 2, SIZE)):
        assert ds.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF
        # with the model on, the end of an iterator fit consumed waited for its thread's next wake-up (up to a minute)
        assert ds.options().autotune.enabled is False
    assert pipeline.num_parallel_calls(None) == tf.data.AUTOTUNE
    assert pipeline.num_parallel_calls(3) == 3
    parallel = training_specs()["parallel"]  # the check, the training settings' declaration
    assert parallel.convert(None, "parallel") is None and parallel.convert(3.0, "parallel") == 3
    for wrong in (0, -1, 2.5, True):
        with pytest.raises(AlexnetError, match="parallel"):
            parallel.convert(wrong, "parallel")


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_seed_gives_the_same_batches_in_the_same_order_every_time(tree):
    # files of different sizes decoded in parallel: unordered, the smaller ones would overtake the larger
    files, labels = tree["image"], tree["label"]

    def batches(seed):
        ds = pipeline.train_dataset(files, labels, batch_size=3, image_size=SIZE, parallel=4, seed=seed,
                                    repeat=False, lighting=0.1)
        return [(images.numpy(), y.numpy()) for images, y in ds]

    first = batches(7)
    assert len(first) == len(files) // 3
    for _ in range(3):
        again = batches(7)
        assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(first, again, strict=True))
    assert pipeline.train_dataset(files, labels, 3, SIZE, seed=7).options().deterministic is True
    assert pipeline.train_dataset(files, labels, 3, SIZE).options().deterministic is False
    other = batches(8)
    assert any((a[0] != b[0]).any() for a, b in zip(first, other, strict=True))


def _device_side_autotune(iterator) -> bool:
    """Is tf.data's autotuning on in the dataset that ``iterator`` (of a distributed dataset on one CPU device)
    reads its device's batches from? (Unset, it is.)"""
    multi_device = iterator._iterators[0]._iterator  # TensorFlow's multi-device iterator of this worker
    return multi_device._device_iterators[0]._dataset.options().autotune.enabled is not False


def test_datasets_a_strategy_makes_per_device_run_untuned_only_inside_the_context(tree):
    files, labels = tree["image"], tree["label"]
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    distributed = strategy.distribute_datasets_from_function(
        lambda _: pipeline.train_dataset(files, labels, batch_size=2, image_size=SIZE))
    assert _device_side_autotune(iter(distributed)) is True  # TensorFlow's default: the model's thread runs there
    with pipeline.untuned_device_datasets():
        with pipeline.untuned_device_datasets():  # nested, as fit inside fit would: the outer one restores
            inner = iter(distributed)
        outer = iter(distributed)
        images, labels_ = next(inner)
    assert _device_side_autotune(inner) is False and _device_side_autotune(outer) is False
    assert images.shape == (2, SIZE, SIZE, 3) and labels_.shape == (2,)  # the batches are the same as without it
    assert _device_side_autotune(iter(distributed)) is True  # TensorFlow's own function is back


def test_labels_must_match_files(tree):
    with pytest.raises(AlexnetError, match="labels"):
        pipeline.train_dataset(tree["image"], tree["label"][:-1], batch_size=2)




def _training_start(files: list[str], labels: list[int]) -> None:
    """A training run's start: the check of its images, its training and validation batches."""
    from alexnet.input import scan

    assert scan.scan_images(files, full=True) == []
    assert next(iter(pipeline.train_dataset(files, labels, 2, 32, lighting=0.1, seed=1)))[0].shape == (2, 32, 32, 3)
    assert next(iter(pipeline.validation_dataset(files, labels, 2, 32, length=4)))[0].shape == (2, 32, 32, 3)


def _evaluation_and_export(files: list[str], labels: list[int]) -> None:
    """An evaluation's batches, of the centre crop and of ten crops, and an export's decoding."""
    from alexnet.model.serving import decode_images

    assert next(iter(pipeline.exact_eval_dataset(files, labels, 2, 32, crops=1)))[0].shape == (2, 32, 32, 3)
    assert next(iter(pipeline.exact_eval_dataset(files, labels, 2, 32, crops=10)))[0].shape == (2, 10, 32, 32, 3)
    _, ok, _ = decode_images(tf.constant([Path(f).read_bytes() for f in files[:2]]), 32)
    assert ok.numpy().tolist() == [True, True]


@pytest.mark.parametrize("built", [_training_start, _evaluation_and_export], ids=["training", "evaluation-export"])
def test_the_pipelines_functions_are_traced_as_written_without_autograph(tree, monkeypatch, built):
    """Every function the input pipeline maps (the check of the images before training, training, validation,
    evaluation of one and ten crops, an export's decoding) is traced without autograph's conversion, which cost every
    run's start about 2 s: autograph is never asked to convert a function of the package while each is built and
    read."""
    from tensorflow.python.autograph.impl import api

    asked: list[str] = []
    convert = api.converted_call

    def converted_call(f, args, kwargs, caller_fn_scope=None, options=None):
        asked.append(f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', f)}")
        return convert(f, args, kwargs, caller_fn_scope=caller_fn_scope, options=options)

    monkeypatch.setattr(api, "converted_call", converted_call)
    built(tree["image"][:4], tree["label"][:4])
    assert [name for name in asked if name.startswith("alexnet.")] == []


def test_an_evaluation_and_a_scan_trace_their_decoding_once_per_process(tree, monkeypatch):
    """tf.data traces a mapped function again for every dataset: the decoding of every format an evaluation and the
    check of the images map are traced once, and a second evaluation or scan (another model's, the next
    checkpoint's) only calls them, with the same results."""
    from alexnet.input import decode, scan

    traced: list[str] = []
    for module, name in ((decode, "decode_for_eval"), (decode, "decode_ten_crops"), (scan, "_check_image")):
        original = getattr(module, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            traced.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    monkeypatch.setattr(pipeline, "decode_for_eval", decode.decode_for_eval)
    monkeypatch.setattr(pipeline, "decode_ten_crops", decode.decode_ten_crops)
    monkeypatch.setattr(pipeline, "_eval_decoder", functools.cache(pipeline._eval_decoder.__wrapped__))
    monkeypatch.setattr(scan, "_checker", functools.cache(scan._checker.__wrapped__))
    files, labels = tree["image"][:3], tree["label"][:3]

    def evaluated(crops: int) -> list[np.ndarray]:
        return [images.numpy() for images, _ in pipeline.exact_eval_dataset(files, labels, 2, 32, crops=crops)]

    first = [evaluated(1), evaluated(10), scan.scan_images(files)]
    assert sorted(traced) == ["_check_image", "decode_for_eval", "decode_ten_crops"]
    second = [evaluated(1), evaluated(10), scan.scan_images(files)]
    assert sorted(traced) == ["_check_image", "decode_for_eval", "decode_ten_crops"], "traced again"
    for one, two in zip(first[:2], second[:2], strict=True):
        for a, b in zip(one, two, strict=True):
            np.testing.assert_array_equal(a, b)
    assert first[2] == second[2] == []
    evaluated(1)
    assert len(pipeline.exact_eval_dataset(files, labels, 2, 48, crops=1).element_spec[0].shape) == 4
    next(iter(pipeline.exact_eval_dataset(files, labels, 2, 48, crops=1)))
    assert traced.count("decode_for_eval") == 2, "another size is traced for itself"
