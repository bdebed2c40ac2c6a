"""The tests' own guard against processes left running: a test of several processes that fails, in a wait that
timed out or anywhere else, leaves none of them behind (:mod:`helpers_processes`, the ``processes`` fixture)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Two tests of two workers each, both failing: one hangs in the wait for its first worker (as a multi-worker
#: test waits for its workers in turn), one fails an assertion after starting its workers.
FAILING = textwrap.dedent("""
    import sys
    from pathlib import Path

    def two_workers(processes, name):
        workers = [processes.popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(2)]
        Path(__file__).with_name(name).write_text(" ".join(str(w.pid) for w in workers))
        return workers

    def test_a_wait_that_times_out(processes):
        codes = [processes.wait(w, 1) for w in two_workers(processes, "pids-wait")]
        assert codes == [0, 0]

    def test_an_assertion_that_fails(processes):
        workers = two_workers(processes, "pids-assert")
        assert workers[0].poll() == 0, "not finished"
""")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_failed_test_of_two_workers_leaves_neither_running(tmp_path):
    (tmp_path / "test_two_workers.py").write_text(FAILING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    pids: list[int] = []
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                               "--rootdir", str(tmp_path), str(tmp_path / "test_two_workers.py")],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
        pids = [int(pid) for name in ("pids-wait", "pids-assert") for pid in (tmp_path / name).read_text().split()]
        assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
        assert "a worker still ran after 1 s: it hangs" in done.stdout
        assert "AssertionError: not finished" in done.stdout
        assert len(pids) == 4
        assert [pid for pid in pids if _alive(pid)] == [], "a failed test left a worker running"
    finally:
        for pid in pids:  # the test's own cleanup when the guard failed
            if _alive(pid):
                os.kill(pid, 9)
