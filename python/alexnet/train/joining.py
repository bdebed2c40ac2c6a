"""A multi-worker process's wait for the other workers to join, and its signals meanwhile.

TensorFlow's :class:`tf.distribute.MultiWorkerMirroredStrategy` waits in its constructor, holding the GIL, until
every worker of ``TF_CONFIG`` has joined: no Python signal handler nor thread runs then. :func:`meet_workers` waits
first, in Python, until every other worker answers on its port, so that a worker that never comes is an error the
caller catches; :func:`waiting_for_workers`, around the constructor, has a watchdog process say whom it waits for and
end the wait after a bound (SIGKILL: what is left when a worker that answered never joins), and lets Ctrl-C end it at
once (:func:`default_signals`); :func:`keeping_sigterm` puts back the SIGTERM handler TensorFlow replaces.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: The strategy's logger: these lines are part of building it (:func:`alexnet.train.strategy.resolve_strategy`).
logger = logging.getLogger("alexnet.train.strategy")


#: Seconds between the lines that say a worker still waits for the others to join.
JOIN_NOTE_EVERY = 30.0


def cluster_tasks(config: dict) -> tuple[tuple[str, str], list[tuple[str, str]]]:
    """This task and the others of TF_CONFIG ``config`` (as :func:`~alexnet.train.cluster.read_tf_config` gives it),
    each as its name (``"worker 1"``, ``"the chief"``) and address."""
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    me = (str(task.get("type") or "worker"), int(task.get("index") or 0))
    tasks = [((job, i), str(address)) for job in ("chief", "worker")
             for i, address in enumerate(cluster.get(job) or [])]

    def name(job: str, i: int) -> str:
        return "the chief" if job == "chief" else f"{job} {i}"

    own = next((address for key, address in tasks if key == me), "?")
    return (name(*me), own), [(name(*key), address) for key, address in tasks if key != me]


def _gave_up(me: str, workers: int, bound: float, missing: str, count: int) -> str:
    """What a worker (``me``, of ``workers``) says when it gave up after ``bound`` seconds waiting for ``count``
    others (``missing``, named) to join, and what to do: in Python (:func:`meet_workers`) or from its watchdog."""
    return (f"{me.capitalize()} of {workers} gave up after {bound:g} s (`collective_timeout`) waiting for {missing} to "
            f"join: start the same training on {'that worker' if count == 1 else 'them'} too, with the same TF_CONFIG "
            "cluster, or check that the addresses and ports TF_CONFIG names are right and reachable from this machine "
            "(a firewall may block them).")


#: Seconds between two rounds of :func:`meet_workers`' knocks on the ports of the workers that have not answered yet.
KNOCK_EVERY = 0.25

#: What a waiting worker's listener answers a knock with, before its name and a number of its own: so that a knock
#: that reaches the knocker itself, or another worker than the one TF_CONFIG puts at that address, is told.
GREETING = "alexnet-worker"
#: Seconds a knock waits for that answer (a TensorFlow server, already listening there, says nothing).
GREETING_WAIT = 0.5


def _answering(listener: Any, me: str, nonce: str) -> Callable[[], None]:
    """Answer every connection ``listener`` takes with :data:`GREETING`, ``me`` and ``nonce``, in a thread, until
    the function returned is called."""
    stop = threading.Event()
    words = f"{GREETING}\t{me}\t{nonce}\n".encode()
    listener.settimeout(0.1)

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:  # the timeout, or the listener closed
                continue
            with contextlib.suppress(OSError), connection:
                connection.sendall(words)

    thread = threading.Thread(target=serve, name="alexnet-join-answer", daemon=True)
    thread.start()

    def stopped() -> None:
        stop.set()
        thread.join()

    return stopped


def _greeting(connection: Any) -> tuple[str, str] | None:
    """The name and number a worker's listener answered on ``connection`` with, or None (no answer in
    :data:`GREETING_WAIT` seconds: a TensorFlow server, or an older version)."""
    connection.settimeout(GREETING_WAIT)
    try:
        words = connection.recv(256).decode(errors="replace").strip().split("\t")
    except OSError:
        return None
    return (words[1], words[2]) if len(words) == 3 and words[0] == GREETING else None


def _wrong_index(me: str, address: str, name: str, where: str, answered: str, nonce: str, own: str) -> str:
    """What a worker says when the knock on ``name``'s address ``where`` reached itself (``answered`` with its own
    ``nonce``: ``own``) or a worker of another name."""
    if nonce == own:
        return (f"TF_CONFIG gives this process {me} ({address}), and the address it gives {name}, {where}, is this "
                f"process's own: is this {name}? Give each worker its own `task.index` in TF_CONFIG (the index of its "
                "address in the cluster's list).")
    return (f"{where}, the address TF_CONFIG gives {name}, is answered by a worker that was given {answered}, as this "
            f"process ({me}) was: two workers have the same `task.index` in TF_CONFIG; give each worker the index of "
            "its own address in the cluster's list.")


def _resolved(address: str) -> list[str] | None:
    """The addresses the host of ``address`` (``host:port``) resolves to here; None when it does not resolve."""
    import socket

    from .cluster import host_of

    host = host_of(address).strip("[]")
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)})
    except (OSError, UnicodeError):
        return None


def _is_local(addresses: Sequence[str]) -> bool:
    """Whether one of ``addresses`` is this machine's own (a socket can be bound to it here)."""
    import socket

    for ip in addresses:
        with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((ip, 0))
            except OSError:
                continue
            return True
    return False


def warn_of_addresses(me: str, address: str, others: Sequence[tuple[str, str]]) -> None:
    """Say, before the wait for the others, what in TF_CONFIG's addresses would keep it waiting: host names this
    machine cannot resolve, and an address of this worker's own that is not this machine's. Warnings, not errors:
    names may resolve once the other machines are up, and a container's address is forwarded from its host's."""
    unresolved = [f"{name} ({where})" for name, where in [(me, address), *others] if _resolved(where) is None]
    if unresolved:
        logger.warning("TF_CONFIG names host(s) this machine cannot resolve: %s. This worker waits for them until "
                       "`collective_timeout`: correct those addresses, or make their names resolve here.",
                       ", ".join(unresolved))
    own = _resolved(address)
    if own and not _is_local(own):
        logger.warning("TF_CONFIG gives this process %s's address, %s, which is not an address of this machine: the "
                       "other workers reach it there only through a forwarded port (a container's published port); "
                       "otherwise give this process the index of its own address in the cluster's list.", me, address)


def meet_workers(config: dict, bound: float | None, hold: int | None = None, every: float | None = None) -> None:
    """Wait, in Python, until every other worker of TF_CONFIG ``config`` takes a connection on its port, before
    TensorFlow's own wait for them (:func:`waiting_for_workers`), which nothing but SIGKILL ends: a worker never
    started, a wrong address, a firewall, are then an :class:`~alexnet.errors.AlexnetError` after ``bound`` seconds
    (``collective_timeout``; ``None``: for ever), which the caller (an R session, a notebook) catches, and Ctrl-C a
    ``KeyboardInterrupt``, instead of the end of the process. Meanwhile this worker takes connections on its own
    port ``hold`` (a listener that accepts none, closed before TensorFlow's server takes the port; None: its server
    listens there already), so that the others' knocks find it; says whom it waits for, and every ``every`` seconds
    (:data:`JOIN_NOTE_EVERY`) that it still does."""
    import socket

    from ..errors import AlexnetError, run_error

    (me, address), others = cluster_tasks(config)
    if not others:
        return
    every = JOIN_NOTE_EVERY if every is None else every
    workers = len(others) + 1
    waiting = dict(others)
    warn_of_addresses(me, address, others)
    # said once for both waits, this one and TensorFlow's (waiting_for_workers), Ctrl-C as the second takes it
    logger.info("%s of %d (%s) waits for %s to join%s%s.", me.capitalize(), workers, address,
                ", ".join(f"{name} ({where})" for name, where in others),
                f", for at most {bound:g} s (`collective_timeout`)" if bound else "",
                "; Ctrl-C stops it" if _defaulted((int(signal.SIGINT),)) else "")
    listener = None
    stop_answering: Callable[[], None] = lambda: None  # noqa: E731
    nonce = os.urandom(8).hex()
    if hold is not None:
        listener = socket.socket(socket.AF_INET6 if address.startswith("[") else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("", hold))
            listener.listen(64)
            stop_answering = _answering(listener, me, nonce)
        except OSError:  # taken meanwhile: TensorFlow's server says so
            listener.close()
            listener = None
    start = time.monotonic()
    due = every
    try:
        while waiting:
            for name, where in list(waiting.items()):
                host, _, port = where.rpartition(":")
                try:
                    with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0) as knock:
                        answer = _greeting(knock)
                except (OSError, ValueError):
                    continue
                if answer is not None and (answer[1] == nonce or answer[0] != name):
                    raise AlexnetError(_wrong_index(me, address, name, where, *answer, nonce))
                del waiting[name]
            waited = time.monotonic() - start
            if not waiting:
                break
            missing = ", ".join(f"{name} ({where})" for name, where in waiting.items())
            if bound and waited >= bound:  # found while the work ran: the command line exits with 1, as for a lost one
                raise run_error(_gave_up(me, workers, bound, missing, len(waiting)))
            if waited >= due:
                logger.info("%s still waits for %s to join (%d s).", me.capitalize(), missing, round(waited))
                due += every
            time.sleep(KNOCK_EVERY)
    finally:
        stop_answering()
        if listener is not None:
            listener.close()
    logger.debug("Every worker answered after %.1f s.", time.monotonic() - start)


#: The watchdog of :func:`waiting_for_workers`, a process of its own: arguments the pid to end, the bound in seconds
#: (0: none), the seconds between notes, the note (``{seconds}`` in it) and the last words. It ends when its standard
#: input does (the strategy was built, or the worker ended).
_WATCHDOG = """
import os, select, signal, sys, time
pid, bound, every, note, fail = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
start, due = time.monotonic(), every
while True:
    wake = min(due, bound) if bound else due
    if select.select([sys.stdin], [], [], max(0.0, wake - (time.monotonic() - start)))[0]:
        sys.exit(0)
    waited = time.monotonic() - start
    if bound and waited >= bound:
        os.write(2, (fail + "\\n").encode())
        os.kill(pid, signal.SIGKILL)
        sys.exit(0)
    if waited >= due:
        os.write(2, (note.format(seconds=round(waited)) + "\\n").encode())
        due += every
"""


def _as_logged(level: int, message: str) -> str:
    """``message`` as this process's logging would write it at ``level`` for this module (through the handlers'
    filters and the first handler's format), for another process to write."""
    record = logger.makeRecord(logger.name, level, __file__, 0, message, (), None)
    handlers = logging.getLogger().handlers
    for handler in handlers:
        handler.filter(record)
    formatter = next((h.formatter for h in handlers if h.formatter is not None), None)
    return (formatter or logging.Formatter("%(levelname)s %(name)s: %(message)s")).format(record)


@contextlib.contextmanager
def waiting_for_workers(config: dict, bound: float | None, every: float | None = None) -> Iterator[None]:
    """Around the building of a multi-worker strategy, which waits (in TensorFlow's C++, holding Python's lock, so
    that neither a Python thread nor a Python signal handler runs) until every worker of TF_CONFIG ``config`` has
    joined (whom it waits for is said by :func:`meet_workers`, before): let SIGINT (Ctrl-C) end the process at once
    meanwhile, unless this process ignores it (see :func:`default_signals`); and from a watchdog process of its own,
    say every ``every`` seconds (:data:`JOIN_NOTE_EVERY`) that it still waits and, after ``bound`` seconds
    (``collective_timeout``; ``None``: for ever), which workers never joined and what to do, and end this process
    (SIGKILL, the one signal TensorFlow's wait cannot hold).

    TensorFlow's registration timeout of the coordination service (``cluster_register_timeout_in_ms``) does not end
    that wait (TensorFlow 2.21: a worker alone still waited after ten times as long), and TensorFlow takes SIGTERM
    over before it waits, for a preemption notice that only records the signal; SIGTERM is put back once the strategy
    is built (:func:`keeping_sigterm`)."""
    (me, _), others = cluster_tasks(config)
    if not others:
        yield
        return
    every = JOIN_NOTE_EVERY if every is None else every
    workers = len(others) + 1
    # whom it waits for is said by meet_workers(), first, which waits until every worker answers: this wait is short
    waited_for = ", ".join(f"{name} ({where})" for name, where in others)
    note = _as_logged(logging.INFO, f"{me.capitalize()} still waits for {waited_for} to join ({{seconds}} s).")
    fail = _as_logged(logging.ERROR, (
        _gave_up(me, workers, bound or 0, waited_for, len(others))))
    for handler in logging.getLogger().handlers:
        handler.flush()
    start = time.monotonic()
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(bound or 0), str(every), note, fail],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)  # Ctrl-C is not for it
    except OSError as error:  # pragma: no cover - a Python that cannot start itself
        logger.warning("No watchdog for the wait for the other workers (%s): it is not bounded.", error)
        watchdog = None
    try:
        with default_signals((int(signal.SIGINT),)):
            yield
    finally:
        if watchdog is not None:
            assert watchdog.stdin is not None
            watchdog.stdin.close()
            watchdog.wait()
    logger.debug("Every worker joined after %.1f s.", time.monotonic() - start)


@contextlib.contextmanager
def default_signals(signums: tuple[int, ...]) -> Iterator[None]:
    """The signals ``signums`` end the process at once within, as by default, and do again what they did on the way
    out.

    A Python handler (Ctrl-C's ``KeyboardInterrupt``) runs only once the main thread is back in Python, which a wait
    in C++ never is; what is put back is the whole ``struct sigaction`` as C sees it (a host program's handler, R's,
    runs again as before), and Python's own record of its handlers. Nothing is done outside the main thread (Python
    sets handlers there only) nor where the C library has no ``sigaction`` (Windows), and a signal this process
    ignores stays ignored (a shell's background job, or one started by ``nohup``, is not for that terminal's
    Ctrl-C)."""
    libc, chosen = _libc(), _defaulted(signums)
    if libc is None or not chosen:
        yield
        return
    kept = {}
    for signum in chosen:
        before = ctypes.create_string_buffer(_SIGACTION_BYTES)
        if libc.sigaction(signum, None, before) == 0:
            kept[signum] = (signal.getsignal(signum), before)
            signal.signal(signum, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, (python, before) in kept.items():
            if python is not None:
                signal.signal(signum, python)
            libc.sigaction(signum, before, None)


def _defaulted(signums: tuple[int, ...]) -> tuple[int, ...]:
    """Those of ``signums`` that :func:`default_signals` puts to their default action here: none outside the main
    thread or without ``sigaction``, and never one this process ignores."""
    if _libc() is None or threading.current_thread() is not threading.main_thread():
        return ()
    return tuple(signum for signum in signums if signal.getsignal(signum) != signal.SIG_IGN)


#: Bytes kept of a ``struct sigaction``: more than any C library's (glibc's is 152 on x86-64, 140 on aarch64).
_SIGACTION_BYTES = 1024


@contextlib.contextmanager
def keeping_sigterm() -> Iterator[None]:
    """Put back, on the way out, what SIGTERM did in this process on the way in.

    TensorFlow's multi-worker set-up takes SIGTERM over for its preemption notice, a handler that only records the
    signal: a worker sent SIGTERM (``kill``, ``timeout``, a scheduler ending a job) would then train on for ever.
    With what was there before put back, a worker stops on SIGTERM as a run of one process does (by default: at once,
    its last checkpoint whole; a handler of the host program, R's or the application's, runs as it did). The whole
    ``struct sigaction`` is kept, as C sees it, not Python's idea of it (Python does not know of TensorFlow's
    handler); where the C library has no ``sigaction`` (Windows), nothing is done.
    """
    libc = _libc()
    if libc is None:
        yield
        return
    before = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if libc.sigaction(int(signal.SIGTERM), None, before) != 0:
        logger.debug("SIGTERM's handler could not be read (errno %d): TensorFlow may keep it.", ctypes.get_errno())
        yield
        return
    try:
        yield
    finally:
        if libc.sigaction(int(signal.SIGTERM), before, None) != 0:  # pragma: no cover - cannot fail with a read one
            logger.warning("SIGTERM's handler could not be put back (errno %d): this worker ignores SIGTERM; stop "
                           "it with SIGINT (Ctrl-C) or SIGKILL.", ctypes.get_errno())


def _libc() -> ctypes.CDLL | None:
    """The C library, with ``sigaction``; ``None`` where there is none."""
    if sys.platform == "win32":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        libc.sigaction.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - every POSIX C library has it
        return None
    return libc
