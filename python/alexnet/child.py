"""Running a function in a fresh Python process: one runner for the Spark launcher and the benchmark.

TensorFlow must start afresh for a multi-worker run (its cluster is set up before any other TensorFlow work)
and for a measurement pinned to some CPUs (the pinning must come before TensorFlow starts its threads), so
both run their work in a child process: :func:`run_child` pickles the function and its arguments into a
scratch folder, starts ``python -c 'from alexnet.child import main; main()'`` there, and reads back the
result (JSON) or the error. The child's output goes to a log file; it is killed when its parent dies
(Linux), so no child outlives the task that started it.

A child started from R gets the environment it would have had outside R (:func:`python_environment`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .environment import set_interop_threads
from .errors import AlexnetError
from .scratch import scratch_folder
from .tfimport import is_noise

logger = logging.getLogger(__name__)

#: Lines of a failed child's log shown in its error.
LOG_TAIL_LINES = 40
#: Seconds between the questions whether a child's result is still wanted (see :meth:`Child.result`).
ABANDONED_POLL = 5.0
_TASK_FILE = "task.pkl"
_RESULT_FILE = "result.json"
_ERROR_FILE = "error.json"
_LOG_FILE = "child.log"
_CPUS_FILE = "cpus.json"


class ChildError(AlexnetError):
    """A child process failed: ``error`` is its own Python error (``Type: message``; the message alone when
    ``known``: one of the package's own errors, which says what to change), ``log_tail`` the last lines of its log
    (said unless ``known``), ``log`` where the whole log is kept (or ``None``); ``in_run``: a ``known`` error found
    while the work ran (a worker lost, a timeout reached), which another start may not meet, where the others say
    what to change in the settings or input."""

    while_running = True

    def __init__(self, what: str, error: str, log_tail: Sequence[str], exit_code: int | None = None,
                 log: str | None = None, advice: str = "", known: bool = False, in_run: bool = False):
        self.what, self.error, self.log_tail, self.exit_code, self.log = what, error, list(log_tail), exit_code, log
        self.advice, self.known, self.in_run = advice, known, in_run
        tail = "\n  ".join(self.log_tail) if self.log_tail else "(empty)"
        where = f"\nFull log: {log}" if log else ""
        super().__init__(f"{what} failed: {error}{where}" + ("" if known else f"\nLast lines of its log:\n  {tail}")
                         + (f"\n{advice}" if advice else ""))

    def log_at(self, log: str) -> ChildError:
        """The same error, its whole log said to be at ``log`` (where it is copied to, e.g. a bucket)."""
        return ChildError(self.what, self.error, self.log_tail, self.exit_code, log, self.advice, self.known,
                          self.in_run)


def python_executable() -> str:
    """The Python interpreter to start children with (under R, ``sys.executable`` may be R itself)."""
    candidates = [sys.executable, os.path.join(sys.exec_prefix, "bin", "python3"),
                  os.path.join(sys.exec_prefix, "bin", "python"), shutil.which("python3") or ""]
    for candidate in candidates:
        if candidate and os.path.basename(candidate).lower().startswith("python") and os.access(candidate, os.X_OK):
            return candidate
    raise AlexnetError(f"No Python interpreter found to start a child process (sys.executable is {sys.executable!r}).")


def _r_library_prefix(env: Mapping[str, str]) -> str:
    """What R's ``etc/ldpaths`` puts in front of ``LD_LIBRARY_PATH`` ("" when this is not a process under R).

    R does not export the prefix it computed (``R_LD_LIBRARY_PATH``), but it exports ``R_HOME``: the prefix is
    computed again the same way, by sourcing that file with ``LD_LIBRARY_PATH`` unset.
    """
    r_home = env.get("R_HOME")
    ldpaths = os.path.join(r_home, "etc" + env.get("R_ARCH", ""), "ldpaths") if r_home else ""
    if not ldpaths or not os.path.isfile(ldpaths):
        return ""
    clean = {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}
    try:
        done = subprocess.run(["sh", "-c", '. "$1"; printf %s "$LD_LIBRARY_PATH"', "sh", ldpaths], env=clean,
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def python_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) as a Python started outside R would have it.

    R puts its own library folders in front of ``LD_LIBRARY_PATH`` (from R's ``etc/ldpaths``). A Python started
    from R would then load the system's ``libpython`` from there instead of its own, and its compiled modules
    (``_ssl``, ...) no longer load. That prefix is removed (as often as nested R processes added it), and the
    variable with it when nothing else was in it. Outside R this changes nothing.
    """
    env = dict(os.environ if environ is None else environ)
    current = env.get("LD_LIBRARY_PATH")
    prefix = _r_library_prefix(env) if current is not None else ""
    if not prefix or current is None:
        return env
    while current == prefix or current.startswith(prefix + os.pathsep):
        current = current[len(prefix) + 1:]
    if current:
        env["LD_LIBRARY_PATH"] = current
    else:
        env.pop("LD_LIBRARY_PATH")
    return env


def _dumps(value: Any) -> bytes:
    try:
        return pickle.dumps(value)
    except (pickle.PicklingError, AttributeError, TypeError):
        try:
            from pyspark import cloudpickle
        except ImportError:
            import cloudpickle  # type: ignore[no-redef]
        return cloudpickle.dumps(value)


def log_tail(path: str | os.PathLike, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last non-empty ``lines`` lines of a log file (of its last 64 KiB), without TensorFlow's CUDA probe
    messages."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 64 * 1024))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    kept = [line.rstrip() for line in text.splitlines() if line.strip() and not is_noise(line)]
    return kept[-lines:]


def _scratch_in(stack: contextlib.ExitStack, given: str, prefix: str, family: str) -> str:
    """A scratch folder made in ``given`` (kept on ``stack``), or ``""`` when ``given`` is no folder or one where no
    folder can be made (read-only, another user's)."""
    if not os.path.isdir(given):
        return ""
    try:
        return str(stack.enter_context(scratch_folder(prefix, given, family=family)))
    except OSError as error:
        logger.debug("No scratch folder in TMPDIR %s (%s): the child's temporary files go in its own folder.", given,
                     error)
        return ""


class Child:
    """A running child process (see :func:`start_child`): :meth:`result` waits for it, :meth:`stop` ends it. Use it
    as a context manager: leaving the block stops the process if it still runs and removes its scratch folder."""

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...], *, what: str, python: str | None,
                 env: Mapping[str, str] | None, cpus: Sequence[int] | None, log: str | None, prefix: str,
                 advice: str, command: Sequence[str], family: str | None = None):
        self.what, self.advice = what, advice
        child_env = python_environment()
        child_env.pop("TF_CONFIG", None)
        child_env.update({str(k): str(v) for k, v in (env or {}).items()})
        child_env.setdefault("ALEXNET_PROGRESS", "0")
        child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        package_parent = str(Path(__file__).resolve().parent.parent)
        child_env["PYTHONPATH"] = os.pathsep.join([package_parent, *filter(None, [child_env.get("PYTHONPATH")])])
        # every scratch folder made is removed when what follows fails: the child then never starts
        with contextlib.ExitStack() as stack:
            folder = stack.enter_context(scratch_folder(prefix, family=family or prefix))
            self.work = Path(folder)
            # the child's temporary files go in a folder of its own, removed with it: TensorFlow's autograph writes
            # one for each function it converts and removes it only when the interpreter ends normally, which a child
            # does not (os._exit); in the temporary folder the caller gives (`env`'s TMPDIR) when it gives one that
            # exists and takes a folder, else in the child's own folder (as Python's tempfile falls back from a TMPDIR
            # it cannot use)
            given = str((env or {}).get("TMPDIR") or "")
            child_env["TMPDIR"] = _scratch_in(stack, given, prefix, family or prefix) if given else ""
            if not child_env["TMPDIR"]:
                (self.work / "tmp").mkdir()
                child_env["TMPDIR"] = str(self.work / "tmp")
            (self.work / _TASK_FILE).write_bytes(_dumps((function, args)))
            (self.work / _CPUS_FILE).write_text(json.dumps(list(cpus) if cpus else []))
            self.kept_log = log
            self.log_path = Path(log) if log else self.work / _LOG_FILE
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            argv = [*command, python or python_executable(), "-c", "from alexnet.child import main; main()", folder,
                    str(os.getpid())]
            with open(self.log_path, "wb") as out:
                self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=child_env, cwd=folder)
            self._stack = stack.pop_all()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._stack.close()

    def stop(self) -> None:
        """Kill the process if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _error(self, message: str, code: int | None, known: bool = False, in_run: bool = False) -> ChildError:
        return ChildError(self.what, message, log_tail(self.log_path), code, self.kept_log, self.advice, known,
                          in_run)

    def result(self, timeout: float | None = None, abandoned: Callable[[], str | None] | None = None) -> Any:
        """The function's result once the process has ended; :class:`ChildError` when it failed or still ran
        after ``timeout`` seconds, or when ``abandoned()`` (asked every :data:`ABANDONED_POLL` seconds) gives the
        reason its result is no longer wanted (it is then killed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            waits = [ABANDONED_POLL] if abandoned is not None else []
            if deadline is not None:
                waits.append(max(0.0, deadline - time.monotonic()))
            wait = min(waits) if waits else None
            try:
                code = self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                self.stop()
                raise self._error(f"TimeoutError: it did not finish within timeout = {timeout:g} s and was stopped: "
                                  "raise `timeout`", None) from None
            reason = abandoned() if abandoned is not None else None
            if reason:
                self.stop()
                raise self._error(f"it was stopped: {reason}", None) from None
        if code == 0 and (self.work / _RESULT_FILE).exists():
            return json.loads((self.work / _RESULT_FILE).read_text())
        known = in_run = False
        try:
            error = json.loads((self.work / _ERROR_FILE).read_text())
            known, in_run = bool(error.get("known")), bool(error.get("in_run"))
            message = str(error["message"]) if known else f"{error['type']}: {error['message']}"
        except (OSError, ValueError, KeyError, AttributeError):
            message = f"its process {ended_text(code)} without a result"
        raise self._error(message, code, known, in_run)


def ended_text(code: int | None) -> str:
    """How a process with exit code ``code`` ended, for an error: a negative code is the signal that killed it
    (``was killed by signal 9 (SIGKILL)``: out of memory, or killed by hand), else ``ended with exit code 1``."""
    if code is not None and code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {-code}{name}"
    return f"ended with exit code {code}"


def start_child(function: Callable[..., Any], *args: Any, what: str = "a child process", python: str | None = None,
                env: Mapping[str, str] | None = None, cpus: Sequence[int] | None = None, log: str | None = None,
                prefix: str = "alexnet-child-", advice: str = "", command: Sequence[str] = (),
                family: str | None = None) -> Child:
    """Start ``function(*args)`` in a fresh Python process and return at once: a :class:`Child` (see
    :func:`run_child` for the environment, ``cpus``, ``log``, ``family`` and the errors). ``command`` goes before the
    Python command line (``["ip", "netns", "exec", "name"]`` runs the child in a network namespace)."""
    return Child(function, args, what=what, python=python, env=env, cpus=cpus, log=log, prefix=prefix,
                 advice=advice, command=command, family=family)


def run_child(function: Callable[..., Any], *args: Any, what: str = "a child process", python: str | None = None,
              env: Mapping[str, str] | None = None, cpus: Sequence[int] | None = None, log: str | None = None,
              prefix: str = "alexnet-child-", advice: str = "", timeout: float | None = None,
              abandoned: Callable[[], str | None] | None = None, family: str | None = None) -> Any:
    """``function(*args)`` run in a fresh Python process; its result (which must be JSON-serialisable).

    The child runs ``python`` (default: this interpreter) with this process's environment as Python outside
    R would have it (:func:`python_environment`) plus ``env``, without ``TF_CONFIG`` unless ``env`` has one,
    ``ALEXNET_PROGRESS=0`` and ``TF_CPP_MIN_LOG_LEVEL=2`` unless set, pinned to ``cpus`` when given (before
    it imports anything else). Its output goes to ``log`` (default: a file in its scratch folder, deleted with
    it), its temporary files to its scratch folder too (``TMPDIR``; when ``env`` gives a ``TMPDIR`` that exists,
    to a scratch folder of the same prefix made there, so that they stay on the disk the caller chose: what
    TensorFlow's autograph writes there, removed only when Python ends normally, which a child does not, goes with
    the folder, and what else is in the caller's folder stays). The folders, ``<prefix>...`` in the temporary
    folder, are removed when the child ends, and, should this process be killed, by the next start of a child whose
    ``family`` (default: ``prefix``) begins its name, in the same folder, once this process is gone
    (:func:`alexnet.scratch.sweep_stale`). A failure raises
    :class:`ChildError` naming ``what``, with the child's own error, the last lines of its log and ``advice``;
    so does a child still running after ``timeout`` seconds, or once ``abandoned()`` gives a reason (see
    :meth:`Child.result`), which is killed.
    """
    with start_child(function, *args, what=what, python=python, env=env, cpus=cpus, log=log, prefix=prefix,
                     advice=advice, family=family) as child:
        return child.result(timeout, abandoned)


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies; exit now if the parent is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if parent and os.getppid() != parent:
        os._exit(3)


def main() -> None:
    """Entry point of a child started by :func:`run_child` (not for direct use)."""
    folder, parent = Path(sys.argv[1]), int(sys.argv[2])
    die_with_parent(parent)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alexnet").setLevel(logging.INFO)
    try:
        cpus = json.loads((folder / _CPUS_FILE).read_text())
        if cpus:  # before unpickling imports anything that might start threads
            os.sched_setaffinity(0, set(cpus))
            set_interop_threads()  # `import alexnet` saw the parent's CPUs; TensorFlow is not imported yet
        function, args = pickle.loads((folder / _TASK_FILE).read_bytes())
        result = function(*args)
        temporary = folder / (_RESULT_FILE + ".tmp")
        temporary.write_text(json.dumps(result))
        os.replace(temporary, folder / _RESULT_FILE)
    except BaseException as error:
        traceback.print_exc()
        kind = type(error)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
        from .errors import AlexnetError

        known = isinstance(error, AlexnetError) and not isinstance(error, ChildError)  # says what to change itself
        in_run = known and bool(getattr(error, "while_running", False))
        (folder / _ERROR_FILE).write_text(json.dumps({"type": name, "message": str(error), "known": known,
                                                      "in_run": in_run}))
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: TensorFlow's servers and threads can take long to stop
    os._exit(0)
