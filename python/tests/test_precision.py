"""Precision: the argument, the choice the hardware makes (CPU flags and GPUs faked), and training in each one."""

from __future__ import annotations

import gc
import json
import logging
import time

import pytest
from helpers_train import make_tree

from alexnet.errors import AlexnetError
from alexnet.train import measure
from alexnet.train import precision as precisions
from alexnet.train.precision import Hardware, choose_precision
from alexnet.train.settings_check import check_settings

CPU = "alexnet.train.precision"

# ---------------------------------------------------------------------------------------------------------
# the argument, without TensorFlow


def check_precision(precision, mixed_precision=None):
    """The precision the settings' one check makes of these two arguments."""
    return check_settings({"precision": precision, "mixed_precision": mixed_precision}).precision


def test_precision_names_aliases_and_the_older_mixed_precision_flag():
    assert check_precision(None) is None  # auto
    for name in ("float32", "bfloat16", "float16"):
        assert check_precision(name) == name
        assert check_precision([name]) == name  # R: a character vector of length one
    for alias, name in {"FP32": "float32", " bf16 ": "bfloat16", "half": "float16", "fp16": "float16",
                        "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}.items():
        assert check_precision(alias) == name
    assert check_precision(None, True) == "float16"
    assert check_precision(None, False) == "float32"
    assert check_precision("float16", True) == "float16"
    assert check_precision("float32", False) == "float32"
    assert check_settings({"mixed_precision": True}).mixed_precision is None, "mapped onto precision"


@pytest.mark.parametrize("precision", ["float64", "int8", "", 16, True])
def test_an_unknown_precision_is_refused_naming_the_choices(precision):
    with pytest.raises(AlexnetError,
                       match=r"`precision` must be one of 'float32', 'bfloat16', 'float16' or None \(auto\), not "):
        check_precision(precision)


def test_precision_and_mixed_precision_that_disagree_are_refused():
    with pytest.raises(AlexnetError, match=r"`mixed_precision` = True means precision 'float16'.*'bfloat16'"):
        check_precision("bfloat16", True)
    with pytest.raises(AlexnetError, match="`mixed_precision` = False means precision 'float32'"):
        check_precision("float16", False)


# ---------------------------------------------------------------------------------------------------------
# the choice, on faked hardware


@pytest.mark.parametrize(
    ("device", "candidates"),
    [(Hardware((), frozenset({"avx512_bf16"})), ("float32", "bfloat16")),
     (Hardware((), frozenset({"amx_bf16", "amx_fp16"})), ("float32", "bfloat16", "float16")),
     # avx512_fp16 without AMX for float16 trains far slower in float16: not measured
     (Hardware((), frozenset({"amx_bf16", "avx512_fp16"})), ("float32", "bfloat16")),
     (Hardware((), frozenset({"avx2", "avx512f"})), ("float32",)), (Hardware(), ("float32",)),
     (Hardware(((8, 0),)), ("float32", "bfloat16", "float16")),
     (Hardware(((9, 0), (7, 5))), ("float32", "float16"))],
)
def test_the_formats_measured_are_those_the_hardware_computes(device, candidates):
    assert precisions.candidates(device) == candidates


@pytest.fixture
def remembered(tmp_path, monkeypatch):
    """Measurements remembered in a file of this test's own."""
    path = tmp_path / "cache" / "precision.json"
    monkeypatch.setenv(measure.CACHE_ENV, str(path))
    return path


class FakeTimer:
    """Images per second of each format, as given; counts the measurements."""

    def __init__(self, **rates: float):
        self.rates, self.calls = rates, []

    def __call__(self, name: str) -> float:
        self.calls.append(name)
        return self.rates[name]


BF16_CPU = Hardware((), frozenset({"avx2", "avx512_bf16"}))
SHAPE = {"classes": 10, "batch": 32, "image_size": 224, "dense_units": 4096, "grouped": False, "jit": False}


@pytest.mark.parametrize(("rates", "chosen", "why"), [
    ({"float32": 38.0, "bfloat16": 22.3}, "float32", ""),  # an Intel Xeon's flags, slower in bfloat16
    ({"float32": 28.0, "bfloat16": 48.0}, "bfloat16", ""),  # an AMD EPYC's, faster
    ({"float32": 30.0, "bfloat16": 31.5}, "float32", "; bfloat16 not 10% faster, float32 kept"),  # no clear margin
])
def test_auto_takes_the_format_measured_faster_by_a_clear_margin(remembered, rates, chosen, why):
    timer = FakeTimer(**rates)
    precision = measure.resolve_precision(None, BF16_CPU, SHAPE, timer)
    assert precision.name == chosen and precision.rates == rates
    assert sorted(timer.calls) == ["bfloat16", "float32"]
    shown = ", ".join(f"{name} {rate:.1f}" for name, rate in rates.items())
    assert precision.reason == f"measured: {shown} images/s{why}"


@pytest.mark.parametrize("text", ["[1]", "5", '"x"', '{"k": "x"}', '{"k": {"float32": "fast"}}'])
def test_a_remembered_file_of_another_shape_is_measured_again_not_a_crash(remembered, text, caplog):
    """A file of remembered rates that is JSON but not an object of rates (written by another hand) is measured
    again, and rewritten; it raised a TypeError before any training."""
    remembered.parent.mkdir(parents=True)
    remembered.write_text(text)
    timer = FakeTimer(float32=28.0, bfloat16=48.0)
    assert measure.resolve_precision(None, BF16_CPU, SHAPE, timer).name == "bfloat16"
    assert sorted(timer.calls) == ["bfloat16", "float32"]
    assert all(rates == {"float32": 28.0, "bfloat16": 48.0} for rates in json.loads(remembered.read_text()).values())


def test_a_measurement_is_remembered_and_reused(remembered):
    first = FakeTimer(float32=28.0, bfloat16=48.0)
    assert measure.resolve_precision(None, BF16_CPU, SHAPE, first).name == "bfloat16"
    assert remembered.exists() and len(first.calls) == 2
    again = FakeTimer(float32=1.0, bfloat16=1.0)
    precision = measure.resolve_precision(None, BF16_CPU, SHAPE, again)
    assert again.calls == [], "read from the file, not measured again"
    assert precision.name == "bfloat16" and precision.reason.startswith("measured earlier: float32 28.0, bfloat16 48.0")
    other = FakeTimer(float32=40.0, bfloat16=20.0)
    assert measure.resolve_precision(None, BF16_CPU, {**SHAPE, "image_size": 128}, other).name == "float32"
    assert len(other.calls) == 2, "another model shape is measured on its own"
    kept = json.loads(remembered.read_text())
    assert len(kept) == 2 and all("tensorflow" in key for key in kept)


def test_a_memory_that_cannot_be_written_is_said_and_leaves_nothing_beside_it(remembered, caplog):
    remembered.mkdir(parents=True)  # a folder where the file should be
    with caplog.at_level("WARNING", logger="alexnet"):
        assert measure.resolve_precision(None, BF16_CPU, SHAPE, FakeTimer(float32=28.0, bfloat16=48.0)).name == (
            "bfloat16")
    assert any("Cannot remember the precision measurement" in r.getMessage() for r in caplog.records
               if r.name == "alexnet.train.measure")
    assert sorted(p.name for p in remembered.parent.iterdir()) == ["precision.json"], "no temporary file left"


def test_the_memory_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv(measure.CACHE_ENV, "off")
    assert measure.cache_file() is None
    for _ in range(2):
        timer = FakeTimer(float32=28.0, bfloat16=48.0)
        assert measure.resolve_precision(None, BF16_CPU, SHAPE, timer).name == "bfloat16"
        assert len(timer.calls) == 2
    monkeypatch.delenv(measure.CACHE_ENV)
    assert measure.cache_file().name == "precision.json"


def test_an_explicit_precision_or_float32_only_hardware_skips_the_measurement(remembered):
    timer = FakeTimer(float32=28.0, bfloat16=48.0)
    assert measure.resolve_precision("float32", BF16_CPU, SHAPE, timer).reason.startswith("asked for")
    assert measure.resolve_precision("bfloat16", BF16_CPU, SHAPE, timer).name == "bfloat16"
    plain = measure.resolve_precision(None, Hardware((), frozenset({"avx2"})), SHAPE, timer)
    assert plain.name == "float32" and plain.reason == "auto: CPU without bfloat16 instructions computes in float32"
    assert timer.calls == [] and not remembered.exists()


def test_a_child_that_fails_leaves_the_formats_timed_in_this_process_with_a_warning(monkeypatch, caplog):
    from alexnet import child

    def failing(*args, **kwargs):
        raise child.ChildError("The precision measurement", "ResourceExhaustedError: OOM on GPU:0", [])

    here: list[tuple[list[str], dict]] = []
    monkeypatch.setattr(child, "run_child", failing)
    monkeypatch.setattr(measure, "rates_here", lambda names, model: here.append((list(names), model))
                        or {name: 10.0 + len(name) for name in names})
    timer = measure.model_timer(2, 4, 64, dense_units=16, grouped=False, jit_compile=False,
                                formats=("float32", "bfloat16"))
    with caplog.at_level(logging.WARNING, logger=measure.__name__):
        assert (timer("float32"), timer("bfloat16")) == (17.0, 18.0)
    assert [names for names, _ in here] == [["float32", "bfloat16"]]
    assert here[0][1] == {"num_classes": 2, "batch_size": 4, "image_size": 64, "dense_units": 16, "grouped": False,
                          "jit_compile": False}
    assert "OOM on GPU:0" in caplog.text and "in this process" in caplog.text and "`precision`" in caplog.text


def test_workers_that_chose_differently_all_take_float32(caplog):
    """The chief says which worker chose which format, at what rates, and what trains every worker in one format
    without measuring; the other workers do not warn of it again."""
    fast = precisions.Precision("bfloat16", "measured: float32 28.0, bfloat16 48.0 images/s",
                                rates={"float32": 28.0, "bfloat16": 48.0})
    assert measure.agree(fast, lambda values: [values, values]) is fast
    slow = [precisions.PRECISIONS.index("float32"), 1, 310, 290, -1]  # worker 1: float32 31.0, bfloat16 29.0
    with caplog.at_level(logging.INFO, logger=measure.__name__):
        mixed = measure.agree(fast, lambda values: [values, values, slow])  # worker 0 of two replicas
    assert mixed.name == "float32" and "workers differ (bfloat16, float32)" in mixed.reason
    (said,) = [record for record in caplog.records if "chose different precisions" in record.getMessage()]
    assert said.levelno == logging.WARNING and said.getMessage() == (
        "The workers chose different precisions: worker 0 bfloat16 (float32 28.0, bfloat16 48.0 images/s); worker 1 "
        "float32 (float32 31.0, bfloat16 29.0 images/s). All of them train in float32; give `precision` = "
        "'bfloat16' or 'float32' to train every worker in one format without measuring.")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=measure.__name__):
        measure.agree(fast, lambda values: [values, slow], worker=0, chief=False)
    assert [record.levelno for record in caplog.records] == [logging.INFO]


def test_bfloat16_on_a_gpu_older_than_ampere_is_refused():
    with pytest.raises(AlexnetError, match=r"compute capability 8\.0 or more.*7\.5.*'float16' or 'float32'"):
        choose_precision("bfloat16", Hardware(((7, 5),)))
    assert choose_precision("float16", Hardware(((7, 5),))).name == "float16"
    assert choose_precision("bfloat16", Hardware(((8, 0),))).name == "bfloat16"


def test_a_precision_the_cpu_only_emulates_trains_with_a_warning(caplog):
    plain = Hardware((), frozenset({"avx2"}))
    with caplog.at_level(logging.WARNING, logger=CPU):
        chosen = choose_precision("bfloat16", plain)
    assert chosen.name == "bfloat16" and chosen.emulated and "emulated" in chosen.reason
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "slower" in caplog.text and "bfloat16" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=CPU):
        assert choose_precision("float16", plain).emulated
        assert not choose_precision("bfloat16", Hardware((), frozenset({"avx512_bf16"}))).emulated
        assert not choose_precision("float32", plain).emulated
    assert len(caplog.records) == 1 and "float16" in caplog.text


def test_hardware_reads_the_cpu_flags_of_proc_cpuinfo(tmp_path, monkeypatch):
    from alexnet import machine

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n\n"
                       "processor\t: 1\nflags\t\t: fpu sse2\n")
    real_open = open

    def fake_open(path, *args, **kwargs):
        return real_open(cpuinfo if str(path) == "/proc/cpuinfo" else path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert machine.cpu_flags() == frozenset({"fpu", "sse2", "avx2", "avx512f", "avx512_bf16"})
    assert precisions.hardware(gpu=False) == Hardware((), machine.cpu_flags())
    assert precisions.candidates(precisions.hardware(gpu=False)) == ("float32", "bfloat16")
    cpuinfo.unlink()
    assert machine.cpu_flags() == frozenset()


# ---------------------------------------------------------------------------------------------------------
# training in each precision

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from alexnet.train.api import alexnet_train  # noqa: E402

TINY = {"image_size": 64, "dense_units": 32, "seed": 1, "verbose": 0, "validation": False, "lr_drop_epochs": []}


@pytest.fixture(scope="module")
def two_colours(tmp_path_factory) -> dict:
    """Two classes of 12 images, 64 to 96 pixels: a colour each."""
    return make_tree(tmp_path_factory.mktemp("colours"), classes=2, per_class=12, val_per_class=0, seed=0,
                     min_side=64, max_side=96)


class _Inspect(keras.callbacks.Callback):
    """What the model computes in and which optimizer it has, seen from inside the run."""

    def on_train_begin(self, logs=None):
        self.compute = {layer.name: layer.compute_dtype for layer in self.model.layers}
        self.variables = {v.dtype.name for v in self.model.trainable_variables}
        self.optimizer = self.model.optimizer


def _fake_cpu(monkeypatch, flags: set[str]) -> None:
    monkeypatch.setattr(precisions, "cpu_flags", lambda: frozenset(flags))


def test_auto_on_a_faked_bfloat16_cpu_trains_in_the_format_measured_faster(two_colours, monkeypatch, remembered):
    _fake_cpu(monkeypatch, {"avx2", "avx512_bf16"})
    measured: list[tuple[str, int]] = []

    def fake_timer(num_classes, batch_size, image_size, **kwargs):
        return lambda name: measured.append((name, image_size)) or {"float32": 20.0, "bfloat16": 35.0}[name]

    monkeypatch.setattr(measure, "model_timer", fake_timer)
    inspect = _Inspect()
    history = alexnet_train(8, 1, two_colours, precision=None, steps_per_epoch=2, callbacks=[inspect], **TINY)
    params = history["params"]
    assert sorted(measured) == [("bfloat16", 64), ("float32", 64)], "the model about to train, at its size"
    assert params["precision"] == "bfloat16" and params["mixed_precision"] is True
    assert params["precision_reason"] == "measured: float32 20.0, bfloat16 35.0 images/s"
    assert params["precision_rates"] == {"float32": 20.0, "bfloat16": 35.0}
    assert inspect.compute["conv1"] == inspect.compute["fc1"] == "bfloat16"
    assert inspect.compute["pool_to_6x6"] == "float32", "the pooling averages in float32, fc1 casts back"
    assert inspect.compute["logits"] == inspect.compute["probabilities"] == "float32", "the last layer and softmax"
    assert inspect.variables == {"float32"}, "the weights stay in float32"
    assert not isinstance(inspect.optimizer, keras.mixed_precision.LossScaleOptimizer)


def _allocated() -> int:
    """The bytes TensorFlow's allocator of the machine's memory holds in this process: its BFC allocator, which
    the package asks for (conftest imports it before TensorFlow), says."""
    gc.collect()
    return int(tf.config.experimental.get_memory_info("CPU:0")["current"])


@pytest.mark.long  # make test-long (CI)
def test_the_formats_are_timed_in_one_child_and_this_process_keeps_nothing_of_them(remembered, monkeypatch):
    from alexnet import child

    _fake_cpu(monkeypatch, {"avx2", "avx512_bf16"})
    started: list[tuple[list[str], dict]] = []
    real_run_child = child.run_child

    def counted(function, *args, **kwargs):
        started.append(args)
        return real_run_child(function, *args, **kwargs)

    monkeypatch.setattr(child, "run_child", counted)
    tf.constant(1.0) + 1.0  # TensorFlow started before the count
    before = _allocated()
    shape = {"num_classes": 2, "batch_size": 4, "image_size": 64, "dense_units": 16, "grouped": False,
             "jit_compile": False}
    precision = measure.precision_for(None, gpu=False, **shape)
    # timed in this process, the tiny model's traced steps held 78 MB here for good
    assert _allocated() == before, "no memory of the measurement is left in this process"
    assert [names for names, _ in started] == [["float32", "bfloat16"]], "one child times every format"
    rates = precision.rates
    assert set(rates) == {"float32", "bfloat16"} and all(rate > 0 for rate in rates.values()), rates
    assert precision.name == measure.pick(rates)
    fastest = max(rates, key=lambda name: rates[name])
    kept = "" if precision.name == fastest else f"; {fastest} not 10% faster, float32 kept"  # timing decides
    assert precision.reason == f"measured: {measure.describe_rates(rates)}{kept}"
    assert list(json.loads(remembered.read_text()).values()) == [{k: round(v, 2) for k, v in rates.items()}]
    again = measure.precision_for(None, gpu=False, **shape)
    assert len(started) == 1 and again.name == precision.name and again.reason.startswith("measured earlier: ")


@pytest.mark.parametrize("precision", ["float32", "bfloat16",
                                       pytest.param("float16", marks=pytest.mark.long)])  # float16: make test-long
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_each_precision_trains_and_the_history_says_which(two_colours, monkeypatch, caplog, precision):
    _fake_cpu(monkeypatch, {"avx2"})  # the same on every machine: bfloat16 and float16 are emulated
    inspect = _Inspect()
    with caplog.at_level(logging.WARNING, logger=CPU):
        # 4 epochs at 0.005: the loss falls by 0.16-0.20 in each format (at 0.01 it falls faster, then bounces)
        history = alexnet_train(8, 4, two_colours, precision=precision, learning_rate=0.005, lr_scaling="none",
                                callbacks=[inspect], **TINY)
    params, loss = history["params"], history["metrics"]["loss"]
    assert loss[-1] < loss[0] - 0.1, loss
    assert params["precision"] == precision and params["mixed_precision"] == (precision != "float32")
    emulated = precision != "float32"
    half = "float16" if precision == "float16" else "bfloat16"  # float32: described by its bfloat16 instructions
    assert params["precision_reason"] == (f"asked for, on a CPU without {half} instructions"
                                          + (" (emulated)" if emulated else ""))
    assert ("will be slower" in caplog.text) == emulated
    assert inspect.compute["conv1"] == precision and inspect.variables == {"float32"}
    scaled = isinstance(inspect.optimizer, keras.mixed_precision.LossScaleOptimizer)
    assert scaled == (precision == "float16"), "only float16 scales the loss"


def test_the_older_mixed_precision_flag_still_means_float16(two_colours):
    with pytest.raises(AlexnetError, match="mixed_precision"):
        alexnet_train(8, 1, two_colours, mixed_precision=True, precision="bfloat16", **TINY)



def test_a_format_far_slower_than_the_first_stops_at_its_time_budget():
    # a step that takes 1 s measured with a budget of 2 s: the warm-up and one timed step, not the 3 asked for
    # (the warm-up also traces the step: up to 1 s of that, on a busy machine too, leaves the timed step inside)
    tf = pytest.importorskip("tensorflow")
    calls = []
    pause = 1.0

    def slow() -> float:
        calls.append(1)
        time.sleep(pause)
        return 1.0

    class Slow:
        def train_step(self, batch):
            return {"loss": tf.py_function(slow, [], tf.float32)}

    batch = (tf.zeros([4, 8, 8, 3]), tf.zeros([4]))
    began = time.perf_counter()
    rate = measure.step_rate(Slow(), batch, steps=3, seconds=0.0, budget=2 * pause)
    assert time.perf_counter() - began < 5 * pause and len(calls) == 2
    assert rate == pytest.approx(4 / pause, rel=0.3)
    # a warm-up alone over the budget: its own rate (tracing included), too low rather than too high
    calls.clear()
    assert 4 / (pause + 1.0) < measure.step_rate(Slow(), batch, steps=3, seconds=0.0, budget=0.1) <= 4 / pause
    assert len(calls) == 1
