"""partition_categories: coverage, no overlap, balance, determinism, range errors."""

from __future__ import annotations

import random

import pytest

from alexnet.checks import as_int
from alexnet.data.partition import assign_partitions, partition_categories, partition_sizes
from alexnet.errors import AlexnetError


def counts(n: int, seed: int = 0) -> dict[str, int]:
    """n categories with ImageNet-like, uneven image counts (732..1300), seeded."""
    rng = random.Random(seed)
    return {f"n{10_000_000 + 37 * k:08d}": rng.randint(732, 1300) for k in range(n)}


@pytest.mark.parametrize("n, total", [(1, 1), (5, 2), (7, 3), (16, 16), (100, 7), (1000, 16), (1000, 64)])
def test_covers_every_category_exactly_once(n, total):
    images = counts(n, seed=n)
    parts = [partition_categories(images, k, total) for k in range(total)]
    flat = [wnid for part in parts for wnid in part]
    assert len(flat) == len(set(flat)), "a category is in two partitions"
    assert set(flat) == set(images), "a category is in no partition"
    assert all(parts), "an empty partition"
    assert all(part == sorted(part) for part in parts)


@pytest.mark.parametrize("n, total", [(10, 3), (100, 7), (1000, 16), (1000, 64)])
def test_balances_image_counts(n, total):
    images = counts(n, seed=total)
    sizes = partition_sizes(images, total)
    assert sum(sizes) == sum(images.values())
    # Greedy largest-first: no partition is more than one category above the lightest.
    assert max(sizes) - min(sizes) <= max(images.values())
    # With ten or more categories per partition, partitions are within a few percent of each other.
    if n // total >= 10:
        assert (max(sizes) - min(sizes)) / (sum(sizes) / total) < 0.06
    for k in range(total):
        assert sizes[k] == sum(images[w] for w in partition_categories(images, k, total))


def test_greedy_beats_contiguous_blocks():
    # Big categories first in id order: contiguous blocks would give partition 0 all the big ones.
    images = {f"n{k:08d}": (1300 if k < 8 else 100) for k in range(16)}
    sizes = partition_sizes(images, 2)
    assert sizes == [5600, 5600]
    contiguous = [sum(list(images.values())[:8]), sum(list(images.values())[8:])]
    assert max(sizes) - min(sizes) < max(contiguous) - min(contiguous)


def test_known_split_by_size_then_id():
    images = {"a": 5, "b": 4, "c": 3, "d": 3, "e": 1}
    # a->0 (5), b->1 (4), c->1 (7), d->0 (8), e->1 (8); ties on load go to the lower partition.
    assert assign_partitions(images, 2) == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 1}
    assert partition_categories(images, 0, 2) == ["a", "d"]
    assert partition_categories(images, 1, 2) == ["b", "c", "e"]


@pytest.mark.parametrize("total", [1, 3, 16])
def test_deterministic_whatever_the_input_order(total):
    images = counts(200, seed=3)
    pairs = list(images.items())
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    for k in range(total):
        expected = partition_categories(images, k, total)
        assert partition_categories(pairs, k, total) == expected
        assert partition_categories(shuffled, k, total) == expected
        assert partition_categories(dict(reversed(pairs)), k, total) == expected


def test_equal_counts_still_deterministic():
    images = {f"n{k:08d}": 10 for k in range(9)}
    assert [partition_categories(images, k, 3) for k in range(3)] == [
        ["n00000000", "n00000003", "n00000006"],
        ["n00000001", "n00000004", "n00000007"],
        ["n00000002", "n00000005", "n00000008"],
    ]


@pytest.mark.parametrize("partition, total", [(-1, 4), (4, 4), (17, 16), (1, 1)])
def test_partition_out_of_range_says_the_range(partition, total):
    with pytest.raises(AlexnetError, match=rf"`partition` must be in 0\.\.{total - 1}"):
        partition_categories(counts(20), partition, total)


@pytest.mark.parametrize("total", [0, -3])
def test_total_below_one(total):
    with pytest.raises(AlexnetError, match=r"`total` must be a whole number >= 1"):
        partition_categories(counts(5), 0, total)


def test_total_above_category_count_is_an_error():
    with pytest.raises(AlexnetError, match=r"`total` \(6\) must not exceed the number of categories \(5\)"):
        partition_categories(counts(5), 0, 6)


def test_whole_floats_accepted_as_from_r():
    images = counts(10)
    assert partition_categories(images, 1.0, 3.0) == partition_categories(images, 1, 3)
    with pytest.raises(AlexnetError, match="`partition` must be a whole number"):
        partition_categories(images, 0.5, 3)
    with pytest.raises(AlexnetError, match="must be a whole number"):
        as_int(True, "partition")


def test_bad_inputs():
    with pytest.raises(AlexnetError, match="no categories"):
        partition_categories({}, 0, 1)
    with pytest.raises(AlexnetError, match="listed twice"):
        partition_categories([("a", 1), ("a", 2)], 0, 1)
    with pytest.raises(AlexnetError, match="negative image count"):
        partition_categories({"a": -1}, 0, 1)


def test_which_partition_is_declared_once_and_every_function_takes_it_from_there(tmp_path):
    import inspect

    from alexnet.data.fetch import imagenet_partition, imagenet_validation
    from alexnet.data.options import DEFAULT_PARTITIONS, PartitionOptions, ValidationPartitionOptions
    from alexnet.declare import declaration

    for function, declared in ((imagenet_partition, PartitionOptions), (imagenet_validation,
                                                                         ValidationPartitionOptions)):
        parameters = inspect.signature(function).parameters
        assert {name: parameters[name].default for name in ("partition", "total")} == declaration.defaults(declared)
    assert declaration.defaults(PartitionOptions)["total"] == DEFAULT_PARTITIONS
    assert declaration.defaults(ValidationPartitionOptions)["total"] == 1  # every validation image, on one worker
    # a function that gives a declared setting a default of its own is refused when its module is imported
    def fetch(partition: int = 0, total: int = 8, **options: object) -> None: ...

    with pytest.raises(ValueError, match=r"fetch\(\) gives `total` the default 8, but PartitionOptions declares 16"):
        declaration.take_declared(fetch, PartitionOptions)
    # refused with the declaration's least value, before the board is read
    for function in (imagenet_partition, imagenet_validation):
        with pytest.raises(AlexnetError, match=r"^`total` must be a whole number >= 1, not 0"):
            function(board=tmp_path / "board", partition=0, total=0)
        with pytest.raises(AlexnetError, match=r"^`partition` must be in 0\.\.1 \(0-based, with total = 2\), not 2"):
            function(board=tmp_path / "board", partition=2, total=2)
    assert not (tmp_path / "board").exists()
