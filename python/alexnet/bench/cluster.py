"""Several training processes on this machine, as the workers of one cluster, each on its own CPUs and link.

:func:`run_workers` starts one fresh Python process per task (:func:`alexnet.child.start_child`), worker ``i``
pinned to ``cpus[i]`` and, for a shaped link, inside its own network namespace (:mod:`.link`), with the
``TF_CONFIG`` of a cluster of all of them; it returns their results in order. When one fails, the others are
stopped at once (they would otherwise wait on it until their collective timeout) and its error is raised; when
the caller is interrupted, every process is stopped and every namespace removed before the interruption goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..child import Child, ChildError, start_child
from ..train.cluster import ephemeral_ports, tf_config_json
from .link import LinkSpec, joined

logger = logging.getLogger(__name__)

#: How often the workers are polled, seconds.
POLL_SECONDS = 0.2


#: The lowest port :func:`free_base_port` hands out (below it are the well-known and registered services).
LOWEST_PORT = 10000


def free_base_port(count: int, *, tries: int = 200) -> int:
    """A port ``p`` such that ``p`` .. ``p + count - 1`` are free on 127.0.0.1 now, all outside the kernel's
    ephemeral range: a port from that range can be taken by any outgoing connection (Spark's, a worker's) between
    this check and the moment a worker listens on it."""
    low, high = ephemeral_ports()
    spans = [(lo, hi) for lo, hi in ((LOWEST_PORT, low - 1), (high + 1, 65535)) if hi - lo + 1 >= count]
    if not spans:
        raise OSError(f"no ports outside the ephemeral range {low}-{high} to choose from")
    chooser = random.SystemRandom()
    for _ in range(tries):
        lo, hi = chooser.choice(spans)
        base = chooser.randint(lo, hi - count + 1)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise OSError(f"no range of {count} free ports found on 127.0.0.1 outside the ephemeral range {low}-{high}")


def split_cpus(cpus: Sequence[int], workers: int) -> list[list[int]]:
    """``cpus`` shared out among ``workers``, the same number each (the first ones; at least one each)."""
    cpus = list(cpus)
    each = max(1, len(cpus) // workers)
    return [cpus[(i * each) % len(cpus):(i * each) % len(cpus) + each] for i in range(workers)]


def _wait_all(children: Sequence[Child], timeout: float | None) -> list[Any]:
    """Every child's result, in order; the first failure (or the timeout) stops the others and is raised."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        running = [c for c in children if c.process.poll() is None]
        failed = [c for c in children if c.process.poll() not in (None, 0)]
        if failed:
            for child in children:
                child.stop()
            failed[0].result()  # raises its error
        if not running:
            return [child.result() for child in children]
        if deadline is not None and time.monotonic() > deadline:
            for child in children:
                child.stop()
            raise ChildError(running[0].what, f"TimeoutError: it did not finish within {timeout:g} s and was "
                             "stopped", [], None)
        time.sleep(POLL_SECONDS)


def run_workers(function: Callable[[Mapping[str, Any]], Any], tasks: Sequence[Mapping[str, Any]], *,
                link: LinkSpec, cpus: Sequence[Sequence[int]], timeout: float | None = None,
                log_dir: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                started: Callable[[list[Child]], None] | None = None) -> list[Any]:
    """``function(task)`` for every task, each in its own process, as the workers of one cluster on ``link``:
    worker ``i`` gets ``{**tasks[i], "index": i, "workers": len(tasks)}``, runs on ``cpus[i]`` and, with more
    than one task, has the ``TF_CONFIG`` of all of them. Its log goes to ``log_dir`` when given.
    ``started(children)`` is called once every process runs (a test uses it to kill one)."""
    count = len(tasks)
    with joined(count, link) as (hosts, commands), contextlib.ExitStack() as stack:
        base = free_base_port(count) if not link.shaped else 23456
        addresses = [f"{host}:{base + i}" for i, host in enumerate(hosts)]
        children = []
        for i, task in enumerate(tasks):
            child_env = {**(env or {}), "CUDA_VISIBLE_DEVICES": ""}
            if count > 1:
                child_env["TF_CONFIG"] = tf_config_json(addresses, i, base)
            log = None if log_dir is None else os.path.join(os.fspath(log_dir), f"worker{i}-of-{count}.log")
            child = stack.enter_context(start_child(
                function, {**task, "index": i, "workers": count}, what=f"worker {i} of {count} ({link.name})",
                env=child_env, cpus=cpus[i], log=log, prefix="alexnet-cluster-", command=commands[i]))
            children.append(child)
        if started is not None:
            started(children)
        return _wait_all(children, timeout)
