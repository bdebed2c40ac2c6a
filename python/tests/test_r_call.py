"""r_call(): the core's exceptions as values the R package raises as conditions of their kind."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from alexnet.errors import BoardError, CallFailure, LayoutError, r_call, r_warnings
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


def test_the_warnings_logged_during_a_call_are_kept_for_r_from_every_thread_once() -> None:
    def work(fail: bool) -> int:
        log = logging.getLogger("alexnet.data.upload")
        log.info("said at INFO: not kept")
        log.warning("%s left out", "a.JPEG")
        thread = threading.Thread(target=log.error, args=("from a packing thread",))
        thread.start()
        thread.join()
        logging.getLogger("elsewhere").warning("not the package's")
        if fail:
            raise LayoutError("damaged")
        return 1

    r_warnings()  # whatever earlier calls left
    assert r_call(work, False) == 1
    assert r_warnings() == ["a.JPEG left out", "from a packing thread"]
    assert r_warnings() == []
    assert isinstance(r_call(work, True), CallFailure)
    assert r_warnings() == ["a.JPEG left out", "from a packing thread"]
    logging.getLogger("alexnet.data").warning("outside a call")
    assert r_warnings() == []
    assert not any(type(h).__name__ == "KeptWarnings" for h in logging.getLogger("alexnet").handlers)


def test_without_logging_configured_the_package_warnings_reach_standard_error() -> None:
    import subprocess
    import sys

    code = ("import alexnet, logging; logging.getLogger('alexnet.data.upload').warning('left out: a.JPEG'); "
            "logging.getLogger('alexnet.data.upload').info('not shown')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr == "left out: a.JPEG\n"


def test_warnings_go_to_r_once_even_where_a_library_configured_the_root_logger(caplog) -> None:
    # TensorFlow's export calls logging.basicConfig: a root handler that would print each warning a second time
    root = logging.getLogger()
    printed: list[str] = []

    class Printed(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            printed.append(record.getMessage())

    handler = Printed(logging.INFO)
    root.addHandler(handler)
    package = logging.getLogger("alexnet")
    level = package.level
    package.setLevel(logging.INFO)  # a user who asked for the package's INFO lines
    try:
        def work() -> None:
            logging.getLogger("alexnet.model.export").warning("no pin is published")
            logging.getLogger("alexnet.model.export").info("wrote the export")

        r_warnings()
        r_call(work)
        assert r_warnings() == ["no pin is published"]
        assert printed == ["wrote the export"], "below a warning, the root's handlers still have it"
        logging.getLogger("alexnet.model.export").warning("outside a call")
        assert printed[-1] == "outside a call", "outside r_call, propagation is as it was"
    finally:
        root.removeHandler(handler)
        package.setLevel(level)


def test_the_reason_of_a_file_error_is_the_system_s_words_and_of_others_their_kind() -> None:
    from alexnet.errors import reason

    with pytest.raises(OSError) as raised:
        Path("/nonexistent/file").read_bytes()
    assert reason(raised.value) == "No such file or directory"
    assert reason(ValueError("bad")) == "ValueError: bad"
    assert reason(OSError("no errno")) == "OSError: no errno", "an OSError without the system's words keeps its text"
    assert reason(FileNotFoundError("bucket/missing.jpg")) == "No such file or directory", "as a bucket raises it"
