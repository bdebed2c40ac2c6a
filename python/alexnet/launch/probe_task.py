"""What the check before a distributed run does on an executor: the Python that would run a worker imports
alexnet and TensorFlow.

Standard library only, and no import of alexnet: the launcher ships :func:`probe_partition` to executors
whose Python may not have alexnet at all (that is what it finds out).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping

_CHECK = (
    "import json, sys; import alexnet, tensorflow; "
    "print(json.dumps({'alexnet': alexnet.__version__, 'tensorflow': tensorflow.__version__}))"
)
#: Seconds the check may take (importing TensorFlow on a cold disk takes a while).
CHECK_TIMEOUT = 300


def check_python(python: str | None = None, env: Mapping[str, str] | None = None,
                 environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """Whether ``python`` (default: this interpreter) imports alexnet and TensorFlow, on this host, started with
    ``environ`` (default: this process's environment) plus ``env``.

    Returns ``host``, ``python``, ``ok`` and either ``alexnet`` and ``tensorflow`` (their versions) or
    ``error`` (the last line of what the import printed, e.g. ``ModuleNotFoundError: No module named
    'alexnet'``).
    """
    executable = python or sys.executable
    child_env = {**(os.environ if environ is None else environ), **(env or {}), "TF_CPP_MIN_LOG_LEVEL": "3"}
    row: dict[str, object] = {"host": socket.gethostname(), "python": executable}
    try:
        done = subprocess.run([executable, "-c", _CHECK], capture_output=True, text=True, env=child_env,
                              timeout=CHECK_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return {**row, "ok": False, "error": f"{type(error).__name__}: {error}"}
    if done.returncode == 0:
        try:
            return {**row, "ok": True, **json.loads(done.stdout.strip().splitlines()[-1])}
        except (ValueError, IndexError):
            pass
    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return {**row, "ok": False, "error": lines[-1] if lines else f"exit code {done.returncode}"}


def probe_partition(python: str | None, env: Mapping[str, str], rows: Iterable[object]) -> Iterator[str]:
    """The body of one probe task: :func:`check_python`, as one line of JSON."""
    for _ in rows:
        pass
    yield json.dumps(check_python(python, env))
