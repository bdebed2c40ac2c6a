"""What workers joining say to each other on their ports, before TensorFlow starts, and of one that stopped.

A waiting worker's listener answers each knock with a line of its own (:data:`GREETING`, its name, a number of its
own, its address and the cluster its TF_CONFIG names), and the knocker answers with its line: so that a knock that
reaches the knocker itself (:func:`wrong_index`), another worker than the one TF_CONFIG puts at that address, or a
worker given another cluster (:func:`clusters_differ`), is told on both sides, before TensorFlow waits for workers
that would never join it (:func:`alexnet.train.joining.meet_workers`); and what a worker says when TensorFlow's
wait for the others failed as one of them stopped (:func:`partner_stopped`), and the knocks by which the watchdog of
that wait names the workers known not to have joined (:data:`WATCHDOG`).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

#: The first word of a waiting worker's line.
GREETING = "alexnet-worker"
#: Seconds a knock waits for the line of the worker it reached (a TensorFlow server, already listening there, says
#: nothing), and a listener for the knocker's line.
GREETING_WAIT = 0.5
#: The most bytes of a line read: a cluster of thousands of workers.
MOST_BYTES = 1 << 20


class Greeting(NamedTuple):
    """What a worker said of itself: its name (``"worker 1"``), its number, its address and its cluster (``None``
    when it did not say them: an older version)."""

    name: str
    nonce: str
    address: str
    cluster: dict[str, list[str]] | None


def cluster_of(config: dict) -> dict[str, list[str]]:
    """The cluster of TF_CONFIG ``config``, every job's tasks a list of addresses, as workers compare them."""
    return {str(job): [str(a) for a in (tasks if isinstance(tasks, list) else [tasks])]
            for job, tasks in (config.get("cluster") or {}).items()}


def words(me: str, nonce: str, address: str, cluster: dict[str, list[str]]) -> bytes:
    """The line a worker says of itself (read back by :func:`read_greeting`)."""
    return f"{GREETING}\t{me}\t{nonce}\t{address}\t{json.dumps(cluster, sort_keys=True)}\n".encode()


def read_greeting(connection: Any) -> Greeting | None:
    """The line a worker said on ``connection`` within :data:`GREETING_WAIT` seconds, or None (nothing said: a
    TensorFlow server, a closed connection)."""
    data, deadline = b"", time.monotonic() + GREETING_WAIT
    try:
        while b"\n" not in data and len(data) < MOST_BYTES:
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:  # the wait, or the connection reset
        pass
    fields = data.decode(errors="replace").split("\n")[0].strip().split("\t")
    if fields[0] != GREETING or len(fields) < 3:
        return None
    if len(fields) < 5:
        return Greeting(fields[1], fields[2], "?", None)
    try:
        cluster = json.loads(fields[4])
    except ValueError:
        cluster = None
    return Greeting(fields[1], fields[2], fields[3], cluster if isinstance(cluster, dict) else None)


def answering(listener: Any, me: str, nonce: str, address: str, cluster: dict[str, list[str]],
              found: list[str]) -> Callable[[], None]:
    """Answer every connection ``listener`` takes with this worker's line, in a thread, until the function returned
    is called; the knocker's line, when it names another cluster, is said in ``found`` (:func:`clusters_differ`)."""
    stop = threading.Event()
    said = words(me, nonce, address, cluster)
    listener.settimeout(0.1)

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:  # the timeout, or the listener closed
                continue
            with contextlib.suppress(OSError), connection:
                connection.sendall(said)
                knocker = read_greeting(connection)
                if knocker is not None and knocker.nonce != nonce and knocker.cluster not in (None, cluster):
                    found.append(clusters_differ(me, address, cluster, knocker))

    thread = threading.Thread(target=serve, name="alexnet-join-answer", daemon=True)
    thread.start()

    def stopped() -> None:
        stop.set()
        thread.join()

    return stopped


#: The watchdog of :func:`~alexnet.train.joining.waiting_for_workers`, a process of its own: arguments the pid to
#: end, the bound in seconds (0: none), the seconds between notes, the note, the last words for one worker and for
#: several (``{seconds}``, ``{missing}`` in them), the other workers (JSON: name, address), the first word of a waiting
#: worker's line and what is said of a worker still waiting for others and of one whose port closed. It ends when its
#: standard input does (the strategy was built, or the worker ended). It knocks on the others' ports every second:
#: those known not to have joined (their listener still answers with a line, or their port closed first) are named,
#: else every other.
WATCHDOG = """
import json, os, select, signal, socket, sys, time
from concurrent.futures import ThreadPoolExecutor
pid, bound, every, note, fail_one, fail_many = *map(float, sys.argv[1:4]), *sys.argv[4:7]
others, greeting, still_waits, stopped = json.loads(sys.argv[7]), sys.argv[8].encode(), sys.argv[9], sys.argv[10]

def state(where):
    host, _, port = where.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0) as knock:
            knock.settimeout(0.3)
            said = knock.recv(64)
    except TimeoutError:
        return ""
    except (OSError, ValueError):
        return stopped
    return still_waits if said.startswith(greeting) else ""

first_stopped = {}  # when each worker's port was first found closed, a knock a second

def knock():
    with ThreadPoolExecutor(8) as pool:
        states = list(pool.map(state, [where for _, where in others]))
    for (name, where), said in zip(others, states):
        if said == stopped:
            first_stopped.setdefault(name, time.monotonic())
    return states

def missing():
    states = knock()
    # those whose port closed first: the others' closed after (their own watchdogs end them at about the same bound)
    first = min([first_stopped[name] for name, _ in others if name in first_stopped] or [0.0])
    known = [f"{name} ({where}{said})" for (name, where), said in zip(others, states)
             if said == still_waits or (said and first_stopped.get(name, 0.0) <= first + 2.0)]
    return known or [f"{name} ({where})" for name, where in others]

start, due, due_knock = time.monotonic(), every, 1.0
while True:
    wake = min(due, bound, due_knock) if bound else min(due, due_knock)
    if select.select([sys.stdin], [], [], max(0.0, wake - (time.monotonic() - start)))[0]:
        sys.exit(0)
    waited = time.monotonic() - start
    if bound and waited >= bound:
        named = missing()
        if select.select([sys.stdin], [], [], 0)[0]:  # the wait ended while the knocks above ran: the run goes on
            sys.exit(0)
        os.write(2, ((fail_one if len(named) == 1 else fail_many).replace("{missing}", ", ".join(named)) + "\\n")
                 .encode())
        os.kill(int(pid), signal.SIGKILL)
        sys.exit(0)
    if waited >= due:
        said = note.replace("{missing}", ", ".join(missing())).replace("{seconds}", str(round(waited)))
        os.write(2, (said + "\\n").encode())
        due += every
    elif waited >= due_knock:
        knock()
    due_knock = waited + 1.0
"""
#: What the watchdog says of a worker known not to have joined: one still waiting for others (its listener answers)
#: and one whose port no longer takes a connection.
STILL_WAITS = ", which still waits for the others to answer"
ANSWERS_NO_MORE = ", which answered but answers no more: see its own error"


def _named(job: str, i: int) -> str:
    return "the chief" if job == "chief" else f"{job} {i}"


def clusters_differ(me: str, address: str, mine: dict[str, list[str]], other: Greeting) -> str:
    """What a worker (``me``, at ``address``, given cluster ``mine``) says when ``other`` was given another: both
    clusters, as TF_CONFIG writes them, and the tasks they put at other addresses."""
    theirs = other.cluster or {}
    apart = []
    for job in sorted(set(mine) | set(theirs), key=lambda job: (job != "chief", job)):
        here, there = mine.get(job, []), theirs.get(job, [])
        apart += [f"{_named(job, i)} is {b}, not {a}" for i, (a, b) in enumerate(zip(here, there, strict=False))
                  if a != b]
        if len(here) != len(there):
            apart.append(f"{len(there)} {job} task(s), not {len(here)}")
    return (f"The workers were given different TF_CONFIG clusters: this process, {me} ({address}), was given "
            f"{json.dumps(mine)}; {other.name} ({other.address}) was given {json.dumps(theirs)}"
            + (f", where {', '.join(apart)}" if apart else "")
            + ". Give every worker the same TF_CONFIG cluster (each with its own `task.index`), then start them "
            "again.")


def wrong_index(me: str, address: str, name: str, where: str, answered: str, nonce: str, own: str) -> str:
    """What a worker says when the knock on ``name``'s address ``where`` reached itself (``answered`` with its own
    ``nonce``: ``own``) or a worker of another name."""
    if nonce == own:
        return (f"TF_CONFIG gives this process {me} ({address}), and the address it gives {name}, {where}, is this "
                f"process's own: is this {name}? Give each worker its own `task.index` in TF_CONFIG (the index of its "
                "address in the cluster's list).")
    return (f"{where}, the address TF_CONFIG gives {name}, is answered by a worker that was given {answered}, as this "
            f"process ({me}) was: two workers have the same `task.index` in TF_CONFIG; give each worker the index of "
            "its own address in the cluster's list.")


#: The task a TensorFlow error of the workers' joining names as the one it came from.
_REMOTE_TASK = re.compile(r"remote target /job:(\w+)/replica:\d+/task:(\d+)")


def partner_stopped(config: dict, error: BaseException) -> str | None:
    """What a worker of TF_CONFIG ``config`` says when building its strategy failed with TensorFlow's ``error``
    because another worker stopped while the workers were joining: the worker the error names, else the one that
    leads the joining (the chief, else worker 0), which the others lose when it stops, unless that is this worker
    ("another worker"). None for another error."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, tf.errors.UnavailableError):
        return None
    cluster = cluster_of(config)
    task = config.get("task") or {}
    me = _named(str(task.get("type") or "worker"), int(task.get("index") or 0))
    found = _REMOTE_TASK.search(str(error))
    job, index = (found[1], int(found[2])) if found else ("chief" if cluster.get("chief") else "worker", 0)
    tasks = cluster.get(job) or []
    where = [tasks[index]] if 0 <= index < len(tasks) else []
    if (job, index) == ("worker", 0) and not cluster.get("chief"):
        where.insert(0, "the chief")
    # never this worker itself (the leader, when the error names no task): then the one that stopped is not known
    stopped = "another worker" if _named(job, index) == me else _named(job, index) + (
        f" ({', '.join(where)})" if where else "")
    first = str(getattr(error, "message", error)).strip().split("\n")[0]
    return (f"{me.capitalize()} of {sum(len(t) for j, t in cluster.items() if j in ('chief', 'worker'))} could not "
            f"join the others: {stopped} stopped while the workers were joining: see its own error (TensorFlow: "
            f"{type(error).__name__}: {first}).")
