"""The communication estimate a multi-worker run logs before training: local SGD's averages as an epoch takes them
(the rest of the advice: test_levers.py)."""

from __future__ import annotations

import pytest

from alexnet.train.communication import Communication, averaged_after, averages_in_epoch


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
