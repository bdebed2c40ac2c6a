"""The communication settings: 16-bit gradients on the wire, packs, gradient accumulation and local SGD.

The cheap checks run here; the two-worker run is this file started twice as a script (see the bottom), two
processes with their own TF_CONFIG on 127.0.0.1, each training one model after another with the same strategy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from helpers_cli import help_as_said  # noqa: E402
from helpers_train import make_tree, run_two_workers, synthetic_data  # noqa: E402
from test_tensorboard import read_scalars  # noqa: E402

from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.cli import main as cli_main  # noqa: E402
from alexnet.environment import INTEROP_VARIABLE, interop_threads  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.train import api as training  # noqa: E402
from alexnet.train.advice import (  # noqa: E402
    ADVISED_EFFICIENCY,
    ADVISED_PACK_MB,
    MOST_LOCAL_STEPS,
    SIXTEEN_BIT_GAIN,
    adaptable,
    adaptation_text,
    adapted_timing,
    advise,
    epoch_micro_batches,
    linear,
    row_settings,
    settings_row,
)
from alexnet.train.batch_bound import IMAGENET_TRAIN_IMAGES, LARGEST_GLOBAL_BATCH, largest_batch  # noqa: E402
from alexnet.train.communication import (  # noqa: E402
    Communication,
    averages_in_epoch,
    check_wire,
    sixteen_bit_wire,
)
from alexnet.train.precision import Hardware  # noqa: E402
from alexnet.train.settings_check import check_settings  # noqa: E402

HERE = Path(__file__).resolve()
AlexNet_PARAMETERS = 62_378_344  # AlexNet at 1000 classes and 4096 units (ungrouped)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("allreduce_pack_mb", -1, "`allreduce_pack_mb` must be a number >= 0"),
    ("accumulate_steps", 0, "`accumulate_steps` must be a whole number >= 1"),
    ("sync_every", 0, "`sync_every` must be a whole number >= 1"),
    ("local_sgd_after", -1, "`local_sgd_after` must be a whole number >= 0"),
    ("allreduce_precision", "int8", "`allreduce_precision` must be one of 'float32', 'bfloat16', 'float16'"),
])
def test_bad_lever_values_are_refused_by_the_call_and_the_command_line(name, value, message, tmp_path, capsys):
    with pytest.raises(AlexnetError, match=message.replace("(", r"\(")):
        check_settings({name: value})
    with pytest.raises(AlexnetError, match=message.replace("(", r"\(")):
        training.alexnet_train(data={"image": ["/nowhere/a.JPEG"], "category": ["n1"], "categories": ["n1"]},
                               **{name: value})
    option = "--" + name.replace("_", "-")
    assert cli_main(["train", "--board", str(tmp_path / "no-board"), option, str(value)]) == 2
    assert message.replace(f"`{name}`", f"`{option}`") in capsys.readouterr().err  # named as typed


def test_spellings_of_the_wire_format_and_sync_every_with_one_worker_are_taken():
    settings = check_settings({"allreduce_precision": "BF16", "sync_every": 4})
    assert settings.allreduce_precision == "bfloat16"
    alone = Communication.of(settings, workers=1)
    assert not alone.local_sgd and alone.bytes_per_step(1000) == 0.0
    assert "nothing to all-reduce" in alone.describe()


def test_bfloat16_on_the_wire_needs_gpus_that_sum_it():
    old = Hardware(gpu_capabilities=((7, 0), (8, 0)))
    with pytest.raises(AlexnetError, match=r"compute capability 8\.0.*use allreduce_precision = 'float16'"):
        check_wire("bfloat16", old)
    check_wire("float16", old)
    check_wire("bfloat16", Hardware(gpu_capabilities=((8, 0),)))
    check_wire("bfloat16", Hardware())  # a CPU sums either format


def test_what_a_step_sends_for_each_lever():
    def comm(**kw):
        return Communication(**{"workers": 2, **kw})

    assert comm().bytes_per_step(AlexNet_PARAMETERS) == 4 * AlexNet_PARAMETERS  # 249.5 MB a step
    assert comm(wire="bfloat16").bytes_per_step(AlexNet_PARAMETERS) == 2 * AlexNet_PARAMETERS
    # local SGD: weights and momentum, once every 4 steps
    assert comm(sync_every=4).bytes_per_step(100) == 2 * 100 * 4 / 4
    assert comm(accumulate=8).bytes_per_step(100) == 400  # one all-reduce per optimizer step, whatever k
    assert comm().gradient_reducer() is None  # today's training: Keras's own all-reduce
    assert comm(pack_mb=25).pack_bytes == 25_000_000 and comm(pack_mb=25).gradient_reducer() is not None
    assert comm(sync_every=4).gradient_reducer()([1, 2]) == [1, 2]  # each worker applies its own gradients
    assert comm(sync_every=4).exchanged([(3, 3), (3,)]) == [(3, 3), (3,), (3, 3), (3,)]
    assert comm(wire="bfloat16", pack_mb=25, accumulate=16).describe() == (
        "bfloat16 on the wire, packs of 25 MB, 16 micro-batches a step, gradients all-reduced every step")
    # post-local SGD: the synchronous reducer of the same wire format and packs first, then each worker's own
    post = comm(wire="bfloat16", pack_mb=25, sync_every=4, local_after=3)
    assert post.gradient_reducer()([1, 2]) == [1, 2] and post.synchronous_reducer() is not None
    assert comm(sync_every=4, local_after=3).synchronous_reducer() is None  # Keras's own float32 all-reduce
    assert post.describe().endswith("weights and momentum averaged every 4 steps after 3 synchronous epochs")
    assert Communication.of(check_settings({"sync_every": 4, "local_sgd_after": 3}), workers=2).local_after == 3
    # what each epoch sends: the gradients every step in the synchronous epochs, then local SGD's averages
    assert post.at_epoch(2).bytes_per_step(100) == 2 * 100 and post.at_epoch(2).gradient_reducer() is not None
    assert post.at_epoch(3) == post and post.at_epoch(3).bytes_per_step(100) == 2 * 2 * 100 / 4
    assert comm(sync_every=4).at_epoch(0) == comm(sync_every=4)  # local SGD from the first step


def _share(compute: float, exchange: float) -> float:
    return compute / (compute + exchange)


def test_a_run_whose_exchange_is_short_is_told_so_and_advised_nothing():
    advice = advise(Communication(workers=2), 0.05, 0.68, global_batch=64)
    assert advice is not None and advice.settings == {}
    assert advice.efficiency == pytest.approx(_share(0.68, 0.05)) and advice.efficiency >= ADVISED_EFFICIENCY
    assert advice.advised_efficiency == advice.efficiency
    assert "0.05 s a step against 0.68 s of computation" in advice.text and "0.93 of linear" in advice.text
    assert "To keep the workers busy" not in advice.text
    # nothing to advise alone, or without a measurement
    assert advise(Communication(workers=1), 1.0, 0.5, global_batch=32) is None
    assert advise(Communication(workers=2), 1.0, 0.0, global_batch=32) is None


def test_a_run_of_local_sgd_is_advised_the_fewest_micro_batches_its_own_exchange_needs():
    """Micro-batches were counted from the synchronous exchange, though local SGD's average, once in sync_every
    steps, is what its steps wait for: 8 were advised (a global batch of 512) where 4 reach the share."""
    advice = advise(Communication(workers=2, replicas=2, sync_every=4), 0.5, 1.0, global_batch=64,
                    micro_batches=1000, parameters=62_378_344)
    assert advice.settings == {"allreduce_precision": "bfloat16", "accumulate_steps": 4}
    assert advice.advised_efficiency >= ADVISED_EFFICIENCY
    # the fewest: a run of 2 already is advised 4 again
    fewer = advise(Communication(workers=2, replicas=2, sync_every=4, accumulate=2), 0.5, 2.0, global_batch=128,
                   micro_batches=1000, parameters=62_378_344)
    assert fewer.settings["accumulate_steps"] == 4


def test_a_share_just_below_the_one_advised_is_not_said_as_it():
    # 0.8997 of linear is advised more: it is said 0.89, not "0.90" beside advice to reach 0.9
    advice = advise(Communication(workers=2), 0.68 / 0.8997 - 0.68, 0.68, global_batch=64)
    assert advice is not None and advice.efficiency < ADVISED_EFFICIENCY and advice.settings
    assert "about 0.89 of linear scaling" in advice.text and "0.90 of linear scaling" not in advice.text
    assert linear(0.93) == "0.93" and linear(0.8997) == "0.89" and linear(1.0) == "1.00"


@pytest.mark.parametrize(("exchange", "compute"), [(0.87, 0.68), (0.3, 0.68), (0.1, 0.05)])
def test_today_s_training_is_advised_16_bits_then_the_fewest_micro_batches_that_bring_it_above_the_share(
        exchange, compute):
    # float32 gradients every step, micro-batches of 32 on two workers: the README's loopback rows
    advice = advise(Communication(workers=2), exchange, compute, global_batch=64)
    assert advice.efficiency == pytest.approx(_share(compute, exchange)) and advice.efficiency < ADVISED_EFFICIENCY
    assert list(advice.settings) == ["allreduce_precision", "accumulate_steps"]  # in the order to take them
    assert advice.settings["allreduce_precision"] == "bfloat16"
    k = advice.settings["accumulate_steps"]
    assert k & (k - 1) == 0 and 64 * k <= LARGEST_GLOBAL_BATCH  # a power of two, within AlexNet's known batches
    # half the bytes, k times the computation: at or above the share, and half as many would not be
    assert advice.advised_efficiency == pytest.approx(_share(k * compute, exchange / 2))
    assert advice.advised_efficiency >= ADVISED_EFFICIENCY
    assert _share(k // 2 * compute, exchange / 2) < ADVISED_EFFICIENCY
    assert f"accumulate_steps = {k} (one exchange for {k} micro-batches, a global batch of {64 * k}" in advice.text
    assert "sync_every" not in advice.settings and "Micro-batches stop" not in advice.text


def test_a_run_that_needs_more_micro_batches_than_alexnets_largest_batch_is_advised_local_sgd_after_them():
    # over 1 Gbit/s, micro-batches of 32 on two workers would need 32 micro-batches (a global batch of 2048): 16 are
    # advised (1024), and local SGD, with the measurement of its cost, for the rest
    advice = advise(Communication(workers=2), 2.92, 0.68, global_batch=64)
    assert list(advice.settings) == ["allreduce_precision", "accumulate_steps", "sync_every"]
    assert advice.settings["accumulate_steps"] == 16 and "Micro-batches stop at a global batch of 1024" in advice.text
    assert advise(Communication(workers=2), 2.92, 0.68, global_batch=64,
                  most_batch=2048).settings["accumulate_steps"] == 32


def test_an_epoch_of_few_micro_batches_bounds_the_micro_batches_and_local_steps_and_one_pack_is_not_advised():
    # the run the advice above is for, on a board whose epoch holds 5 batches a worker: steps of 4 would train 4 and
    # leave one out every epoch, of 2 as many: none, said, and no local SGD beyond the 5 steps an epoch holds (an
    # epoch's end averages the weights anyway)
    advice = advise(Communication(workers=2), 2.92, 0.68, global_batch=64, micro_batches=5, most_batch=8192)
    assert advice.settings == {"allreduce_precision": "bfloat16", "sync_every": 5}
    assert advice.text.endswith("No micro-batches: an epoch holds 5 batches on each worker, and steps of several "
                                "would leave out more than 5% of them every epoch (more training images, or a smaller "
                                "`batch_size`, make room for them).")
    assert "Micro-batches stop at a global batch" not in advice.text, "not the largest batch's doing"
    # 40: 8 a step, 5 steps an epoch, none left out (16 would leave 8 out), said; local SGD over the 5 steps
    roomy = advise(Communication(workers=2), 2.92, 0.68, global_batch=64, micro_batches=40)
    assert roomy.settings == {"allreduce_precision": "bfloat16", "accumulate_steps": 8, "sync_every": 5}
    assert roomy.text.endswith("Micro-batches stop at 8 a step: an epoch holds 40 batches on each worker, and steps "
                               "of more would leave out more than 5% of them every epoch.")
    assert [epoch_micro_batches(n) for n in (1, 3, 5, 6, 7, 8, 40, 625, 1251)] == [1, 1, 1, 2, 1, 8, 8, 32, 64]
    # epochs of `steps_per_epoch` steps, which cover what they cover of the images anyway: as many as they hold
    cut = advise(Communication(workers=2), 2.92, 0.68, global_batch=64, micro_batches=5, whole_epochs=False)
    assert cut.settings["accumulate_steps"] == 4 and "an epoch holds" not in cut.text
    assert cut.text.endswith("Micro-batches stop at 4 a step: an epoch of `steps_per_epoch` steps holds 5 batches "
                             "on each worker.")
    assert adaptable(cut, 1, 5, whole_epochs=False)["accumulate_steps"] == 4 and "accumulate_steps" not in \
        adaptable(cut, 1, 5)
    # 160: 10 steps an epoch, room for the 3 local steps advised without a bound
    assert advise(Communication(workers=2), 2.92, 0.68, global_batch=64, micro_batches=160).settings == \
        advise(Communication(workers=2), 2.92, 0.68, global_batch=64).settings == {
            "allreduce_precision": "bfloat16", "accumulate_steps": 16, "sync_every": 3}
    # packs where they overlap, unless the whole exchange fits in one pack of ADVISED_PACK_MB
    big = advise(Communication(workers=2), 2.92, 0.68, global_batch=64, overlaps=True, parameters=61_000_000)
    assert big.settings["allreduce_pack_mb"] == ADVISED_PACK_MB
    small = advise(Communication(workers=2), 2.92, 0.68, global_batch=64, overlaps=True, parameters=4_400_000)
    assert "allreduce_pack_mb" not in small.settings, "8.8 MB in 16 bits: one pack of 25 MB hides nothing"


def test_16_bits_are_advised_for_what_their_exchange_timed_gains():
    today = Communication(workers=2)
    # over loopback the collective's work on the CPU sets the time: 16 bits timed no faster, so not advised, and the
    # micro-batches are counted from the float32 exchange
    same = advise(today, 0.78, 4.9, global_batch=64, sixteen_bit_seconds=0.8)
    assert same.settings == {"accumulate_steps": 2}
    assert same.advised_efficiency == pytest.approx(_share(2 * 4.9, 0.78))
    # over a slow link they took a third of the time: advised, and the rest counted from what was timed
    timed = advise(today, 4.05, 4.9, global_batch=64, sixteen_bit_seconds=1.39)
    assert timed.settings == {"allreduce_precision": "bfloat16", "accumulate_steps": 4}
    assert timed.advised_efficiency == pytest.approx(_share(4 * 4.9, 1.39))
    assert "1.39 s a step alone, timed" in timed.text
    # without the timing, half the time is assumed
    assumed = advise(today, 4.05, 4.9, global_batch=64)
    assert assumed.advised_efficiency == pytest.approx(_share(4 * 4.9, 4.05 / 2))
    assert "a global batch of 256 with the learning rate scaled to it" in assumed.text
    kept = advise(today, 4.05, 4.9, global_batch=64, rate_scaled=False).text
    assert "a global batch of 256; lr_scaling = 'none' keeps the learning rate" in kept


def test_accumulation_stops_at_the_large_batch_and_local_sgd_comes_with_its_measurement():
    # 64 workers, 16-bit packs already, 128 micro-batches of 32: a global batch of 262144 / 8 = 8192 already
    comm = Communication("bfloat16", 25, 4, 1, 64)
    advice = advise(comm, 3.0, 4 * 0.15, global_batch=8192)
    assert "accumulate_steps" not in advice.settings and "allreduce_precision" not in advice.settings
    local = advice.settings["sync_every"]
    assert 2 < local <= MOST_LOCAL_STEPS
    assert advice.advised_efficiency == pytest.approx(_share(0.6, 2 * 3.0 / local))
    assert f"(alexnet_benchmark(stages = \"time_to_accuracy\", accuracy_levers = \"sync_every={local}\"), with " \
           "\"+local_sgd_after=N\" added to the lever set for N synchronous epochs" in advice.text, advice.text
    # the command line says the call as the command (in R and Python it is the call itself)
    assert f"(`alexnet bench --stages \"time_to_accuracy\" --accuracy-levers \"sync_every={local}\"`, with " \
           in help_as_said("train", advice.text)
    assert "changes what is learnt" in advice.text
    # from two workers of 128 images a step, accumulation is advised up to AlexNet's largest batch, which the advice
    # says, and local SGD after it
    two = Communication("bfloat16", 0, 1, 1, 2)
    advice = advise(two, 8.0, 0.5, global_batch=256)
    assert advice.settings["accumulate_steps"] == LARGEST_GLOBAL_BATCH // 256 == 4
    assert 2 < advice.settings["sync_every"] <= MOST_LOCAL_STEPS
    assert advice.text.endswith("Micro-batches stop at a global batch of 1024 (`largest_global_batch`): AlexNet loses "
                                "accuracy at larger batches, and on fewer training images than ImageNet's at smaller "
                                "ones."), advice.text
    # a larger bound, asked for, lets more be advised; one at the global batch already, none
    assert advise(two, 8.0, 0.5, global_batch=256, most_batch=8192).settings["accumulate_steps"] == 32
    held = advise(two, 8.0, 0.5, global_batch=256, most_batch=256)
    assert "accumulate_steps" not in held.settings and "Micro-batches stop at a global batch of 256" in held.text
    # enough micro-batches advised within the bound: nothing held back is said
    assert "Micro-batches stop" not in advise(two, 0.1, 0.5, global_batch=256).text


def test_micro_batches_stop_at_alexnets_largest_batch_scaled_to_the_training_images():
    # ImageNet, or more: You et al.'s 1024; fewer images, as many times smaller a bound (an epoch keeps 1251 steps)
    assert largest_batch(IMAGENET_TRAIN_IMAGES) == largest_batch(14_197_122) == LARGEST_GLOBAL_BATCH == 1024
    assert largest_batch(IMAGENET_TRAIN_IMAGES // 2) == 511 and largest_batch(128_000) == 102
    assert largest_batch(1500) == largest_batch(0) == 1
    # asked for (largest_global_batch): taken as it is
    assert largest_batch(1500, 4) == 4 and largest_batch(IMAGENET_TRAIN_IMAGES, 8192) == 8192
    # the time_to_accuracy stage's two workers over 1 Gbit/s: 1500 images, batches of 128; the exchange took 0.22 of a
    # step. 16 bits are advised, and no micro-batches: two of them cost that run its accuracy
    advice = advise(Communication(workers=2), 2.45, 8.9, global_batch=256, sixteen_bit_seconds=1.3,
                    most_batch=largest_batch(1500))
    assert "accumulate_steps" not in advice.settings and advice.settings["allreduce_precision"] == "bfloat16"
    assert adaptable(advice, 1, 5) == {"allreduce_precision": "bfloat16"}
    assert "No micro-batches: the largest global batch for its training images is 1 (1024 for ImageNet's " \
           "1.28 million, as many times smaller for fewer; `largest_global_batch` sets another), and the run's is " \
           "256 already" in advice.text, advice.text
    assert "Micro-batches stop" not in advice.text


def test_a_bound_below_any_global_batch_of_the_run_s_replicas_is_said_as_too_few_training_images():
    # 1500 images over two workers: a bound of 1, less than the 2 replicas take at the least, is said as too few
    # images for micro-batches, not as a largest global batch of 1
    advice = advise(Communication(workers=2, replicas=2), 2.45, 8.9, global_batch=32, sixteen_bit_seconds=1.3,
                    most_batch=largest_batch(1500), train_images=1500)
    assert "accumulate_steps" not in advice.settings
    assert advice.text.endswith(
        "No micro-batches on so few training images (1,500): AlexNet's largest global batch, 1024 for ImageNet's 1.28 "
        "million and as many times smaller for fewer, comes to 1 for them, less than the 2 replicas take at the least "
        "(the run's global batch is 32); `largest_global_batch` sets another bound: AlexNet loses accuracy at larger "
        "batches, and on fewer training images than ImageNet's at smaller ones."), advice.text
    assert "global batch for its training images is" not in advice.text
    # 8 GPUs over two workers: a bound of 5 (6,500 images) is still less than any of their global batches
    eight = advise(Communication(workers=2, replicas=8), 2.45, 8.9, global_batch=256, most_batch=largest_batch(6500),
                   train_images=6500)
    assert "on so few training images (6,500)" in eight.text and "comes to 5 for them, less than the 8 replicas" \
        in eight.text, eight.text
    # a bound some run could train at keeps the ImageNet-scale words: 128,000 images, 102, a run's global batch 256
    meaningful = advise(Communication(workers=2, replicas=2), 2.45, 8.9, global_batch=256,
                        most_batch=largest_batch(128_000), train_images=128_000)
    assert meaningful.text.endswith(
        "No micro-batches: the largest global batch for its training images is 102 (1024 for ImageNet's 1.28 million, "
        "as many times smaller for fewer; `largest_global_batch` sets another), and the run's is 256 already: AlexNet "
        "loses accuracy at larger batches, and on fewer training images than ImageNet's at smaller ones."), \
        meaningful.text
    # a bound asked for (largest_global_batch) is named as that, not as the training images'
    asked = advise(Communication(workers=2, replicas=2), 2.45, 8.9, global_batch=32,
                   most_batch=largest_batch(1500, 16), train_images=1500)
    assert "No micro-batches: `largest_global_batch` is 16, and the run's is 32 already: AlexNet loses" in asked.text
    assert "so few training images" not in asked.text and "for its training images" not in asked.text



@pytest.mark.parametrize(("most_batch", "global_batch", "train_images", "said"), [
    (largest_batch(1500, 16), 32, 1500, ": `largest_global_batch` is 16, and the run's is 32 already"),
    (largest_batch(128_000), 256, 128_000, ": the largest global batch for its training images is 102"),
    (largest_batch(1500), 256, 1500, " on so few training images (1,500)")])
def test_a_run_that_takes_micro_batches_already_is_told_that_no_more_are_advised(most_batch, global_batch,
                                                                                   train_images, said):
    """"No micro-batches: ..." beside a run of `accumulate_steps` 2 read as if it took none: it means none more."""
    advice = advise(Communication(accumulate=2, workers=2, replicas=2), 2.45, 8.9, global_batch=global_batch,
                    most_batch=most_batch, train_images=train_images)
    assert "No micro-batches" not in advice.text, advice.text
    assert f"No more micro-batches than the run's 2 a step{said}" in advice.text, advice.text


def test_a_run_with_every_lever_already_set_is_told_what_is_left():
    comm = Communication("bfloat16", 25, 4, MOST_LOCAL_STEPS, 64)
    advice = advise(comm, 3.0, 0.6, global_batch=8192)
    assert advice.settings == {} and advice.efficiency < ADVISED_EFFICIENCY
    assert "a faster link, or fewer workers" in advice.text
    assert "times the images per second of one worker" not in advice.text, "64 workers at 0.17: 11 times one's"


def test_workers_that_train_slower_than_one_worker_are_told_so_and_warned(caplog):
    """Two workers at 0.08 of linear train at 0.16 times one worker's rate: the advice said only "fewer workers is
    what is left", as a line of INFO that -q and a Spark driver leave out. (Epochs of 5 steps of 2 micro-batches:
    one average at each epoch's end, as sync_every says; an epoch of one step would average every step.)"""
    comm = Communication("bfloat16", 25, 2, 5, 2)
    advice = advise(comm, 4.04, 0.369, global_batch=64, most_batch=64, micro_batches=10)
    assert advice.settings == {} and advice.advised_efficiency < 0.5
    assert advice.text.endswith("So 2 workers train at about 0.17 times the images per second of one worker alone: "
                                "one worker alone trains faster over this link."), advice.text
    # of three, only that one alone is faster is known: two were not measured
    three = advise(Communication("bfloat16", 25, 2, 5, 3), 4.04, 0.369, global_batch=96, most_batch=96,
                   micro_batches=10)
    assert three.text.endswith("one worker alone trains faster over this link, and fewer than 3 workers may too."), \
        three.text
    import logging

    from alexnet.train.levers import advise_communication
    from alexnet.train.strategy import Topology

    chief = Topology("multi_worker", 2, 2, 0, True, 1, False)
    caplog.set_level(logging.INFO, logger="alexnet.train.levers")
    told = advise_communication({"allreduce_seconds": 4.04, "compute_seconds": 0.369}, comm, chief, global_batch=64,
                                most_batch=64, micro_batches=10)
    assert told == advice and [r.levelname for r in caplog.records] == ["WARNING"]
    # with settings advised that would still leave two workers slower than one: said after them
    slow = advise(Communication(workers=2), 20.6, 0.5, global_batch=32, sixteen_bit_seconds=10.4, most_batch=32)
    assert slow.settings and "Even with them, 2 workers train at about" in slow.text, slow.text


def test_gpus_are_advised_the_16_bit_format_they_sum_and_packs():
    assert sixteen_bit_wire(Hardware()) == "bfloat16"
    assert sixteen_bit_wire(Hardware(gpu_capabilities=((8, 6),))) == "bfloat16"
    old = Hardware(gpu_capabilities=((7, 0), (8, 0)))
    assert sixteen_bit_wire(old) == "float16"
    advice = advise(Communication(workers=4, sixteen_bit=sixteen_bit_wire(old)), 1.0, 0.15, global_batch=4 * 128,
                    overlaps=True)
    assert advice.settings["allreduce_precision"] == "float16" and advice.settings["allreduce_pack_mb"] == 25
    # a run of local SGD already: its averages count at their share of a step
    local = advise(Communication("bfloat16", 25, 1, 4, 2), 0.3, 1.0, global_batch=64)
    assert local.efficiency == pytest.approx(_share(1.0, 0.3)) and local.settings["accumulate_steps"] >= 2


def test_adapt_communication_takes_how_the_gradients_travel_never_local_sgd_and_no_more_micro_batches_than_steps():
    comm = Communication(workers=2)
    advice = advise(comm, 3.0, 0.1, global_batch=64)
    assert {"allreduce_precision", "accumulate_steps", "sync_every"} <= set(advice.settings)
    taken = adaptable(advice, 1, 10_000)
    assert taken == {"allreduce_precision": "bfloat16", "accumulate_steps": advice.settings["accumulate_steps"]}
    # an epoch of 6 steps: at most 4 micro-batches (a power of two); of 1 step: none taken
    assert adaptable(advice, 1, 6)["accumulate_steps"] == 2  # steps of 4 would leave 2 of the 6 out
    assert "accumulate_steps" not in adaptable(advice, 1, 1)
    assert adaptable(None, 1, 8) == {} and adaptable(advise(comm, 0.01, 1.0, global_batch=64), 1, 8) == {}
    gpu = advise(Communication(workers=4), 1.0, 0.15, global_batch=512, overlaps=True)
    assert adaptable(gpu, 1, 1) == {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25}
    # what the collective carries from the chief to every worker, read back
    for settings in ({}, taken, {"allreduce_precision": "float16", "allreduce_pack_mb": 2.5},
                     {"accumulate_steps": 8}):
        assert row_settings(settings_row(settings)) == settings
    assert adaptation_text({}) == "With `adapt_communication` the run took nothing."
    assert adaptation_text({"accumulate_steps": 4}) == "With `adapt_communication` the run took `accumulate_steps` = 4."
    from alexnet.cli.common import as_typed  # the command line says each as its option

    assert as_typed(adaptation_text({"allreduce_precision": "bfloat16", "accumulate_steps": 4}),
                    {"adapt_communication": ("--adapt-communication", True),
                     "allreduce_precision": ("--allreduce-precision", False),
                     "accumulate_steps": ("--accumulate-steps", False)}) == \
        "With `--adapt-communication` the run took `--allreduce-precision` 'bfloat16', `--accumulate-steps` 4."
    # packs read back from the chief's row are a float: a whole one is said as the advice says it, 25 not 25.0
    took = row_settings(settings_row({"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25}))
    assert adaptation_text(took) == ("With `adapt_communication` the run took `allreduce_precision` = 'bfloat16', "
                                     "`allreduce_pack_mb` = 25.")
    assert adaptation_text({"allreduce_pack_mb": 0.5}).endswith("`allreduce_pack_mb` = 0.5.")


def test_a_run_whose_own_global_batch_is_beyond_alexnets_largest_is_warned_by_its_chief(caplog):
    import logging

    from alexnet.train.levers import check_global_batch, check_levers
    from alexnet.train.strategy import Topology

    caplog.set_level(logging.INFO, logger="alexnet.train.levers")
    sixteen = Topology("multi_worker", 16, 16, 0, True, 1, False)
    check_global_batch(check_settings({"batch_size": 128}), sixteen)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ["A step trains a global batch of 2048 images (`batch_size` x `accumulate_steps` x replicas), "
                      "beyond the 1024 AlexNet has kept its accuracy at with the learning rate scaled linearly (You "
                      "et al., 2017, who needed layer-wise rates beyond it): a smaller `batch_size` or fewer "
                      "micro-batches keep it there; measure the cost first (alexnet_benchmark(stages = "
                      "\"time_to_accuracy\")), and set `largest_global_batch` to a batch your recipe is known to take "
                      "to silence this."], warned
    assert "(`alexnet bench --stages \"time_to_accuracy\"`), and set `--largest-global-batch` to" in \
        help_as_said("train", warned[0])
    caplog.clear()
    # at 1024 (micro-batches counted), with a bound set above it, on another worker, or by the check of the levers
    # (run again once adapt_communication took its settings): nothing
    for settings, topology, check in (({"batch_size": 32, "accumulate_steps": 2}, sixteen, check_global_batch),
                                      ({"batch_size": 128, "largest_global_batch": 4096}, sixteen, check_global_batch),
                                      ({"batch_size": 128}, Topology("multi_worker", 16, 16, 3, False, 1, False),
                                       check_global_batch),
                                      ({"batch_size": 128}, sixteen, check_levers)):
        check(check_settings(settings), topology)
    assert [r for r in caplog.records if r.levelname == "WARNING"] == []
    # one worker's micro-batches count too; a rate kept as it is is not said to be scaled
    one = Topology("default", 1, 1, 0, True, 1, False)
    check_global_batch(check_settings({"batch_size": 128, "accumulate_steps": 16, "lr_scaling": "none"}), one)
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert message.startswith("A step trains a global batch of 2048 images") and "scaled linearly" not in message


def test_the_bound_counts_the_training_images_of_every_worker(monkeypatch):
    from types import SimpleNamespace

    from alexnet.train import agreement
    from alexnet.train.strategy import Topology

    td = SimpleNamespace(files=["x"] * 700, val_files=[])
    alone = agreement.agree_on_steps(tf.distribute.get_strategy(), Topology("default", 1, 1, 0, True, 1, False), {},
                                     td, 128, None, False, None)
    assert (alone.train, alone.train_images) == (5, 700)
    # two workers of 700 and 800 images (rows: images, validation images, worker, partition): 1500 over both, 5 steps
    monkeypatch.setattr(agreement, "all_gather_ints",
                        lambda strategy, row: np.array([[700, 0, 0, -1], [800, 0, 1, -1]]))
    two = agreement.agree_on_steps(tf.distribute.get_strategy(), Topology("multi_worker", 2, 2, 0, True, 1, False),
                                   {}, td, 128, None, False, None)
    assert (two.train, two.train_images) == (5, 1500) and largest_batch(two.train_images) == 1


def test_a_batch_beyond_an_epoch_s_images_is_taken_down_to_them_saying_so(monkeypatch, caplog):
    """A step of more images than a worker's epoch holds repeated images to fill a batch it could never fill, and took
    that batch's memory, with a warning alone: the run now trains with the largest `batch_size` the images fill (as
    Keras trains one batch of them all), saying so on the chief, the same on every worker (the smallest partition's);
    steps asked for are left as they are, and a step of one image a replica beyond them is refused."""
    from types import SimpleNamespace

    from alexnet.train import agreement
    from alexnet.train.strategy import Topology

    td = SimpleNamespace(files=["x"] * 40, val_files=[])
    alone = Topology("default", 1, 1, 0, True, 1, False)
    strategy = tf.distribute.get_strategy()
    with caplog.at_level("WARNING", logger="alexnet.train.agreement"):
        steps = agreement.agree_on_steps(strategy, alone, {}, td, 80, None, False, None)
        assert agreement.batch_within_images(80, 1, alone, steps) == 40
    assert [r.getMessage() for r in caplog.records] == [
        "`batch_size` = 80 makes a step of 80 images on each worker (`batch_size` x `accumulate_steps`), more than the "
        "40 this run's images holds: the run trains with `batch_size` = 40, the largest these images fill; give a "
        "`batch_size` of at most 40, or more training images."]
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.train.agreement"):
        assert agreement.batch_within_images(20, 3, alone, steps) == 13  # 13 x 3 = 39 of the 40
        assert agreement.batch_within_images(40, 1, alone, agreement.agree_on_steps(
            strategy, alone, {}, td, 40, None, False, None)) is None
        asked = agreement.agree_on_steps(strategy, alone, {}, td, 80, 3, False, None)  # steps asked
        assert asked.fill is None and agreement.batch_within_images(80, 1, alone, asked) is None
    assert [r.getMessage()[:40] for r in caplog.records] == ["`batch_size` = 20 makes a step of 60 ima"]
    with pytest.raises(AlexnetError, match=r"^A step takes at least 50 images on each worker \(`accumulate_steps` = "
                                           r"50 batches on each of its 1 replica\(s\)\), more than the 40 this run's "
                                           r"images holds: give `accumulate_steps` of at most 40, or more training"):
        agreement.batch_within_images(2, 50, alone, steps)
    # several workers: the smallest partition's images, said by the chief alone
    monkeypatch.setattr(agreement, "all_gather_ints", lambda strategy, row: np.array([[40, 0, 0, -1], [60, 0, 1, -1]]))
    for chief in (True, False):
        topology = Topology("multi_worker", 2, 2, 0 if chief else 1, chief, 1, False)
        caplog.clear()
        with caplog.at_level("WARNING", logger="alexnet.train.agreement"):
            steps = agreement.agree_on_steps(strategy, topology, {"partition_sizes": [40, 60], "total": 2}, td, 50,
                                             None, False, None)
            assert agreement.batch_within_images(50, 1, topology, steps) == 40
        assert ("more than the 40 the smallest partition holds: the run trains with `batch_size` = 40"
                in caplog.text) is chief
        assert "leaves out" not in caplog.text, "said of the batch taken, not of the one asked for"


def test_a_run_given_a_batch_beyond_its_images_trains_with_one_they_fill(tmp_path, caplog):
    """End to end: `batch_size` = 64 on 12 images trains with a batch of 12 (a step of every image), and says so."""
    from alexnet import alexnet_train

    data = synthetic_data(tmp_path, classes=2, per_class=6, val_per_class=0)
    with caplog.at_level("WARNING", logger="alexnet"):
        history = alexnet_train(data=data, batch_size=64, epochs=1, image_size=64, dense_units=64, verbose=0,
                                model_dir=str(tmp_path / "model"), validation=False)
    params = history["params"]
    assert (params["batch_size"], params["global_batch_size"], params["steps"]) == (12, 12, 1), params
    assert "the run trains with `batch_size` = 12, the largest these images fill" in caplog.text


def test_adapt_communication_is_a_flag_of_the_call_and_the_command_line(capsys):
    assert check_settings({"adapt_communication": True}).adapt_communication is True
    with pytest.raises(AlexnetError, match="`adapt_communication` must be True, False or None"):
        check_settings({"adapt_communication": "sometimes"})
    with pytest.raises(SystemExit) as exit:
        cli_main(["train", "--help"])
    assert exit.value.code == 0 and "--adapt-communication" in capsys.readouterr().out


def test_cpu_workers_are_advised_packs_when_they_run_two_inter_op_threads(monkeypatch):
    from alexnet.train.levers import advise_communication
    from alexnet.train.strategy import Topology

    chief = Topology("multi_worker", 2, 2, 0, True, 1, False)
    timing = {"allreduce_seconds": 3.0, "compute_seconds": 0.1, "sixteen_bit_allreduce_seconds": 1.5}
    # one thread starts no pack's all-reduce before the backward pass ends: packs would hide nothing
    monkeypatch.setenv(INTEROP_VARIABLE, "1")
    one = advise_communication(timing, Communication(workers=2), chief, global_batch=64, most_batch=1024)
    assert "allreduce_pack_mb" not in one.settings
    monkeypatch.setenv(INTEROP_VARIABLE, "2")
    two = advise_communication(timing, Communication(workers=2), chief, global_batch=64, most_batch=1024)
    assert two.settings == {**one.settings, "allreduce_pack_mb": 25}
    assert adaptable(two, 1, 100)["allreduce_pack_mb"] == 25  # adapt_communication takes them
    assert "packs that travel while the backward pass computes the rest" in two.text
    # packs already: not advised again
    packed = advise_communication(timing, Communication(pack_mb=25, workers=2), chief, global_batch=64,
                                  most_batch=1024)
    assert "allreduce_pack_mb" not in packed.settings


def test_the_probes_step_with_packs_sends_the_chiefs_wire_on_every_worker_or_runs_nowhere(monkeypatch):
    from alexnet.train import agreement, probe
    from alexnet.train.strategy import Topology

    worker = Topology("multi_worker", 2, 2, 1, False, 1, False)
    strategy = tf.distribute.get_strategy()
    comm = Communication(workers=2)
    # this worker's own timing would keep float32 (1.0 s in 16 bits against 1.05 s), the chief's sends 16 bits
    timing = {"allreduce_seconds": 1.05, "sixteen_bit_allreduce_seconds": 1.0}
    sent = []

    def gather(strategy, row):
        sent.append(list(row))
        return np.array(rows)

    monkeypatch.setattr(agreement, "all_gather_ints", gather)
    monkeypatch.setattr(probe, "packed_step_timed", lambda topology: True)
    rows = [[1, 1, 1], [0, 1, 0]]  # rows: chief, its step with packs timed (GPUs), 16 bits advised
    assert probe.packed_step_wire(strategy, comm, worker, timing) == "bfloat16"
    assert sent == [[0, 1, 0]]  # what this worker told the others
    rows = [[1, 1, 0], [0, 1, 1]]
    faster = {**timing, "sixteen_bit_allreduce_seconds": 0.5}  # this worker's would send 16 bits, the chief's not
    assert probe.packed_step_wire(strategy, comm, worker, faster) == "float32"
    # a worker that times no step with packs (its CPUs): no worker runs the step
    rows = [[1, 0, 1], [0, 1, 1]]
    assert probe.packed_step_wire(strategy, comm, worker, timing) is None
    # local SGD averages weights, not a step's gradients: nothing to time, nothing gathered
    sent.clear()
    assert probe.packed_step_wire(strategy, replace(comm, sync_every=4), worker, timing) is None
    assert sent == []


def test_a_cluster_of_mixed_gpu_generations_agrees_on_float16_for_its_sixteen_bits(monkeypatch):
    from alexnet.train import agreement
    from alexnet.train.levers import agree_on_sixteen_bit
    from alexnet.train.strategy import Topology

    strategy = tf.distribute.get_strategy()
    worker = Topology("multi_worker", 2, 2, 0, True, 1, True)
    ampere = Communication(workers=2, sixteen_bit="bfloat16")
    # the other worker's GPUs (compute capability 7.0) sum no bfloat16: every worker times and advises float16
    monkeypatch.setattr(agreement, "all_gather_ints", lambda strategy, row: np.array([row, [1]]))
    assert agree_on_sixteen_bit(strategy, ampere, worker).sixteen_bit == "float16"
    assert agree_on_sixteen_bit(strategy, replace(ampere, sixteen_bit="float16"), worker).sixteen_bit == "float16"
    monkeypatch.setattr(agreement, "all_gather_ints", lambda strategy, row: np.array([row, [0]]))
    assert agree_on_sixteen_bit(strategy, ampere, worker) == ampere
    # one worker: nothing gathered
    monkeypatch.setattr(agreement, "all_gather_ints", lambda strategy, row: pytest.fail("gathered alone"))
    alone = Topology("default", 1, 1, 0, True, 1, True)
    assert agree_on_sixteen_bit(strategy, ampere, alone) == ampere


def test_what_packs_hid_timed_comes_off_the_exposed_exchange_before_micro_batches_are_counted():
    # over 1 Gbit/s in 16 bits: 1.4 s of exchange against 0.68 s of computation a micro-batch of 32 on two workers
    comm = Communication(workers=2)
    blind = advise(comm, 2.8, 0.68, global_batch=64, overlaps=True, sixteen_bit_seconds=1.4)
    timed = advise(comm, 2.8, 0.68, global_batch=64, overlaps=True, sixteen_bit_seconds=1.4, hidden_seconds=0.8)
    # packs come right after 16 bits: they change nothing that is learnt, micro-batches change the global batch
    assert list(timed.settings) == ["allreduce_precision", "allreduce_pack_mb", "accumulate_steps"]
    assert "0.8 s of the exchange hidden, timed" in timed.text
    # without the timing packs are credited nothing: as many micro-batches as the bound allows (16, a global batch of
    # 1,024); with it the 0.6 s left exposed needs 8
    assert blind.settings["accumulate_steps"] == 16 and timed.settings["accumulate_steps"] == 8
    assert timed.advised_efficiency == pytest.approx(_share(8 * 0.68, 1.4 - 0.8))
    assert timed.advised_efficiency >= ADVISED_EFFICIENCY
    assert _share(4 * 0.68, 1.4 - 0.8) < ADVISED_EFFICIENCY
    # a step never hides more than its exchange, nor where packs do not overlap, nor behind local SGD's average
    assert advise(comm, 2.8, 0.68, global_batch=64, overlaps=True, sixteen_bit_seconds=1.4,
                  hidden_seconds=5.0).settings == {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25}
    assert advise(comm, 2.8, 0.68, global_batch=64, sixteen_bit_seconds=1.4,
                  hidden_seconds=0.8).settings["accumulate_steps"] == 16
    local = Communication("bfloat16", 25, 1, 4, 2)
    assert (advise(local, 0.3, 1.0, global_batch=64, overlaps=True, hidden_seconds=0.3).advised_efficiency
            == advise(local, 0.3, 1.0, global_batch=64, overlaps=True).advised_efficiency)
    # a run whose own packs hide enough is told so, and advised nothing
    own = advise(Communication("bfloat16", 25, 1, 1, 2), 0.3, 1.0, global_batch=64, overlaps=True, hidden_seconds=0.25)
    assert own.efficiency < ADVISED_EFFICIENCY and own.settings == {}
    assert own.advised_efficiency == pytest.approx(_share(1.0, 0.05)) and "Its packs hid 0.25 s" in own.text


def test_what_a_step_with_packs_hid_is_counted_on_gpus_only(monkeypatch):
    from alexnet.train import probe
    from alexnet.train.levers import advise_communication
    from alexnet.train.strategy import Topology

    monkeypatch.setenv(INTEROP_VARIABLE, "2")
    timing = {"allreduce_seconds": 2.8, "sixteen_bit_allreduce_seconds": 1.4, "compute_seconds": 0.68,
              "hidden_seconds": 0.8}
    told = {}
    for gpu in (False, True):
        chief = Topology("multi_worker", 2, 2, 0, True, 1, gpu)
        told[gpu] = advise_communication(timing, Communication(workers=2), chief, global_batch=64, most_batch=1024)
    # CPU workers: what a step hid varied from probe to probe, so none is counted (nor timed: test_probe.py)
    assert told[False].settings["accumulate_steps"] == 16 and "hidden, timed" not in told[False].text
    assert told[True].settings["accumulate_steps"] == 8 and "0.8 s of the exchange hidden, timed" in told[True].text
    assert told[True].settings["allreduce_pack_mb"] == told[False].settings["allreduce_pack_mb"] == 25
    # on CPUs packs are advised untimed, and said so; on GPUs a timing of packs that hid nothing advises none
    assert ("packs that travel while the backward pass computes the rest, not counted in the estimate, as what a "
            "step hides on CPUs varies from run to run") in told[False].text
    gpu = Topology("multi_worker", 2, 2, 0, True, 1, True)
    nothing = advise_communication({**timing, "hidden_seconds": 0.0}, Communication(workers=2), gpu, global_batch=64,
                                   most_batch=1024)
    assert "allreduce_pack_mb" not in nothing.settings and "packs" not in nothing.text
    assert nothing.settings["accumulate_steps"] == 16, "the micro-batches the whole exchange needs"
    # a stand-in for the probe's choice (test_multiworker's CPU workers timed as GPU workers) holds for the advice too
    monkeypatch.setattr(probe, "packed_step_timed", lambda topology: True)
    cpus = advise_communication(timing, Communication(workers=2), Topology("multi_worker", 2, 2, 0, True, 1, False),
                                global_batch=64, most_batch=1024)
    assert cpus.settings["accumulate_steps"] == 8 and "0.8 s of the exchange hidden, timed" in cpus.text


def test_the_chief_takes_its_advice_or_what_its_checkpoints_recorded_and_says_so(tmp_path, caplog, monkeypatch):
    import logging

    from alexnet.train.checkpoint import STATE_FILE, recorded_settings
    from alexnet.train.levers import adapt_communication, advise_communication, check_levers, recorded_adaptation
    from alexnet.train.strategy import Topology

    chief = Topology("multi_worker", 2, 2, 0, True, 1, False)
    other = Topology("multi_worker", 2, 2, 1, False, 1, False)
    timing = {"allreduce_seconds": 3.0, "compute_seconds": 0.1, "sixteen_bit_allreduce_seconds": 1.5}
    comm = Communication(workers=2)
    monkeypatch.setenv(INTEROP_VARIABLE, "1")  # packs are another test's (above)
    caplog.set_level(logging.INFO, logger="alexnet.train.levers")
    # the advice is a warning, unless the run is about to take it; only the chief says it
    advice = advise_communication(timing, comm, chief, global_batch=64, most_batch=1024)
    assert [r.levelname for r in caplog.records] == ["WARNING"] and advice.settings
    caplog.clear()
    assert advise_communication(timing, comm, chief, global_batch=64, most_batch=1024, warn=False) == advice
    assert [r.levelname for r in caplog.records] == ["INFO"]
    caplog.clear()
    advise_communication(timing, comm, other, global_batch=64, most_batch=1024)
    assert caplog.records == []
    # adapt_communication: not asked, or one worker, takes nothing (one worker is told why)
    strategy = tf.distribute.get_strategy()  # one worker: the collective hands back this worker's own row
    asked = check_settings({"adapt_communication": True})
    assert adapt_communication(strategy, check_settings({}), advice, chief, steps=100) == {}
    assert adapt_communication(strategy, asked, advice, Topology("default", 1, 1, 0, True, 1, False), steps=9) == {}
    check_levers(asked, Topology("default", 1, 1, 0, True, 1, False))
    assert "`adapt_communication` is only used with several workers: a run of one exchanges nothing, and it " \
           "changes nothing." in caplog.text
    caplog.clear()
    several = check_settings({"sync_every": 4, "allreduce_precision": "bfloat16", "accumulate_steps": 2})
    check_levers(several, Topology("default", 1, 1, 0, True, 1, False))
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "`allreduce_precision` is only used with several replicas: a run of one exchanges nothing, and it changes "
        "nothing.",
        "`sync_every` is only used with several workers: a run of one exchanges nothing, and it changes nothing."
    ], "micro-batches are a lone worker's too"
    caplog.clear()
    check_levers(check_settings({"sync_every": 4}), chief)
    assert "only used with several workers" not in caplog.text
    caplog.clear()
    taken = adapt_communication(strategy, asked, advice, chief, steps=100)
    assert taken == adaptable(advice, 1, 100) and taken["accumulate_steps"] > 1
    assert f"With `adapt_communication` the run took {_said(taken)}." in caplog.text
    assert "It resumes" not in caplog.text
    # micro-batches up to a global batch of 1024 (16 of 64), though 256 were wanted
    assert taken["accumulate_steps"] == 16 and "Micro-batches stop at a global batch of 1024" in advice.text
    # on few images, advised and taken: 16 bits alone
    small = advise_communication(timing, comm, chief, global_batch=64, most_batch=largest_batch(5000), warn=False)
    assert adapt_communication(strategy, asked, small, chief, steps=100) == {"allreduce_precision": "bfloat16"}
    # a resumed run: what its checkpoints recorded, read before any measurement, whatever the advice says now
    folder = tmp_path / "checkpoints"
    assert recorded_settings(str(folder)) == {} and recorded_settings(None) == {}
    assert recorded_adaptation(strategy, asked, chief) is None, "nothing recorded: the run measures and adapts"
    folder.mkdir()
    (folder / STATE_FILE).write_text(json.dumps({"settings": {"adapted_settings": {"accumulate_steps": 2}}}))
    assert recorded_settings(str(folder))["adapted_settings"] == {"accumulate_steps": 2}
    resumed = check_settings({"adapt_communication": True, "checkpoint_dir": str(folder)})
    caplog.clear()
    assert recorded_adaptation(strategy, resumed, chief) == {"accumulate_steps": 2}
    assert "took `accumulate_steps` = 2. It resumes, and keeps what it took when it began." in caplog.text
    assert recorded_adaptation(strategy, check_settings({"checkpoint_dir": str(folder)}), chief) is None, "not asked"
    # ... but no more micro-batches than the largest global batch allows now (lowered since): fewer, said
    took = {"accumulate_steps": 16, "allreduce_precision": "bfloat16"}
    (folder / STATE_FILE).write_text(json.dumps({"settings": {"adapted_settings": took}}))
    caplog.clear()
    assert recorded_adaptation(strategy, resumed, chief, most_batch=1024) == {
        "accumulate_steps": 16, "allreduce_precision": "bfloat16"}, "within the bound: kept"
    assert "where it took" not in caplog.text
    assert recorded_adaptation(strategy, resumed, chief, most_batch=256) == {
        "accumulate_steps": 4, "allreduce_precision": "bfloat16"}
    assert ("The run resumes with 4 micro-batches a step where it took 16 when it began: a global batch of 1024 is "
            "above the largest now, 256 (`largest_global_batch`).") in caplog.text
    assert recorded_adaptation(strategy, resumed, chief, most_batch=100) == {
        "allreduce_precision": "bfloat16"}, "none left: a step of one batch"
    assert "with 1 micro-batch a step where it took 16" in caplog.text


def test_the_levers_between_replicas_act_between_the_gpus_of_one_machine_and_the_history_says_so(caplog,
                                                                                                     monkeypatch):
    """16-bit gradients and packs act between replicas: between the eight GPUs of one machine too (MirroredStrategy),
    where the gradients are rounded as between workers. They are warned of with one replica only, and the
    communication told and counted is the replicas' exchange; local SGD stays a matter of workers."""
    import logging

    from alexnet.train import precision
    from alexnet.train.levers import check_levers
    from alexnet.train.strategy import Topology

    caplog.set_level(logging.WARNING, logger="alexnet.train.levers")
    eight = Topology("mirrored", 8, 1, 0, True, 8, True)
    monkeypatch.setattr(precision, "hardware", lambda gpu: Hardware(gpu_capabilities=((8, 0),) * 8))
    settings = check_settings({"allreduce_precision": "float16", "allreduce_pack_mb": 25, "sync_every": 4})
    comm = check_levers(settings, eight)
    assert [r.getMessage() for r in caplog.records] == [
        "`sync_every` is only used with several workers: the 8 replicas of one worker all-reduce their gradients "
        "every step, and it changes nothing."]
    assert (comm.replicas, comm.local_sgd, comm.exchanging) == (8, False, True)
    assert comm.gradient_reducer() is not None, "the gradients are cast and packed between the replicas"
    assert comm.describe() == ("float16 between the 8 replicas of one worker, packs of 25 MB, gradients all-reduced "
                               "every step")
    assert comm.bytes_per_step(1000) == 2000
    # Keras's own float32 all-reduce between replicas is an exchange too
    plain = check_levers(check_settings({}), eight)
    assert plain.gradient_reducer() is None and plain.bytes_per_step(1000) == 4000
    assert plain.describe() == ("float32 between the 8 replicas of one worker, one pack, gradients all-reduced every "
                                "step")
    # bfloat16 between GPUs that cannot sum it is refused as between workers
    monkeypatch.setattr(precision, "hardware", lambda gpu: Hardware(gpu_capabilities=((7, 0),) * 8))
    with pytest.raises(AlexnetError, match=r"compute capability 8\.0"):
        check_levers(check_settings({"allreduce_precision": "bfloat16"}), eight)
    # one replica: both kinds warned of, nothing exchanged
    caplog.clear()
    one = check_levers(settings, Topology("default", 1, 1, 0, True, 1, True))
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "`allreduce_precision`, `allreduce_pack_mb` are only used with several replicas",
        "`sync_every` is only used with several workers"]
    assert (one.bytes_per_step(1000), one.describe()) == (0.0, "one replica: nothing to all-reduce")
    # the help says where they act
    from alexnet.train.settings import specs

    wire = specs()["allreduce_precision"].help
    assert "on the wire between replicas (the GPUs of a machine, and the workers)" in wire
    assert specs()["allreduce_pack_mb"].help.startswith("all-reduce the gradients between replicas")


_MIRRORED_LEVERS = """
import json, logging, sys
from pathlib import Path
from alexnet.tfimport import tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[2])
from helpers_train import make_tree
from alexnet.train import api

logging.basicConfig(level=logging.WARNING, format="WARNING %(message)s")
data = make_tree(Path(sys.argv[1]), classes=2, per_class=8, val_per_class=0, min_side=48, max_side=64)
history = api.alexnet_train(data=data, strategy="mirrored", batch_size=2, epochs=1, steps_per_epoch=2, image_size=64,
                            dense_units=16, verbose=0, precision="float32", validation=False, check_images=False,
                            parallel=1, allreduce_precision="float16", allreduce_pack_mb=1)
print(json.dumps({name: history["params"][name]
                  for name in ("replicas", "communication", "allreduce_bytes_per_step", "jit_compile_reason")}))
"""


@pytest.mark.long  # make test-long (CI)
def test_a_mirrored_run_over_two_devices_tells_the_exchange_between_its_replicas(tmp_path):
    """MirroredStrategy over two logical CPUs, 16-bit gradients and packs: no warning that they change nothing, and
    the history's communication is the replicas' exchange."""
    import subprocess

    ran = subprocess.run([sys.executable, "-c", _MIRRORED_LEVERS, str(tmp_path), str(HERE.parent)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "ALEXNET_PROGRESS": "0"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "only used with several" not in ran.stderr, ran.stderr[-3000:]
    params = json.loads(ran.stdout.strip().splitlines()[-1])
    parameters = params.pop("allreduce_bytes_per_step") / 2
    assert parameters == int(parameters) > 0, "two bytes a number"
    assert params == {"replicas": 2, "communication": "float16 between the 2 replicas of one worker, packs of 1 MB, "
                      "gradients all-reduced every step", "jit_compile_reason": "unset: off on a CPU"}


def test_an_adapted_run_is_told_the_exchange_and_computation_of_what_it_took():
    asked, took = Communication(workers=2), Communication("bfloat16", 0, 4, workers=2)
    timing = {"bytes_per_step": asked.bytes_per_step(1000), "allreduce_seconds": 2.0,
              "sixteen_bit_allreduce_seconds": 1.2, "compute_seconds": 0.5}
    told = adapted_timing(timing, asked, took, 1000)
    # the float32 exchange as asked is kept beside the 16-bit one the run trains with
    assert told == {"bytes_per_step": 2000, "allreduce_seconds": 1.2, "compute_seconds": 2.0,
                    "asked_allreduce_seconds": 2.0}
    # the same wire format taken: the exchange as asked is the one it trains with, said once
    assert "asked_allreduce_seconds" not in adapted_timing(timing, asked, replace(asked, accumulate=4), 1000)
    # post-local SGD: its synchronous epochs' exchange is told alike; without a 16-bit timing the seconds stay
    local = Communication("float32", 0, 1, 4, 2, local_after=1)
    timing = {"bytes_per_step": local.bytes_per_step(1000), "allreduce_seconds": 1.0,
              "synchronous_bytes_per_step": 4000, "synchronous_allreduce_seconds": 2.0, "compute_seconds": 0.5}
    told = adapted_timing(timing, local, replace(local, accumulate=2), 1000)
    assert told == {**timing, "compute_seconds": 1.0}
    # local SGD's averages a step are those of the epochs taken: 2 micro-batches make epochs of 10 steps (3 averages,
    # 0.3 a step) epochs of 5 (2 averages, 0.4 a step); the synchronous epochs' exchange stays one a step
    timing = {**timing, "allreduce_seconds": 0.3, "bytes_per_step": local.bytes_per_step(1000, 10)}
    told = adapted_timing(timing, local, replace(local, accumulate=2), 1000, steps=(10, 5))
    assert told == {**timing, "allreduce_seconds": pytest.approx(0.4), "bytes_per_step": pytest.approx(2 * 4000 * 0.4),
                    "compute_seconds": 1.0}


def _weights(model_dir: Path) -> list[np.ndarray]:
    from alexnet.model.saved import load_model

    return load_model(str(model_dir)).model.get_weights()


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_accumulated_micro_batches_train_as_one_batch_of_their_images(tmp_path):
    # 4 micro-batches of 2 images and one optimizer step, against batches of 8: the same images in the same order,
    # the same rate (it counts optimizer steps), so the same weights up to the order of float additions
    data = make_tree(tmp_path / "images", classes=4, per_class=16, val_per_class=0, min_side=48, max_side=72)
    common = {"epochs": 1, "steps_per_epoch": 3, "image_size": 64, "dense_units": 32, "dropout": 0.0, "seed": 3,
              "validation": False, "precision": "float32", "verbose": 0, "check_images": False, "parallel": 1,
              "learning_rate": 0.05}
    one = training.alexnet_train(data=data, batch_size=8, model_dir=str(tmp_path / "one"), **common)
    micro = training.alexnet_train(data=data, batch_size=2, accumulate_steps=4, model_dir=str(tmp_path / "micro"),
                                   **common)
    for history in (one, micro):
        assert history["params"]["global_batch_size"] == 8 and history["params"]["steps"] == 3
    assert micro["schedule"]["learning_rate"] == one["schedule"]["learning_rate"]
    assert micro["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], rel=1e-5)
    training.alexnet_train(data=data, batch_size=8, model_dir=str(tmp_path / "first"),
                           **{**common, "learning_rate": 1e-12})
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(_weights(tmp_path / "one"),
                                                               _weights(tmp_path / "first"), strict=True))
    apart = max(float(np.max(np.abs(a - b))) for a, b in zip(_weights(tmp_path / "one"),
                                                               _weights(tmp_path / "micro"), strict=True))
    assert moved > 1e-4, "the steps changed the weights"
    # float32 sums in another order leave about 1e-6 apart; micro-batches that added up wrongly (one of them applied,
    # or their mean taken four times) leave as much apart as the steps moved
    assert apart <= 1e-2 * moved, (apart, moved)


_LOCAL_STEP = """
import json, sys
import numpy as np
from alexnet.tfimport import keras, tf
from alexnet.train.communication import Communication
from alexnet.train.model import DecayedSGD, SmoothedSparseCrossentropy

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.default_rng(0)
x, y = rng.normal(size=(4, 5)).astype("float32"), rng.integers(0, 3, 4).astype("int32")
start = rng.normal(size=(5, 3)).astype("float32")
reducer = {"local": Communication("float32", 0.0, 1, 4, 2).gradient_reducer(), "synchronous": None}[sys.argv[1]]
with strategy.scope():
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3, use_bias=False, activation="softmax")])
    model.layers[0].set_weights([start])
    optimizer = DecayedSGD(learning_rate=0.1, momentum=0.0, l2_decay=0.1)
    optimizer.gradient_reducer = reducer
    model.compile(optimizer=optimizer, loss=SmoothedSparseCrossentropy(0.0))
# both replicas take the same 4 images: a step alone must be the step of one replica on them
model.fit(np.concatenate([x, x]), np.concatenate([y, y]), batch_size=8, epochs=1, shuffle=False, verbose=0)
weights = tf.Variable(start)
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, tf.nn.softmax(x @ weights)))
expected = start - 0.1 * (tape.gradient(loss, weights).numpy() + 0.1 * start)
print(json.dumps({"apart": float(np.abs(model.layers[0].get_weights()[0] - expected).max()),
                  "moved": float(np.abs(expected - start).max())}))
"""


@pytest.mark.parametrize("exchange", ["local", "synchronous"])
def test_a_replica_stepping_alone_moves_as_one_replica_on_its_images_would(exchange):
    # Keras divides each replica's loss by the replicas in sync for the all-reduced sum; local SGD applies a
    # replica's gradients alone, and must not step at a share of the rate the schedule says (the decay unscaled)
    import subprocess

    ran = subprocess.run([sys.executable, "-c", _LOCAL_STEP, exchange], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    step = json.loads(ran.stdout.strip().splitlines()[-1])
    assert step["moved"] > 1e-2 and step["apart"] <= 1e-6, step


class _SlowAverage:
    """Stands for local SGD's average over a slow link: each takes ``seconds``, far more than a tiny model's step."""

    def __init__(self, seconds: float):
        self.communication, self.seconds, self.averages = Communication(workers=2, sync_every=2), seconds, 0

    def reset(self) -> None:
        pass

    def average(self) -> None:
        import time

        time.sleep(self.seconds)
        self.averages += 1


def _fit_with_local_sgd(slow_callback_seconds: float = 0.0) -> tuple[list[str], int]:
    """A fit of 8 steps of a tiny model with :class:`LocalSGD` averaging every 2 steps (0.05 s an average), as a run
    fits (:func:`averages_excused`), and a callback of the caller's own taking ``slow_callback_seconds`` a step: what
    TensorFlow's logger said, and the averages made."""
    import time

    from alexnet.tfimport import keras
    from alexnet.train.local_sgd import LocalSGD, averages_excused

    said: list[str] = []

    class Said(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    average = _SlowAverage(0.05)
    local = LocalSGD(average, every=2, steps=8)
    own = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: time.sleep(slow_callback_seconds))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((8, 3), "float32"), np.zeros((8, 2), "float32")
    handler, tensorflow_logger = Said(), logging.getLogger("tensorflow")
    filters = list(tensorflow_logger.filters)
    tensorflow_logger.addHandler(handler)
    try:
        with averages_excused([local, own]):
            model.fit(x, y, batch_size=1, epochs=1, verbose=0, callbacks=[local, own])
    finally:
        tensorflow_logger.removeHandler(handler)
    assert tensorflow_logger.filters == filters  # the filter went with the fit
    return said, average.averages


def test_local_sgd_s_averages_are_not_said_to_be_a_slow_callback_but_the_user_s_own_slow_callback_is():
    """tf-keras warns of callbacks slower than a step and says "Check your callbacks"; local SGD's average over a slow
    link is such a callback, the package's own, which no callback of the user's explains."""
    said, averages = _fit_with_local_sgd()
    assert averages == 4
    assert not [line for line in said if "is slow compared to the batch time" in line], said
    # a slow callback of the user's own is still said (its 0.1 s a step are beyond a step even without the averages)
    said, _ = _fit_with_local_sgd(slow_callback_seconds=0.1)
    assert [line for line in said if "Callback method `on_train_batch_end` is slow compared to the batch time" in line
            and line.endswith("Check your callbacks.")], said


def test_a_run_s_fits_excuse_its_local_sgd_s_averages_and_only_while_they_train(monkeypatch):
    from types import SimpleNamespace

    from alexnet.train import run
    from alexnet.train.local_sgd import LocalSGD

    local = LocalSGD(_SlowAverage(0.0), every=2, steps=4)
    tensorflow_logger = logging.getLogger("tensorflow")
    seen: list[bool] = []

    class Net:
        def fit(self, *args, **kwargs):
            seen.append(local.excused in tensorflow_logger.filters)
            raise RuntimeError("a step failed")

    settings = check_settings({"epochs": 1, "verbose": 0})
    with pytest.raises(RuntimeError, match="a step failed"):
        run._fit(Net(), SimpleNamespace(train=lambda size, epoch, step: None), settings,
                 SimpleNamespace(train=4), SimpleNamespace(epoch=0, step=0), [local])
    assert seen == [True] and local.excused not in tensorflow_logger.filters


def test_the_slow_callback_warning_is_dropped_only_as_far_as_the_averages_explain_it():
    from alexnet.train.local_sgd import AveragesExcused

    def record(step: float, hook: float) -> logging.LogRecord:
        message = ("Callback method `on_train_batch_end` is slow compared to the batch time (batch time: "
                   f"{step:.4f}s vs `on_train_batch_end` time: {hook:.4f}s). Check your callbacks.")
        return logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, message, None, None)

    excused = AveragesExcused()
    assert excused.filter(record(0.549, 3.0128))  # no averages counted yet: said
    excused.seconds, excused.calls = 6 * 3.0, 6  # the user's run: 3 s an average over 0.5 s steps
    assert not excused.filter(record(0.549, 3.0128))
    assert excused.filter(record(0.549, 3.8))  # 0.8 s a step of other callbacks: said
    other = logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, "something else", None, None)
    assert excused.filter(other)


# ---------------------------------------------------------------------------------------------------------------
# two workers


RUNS = {
    # name: (settings on top of the common ones, checkpoint folder or None)
    "float32": {},
    "bfloat16_packed": {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 1, "logs": True},
    "float16_packed": {"allreduce_precision": "float16", "allreduce_pack_mb": 1},
    "accumulate": {"accumulate_steps": 2, "batch_size": 2},
    "local_sgd": {"sync_every": 2, "epochs": 2, "steps_per_epoch": 3, "checkpoint": True, "keep_best": True},
    "local_sgd_resumed": {"sync_every": 2, "epochs": 3, "steps_per_epoch": 3, "checkpoint": True, "keep_best": True},
    "post_local": {"sync_every": 3, "local_sgd_after": 1, "epochs": 2, "steps_per_epoch": 3, "logs": True},
    # one image a step computes for far less time than the exchange takes: the run takes the advised micro-batches,
    # at most 2 (a global batch of 4 at most, asked for: these few images alone would allow none), and its resumed
    # second part keeps them
    "adapted": {"adapt_communication": True, "batch_size": 1, "epochs": 1, "steps_per_epoch": 3,
                "largest_global_batch": 4, "checkpoint": "adapted-checkpoints"},
    "adapted_resumed": {"adapt_communication": True, "batch_size": 1, "epochs": 2, "steps_per_epoch": 3,
                        "largest_global_batch": 4, "checkpoint": "adapted-checkpoints"},
}


@pytest.mark.workers
@pytest.mark.long
def test_two_workers_agree_under_every_lever_and_16_bit_gradients_change_nothing_beyond_rounding(tmp_path):
    codes = run_two_workers(HERE, tmp_path, free_base_port(2), timeout=600)
    assert codes == [0, 0], [(tmp_path / f"log-{i}.txt").read_text()[-3000:] for i in range(2)]
    results = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    # the running strategy kept the coordination service's heartbeat timeout: a minute, within the 120 s given
    assert [result.pop("heartbeat_ms") for result in results] == [60_000, 60_000]
    for name in RUNS:
        assert results[0][name]["digest"] == results[1][name]["digest"], f"{name}: the workers' weights differ"

    def weights(name: str) -> list[np.ndarray]:
        with np.load(tmp_path / f"{name}-0.npz") as saved:
            return [saved[f"arr_{i}"] for i in range(len(saved.files))]

    start, plain = weights("start"), weights("float32")
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(plain, start, strict=True))
    assert moved > 0
    # the stated tolerance: within 1% (bfloat16) and 0.2% (float16) of the largest change a weight made
    for name, share in (("bfloat16_packed", 0.01), ("float16_packed", 0.002)):
        apart = max(float(np.max(np.abs(a - b))) for a, b in zip(weights(name), plain, strict=True))
        assert apart <= share * moved, (name, apart, moved)
    first = results[0]
    assert first["float32"]["bytes_per_step"] == 2 * first["bfloat16_packed"]["bytes_per_step"]
    # every run timed its step's computation and its exchange before training; what it was advised leaves out what
    # it already had (16 bits on the wire, packs, local SGD's steps)
    for name, result in first.items():
        assert result["compute_seconds"] > 0 and 0 < result["communication_efficiency"] <= 1, name
        if "local_sgd_after" in RUNS[name]:  # its synchronous epoch's exchange, counted too, is not in the history
            continue
        # one exchange a step; with local SGD every average of an epoch of 3 steps, its end's too (2 averages of
        # sync_every = 2), which allreduce_seconds counts as the advice does
        share = result["compute_seconds"] / (result["compute_seconds"] + result["allreduce_seconds"])
        assert result["communication_efficiency"] == pytest.approx(share), name
    plain = first["float32"]
    assert bool(plain["advised_settings"]) == (plain["communication_efficiency"] < ADVISED_EFFICIENCY)
    # 16 bits first, and only where timed at most SIXTEEN_BIT_GAIN of float32's exchange (small tensors over
    # loopback may gain nothing)
    faster = plain["sixteen_bit_allreduce_seconds"] <= SIXTEEN_BIT_GAIN * plain["allreduce_seconds"]
    assert ("allreduce_precision" in plain["advised_settings"]) == (faster and bool(plain["advised_settings"])), plain
    if "allreduce_precision" in plain["advised_settings"]:
        assert next(iter(plain["advised_settings"].items())) == ("allreduce_precision", "bfloat16")  # a CPU sums it
    # CPU workers time no step with packs (what it hid varied from probe to probe), whatever their inter-op threads
    assert [result["hidden_seconds"] for result in first.values()] == [None] * len(first), first
    for name in ("bfloat16_packed", "float16_packed"):
        assert not {"allreduce_precision", "allreduce_pack_mb"} & set(first[name]["advised_settings"]), name
    assert first["local_sgd"]["advised_settings"].get("sync_every", 3) > 2
    assert first["accumulate"]["global_batch_size"] == 8
    # TensorBoard (the chief's): the bytes a step all-reduces, the exchange alone and the share of it hidden
    scalars = read_scalars(tmp_path / "logs-bfloat16_packed")
    assert scalars["epoch/allreduce_mb_per_step"][1] == pytest.approx(first["bfloat16_packed"]["bytes_per_step"] / 1e6)
    assert scalars["epoch/allreduce_seconds"][1] == pytest.approx(first["bfloat16_packed"]["allreduce_seconds"])
    assert 0.0 <= scalars["epoch/hidden_fraction"][1] <= 1.0
    # local SGD: the workers trained apart between averages (different data), yet end, validate and checkpoint with
    # one model; every validation image of both counted once; the resumed run went on from the third epoch
    local, resumed = first["local_sgd"], first["local_sgd_resumed"]
    assert local["val_images"] == [24.0, 24.0]
    assert local["best_epoch"] in (1, 2) and local["communication"].endswith("averaged every 2 steps")
    # weights and momentum (twice the gradients' bytes) after steps 2 and 3 of every epoch of 3: 4/3 of the bytes
    assert local["bytes_per_step"] == pytest.approx(first["float32"]["bytes_per_step"] * 2 * averages_in_epoch(3, 2)
                                                    / 3)
    assert resumed["initial_epoch"] == 2 and len(resumed["val_images"]) == 3
    assert local["digest"] != first["float32"]["digest"]
    # post-local SGD: the first epoch synchronous (one model after every step), then alone between averages (two
    # models after the second epoch's first and second steps, one again after its third)
    post = [result["post_local"] for result in results]
    assert post[0]["communication"].endswith("averaged every 3 steps after 1 synchronous epoch")
    assert [len(p["steps"]) for p in post] == [6, 6]
    same = [a == b for a, b in zip(post[0]["steps"], post[1]["steps"], strict=True)]
    assert same == [True, True, True, False, False, True], same
    # and TensorBoard tells each epoch's exchange: the gradients every step in the synchronous epoch, then weights
    # and momentum every 3 steps (2/3 of those bytes a step), each timed alone
    scalars = read_scalars(tmp_path / "logs-post_local")
    gradients = first["float32"]["bytes_per_step"] / 1e6
    assert scalars["epoch/allreduce_mb_per_step"] == {1: pytest.approx(gradients), 2: pytest.approx(gradients * 2 / 3)}
    assert post[0]["bytes_per_step"] == pytest.approx(gradients * 1e6 * 2 / 3)
    assert all(seconds > 0 for seconds in scalars["epoch/allreduce_seconds"].values())
    # adapt_communication: every worker took the chief's decision, the advised micro-batches as far as the global
    # batch of 4 asked for allows, 16 bits when advised, and packs where these workers run two or more inter-op
    # threads (packs travel while the backward pass computes) and the gradients fill more than one; the resumed run
    # kept them (it says so) and went on from the checkpoint. The history tells the exchange and computation of what
    # it trained with, and the advice for that
    chief = first["adapted"]
    assert chief["adapted_settings"]["accumulate_steps"] == 2
    assert set(chief["adapted_settings"]) <= {"allreduce_precision", "accumulate_steps", "allreduce_pack_mb"}, chief
    one_pack = gradients * (0.5 if "allreduce_precision" in chief["adapted_settings"] else 1) <= ADVISED_PACK_MB
    assert ("allreduce_pack_mb" in chief["adapted_settings"]) == (interop_threads() >= 2 and not one_pack), chief
    assert ("packs of 25 MB" in chief["communication"]) == (interop_threads() >= 2 and not one_pack), chief
    sixteen = "allreduce_precision" in chief["adapted_settings"]
    assert chief["bytes_per_step"] == first["float32"]["bytes_per_step"] / (2 if sixteen else 1)
    assert chief["communication"].startswith("bfloat16 on the wire" if sixteen else "float32 on the wire")
    assert "2 micro-batches a step" in chief["communication"]
    for result in results:
        for name in ("adapted", "adapted_resumed"):
            assert result[name]["adapted_settings"] == chief["adapted_settings"], (name, result[name])
            assert result[name]["accumulate_steps"] == 2 and result[name]["global_batch_size"] == 4
    assert chief["advice"].startswith(f"With `adapt_communication` the run took {_said(chief['adapted_settings'])}. "
                                      "One exchange alone takes"), chief["advice"]
    assert first["adapted_resumed"]["initial_epoch"] == 1
    log = (tmp_path / "log-0.txt").read_text()
    assert log.count("It resumes, and keeps what it took when it began.") == 1, log[-3000:]
    assert first["float32"]["adapted_settings"] == {} and first["float32"]["accumulate_steps"] == 1
    # the bound of the micro-batches: 96 training images over both workers allow none; asked for, 4 images
    assert first["float32"]["micro_batches_up_to"] == 1 and "accumulate_steps" not in plain["advised_settings"]
    assert chief["micro_batches_up_to"] == 4


def _said(settings: dict) -> str:
    return ", ".join(f"`{name}` = {value!r}" for name, value in settings.items())


def _worker(folder: str, index: int, base: int) -> None:
    from alexnet.tfimport import keras
    from alexnet.train.cluster import tf_config_json

    os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], index, base)
    from alexnet.train.strategy import resolve_strategy

    strategy = resolve_strategy("multi_worker", collective_timeout=120)
    from tensorflow.python.eager import context

    heartbeat_ms = context.context().config.experimental.coordination_config.heartbeat_timeout_in_ms
    root = Path(folder)
    data = make_tree(root / f"images-{index}", classes=4, per_class=12, val_per_class=3, seed=index, min_side=48,
                     max_side=72)

    class Keep(keras.callbacks.Callback):
        def __init__(self, name: str):
            super().__init__()
            self.name = name

        def on_train_begin(self, logs=None):
            if self.name == "float32":
                np.savez(root / f"start-{index}.npz", *self.model.get_weights())

        def on_train_end(self, logs=None):
            np.savez(root / f"{self.name}-{index}.npz", *self.model.get_weights())

    class StepDigests(keras.callbacks.Callback):
        """The weights' digest after every step (placed after the run's own callbacks: after local SGD's average)."""

        def __init__(self):
            super().__init__()
            self.digests = []

        def on_train_batch_end(self, batch, logs=None):
            self.digests.append(hashlib.sha256(b"".join(w.tobytes() for w in self.model.get_weights())).hexdigest())

    results = {}
    for name, extra in RUNS.items():
        extra = dict(extra)
        folder = extra.pop("checkpoint", False)
        checkpoint = str(root / (folder if isinstance(folder, str) else "checkpoints")) if folder else None
        logs = str(root / f"logs-{name}") if extra.pop("logs", False) else None
        settings = {"batch_size": 4, "epochs": 1, "steps_per_epoch": 3, "image_size": 64, "dense_units": 32,
                    "dropout": 0.0, "seed": 0, "precision": "float32", "verbose": 0, "parallel": 1,
                    "learning_rate": 0.05, "checkpoint_dir": checkpoint, "log_dir": logs, **extra}
        steps = StepDigests()
        history = training.alexnet_train(data=data, strategy=strategy, callbacks=[Keep(name), steps], **settings)
        results[name] = {"digest": history["weights_sha256"], "val_images": history["metrics"].get("val_images"),
                         "bytes_per_step": history["params"]["allreduce_bytes_per_step"],
                         "communication": history["params"]["communication"],
                         "allreduce_seconds": history["params"]["allreduce_seconds"],
                         "sixteen_bit_allreduce_seconds": history["params"]["sixteen_bit_allreduce_seconds"],
                         "hidden_seconds": history["params"]["hidden_seconds"],
                         "compute_seconds": history["params"]["compute_seconds"],
                         "advised_settings": history["params"]["advised_settings"],
                         "adapted_settings": history["params"]["adapted_settings"],
                         "accumulate_steps": history["params"]["accumulate_steps"],
                         "advice": history["params"]["communication_advice"],
                         "communication_efficiency": history["params"]["communication_efficiency"],
                         "global_batch_size": history["params"]["global_batch_size"],
                         "micro_batches_up_to": history["params"]["micro_batches_up_to"],
                         "initial_epoch": history["params"]["initial_epoch"], "best_epoch": history["best_epoch"],
                         "steps": steps.digests}
    (root / f"result-{index}.json").write_text(json.dumps({**results, "heartbeat_ms": heartbeat_ms}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO)
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))


def test_averages_beyond_an_epoch_are_said(caplog):
    """`sync_every` above an epoch's steps: the epoch's end averages the weights anyway, more often than `sync_every`
    says (the estimate counts it: test_advice.py), so the chief says so; a period within an epoch, a worker not the
    chief or a lone worker says nothing."""
    from alexnet.train.levers import warn_of_averages_beyond_an_epoch
    from alexnet.train.strategy import Topology

    chief, other = (Topology("multi_worker", 2, 2, k, k == 0, 1, False) for k in (0, 1))
    alone = Topology("default", 1, 1, 0, True, 1, False)
    with caplog.at_level("WARNING", logger="alexnet.train.levers"):
        for settings, topology in [({"sync_every": 10}, chief), ({"sync_every": 50}, other),
                                   ({"sync_every": 50}, alone)]:
            warn_of_averages_beyond_an_epoch(check_settings(settings), topology, 10)
        assert not caplog.records
        warn_of_averages_beyond_an_epoch(check_settings({"sync_every": 50}), chief, 10)
    assert caplog.messages == ["`sync_every` = 50 is more steps than an epoch's 10: the weights are averaged at every "
                               "epoch's end too, so every 10 steps; give `sync_every` <= 10 for the period it names."]
