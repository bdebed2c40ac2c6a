"""Storage locations: a string names where data lives; this module turns it into an fsspec file system.

=================================  ===========================================================
location string                    backend and credentials
=================================  ===========================================================
a path or ``file://`` URL          the local file system; nothing needed
``gs://bucket/prefix``             gcsfs. With ``STORAGE_EMULATOR_HOST`` set (a local emulator)
                                   it connects anonymously. Otherwise Google Application Default
                                   Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth
                                   application-default login``, or the VM's service account);
                                   reads without any fall back to anonymous access (public
                                   buckets) with a warning, writes stop with a ``BoardError``, and
                                   so does a read when ``GOOGLE_APPLICATION_CREDENTIALS`` names no
                                   usable key file.
``s3://bucket/prefix``             s3fs, with the standard AWS credential chain
                                   (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``,
                                   instance roles) and ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
                                   for S3-compatible stores. Reads without credentials fall back to
                                   anonymous access with a warning; writes stop with a ``BoardError``.
``https://host/prefix``            read only (``http://`` too).
=================================  ===========================================================

Boards (:mod:`alexnet.storage.board`) and training outputs (checkpoints, models) take the same strings.
A backend's library (gcsfs, s3fs, aiohttp) is imported only when a location of that kind is opened, and
opening first checks that something answers (:func:`.reach.probe_url`: a connection, then an answer to one request), so
that a wrong address, or a server that takes connections and stays silent, fails in seconds with one clear error
instead of after a client's minutes of retries.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

from ..environment import env_value
from ..errors import AlexnetError, BoardError, importing, reason
from .reach import aiohttp_timeout, botocore_timeouts, probe_url

log = logging.getLogger(__name__)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
#: A scheme this module reads, mistyped: one slash or none after its colon (``gs:/b``, ``s3:b``), or no colon
#: (``gs//b``).
_MISTYPED = re.compile(r"^(gs|gcs|s3|s3a|file|https?)(?::(?!//)|//)/*(.*)$", re.IGNORECASE | re.DOTALL)
#: Attempts botocore makes of one S3 request ("standard" mode; its ``total_max_attempts``, as its ``max_attempts``
#: counts the retries after the first), and times s3fs repeats that for a dropped connection
#: or a silent socket: a dead endpoint ends an attempt of :func:`alexnet.storage.transfer.retry` within seconds
#: (connections refused) or about 30 s (connections timed out); one that takes connections and stays silent, in
#: about 3 minutes (each request waits :data:`.reach.SILENT_TIMEOUT`). gcsfs makes 6 requests: about 35 s when refused,
#: up to about 3.5 minutes when silent. An endpoint silent from the start is found by :func:`.reach.probe_url` instead,
#: in :data:`.reach.PROBE_TIMEOUT`.
_S3_ATTEMPTS, _S3FS_RETRIES = 3, 2

#: What to set for credentials, by cloud: in the errors and warnings of a location read or written without them.
_CREDENTIALS = {
    "gs": "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run `gcloud auth "
          "application-default login`, or run on a VM with a service account",
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run with an instance role",
}
#: The clouds whose anonymous reading was warned of: once a process.
_WARNED_ANONYMOUS: set[str] = set()

#: Location kinds, as :func:`location_kind` names them.
KINDS = ("file", "gs", "s3", "http")


def console_bucket(parsed: urllib.parse.ParseResult) -> str | None:
    """The ``gs://`` or ``s3://`` location that a web console's page of a bucket (Google Cloud's
    ``console.cloud.google.com/storage/browser/BUCKET/PREFIX``, AWS's
    ``s3.console.aws.amazon.com/s3/buckets/BUCKET?prefix=PREFIX/``) shows; ``None`` for any other URL."""
    host, parts = parsed.netloc.lower(), [p for p in parsed.path.split("/") if p]
    if host == "console.cloud.google.com" and parts[:2] == ["storage", "browser"] and len(parts) > 2:
        rest = parts[3:] if parts[2] == "_details" else parts[2:]  # an object's page names its bucket after it
        return "gs://" + "/".join(rest) if rest else None
    if host.endswith("console.aws.amazon.com") and parts[:2] == ["s3", "buckets"] and len(parts) > 2:
        prefix = urllib.parse.parse_qs(parsed.query).get("prefix", [""])[0].strip("/")
        return f"s3://{parts[2]}" + (f"/{prefix}" if prefix else "")
    return None


def home_expanded(location: str) -> str:
    """``location`` with a leading ``~`` (``~user``) replaced by that home folder, as a shell does: a local path
    written from the home folder (``cache_dir = "~/models"``, ``--model-cache '~/m'`` quoted); any other string, a
    URL or a path with ``~`` further in, as it is. Every location setting (:class:`alexnet.declare.kinds.Spec`) and
    every location :func:`resolve_location` reads go through it, so that no folder named ``~`` is ever made."""
    return os.path.expanduser(location) if location.startswith("~") else location


#: The locations a string may name: any (to read), one to write to, a local folder.
READABLE, WRITABLE, LOCAL = ("a folder path, file://, gs://, s3:// or https://", "a folder path, file://, gs:// or s3://",
                             "a folder path or file://")


def resolve_location(location: str | os.PathLike, what: str = "board", *, takes: str = READABLE) -> str:
    """The canonical form of ``location``: an absolute local path, or a ``gs://``, ``s3://``, ``http(s)://`` URL.

    ``file://`` URLs (and ``file:/path``) and relative paths become absolute paths (a leading ``~`` is the home folder:
    :func:`home_expanded`); ``gcs://`` is spelled ``gs://`` and ``s3a://``
    ``s3://``; trailing slashes are dropped, and so are empty segments of a bucket URL (``s3://b//x`` is
    ``s3://b/x``, for reads and writes alike). Any other scheme, or a mistyped one (``gs:/b``, ``s3:b``,
    ``gs//b``: a local folder only when written ``./gs:/b``), raises ``BoardError`` naming ``what`` the string
    was given as (``"board"``, ``"checkpoint_dir"``, ...), and saying what it ``takes`` (:data:`READABLE`,
    :data:`WRITABLE` or :data:`LOCAL`). Anything but a string or a path is an ``AlexnetError``.
    """
    said = f"`{what}`" if what.isidentifier() else f"the {what}"  # a setting's name, as the command line says it
    if not isinstance(location, (str, bytes, os.PathLike)):
        raise AlexnetError(f"{said} must be a folder path or a URL (a string), not {type(location).__name__} "
                           f"{location!r}.")
    text = os.fspath(location)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    text = text.strip()
    if not text:
        raise BoardError(f"{said} is an empty string; give {takes}")
    match = _SCHEME.match(text)
    typo = _MISTYPED.match(text) if match is None else None
    if typo is not None and re.match(r"(?i)file:/(?!/)", text):  # file:/path, a file URL's short form
        return os.path.abspath(urllib.parse.unquote(text[len("file:"):]))
    if typo is not None:
        scheme = typo.group(1).lower()
        if not typo.group(2) and scheme != "file":
            named = "host" if scheme.startswith("http") else "bucket"
            raise BoardError(f"{said} {text!r} names no {named}; write it as {scheme}://{named}/prefix, or "
                             f"{'./' + text!r} for a local folder")
        meant = f"{'file:///' if scheme == 'file' else f'{scheme}://'}{typo.group(2)}"
        raise BoardError(f"{said} {text!r} is a mistyped URL: write {meant!r}, or {'./' + text!r} for a local folder")
    if match is None:
        return os.path.abspath(home_expanded(text))
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        parsed = urllib.parse.urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise BoardError(f"{said} {text!r}: file:// URLs must name a local path (file:///path)")
        return os.path.abspath(urllib.parse.unquote(parsed.path))
    if scheme in ("gs", "gcs", "s3", "s3a"):
        if rest.startswith("/") or not rest.strip("/"):
            raise BoardError(f"{said} {text!r} names no bucket; write it as {scheme}://bucket/prefix")
        if "?" in rest or "#" in rest:  # a URL copied with its query string: its folder would be named so
            head = re.split(r"[?#]", text, maxsplit=1)[0]
            bare = head.rstrip("/")
            raise BoardError(f"{said} {text!r} carries a query string ({text[len(head):]!r}), which a bucket location "
                             f"takes none of: write {bare!r}")
        return f"{'gs' if scheme in ('gs', 'gcs') else 's3'}://{re.sub('/{2,}', '/', rest.strip('/'))}"
    if scheme in ("http", "https"):
        parsed = urllib.parse.urlparse(text)
        if not parsed.netloc:
            raise BoardError(f"{said} {text!r} names no host; write it as https://host/prefix")
        console = console_bucket(parsed)
        if console is not None:
            raise BoardError(f"{said} {text!r} is the web console's page of a bucket, not the bucket: "
                             f"write {console!r}")
        if parsed.query or parsed.fragment:  # the board's files are read at URLs made from it, which cannot keep one
            bare = urllib.parse.urlunparse(parsed._replace(query="", fragment="")).rstrip("/")
            raise BoardError(f"{said} {text!r} carries a query string, which the URLs of the board's files made from "
                             f"it cannot keep: write {bare!r} (its files readable there without one)")
        return text.rstrip("/")
    raise BoardError(f"{said} {text!r} uses the unsupported scheme {scheme}://; use {takes}")


def location_kind(resolved: str) -> str:
    """``"file"``, ``"gs"``, ``"s3"`` or ``"http"`` for a string returned by :func:`resolve_location`."""
    for prefix, kind in (("gs://", "gs"), ("s3://", "s3"), ("http://", "http"), ("https://", "http")):
        if resolved.startswith(prefix):
            return kind
    return "file"


def bucket_path(resolved: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "bucket/a/b")``: the bucket and the path fsspec uses."""
    path = resolved.split("://", 1)[1]
    return path.split("/", 1)[0], path


def fs_path(resolved: str) -> str:
    """The path of a resolved location on its own file system (no scheme for buckets; the URL over HTTP)."""
    kind = location_kind(resolved)
    return bucket_path(resolved)[1] if kind in ("gs", "s3") else resolved


def _open_gcs(resolved: str, write: bool, what: str) -> Any:
    from .gcs_retries import hear_gcsfs_retries

    emulator = env_value("STORAGE_EMULATOR_HOST")
    if emulator and emulator != "default":
        # gcsfs's experimental bucket-type probe talks gRPC, which the emulator does not, and stalls;
        # the flag is read when gcsfs is imported, so it is set first (an explicit user choice wins).
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        with importing():
            import gcsfs.core

        hear_gcsfs_retries()  # after gcsfs's import, as below
        endpoint = emulator if "://" in emulator else f"http://{emulator}"
        probe_url(endpoint, f"{what} {resolved}",
                  "check that STORAGE_EMULATOR_HOST names a running GCS emulator, or unset it")
        log.info("%s: GCS emulator at %s, anonymous access", resolved, endpoint)
        return gcsfs.core.GCSFileSystem(token="anon", endpoint_url=endpoint, cache_timeout=0,
                                        requests_timeout=aiohttp_timeout())

    with importing():
        import gcsfs
        import google.auth
        import google.auth.exceptions

    hear_gcsfs_retries()
    try:
        google.auth.default()
        token = "google_default"
        log.info("%s: Google Application Default Credentials", resolved)
    except google.auth.exceptions.GoogleAuthError as err:
        if write:
            raise BoardError(f"cannot write to {resolved}: no Google credentials found ({err}); "
                             f"{_CREDENTIALS['gs']}") from None
        if key_file := env_value("GOOGLE_APPLICATION_CREDENTIALS"):  # given, and not usable: no anonymous read
            raise BoardError(f"cannot read {resolved}: GOOGLE_APPLICATION_CREDENTIALS = {key_file} gives no "
                             f"credentials ({err}); set it to a service-account key file, or unset it to read a "
                             "public bucket anonymously") from None
        token = "anon"
        _warn_anonymous("gs", resolved, "no Google credentials found")
    probe_url("https://storage.googleapis.com", f"{what} {resolved}", "check the network connection")
    return gcsfs.GCSFileSystem(token=token, cache_timeout=0, requests_timeout=aiohttp_timeout())


def _open_s3(resolved: str, write: bool, what: str) -> Any:
    with importing():  # before botocore, which it brings: a Python without either is told to install s3fs
        import s3fs
    import botocore.exceptions
    import botocore.session

    endpoint = env_value("AWS_ENDPOINT_URL_S3") or env_value("AWS_ENDPOINT_URL")
    variable = "AWS_ENDPOINT_URL_S3" if env_value("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL"
    try:
        has_credentials = botocore.session.Session().get_credentials() is not None
    except botocore.exceptions.ProfileNotFound as err:  # AWS_PROFILE names no profile of ~/.aws
        raise BoardError(f"cannot {'write to' if write else 'read'} {resolved}: {err}; set AWS_PROFILE to a profile of "
                         "~/.aws/config or ~/.aws/credentials, or unset it") from None
    if not has_credentials and write:
        raise BoardError(f"cannot write to {resolved}: no AWS credentials found; {_CREDENTIALS['s3']}")
    options: dict[str, Any] = {
        "anon": not has_credentials,
        "listings_expiry_time": 0,
        "config_kwargs": {**botocore_timeouts(),
                          "retries": {"total_max_attempts": _S3_ATTEMPTS, "mode": "standard"}},
    }
    if endpoint:
        options["client_kwargs"] = {"endpoint_url": endpoint}
        probe_url(endpoint, f"{what} {resolved}", f"check that {variable} names a running S3 server, or unset it")
    if not has_credentials:
        _warn_anonymous("s3", resolved, "no AWS credentials found")
    fs = s3fs.S3FileSystem(**options)
    fs.retries = _S3FS_RETRIES  # s3fs's own repeats of botocore's attempts (5: 15 requests to a silent endpoint)
    return fs


def _warn_anonymous(kind: str, resolved: str, missing: str) -> None:
    """Say, once a process for each cloud, that ``resolved`` is read without credentials (``missing`` says why)."""
    if kind in _WARNED_ANONYMOUS:
        log.info("%s: %s, reading anonymously", resolved, missing)
        return
    _WARNED_ANONYMOUS.add(kind)
    log.warning("%s: %s, reading anonymously, as only a public bucket allows; for a private one %s.", resolved,
                missing, _CREDENTIALS[kind])


def _anonymous(fs: Any) -> bool:
    """Whether ``fs`` reads a cloud's buckets without credentials (an emulator's anonymous access aside)."""
    if getattr(fs, "_endpoint", None):
        return False
    return getattr(fs, "anon", False) is True or getattr(getattr(fs, "credentials", None), "method", None) == "anon"


def check_bucket(fs: Any, resolved: str, write: bool, *, empty_hint: str, what: str = "board") -> None:
    """The bucket exists (for writing) or the location's folder does (for reading); else ``BoardError``.

    A location to read that holds nothing is told apart from one in a bucket that does not exist (the error
    names the endpoint when it is not the cloud's own); ``empty_hint`` ends the error for the first.
    ``what`` names the location.
    """
    bucket, path = bucket_path(resolved)
    try:
        if not write:
            try:
                fs.ls(path)
                return
            except FileNotFoundError:
                pass  # an empty prefix, or no bucket: which one is said below
        fs.ls(bucket)
    except FileNotFoundError:
        raise _no_bucket(fs, resolved, write, what) from None
    except PermissionError as err:
        raise refused(fs, resolved, err) from None
    except Exception as err:
        raise BoardError(f"cannot reach {what} {resolved}: {reason(err)}") from None
    if not write:
        raise BoardError(f"{what} {resolved} holds nothing: {empty_hint}")


def refused(fs: Any, resolved: str, err: BaseException) -> BoardError:
    """The error of a bucket location ``resolved`` whose file system ``fs`` was refused access (``err``): what to do
    about the credentials, or about their permissions."""
    if _anonymous(fs):
        return BoardError(f"access to {resolved} was refused to an anonymous reader ({err}): no credentials were "
                          f"found; {_CREDENTIALS[location_kind(resolved)]}")
    return BoardError(f"access to {resolved} was refused ({err}); check the credentials' permissions")


def _no_bucket(fs: Any, resolved: str, write: bool, what: str) -> BoardError:
    """The error for a location whose bucket is not found: it does not exist or, at an endpoint that lists no
    buckets either (a server that answers 404 to everything), that endpoint is no storage server."""
    bucket = bucket_path(resolved)[0]
    start = "cannot write to" if write else f"cannot read {what}"
    endpoint = getattr(fs, "_endpoint", None) or getattr(fs, "client_kwargs", {}).get("endpoint_url")
    if endpoint:
        variable = ("STORAGE_EMULATOR_HOST" if location_kind(resolved) == "gs"
                    else "AWS_ENDPOINT_URL_S3" if env_value("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL")
        try:
            fs.ls("")
        except PermissionError:
            pass  # a store that keeps its list of buckets to itself
        except Exception as err:
            return BoardError(f"{start} {resolved}: {endpoint} ({variable}) answers as no storage server does "
                              f"(listing its buckets: {reason(err)}); check {variable}")
    where = f" at {endpoint}" if endpoint else ""
    end = "create it first" if write else "check the location"
    return BoardError(f"{start} {resolved}: bucket {bucket!r} does not exist{where}; {end}")


def open_filesystem(resolved: str, *, write: bool = False, what: str = "board") -> Any:
    """An fsspec file system for the resolved location ``resolved``, reached and authorised for ``write``.

    Raises ``BoardError`` saying what to change when the location cannot be reached, has no credentials for
    writing, or is read-only (``http(s)://``) and ``write`` is true; the error names the location as ``what``
    (``"board"``, ``"checkpoint_dir"``, ...). Buckets are not listed here (see :func:`check_bucket`).
    """
    import fsspec

    kind = location_kind(resolved)
    if kind == "file":
        return fsspec.filesystem("file")
    if kind == "http":
        if write:
            raise BoardError(
                f"{what} {resolved} is read only (https://): write to the folder, gs:// or s3:// location that this "
                "URL serves"
            )
        probe_url(resolved, f"{what} {resolved}", "check the URL and the network connection")
        return fsspec.filesystem("http", client_kwargs={"timeout": aiohttp_timeout()})
    return _open_gcs(resolved, write, what) if kind == "gs" else _open_s3(resolved, write, what)


#: Where this machine lists its mounts, a line each: device, mount point, type, ...
MOUNTS_FILE = "/proc/mounts"
#: Types of file system (as :data:`MOUNTS_FILE` names them) whose folders every node of a cluster can mount alike:
#: network and cluster file systems, and FUSE ones (``fuse.gcsfuse``, ``fuse.s3fs``, ...), which mostly are.
SHARED_FILE_SYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "ceph", "beegfs",
                                 "glusterfs", "afs", "orangefs"})


def mounted_file_system(path: str | os.PathLike) -> tuple[str, str] | None:
    """The type of the file system ``path`` is on and where it is mounted (the longest mount point of
    :data:`MOUNTS_FILE` that holds the path, symbolic links followed); ``None`` where mounts are not listed."""
    try:
        lines = Path(MOUNTS_FILE).read_text().splitlines()
    except OSError:
        return None
    real, found = os.path.realpath(path), None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), fields[1])  # a space is \040
        holds = real == point or real.startswith(point.rstrip("/") + "/")
        if holds and (found is None or len(point) >= len(found[1])):  # a later mount on a point hides the one before
            found = (fields[2], point)
    return found


def local_path_warning(said: str, path: str | os.PathLike) -> str | None:
    """The warning for a path (``said``: how the message names it, ``"`checkpoint_dir` = /runs/1"``) that every
    node of a cluster must reach: ``None`` on a network or cluster file system (:data:`SHARED_FILE_SYSTEMS`,
    ``fuse.*``), which the nodes share; else what to do, and when it is fine."""
    found = mounted_file_system(path)
    if found is not None and (found[0] in SHARED_FILE_SYSTEMS or found[0].startswith("fuse.")):
        return None
    where = f" on this machine's {found[0]} file system (mounted at {found[1]})" if found else ""
    return (f"{said} is a path{where}: on a cluster every node has its own folder there, and the workers would not "
            "share it; use gs:// or s3:// storage every worker reaches. If every node mounts one shared folder at "
            "this path, this is fine (a network or cluster file system, such as NFS, CIFS, Lustre, GPFS, CephFS, "
            "BeeGFS, GlusterFS or a FUSE mount like gcsfuse, is known to be shared and not warned of).")
