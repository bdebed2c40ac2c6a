"""The communication estimate a multi-worker run logs before training: local SGD's averages as an epoch takes them,
and post-local SGD's synchronous epochs weighed in (the rest of the advice: test_levers.py)."""

from __future__ import annotations

import pytest

from alexnet.environment import INTEROP_VARIABLE
from alexnet.train.advice import ADVISED_EFFICIENCY, advise
from alexnet.train.communication import Communication, averaged_after, averages_in_epoch, averages_per_step
from alexnet.train.levers import advise_communication
from alexnet.train.strategy import Topology


def _share(compute: float, exchange: float) -> float:
    return compute / (compute + exchange)


def test_an_epoch_s_averages_are_counted_as_local_sgd_takes_them():
    # every 4 steps in an epoch of 5: after step 4 and after the epoch's last, not 5/4 of an average
    assert averages_in_epoch(5, 4) == 2 and averages_in_epoch(8, 4) == 2 and averages_in_epoch(10, 50) == 1
    # a checkpoint holds one model: an average after each checkpoint's step too (2, 4 and 5 of 5)
    assert averages_in_epoch(5, 4, checkpoint_every=2) == 3
    for steps in range(1, 40):
        for every in range(1, 12):
            for checkpoint in (None, 1, 3, 6, 7, 50):
                assert averages_in_epoch(steps, every, checkpoint) == sum(
                    averaged_after(step, steps, every, checkpoint) for step in range(1, steps + 1))


def test_local_sgd_averages_where_the_estimate_counts_it():
    pytest.importorskip("tensorflow")
    from alexnet.train.local_sgd import LocalSGD

    class Counted:
        communication, averages = Communication(workers=2, sync_every=3), 0

        def average(self) -> None:
            self.averages += 1

    for steps, every, checkpoint in [(10, 3, None), (10, 3, 4), (7, 50, None), (12, 4, 6)]:
        counted = Counted()
        local = LocalSGD(counted, every, steps, checkpoint)
        for batch in range(steps):
            local.on_train_batch_end(batch)
        assert counted.averages == averages_in_epoch(steps, every, checkpoint), (steps, every, checkpoint)


def test_the_estimate_counts_the_average_at_every_epoch_s_end():
    """sync_every = 4 in epochs of 5 steps averages twice an epoch: 2/5 of an average a step, which the estimate
    counted as 1/4 (0.92 of linear, nothing advised, where the run would train at 0.88). The exchange given is the
    run's figure a step (its probe's, its history's), which counts them alike: an average of 1 s, 0.4 s a step."""
    comm = Communication("bfloat16", 0, 1, 4, 2)
    assert comm.exchanges_per_step(5) == averages_per_step(5, 4) == 2 / 5 and comm.exchanges_per_step() == 1 / 4
    advice = advise(comm, 2 / 5, 3.0, global_batch=64, micro_batches=5)
    assert advice.efficiency == pytest.approx(_share(3.0, 2 / 5 * 1.0)) and advice.efficiency < ADVISED_EFFICIENCY
    assert "One exchange alone takes 0.4 s a step against 3 s of computation" in advice.text
    assert "weights and momentum averaged every 4 steps; 2 averages in an epoch of 5 steps)" in advice.text
    # and after each checkpoint's step (2, 4, 5)
    checkpointed = advise(comm, 3 / 5, 3.0, global_batch=64, micro_batches=5, checkpoint_every=2)
    assert checkpointed.efficiency == pytest.approx(_share(3.0, 3 / 5 * 1.0))
    # a period beyond an epoch's steps: one average an epoch, at its end
    beyond = advise(Communication("bfloat16", 0, 1, 50, 2), 1.0 / 10, 0.5, global_batch=64, micro_batches=10)
    assert beyond.efficiency == pytest.approx(_share(0.5, 1.0 / 10))
    # epochs of unknown steps: once in sync_every steps, as before
    assert advise(comm, 1.0 / 4, 3.0, global_batch=64).efficiency == pytest.approx(_share(3.0, 1.0 / 4))


def test_what_a_run_reports_a_step_counts_local_sgd_s_averages_as_its_advice_does():
    """The bytes and seconds a step of local SGD (``allreduce_bytes_per_step``, ``allreduce_seconds``: history,
    log line, TensorBoard) counted one average every ``sync_every`` steps where the advice counted the epoch's end's
    too: sync_every = 4 in epochs of 5 steps, 2 averages in 5 steps."""
    comm = Communication("bfloat16", 0, 1, 4, 2)
    average = 2 * 1000 * 2  # weights and momentum of 1,000 numbers in 16 bits
    assert comm.bytes_per_step(1000, 5) == pytest.approx(average * 2 / 5)
    assert comm.bytes_per_step(1000, 5, checkpoint_every=2) == pytest.approx(average * 3 / 5)
    assert comm.bytes_per_step(1000, 8) == comm.bytes_per_step(1000) == pytest.approx(average / 4)
    synchronous = Communication("bfloat16", 0, 1, 1, 2)  # every step, whatever the epoch
    assert synchronous.bytes_per_step(1000, 5) == 2000 and synchronous.exchanges_per_step(5) == 1.0


def test_the_local_steps_advised_count_the_averages_of_an_epoch():
    # 16 bits already, no room for micro-batches: local SGD is what is advised, over epochs of 10 steps
    comm = Communication("bfloat16", 0, 1, 1, 2)
    advice = advise(comm, 1.0, 6.0, global_batch=64, most_batch=64, micro_batches=10)
    # every 3 steps averages 4 times an epoch (3, 6, 9, 10): 0.88 of linear; every 4, 3 times (4, 8, 10)
    assert advice.settings == {"sync_every": 4}
    assert advice.advised_efficiency == pytest.approx(_share(6.0, 2 * 1.0 * 3 / 10))
    assert advice.advised_efficiency >= ADVISED_EFFICIENCY > _share(6.0, 2 * 1.0 * 4 / 10)
    # where none reaches the share: the fewest steps that average least often (10 and 20 of 20), not 16 (16 and 20)
    far = advise(comm, 1.0, 0.5, global_batch=64, most_batch=64, micro_batches=20)
    assert far.settings == {"sync_every": 10}
    assert far.advised_efficiency == pytest.approx(_share(0.5, 2 * 1.0 * 2 / 20))
    # local steps that would average as often as the run's own are not advised: every 11 to 16 steps of 20 averages
    # twice an epoch
    own = Communication("bfloat16", 0, 1, 11, 2)
    # (an average of 2 s, twice in 20 steps: 0.2 s a step, the run's figure)
    assert "sync_every" not in advise(own, 0.2, 0.5, global_batch=64, most_batch=64, micro_batches=20).settings


def test_post_local_sgd_is_estimated_over_its_synchronous_epochs_and_its_local_ones(monkeypatch):
    """local_sgd_after = 2 of 10 epochs: the synchronous epochs' exchange every step weighs 2/10 of the run; the
    estimate covered local SGD's epochs alone (0.80 of linear where the run trains at 0.75)."""
    comm = Communication("float32", 0, 1, 4, 2, local_after=2)
    # an average of 1 s once in 4 steps (epochs of 8 steps: twice an epoch), the gradients 0.6 s every step before
    advice = advise(comm, 1.0 / 4, 1.0, global_batch=64, micro_batches=8, synchronous_seconds=0.6, epochs=10)
    assert advice.efficiency == pytest.approx(_share(1.0, 0.2 * 0.6 + 0.8 * 0.25))
    assert ("One exchange alone takes 0.6 s a step in the 2 synchronous epochs and 0.25 s after, against 1 s of "
            "computation") in advice.text, advice.text
    assert ("about 0.75 of linear scaling over the 10 epochs if none of it overlaps (0.62 for the 2 synchronous "
            "epochs, 0.80 after).") in advice.text
    # 16 bits halve both phases' exchange; then 2 micro-batches a step bring the whole run above the share
    assert advice.settings == {"allreduce_precision": "bfloat16", "accumulate_steps": 2}
    assert advice.advised_efficiency == pytest.approx(_share(2.0, 0.2 * 0.3 + 0.8 * 0.125))
    assert advice.text.endswith("about 0.92 of linear with them (0.86 for the 2 synchronous epochs, 0.94 after)."), \
        advice.text
    # the run's epochs unknown: local SGD's alone, as before
    alone = advise(comm, 1.0 / 4, 1.0, global_batch=64, micro_batches=8, synchronous_seconds=0.6)
    assert alone.efficiency == pytest.approx(_share(1.0, 0.25)) and "for the 2 synchronous" not in alone.text
    # local SGD that never begins (local_sgd_after = epochs): the synchronous exchange throughout, no local steps
    never = advise(comm, 1.0 / 4, 1.0, global_batch=64, most_batch=64, micro_batches=8, synchronous_seconds=0.6,
                   epochs=2)
    assert never.efficiency == pytest.approx(_share(1.0, 0.6)) and "sync_every" not in never.settings
    # the run's measurement, as the run passes it: its probe's synchronous exchange, its epochs and checkpoints
    monkeypatch.setenv(INTEROP_VARIABLE, "1")  # CPU workers whose packs would not overlap: none advised
    chief = Topology("multi_worker", 2, 2, 0, True, 1, False)
    timing = {"allreduce_seconds": 1.0 / 4, "synchronous_allreduce_seconds": 0.6, "synchronous_epochs": 2.0,
              "compute_seconds": 1.0}
    told = advise_communication(timing, comm, chief, global_batch=64, most_batch=1024, micro_batches=8, epochs=10)
    assert told == advice
    # checkpoints every 2 steps: 4 averages in 8 steps, which the probe's figure a step counts (an average of 1 s)
    checkpointed = advise_communication({**timing, "allreduce_seconds": 4 / 8}, comm, chief, global_batch=64,
                                        most_batch=1024, micro_batches=8, epochs=10, checkpoint_every=2)
    assert checkpointed.efficiency == pytest.approx(_share(1.0, 0.2 * 0.6 + 0.8 * 2 * 0.5 * 4 / 8))


def test_a_share_below_a_hundredth_is_said_with_its_first_significant_digit_not_as_nothing():
    """Two workers over a slow link were told "about 0.00 of linear scaling" for 0.0075."""
    from alexnet.train.advice import linear

    assert linear(0.0075) == "0.007" and linear(0.00999) == "0.009" and linear(0.00012) == "0.0001"
    assert linear(0.01) == "0.01" and linear(0.0) == "0.00" and linear(0.8997) == "0.89"
    advice = advise(Communication(workers=2), 0.9925, 0.0075, global_batch=64, most_batch=64)
    assert advice is not None and "about 0.007 of linear scaling if none of it overlaps" in advice.text, advice.text
    assert "0.00 of linear" not in advice.text
