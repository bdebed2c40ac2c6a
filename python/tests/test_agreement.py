"""What the workers of a run agree on before training, and what they exchange to agree: the gathers of
:mod:`alexnet.train.agreement`.

The cheap checks run in this process; the two-worker run is this file started twice as a script (see the bottom).
"""

from __future__ import annotations

import logging

import pytest

tf = pytest.importorskip("tensorflow")

from alexnet.train import agreement  # noqa: E402


class _Said(logging.Handler):
    """What TensorFlow's logger says, kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_gathers_of_rows_of_any_length_are_traced_once_and_tensorflow_warns_of_no_retracing(monkeypatch):
    # a run gathers rows of 1 to a dozen numbers a few times over: a function made anew at every call was traced
    # anew, and TensorFlow warned twice on every worker of "5 out of the last 5 calls ... triggered retracing"
    monkeypatch.setattr(agreement, "num_workers", lambda strategy: 2)  # gather on this process's one device
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    said = _Said()
    logging.getLogger("tensorflow").addHandler(said)
    try:
        rows = [[3, 1, 4], [1], [5, 9, 2, 6], [5, 3], [5, 8, 9], [7], [9, 3, 2, 3, 8, 4, 6], [2, 6, 4]] * 2
        for row in rows:
            assert agreement.all_gather_ints(strategy, row).tolist() == [row]
    finally:
        logging.getLogger("tensorflow").removeHandler(said)
    assert not [message for message in said.messages if "retracing" in message], said.messages
