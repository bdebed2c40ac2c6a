"""r_call(): the core's exceptions as values the R package raises as conditions of their kind."""

from __future__ import annotations

import pytest

from alexnet.errors import BoardError, CallFailure, r_call
from alexnet.launch.worker import WorkerError


def test_r_call_returns_the_value_when_nothing_is_raised() -> None:
    assert r_call(lambda a, b=0: a + b, 2, b=3) == 5


def test_r_call_returns_the_exception_with_its_lineage_and_whole_message() -> None:
    def fail() -> None:
        raise BoardError("no board at /x: " + "y" * 5000)

    failure = r_call(fail)
    assert isinstance(failure, CallFailure)
    assert failure.classes[:2] == ["BoardError", "AlexnetError"]
    assert failure.message == "no board at /x: " + "y" * 5000
    assert failure.fields == {}
    assert "in fail" in failure.traceback


def test_a_worker_error_carries_its_worker_and_log() -> None:
    def fail() -> None:
        raise WorkerError(1, 4, "ValueError: bad", ["a line"], 1, "host:/tmp/w1.log")

    failure = r_call(fail)
    assert failure.classes[:3] == ["WorkerError", "ChildError", "AlexnetError"]
    assert failure.fields == {"worker": 1, "workers": 4, "log": "host:/tmp/w1.log"}


def test_other_errors_keep_their_python_names() -> None:
    import json

    failure = r_call(json.loads, "{")
    assert failure.classes[0] == "json.decoder.JSONDecodeError"
    assert "ValueError" in failure.classes


def test_interrupts_are_not_turned_into_values() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        r_call(interrupted)
