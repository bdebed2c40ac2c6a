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
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

from ..errors import AlexnetError, run_error
from . import greeting

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
#: Seconds a worker that found another cluster than its own keeps answering knocks before it stops: a round of the
#: others' knocks, which then find it too.
CLUSTER_TOLD_FOR = 2.0


def _knock(where: str, said: bytes) -> greeting.Greeting | Literal[False] | None:
    """Knock on ``where`` (``host:port``): the line the worker there said, after which it is told ``said``; None when
    the port took the connection but said nothing (a TensorFlow server); False when nothing took it."""
    import socket

    host, _, port = where.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0) as knock:
            answer = greeting.read_greeting(knock)
            if answer is not None:
                with contextlib.suppress(OSError):
                    knock.sendall(said)
            return answer
    except (OSError, ValueError):
        return False

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
    (:data:`JOIN_NOTE_EVERY`) that it still does. Workers that meet tell each other the cluster each was given
    (:mod:`.greeting`): another cluster than this worker's is an :class:`~alexnet.errors.AlexnetError` naming both,
    on each worker that meets it, before TensorFlow waits for workers that would never join it."""
    import socket


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
    nonce, mine = os.urandom(8).hex(), greeting.cluster_of(config)
    found: list[str] = []  # another cluster than this worker's, as a knock on its port or its knock on another's said
    if hold is not None:
        listener = socket.socket(socket.AF_INET6 if address.startswith("[") else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("", hold))
            listener.listen(64)
            stop_answering = greeting.answering(listener, me, nonce, address, mine, found)
        except OSError:  # taken meanwhile: TensorFlow's server says so
            listener.close()
            listener = None
    start = time.monotonic()
    due = every
    said = greeting.words(me, nonce, address, mine)
    told: set[str] = set()  # the workers knocked on once another cluster was found: each was told this one
    try:
        while waiting and not found:
            for name, where in list(waiting.items()):
                answer = _knock(where, said)
                if found:  # the knock told it this worker's cluster, which it compares with its own
                    told.add(name)
                if answer is False or found:
                    continue
                if answer is not None and answer.nonce != nonce and answer.cluster not in (None, mine):
                    found.append(greeting.clusters_differ(me, address, mine, answer))
                    told.add(name)
                    continue
                if answer is not None and (answer.nonce == nonce or answer.name != name):
                    raise AlexnetError(greeting.wrong_index(me, address, name, where, answer.name, answer.nonce,
                                                            nonce))
                del waiting[name]
            waited = time.monotonic() - start
            if not waiting or found:
                break
            missing = ", ".join(f"{name} ({where})" for name, where in waiting.items())
            if bound and waited >= bound:  # found while the work ran: the command line exits with 1, as for a lost one
                raise run_error(_gave_up(me, workers, bound, missing, len(waiting)))
            if waited >= due:
                logger.info("%s still waits for %s to join (%d s).", me.capitalize(), missing, round(waited))
                due += every
            time.sleep(KNOCK_EVERY)
        if found:  # a settings error: every worker not met yet is knocked on once, so that each that was given
            # another cluster than this one learns of it even when its own knocks reach nobody (an address its list
            # names otherwise), and the others' next knocks are answered meanwhile, so that they tell it too
            for name, where in waiting.items():
                if name not in told:
                    _knock(where, said)
            time.sleep(CLUSTER_TOLD_FOR)
            raise AlexnetError(found[0])
    finally:
        stop_answering()
        if listener is not None:
            listener.close()
    logger.debug("Every worker answered after %.1f s.", time.monotonic() - start)


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
    # whom it waits for is said by meet_workers(), first, which waits until every worker answers: this wait is short;
    # the watchdog names those it knows have not joined ({missing})
    note = _as_logged(logging.INFO, f"{me.capitalize()} still waits for {{missing}} to join ({{seconds}} s).")
    fails = [_as_logged(logging.ERROR, _gave_up(me, workers, bound or 0, "{missing}", count)) for count in (1, 2)]
    for handler in logging.getLogger().handlers:
        handler.flush()
    start = time.monotonic()
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-c", greeting.WATCHDOG, str(os.getpid()), str(bound or 0), str(every), note, *fails,
             json.dumps(others), greeting.GREETING, greeting.STILL_WAITS, greeting.ANSWERS_NO_MORE],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)  # Ctrl-C is not for it
    except OSError as error:  # pragma: no cover - a Python that cannot start itself
        logger.warning("No watchdog for the wait for the other workers (%s): it is not bounded.", error)
        watchdog = None
    try:
        with default_signals((int(signal.SIGINT),)):
            yield
    except Exception as error:
        stopped = greeting.partner_stopped(config, error)
        if stopped is None:
            raise
        raise run_error(stopped) from error
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
