"""Boards: where the zipped categories live. A board is a string; this module turns it into a pins board.

=================================  ===========================================================
board string                       backend and credentials
=================================  ===========================================================
``None``                           ``$ALEXNET_BOARD``, else ``<user cache dir>/alexnet/board``
a path or ``file://`` URL          a local folder (``pins.board_folder``); nothing needed
``gs://bucket/prefix``             gcsfs. With ``STORAGE_EMULATOR_HOST`` set (a local emulator)
                                   it connects anonymously. Otherwise Google Application Default
                                   Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth
                                   application-default login``, or the VM's service account);
                                   reads fall back to anonymous access (public buckets), writes
                                   without credentials stop with a ``BoardError``.
``s3://bucket/prefix``             s3fs, with the standard AWS credential chain
                                   (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``,
                                   instance roles) and ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
                                   for S3-compatible stores. Reads fall back to anonymous access;
                                   writes without credentials stop with a ``BoardError``.
``https://host/prefix``            read only, through the ``_pins.yaml`` manifest that
                                   ``imagenet_upload`` writes at the board's root (serve a folder,
                                   GCS or S3 board over HTTP(S)); ``http://`` works the same way.
=================================  ===========================================================

Backend libraries (gcsfs, s3fs, aiohttp) are imported only when a board of that kind is opened.
``open_board`` checks that the board can be reached (and, for writing, that credentials exist) before
returning, so that mistakes show up as one clear ``BoardError`` before any long work starts.

Every board holds versioned pins (the pins layout ``<name>/<version>/<file>`` plus ``data.txt``), so
boards written here can be read by R's and Python's pins packages as well.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import urllib.parse
from collections.abc import Mapping
from typing import Any

from .errors import BoardError

log = logging.getLogger(__name__)

MANIFEST = "_pins.yaml"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_PROBE_TIMEOUT = 10.0


def sha256_file(path: str) -> str:
    """The SHA-256 of a local file, read in 1 MiB blocks: how zips on a board are identified."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_board() -> str:
    """``$ALEXNET_BOARD`` when set, else the folder ``board`` under the user's cache directory."""
    env = os.environ.get("ALEXNET_BOARD", "").strip()
    if env:
        return env
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("alexnet"), "board")


def resolve_board(board: str | os.PathLike | None) -> str:
    """The canonical board string: an absolute local path, or ``gs://``, ``s3://``, ``http(s)://`` URL.

    ``None`` means ``$ALEXNET_BOARD`` or a folder under the user's cache directory; ``file://`` URLs
    and relative paths become absolute paths; ``gcs://`` is spelled ``gs://`` and ``s3a://`` ``s3://``;
    trailing slashes are dropped. Any other scheme raises ``BoardError``.
    """
    if board is None:
        board = default_board()
    text = os.fspath(board)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    text = text.strip()
    if not text:
        raise BoardError("the board is an empty string; give a folder, gs://, s3:// or https:// location")
    match = _SCHEME.match(text)
    if match is None:
        return os.path.abspath(os.path.expanduser(text))
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        parsed = urllib.parse.urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise BoardError(f"board {text!r}: file:// URLs must name a local path (file:///path)")
        return os.path.abspath(urllib.parse.unquote(parsed.path))
    if scheme in ("gs", "gcs", "s3", "s3a"):
        if rest.startswith("/") or not rest.strip("/"):
            raise BoardError(f"board {text!r} names no bucket; write it as {scheme}://bucket/prefix")
        return f"{'gs' if scheme in ('gs', 'gcs') else 's3'}://{rest.strip('/')}"
    if scheme in ("http", "https"):
        if not urllib.parse.urlparse(text).netloc:
            raise BoardError(f"board {text!r} names no host; write it as https://host/prefix")
        return text.rstrip("/")
    raise BoardError(
        f"board {text!r} uses the unsupported scheme {scheme}://; use a folder path, file://, gs://, "
        "s3:// or https://"
    )


def board_kind(resolved: str) -> str:
    """``"file"``, ``"gs"``, ``"s3"`` or ``"http"`` for a string returned by ``resolve_board``."""
    for prefix, kind in (("gs://", "gs"), ("s3://", "s3"), ("http://", "http"), ("https://", "http")):
        if resolved.startswith(prefix):
            return kind
    return "file"


def _probe(host: str, port: int, board: str, hint: str) -> None:
    """Fail fast (a few seconds, not the minutes of a client's retry loop) when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT):
            pass
    except OSError as err:
        raise BoardError(f"cannot reach board {board}: no connection to {host}:{port} ({err}); {hint}") from None


def _probe_url(url: str, board: str, hint: str) -> None:
    parsed = urllib.parse.urlparse(url if "://" in url else f"http://{url}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    _probe(parsed.hostname or "", port, board, hint)


def _split(resolved: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "bucket/a/b")``."""
    path = resolved.split("://", 1)[1]
    return path.split("/", 1)[0], path


def _open_gcs(resolved: str, write: bool) -> Any:
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
    if emulator and emulator != "default":
        # gcsfs's experimental bucket-type probe talks gRPC, which the emulator does not, and stalls;
        # the flag is read when gcsfs is imported, so it is set first (an explicit user choice wins).
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        import gcsfs.core

        endpoint = emulator if "://" in emulator else f"http://{emulator}"
        _probe_url(endpoint, resolved, "start the GCS emulator or unset STORAGE_EMULATOR_HOST")
        log.info("board %s: GCS emulator at %s, anonymous access", resolved, endpoint)
        return gcsfs.core.GCSFileSystem(token="anon", endpoint_url=endpoint, cache_timeout=0)

    import gcsfs
    import google.auth
    import google.auth.exceptions

    try:
        google.auth.default()
        token = "google_default"
        log.info("board %s: Google Application Default Credentials", resolved)
    except google.auth.exceptions.GoogleAuthError as err:
        if write:
            raise BoardError(
                f"cannot write to {resolved}: no Google credentials found ({err}). Set "
                "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run "
                "`gcloud auth application-default login`, or run on a VM with a service account"
            ) from None
        token = "anon"
        log.info("board %s: no Google credentials, reading anonymously (public buckets only)", resolved)
    _probe_url("https://storage.googleapis.com", resolved, "check the network connection")
    return gcsfs.GCSFileSystem(token=token, cache_timeout=0)


def _open_s3(resolved: str, write: bool) -> Any:
    import botocore.session
    import s3fs

    endpoint = (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "").strip()
    has_credentials = botocore.session.Session().get_credentials() is not None
    if not has_credentials and write:
        raise BoardError(
            f"cannot write to {resolved}: no AWS credentials found. Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run with an instance role"
        )
    options: dict[str, Any] = {
        "anon": not has_credentials,
        "listings_expiry_time": 0,
        "config_kwargs": {"connect_timeout": _PROBE_TIMEOUT, "retries": {"max_attempts": 5, "mode": "standard"}},
    }
    if endpoint:
        options["client_kwargs"] = {"endpoint_url": endpoint}
        _probe_url(endpoint, resolved, "start the S3 server or fix AWS_ENDPOINT_URL")
    if not has_credentials:
        log.info("board %s: no AWS credentials, reading anonymously (public buckets only)", resolved)
    return s3fs.S3FileSystem(**options)


def _check_bucket(fs: Any, resolved: str, write: bool) -> None:
    """The bucket exists (for writing) or the board's folder does (for reading); else BoardError."""
    bucket, path = _split(resolved)
    target = bucket if write else path
    try:
        fs.ls(target)
    except FileNotFoundError:
        if write:
            raise BoardError(
                f"cannot write to {resolved}: bucket {bucket!r} does not exist; create it first"
            ) from None
        raise BoardError(
            f"board {resolved} holds nothing: check the location, or upload with imagenet_upload first"
        ) from None
    except PermissionError as err:
        raise BoardError(f"access to {resolved} was refused ({err}); check the credentials' permissions") from None
    except Exception as err:
        raise BoardError(f"cannot reach board {resolved}: {type(err).__name__}: {err}") from None


def _read_manifest(fs: Any, resolved: str) -> dict[str, str]:
    import yaml

    url = f"{resolved}/{MANIFEST}"
    try:
        text = fs.cat_file(url)
    except FileNotFoundError:
        raise BoardError(
            f"board {resolved} has no {MANIFEST} manifest: it was not written by imagenet_upload, or the "
            "upload has not finished; run imagenet_upload on the board this URL serves"
        ) from None
    except Exception as err:
        raise BoardError(f"cannot reach board {resolved}: {type(err).__name__}: {err}") from None
    try:
        manifest = yaml.safe_load(text) or {}
        return {str(name): str(list(versions)[-1]) for name, versions in manifest.items() if versions}
    except (yaml.YAMLError, AttributeError, TypeError) as err:
        raise BoardError(f"the manifest {url} is not a pins manifest ({err}); re-run imagenet_upload") from None


def open_board(board: str | os.PathLike | None, *, write: bool = False) -> Any:
    """Open ``board`` as a pins board, checking up front that it can be reached.

    ``write=True`` also checks that it can be written: credentials exist for gs:// and s3://, the
    bucket exists, and the board is not an https:// one (read only); a local folder is created.
    Problems raise ``BoardError`` saying what to change. The returned board has no pins cache:
    ``board.fs`` reads and writes the backend directly.
    """
    import pins
    from pins.boards import BaseBoard, BoardManual

    resolved = resolve_board(board)
    kind = board_kind(resolved)
    if kind == "file":
        if write:
            try:
                os.makedirs(resolved, exist_ok=True)
            except OSError as err:
                raise BoardError(f"cannot create the board folder {resolved}: {err}") from None
        elif not os.path.isdir(resolved):
            raise BoardError(
                f"board folder {resolved} does not exist: upload with imagenet_upload(..., board = "
                f"{resolved!r}) first, or set ALEXNET_BOARD to the board's location"
            )
        return pins.board_folder(resolved)
    if kind == "http":
        if write:
            raise BoardError(
                f"board {resolved} is read only (https://); upload to the folder, gs:// or s3:// "
                "location that this URL serves"
            )
        import fsspec

        _probe_url(resolved, resolved, "check the URL and the network connection")
        fs = fsspec.filesystem("http")
        return BoardManual(resolved, fs, versioned=False, pin_paths=_read_manifest(fs, resolved))
    fs = _open_gcs(resolved, write) if kind == "gs" else _open_s3(resolved, write)
    _check_bucket(fs, resolved, write)
    return BaseBoard(_split(resolved)[1], fs, versioned=True)


def pin_names(board: Any) -> list[str]:
    """Names of the pins on ``board`` (the manifest's for https:// boards)."""
    from pins.boards import BoardManual

    if isinstance(board, BoardManual):
        return list(board.pin_paths)
    try:
        return list(board.pin_list())
    except FileNotFoundError:
        return []


def write_manifest(board: Any, versions: Mapping[str, str]) -> None:
    """Write ``_pins.yaml`` at the board's root, listing pin -> ``[<pin>/<version>/]``.

    This is the format of R pins' ``write_board_manifest()``; it lets https:// readers find the pins.
    ``versions`` maps each pin to its current version (the writer knows them, so nothing is listed).
    """
    import yaml

    manifest = {name: [f"{name}/{version}/"] for name, version in sorted(versions.items())}
    with board.fs.open(f"{board.board}/{MANIFEST}", "w") as f:
        f.write(yaml.safe_dump(manifest, default_flow_style=False))
