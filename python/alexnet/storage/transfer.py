"""Moving bytes safely: one retry policy, atomic downloads, sha256 and safe extraction (zips are written by
:mod:`alexnet.storage.zipformat`)."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import random
import shutil
import time
import uuid
import zipfile
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import AlexnetError, BoardError, IntegrityError

log = logging.getLogger(__name__)

T = TypeVar("T")

class Stopped(Exception):
    """A transfer stopped on purpose from its progress callback (Ctrl-C in another thread): not attempted again."""


#: Errors that another attempt cannot fix: they are raised at once (so are those of a local disk, :func:`disk_error`).
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, PermissionError, AlexnetError, Stopped)
#: The error numbers that say a disk is full: no space left, or the user's quota used up.
DISK_FULL = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
#: The error numbers that say a disk cannot be written: mounted read-only, or a file or folder this process may not
#: write (refusals count only for a file in the folder written, as reading a board may be refused too).
_READ_ONLY = errno.EROFS
_REFUSED = frozenset({errno.EACCES, errno.EPERM})


def disk_error(error: BaseException | None, folder: str | None = None) -> OSError | None:
    """The ``OSError`` in ``error``'s chain (itself, its causes and contexts) that says a local disk is full
    (:data:`DISK_FULL`) or read-only, or refused writing a file in ``folder`` (the local folder being written, when
    given), else None: the local disk's error, not the network's or the board's, which no other attempt fixes."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno is not None:
            if error.errno in DISK_FULL or error.errno == _READ_ONLY:
                return error
            if error.errno in _REFUSED and folder is not None and (
                    inside(error.filename, folder) or inside(error.filename2, folder)):
                return error
        error = error.__cause__ or error.__context__
    return None


def inside(name: Any, folder: str) -> bool:
    """Whether ``name`` (a path, or an ``OSError``'s file name, possibly None) is ``folder`` or a path in it."""
    if not isinstance(name, (str, os.PathLike)):
        return False
    return os.path.join(os.path.abspath(os.fspath(name)), "").startswith(os.path.join(os.path.abspath(folder), ""))

#: Downloads of a zip whose sha256 does not match before :class:`IntegrityError` is raised.
INTEGRITY_ATTEMPTS = 2


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt + 1``: exponential from 0.5 s, capped at 30 s, jittered by +-50%."""
    return min(30.0, 0.5 * 2**attempt) * (0.5 + random.random())


#: The longest a transfer keeps trying an endpoint that does not answer (connections refused, reset or timed out),
#: in seconds: no new attempt starts once this long has passed since the first failed attempt began (or since the
#: bytes last moved in it, for a download that made progress). The storage library's own retries count, as they run
#: inside an attempt; :func:`alexnet.storage.location.open_filesystem` configures them so that one attempt against a
#: dead endpoint ends within about 35 s (gcsfs: 6 requests with backoff; s3fs: 3 with a 10 s connect timeout), so
#: that a transfer gives up within about a minute, or two when connections time out instead of being refused. An
#: endpoint that takes connections and then stays silent costs each of the library's requests the silent socket's
#: 30 s: one attempt takes up to about 3.5 minutes then (gcsfs's 6 requests; s3fs's 3, twice, about 3), and the
#: transfer gives up after it (an endpoint silent from the start is found when the board is opened, in seconds:
#: :func:`alexnet.storage.reach.probe_url`). A slow link that moves bytes is never cut: the clients' timeouts are
#: for a silent socket, not for a whole transfer.
UNREACHABLE_SECONDS = 30.0

#: The exceptions, by class (module and name, matched anywhere in the error's class hierarchy), that say an endpoint
#: did not answer: no connection, a connection dropped, a socket silent for too long. Builtin ``ConnectionError`` and
#: ``TimeoutError`` count too.
_UNREACHABLE_CLASSES = frozenset({
    "aiohttp.client_exceptions.ClientConnectionError",  # refused, reset, server disconnected, socket timeouts
    "aiohttp.client_exceptions.ClientPayloadError",  # a body cut short by a dropped connection
    "botocore.exceptions.ConnectionError",  # EndpointConnectionError, ConnectTimeoutError
    "botocore.exceptions.HTTPClientError",  # ReadTimeoutError, ConnectionClosedError
    "requests.exceptions.ConnectionError",
    "requests.exceptions.Timeout",
    "fsspec.exceptions.FSTimeoutError",
})


def unreachable(error: BaseException | None) -> BaseException | None:
    """The error in ``error``'s chain (itself, its causes and contexts) that says an endpoint did not answer, or None.

    A ``BoardError`` that :func:`retry` raised after such failures is one too (through its cause). One that says
    nothing of its own and was raised from another (fsspec's ``FSTimeoutError`` in place of the client's timeout: a
    socket silent for too long, or a connection not made in time) gives way to that other one when it says so too."""
    seen: set[int] = set()
    found: BaseException | None = None
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (ConnectionError, TimeoutError)) or any(
                f"{cls.__module__}.{cls.__name__}" in _UNREACHABLE_CLASSES for cls in type(error).__mro__):
            if str(error).strip() or error.__cause__ is None:
                return error
            found = found or error
        error = error.__cause__ or error.__context__
    return found


def disk_full(error: BaseException | None) -> bool:
    """Whether ``error`` says a disk is full (:data:`DISK_FULL`, found by :func:`disk_error`)."""
    found = disk_error(error)
    return found is not None and found.errno in DISK_FULL


def brief(error: BaseException, limit: int = 200) -> str:
    """``error``'s kind and the first line of its text, at most ``limit`` characters: for a one-line message."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def retry(what: str, fn: Callable[[], T], retries: int, *, moved: Callable[[], float] | None = None,
          patience: float | None = None) -> T:
    """``fn()``, attempted up to ``retries + 1`` times with :func:`backoff` between attempts.

    Errors in :data:`PERMANENT_ERRORS` and a full or read-only disk's (:func:`disk_error`) are raised at once;
    after the last attempt any other error becomes a ``BoardError`` naming ``what``. An endpoint that does not
    answer (see :func:`unreachable`) is tried for at most ``patience`` seconds (by default :data:`UNREACHABLE_SECONDS`),
    counted from the start of the first attempt that failed so, or from when bytes last moved in it: ``moved()`` is
    the :func:`time.monotonic` of that (a download's progress), when given.
    """
    patience = UNREACHABLE_SECONDS if patience is None else patience
    first: float | None = None
    for attempt in range(retries + 1):
        began = time.monotonic()
        try:
            return fn()
        except PERMANENT_ERRORS:
            raise
        except Exception as err:
            if disk_error(err) is not None:
                raise
            cut = unreachable(err)
            if cut is not None:
                first = began if first is None else first
                if moved is not None:  # bytes that moved since start the window again
                    first = max(first, moved())
            waited = time.monotonic() - first if first is not None else 0.0
            if cut is not None and waited >= patience:
                raise BoardError(f"{what}: nothing answered for {waited:.0f} s ({brief(cut)})") from err
            if attempt == retries:
                attempts = f"{retries + 1} attempt{'s' if retries else ''}"
                raise BoardError(f"{what} failed after {attempts}: {brief(err)}") from err
            delay = backoff(attempt)
            if cut is not None:
                delay = max(0.0, min(delay, patience - waited))
            log.warning("%s failed (%s); retrying in %.1f s", what, brief(err), delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of a local file, read in 1 MiB blocks: how zips on a board are identified."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(fs: Any, remote: str, local: str, progress: Callable[[int], None] | None = None) -> None:
    """Copy the object ``remote`` of ``fs`` to the local file ``local``, which appears only once complete.

    The bytes go to a temporary name beside ``local`` and are renamed at the end, so that a download cut
    short never leaves a file at ``local``. ``progress(n)`` is called with byte counts as they arrive.
    """
    from fsspec.callbacks import Callback

    class _Progress(Callback):
        def call(self, *args: Any, **kwargs: Any) -> None:
            pass

        def relative_update(self, inc: int = 1) -> None:
            super().relative_update(inc)
            if progress is not None:
                progress(inc)

    part = f"{local}.part-{uuid.uuid4().hex[:8]}"
    callback = _Progress()
    try:
        fs.get_file(remote, part, callback=callback)
        # some file systems (a local copy) do not report progress: account for the rest at the end
        rest = os.path.getsize(part) - int(callback.value or 0)
        if rest > 0 and progress is not None:
            progress(rest)
        os.replace(part, local)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(part)


def download_verified(fs: Any, remote: str, local: str, sha256: str, *, what: str, retries: int,
                      progress: Callable[[int], None] | None = None, pin: str = "the categories pin",
                      remedy: str = "upload the category again: run imagenet_upload() to this board again",
                      damaged_remedy: str | None = None) -> None:
    """The one checked download of a pin's file: :func:`download` (with :func:`retry`) to a temporary name beside
    ``local``, renamed to ``local`` only once its SHA-256 is ``sha256``, what ``pin`` (the pin whose metadata lists
    the file) says; fetched once more on a mismatch. A damaged or replaced file is never left where a later call
    would find it.

    ``BoardError`` when ``remote`` cannot be read, :class:`IntegrityError` when the SHA-256 differs twice in a row;
    both name ``what`` and ``pin``, and say what to do (``remedy``; for a file that differs, ``damaged_remedy``,
    by default: delete it, then ``remedy``, since an upload keeps a file that is there whole). The local disk's
    errors (:func:`disk_error`: full, read-only, refused writing beside ``local``) are raised as they are, at once.
    """
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    last = [time.monotonic()]

    def moving(count: int) -> None:  # the bytes' progress: a slow link that moves them is not given up on
        last[0] = time.monotonic()
        if progress is not None:
            progress(count)

    for check in range(INTEGRITY_ATTEMPTS):
        staged = f"{local}.unverified-{uuid.uuid4().hex[:8]}"
        try:
            try:
                retry(f"downloading {what} from {remote}", functools.partial(download, fs, remote, staged, moving),
                      retries, moved=lambda: last[0])
            except (FileNotFoundError, PermissionError) as err:
                if disk_error(err, os.path.dirname(local) or ".") is not None:
                    raise  # writing here was refused, not reading the board
                if isinstance(err, FileNotFoundError) and inside(err.filename, os.path.dirname(staged) or "."):
                    raise AlexnetError(f"{what}: the file it was being downloaded to, {err.filename}, was removed "
                                       "meanwhile (by another process sharing this folder?); run it again") from err
                raise BoardError(f"{what} is listed in {pin} but {remote} cannot be read ({type(err).__name__}: "
                                 f"{err}); {remedy}") from None
            actual = sha256_file(staged)
            if actual == sha256:
                os.replace(staged, local)
                return
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(staged)
        if check + 1 < INTEGRITY_ATTEMPTS:
            log.warning("%s: SHA-256 %s does not match %s (%s); fetching it again", what, actual, pin, sha256)
    raise IntegrityError(
        f"{what}: {remote} has SHA-256 {actual}, but {pin} says {sha256}, twice in a row: it was tampered with or "
        f"damaged (or replaced), so it is not used; "
        + (damaged_remedy or f"delete {remote} (an upload keeps a file that is there), then {remedy}")
    )


def safe_member(name: str) -> str | None:
    """The member's relative path inside an extraction folder, or None if it would land outside it."""
    normalised = name.replace("\\", "/")
    if normalised.startswith("/") or (len(normalised) > 1 and normalised[1] == ":"):
        return None
    parts = [p for p in normalised.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return os.path.join(*parts)


#: How many times its own size a zip of JPEGs made by hand may hold once extracted: deflated, JPEGs shrink a few
#: percent; a zip that claims more holds something else, or is built to fill a disk.
JPEG_ZIP_GROWS = 2.0


def extract_zip(zip_path: str, dest: str, *, label: str = "",
                remedy: str = "re-upload the category with imagenet_upload()", grows: float = 1.0
                ) -> list[tuple[str, int, int]]:
    """Extract ``zip_path`` into the folder ``dest``; return ``(relative path, size, CRC-32)`` of every file.

    Members with absolute names, drive letters or ``..`` components would be written outside ``dest``,
    and members that say they grow to more than ``grows`` times what the zip itself holds would fill the disk
    (alexnet writes its zips stored, so what is extracted is never larger than the zip; a zip of JPEGs made by hand
    and deflated, ``grows`` = :data:`JPEG_ZIP_GROWS`, shrank them a few percent): either way the whole archive is
    refused with ``IntegrityError`` (naming ``label``, the member and ``remedy``) before anything is written. CRCs
    are checked while extracting, and no member is written past the size it declares.
    """
    what = f"the zip of {label}" if label else zip_path
    try:
        with zipfile.ZipFile(zip_path) as zf:
            targets = []
            for member in (m for m in zf.infolist() if not m.is_dir()):
                rel = safe_member(member.filename)
                if rel is None:
                    raise IntegrityError(
                        f"{what} holds the member {member.filename!r}, which would be written outside "
                        f"{dest}; refusing to extract it: {remedy}"
                    )
                targets.append((member, rel))
            declared, size = sum(member.file_size for member, _ in targets), os.path.getsize(zip_path)
            if declared > size * grows:
                largest = max(targets, key=lambda target: target[0].file_size)[0]
                written = ("alexnet writes its zips stored, so this one was not written by alexnet" if grows <= 1 else
                           f"JPEGs deflated shrink a few percent, not to less than 1/{grows:g}")
                raise IntegrityError(
                    f"{what} says it holds {declared:,} bytes once extracted, more than "
                    f"{'the' if grows <= 1 else f'{grows:g} times the'} {size:,} bytes of the zip itself (its member "
                    f"{largest.filename!r} alone {largest.file_size:,}): {written}, and it is not extracted (it "
                    f"could fill the disk): {remedy}"
                )
            root = os.path.realpath(dest)
            files: dict[str, tuple[int, int]] = {}
            # a folder checked (it resolves inside dest: no link out of it) and made, once for all its members: the
            # extraction writes only regular files, so what a folder resolves to does not change meanwhile
            made: set[str] = set()
            for member, rel in targets:
                out = os.path.join(root, rel)
                folder = os.path.dirname(out)
                if folder not in made:
                    if os.path.commonpath([root, os.path.realpath(folder)]) != root:
                        raise IntegrityError(f"{what}: member {member.filename!r} resolves outside {dest}")
                    os.makedirs(folder, exist_ok=True)
                    made.add(folder)
                with zf.open(member) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                    files[rel] = (dst.tell(), member.CRC)
    except zipfile.BadZipFile as err:
        raise IntegrityError(f"{what} is not a valid zip ({err}); re-upload the category") from None
    return [(name, size, crc) for name, (size, crc) in sorted(files.items())]
