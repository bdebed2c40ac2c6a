"""Local stand-ins for the remote boards, started on 127.0.0.1 on a free port and stopped after use.

* ``gcs_emulator()``: ``gcp-storage-emulator`` in a child process (in memory); gcsfs finds it through
  ``STORAGE_EMULATOR_HOST``.
* ``moto_s3_server()``: moto's S3 server in a child process; s3fs finds it through ``AWS_ENDPOINT_URL``.
* ``http_server(directory)``: the standard library's ``http.server`` serving a folder from a thread; with a
  :class:`Trickle`, a slow link (a file's body in pieces, seconds apart) or a server that hangs in the middle of one.
* ``silent_listener()``: a socket that takes connections and never answers, from a thread (a hung server, or a
  port that belongs to something else than a storage server); or answers the first few only.

Each is a context manager yielding the base URL (``http://127.0.0.1:PORT``). The child processes are
started and stopped by their own process ids only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from alexnet.bench.cluster import free_base_port

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the range outgoing connections take
    theirs from (so no connection made before a server starts can take it)."""
    return free_base_port(1)


def _wait_for_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server for {url} exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers, even if with an error status: it is up
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server for {url} did not answer within {timeout:.0f} s")


@contextlib.contextmanager
def _child(cmd: list[str], ready_url: str) -> Iterator[subprocess.Popen]:
    with tempfile.TemporaryDirectory(prefix="alexnet-server-") as workdir:
        log = Path(workdir, "server.log").open("wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                _wait_for_http(ready_url, proc)
            except RuntimeError as err:
                log.flush()
                raise RuntimeError(f"{err}\n{Path(workdir, 'server.log').read_text(errors='replace')}") from None
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            log.close()


def random_bytes(size: int) -> bytes:
    """``size`` random bytes whose last is not a carriage return: the GCS emulator drops a file's last byte when it is
    ``\\r`` from a one-request (multipart) upload, as gcsfs's ``put_file`` and ``pipe_file`` send (its resumable
    uploads keep it), so that one random file in 256 came back a byte short."""
    data = bytearray(os.urandom(size))
    if data and data[-1] == 0x0D:
        data[-1] = 0x0A
    return bytes(data)


@contextlib.contextmanager
def gcs_emulator(buckets: tuple[str, ...] = ()) -> Iterator[str]:
    """Run ``gcp-storage-emulator`` in memory; yield its URL (the value for ``STORAGE_EMULATOR_HOST``)."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    cmd = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", HOST, "--port", str(port),
           "--in-memory", "--quiet"]
    with _child(cmd, f"{url}/storage/v1/b"):
        for bucket in buckets:
            create_gcs_bucket(url, bucket)
        yield url


def create_gcs_bucket(url: str, bucket: str) -> None:
    """Create a bucket on the emulator through the JSON API (no client library needed)."""
    request = urllib.request.Request(
        f"{url}/storage/v1/b?project=test",
        data=f'{{"name": "{bucket}"}}'.encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


@contextlib.contextmanager
def moto_s3_server(buckets: tuple[str, ...] = ()) -> Iterator[str]:
    """Run moto's server (S3 and the rest of its mocks); yield its endpoint URL."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    moto_server = Path(sys.executable).with_name("moto_server")
    cmd = [str(moto_server), "-H", HOST, "-p", str(port)]
    with _child(cmd, f"{url}/moto-api/"):
        for bucket in buckets:
            request = urllib.request.Request(f"{url}/{bucket}", method="PUT")
            with urllib.request.urlopen(request, timeout=10):
                pass
        yield url


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def copyfile(self, source, outputfile) -> None:
        trickle: Trickle | None = getattr(self.server, "trickle", None)
        if trickle is None or not self.path.split("?", 1)[0].endswith(trickle.suffix):
            super().copyfile(source, outputfile)
            return
        data, stop = source.read(), self.server.stop
        size = -(-len(data) // trickle.pieces)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that gave up
            for piece in range(trickle.pieces):
                if piece and trickle.silent is not None:
                    stop.wait(trickle.silent)  # the rest never comes; the connection is closed after
                    return
                if piece:
                    stop.wait(trickle.pause)
                outputfile.write(data[piece * size:(piece + 1) * size])
                outputfile.flush()


@dataclasses.dataclass(frozen=True)
class Trickle:
    """How :func:`http_server` sends the files whose names end with ``suffix``: in ``pieces`` pieces, ``pause``
    seconds apart (a slow link that moves bytes all along); or, with ``silent`` set, the first piece only, then
    nothing for ``silent`` seconds (or until the server stops) before the connection is closed (a server that hangs
    in the middle of a body). Other files, and ``HEAD`` requests, are answered at once."""

    pieces: int = 8
    pause: float = 0.0
    silent: float | None = None
    suffix: str = ".zip"


@contextlib.contextmanager
def http_server(directory: str | os.PathLike, *, tls: bool = False, trickle: Trickle | None = None) -> Iterator[str]:
    """Serve ``directory`` read-only over plain HTTP from a thread; yield the base URL. ``tls=True`` serves HTTPS
    with a self-signed certificate, which no client trusts; ``trickle`` sends some files slowly (:class:`Trickle`)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer((HOST, 0), handler)
    server.trickle, server.stop = trickle, threading.Event()
    if tls:
        with tempfile.TemporaryDirectory(prefix="alexnet-tls-") as folder:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*_self_signed(folder))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="alexnet-test-http", daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://{HOST}:{server.server_address[1]}"
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _self_signed(folder: str) -> tuple[str, str]:
    """A certificate for ``HOST`` signed by its own key, valid for a day: the files of both, written in ``folder``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), False)
                   .sign(key, hashes.SHA256()))
    cert_file, key_file = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    Path(cert_file).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    Path(key_file).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
    return cert_file, key_file


@contextlib.contextmanager
def silent_listener(answered: int = 0) -> Iterator[tuple[str, list[socket.socket]]]:
    """Listen on a free port of 127.0.0.1, take every connection and send nothing; yield the base URL and the list of
    connections taken so far. The first ``answered`` connections get an empty ``200 OK`` instead (a server that
    answers a first look, then hangs). All of them are closed after."""
    taken: list[socket.socket] = []
    stop = threading.Event()
    server = socket.create_server((HOST, 0))
    server.settimeout(0.1)

    def take() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection = server.accept()[0]
                taken.append(connection)
                if len(taken) <= answered:
                    connection.settimeout(10)
                    connection.recv(65536)
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    connection.close()

    thread = threading.Thread(target=take, name="alexnet-test-silent", daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.getsockname()[1]}", taken
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()
        for connection in taken:
            connection.close()


def point_at_local_clouds(monkeypatch, gcs_url: str, s3_url: str) -> None:
    """Point gcsfs at the GCS emulator and s3fs at the moto server, with credentials moto accepts."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_url)
