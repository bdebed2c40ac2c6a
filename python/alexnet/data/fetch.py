"""``imagenet_partition()``: one worker's balanced share of the categories on a board, fetched into a local cache.

The categories are split by :mod:`alexnet.data.partition` (balanced image counts, deterministic), and the
partition's zips are brought into the cache by :func:`alexnet.storage.fetch.fetch_zips` (in parallel,
verified against the ``categories`` table's sha256, never half-written), each category's images in its own
folder under ``cache_dir`` (see :mod:`alexnet.storage.cache` for the layout).

The result carries the sizes of every partition, so that the workers of a multi-worker run agree on their
steps per epoch without going back to the board.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from ..checks import count_text
from ..declare import declaration
from ..errors import AlexnetError, BoardError, IntegrityError
from ..result import returns_result
from ..storage import cache, layout
from ..storage.board import Board, open_board
from ..storage.fetch import Fetched, ZipItem, fetch_zips
from .options import (
    DEFAULT_PARTITIONS,
    FetchOptions,
    PartitionOptions,
    ValidationFetchOptions,
    ValidationPartitionOptions,
)
from .partition import check_partition, partition_categories, partition_sizes

log = logging.getLogger(__name__)


@returns_result
def imagenet_categories(board: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """The board's categories table: one dict per category, sorted by ``index``.

    Keys: ``id``, ``name``, ``index`` (global 0-based label), ``images``, ``bytes``, ``sha256`` (of the
    zip), ``version`` (its pin version) and ``val_images``, ``val_bytes``, ``val_sha256``, ``val_version``.
    """
    return layout.read_categories(open_board(board))


def _fetch(board: Board, version: str | None, items: list[ZipItem], root: str, chosen: Any, desc: str) -> Fetched:
    """``items`` fetched from ``board`` into the cache at ``root`` with the options ``chosen``. A zip missing or
    changed is said as an upload to the board meanwhile when the categories table is no longer version ``version``
    (the one read): fetching again reads the new table, where uploading again would change nothing."""
    try:
        return fetch_zips(board, items, root, workers=chosen.workers, retries=chosen.retries, verify=chosen.verify,
                          desc=desc)
    except (BoardError, IntegrityError) as error:
        try:
            now = layout.categories_and_version(board)[1] if version is not None else None
        except BoardError:
            now = None
        if now is None or now == version:
            raise
        first = str(error).split("; ")[0]
        raise BoardError(f"board {board.location} was uploaded to while this fetch read it (its categories table was "
                         f"version {version}, it is {now} now), and {first}. Fetching again reads the new table: run "
                         "the same fetch again.") from error


def _items(board: Board, rows: dict[str, dict[str, Any]], wnids: list[str], root: str, validation: bool,
           training: bool = True) -> list[ZipItem]:
    items = []
    for wnid in wnids:
        row = rows[wnid]
        if training:
            items.append(ZipItem(f"train/{wnid}", layout.zip_path(board, wnid, row["version"]), row["sha256"],
                                 row["bytes"], cache.category_folder(root, wnid), f"category {wnid}",
                                 row["images"] or None))
        if validation and row["val_images"] > 0 and row["val_version"]:
            pin = layout.val_pin_name(wnid)
            items.append(ZipItem(f"val/{wnid}", layout.zip_path(board, pin, row["val_version"]), row["val_sha256"],
                                 row["val_bytes"], cache.category_folder(root, wnid, validation=True),
                                 f"category {wnid} (validation images)", row["val_images"]))
    return items


def _listing(items: list[ZipItem], files: dict[str, list[str]], rows: dict[str, dict[str, Any]]
             ) -> dict[str, list[Any]]:
    """The fetched images of ``items`` (``files``: item key -> file names), with their category and global label:
    ``image``, ``category``, ``label`` for training images and the same with ``val_`` for validation ones."""
    listing: dict[str, list[Any]] = {f"{p}{k}": [] for p in ("", "val_") for k in ("image", "category", "label")}
    for item in items:
        split, wnid = item.key.split("/", 1)
        prefix = "" if split == "train" else "val_"
        for name in files[item.key]:
            listing[f"{prefix}image"].append(os.path.join(item.dest, name))
            listing[f"{prefix}category"].append(wnid)
            listing[f"{prefix}label"].append(rows[wnid]["index"])
    return listing


def _board_categories(board: str | os.PathLike | None
                      ) -> tuple[Board, list[dict[str, Any]], dict[str, dict[str, Any]], str | None]:
    """``board`` opened, its ``categories`` rows, those rows by WordNet id, and the version of the ``categories``
    pin they were read from (None when the board does not say: an https:// board)."""
    opened = open_board(board)
    rows, version = layout.categories_and_version(opened)
    return opened, rows, {r["id"]: r for r in rows}, version


@returns_result
def imagenet_partition(partition: int = 0, total: int = DEFAULT_PARTITIONS, board: str | os.PathLike | None = None,
                       **options: Any) -> dict[str, Any]:
    """Fetch partition ``partition`` (0-based) of ``total`` from ``board`` into a local cache.

    Categories are split by :func:`alexnet.data.partition.partition_categories` (balanced image counts,
    deterministic). Their zips are downloaded ``workers`` at a time, each retried ``retries`` times on
    transient errors, checked against the sha256 in the ``categories`` pin and extracted into
    ``cache_dir``; cached categories are reused without any download. A cached category counts when every
    file is there with its size; with ``verify``, every file's CRC-32 is checked too (which reads them all),
    and a damaged category is fetched again. Which partition (:class:`~alexnet.data.options.PartitionOptions`)
    and the options of a fetch (:class:`~alexnet.data.options.FetchOptions`) are listed below.

    Returns a dict: ``image`` (absolute paths), ``category`` (wnid per image), ``categories`` (this
    partition's wnids), ``label`` (global index per image), ``num_classes`` (global count), ``val_image``,
    ``val_label``, ``val_category`` (this partition's validation images, empty when the board has none or
    ``validation`` is false), ``partition``, ``total``, ``partition_sizes`` and ``val_partition_sizes``
    (training and validation images of every partition, in partition order), ``board``, ``cache_dir``,
    ``downloaded_bytes`` and ``seconds``; ``left_out_at_upload`` (the validation images of this partition's
    categories the upload left out, as the board's ``bad_images`` pin names them, which an evaluation of the
    partition says; None when the board does not say or ``validation`` is false); and for the model's card,
    ``class_ids`` and ``class_names`` (the id and name of every category of the board, by global index) and
    ``categories_version`` (the version of the board's ``categories`` pin, ``None`` when the board does not tell it);
    ``resize``: the short side the upload stored the images at (``None``: as they were, or the board does not say),
    which training and evaluation warn of when they would enlarge their crops of it
    (:func:`~alexnet.data.options.stored_side_problem`).
    """
    share = declaration.check(PartitionOptions, {"partition": partition, "total": total}, "imagenet_partition()")
    partition, total = check_partition(share.partition, share.total)
    chosen = declaration.check(FetchOptions, options, "imagenet_partition()")
    validation = chosen.validation
    opened, rows, by_id, version = _board_categories(board)
    images = {r["id"]: r["images"] for r in rows}
    wnids = partition_categories(images, partition, total)
    root = cache.open_cache(chosen.cache_dir, opened.location)
    items = _items(opened, by_id, wnids, root, validation)
    fetched = _fetch(opened, version, items, root, chosen, f"fetch {partition}/{total}")

    listing = _listing(items, fetched.files, by_id)
    result: dict[str, Any] = {"image": listing["image"], "category": listing["category"],
                              "categories": list(wnids), "label": listing["label"], "num_classes": len(rows),
                              "val_image": listing["val_image"], "val_label": listing["val_label"],
                              "val_category": listing["val_category"]}
    val_counts = {r["id"]: r["val_images"] if validation and r["val_version"] else 0 for r in rows}
    result.update({
        "partition": partition, "total": total,
        "partition_sizes": partition_sizes(images, total),
        "val_partition_sizes": partition_sizes(images, total, val_counts),
        "board": opened.location, "cache_dir": root,
        "class_ids": [r["id"] for r in rows], "class_names": [r["name"] or r["id"] for r in rows],
        "categories_version": version,
        "downloaded_bytes": fetched.bytes, "seconds": round(fetched.seconds, 3),
        "left_out_at_upload": layout.left_out_at_upload(opened, "val", wnids) if validation else None,
        "resize": layout.stored_resize(opened, version),
    })
    return result


declaration.take_declared(imagenet_partition, PartitionOptions, FetchOptions,
                          title="Its options, with their defaults:")


def stored_side(data: Any) -> int | None:
    """The short side the images of ``data`` (a partition or validation share, as :func:`imagenet_partition` and
    :func:`imagenet_validation` return them, perhaps through R: a number, a double, a vector of one) were stored at
    on their board, its ``resize``; None when they were stored as they were or ``data`` does not say (a list made by
    hand, or no mapping at all: what is wrong with it is said where it is read)."""
    if not isinstance(data, Mapping):
        return None
    value = data.get("resize")
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 1:
        return None
    return int(value)


def validation_counts(rows: list[dict[str, Any]], location: str, *, data_too: bool = False) -> dict[str, int]:
    """Validation images per category (those that have some) of a categories table; an :class:`AlexnetError`
    naming the board at ``location`` when there are none (that also says to give the images as ``data`` when the
    caller takes them so: ``data_too``)."""
    counts = {r["id"]: r["val_images"] for r in rows if r["val_images"] > 0 and r["val_version"]}
    if not counts:
        from .sources import validation_files

        raise AlexnetError(
            f"board {location} has no validation images: upload ImageNet with them with imagenet_upload() (each "
            f"layout holds them in its own files: {validation_files()}; a folder of category folders holds out a "
            f"share of each category's images with `val_share`)"
            f"{', or, from R and Python, give the images as `data`' if data_too else ''}."
        )
    return counts


@returns_result
def imagenet_validation(board: str | os.PathLike | None = None, partition: int = 0, total: int = 1, **options: Any
                        ) -> dict[str, Any]:
    """Fetch the validation images of ``board`` (all of them, or share ``partition`` of ``total``) into a local cache.

    Only the ``val-<wnid>`` pins are fetched, into the cache :func:`imagenet_partition` uses (downloads,
    checks and reuse are the same). The categories that have validation images are split by
    :func:`alexnet.data.partition.partition_categories` on their validation image counts, so that every share
    holds about as many images; every such category lands in exactly one share, and the shares of ``total``
    together hold every validation image once. ``total`` may not exceed the number of those categories. Which
    share (:class:`~alexnet.data.options.ValidationPartitionOptions`: a partition's, but all of them unless told
    otherwise) and the options of a validation fetch (:class:`~alexnet.data.options.ValidationFetchOptions`: a
    fetch's, but for ``validation``) are listed below.

    Returns a dict: ``val_image`` (absolute paths), ``val_label`` (global index per image), ``val_category``
    (wnid per image), ``categories`` (this share's wnids), ``num_classes`` (every category on the board),
    ``class_ids`` and ``class_names`` (every category's, by global index, as :func:`imagenet_partition` gives them),
    ``board``, ``cache_dir``, ``partition``, ``total`` and ``left_out_at_upload`` (the validation images of these
    categories the upload left out, as the board's ``bad_images`` pin names them, share 0 also counting those of the
    categories left without any, so that the shares add up to the board's: logged when there are some; None when the
    board does not say) and ``resize`` (the short side the images were stored at, as :func:`imagenet_partition` gives
    it). An :class:`AlexnetError` when the board has no validation images.
    """
    share = declaration.check(ValidationPartitionOptions, {"partition": partition, "total": total},
                              "imagenet_validation()")
    partition, total = check_partition(share.partition, share.total)
    chosen = declaration.check(ValidationFetchOptions, options, "imagenet_validation()")
    opened, rows, by_id, version = _board_categories(board)
    counts = validation_counts(rows, opened.location)
    if total > len(counts):
        raise AlexnetError(
            f"`total` ({total}) must not exceed the {len(counts)} categories of board {opened.location} that have "
            f"validation images: use `total` <= {len(counts)}."
        )
    wnids = partition_categories(counts, partition, total)
    root = cache.open_cache(chosen.cache_dir, opened.location)
    items = _items(opened, by_id, wnids, root, True, training=False)
    fetched = _fetch(opened, version, items, root, chosen, f"fetch validation {partition}/{total}")
    listing = _listing(items, fetched.files, by_id)
    result: dict[str, Any] = {name: listing[name] for name in ("val_image", "val_label", "val_category")}
    # of this share's categories, and for share 0 of those none of whose validation images is left: every image once
    left_out = layout.left_out_at_upload(opened, "val", [*wnids, *(r["id"] for r in rows if r["id"] not in counts
                                                                   and partition == 0)])
    if left_out:
        log.info("%s: %s %s left out when the board was uploaded (empty, truncated, undecodable or too large; its "
                 "`bad_images` pin names each and why): they are not among these%s.", opened.location,
                 count_text(left_out, "validation image"), "was" if left_out == 1 else "were",
                 "" if partition else ", which count those of the categories left without any")
    result.update({"categories": list(wnids), "num_classes": len(rows), "class_ids": [r["id"] for r in rows],
                   "class_names": [r["name"] or r["id"] for r in rows], "board": opened.location, "cache_dir": root,
                   "partition": partition, "total": total, "left_out_at_upload": left_out,
                   "resize": layout.stored_resize(opened, version)})
    return result


declaration.take_declared(imagenet_validation, ValidationPartitionOptions, ValidationFetchOptions,
                          title="Its options, with their defaults:")
