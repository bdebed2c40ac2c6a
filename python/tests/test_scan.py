"""Finding the images that cannot be used, before training: named, counted, and fatal above a share."""

from __future__ import annotations

import logging

import pytest
from helpers_train import make_tree, write_quirks

tf = pytest.importorskip("tensorflow")

from alexnet.errors import BadImagesError  # noqa: E402
from alexnet.input import scan  # noqa: E402


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
