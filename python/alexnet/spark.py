"""Launch layer: one training task per worker with Spark barrier execution.

The barrier tasks know each other's addresses (``BarrierTaskContext.getTaskInfos()``); TF_CONFIG for
every worker is built from them here, in one place, for the Python launcher and for R's
``sparklyr::spark_apply(barrier = TRUE)`` alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .errors import AlexnetError

DEFAULT_BASE_PORT = 8000


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
    if isinstance(addresses, str):
        addresses = [addresses]
    addresses = [str(a) for a in addresses]
    if not addresses:
        raise AlexnetError("No barrier addresses: a multi-worker job needs at least one task.")
    if not 0 <= int(index) < len(addresses):
        raise AlexnetError(f"Worker index must be in 0..{len(addresses) - 1} for {len(addresses)} tasks, not {index}.")
    if not 1 <= int(base_port) <= 65535 - len(addresses):
        raise AlexnetError(f"base_port must leave room for {len(addresses)} ports below 65536, not {base_port}.")
    workers = [f"{_host(address)}:{int(base_port) + i}" for i, address in enumerate(addresses)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": int(index)}}


def tf_config_json(addresses: Sequence[str], index: int, base_port: int = DEFAULT_BASE_PORT) -> str:
    """:func:`tf_config` as the JSON string TensorFlow reads from the TF_CONFIG variable."""
    return json.dumps(tf_config(addresses, index, base_port))
