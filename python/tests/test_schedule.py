"""The schedule module on its own: image sizes per epoch and learning rates per step as pure functions (no
TensorFlow), and the settings that build them."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from helpers_cli import help_as_said

from alexnet.errors import AlexnetError
from alexnet.train.schedule import (
    RateSchedule,
    SizeSchedule,
    course,
    describe,
    per_epoch,
    plateau_drops,
    progressive_sizes,
    rate_schedule,
    split_epochs,
)
from alexnet.train.settings_check import check_settings


def test_the_module_imports_no_tensorflow():
    code = "import sys, alexnet.train.schedule, alexnet.train.settings; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_settings_help_says_the_schedule_s_and_the_batch_bound_s_numbers_as_the_code_has_them():
    # today's wording, from the constants
    from alexnet.train.settings import specs

    helps = {name: spec.help for name, spec in specs().items()}
    assert "global batch of 128 (the paper's 0.01)" in helps["learning_rate"]
    assert "(unset: 5, at most half the epochs, when the rate grows more than twice, else 0)" in helps["warmup_epochs"]
    assert "\"step\" divided by 10 at `lr_drop_epochs`, \"plateau\" divided by 10 when" in helps["lr_schedule"]
    assert "(unset: 1024 on ImageNet's 1,281,167 training images" in helps["largest_global_batch"]
    # other numbers in the code, other numbers in the help: the declarations read after the constants changed
    code = ("import alexnet.train.schedule as s, alexnet.train.batch_bound as b\n"
            "s.REFERENCE_BATCH, s.DEFAULT_WARMUP_EPOCHS, s.WARMUP_ABOVE, s.DROP_FACTOR = 256, 3, 4.0, 0.5\n"
            "s.MAX_PLATEAU_DROPS = 5\n"
            "b.LARGEST_GLOBAL_BATCH, b.IMAGENET_TRAIN_IMAGES = 2048, 1_000_000\n"
            "from alexnet.train.settings import specs\n"
            "for name in ('learning_rate', 'lr_scaling', 'lr_schedule', 'warmup_epochs', 'lr_drop_epochs', "
            "'patience', 'largest_global_batch'):\n    print(specs()[name].help)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    rate, scaling, schedule, warmup, drops, patience, largest = out.splitlines()
    assert "global batch of 256 (the paper's 0.01)" in rate and "by global batch / 256 (" in scaling
    assert "\"step\" divided by 2 at" in schedule and "\"plateau\" divided by 2 when" in schedule
    assert "(unset: 3, at most half the epochs, when the rate grows more than 4 times, else 0)" in warmup
    assert "the rate is divided by 2 (from 1" in drops
    assert patience.endswith("before the rate is divided by 2, 5 times at most (the paper's)")
    assert "(unset: 2048 on ImageNet's 1,000,000 training images" in largest
    assert "beyond 2048, or beyond this bound" in largest


def test_epochs_split_evenly_among_sizes_the_later_ones_taking_what_is_left():
    assert split_epochs(1, 90) == (90,)
    assert split_epochs(2, 2) == (1, 1)
    assert split_epochs(3, 5) == (1, 2, 2)
    assert split_epochs(3, 7) == (2, 2, 3)


def test_a_size_schedule_gives_each_epochs_size_and_its_runs_of_one_size():
    sizes = SizeSchedule((64, 80, 96), (1, 2, 2))
    assert sizes.final == 96
    assert [sizes.at(e) for e in range(6)] == [64, 80, 80, 96, 96, 96], "past its end: the last size"
    assert sizes.segments(0, 5) == [(0, 1, 64), (1, 3, 80), (3, 5, 96)]
    assert sizes.segments(2, 5) == [(2, 3, 80), (3, 5, 96)], "a resumed run continues the schedule"
    assert sizes.segments(5, 5) == []


def test_settings_build_the_size_schedule_as_whole_numbers():
    s = check_settings({"image_size": [64.0, 80.0, 96.0], "epochs": 5})  # R sends doubles
    assert s.image_size == (64, 80, 96) and all(type(v) is int for v in s.image_size)
    assert s.sizes == SizeSchedule((64, 80, 96), (1, 2, 2))
    assert check_settings({"image_size": [64, 96], "epochs": 4, "image_size_epochs": [3, 1]}).sizes.epochs == (3, 1)
    assert check_settings({}).sizes == SizeSchedule((224,), (2,))


def test_progressive_sizes_end_at_the_final_size_in_multiples_of_8():
    assert progressive_sizes(224, 10) == (112, 168, 224)
    assert progressive_sizes(176, 8) == (88, 128, 176)
    assert progressive_sizes(224, 2) == (168, 224), "at most one size per epoch, the last ones kept"
    assert progressive_sizes(96, 6) == (64, 72, 96), "never below AlexNet's smallest input"
    assert progressive_sizes(64, 5) == (64,)


def test_a_global_batch_of_512_warms_up_over_5_epochs_to_4_times_the_rate_then_drops():
    steps = 10
    rates = rate_schedule(0.01, "linear", None, (30, 60, 80), epochs=90, global_batch=512, steps_per_epoch=steps,
                          kind="step")
    assert (rates.base, rates.factor, rates.peak, rates.start, rates.warmup_epochs) == (
        0.01, 4.0, pytest.approx(0.04), 0.01, 5)
    warmup = [rates.at(step) for step in range(5 * steps)]
    increment = (0.04 - 0.01) / (5 * steps)
    assert warmup[0] == pytest.approx(0.01 + increment), "from the batch of 128's rate, one step up"
    assert rates.at(24) == pytest.approx(0.025), "half-way: half-way up"
    np.testing.assert_allclose(np.diff(warmup), increment, rtol=1e-9)  # linear
    assert rates.at(5 * steps - 1) == pytest.approx(0.04), "the last warm-up step is at the peak"
    for step in (5 * steps, 17 * steps, 30 * steps - 1):
        assert rates.at(step) == pytest.approx(0.04)
    assert rates.at(30 * steps) == pytest.approx(0.004)
    assert rates.at(60 * steps - 1) == pytest.approx(0.004) and rates.at(60 * steps) == pytest.approx(0.0004)
    assert rates.at(80 * steps) == pytest.approx(0.00004) and rates.at(90 * steps - 1) == pytest.approx(0.00004)
    assert rates.of_epoch(29) == pytest.approx(0.04) and rates.of_epoch(30) == pytest.approx(0.004)


def test_a_rate_that_grows_at_most_twice_needs_no_warm_up_and_none_keeps_it():
    rates = rate_schedule(0.01, "linear", None, (8,), epochs=10, global_batch=256, steps_per_epoch=4, kind="step")
    assert (rates.factor, rates.peak, rates.warmup_epochs) == (2.0, pytest.approx(0.02), 0)
    assert [rates.at(step) for step in (0, 1, 31)] == [pytest.approx(0.02)] * 3 and rates.at(32) == pytest.approx(0.002)
    fixed = [rate_schedule(0.01, "none", None, (8,), epochs=10, global_batch=batch, steps_per_epoch=4, kind="step")
             for batch in (512, 8)]
    assert fixed[0] == fixed[1] and (fixed[0].peak, fixed[0].warmup_epochs) == (0.01, 0)
    # a short run warms up over half its epochs at most, so that its rate comes down too; an explicit 0 means none
    for epochs, warmup in ((1, 0), (2, 1), (3, 1), (9, 4), (10, 5), (90, 5)):
        short = rate_schedule(0.01, "linear", None, (), epochs=epochs, global_batch=512, steps_per_epoch=4,
                              kind="linear")
        assert short.warmup_epochs == warmup, epochs
        assert short.at(epochs * 4 - 1) == 0 and max(short.at(s) for s in range(epochs * 4)) == pytest.approx(0.04)
    assert rate_schedule(0.01, "linear", 0, (), epochs=10, global_batch=512, steps_per_epoch=1,
                         kind="linear").warmup_epochs == 0


def test_a_warm_up_never_starts_above_the_rate_it_reaches():
    # a global batch below 128 scales the rate down: an explicit warm-up must not start at the larger rate
    rates = rate_schedule(0.01, "linear", 2, (), epochs=4, global_batch=32, steps_per_epoch=5, kind="step")
    values = [rates.at(step) for step in range(20)]
    assert max(values) == pytest.approx(0.0025) and values[-1] == pytest.approx(0.0025)


def test_a_drop_at_epoch_0_is_no_drop_and_the_setting_refuses_it():
    assert RateSchedule(0.01, 1.0, 0, (0, 2), 3, 4, "step").at(0) == pytest.approx(0.01)
    from alexnet.train.settings_check import check_settings

    with pytest.raises(AlexnetError, match=r"`lr_drop_epochs` must be whole numbers >= 1, not 0 in \[0, 2\]"):
        check_settings({"lr_schedule": "step", "lr_drop_epochs": [0, 2]})


def test_the_history_schedule_and_its_line():
    sizes, rates = SizeSchedule((64, 96), (1, 2)), RateSchedule(0.01, 1.0, 0, (2,), 3, 3, "step")
    schedule = per_epoch(sizes, rates, 3)
    assert schedule == {"image_size": [64, 96, 96], "learning_rate": [pytest.approx(0.01)] * 2 + [pytest.approx(0.001)]}
    assert describe(schedule, "float32", "auto: CPU") == (
        "image size 64 -> 96, learning rate 0.01 -> 0.001, precision float32 (auto: CPU)")
    assert course([0.0025, 0.005, 0.0075, 0.01, 0.001]) == "0.0025 -> 0.01 -> 0.001", "first, peak and last"
    assert describe({}) == ""
    # one epoch of the linear schedule ends at 0: the line says the rate it trained at too
    one = RateSchedule(0.01, 0.5, 0, (), 4, 1, "linear")
    assert describe(per_epoch(SizeSchedule((64,), (1,)), one, 1), peak=one.peak) == (
        "image size 64, learning rate 0 at the epoch's end (peak 0.005)")
    assert describe({"learning_rate": [0.005]}, peak=0.005) == "learning rate 0.005", "the peak is the one rate"
    assert describe(schedule, peak=rates.peak) == "image size 64 -> 96, learning rate 0.01 -> 0.001", (
        "the peak is among the rates shown")


def test_the_schedule_line_says_a_peak_inside_an_epoch():
    # the linear schedule without warm-up starts at its peak, inside the first epoch: no epoch's end is at it
    # (the training article's runs of 4 and 3 epochs of 15 steps, a global batch of 16)
    for epochs, said in [(4, "0.000953 -> 0"), (3, "0.000852 -> 0.000426 -> 0")]:
        rates = rate_schedule(0.01, "linear", None, (), epochs=epochs, global_batch=16, steps_per_epoch=15,
                              kind="linear")
        assert describe(per_epoch(SizeSchedule((96,), (epochs,)), rates, epochs), peak=rates.peak) == (
            f"image size 96, learning rate {said} at the epochs' ends (peak 0.00125)")
    # a warm-up that ends with an epoch reaches its peak at that epoch's end: shown, not said again
    warm = RateSchedule(0.01, 4.0, 2, (), 10, 5, "linear")
    assert describe(per_epoch(SizeSchedule((64,), (5,)), warm, 5), peak=warm.peak) == (
        "image size 64, learning rate 0.025 -> 0.04 -> 0")
    # a cosine schedule from its first step, in a long course shown as first, highest and last
    cosine = RateSchedule(0.01, 2.0, 0, (), 4, 6, "cosine")
    line = describe(per_epoch(SizeSchedule((64,), (6,)), cosine, 6), peak=cosine.peak)
    assert line == "image size 64, learning rate 0.0192 -> 0 at the epochs' ends (peak 0.02)", line


def test_the_default_linear_schedule_goes_straight_to_zero_at_the_last_step_after_its_warm_up():
    steps = 10
    rates = rate_schedule(0.01, "linear", None, (30,), epochs=10, global_batch=512, steps_per_epoch=steps,
                          kind="linear")
    assert rates.drop_epochs == (), "only a step schedule drops at lr_drop_epochs"
    values = [rates.at(step) for step in range(rates.total_steps)]
    assert values[5 * steps - 1] == pytest.approx(0.04), "the warm-up ends at the peak"
    assert values[-1] == 0.0, "zero at the last step"
    down = np.diff(values[5 * steps - 1:])
    np.testing.assert_allclose(down, -0.04 / (5 * steps), rtol=1e-9)  # straight
    assert rates.of_epoch(9) == 0.0 and rates.of_epoch(7) == pytest.approx(0.04 * 20 / 50)
    plain = rate_schedule(0.01, "none", None, (), epochs=2, global_batch=128, steps_per_epoch=3, kind="linear")
    assert [plain.at(step) for step in range(6)] == [pytest.approx(0.01 * left / 5) for left in (5, 4, 3, 2, 1, 0)]


def test_the_cosine_schedule_follows_half_a_cosine_to_zero():
    rates = rate_schedule(0.01, "none", None, (), epochs=4, global_batch=128, steps_per_epoch=5, kind="cosine")
    values = [rates.at(step) for step in range(20)]
    assert values[0] == pytest.approx(0.01) and values[-1] == pytest.approx(0.0, abs=1e-12)
    assert rates.at(19 / 2) == pytest.approx(0.005), "half-way: half the rate"
    assert (np.diff(values) <= 0).all(), "never up"


def test_plateau_drops_after_patience_epochs_without_a_better_accuracy():
    accuracies = [0.2, 0.4, 0.4, 0.39, 0.5, 0.45, 0.45, 0.45, 0.6]
    assert plateau_drops(accuracies, 2) == (4, 7)
    assert plateau_drops(accuracies, 1) == (3, 4, 6), "the paper's three drops at most"
    # a run whose accuracy stopped growing (1.0 on categories of one's own) drops three times, to a thousandth
    assert plateau_drops([0.2] + [1.0] * 300, 3) == (5, 8, 11)
    assert plateau_drops(accuracies, 5) == ()
    assert plateau_drops([], 2) == () and plateau_drops([0.5], 1) == ()
    rates = rate_schedule(0.01, "none", None, (30,), epochs=9, global_batch=128, steps_per_epoch=2,
                          kind="plateau")
    assert rates.drop_epochs == (), "a plateau schedule starts without drops"
    decided = rates.with_drops(plateau_drops(accuracies, 2))
    assert [decided.of_epoch(epoch) for epoch in range(9)] == [pytest.approx(r) for r in (
        [0.01] * 4 + [0.001] * 3 + [0.0001] * 2)]


def test_a_step_schedule_whose_drops_all_come_after_the_run_is_said(caplog):
    """lr_schedule = 'step' with its default drops (30, 60, 80) over 2 epochs never dropped the rate, without a word
    (patience or lr_drop_epochs given without their schedule are said)."""
    with caplog.at_level("WARNING", logger="alexnet"):
        check_settings({"lr_schedule": "step", "epochs": 2})
        check_settings({"lr_schedule": "step", "lr_drop_epochs": [5], "epochs": 1})
        check_settings({"lr_schedule": "step", "lr_drop_epochs": [1, 9], "epochs": 2})  # one drop within: fine
    assert [r.getMessage() for r in caplog.records] == [
        "`lr_drop_epochs` = [30, 60, 80] holds no epoch below `epochs` (2): lr_schedule = 'step' never drops the rate "
        "in this run; give lr_drop_epochs below 2.",
        "`lr_drop_epochs` = [5] holds no epoch below `epochs` (1): lr_schedule = 'step' never drops the rate in this "
        "run; a run of one epoch has no epoch to drop it at: give more epochs."]


def test_settings_choose_the_rate_schedule_and_refuse_what_cannot_work():
    assert check_settings({}).lr_schedule == "linear" and check_settings({}).label_smoothing == 0.1
    settings = check_settings({"lr_schedule": "step", "lr_drop_epochs": [1], "epochs": 3})
    assert settings.rates(128, 2).drop_epochs == (1,) and settings.rates(128, 2).kind == "step"
    assert check_settings({"lr_schedule": "plateau", "patience": 3}).patience == 3
    refused = {
        "lr_schedule": ({"lr_schedule": "exponential"}, "`lr_schedule` must be one of 'linear', 'cosine', 'step', "
                        "'plateau', not 'exponential'"),
        "plateau": ({"lr_schedule": "plateau", "validation": False}, "lr_schedule = 'plateau' decides on the "
                    "validation top-1 of every epoch, but `validation` is off"),
        "keep_best": ({"keep_best": True, "validation": False}, "keep_best = True decides on the validation top-1"),
        "smoothing": ({"label_smoothing": 1}, "`label_smoothing` must be a number >= 0 and < 1, not 1"),
        "negative": ({"label_smoothing": -0.1}, "`label_smoothing` must be a number >= 0, not -0.1"),
        "patience": ({"patience": 0}, "`patience` must be"),
    }
    for arguments, message in refused.values():
        with pytest.raises(AlexnetError) as error:
            check_settings(arguments)
        assert message in str(error.value)


def test_what_needs_validation_is_refused_alike_before_training_and_when_the_data_has_none():
    from alexnet.train.agreement import Steps
    from alexnet.train.run import _check_validation

    for arguments, shown in (({"lr_schedule": "plateau"}, "lr_schedule = 'plateau'"),
                             ({"keep_best": True}, "keep_best = True")):
        with pytest.raises(AlexnetError, match=f"^{re.escape(shown)} decides on the validation top-1 of every epoch, "
                           "but `validation` is off") as off:
            check_settings({**arguments, "validation": False})
        # the command line has no `data`: the images trained on are said alike for every front end
        assert str(off.value).endswith(": set validation = True (which needs validation images among the images "
                                       "trained on), or leave it out.")
        assert help_as_said("train", str(off.value)).endswith(": set --validation (which needs validation images "
                                                              "among the images trained on), or leave it out.")
        with pytest.raises(AlexnetError, match=f"^{re.escape(shown)} decides on the validation top-1 of every epoch, "
                           "but the images trained on have no validation images: upload ImageNet") as none:
            _check_validation(Steps(train=2, validate=False, validation=None), check_settings(arguments))
        assert "(`alexnet upload`) and fetch them" in help_as_said("train", str(none.value))
        _check_validation(Steps(train=2, validate=True, validation=1), check_settings(arguments))
    _check_validation(Steps(train=2, validate=False, validation=None), check_settings({}))
