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


def convert_once() -> str:
    """Has TensorFlow's autograph convert a function (it writes the source to a temporary file, which it removes only
    as Python ends normally, which a child does not); the temporary folder it wrote in."""
    import tensorflow as tf

    @tf.function
    def double_if_positive(x):
        if x > 0:  # a Python `if` on a tensor: autograph converts it
            x = x * 2
        return x

    double_if_positive(tf.constant(1))
    return tempfile.gettempdir()


def test_a_temporary_folder_the_caller_gives_the_child_holds_its_files_in_a_folder_removed_with_it(tmp_path):
    """The caller's TMPDIR: the child's temporary files, autograph's among them, go in a scratch folder of the
    child's there (on the disk the caller chose), removed when the child ends; the caller's own files stay."""
    mine = tmp_path / "the-callers.txt"
    mine.write_text("kept")
    here = str(Path(__file__).resolve().parent)
    used = Path(run_child(convert_once, env={"TMPDIR": str(tmp_path), "PYTHONPATH": here}, prefix="alexnet-test-"))
    assert used.parent == tmp_path and used.name.startswith("alexnet-test-"), used
    assert list(tmp_path.iterdir()) == [mine] and mine.read_text() == "kept", "autograph's file went with the folder"
    _, path = run_child(tempfile.mkstemp, env={"TMPDIR": str(tmp_path)})
    assert Path(path).parent.parent == tmp_path and not os.path.exists(path)
    assert list(tmp_path.iterdir()) == [mine]
    # a TMPDIR that does not exist: the child's files go with its scratch folder, as without one
    _, path = run_child(tempfile.mkstemp, env={"TMPDIR": str(tmp_path / "missing")})
    assert Path(path).parent.name == "tmp" and Path(path).parent.parent.name.startswith("alexnet-child-"), path
    assert not os.path.exists(path) and not (tmp_path / "missing").exists()


def test_a_temporary_folder_that_takes_no_folder_leaves_the_child_its_own(tmp_path, monkeypatch):
    """A caller's TMPDIR that exists but where no folder can be made (/sys: read-only, for root too) stopped the child
    from starting (PermissionError); Python's tempfile falls back from it, and the child's files now go with its own
    scratch folder. A child that cannot start (its log's folder cannot be made) leaves no scratch folder behind."""
    import glob

    import pytest

    try:
        tempfile.mkdtemp(dir="/sys")
        pytest.skip("no read-only /sys here")
    except OSError:
        pass
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where this process's scratch folders go
    monkeypatch.setattr(tempfile, "tempdir", None)
    _, path = run_child(tempfile.mkstemp, env={"TMPDIR": "/sys"}, prefix="alexnet-test-")
    assert Path(path).parent.name == "tmp" and Path(path).parent.parent.name.startswith("alexnet-test-"), path
    assert not os.path.exists(path) and not glob.glob("/sys/alexnet-test-*")
    with pytest.raises(OSError):
        run_child(os.getpid, env={"TMPDIR": "/sys"}, prefix="alexnet-test-", log="/sys/alexnet-test/child.log")
    assert list(tmp_path.iterdir()) == [], "the scratch folder of a child that never started is removed"


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


def convert_then_wait(index: int, addresses: list[str]) -> None:
    """A worker's function that has TensorFlow's autograph convert a function (it writes its source to a temporary
    file), says so with its process id in a file of its scratch folder (its working folder), and waits."""
    import time

    convert_once()
    Path("converted").write_text(str(os.getpid()))
    time.sleep(300)


def worker_index(index: int, addresses: list[str]) -> int:
    return index


def test_a_killed_workers_temporary_files_go_with_its_folder_at_the_next_workers_start(tmp_path, monkeypatch,
                                                                                     processes):
    """A worker's task killed (SIGKILL: its child dies with it) after autograph converted a function leaves the
    child's scratch folder, autograph's file in it, and nothing in the temporary folder itself; the next worker to
    start on the host, whatever its index, removes it, and keeps the folder of a worker whose task still runs."""
    import signal
    import sys
    import time

    from alexnet.launch.worker import run_worker
    from alexnet.scratch import process_alive

    here = str(Path(__file__).resolve().parent)
    env = {**os.environ, "TMPDIR": str(tmp_path), "ALEXNET_PROGRESS": "0", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    script = ("import sys\nfrom alexnet.launch.worker import run_worker\nfrom test_child import convert_then_wait\n"
              "run_worker(convert_then_wait, int(sys.argv[1]), ['a:1', 'b:2'])\n")
    tasks = {index: processes.popen([sys.executable, "-c", script, str(index)], env=env, cwd=str(tmp_path))
             for index in (3, 5)}
    marks: dict[int, Path] = {}
    deadline = time.monotonic() + 180
    while len(marks) < 2 and time.monotonic() < deadline:
        for index, task in tasks.items():
            assert task.poll() is None, f"task {index} ended with {task.returncode}"
            found = list(tmp_path.glob(f"alexnet-worker{index}-*/converted"))
            if found and found[0].read_text():
                marks[index] = found[0]
        time.sleep(0.2)
    assert sorted(marks) == [3, 5], "both workers converted a function"
    killed = marks[3].parent
    assert list((killed / "tmp").glob("__autograph_generated_file*.py")), "autograph wrote into the worker's folder"
    child = int(marks[3].read_text())
    tasks[3].send_signal(signal.SIGKILL)
    tasks[3].wait(30)
    deadline = time.monotonic() + 30
    while process_alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(child), "the worker's process dies with its task"
    assert killed.exists() and not list(tmp_path.glob("__autograph*")), "left in its folder, not the temporary one"

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert run_worker(worker_index, 0, ["a:1"], env={"PYTHONPATH": env["PYTHONPATH"]}) == 0
    assert not killed.exists(), "the next worker's start removes the folder of the killed one"
    assert marks[5].exists(), "the folder of a worker still running stays"
    assert sorted(p.name.split("-")[1] for p in tmp_path.glob("alexnet-worker*")) == ["worker5"]


def test_a_child_killed_by_a_signal_names_the_signal_and_one_that_exits_its_code():
    """A negative exit code is the signal that killed the process: said by its number and name, not as a code."""
    import pytest

    from alexnet.child import ChildError

    with pytest.raises(ChildError, match=r"its process was killed by signal 6 \(SIGABRT\) without a result") as error:
        run_child(os.abort, what="worker 1")
    assert error.value.exit_code == -6
    with pytest.raises(ChildError, match="its process ended with exit code 3 without a result"):
        run_child(os._exit, 3, what="worker 1")


def test_a_childs_own_error_says_whether_it_was_found_while_the_work_ran():
    """A child's error of the package's own is `known`; one found while the work ran (a worker lost, a bound reached)
    is also `in_run`, which a settings error is not: a relaunch may pass the first, never the second."""
    import functools

    import pytest

    from alexnet.child import ChildError

    for raised, in_run in (("AlexnetError('Give `batch_size` = 8.')", False),
                           ("run_error('Worker 1 was lost.')", True)):
        with pytest.raises(ChildError) as failed:  # exec: a function the child can unpickle
            run_child(functools.partial(exec, f"from alexnet.errors import *\nraise {raised}"), what="a child")
        assert failed.value.known and failed.value.in_run is in_run
        assert failed.value.log_at("h:/log").in_run is in_run
