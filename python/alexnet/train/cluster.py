"""The cluster of a multi-worker run, in one place: TF_CONFIG built, read and passed on to TensorFlow.

TensorFlow's ``MultiWorkerMirroredStrategy`` learns the cluster from the ``TF_CONFIG`` environment variable:
every worker's ``host:port`` and this process's index. :func:`tf_config` builds it from the addresses of a
Spark barrier stage (worker ``i`` listens on the host of address ``i`` at ``base_port + i``, so several
workers on one host never collide; worker 0 is the chief). :func:`tf_config_value` reads it, the one read of
it, and :func:`read_tf_config` parses and checks it.

TensorFlow and this module read ``os.environ``, which Python copies from the process environment once, at
start-up. A host program that sets TF_CONFIG later (R's ``Sys.setenv()``) copies it into ``os.environ``
itself: R does, before each call into the core and after each top-level call, passing TF_CONFIG through
:func:`normalise_tf_config`. This module does not import TensorFlow.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..checks import as_int
from ..environment import env_value
from ..errors import AlexnetError

logger = logging.getLogger(__name__)

#: Worker ``i`` of a job listens on port ``DEFAULT_BASE_PORT + i`` unless told otherwise.
DEFAULT_BASE_PORT = 8000
#: The ports :func:`check_port_free` found free in this process, which its TensorFlow server then took
#: (:func:`took_port`).
_OWN_PORTS: set[int] = set()
#: Seconds a collective operation may wait for the other workers before the run fails.
DEFAULT_COLLECTIVE_TIMEOUT = 1800.0
#: Seconds a worker of a multi-worker run may go without a heartbeat (at most ``collective_timeout``).
HEARTBEAT_TIMEOUT = 60.0
#: Seconds more a watched operation may take when it may first build its TensorFlow function (a run's first step,
#: an epoch's first step at a new image size): the time TensorFlow's per-operation timeout never counted.
TRACE_GRACE = 120.0


def host_of(address: str) -> str:
    """The host of ``host:port`` (``[v6]:port`` too); a bare host is returned as is."""
    address = address.strip()
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise AlexnetError(f"Cannot read the host of address {address!r}: no closing ']'.")
        return address[: end + 1]
    host, sep, port = address.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host
    return address


def tf_config(addresses: Sequence[str], index: int, base_port: int = DEFAULT_BASE_PORT) -> dict[str, Any]:
    """TF_CONFIG (as a dict) for worker ``index`` of a job whose tasks have these barrier addresses.

    Worker ``i`` listens on the host of ``addresses[i]`` at port ``base_port + i``, so several tasks on one
    host never collide; worker 0 is the chief. Serialise with ``json.dumps`` before setting the variable.
    """
    addresses = [addresses] if isinstance(addresses, str) else [str(a) for a in addresses]
    if not addresses:
        raise AlexnetError("No barrier addresses: a multi-worker job needs at least one task.")
    index = as_int(index, "index")
    if not 0 <= index < len(addresses):
        raise AlexnetError(f"Worker index must be in 0..{len(addresses) - 1} for {len(addresses)} tasks, not {index}.")
    port = check_base_port(base_port, len(addresses))
    workers = [f"{host_of(address)}:{port + i}" for i, address in enumerate(addresses)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


#: Linux's default range of ephemeral ports, assumed where the kernel's cannot be read.
EPHEMERAL_PORTS = (32768, 60999)


def ephemeral_ports() -> tuple[int, int]:
    """The range this host's kernel takes the local ports of outgoing connections from (Linux's
    ``ip_local_port_range``): a worker listening on one of them can find it taken by any connection."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return EPHEMERAL_PORTS
    return low, high


def check_base_port(base_port: object, workers: int) -> int:
    """``base_port`` as an int that leaves room for ``workers`` ports (``base_port + i``) below 65536."""
    port = as_int(base_port, "base_port", minimum=1)
    if port + workers - 1 > 65535:  # worker k listens at base_port + k
        raise AlexnetError(f"`base_port` must leave room for {workers} ports below 65536, not {port}.")
    return port


def tf_config_json(addresses: Sequence[str], index: int, base_port: int = DEFAULT_BASE_PORT) -> str:
    """:func:`tf_config` as the JSON string TensorFlow reads from the TF_CONFIG variable."""
    return json.dumps(tf_config(addresses, index, base_port))


def normalise_tf_config(raw: str) -> str:
    """TF_CONFIG with every job's tasks as a list: a one-task job written as a bare string becomes a list.

    ``jsonlite::toJSON(auto_unbox = TRUE)`` in R writes ``"worker": "host:8001"`` for a one-worker
    cluster, which TensorFlow rejects. Anything that is not such JSON is returned unchanged.
    """
    try:
        config = json.loads(raw)
        cluster = config["cluster"]
    except (ValueError, KeyError, TypeError):
        return raw
    if not isinstance(cluster, dict) or not any(isinstance(tasks, str) for tasks in cluster.values()):
        return raw
    config["cluster"] = {job: [tasks] if isinstance(tasks, str) else tasks for job, tasks in cluster.items()}
    return json.dumps(config)


def tf_config_value() -> str:
    """The ``TF_CONFIG`` of ``os.environ`` as every reader takes it: ``""`` when it is unset or blank, else its value,
    spaces around it removed, with every job's tasks as a list (:func:`normalise_tf_config`); a value that normalising
    changed is written back to ``os.environ``, so that TensorFlow reads the same.

    The one place Python reads TF_CONFIG: :func:`read_tf_config` when a strategy is resolved, the check of a strategy
    object made before it was set, and the command line's ``alexnet train`` all take it from here. A value set by a
    host program after Python started (R's ``Sys.setenv()``) is in ``os.environ`` because the host copies it there: R
    does so before each call into the core and after each top-level call (see ``sync_python_environment`` in R).
    """
    raw = env_value("TF_CONFIG")
    normalised = normalise_tf_config(raw) if raw else ""
    if normalised != raw:
        os.environ["TF_CONFIG"] = normalised
    return normalised


def tf_config_workers() -> int:
    """How many workers, a chief among them, the ``TF_CONFIG`` of ``os.environ`` names (:func:`tf_config_value`): 0
    when it is unset, blank or names no cluster; not checked further (:func:`read_tf_config` checks it)."""
    raw = tf_config_value()
    try:
        jobs = json.loads(raw)["cluster"] if raw else {}
        return sum(len(jobs.get(job) or ()) for job in ("chief", "worker"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return 0


def read_tf_config() -> dict:
    """The parsed ``TF_CONFIG`` (:func:`tf_config_value`); raises :class:`~alexnet.errors.AlexnetError` when it is
    missing or unusable."""
    raw = tf_config_value()
    if not raw:
        raise AlexnetError(
            "strategy = 'multi_worker' needs the TF_CONFIG environment variable naming every worker and "
            "this worker's index: set it, e.g. to tf_config_json(addresses, index), before training, or launch the "
            "workers with alexnet_spark_train(), which sets it."
        )
    try:
        config = json.loads(raw)
        if not isinstance(config["cluster"]["worker"], list):
            raise TypeError("its cluster's workers are not a list")
        task = config["task"]
        index = int(task["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise AlexnetError(
            f"TF_CONFIG is not usable ({error}): it must be JSON like "
            '{"cluster": {"worker": ["host1:8000", "host2:8001"]}, "task": {"type": "worker", "index": 0}}.'
        ) from error
    kind = str(task.get("type") or "worker")
    tasks = config["cluster"].get(kind)
    if not isinstance(tasks, list) or not tasks:
        raise AlexnetError(
            f"TF_CONFIG's task type {kind!r} names no task of its cluster, which has "
            f"{', '.join(repr(k) for k in config['cluster'])}: give this process a type the cluster lists (\"worker\", "
            "with its index among the cluster's workers), or add its address to the cluster under that type."
        )
    if not 0 <= index < len(tasks):
        raise AlexnetError(
            f"TF_CONFIG's task index {index} is outside its {len(tasks)} {kind}(s): use 0 to {len(tasks) - 1}."
        )
    for job, addresses in config["cluster"].items():
        for i, address in enumerate(addresses if isinstance(addresses, list) else [addresses]):
            if not _is_host_and_port(str(address)):
                raise AlexnetError(
                    f"TF_CONFIG's {job} {i} is {str(address)!r}, not host:port: give every address of the cluster "
                    "with the port its task listens on, as in \"10.0.0.1:8000\" or \"[::1]:8000\"."
                )
    return config


def _is_host_and_port(address: str) -> bool:
    """Whether ``address`` is ``host:port`` (an IPv6 host in brackets), the port a number from 1 to 65535."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        return False
    return (host.startswith("[") and host.endswith("]")) or ":" not in host


def _ephemeral_hint(port: int) -> str:
    low, high = ephemeral_ports()
    if not low <= port <= high:
        return ""
    return (f" Port {port} lies in this host's ephemeral range ({low}-{high}), from which every outgoing connection "
            f"takes its own port: a base_port below {low} cannot be taken that way.")


def check_port_free(config: dict) -> int | None:
    """Raise :class:`~alexnet.errors.AlexnetError` when the port this worker of ``config`` (a parsed TF_CONFIG) is
    to listen on is already listened on, on this host: by another training, most likely. The port, free; None when
    it was not checked (a chief's, or one this process holds already).

    TensorFlow's server would fail to start with "UnknownError: Could not start gRPC server", which names neither
    the port nor what to change. A port this process has passed before is not checked again: its own server (which
    lives as long as the process) holds it."""
    task = config.get("task", {})
    if task.get("type", "worker") != "worker":
        return None
    address = str(config["cluster"]["worker"][int(task["index"])])
    host, _, port_text = address.rpartition(":")
    if not port_text.isdigit():
        return None
    port = int(port_text)
    if port in _OWN_PORTS:
        return None
    family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no owner
        try:
            probe.bind(("", port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return None
            raise AlexnetError(
                f"Port {port} on this host, where this worker is to listen ({address} in TF_CONFIG), is already in "
                "use, by another training on this host perhaps. Give the job other ports: `base_port` (worker k "
                "listens on base_port + k) in a Spark job, the workers' addresses in TF_CONFIG otherwise; or end "
                f"the process that holds the port.{_ephemeral_hint(port)}"
            ) from None
    return port


def took_port(port: int | None) -> None:
    """Record that this process's TensorFlow server listens on ``port`` (found free by :func:`check_port_free`, then
    taken by the strategy built): it lives as long as the process, and the port is not checked again."""
    if port is not None:
        _OWN_PORTS.add(port)
