"""Finding the images that cannot be used, before training: named, counted, and fatal above a share."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from helpers_train import make_tree, write_quirks

tf = pytest.importorskip("tensorflow")

from alexnet.errors import BadImagesError  # noqa: E402
from alexnet.input import scan  # noqa: E402
from alexnet.storage import cache  # noqa: E402


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("scan")
    data = make_tree(root, classes=3, per_class=6, val_per_class=2, seed=3)
    data["quirks"] = write_quirks(root / "quirks")
    return data


def test_scan_finds_truncated_empty_and_missing_files(tree, tmp_path):
    quirks = tree["quirks"]
    missing = str(tmp_path / "missing.JPEG")
    files = [*tree["image"][:5], *(str(p) for p in quirks.values()), missing]
    bad = scan.scan_images(files, parallel=2)
    assert bad == [str(quirks["truncated"]), str(quirks["empty"]), missing]
    assert scan.scan_images(tree["image"], parallel=2) == []


def test_jpeg_only_also_finds_the_files_of_other_formats(tree):
    quirks = tree["quirks"]
    files = [*tree["image"][:2], *(str(p) for p in quirks.values())]
    bad = scan.scan_images(files, parallel=2, jpeg_only=True)
    # CMYK and grayscale JPEGs are JPEGs; the PNG named .JPEG is not
    assert bad == [str(quirks["png"]), str(quirks["truncated"]), str(quirks["empty"])]


def test_bad_files_are_counted_then_stop_the_run_above_the_threshold(tree, caplog):
    files = tree["image"]
    bad = files[:2]
    with caplog.at_level(logging.WARNING, logger="alexnet.input.scan"):
        kept, labels = scan.drop_bad_images(files, tree["label"], bad, max_bad_fraction=0.2)
    assert kept == files[2:] and labels == tree["label"][2:]
    assert "Skipping 2" in caplog.text and bad[0] in caplog.text
    with pytest.raises(BadImagesError) as error:
        scan.drop_bad_images(files, tree["label"], bad, max_bad_fraction=0.1)
    message = str(error.value)
    assert all(path in message for path in bad)
    assert "2 of 18" in message and "max_bad_fraction" in message
    # damaged cached copies of a board's partition are fetched again by a verifying fetch, as each front end says it
    assert "fetch it again with verify = True" in message
    from helpers_cli import help_as_said

    assert "fetch it again with --verify," in help_as_said("train", message)


# ---------------------------------------------------------------------------------------------------------
# a board's partition in the extraction cache: checked once per fetched category


def _cached_partition(root: Path, truncated: Path) -> dict:
    """Two categories as the extraction cache holds them (``train/<wnid>`` with its marker), a truncated JPEG among
    the first's files; and validation files outside the cache."""
    data = make_tree(root, classes=2, per_class=4, val_per_class=2, seed=5)
    first = root / "train" / data["categories"][0]
    shutil.copy(truncated, first / "truncated.JPEG")
    data["image"].append(str(first / "truncated.JPEG"))
    data["category"].append(data["categories"][0])
    data["label"].append(0)
    for wnid in data["categories"]:
        _mark(root / "train" / wnid, "a" * 64)
    return data


def _mark(folder: Path, sha256: str) -> None:
    """Write ``folder``'s marker, as a fetch of the zip ``sha256`` does."""
    files = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    cache.write_marker(str(folder), sha256, [(n, (folder / n).stat().st_size, cache.crc32_file(str(folder / n)))
                                             for n in files])


@pytest.fixture
def checked(monkeypatch) -> list[list[str]]:
    """The files each scan reads, one list per pass over the files."""
    passes: list[list[str]] = []
    original = scan._check_files

    def check_files(files, *args, **kwargs):
        passes.append(list(files))
        return original(files, *args, **kwargs)

    monkeypatch.setattr(scan, "_check_files", check_files)
    return passes


def test_a_cached_category_is_checked_at_the_first_run_only_and_skips_the_same_files(tree, tmp_path, checked,
                                                                                     caplog):
    from alexnet.train.datasets import usable_data
    from alexnet.train.settings import TrainSettings

    data = _cached_partition(tmp_path / "cache", tree["quirks"]["truncated"])
    truncated = data["image"][-1]
    settings = TrainSettings.from_dict({"max_bad_fraction": 0.2, "parallel": 2})
    runs = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="alexnet.input.scan"):
            td, bad = usable_data(data, settings)
        runs.append((td.files, td.labels, td.val_files, bad, [r.getMessage() for r in caplog.records]))
    assert runs[0] == runs[1]
    files, _, val_files, bad, messages = runs[0]
    assert bad == [truncated] and truncated not in files and len(files) == len(data["image"]) - 1
    assert messages == [f"Skipping 1 unusable training image(s) of {len(data['image'])}:\n  {truncated}"]
    # the first run read every file; the second only the validation files, which are not in the cache (read as always)
    assert checked == [data["image"], data["val_image"], data["val_image"]]
    assert val_files == data["val_image"]


def test_a_category_fetched_again_from_another_zip_is_checked_again(tree, tmp_path, checked):
    data = _cached_partition(tmp_path / "cache", tree["quirks"]["truncated"])
    first, second = (str(tmp_path / "cache" / "train" / wnid) for wnid in data["categories"])
    truncated = data["image"][-1]
    assert scan.scan_images(data["image"], parallel=2) == [truncated]
    # the first category's zip changed on the board: its truncated file was replaced by a good one
    shutil.copy(data["image"][0], truncated)
    _mark(Path(first), "b" * 64)
    assert scan.scan_images(data["image"], parallel=2) == []
    assert checked[1] == [f for f in data["image"] if os.path.dirname(f) == first]
    # another kind of check reads every file once too, and keeps the other kind's record
    assert scan.scan_images(data["image"], parallel=2, jpeg_only=True) == []
    assert scan.scan_images(data["image"], parallel=2) == []
    assert len(checked) == 3 and checked[2] == data["image"]
    assert all(os.path.dirname(f) in (first, second) for f in data["image"])


def test_a_cached_file_changed_since_the_fetch_or_outside_the_marker_is_read_again(tree, tmp_path, checked):
    data = _cached_partition(tmp_path / "cache", tree["quirks"]["truncated"])
    folder = tmp_path / "cache" / "train" / data["categories"][1]
    scan.scan_images(data["image"], parallel=2)
    extra = folder / "extra.JPEG"  # not in the zip: not the cache's
    shutil.copy(tree["quirks"]["empty"], extra)
    gone = data["image"][5]  # a file of the second category, removed by hand
    os.remove(gone)
    assert scan.scan_images([*data["image"], str(extra)], parallel=2) == [gone, data["image"][-1], str(extra)]
    assert checked[1] == [gone, str(extra)]



def test_a_cache_larger_than_half_the_free_memory_is_said(tmp_path, caplog):
    """`cache` keeps every image's bytes in memory: a worker whose images take more than half the memory available
    is told before training, with the sizes; one that fits, or a system whose free memory is unknown, is not."""
    from alexnet.machine import available_memory
    from alexnet.train.datasets import warn_if_cache_will_not_fit

    files = []
    for i in range(3):
        files.append(str(tmp_path / f"{i}.JPEG"))
        Path(files[-1]).write_bytes(b"x" * 1000)
    with caplog.at_level(logging.WARNING, logger="alexnet.train.datasets"):
        warn_if_cache_will_not_fit(files, 10_000)
        warn_if_cache_will_not_fit(files, None)
        assert caplog.records == []
        warn_if_cache_will_not_fit([*files, str(tmp_path / "gone.JPEG")], 5_000)
    [record] = caplog.records
    assert record.getMessage().startswith("`cache` keeps this worker's 4 images in memory once read: 0.0 GB of "
                                          "compressed bytes, with 0.0 GB of memory available")
    assert record.getMessage().endswith("leave `cache` off, or train on a smaller partition (more workers)")
    memory = available_memory()
    assert memory is None or memory > 0


def test_an_image_declaring_more_pixels_than_the_limit_is_bad_without_being_decoded_and_said_so(tmp_path,
                                                                                               monkeypatch):
    from helpers_images import encoded, png_claiming
    from PIL import Image

    from alexnet.data import images as image_checks

    files = {}
    for name, size in (("at", (40, 30)), ("above", (40, 31))):
        for fmt, suffix in (("JPEG", "JPEG"), ("PNG", "png")):
            path = tmp_path / f"{name}.{suffix}"
            path.write_bytes(encoded(Image.new("RGB", size, (200, 40, 20)), fmt))
            files[path.name] = str(path)
    bomb = tmp_path / "bomb.png"  # 100 million pixels claimed: 300 MB decoded, were it decoded
    bomb.write_bytes(png_claiming(10000, 10000))
    files["bomb.png"] = str(bomb)
    assert scan.scan_images(list(files.values()), parallel=2) == [str(bomb)]
    said = "too large to decode safely (100000000 pixels, more than the limit 89478485)"
    assert scan.said(str(bomb)) == f"{bomb}: {said}"
    assert scan.said(files["above.png"]) == files["above.png"]
    kind = scan.check_kind()
    monkeypatch.setattr(image_checks, "MAX_PIXELS", 40 * 30)
    assert scan.check_kind() != kind, "a verdict the cache kept under another limit is not used"
    bad = scan.scan_images(list(files.values()), parallel=2)
    assert bad == [files["above.JPEG"], files["above.png"], str(bomb)]
    with pytest.raises(BadImagesError) as error:
        scan.drop_bad_images(list(files.values()), [0] * len(files), bad, max_bad_fraction=0.1)
    assert f"\n  {files['above.png']}: too large to decode safely (1240 pixels, more than the limit 1200)\n" \
        in str(error.value)
    assert "are missing, empty, truncated, too large or cannot be decoded" in str(error.value)
    (tmp_path / "empty.JPEG").write_bytes(b"")  # the reasons a listing can tell
    assert scan.said(str(tmp_path / "empty.JPEG")) == f"{tmp_path / 'empty.JPEG'}: empty"
    assert scan.said(str(tmp_path / "nope.JPEG")) == f"{tmp_path / 'nope.JPEG'}: cannot be read (No such file or " \
        "directory)"
