"""The cluster of a multi-worker run, in one place: TF_CONFIG built, read and passed on to TensorFlow.

TensorFlow's ``MultiWorkerMirroredStrategy`` learns the cluster from the ``TF_CONFIG`` environment variable:
every worker's ``host:port`` and this process's index. :func:`tf_config` builds it from the addresses of a
Spark barrier stage (worker ``i`` listens on the host of address ``i`` at ``base_port + i``, so several
workers on one host never collide; worker 0 is the chief). :func:`read_tf_config` parses and checks it.

TensorFlow reads ``os.environ``, which Python copies from the process environment once, at start-up. A host
program that sets TF_CONFIG later (R's ``Sys.setenv()``, through reticulate) changes only the process
environment: :func:`sync_environment` copies it over, and :func:`install_tf_config_sync` makes TensorFlow do
so itself each time it reads TF_CONFIG. This module does not import TensorFlow.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..checks import as_int
from ..errors import AlexnetError

logger = logging.getLogger(__name__)

#: Worker ``i`` of a job listens on port ``DEFAULT_BASE_PORT + i`` unless told otherwise.
DEFAULT_BASE_PORT = 8000
#: Seconds a collective operation may wait for the other workers before the run fails.
DEFAULT_COLLECTIVE_TIMEOUT = 1800.0


def _host(address: str) -> str:
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
    workers = [f"{_host(address)}:{port + i}" for i, address in enumerate(addresses)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


def check_base_port(base_port: object, workers: int) -> int:
    """``base_port`` as an int that leaves room for ``workers`` ports (``base_port + i``) below 65536."""
    port = as_int(base_port, "base_port", minimum=1)
    if port > 65535 - workers:
        raise AlexnetError(f"`base_port` must leave room for {workers} ports below 65536, not {port}.")
    return port


def tf_config_json(addresses: Sequence[str], index: int, base_port: int = DEFAULT_BASE_PORT) -> str:
    """:func:`tf_config` as the JSON string TensorFlow reads from the TF_CONFIG variable."""
    return json.dumps(tf_config(addresses, index, base_port))


def process_environment(name: str) -> str | None:
    """The variable ``name`` in this process's environment as the C library sees it (``None``: unset).

    Python copies the environment once, at start-up, into ``os.environ``; a variable set later by the
    host program (R's ``Sys.setenv()`` through reticulate, say) is only visible here. On platforms
    where the C library cannot be reached, ``os.environ``'s value.
    """
    if sys.platform.startswith(("linux", "darwin")):
        try:
            getenv = ctypes.CDLL(None).getenv
            getenv.restype = ctypes.c_char_p
            getenv.argtypes = [ctypes.c_char_p]
            value = getenv(name.encode())
            return None if value is None else value.decode()
        except (OSError, AttributeError):
            pass
    return os.environ.get(name)


#: Variables that TensorFlow reads from ``os.environ`` when a strategy is created.
SYNCED_VARIABLES = ("TF_CONFIG",)


def sync_environment(names: tuple[str, ...] = SYNCED_VARIABLES) -> list[str]:
    """Copy ``names`` from the process environment into ``os.environ`` where they differ; the names copied.

    For a host program that sets TF_CONFIG after Python has started (R's ``Sys.setenv()``, as in a
    ``spark_apply()`` closure): TensorFlow reads ``os.environ``, which would not have it. TF_CONFIG is
    also normalised (see :func:`normalise_tf_config`).
    """
    copied = []
    for name in names:
        value = process_environment(name)
        if value is not None and os.environ.get(name) != value:
            os.environ[name] = value
            copied.append(name)
    if copied:
        logger.info("Took %s from the process environment (set after Python started).", ", ".join(copied))
    if "TF_CONFIG" in names and os.environ.get("TF_CONFIG", "").strip():
        os.environ["TF_CONFIG"] = normalise_tf_config(os.environ["TF_CONFIG"])
    return copied


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


def read_tf_config() -> dict:
    """The parsed ``TF_CONFIG`` (synced from the process environment first); raises
    :class:`~alexnet.errors.AlexnetError` when it is missing or unusable."""
    sync_environment()
    raw = os.environ.get("TF_CONFIG", "")
    if raw.strip():
        raw = os.environ["TF_CONFIG"] = normalise_tf_config(raw)
    if not raw.strip():
        raise AlexnetError(
            "strategy = 'multi_worker' needs the TF_CONFIG environment variable naming every worker and "
            "this worker's index: set it, e.g. to tf_config_json(addresses, index), before training."
        )
    try:
        config = json.loads(raw)
        workers = config["cluster"]["worker"]
        task = config["task"]
        index = int(task["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise AlexnetError(
            f"TF_CONFIG is not usable ({error}): it must be JSON like "
            '{"cluster": {"worker": ["host1:8000", "host2:8001"]}, "task": {"type": "worker", "index": 0}}.'
        ) from error
    if task.get("type") == "worker" and not 0 <= index < len(workers):
        raise AlexnetError(
            f"TF_CONFIG's task index {index} is outside its {len(workers)} worker(s): use 0 to {len(workers) - 1}."
        )
    return config


def install_tf_config_sync() -> bool:
    """Make TensorFlow take TF_CONFIG from the process environment each time it reads it; False when it cannot.

    TensorFlow's TF_CONFIG cluster resolver reads the variable through one module-level function; it is
    wrapped so that :func:`sync_environment` runs first. A strategy created from R right after
    ``Sys.setenv(TF_CONFIG = ...)``, even inside one function such as a ``spark_apply()`` closure, then sees
    the cluster. Installing twice changes nothing. Imports TensorFlow's resolver module, so call it once
    TensorFlow is (being) imported.
    """
    try:
        from tensorflow.python.distribute.cluster_resolver import tfconfig_cluster_resolver as resolver
    except ImportError:
        return False
    original = getattr(resolver, "_load_tf_config", None)
    if original is None:
        logger.warning("TensorFlow reads TF_CONFIG in a way alexnet does not know: set TF_CONFIG before Python "
                       "starts, or call alexnet.train.cluster.sync_environment() after setting it.")
        return False
    if getattr(original, "alexnet_sync", False):
        return True

    def load_tf_config() -> Any:
        sync_environment()
        return original()

    load_tf_config.alexnet_sync = True  # type: ignore[attr-defined]
    resolver._load_tf_config = load_tf_config
    return True
