"""Fetch a worker's share of the categories from a board into a local cache, in parallel, verified.

Cache layout (``cache_dir``, by default ``<user cache dir>/alexnet/data/<hash of the board string>``)::

    train/<wnid>/<image files>  + .alexnet-cache.json
    val/<wnid>/<image files>    + .alexnet-cache.json
    .tmp/                       downloads and extractions in progress

A category is downloaded to a temporary name, its sha256 checked against the ``categories`` pin (on a
mismatch it is downloaded once more, then ``IntegrityError`` names the category), extracted into a
temporary folder, described by a marker file (zip sha256, every file's name and size) and only then
renamed into place. A cached category counts only when its marker matches the board's sha256 and every
file is there with its recorded size, so nothing half-written is ever trusted; a second call with an
intact cache moves no bytes. Archive members are never written outside the extraction folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import shutil
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from .board import open_board, resolve_board, sha256_file
from .errors import AlexnetError, BoardError, IntegrityError
from .partition import as_int, partition_categories
from .progress import progress_bar
from .upload import CATEGORIES_PIN, CATEGORY_COLUMNS, val_pin_name

log = logging.getLogger(__name__)

MARKER = ".alexnet-cache.json"
TMP = ".tmp"
_STALE_TMP_SECONDS = 24 * 3600
_INTEGRITY_ATTEMPTS = 2


# -- categories ---------------------------------------------------------------------------------------------


def _read_categories(bd: Any, resolved: str) -> list[dict[str, Any]]:
    from pins.errors import PinsError

    try:
        frame = bd.pin_read(CATEGORIES_PIN)
    except (PinsError, FileNotFoundError, KeyError):
        raise BoardError(
            f"board {resolved} has no categories pin: its upload has not finished (or never started); "
            "run imagenet_upload to this board"
        ) from None
    except Exception as err:
        raise BoardError(f"cannot read the categories pin of {resolved}: {type(err).__name__}: {err}") from None
    missing = [c for c in ("id", "name", "index", "images", "bytes", "sha256") if c not in frame.columns]
    if missing:
        raise BoardError(
            f"the categories pin of {resolved} lacks the columns {missing}: it was not written by "
            "imagenet_upload; upload the data again"
        )

    def text(value: Any) -> str:
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)

    def number(value: Any) -> int:
        return 0 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)

    rows = []
    for record in frame.to_dict(orient="records"):
        row: dict[str, Any] = {}
        for column in CATEGORY_COLUMNS:
            value = record.get(column)
            row[column] = number(value) if column in ("index", "images", "bytes", "val_images", "val_bytes") \
                else text(value)
        rows.append(row)
    return sorted(rows, key=lambda r: r["index"])


def imagenet_categories(board: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """The board's categories table: one dict per category, sorted by ``index``.

    Keys: ``id``, ``name``, ``index`` (global 0-based label), ``images``, ``bytes``, ``sha256`` (of the
    zip), ``version`` (its pin version) and ``val_images``, ``val_bytes``, ``val_sha256``, ``val_version``.
    """
    resolved = resolve_board(board)
    return _read_categories(open_board(resolved), resolved)


# -- cache --------------------------------------------------------------------------------------------------


def default_cache_dir(resolved_board: str) -> str:
    """``<user cache dir>/alexnet/data/<first 16 hex digits of sha256(board)>``: one cache per board."""
    import platformdirs

    key = hashlib.sha256(resolved_board.encode()).hexdigest()[:16]
    return os.path.join(platformdirs.user_cache_dir("alexnet"), "data", key)


def _read_marker(folder: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            marker = json.load(f)
        return marker if isinstance(marker, dict) else None
    except (OSError, ValueError):
        return None


def cached_files(folder: str, sha256: str) -> list[str] | None:
    """The file names extracted in ``folder`` if it holds a complete extraction of the zip ``sha256``.

    Complete means: the marker names that sha256, and every file it lists exists with its size.
    """
    marker = _read_marker(folder)
    if marker is None or marker.get("sha256") != sha256:
        return None
    names = []
    for entry in marker.get("files", []):
        name, size = entry
        try:
            if os.stat(os.path.join(folder, name)).st_size != size:
                return None
        except OSError:
            return None
        names.append(name)
    return names


def _safe_member(name: str) -> str | None:
    """The member's relative path inside the extraction folder, or None if it would land outside it."""
    normalised = name.replace("\\", "/")
    if normalised.startswith("/") or (len(normalised) > 1 and normalised[1] == ":"):
        return None
    parts = [p for p in normalised.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return os.path.join(*parts)


def extract_zip(zip_path: str, dest: str, *, label: str = "") -> list[tuple[str, int]]:
    """Extract ``zip_path`` into the folder ``dest``; return ``(relative path, size)`` of every file.

    Members with absolute names, drive letters or ``..`` components would be written outside ``dest``:
    the whole archive is refused with ``IntegrityError`` (naming ``label`` and the member) before
    anything is written. CRCs are checked while extracting.
    """
    what = f"the zip of {label}" if label else zip_path
    try:
        with zipfile.ZipFile(zip_path) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            targets = []
            for member in members:
                rel = _safe_member(member.filename)
                if rel is None:
                    raise IntegrityError(
                        f"{what} holds the member {member.filename!r}, which would be written outside "
                        f"{dest}; refusing to extract it. Re-upload the category with imagenet_upload"
                    )
                targets.append((member, rel))
            root = os.path.realpath(dest)
            files: dict[str, int] = {}
            for member, rel in targets:
                out = os.path.join(root, rel)
                if os.path.commonpath([root, os.path.realpath(os.path.dirname(out))]) != root:
                    raise IntegrityError(f"{what}: member {member.filename!r} resolves outside {dest}")
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with zf.open(member) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                files[rel] = os.path.getsize(out)
    except zipfile.BadZipFile as err:
        raise IntegrityError(f"{what} is not a valid zip ({err}); re-upload the category") from None
    return sorted(files.items())


def _clean_stale_tmp(tmp: str) -> None:
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(tmp):
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TMP_SECONDS:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.remove(entry.path)


# -- download -----------------------------------------------------------------------------------------------


@dataclass
class _Item:
    wnid: str
    split: str  # "train" or "val"
    remote: str  # object path on the board's filesystem
    sha256: str
    size: int
    dest: str  # final folder in the cache


def _download(fs: Any, remote: str, local: str, progress: Callable[[int], None]) -> None:
    """Copy the object ``remote`` to the local file ``local``, reporting bytes as they arrive."""
    from fsspec.callbacks import Callback

    class _Progress(Callback):
        def call(self, *args: Any, **kwargs: Any) -> None:
            pass

        def relative_update(self, inc: int = 1) -> None:
            super().relative_update(inc)
            progress(inc)

    callback = _Progress()
    fs.get_file(remote, local, callback=callback)
    # Some filesystems (a local copy) do not report progress: account for the rest at the end.
    rest = os.path.getsize(local) - int(callback.value or 0)
    if rest > 0:
        progress(rest)


def _fetch_item(item: _Item, fs: Any, tmp: str, *, retries: int, progress: Callable[[int], None]) -> list[str]:
    """Download, verify and extract one zip into ``item.dest``; return its file names."""
    token = f"{item.split}-{item.wnid}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    part = os.path.join(tmp, f"{token}.zip.part")
    what = f"category {item.wnid}" + (" (validation images)" if item.split == "val" else "")
    try:
        for check in range(_INTEGRITY_ATTEMPTS):
            for attempt in range(retries + 1):
                try:
                    _download(fs, item.remote, part, progress)
                    break
                except (FileNotFoundError, PermissionError) as err:
                    raise BoardError(
                        f"{what} is listed in the categories pin but {item.remote} cannot be read "
                        f"({type(err).__name__}: {err}); run imagenet_upload to this board again"
                    ) from None
                except Exception as err:
                    if attempt == retries:
                        raise BoardError(
                            f"downloading {what} from {item.remote} failed after {retries + 1} attempts: "
                            f"{type(err).__name__}: {err}"
                        ) from err
                    delay = min(30.0, 0.5 * 2**attempt) * (0.5 + random.random())
                    log.warning("downloading %s failed (%s: %s); retrying in %.1f s", what,
                                type(err).__name__, err, delay)
                    time.sleep(delay)
            actual = sha256_file(part)
            if actual == item.sha256:
                break
            if check + 1 < _INTEGRITY_ATTEMPTS:
                log.warning("%s: sha256 %s does not match the categories pin (%s); fetching it again",
                            what, actual, item.sha256)
            else:
                raise IntegrityError(
                    f"{what}: the zip at {item.remote} has sha256 {actual}, but the categories pin says "
                    f"{item.sha256}, twice in a row. The object on the board is corrupt or was replaced; "
                    f"upload the category again with imagenet_upload"
                )
        staging = os.path.join(tmp, token)
        os.makedirs(staging)
        files = extract_zip(part, staging, label=what)
        marker = {"sha256": item.sha256, "category": item.wnid, "split": item.split, "files": files}
        with open(os.path.join(staging, MARKER + ".part"), "w", encoding="utf-8") as f:
            json.dump(marker, f)
        os.replace(os.path.join(staging, MARKER + ".part"), os.path.join(staging, MARKER))
        _install(staging, item, tmp)
        return [name for name, _ in files]
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(part)


def _install(staging: str, item: _Item, tmp: str) -> None:
    """Move a finished extraction into place, replacing a stale or partial one."""
    os.makedirs(os.path.dirname(item.dest), exist_ok=True)
    if os.path.lexists(item.dest):
        old = os.path.join(tmp, f"old-{uuid.uuid4().hex}")
        with contextlib.suppress(FileNotFoundError):
            os.rename(item.dest, old)
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(staging, item.dest)
    except OSError:
        # Another process installed the same category meanwhile: keep theirs if it is complete.
        if cached_files(item.dest, item.sha256) is None:
            raise
        shutil.rmtree(staging, ignore_errors=True)


# -- partition ----------------------------------------------------------------------------------------------


def imagenet_partition(
    partition: int = 0,
    total: int = 16,
    board: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    workers: int = 8,
    retries: int = 3,
    validation: bool = True,
) -> dict[str, Any]:
    """Fetch partition ``partition`` (0-based) of ``total`` from ``board`` into a local cache.

    Categories are split by ``partition_categories`` (balanced image counts, deterministic). Their zips
    are downloaded ``workers`` at a time, each retried ``retries`` times on transient errors, checked
    against the sha256 in the ``categories`` pin and extracted into ``cache_dir``; cached categories
    are reused without any download.

    Returns a dict: ``image`` (absolute paths), ``category`` (wnid per image), ``categories`` (this
    partition's wnids), ``label`` (global index per image), ``num_classes`` (global count), ``val_image``,
    ``val_label``, ``val_category`` (this partition's validation images, empty when the board has none or
    ``validation`` is false), ``partition``, ``total``, ``board``, ``cache_dir``, ``downloaded_bytes`` and
    ``seconds``.
    """
    partition = as_int(partition, "partition")
    total = as_int(total, "total")
    workers = as_int(workers, "workers")
    retries = as_int(retries, "retries")
    if total < 1:
        raise AlexnetError(f"total must be at least 1, not {total}")
    if not 0 <= partition < total:
        raise AlexnetError(f"partition must be in 0..{total - 1} (0-based, with total = {total}), not {partition}")
    if workers < 1:
        raise AlexnetError(f"workers must be at least 1, not {workers}")
    if retries < 0:
        raise AlexnetError(f"retries must be 0 or more, not {retries}")

    resolved = resolve_board(board)
    bd = open_board(resolved)
    rows = _read_categories(bd, resolved)
    by_id = {r["id"]: r for r in rows}
    wnids = partition_categories({r["id"]: r["images"] for r in rows}, partition, total)

    cache = os.path.abspath(os.path.expanduser(os.fspath(cache_dir))) if cache_dir is not None \
        else default_cache_dir(resolved)
    tmp = os.path.join(cache, TMP)
    os.makedirs(tmp, exist_ok=True)
    _clean_stale_tmp(tmp)

    items: list[_Item] = []
    for wnid in wnids:
        row = by_id[wnid]
        items.append(_Item(wnid, "train", f"{bd.board}/{wnid}/{row['version']}/{wnid}.zip",
                           row["sha256"], row["bytes"], os.path.join(cache, "train", wnid)))
        if validation and row["val_images"] > 0 and row["val_version"]:
            name = val_pin_name(wnid)
            items.append(_Item(wnid, "val", f"{bd.board}/{name}/{row['val_version']}/{name}.zip",
                               row["val_sha256"], row["val_bytes"], os.path.join(cache, "val", wnid)))

    files: dict[tuple[str, str], list[str]] = {}
    todo: list[_Item] = []
    for item in items:
        cached = cached_files(item.dest, item.sha256)
        if cached is None:
            todo.append(item)
        else:
            files[(item.wnid, item.split)] = cached

    start = time.monotonic()
    moved = 0
    lock = threading.Lock()
    if todo:
        log.info("partition %d/%d: fetching %d zips (%.1f MB) from %s, %d in the cache", partition, total,
                 len(todo), sum(i.size for i in todo) / 1e6, resolved, len(items) - len(todo))
        with progress_bar(sum(i.size for i in todo), f"fetch {partition}/{total}", unit="B", unit_scale=True,
                          unit_divisor=1024) as bar:

            def progress(n: int) -> None:
                nonlocal moved
                with lock:
                    moved += n
                    bar.update(n)

            errors: list[BaseException] = []
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="alexnet-fetch") as pool:
                futures = {pool.submit(_fetch_item, item, bd.fs, tmp, retries=retries, progress=progress): item
                           for item in todo}
                for future in as_completed(futures):
                    item = futures[future]
                    error = future.exception()
                    if error is not None:
                        errors.append(error)
                    else:
                        files[(item.wnid, item.split)] = future.result()
            if errors:
                if len(errors) > 1:
                    log.error("%d categories failed: %s", len(errors), "; ".join(str(e) for e in errors))
                raise errors[0]
    seconds = time.monotonic() - start

    result: dict[str, Any] = {"image": [], "category": [], "categories": list(wnids), "label": [],
                              "num_classes": len(rows), "val_image": [], "val_label": [], "val_category": []}
    for item in items:
        prefix = "" if item.split == "train" else "val_"
        index = by_id[item.wnid]["index"]
        for name in files[(item.wnid, item.split)]:
            result[f"{prefix}image"].append(os.path.join(item.dest, name))
            result[f"{prefix}category"].append(item.wnid)
            result[f"{prefix}label"].append(index)
    result.update({"partition": partition, "total": total, "board": resolved, "cache_dir": cache,
                   "downloaded_bytes": moved, "seconds": round(seconds, 3)})
    if todo:
        log.info("partition %d/%d: %.1f MB in %.1f s (%.1f MB/s)", partition, total, moved / 1e6, seconds,
                 moved / 1e6 / seconds if seconds > 0 else math.nan)
    return result
