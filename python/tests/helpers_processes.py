"""Processes a test starts, none left running when it ends: a failed wait or assertion stops them all.

A test that starts several processes and waits for each in turn must not leave the others running when one
wait fails: :class:`Processes` keeps every process started (or added) through it and stops those still running
when it is left, a ``with`` block or the ``processes`` fixture of ``conftest.py``, whatever ended the test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import pytest


class Processes:
    """The processes a test started; :meth:`stop_all` (run on leaving it) stops those still running."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen] = []

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        """``subprocess.Popen(args, **kwargs)``, kept to be stopped."""
        return self.add(subprocess.Popen(list(args), **kwargs))

    def add(self, process: subprocess.Popen) -> subprocess.Popen:
        """Keep ``process`` (started elsewhere) to be stopped."""
        self.started.append(process)
        return process

    def wait(self, process: subprocess.Popen, limit: float, what: str = "a worker") -> int:
        """``process``'s exit code within ``limit`` seconds; past that, every process is stopped and the test fails."""
        try:
            return process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.stop_all()
            pytest.fail(f"{what} still ran after {limit:.0f} s: it hangs")

    def stop_all(self, grace: float = 0.0) -> None:
        """Stop every process still running: SIGTERM and up to ``grace`` seconds to end (when ``grace`` > 0, for a
        process that cleans up on SIGTERM), then SIGKILL (which also ends a stopped one); each is waited for."""
        running = [process for process in self.started if process.poll() is None]
        if grace > 0:
            for process in running:
                process.send_signal(signal.SIGTERM)
            for process in running:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=grace)
        for process in running:
            if process.poll() is None:
                process.kill()
            process.wait()


def ctrl_c_as_in_a_terminal() -> None:
    """A ``preexec_fn``: the process started gets SIGINT at its default disposition, as a command typed in a terminal
    does, whatever the tests' own process was started with.

    A shell that runs a command in the background without job control (``make test &`` in a script, a CI step)
    starts it with SIGINT ignored, and every process under it inherits that; Python then leaves SIGINT ignored
    rather than raising ``KeyboardInterrupt``, as it should for a background job. A test of what Ctrl-C does starts
    its process this way so that it checks the product and not how the test run was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_until(stream: Any, text: str, timeout: float) -> str:
    """What a child wrote to ``stream`` (its text pipe, read unbuffered, so that ``communicate()`` reads the rest)
    up to ``text`` and perhaps a little beyond; an ``AssertionError`` with what was read when the pipe ends, or
    ``timeout`` seconds pass, before ``text``."""
    import selectors

    read = ""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while text not in read:
            left = deadline - time.monotonic()
            assert left > 0 and selector.select(left), f"nothing with {text!r} within {timeout:g} s: {read}"
            chunk = os.read(stream.fileno(), 65536)
            assert chunk, f"the pipe ended before {text!r}: {read}"
            read += chunk.decode(errors="replace")
    return read


def ctrl_c(child: subprocess.Popen, timeout: float) -> tuple[str, str, float]:
    """Ctrl-C to ``child`` (started with :func:`ctrl_c_as_in_a_terminal`): what it wrote to its standard output and
    error, and the seconds it took to end, which must be under ``timeout``; an ``AssertionError`` when it ended
    without the ``KeyboardInterrupt`` Ctrl-C raises."""
    child.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, err = child.communicate(timeout=timeout)
    seconds = time.monotonic() - interrupted
    assert "KeyboardInterrupt" in err, err[-2000:]
    return out, err, seconds
