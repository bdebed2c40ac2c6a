"""Which categories belong to worker ``partition`` of ``total``: pure functions, no I/O.

Categories are split so that every worker gets about the same number of images: greedy "largest first
onto the lightest bin" (longest-processing-time scheduling). Categories are taken by image count,
largest first, ties broken by id; each goes to the partition holding the fewest images so far, ties
broken by the lower partition number. The result depends only on the ``(id, images)`` pairs, not on
their order, so every worker computes the same split on its own. Every category lands in exactly one
partition, and no partition ends up more than one category's size above the lightest one.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from ..checks import as_int
from ..errors import AlexnetError

ImageCounts = Mapping[str, int] | Sequence[tuple[str, int]]


def _counts(images: ImageCounts) -> list[tuple[str, int]]:
    pairs = list(images.items()) if isinstance(images, Mapping) else [tuple(p) for p in images]
    seen: set[str] = set()
    out: list[tuple[str, int]] = []
    for pair in pairs:
        if len(pair) != 2:
            raise AlexnetError(f"each category must be an (id, images) pair, not {pair!r}")
        wnid, count = pair
        wnid = str(wnid)
        if wnid in seen:
            raise AlexnetError(f"category {wnid!r} is listed twice; each category id must be unique")
        seen.add(wnid)
        count = as_int(count, f"the image count of category {wnid!r}")
        if count < 0:
            raise AlexnetError(f"category {wnid!r} has a negative image count ({count})")
        out.append((wnid, count))
    if not out:
        raise AlexnetError("there are no categories to partition; upload some to the board first")
    return out


def check_partition(partition: object, total: object) -> tuple[int, int]:
    """``(partition, total)`` as ints; an :class:`AlexnetError` saying the valid range when they do not fit.

    The one range check of the package: ``total`` at least 1, ``partition`` in ``0..total-1`` (0-based).
    """
    total = as_int(total, "total", minimum=1)
    partition = as_int(partition, "partition")
    if not 0 <= partition < total:
        raise AlexnetError(
            f"`partition` must be in 0..{total - 1} (0-based, with total = {total}), not {partition}."
        )
    return partition, total


def _check_total(total: object, categories: int) -> int:
    total = as_int(total, "total", minimum=1)
    if total > categories:
        raise AlexnetError(
            f"`total` ({total}) must not exceed the number of categories ({categories}): "
            f"some partitions would be empty; use `total` <= {categories}."
        )
    return total


def assign_partitions(images: ImageCounts, total: int) -> dict[str, int]:
    """Map every category id to its partition (0-based) in a split into ``total`` balanced partitions."""
    pairs = _counts(images)
    return _assign(pairs, _check_total(total, len(pairs)))


def _assign(pairs: list[tuple[str, int]], total: int) -> dict[str, int]:
    """:func:`assign_partitions` of checked pairs and total."""
    order = sorted(pairs, key=lambda pair: (-pair[1], pair[0]))
    heap = [(0, k) for k in range(total)]  # (images so far, partition): the lightest, then the lowest
    owner: dict[str, int] = {}
    for wnid, count in order:
        load, k = heapq.heappop(heap)
        owner[wnid] = k
        heapq.heappush(heap, (load + count, k))
    return owner


def partition_categories(images: ImageCounts, partition: int, total: int) -> list[str]:
    """The category ids of worker ``partition`` (0-based) of ``total``, sorted by id.

    ``images`` maps category id to image count (a dict, or a sequence of ``(id, count)`` pairs).
    ``partition`` outside ``0..total-1``, ``total`` below 1 or above the number of categories raise
    ``AlexnetError`` saying the valid range.
    """
    partition, total = check_partition(partition, total)
    owner = assign_partitions(images, total)
    return sorted(wnid for wnid, k in owner.items() if k == partition)


def partition_sizes(images: ImageCounts, total: int, counts: Mapping[str, int] | None = None) -> list[int]:
    """Images in each of the ``total`` partitions of the split of ``images``, in partition order.

    ``counts`` (category id -> count, e.g. validation images) are summed per partition instead of ``images``,
    still under the split that ``images`` decides. The training layer derives "the same number of steps on
    every worker" from it: ``min(partition_sizes(images, total)) // per_worker_batch``.
    """
    checked = _counts(images)
    total = _check_total(total, len(checked))
    owner = _assign(checked, total)
    pairs = dict(checked)
    summed = pairs if counts is None else {wnid: as_int(counts.get(wnid, 0), f"the count of {wnid!r}", 0)
                                           for wnid in pairs}
    sizes = [0] * total
    for wnid, k in owner.items():
        sizes[k] += summed[wnid]
    return sizes
