"""The images a benchmark runs on: from a partition, an ImageNet folder or a synthetic ImageNet, and
copies stored as ``imagenet_upload(resize = ...)`` would store them."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import as_strings
from ..data.imagenet import read_imagenet
from ..data.images import check_image
from ..data.options import DEFAULT_QUALITY
from ..errors import AlexnetError
from ..input.inputs import training_data
from ..machine import usable_cpus

#: A synthetic image's long side, as a multiple of the final training size: ImageNet's photos are about 500
#: pixels for the paper's 224, so decoding weighs against the model here as it does on ImageNet.
SOURCE_SIDE_FACTOR = 500 / 224


@dataclass
class BenchImages:
    """The images a benchmark runs on: readable JPEG files, their labels, and where they came from."""

    files: list[str]
    labels: list[int]
    num_classes: int
    source: str
    skipped: int = 0

    @property
    def compressed_bytes(self) -> int:
        """Total size of the files."""
        return sum(os.path.getsize(f) for f in self.files)


def _from_mapping(data: Mapping[str, Any]) -> tuple[list[str], list[int], int, str]:
    if "label" not in data and "categories" not in data:  # a partition-like list without its categories
        data = {**data, "categories": sorted(set(as_strings(data.get("category"))))}
    td = training_data(data)
    source = "partition {partition} of {total} from {board}".format(
        partition=data.get("partition", "?"), total=data.get("total", "?"), board=data.get("board", "a board")
    ) if "board" in data else "the images of `data`"
    return td.files, td.labels, td.num_classes, source


def resolve_images(
    data: Mapping[str, Any] | str | os.PathLike | None,
    images: int,
    *,
    seed: int = 0,
    workdir: str | os.PathLike | None = None,
) -> BenchImages:
    """The images to benchmark on, at most ``images`` of them, chosen at random (reproducibly) when there are more.

    ``data`` is a partition (the result of ``imagenet_partition()``, or a dict with ``image`` and ``label``
    or ``category``), the folder of an ImageNet tree (either layout ``read_imagenet`` reads), or ``None``
    for a synthetic ImageNet written into ``workdir`` (10 categories, ``ceil(images / 10)`` images each).
    Files that training would leave out (truncated, empty or unreadable: the rule of
    :func:`alexnet.input.scan.scan_images`) and files that are not JPEGs (a PNG named ``.JPEG``, which the
    plain-decode reference cannot read) are left out and counted in ``skipped``.
    """
    if images < 1:
        raise AlexnetError(f"`images` must be at least 1, not {images}.")
    if data is None:
        from ..data.synthetic import imagenet_synthetic

        if workdir is None:
            raise AlexnetError("resolve_images() needs `workdir` to write a synthetic ImageNet into.")
        classes = 10 if images >= 10 else images
        dest = Path(workdir) / "imagenet"
        if not dest.exists():
            imagenet_synthetic(dest, classes=classes, images_per_class=math.ceil(images / classes), val_per_class=0,
                               seed=seed)
        tree = read_imagenet(dest)
        (files, labels), num_classes = tree.training_files(), len(tree.categories)
        source = f"synthetic ImageNet in {dest}"
    elif isinstance(data, (str, os.PathLike)):
        tree = read_imagenet(data)
        (files, labels), num_classes = tree.training_files(), len(tree.categories)
        source = f"ImageNet tree in {tree.root}"
    elif isinstance(data, Mapping):
        files, labels, num_classes, source = _from_mapping(data)
    else:
        raise AlexnetError(
            f"`data` must be a partition (imagenet_partition()'s result), an ImageNet folder or None, "
            f"not a {type(data).__name__}."
        )
    from ..input.scan import scan_images  # TensorFlow: imported when images are checked, not with the module

    pairs = list(zip(files, labels, strict=True))
    if len(pairs) > images:
        pairs = random.Random(seed).sample(pairs, images)
    bad = set(scan_images([f for f, _ in pairs], jpeg_only=True)) if pairs else set()
    usable = [(f, y) for f, y in pairs if f not in bad]
    if not usable:
        raise AlexnetError(f"None of the {len(pairs)} images of {source} is a readable JPEG: nothing to benchmark.")
    return BenchImages([f for f, _ in usable], [y for _, y in usable], num_classes, source, len(pairs) - len(usable))


def store_resized(files: Sequence[str], resize: int, dest: str | os.PathLike, *, quality: int = DEFAULT_QUALITY,
                  workers: int | None = None) -> list[str]:
    """Copies of ``files`` in ``dest`` as ``imagenet_upload(resize = resize, quality = quality)`` stores them.

    Images whose short side is above ``resize`` are re-encoded with that short side (see
    :func:`alexnet.data.images.check_image`); the others are copied unchanged. Returns the copies' paths, in order.
    """
    folder = Path(dest)
    folder.mkdir(parents=True, exist_ok=True)

    def one(item: tuple[int, str]) -> str:
        index, path = item
        stored, reason = check_image(Path(path).read_bytes(), resize=resize, quality=quality)
        if stored is None:
            raise AlexnetError(f"{path} cannot be re-encoded ({reason}): remove it from the images to benchmark.")
        target = folder / f"{index:07d}.JPEG"
        target.write_bytes(stored)
        return str(target)

    with ThreadPoolExecutor(max_workers=workers or usable_cpus()) as pool:
        return list(pool.map(one, enumerate(files)))
