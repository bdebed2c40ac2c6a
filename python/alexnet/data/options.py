"""The options of the data stage, declared once: how a synthetic ImageNet is written, how ImageNet is uploaded to a
board and which partition of a board, or which share of its validation images alone, is fetched and how.

Each is a declaration (a frozen dataclass of :func:`alexnet.declare.declaration.setting` fields, as the training
settings are): :class:`SyntheticOptions` of :func:`alexnet.imagenet_synthetic`, :class:`UploadOptions` of
:func:`alexnet.imagenet_upload`, :class:`PartitionOptions` (which partition) and :class:`FetchOptions` (how it is
fetched) of :func:`alexnet.imagenet_partition`, and :class:`ValidationPartitionOptions` and
:class:`ValidationFetchOptions` of :func:`alexnet.imagenet_validation` (a partition's and a fetch's, but all the
validation images unless told otherwise, and without ``validation``). Those functions take these options by name
(``partition`` and ``total`` also by position), with these defaults, and check them with
:func:`alexnet.declare.declaration.check`; the command line's ``synth``, ``upload`` and ``fetch`` (and ``train`` and
``bench``, which fetch a partition) have an option for each, R's ``imagenet_synthetic()``, ``imagenet_upload()`` and
``imagenet_partition()`` a formal (``R/data-options.R``, generated from these declarations). Other declarations
derive theirs from these (:func:`alexnet.declare.declaration.like`): which of a board's validation images an
evaluation scores, a Spark worker's fetch and the benchmark's fetch stage and stored copies. This module does not
import TensorFlow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..checks import MIN_IMAGE_SIZE, as_optional_int, name_hints
from ..declare import declaration
from ..declare.declaration import like, setting
from ..declare.kinds import UsedWith, given_as
from ..errors import AlexnetError, LayoutError
from .images import DEFAULT_QUALITY, MAX_PIXELS, MAX_PIXELS_TO_SHRINK
from .parts import LAYOUT_NAMES

#: Downloads at the same time of a fetch, unless told otherwise (a Spark job's ``fetch_workers`` too).
DEFAULT_DOWNLOADS = 8
#: The partitions a board's categories are split into when ``total`` is left out: one per worker of 16.
DEFAULT_PARTITIONS = 16


def check_layout(layout: Any, name: str = "layout") -> str:
    """``layout`` as one of :data:`~alexnet.data.parts.LAYOUT_NAMES`; a :class:`LayoutError` naming it as ``name``,
    and the closest layout, otherwise. Its case does not matter, as for every choice."""
    word = layout.strip().lower() if isinstance(layout, str) else layout
    if word not in LAYOUT_NAMES:
        raise LayoutError(f"`{name}` must be one of {', '.join(LAYOUT_NAMES)}, not "
                          f"{name_hints([str(layout)], LAYOUT_NAMES)}")
    return str(word)


def check_resize(resize: Any, name: str = "resize") -> int | None:
    """``resize`` as a whole number AlexNet can train on, or ``None``; an :class:`AlexnetError` naming it as ``name``
    and saying what to use otherwise."""
    value = as_optional_int(resize, name)  # too small, 0 and below included: said below
    if value is not None and value < MIN_IMAGE_SIZE:
        raise AlexnetError(f"{given_as(f'`{name}`', str(value))} would store images too small for AlexNet, which "
                           f"needs a side of at least {MIN_IMAGE_SIZE}: use {given_as(name, '256')} (the paper's "
                           f"short side) or another size of at least {MIN_IMAGE_SIZE}, or leave it out to keep the "
                           "original images.")
    return value


def stored_side_problem(resize: int | None, image_size: int, readers: str = "training", *, side: int | None = None,
                        schedule: bool = False, uploaded: bool = False) -> str | None:
    """What is wrong with images stored with short side ``resize`` (``None``: as they are) for ``readers`` that crop
    ``image_size`` pixels out of them, saying what to change; None when nothing is. The one rule: ``resize`` below the
    short side the readers take the stored images at (``side``; unset: ``image_size``, the crop of a whole short
    side, as training's largest crops are; evaluation resizes the short side to ``image_size * 256 / 224`` first) has
    every crop enlarged from fewer pixels than it is given. ``schedule``: ``image_size`` is the largest of several
    sizes; ``uploaded``: the images are on a board already, so that a larger ``resize`` is another upload."""
    side = image_size if side is None else side
    if resize is None or resize >= side:
        return None
    sizes = "the largest of `image_size`" if schedule else "`image_size`"
    paper = "(the paper cropped 224 out of a short side of 256)"
    larger = (f"upload them again with `resize` of at least {side} {paper} with imagenet_upload()" if uploaded
              else f"use `resize` of at least {side} {paper}")
    smaller = "every size of `image_size` at most" if schedule else "an `image_size` of at most"
    stored = f"The board's images were stored with `resize` = {resize}" if uploaded else f"`resize` = {resize}"
    if side == image_size:
        below = f"{image_size}, {sizes}" if schedule else f"{sizes} = {image_size}"
        what = (f"{stored}{',' if uploaded else ' is'} below {below}: {readers} would enlarge every crop of the "
                f"stored images to {image_size} pixels")
    else:  # the readers resize the short side to `side` first: a short side stored at `image_size` is enlarged too
        what = (f"{stored}: {readers} resizes the short side of each image to {side} before it crops "
                f"{sizes} = {image_size} out of it, and would enlarge every image it reads from {resize} to {side} "
                "pixels")
    return f"{what}; {larger}, or {'give ' if uploaded else ''}{smaller} {resize * image_size // side}."


def check_stored_side(resize: int | None, image_size: int, readers: str = "training") -> None:
    """Images stored with short side ``resize`` (``None``: as they are) against the side ``image_size`` that
    ``readers`` crop from them: an :class:`AlexnetError` saying what to change when ``resize`` is below it, where
    every crop would be enlarged from fewer pixels than it is given (:func:`stored_side_problem`)."""
    problem = stored_side_problem(resize, image_size, readers)
    if problem is not None:
        raise AlexnetError(problem)


def check_scratch(scratch: Any, name: str = "scratch") -> str | None:
    """``scratch`` as the path of a local folder, or ``None``; an :class:`AlexnetError` naming it as ``name`` and
    saying what to give otherwise (the folder is made by the upload)."""
    if scratch is None:
        return None
    text = os.fspath(scratch) if isinstance(scratch, (str, os.PathLike)) else scratch
    if not isinstance(text, str) or not text.strip() or "://" in text:
        raise AlexnetError(f"{given_as(f'`{name}`', repr(text))} is not a local folder: give a folder on this "
                           "machine's disk with room for a few categories' zips, or leave it unset for the system's "
                           "temporary folder")
    return text


@dataclass(frozen=True)
class SyntheticOptions:
    """How a synthetic ImageNet is written (the declaration: see the module documentation)."""

    classes: int = setting(10, "count", "number of categories (at most 1000 in every layout but kaggle and folders)",
                           minimum=1)
    images_per_class: int = setting(100, "count", "training images per category", minimum=1)
    val_per_class: int = setting(10, "count", "validation images per category (0: none; the folders layout has none)",
                                 minimum=0)
    seed: int = setting(0, "count", "random seed: the same seed and options give byte-identical files", minimum=0)
    quirks: bool = setting(False, "flag", "also write the odd files real ImageNet has, in the first category and on "
                           "top of images_per_class: a CMYK JPEG, a grayscale JPEG, a PNG named .JPEG, a JPEG cut off "
                           "mid-scan and an empty file")
    max_side: int | None = setting(None, "count", "shrink every image so that its longer side is at most this many "
                                   "pixels (unset: ImageNet's sizes); small images make quick experiments and tests",
                                   minimum=8, optional=True, metavar="PIXELS")
    layout: str = setting("kaggle", "choice", "the layout written: kaggle (Kaggle's download extracted), archives (the "
                          "official ILSVRC2012 training tar, validation tar and devkit), kaggle_zip (Kaggle's zip as "
                          "downloaded), kaggle_targz (Kaggle's earlier download: its tree in one tar.gz, the LOC_ "
                          "files beside it), parquet (Hugging Face's imagenet-1k shards), imagefolder (train/<wnid>/ "
                          "and val/<wnid>/ folders, as torchvision's ImageFolder reads them) or folders (one folder "
                          "per WordNet id, without validation images)", choices=LAYOUT_NAMES, check=check_layout)


@dataclass(frozen=True)
class UploadOptions:
    """How ImageNet is uploaded to a board (the declaration: see the module documentation)."""

    workers: int = setting(8, "count", "categories fetched, packed and published at the same time while one thread "
                           "reads the source in order; at most one of them is packed per CPU at a time, the others "
                           "fetching or publishing", minimum=1)
    min_images: int = setting(0, "count", "leave out categories with fewer good training images than this (a "
                              "category without any good image is left out always)", minimum=0)
    resize: int | None = setting(None, "count", f"re-encode images so that their short side is at most this many "
                                 f"pixels, at least {MIN_IMAGE_SIZE} (CMYK, grayscale and PNG images become RGB "
                                 "JPEGs): a smaller bucket and faster decoding when training (unset: keep every good "
                                 "image byte for byte)", minimum=MIN_IMAGE_SIZE, optional=True, check=check_resize,
                                 metavar="PIXELS")
    quality: int = setting(DEFAULT_QUALITY, "count", "JPEG quality of re-encoded images", minimum=1, maximum=100,
                           used_with=UsedWith("`resize`", "the images are stored as they are, not re-encoded",
                                              lambda v: v["resize"] is not None))
    keep_versions: int | None = setting(None, "count", "once the upload is complete, keep only this many versions "
                                        "(the newest) of each pin it wrote or kept, so that uploading changed data "
                                        "again (with resize, say) does not leave the old copy on the board (unset: "
                                        "every version); a reader still holding an older categories table then no "
                                        "longer finds the versions it names", minimum=1, optional=True)
    scratch: str | None = setting(None, "location", "a local folder (made if missing), on a disk with room for a few "
                                  "categories' zips, in which the upload makes its scratch folder: the zips on their "
                                  "way to the board (moved onto a folder board on the same disk instead of copied) and "
                                  "the categories of Kaggle's tar.gz or of shuffled parquet shards waiting to be "
                                  "packed (unset: the system's temporary folder, TMPDIR)", optional=True,
                                  check=check_scratch, metavar="FOLDER")
    retries: int = setting(3, "count", "attempts after the first for each transient error of the board, their waits "
                           "doubling from about 0.5 s (a board that does not answer at all is given up on once they "
                           "are used, or about 30 s after it stopped if that comes first, a few minutes when it keeps "
                           "its connections open without a word; the same upload run again then resumes)", minimum=0)
    val_share: float = setting(0.0, "number", "for a folder of category folders, which holds no validation images: "
                               "about this share of each category's images held out as its validation images, each "
                               "image by a hash of its name, so that the same ones stay held out when photos are "
                               "added, and at least one of every category of two images or more (0: none)",
                               minimum=0.0, below=1.0)
    max_pixels: int = setting(MAX_PIXELS, "count", "the most pixels (width x height) an image may have to be "
                              f"stored, at most {MAX_PIXELS:,} (the most that training, evaluation and prediction "
                              "decode): a larger image is sized from its header, without being decoded, and left out "
                              "as a bad image, unless `resize` shrinks it within this (images of up to "
                              f"{MAX_PIXELS_TO_SHRINK:,} pixels are shrunk)", minimum=1, maximum=MAX_PIXELS,
                              metavar="PIXELS")


@dataclass(frozen=True)
class PartitionOptions:
    """Which share of a board's categories a worker fetches: partition ``partition`` of ``total`` (the declaration:
    see the module documentation; that ``partition`` is below ``total`` is
    :func:`alexnet.data.partition.check_partition`'s to check)."""

    partition: int = setting(0, "count", "which partition, from 0 to `total` - 1 (0-based)", minimum=0)
    total: int = setting(DEFAULT_PARTITIONS, "count", "how many partitions (workers) the categories are split into",
                         minimum=1)


_PARTITION = declaration.specs(PartitionOptions)


@dataclass(frozen=True)
class ValidationPartitionOptions:
    """Which share of a board's validation images is fetched: a partition's, but all of them unless told otherwise
    (the declaration: see the module documentation)."""

    partition: int = like(_PARTITION["partition"], help="which share of the validation images, from 0 to `total` - 1 "
                          "(0-based)")
    total: int = like(_PARTITION["total"], default=1, help="how many shares the categories that have validation "
                      "images are split into (1: all of them)")


@dataclass(frozen=True)
class FetchOptions:
    """How a partition of a board is fetched into the local cache (the declaration: see the module documentation)."""

    cache_dir: str | None = setting(None, "location", "where the zips are extracted, one board's to a local folder, "
                                    "new, empty or a cache made before (unset: the board's own folder under the "
                                    "user's cache directory); one filled before and shared read-only is read as it "
                                    "is", optional=True,
                                    metavar="FOLDER")
    workers: int = setting(DEFAULT_DOWNLOADS, "count", "downloads at the same time", minimum=1)
    verify: bool = setting(False, "flag", "check every cached file's CRC-32 against the one its zip recorded (which "
                           "reads every file) and fetch a damaged category again; off, names and sizes are checked")
    retries: int = setting(3, "count", "attempts after the first for each download that fails for a transient reason, "
                           "their waits doubling from about 0.5 s (a board that does not answer at all is given up on "
                           "once they are used, or about 30 s after it stopped if that comes first, a few minutes when "
                           "it keeps its connections open without a word, said after 30 s without a byte; the same "
                           "fetch run again then resumes)", minimum=0)
    validation: bool = setting(True, "flag", "also fetch the partition's validation images", option=None)


_FETCH = declaration.specs(FetchOptions)


@dataclass(frozen=True)
class ValidationFetchOptions:
    """How a board's validation images alone are fetched into the local cache: a fetch's options, but for
    ``validation`` (the declaration: see the module documentation)."""

    cache_dir: str | None = like(_FETCH["cache_dir"])
    workers: int = like(_FETCH["workers"])
    verify: bool = like(_FETCH["verify"])
    retries: int = like(_FETCH["retries"])
