"""Progress of a distributed run, shown on the driver while the workers train.

The chief worker of a training sends a line of JSON over TCP every few seconds (epoch, step, loss, accuracy,
images per second; see :class:`alexnet.train.callbacks.Progress`), and every worker of an evaluation the images it
has scored (see :func:`alexnet.launch.evaluation.score_share`). :class:`Monitor` receives them on the driver, in a
process of its own (an R session running ``spark_apply()`` runs no Python threads meanwhile), and prints each
as one line on standard error.

The chief of a training also sends its few lines of start-up (:data:`STATUS`: the precision measured, the model
built, the link measured, what ``adapt_communication`` took), which otherwise stay in its log on its host while the
driver says nothing for minutes, and every worker its warnings as they are logged; the monitor shows each warning
once and keeps what it showed (:meth:`Monitor.shown_warnings`), which the driver then does not say again.

It also keeps what failed: a barrier task of R whose worker failed sends the worker's error
(:meth:`alexnet.launch.worker.WorkerError.task_failure`, see :func:`report_failure`) before the task stops,
because sparklyr's error of the stage says only that an R worker failed. The monitor writes each such report to
its folder and answers once it is written, and the driver reads them (:meth:`Monitor.take_failures`) to say the
worker's own error.

Run as ``python -m alexnet.launch.monitor HOST PORT_FILE DRIVER_PID [SAID_FILE [WARNINGS_ONLY]]`` (:data:`SAID_AS`
as JSON, or an empty string; :data:`WARNINGS_ONLY` as 1 or 0).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..child import python_environment, python_executable
from ..scratch import make_scratch

logger = logging.getLogger(__name__)

#: Seconds the driver waits for the monitor to listen.
START_TIMEOUT = 30.0
#: Seconds a failing worker's task waits to hand its error to the monitor.
REPORT_TIMEOUT = 10.0
#: The file of the monitor's folder that holds the failures reported, a line of JSON each, in order of arrival.
FAILURES_FILE = "failures.jsonl"
#: The file of the monitor's folder that holds the workers' warnings it has shown, a line of JSON each.
SHOWN_FILE = "shown.jsonl"
#: The chief's lines of start-up shown on the driver as they are logged (each a pattern its message begins with):
#: the precision measured and taken, the model built (its initial values sent to the other workers), the link
#: measured and what it measured, what ``adapt_communication`` took.
STATUS = tuple(re.compile(pattern) for pattern in (
    r"Measuring which precision trains faster here: ",
    r"Precision \w+ \(",
    r"Building the model on \d+ workers: ",
    r"Measuring the link between the \d+ workers",
    r"Communication: [\d.]+ MB a step in ",
    r"Communication: With `adapt_communication` the run took ",
))

#: How the front door that started the job names the core's settings and calls, for the workers' warnings and
#: lines of start-up the monitor shows: the command line's ``options`` and ``calls``
#: (:func:`alexnet.cli.common.as_typed`), which it sets here, or :data:`R_WORDS`, which the R driver sets
#: (:func:`alexnet.launch.r.r_job`); None says them as the core does.
SAID_AS: dict[str, Any] | None = None
#: :data:`SAID_AS` for a job launched from R: the lines in R's words (:func:`alexnet.errors.r_words`: ``NULL``,
#: ``TRUE``, ``"bfloat16"``), as R says the same warnings when the job ends.
R_WORDS: dict[str, Any] = {"words": "R"}
#: Whether the monitor shows the workers' warnings alone, not their progress: set by the command line's ``--quiet``
#: (warnings and errors only), which it sets here.
WARNINGS_ONLY = False


def describe(record: dict[str, Any]) -> str:
    """One progress record as a line for people: ``epoch 2/3, step 14/20: loss 1.23, accuracy 0.45, ...`` for a
    training's chief (the images per second of every worker's steps), ``evaluation, worker 1 of 2: 120/500 images,
    40 images/s`` for an evaluating worker."""
    if record.get("kind") in ("warning", "status"):
        said = "warning from worker" if record["kind"] == "warning" else "worker"
        return (f"alexnet: {said} {record.get('worker', '?')} of {record.get('workers', '?')}: "
                f"{record.get('message', '')}")
    if record.get("kind") == "evaluate":
        total = record.get("total")
        rate = record.get("images_per_second")
        return (f"alexnet: evaluation, worker {record.get('worker', '?')} of {record.get('workers', '?')}: "
                f"{record.get('images', '?')}{'' if total is None else f'/{total}'} images"
                + (f", {rate:.0f} images/s" if isinstance(rate, (int, float)) and rate > 0 else ""))
    parts = [f"epoch {record.get('epoch', '?')}/{record.get('epochs', '?')}"]
    if record.get("kind") == "step":
        parts[0] += f", step {record.get('step', '?')}/{record.get('steps', '?')}"
    shown = [(name, record[name]) for name in ("loss", "accuracy", "val_loss", "val_accuracy") if name in record]
    values = ", ".join(f"{name} {value:.4g}" for name, value in shown)
    rate = record.get("images_per_second")
    rate_text = f", {rate:.0f} images/s over all workers" if isinstance(rate, (int, float)) and rate > 0 else ""
    return f"alexnet: {parts[0]}" + (f": {values}" if values else "") + rate_text


def _serve(host: str, port_file: str, said_file: str = "", warnings_only: bool = False) -> None:
    lock = threading.Lock()
    failures = os.path.join(os.path.dirname(port_file), FAILURES_FILE)
    shown = os.path.join(os.path.dirname(port_file), SHOWN_FILE)
    warned: set[str] = set()
    said: Callable[[str], str] = lambda text: text  # noqa: E731
    if said_file:
        from ..cli.common import as_typed

        spec = json.loads(Path(said_file).read_text())
        if spec == R_WORDS:
            from ..errors import r_words

            said = r_words
        else:
            said = partial(as_typed, options=spec["options"], calls=spec["calls"])

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for raw in self.rfile:
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if record.get("kind") == "failure":  # kept for the driver, then answered: the task stops after
                    with lock, open(failures, "a") as kept:
                        kept.write(json.dumps(record) + "\n")
                    with contextlib.suppress(OSError):
                        self.wfile.write(b"kept\n")
                        self.wfile.flush()
                    continue
                warning = record.get("kind") == "warning"
                if warnings_only and not warning:
                    continue
                given = str(record.get("message", ""))
                if record.get("kind") in ("warning", "status"):
                    record["message"] = said(given)
                with lock:
                    if warning and record["message"] in warned:  # the same advice from every worker: shown once
                        continue
                    sys.stderr.write(describe(record) + "\n")
                    sys.stderr.flush()
                    if warning:
                        warned.add(record["message"])
                        with open(shown, "a") as kept:  # as the worker said it, as its history keeps it
                            kept.write(json.dumps(given) + "\n")

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    with Server((host, 0), Handler) as server:
        temporary = port_file + ".tmp"
        Path(temporary).write_text(str(server.server_address[1]))
        os.replace(temporary, port_file)
        # Ctrl-C reaches the whole process group: the driver stops the monitor as it ends, quietly
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


class Monitor:
    """A progress monitor listening on the driver; ``address`` is what the chief sends to (``tcp://host:port``)."""

    def __init__(self, host: str):
        self.host = host
        self.folder = make_scratch("alexnet-monitor-")
        port_file = os.path.join(self.folder, "port")
        said_file = ""
        if SAID_AS is not None:
            said_file = os.path.join(self.folder, "said.json")
            Path(said_file).write_text(json.dumps(SAID_AS))
        bind = "127.0.0.1" if host in ("127.0.0.1", "localhost") else "::" if ":" in host else "0.0.0.0"
        try:  # the driver's process id: the monitor ends with it, also if it is gone before the monitor starts
            self.process = subprocess.Popen(
                [python_executable(), "-m", "alexnet.launch.monitor", bind, port_file, str(os.getpid()), said_file,
                 str(int(WARNINGS_ONLY))],
                env={**python_environment(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            )
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        deadline = time.monotonic() + START_TIMEOUT
        while not os.path.exists(port_file):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the progress monitor did not start")
            time.sleep(0.05)
        self.port = int(Path(port_file).read_text())
        self.address = f"tcp://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def stop(self) -> None:
        """Stop listening."""
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()

    def take_failures(self) -> list[dict[str, Any]]:
        """The failures the workers reported since the last call, in order of arrival (see :func:`report_failure`):
        each ``worker`` and ``failure``."""
        path = os.path.join(self.folder, FAILURES_FILE)
        taken = path + ".taken"
        try:
            os.replace(path, taken)
        except FileNotFoundError:
            return []
        with open(taken) as kept:
            records = [json.loads(line) for line in kept if line.strip()]
        os.remove(taken)
        return records

    def shown_warnings(self) -> set[str]:
        """The workers' warnings this monitor has shown, as the workers logged them."""
        try:
            with open(os.path.join(self.folder, SHOWN_FILE)) as kept:
                return {str(json.loads(line)) for line in kept if line.strip()}
        except (OSError, ValueError):
            return set()

    def close(self) -> None:
        """Stop, and delete the monitor's scratch folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _endpoint(address: str | None) -> tuple[str, int] | None:
    """The host and port of a monitor's ``tcp://host:port`` address (a host in brackets for IPv6); ``None`` for
    another address or none."""
    if not address or not address.startswith("tcp://"):
        return None
    host, _, port = address[len("tcp://"):].rpartition(":")
    return (host.strip("[]"), int(port)) if port.isdigit() else None


def report_failure(address: str | None, worker: int, failure: str) -> bool:
    """Hand a worker's error (``failure``, its :meth:`~alexnet.launch.worker.WorkerError.task_failure`) to the
    driver's monitor at ``address`` (``tcp://host:port``) and wait until it is kept, at most
    :data:`REPORT_TIMEOUT` seconds; whether it was. Nothing is raised: the task fails with the error anyway."""
    endpoint = _endpoint(address)
    if endpoint is None:
        return False
    line = json.dumps({"kind": "failure", "worker": worker, "failure": failure}) + "\n"
    try:
        with socket.create_connection(endpoint, timeout=REPORT_TIMEOUT) as connection:
            connection.sendall(line.encode())
            connection.shutdown(socket.SHUT_WR)
            return connection.makefile("rb").readline().strip() == b"kept"
    except OSError as error:
        logger.debug("The failure of worker %d was not handed to the driver at %s: %s", worker, address, error)
        return False


def is_status(message: str) -> bool:
    """Is ``message``, logged below a warning, a line of start-up the driver shows (:data:`STATUS`)?"""
    return any(pattern.match(message) for pattern in STATUS)


class StatusRelay(logging.Handler):
    """Hands ``send`` each line of start-up (:func:`is_status`) logged to it below a warning, as a ``status``
    record of worker ``worker`` of ``workers`` (a training's chief: the others' are alike); a line that cannot be
    sent is dropped (``send`` says it once)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], worker: int, workers: int) -> None:
        super().__init__(logging.INFO)
        self.send, self.worker, self.workers = send, worker, workers

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:  # the warnings have their own relay
            return
        message = record.getMessage()
        if is_status(message):
            with contextlib.suppress(Exception):
                self.send({"kind": "status", "worker": self.worker, "workers": self.workers, "message": message})


#: Seconds a worker of R's barrier task goes on while the driver's monitor does not answer: then the driver is taken
#: to have ended or cancelled the job (sparklyr's cancel leaves an R task's process running).
DRIVER_GONE_AFTER = 60.0


def driver_gone(address: str | None, after: float = DRIVER_GONE_AFTER) -> Callable[[], str | None]:
    """A question for :meth:`alexnet.child.Child.result`: why a worker's result is no longer wanted, once the driver's
    monitor at ``address`` (``tcp://host:port``), which answered before, has not answered for ``after`` seconds;
    ``None`` until then (and always, without an address, or while the monitor never answered: a port the executors
    cannot reach is no reason to stop)."""
    endpoint = _endpoint(address)
    silent_since: float | None = None
    answered = False

    def gone() -> str | None:
        nonlocal silent_since, answered
        if endpoint is None:
            return None
        try:
            with socket.create_connection(endpoint, timeout=5):
                silent_since, answered = None, True
                return None
        except OSError:
            if not answered:
                return None
            now = time.monotonic()
            silent_since = now if silent_since is None else silent_since
            if now - silent_since < after:
                return None
        return (f"the driver has not answered at {address} for {after:g} s: its job was cancelled (Ctrl-C) or it "
                "ended")

    return gone


def start_monitor(host: str) -> Monitor | None:
    """A :class:`Monitor` for workers that reach the driver at ``host``; None (with a warning) when it cannot start."""
    try:
        return Monitor(host)
    except (OSError, RuntimeError) as error:
        logger.warning("No progress will be shown while the workers train: %s.", error)
        return None


if __name__ == "__main__":
    from ..child import die_with_parent

    die_with_parent(int(sys.argv[3]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's Ctrl-C: the driver stops it, or it dies with it
    _serve(sys.argv[1], sys.argv[2], sys.argv[4] if len(sys.argv) > 4 else "", sys.argv[5:6] == ["1"])
