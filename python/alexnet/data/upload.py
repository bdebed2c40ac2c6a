"""``imagenet_upload()``: ImageNet, in any of the layouts people have it, onto a board, one zip per category,
checked images, resumable.

The source's layout is recognised by :func:`alexnet.data.sources.open_source` and read in place, without an
extracted copy; :mod:`alexnet.data.packing` packs and publishes its parts. What ends up on the board is described
in :mod:`alexnet.storage.layout`. Every image is decoded on the way (:func:`alexnet.data.images.check_image`):
empty, truncated and undecodable files, images of an archive whose bytes do not match the CRC-32 it records, and
images whose header declares more pixels than ``max_pixels`` (unless ``resize`` shrinks them within it) are left out
and listed, the first found named in a warning.

Resuming: a category whose pin on the board has the same source fingerprint (file names and sizes, or the
archive's record of them, and the options) is skipped without reading its images; otherwise its zip is rebuilt
and uploaded only when its sha256 differs from the board's. An interrupted run, run again, completes what is
missing. The ``categories`` table is written last, so a board that has one is complete.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..checks import count_text, some_names
from ..declare import declaration
from ..errors import AlexnetError, BoardError
from ..result import returns_result
from ..storage import layout, lease
from ..storage.board import UPLOAD_LOCK, Board, is_full_board, open_board, resolve_board
from ..storage.hold import Writer
from ..storage.location import home_expanded, location_kind
from ..storage.outputs import made_folder
from ..storage.prune import board_versions, delete_versions, versions_to_delete
from ..storage.publish import quiet_pins, write_table
from ..storage.transfer import retry
from .options import UploadOptions
from .packing import Result, Uploader
from .part_zip import Options
from .parts import Source
from .sources import no_validation, open_source

log = logging.getLogger(__name__)


def _category_rows(names: Mapping[str, str], train: Sequence[Result], results: dict[tuple[str, str], Result]
                   ) -> list[dict[str, Any]]:
    rows = []
    for index, r in enumerate(train):
        v = results.get((r.wnid, "val"))
        rows.append({
            "id": r.wnid, "name": names.get(r.wnid, ""), "index": index, "images": r.images,
            "bytes": r.bytes, "sha256": r.sha256, "version": r.version,
            "val_images": v.images if v else 0, "val_bytes": v.bytes if v else 0,
            "val_sha256": v.sha256 if v else "", "val_version": v.version if v else "",
        })
    return rows


#: The bad images a warning names, of those an upload finds.
BAD_IMAGES_NAMED = 10


def bad_image_line(bad: Mapping[str, str]) -> str:
    """A bad image of an upload's ``bad_images`` as its warning and the command line's summary list it."""
    return f"{bad['category']}/{bad['file']}: {bad['reason']}"


#: The attribute of the log record that names an upload's bad images, for a front end that lists them itself in its
#: summary (the command line) to leave the warning out.
BAD_IMAGES_NAMED_MARK = "alexnet_bad_images_named"


def _warn_of_bad_images(found: list[dict[str, str]]) -> None:
    """Name the bad images this upload found and left out (those of categories it skipped were named when they were
    uploaded), so that a script sees them too; the result's ``bad_images`` holds them all."""
    if not found:
        return
    found = sorted(found, key=lambda b: (b["category"], b["split"], b["file"]))
    named = [bad_image_line(b) for b in found[:BAD_IMAGES_NAMED]]
    more = f"\n  ... and {len(found) - BAD_IMAGES_NAMED} more" if len(found) > BAD_IMAGES_NAMED else ""
    log.warning("%s left out (all in the result's bad_images and the board's bad_images pin):\n  %s%s",
                count_text(len(found), "bad image"), "\n  ".join(named), more, extra={BAD_IMAGES_NAMED_MARK: True})


def _write_tables(board: Board, rows: list[dict[str, Any]], bad: list[dict[str, str]], summary: dict[str, Any],
                  retries: int, keep: int | None = None, before: Mapping[str, set[str]] | None = None
                  ) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Write the ``bad_images`` table, the ``categories`` table and, last, the manifest; the current version of every
    pin, and the versions pruning deletes under ``keep`` (:func:`~alexnet.storage.prune.versions_to_delete`, with
    ``before``), chosen before the manifest is written, which leaves them out."""
    try:
        with quiet_pins():
            bad_meta = write_table(board, bad, layout.BAD_IMAGE_COLUMNS, layout.BAD_IMAGES_PIN,
                                   "Images left out at upload: empty, truncated, undecodable or too large",
                                   retries=retries)
            cat_meta = write_table(board, rows, layout.CATEGORY_COLUMNS, layout.CATEGORIES_PIN,
                                   "ImageNet categories: one row per category zip", summary, retries=retries)
        current = {layout.BAD_IMAGES_PIN: bad_meta.version.version, layout.CATEGORIES_PIN: cat_meta.version.version}
        for row in rows:
            current[row["id"]] = row["version"]
            if row["val_version"]:
                current[layout.val_pin_name(row["id"])] = row["val_version"]
        doomed = versions_to_delete(board, current, keep, before=before) if keep is not None else {}
        _write_manifest(board, current, retries, doomed)
    except BoardError as err:
        if not is_full_board(err):
            raise
        raise BoardError(f"{err}; then run imagenet_upload() again to finish (the categories on the board are "
                         "skipped)") from err.__cause__
    return current, doomed


def _write_manifest(board: Board, current: Mapping[str, str], retries: int,
                    leaving: Mapping[str, list[str]] | None = None) -> None:
    """Write the board's manifest (retried), which lists the versions in ``current`` and leaves out those in
    ``leaving``."""
    retry("writing the board manifest", lambda: board.write_manifest(current, leaving), retries)


def _prune(board: Board, current: Mapping[str, str], doomed: Mapping[str, list[str]], keep: int, retries: int) -> int:
    """Delete the versions ``doomed`` that the manifest just written leaves out; their number. When there were any, the
    manifest is written again from the board, so that one another writer (a model pinned) wrote meanwhile, which
    listed them before they were gone, names none."""
    pruned = delete_versions(board, doomed, keep, retries)
    if pruned:
        _write_manifest(board, current, retries)
    return pruned


def _given_source(source: str | os.PathLike | None, path: str | os.PathLike | None) -> str | os.PathLike:
    """The ImageNet source given as ``source``, or by its old name ``path`` (with a ``DeprecationWarning``)."""
    if path is not None:
        if source is not None:
            raise AlexnetError("give the ImageNet source once, as `source` only: `path` is its old name")
        warnings.warn("`path` is now `source`: give the ImageNet source as imagenet_upload(source=...)",
                      DeprecationWarning, stacklevel=4)  # the caller of imagenet_upload() (through returns_result)
        return path
    if source is None:
        raise AlexnetError("`source` is missing: give the ImageNet source, a local path or a gs:// or s3:// URL")
    return source


def _source_holding(source: str | os.PathLike, board: str) -> str | None:
    """The local source folder when the folder board ``board`` is that folder or lies inside it, else None."""
    if location_kind(board) != "file" or location_kind(os.fspath(source)) != "file":
        return None
    folder = os.path.realpath(home_expanded(os.fspath(source).removeprefix("file://")))
    inside = os.path.realpath(board)
    return folder if inside == folder or inside.startswith(folder.rstrip(os.sep) + os.sep) else None


#: The layouts that read every folder of the source as a category (or of its train/ and val/ folders).
_FOLDERS_READ = ("folders", "imagefolder")


def _check_outside(read: Source, folder: str, board: str) -> None:
    """Refuse the folder board ``board`` inside the source ``folder`` where the layout ``read`` would take it for a
    category folder (or the board is the source itself)."""
    inside = os.path.realpath(board)
    if inside == folder or read.layout in _FOLDERS_READ:
        read.close()
        where = "the ImageNet source" if inside == folder else f"inside the ImageNet source {folder}"
        raise AlexnetError(f"board {board} is {where}, whose folders the {read.layout} layout reads as categories: "
                           "give a board outside it")


def _made_folders(path: str) -> list[str]:
    """The folders of ``path`` (itself and its parents) that do not exist yet, the deepest first."""
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _scratch_parent(scratch: str | None) -> str | None:
    """The folder ``scratch`` names (checked by :func:`~alexnet.data.options.check_scratch`), made if missing, checked
    to be a folder that can be written; None for the system's temporary folder. An
    :class:`~alexnet.errors.AlexnetError` saying what to give otherwise."""
    if scratch is None:
        return None
    return made_folder(os.path.abspath(scratch), "scratch", "the system's temporary folder",
                       holds="the upload's scratch folder")


@returns_result
def imagenet_upload(source: str | os.PathLike | None = None, board: str | os.PathLike | None = None, *,
                    path: str | os.PathLike | None = None, **options: Any) -> dict[str, Any]:
    """Upload the ImageNet at ``source`` to ``board``, one zip per category, read in place, resumably.

    Args:
        source: the ImageNet source, a local path or a ``gs://``/``s3://`` URL, in any layout of
            :mod:`alexnet.data.sources`: the official ILSVRC2012 archives (or the folder holding them), Kaggle's
            zip (or its folder), Hugging Face's parquet shards' folder, Kaggle's extracted tree, torchvision's
            ``train/``, ``val/`` tree or a folder of ``<wnid>/`` folders.
        board: where to upload (see :mod:`alexnet.storage.board`); ``None`` is ``$ALEXNET_BOARD`` or the
            local default.
        path: the old name of ``source``, still accepted by name with a ``DeprecationWarning``; giving both is an
            :class:`~alexnet.errors.AlexnetError`.
        options: how the images are uploaded (:class:`~alexnet.data.options.UploadOptions`, listed below).

    A source that gives no validation images (a training tar alone, parquet shards without
    ``validation-*.parquet``, a folder of ``<wnid>/`` folders) is uploaded with a warning naming the files of its
    layout that hold them (:func:`alexnet.data.sources.no_validation`); added, an upload run again skips the training
    categories and uploads the validation images.

    Returns:
        A report: ``board``, ``source``, ``layout`` (the source's, as :mod:`alexnet.data.sources` names it),
        ``categories`` (count on the board), ``uploaded``/``skipped`` (category ids), ``val_uploaded`` (the ids
        whose validation images were uploaded), ``excluded`` (``{"category", "images"}`` under ``min_images``),
        ``images``,
        ``val_images``, ``bytes`` (of all zips), ``uploaded_bytes``, ``seconds``, ``mb_per_s`` (uploaded
        MB per second), ``bad_images`` (``{"category", "split", "file", "reason"}``), ``pruned_versions``
        (old versions deleted under ``keep_versions``).
    """
    given = _given_source(source, path)
    chosen = declaration.check(UploadOptions, options, "imagenet_upload()")
    packing = Options(chosen.min_images, chosen.resize, chosen.quality, chosen.retries, chosen.max_pixels)
    declaration.warn_unused(chosen, log)
    parent = _scratch_parent(chosen.scratch)
    resolved = resolve_board(board)
    holder = _source_holding(given, resolved)
    if holder is not None:  # a folder board in the source: the source read before the board's folder is made
        read = open_source(given, chosen.val_share)
        _check_outside(read, holder, resolved)
        try:
            opened = open_board(board, write=True)
        except BaseException:
            read.close()
            raise
    else:
        made = _made_folders(resolved) if location_kind(resolved) == "file" else []
        opened = open_board(board, write=True)  # unreachable board, missing credentials: fail before any work
        try:
            # a layout not read, a damaged archive: before any work; labels: before any publish
            read = open_source(given, chosen.val_share)
        except BaseException:
            for folder in made:  # the folders this call made, still empty: no board that never was is left
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise
    try:
        let_go = _hold_board(opened)
    except BaseException:
        read.close()
        raise
    try:
        return _upload(read, opened, packing, chosen, parent)
    finally:
        let_go()


def _upload(read: Source, opened: Board, packing: Options, chosen: UploadOptions, parent: str | None
            ) -> dict[str, Any]:
    """The upload of :func:`imagenet_upload` from the source ``read`` to the board ``opened``, which it holds: the
    categories, then the tables; its report."""
    start = time.monotonic()
    keep = chosen.keep_versions
    # what is on the board before this upload: pruning deletes no version written meanwhile by another upload
    before = board_versions(opened) if keep is not None else None
    uploader = Uploader(read, opened, packing, chosen.workers, scratch=parent)
    try:
        uploader.run()
    finally:
        read.close()
    results, uploaded_bytes = uploader.results, uploader.uploaded_bytes
    train = sorted((r for (w, s), r in results.items() if s == "train" and r.status != "excluded"),
                   key=lambda r: r.wnid)
    if not train:
        raise AlexnetError(
            f"no category of {read.root} has at least min_images = {packing.min_images} good images; lower "
            "min_images"
        )
    rows = _category_rows(read.names, train, results)
    bad = sorted((b for r in results.values() for b in r.bad), key=lambda b: (b["category"], b["split"], b["file"]))
    _warn_of_bad_images([b for r in results.values() if r.status != "skipped" for b in r.bad])
    summary = {"alexnet": layout.FORMAT_VERSION, "num_classes": len(rows), "images": sum(r["images"] for r in rows),
               "val_images": sum(r["val_images"] for r in rows), "layout": read.layout,
               "min_images": packing.min_images, "resize": packing.resize,
               "quality": packing.quality if packing.resize is not None else None, "max_pixels": packing.max_pixels}
    if not summary["val_images"]:
        log.warning("%s gave no validation images, so board %s has none: training measures no val_accuracy and "
                    "evaluation has nothing to measure; %s", read.root, opened.location,
                    no_validation(read.layout))
    excluded = {w for (w, s), r in results.items() if s == "train" and r.status == "excluded"}
    _warn_of_categories_unlisted(opened, {row["id"] for row in rows} | excluded, read.root)
    current, doomed = _write_tables(opened, rows, bad, summary, packing.retries, keep, before)
    pruned = _prune(opened, current, doomed, keep, packing.retries) if keep is not None else 0
    return _report(opened, read, results, train, rows, bad, summary, uploaded_bytes, pruned,
                   time.monotonic() - start)


#: Seconds an upload waits for the hold of another on a bucket board: a killed upload's lease is taken over once it has
#: stayed unrenewed for :data:`alexnet.storage.lease.STALE` seconds (a folder board's lock goes with its process).
BUCKET_PATIENCE = lease.STALE + 2 * lease.POLL


#: An upload, as it holds a board and speaks of another upload that holds it.
UPLOAD = Writer(
    "upload", log,
    busy="another upload is writing to board %(location)s (%(holder)s): two at once would each write a categories "
         "table of their own categories, and the last one written would be the board's. Wait for it to end, then run "
         "this one again (it skips the categories already there), or give this source a board of its own.",
    waiting_lease="Another upload (%(holder)s) is writing to board %(location)s; waiting up to %(patience).0f s for it "
                  "(an upload killed is taken for gone once its hold has not been renewed for %(stale).0f s).",
    took_over="Board %(location)s was held by %(holder)s, %(why)s: taken over.")


def _hold_board(board: Board) -> Callable[[], None]:
    """Hold ``board`` for this upload (:data:`~alexnet.storage.board.UPLOAD_LOCK`); what lets go of it. Another upload
    holding it is an :class:`AlexnetError` naming that upload: at once on a folder board, after up to
    :data:`BUCKET_PATIENCE` seconds on a bucket. An https:// board takes no upload."""
    if board.kind == "file":
        return UPLOAD.hold_folder(board.location, board.path(UPLOAD_LOCK), 0, remove=True)
    return UPLOAD.hold_bucket(board.fs, board.path(UPLOAD_LOCK), board.location, BUCKET_PATIENCE).release


def _warn_of_categories_unlisted(board: Board, given: set[str], source: str) -> None:
    """Warn when the categories pin ``board`` holds lists categories that ``source`` does not give (``given``: the
    categories it gives, kept or left out under ``min_images``): the new pin, this source's alone, no longer lists
    them (a second source uploaded to a board of the first)."""
    if layout.CATEGORIES_PIN not in board.pin_names():
        return
    try:
        before = [row["id"] for row in layout.read_categories(board)]
    except BoardError:  # a table not readable is replaced, as it is by every upload
        return
    unlisted = sorted(set(before) - given)
    if unlisted:
        log.warning("board %s listed %s that %s does not give (%s): its categories pin now lists this source's "
                    "alone, and training and evaluation no longer see them (their zips stay on the board). Give each "
                    "source a board of its own, or upload from one source that holds every category.",
                    board.location, count_text(len(unlisted), "category", "categories"), source,
                    some_names(unlisted))


def _report(board: Board, source: Source, results: dict[tuple[str, str], Result], train: Sequence[Result],
            rows: list[dict[str, Any]], bad: list[dict[str, str]], summary: dict[str, Any], uploaded_bytes: int,
            pruned: int, seconds: float) -> dict[str, Any]:
    def with_status(status: str) -> list[str]:
        return sorted(r.wnid for r in train if r.status == status)

    report = {
        "board": board.location,
        "source": source.root,
        "layout": source.layout,
        "categories": len(rows),
        "uploaded": with_status("uploaded"),
        "skipped": with_status("skipped"),
        # validation images uploaded this time: with their categories, or added to categories already there
        "val_uploaded": sorted(r.wnid for (w, s), r in results.items() if s == "val" and r.status == "uploaded"),
        "excluded": [{"category": r.wnid, "images": r.images}
                     for r in sorted((r for (w, s), r in results.items() if s == "train" and r.status == "excluded"),
                                     key=lambda r: r.wnid)],
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


declaration.take_declared(imagenet_upload, UploadOptions, title="Its options, with their defaults:")

__all__ = ["imagenet_upload"]
