"""``imagenet_upload()``: an ImageNet tree onto a board, one zip per category, checked images, resumable.

What ends up on the board is described in :mod:`alexnet.storage.layout`. Every image is decoded on the way
(:func:`alexnet.data.images.check_image`): empty, truncated and undecodable files are left out and listed.

Resuming: a category whose pin on the board has the same source fingerprint (file names, sizes, mtimes,
options) is skipped without reading its images; otherwise its zip is rebuilt and uploaded only when its
sha256 differs from the board's. An interrupted run, run again, completes what is missing. The
``categories`` table is written last, so a board that has one is complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from ..checks import MIN_IMAGE_SIZE, as_int, as_optional_int
from ..errors import AlexnetError, BoardError
from ..progress import progress_bar
from ..scratch import scratch_folder
from ..storage import layout
from ..storage.board import Board, open_board
from ..storage.publish import pin_state, prune, publish_file, quiet_pins, write_table
from ..storage.transfer import retry, sha256_file, stored_zip
from .imagenet import ImageNetTree, read_imagenet
from .images import check_image

log = logging.getLogger(__name__)


@dataclass
class _Unit:
    """One pin to write: a category's training images or its validation images."""

    wnid: str
    split: str  # "train" or "val"
    files: tuple[str, ...]
    pin: str
    source_bytes: int = 0


@dataclass
class _Result:
    unit: _Unit
    status: str  # "uploaded", "skipped", "excluded"
    images: int = 0
    bytes: int = 0
    sha256: str = ""
    version: str = ""
    bad: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Options:
    min_images: int
    resize: int | None
    quality: int
    retries: int


def _zip_images(unit: _Unit, dest: str, options: _Options) -> tuple[int, list[dict[str, str]]]:
    """Write the good images of ``unit`` to the zip ``dest``; return (good count, bad images)."""
    bad: list[dict[str, str]] = []
    good = 0
    names: set[str] = set()

    def reject(name: str, reason: str) -> None:
        bad.append({"category": unit.wnid, "split": unit.split, "file": name, "reason": reason})

    with stored_zip(dest) as add:
        for path in sorted(unit.files, key=os.path.basename):
            name = os.path.basename(path)
            if name in names:
                reject(name, "duplicate file name in the category")
                continue
            names.add(name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as err:
                reject(name, f"cannot be read ({err})")
                continue
            stored, reason = check_image(data, resize=options.resize, quality=options.quality)
            if stored is None:
                reject(name, reason)
                continue
            add(name, stored)
            good += 1
    return good, bad


def _fingerprint(unit: _Unit, options: _Options) -> str:
    """A hash of what the zip is made from: file names, sizes and mtimes, and the options."""
    digest = hashlib.sha256()
    settings = {"format": layout.FORMAT_VERSION, "split": unit.split, "resize": options.resize,
                "quality": options.quality if options.resize is not None else None}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    total = 0
    for path in sorted(unit.files):
        st = os.stat(path)
        total += st.st_size
        digest.update(f"\0{os.path.basename(path)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    unit.source_bytes = total
    return digest.hexdigest()


class _LazyBar:
    """The upload's progress bar, drawn from the first unit whose images have to be read: a run that finds every
    pin already on the board (from the same files) transfers nothing and shows no bar."""

    def __init__(self, total: int):
        self.total, self.bar, self.pending, self.lock = total, None, 0, threading.Lock()

    def start(self) -> None:
        """Show the bar (once), with the bytes of the units already settled."""
        with self.lock:
            if self.bar is None:
                self.bar = progress_bar(self.total, "upload", unit="B", unit_scale=True, unit_divisor=1024)
                self.bar.update(self.pending)

    def update(self, count: int, images: int) -> None:
        with self.lock:
            if self.bar is None:
                self.pending += count
            else:
                self.bar.update(count)
                self.bar.set_postfix(images=images, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _process(unit: _Unit, board: Board, existing: set[str], workdir: str, options: _Options,
             bar: _LazyBar | None = None) -> _Result:
    """Upload one unit unless the board already has it; what happened. ``bar`` is started before any image is
    read."""
    fingerprint = _fingerprint(unit, options)
    if unit.split == "train" and len(unit.files) < options.min_images:
        return _Result(unit, "excluded", images=len(unit.files))
    state = retry(f"reading pin {unit.pin}", lambda: pin_state(board, unit.pin), options.retries) \
        if unit.pin in existing else None
    if state is not None and state.get("source") == fingerprint:
        return _Result(unit, "skipped", images=int(state["images"]), bytes=int(state["bytes"]),
                       sha256=str(state["sha256"]), version=str(state["version"]),
                       bad=[dict(b) for b in state.get("bad", [])])
    if bar is not None:
        bar.start()
    zip_path = os.path.join(workdir, layout.zip_name(unit.pin))
    try:
        images, bad = _zip_images(unit, zip_path, options)
        if unit.split == "train" and images < options.min_images:
            return _Result(unit, "excluded", images=images, bad=bad)
        size, sha = os.path.getsize(zip_path), sha256_file(zip_path)
        if state is not None and state.get("sha256") == sha:
            return _Result(unit, "skipped", images=images, bytes=size, sha256=sha, version=str(state["version"]),
                           bad=bad)
        metadata = {"alexnet": layout.FORMAT_VERSION, "category": unit.wnid, "split": unit.split, "images": images,
                    "bytes": size, "sha256": sha, "source": fingerprint, "resize": options.resize,
                    "quality": options.quality if options.resize is not None else None, "bad": bad}
        version = publish_file(board, zip_path, unit.pin, title=f"ImageNet {unit.split} images of {unit.wnid}",
                               metadata=metadata, exists=unit.pin in existing, retries=options.retries)
        return _Result(unit, "uploaded", images=images, bytes=size, sha256=sha, version=version, bad=bad)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(zip_path)


def _units(tree: ImageNetTree) -> tuple[list[_Unit], dict[str, list[str]]]:
    units = [_Unit(c.id, "train", tuple(c.files), c.id) for c in tree.categories]
    val: dict[str, list[str]] = {}
    for path, label in zip(tree.val_files, tree.val_labels, strict=True):
        val.setdefault(str(label), []).append(str(path))
    return units, val


def _upload_units(tree: ImageNetTree, board: Board, options: _Options, workers: int
                  ) -> tuple[dict[tuple[str, str], _Result], int]:
    """Upload every category, then the validation images of those kept; results by (wnid, split), bytes sent."""
    units, val_files = _units(tree)
    existing = set(board.pin_names())
    results: dict[tuple[str, str], _Result] = {}
    failures: dict[str, str] = {}
    lock = threading.Lock()
    uploaded_bytes = images_done = 0
    total_source = sum(os.path.getsize(f) for u in units for f in u.files)
    total_source += sum(os.path.getsize(f) for files in val_files.values() for f in files)

    bar = _LazyBar(total_source)
    with quiet_pins(), scratch_folder("alexnet-upload-") as workdir, contextlib.closing(bar), \
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="alexnet-upload") as pool:

        def run_all(batch: Sequence[_Unit]) -> None:
            nonlocal uploaded_bytes, images_done
            futures = {pool.submit(_process, u, board, existing, workdir, options, bar): u for u in batch}
            for future in as_completed(futures):
                unit, error = futures[future], future.exception()
                with lock:
                    if error is not None:
                        failures[unit.pin] = f"{type(error).__name__}: {error}"
                        log.error("category %s (%s) failed: %s", unit.wnid, unit.split, error)
                    else:
                        result = results[(unit.wnid, unit.split)] = future.result()
                        images_done += result.images
                        uploaded_bytes += result.bytes if result.status == "uploaded" else 0
                    bar.update(unit.source_bytes, images_done)

        run_all(units)
        kept = {wnid for (wnid, split), r in results.items() if split == "train" and r.status != "excluded"}
        bar.update(sum(os.path.getsize(f) for w, files in val_files.items() if w not in kept for f in files),
                   images_done)
        run_all([_Unit(w, "val", tuple(files), layout.val_pin_name(w)) for w, files in sorted(val_files.items())
                 if w in kept])
    if failures:
        listing = "; ".join(f"{name}: {why}" for name, why in sorted(failures.items()))
        raise BoardError(
            f"{len(failures)} pin(s) could not be uploaded to {board.location} ({listing}). The categories pin "
            "was not written, so the board is not yet complete; run imagenet_upload again to finish"
        )
    return results, uploaded_bytes


def _category_rows(tree: ImageNetTree, train: Sequence[_Result], results: dict[tuple[str, str], _Result]
                   ) -> list[dict[str, Any]]:
    names = {c.id: c.name for c in tree.categories}
    rows = []
    for index, r in enumerate(train):
        v = results.get((r.unit.wnid, "val"))
        rows.append({
            "id": r.unit.wnid, "name": names.get(r.unit.wnid, ""), "index": index, "images": r.images,
            "bytes": r.bytes, "sha256": r.sha256, "version": r.version,
            "val_images": v.images if v else 0, "val_bytes": v.bytes if v else 0,
            "val_sha256": v.sha256 if v else "", "val_version": v.version if v else "",
        })
    return rows


def _write_tables(board: Board, rows: list[dict[str, Any]], bad: list[dict[str, str]], summary: dict[str, Any],
                  retries: int) -> dict[str, str]:
    """Write the ``bad_images`` table, the ``categories`` table (last but the manifest) and the manifest;
    the current version of every pin."""
    with quiet_pins():
        bad_meta = retry("writing the bad_images pin", lambda: write_table(
            board, bad, layout.BAD_IMAGE_COLUMNS, layout.BAD_IMAGES_PIN,
            "Images left out at upload: empty, truncated or undecodable"), retries)
        cat_meta = retry("writing the categories pin", lambda: write_table(
            board, rows, layout.CATEGORY_COLUMNS, layout.CATEGORIES_PIN,
            "ImageNet categories: one row per category zip", summary), retries)
    current = {layout.BAD_IMAGES_PIN: bad_meta.version.version, layout.CATEGORIES_PIN: cat_meta.version.version}
    for row in rows:
        current[row["id"]] = row["version"]
        if row["val_version"]:
            current[layout.val_pin_name(row["id"])] = row["val_version"]
    retry("writing the board manifest", lambda: board.write_manifest(current), retries)
    return current


def _checked_options(workers: Any, min_images: Any, resize: Any, quality: Any, retries: Any
                     ) -> tuple[int, _Options]:
    workers = as_int(workers, "workers", 1)
    quality = as_int(quality, "quality", 1, 100)
    resize = as_optional_int(resize, "resize", 1)
    if resize is not None and resize < MIN_IMAGE_SIZE:
        raise AlexnetError(f"`resize` = {resize} would store images too small for AlexNet, which needs a side of at "
                           f"least {MIN_IMAGE_SIZE}: use resize >= {MIN_IMAGE_SIZE} (256, the paper's short side, is "
                           "a good choice), or leave it out to keep the original images.")
    return workers, _Options(as_int(min_images, "min_images", 0), resize, quality, as_int(retries, "retries", 0))


def imagenet_upload(
    path: str | os.PathLike,
    board: str | os.PathLike | None = None,
    *,
    workers: int = 8,
    min_images: int = 0,
    resize: int | None = None,
    quality: int = 90,
    retries: int = 3,
    keep_versions: int | None = None,
) -> dict[str, Any]:
    """Upload the ImageNet tree at ``path`` to ``board``, one zip per category, resumably.

    Args:
        path: an ImageNet tree in Kaggle's layout or a folder of ``<wnid>/`` folders.
        board: where to upload (see :mod:`alexnet.storage.board`); ``None`` is ``$ALEXNET_BOARD`` or the
            local default.
        workers: categories zipped and uploaded at the same time.
        min_images: leave out categories with fewer good training images than this.
        resize: re-encode images so their short side is at most this many pixels (and CMYK, grayscale,
            PNG become RGB JPEG), at least :data:`~alexnet.checks.MIN_IMAGE_SIZE`; ``None`` keeps every good image
            byte for byte.
        quality: JPEG quality of re-encoded images.
        retries: attempts after the first for each transient board error.
        keep_versions: once the upload is complete, keep only this many versions (the newest) of each
            pin it wrote or kept, so that re-uploading changed data (say with ``resize``) does not keep
            the old copy on the board; ``None`` keeps every version. A reader still using an older
            ``categories`` table then no longer finds the versions it names.

    Returns:
        A report: ``board``, ``path``, ``categories`` (count on the board), ``uploaded``/``skipped``
        (category ids), ``excluded`` (``{"category", "images"}`` under ``min_images``), ``images``,
        ``val_images``, ``bytes`` (of all zips), ``uploaded_bytes``, ``seconds``, ``mb_per_s`` (uploaded
        MB per second), ``bad_images`` (``{"category", "split", "file", "reason"}``), ``pruned_versions``
        (old versions deleted under ``keep_versions``).
    """
    workers, options = _checked_options(workers, min_images, resize, quality, retries)
    keep_versions = as_optional_int(keep_versions, "keep_versions", 1)
    opened = open_board(board, write=True)  # unreachable board, missing credentials: fail before any work
    tree = read_imagenet(path)
    start = time.monotonic()
    results, uploaded_bytes = _upload_units(tree, opened, options, workers)
    train = sorted((r for (w, s), r in results.items() if s == "train" and r.status != "excluded"),
                   key=lambda r: r.unit.wnid)
    if not train:
        raise AlexnetError(
            f"no category of {tree.root} has at least min_images = {options.min_images} good images; lower "
            "min_images"
        )
    rows = _category_rows(tree, train, results)
    bad = sorted((b for r in results.values() for b in r.bad), key=lambda b: (b["category"], b["split"], b["file"]))
    summary = {"alexnet": layout.FORMAT_VERSION, "num_classes": len(rows), "images": sum(r["images"] for r in rows),
               "val_images": sum(r["val_images"] for r in rows), "layout": tree.layout,
               "min_images": options.min_images, "resize": options.resize,
               "quality": options.quality if options.resize is not None else None}
    current = _write_tables(opened, rows, bad, summary, options.retries)
    pruned = prune(opened, current, keep_versions, options.retries) if keep_versions is not None else 0
    return _report(opened, tree, results, train, rows, bad, summary, uploaded_bytes, pruned,
                   time.monotonic() - start)


def _report(board: Board, tree: ImageNetTree, results: dict[tuple[str, str], _Result], train: Sequence[_Result],
            rows: list[dict[str, Any]], bad: list[dict[str, str]], summary: dict[str, Any], uploaded_bytes: int,
            pruned: int, seconds: float) -> dict[str, Any]:
    def with_status(status: str) -> list[str]:
        return sorted(r.unit.wnid for r in train if r.status == status)

    report = {
        "board": board.location,
        "path": str(tree.root),
        "layout": tree.layout,
        "categories": len(rows),
        "uploaded": with_status("uploaded"),
        "skipped": with_status("skipped"),
        "excluded": sorted(({"category": r.unit.wnid, "images": r.images} for (w, s), r in results.items()
                            if s == "train" and r.status == "excluded"), key=lambda e: e["category"]),
        "images": summary["images"],
        "val_images": summary["val_images"],
        "bytes": sum(r["bytes"] + r["val_bytes"] for r in rows),
        "uploaded_bytes": uploaded_bytes,
        "seconds": round(seconds, 3),
        "mb_per_s": round(uploaded_bytes / 1e6 / seconds, 3) if seconds > 0 else math.nan,
        "bad_images": bad,
        "pruned_versions": pruned,
    }
    log.info("uploaded %d and skipped %d categories to %s: %.1f MB in %.1f s (%.1f MB/s), %d bad images",
             len(report["uploaded"]), len(report["skipped"]), board.location, uploaded_bytes / 1e6, seconds,
             report["mb_per_s"], len(bad))
    return report


__all__ = ["imagenet_upload"]
