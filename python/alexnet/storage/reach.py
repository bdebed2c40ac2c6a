"""Reaching a storage endpoint: a first look that fails in seconds where nothing answers (:func:`probe_url`), and the
timeouts every client's connection is given (:func:`aiohttp_timeout` for gcsfs and ``https://``,
:func:`botocore_timeouts` for s3fs), so that a stalled connection is given up while a slow one that moves bytes is
never cut. :mod:`alexnet.storage.location` opens every location through them.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.parse
from typing import Any

from ..errors import BoardError

#: Seconds a first look at an endpoint (:func:`probe_url`) waits for a connection, and as many for an answer; the
#: clients' connections are given as long.
PROBE_TIMEOUT = 10.0
#: Seconds a bucket's socket may stay silent (no byte sent or received) before the request is given up and retried:
#: a stalled connection, not a slow one, which moves bytes all along. Connections are given ``PROBE_TIMEOUT``.
SILENT_TIMEOUT = 30.0


def probe_url(url: str, location: str, hint: str) -> None:
    """Fail fast (seconds, not the minutes of a client's retry loop) when nothing answers at ``url``; the error names
    ``location`` (as "board gs://...", say) and the host and port, and ends with ``hint``.

    Something must take the connection within :data:`PROBE_TIMEOUT` seconds and answer a ``HEAD`` request within
    as many more: a server that takes connections and stays silent (hung, or a port of something else) would cost
    each of the client's requests the silent socket's :data:`SILENT_TIMEOUT`, retried for minutes. Any answer
    counts, an error status, a certificate refused or a connection closed included: the client, whose timeouts and
    retries stay those of the transfers, says what is wrong with it.
    """
    parsed = urllib.parse.urlparse(url if "://" in url else f"http://{url}")
    host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        connection = socket.create_connection((host, port), timeout=PROBE_TIMEOUT)
    except OSError as err:
        raise BoardError(f"cannot reach {location}: no connection to {host}:{port} ({err}); {hint}") from None
    client = http.client.HTTPConnection(host, port, timeout=PROBE_TIMEOUT)
    try:
        client.sock = (ssl.create_default_context().wrap_socket(connection, server_hostname=host)
                       if parsed.scheme == "https" else connection)
        client.request("HEAD", f"{parsed.path or '/'}{'?' if parsed.query else ''}{parsed.query}",
                       headers={"Connection": "close"})
        client.getresponse()
    except TimeoutError:
        raise BoardError(f"cannot reach {location}: {host}:{port} took the connection and sent no answer in "
                         f"{PROBE_TIMEOUT:.0f} s; {hint}") from None
    except (OSError, http.client.HTTPException):
        pass  # an answer
    finally:
        client.close()
        connection.close()


def aiohttp_timeout() -> Any:
    """The timeouts of one request of gcsfs and of https:// locations (both over aiohttp): ``PROBE_TIMEOUT`` to
    connect, ``SILENT_TIMEOUT`` of a silent socket, and none on the whole request, so that a slow link is never cut
    while its bytes move (aiohttp's default, 5 minutes on the whole, cuts a 140 MB zip on a link slower than about
    0.5 MB/s; gcsfs's, none at all, lets a stalled connection hang for ever)."""
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=PROBE_TIMEOUT, sock_read=SILENT_TIMEOUT)


def botocore_timeouts() -> dict[str, float]:
    """The timeouts of one request of ``s3://`` locations, as botocore's configuration takes them: ``PROBE_TIMEOUT``
    to connect, ``SILENT_TIMEOUT`` of a silent socket."""
    return {"connect_timeout": PROBE_TIMEOUT, "read_timeout": SILENT_TIMEOUT}
