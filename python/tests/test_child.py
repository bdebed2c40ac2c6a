"""Children run by run_child() leave nothing behind in the temporary folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from alexnet.child import run_child


def test_a_childs_temporary_files_go_with_its_scratch_folder():
    # tempfile.mkstemp, run in the child, makes a file there and returns (descriptor, path)
    _, path = run_child(tempfile.mkstemp, what="a child that makes a temporary file")
    made = Path(path)
    assert made.parent.name == "tmp" and made.parent.parent.name.startswith("alexnet-child-"), made
    assert made.parent.parent.parent == Path(tempfile.gettempdir())
    assert not made.exists() and not made.parent.parent.exists()


def test_a_temporary_folder_the_caller_gives_the_child_is_kept(tmp_path):
    _, path = run_child(tempfile.mkstemp, env={"TMPDIR": str(tmp_path)})
    assert Path(path).parent == tmp_path and os.path.exists(path)


def test_a_child_whose_result_is_no_longer_wanted_is_stopped_saying_why(monkeypatch):
    """A worker of an R barrier task ran on after sparklyr cancelled its job (Ctrl-C): nothing stopped it."""
    import time

    import pytest

    from alexnet import child
    from alexnet.child import ChildError

    monkeypatch.setattr(child, "ABANDONED_POLL", 0.2)
    asked: list[float] = []
    start = time.monotonic()

    def abandoned() -> str | None:
        asked.append(time.monotonic() - start)
        return "the driver is gone" if len(asked) >= 3 else None

    with pytest.raises(ChildError, match="it was stopped: the driver is gone"):
        run_child(time.sleep, 60, what="worker 0", abandoned=abandoned)
    assert len(asked) == 3 and time.monotonic() - start < 30
    assert run_child(time.sleep, 0, abandoned=lambda: None) is None, "a child that ends is not stopped"
    with pytest.raises(ChildError, match="did not finish within timeout = 1 s"):  # a timeout still holds
        run_child(time.sleep, 60, timeout=1, abandoned=lambda: None)


def test_a_worker_finds_the_driver_gone_once_its_monitor_has_not_answered_for_long_enough():
    import socket
    import time

    from alexnet.launch.monitor import driver_gone

    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        never = driver_gone(address, after=0.0)
        gone = driver_gone(address, after=0.5)
        assert gone() is None  # it answers
    assert gone() is None, "silent for less than `after`"
    time.sleep(0.6)
    assert "the driver has not answered at " + address + " for 0.5 s" in (gone() or "")
    assert driver_gone(None)() is None, "without a monitor, never"
    assert never() is None, "a monitor that never answered (a port out of reach) is no reason to stop"
