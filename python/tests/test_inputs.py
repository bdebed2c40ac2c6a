"""The ``data`` argument: a partition or the original hand-made list, normalised to files and global labels."""

from __future__ import annotations

import numpy as np
import pytest

from alexnet.errors import AlexnetError
from alexnet.input.inputs import training_data


def test_hand_made_form_numbers_classes_by_sorted_category():
    data = {
        "image": ["/x/b1.JPEG", "/x/a1.JPEG", "/x/c1.JPEG", "/x/a2.JPEG"],
        "category": ["n02", "n01", "n03", "n01"],
        "categories": ["n03", "n01", "n02"],
        "val_image": ["/x/v.JPEG"],
        "val_category": ["n03"],
    }
    td = training_data(data)
    assert td.labels == [1, 0, 2, 0]
    assert td.num_classes == 3
    assert td.val_labels == [2]


def test_partition_form_keeps_global_labels_and_num_classes():
    data = {
        "image": np.array(["/x/a.JPEG", "/x/b.JPEG"]),
        "category": ("n09", "n42"),
        "categories": ["n09", "n42"],
        "label": [7.0, 41.0],  # as R's numeric vectors arrive
        "num_classes": [1000],
        "val_image": "/x/v.JPEG",  # a single path arrives as a bare string
        "val_label": 41,
    }
    td = training_data(data)
    assert td.files == ["/x/a.JPEG", "/x/b.JPEG"]
    assert td.labels == [7, 41] and all(isinstance(v, int) for v in td.labels)
    assert td.num_classes == 1000, "the model must have the global number of classes, not the partition's 2"
    assert td.val_files == ["/x/v.JPEG"] and td.val_labels == [41]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"image": ["a"], "category": ["n1"], "categories": ["n2"]}, r'not in `data\["categories"\]`'),
        ({"image": ["a", "b"], "category": ["n1"], "categories": ["n1"]}, "one category per image"),
        ({"image": ["a"], "category": ["n1"], "categories": ["n1"], "label": [0]}, "num_classes"),
        ({"image": ["a"], "label": [5], "num_classes": 3}, "outside 0..2"),
        ({"image": [], "category": [], "categories": ["n1"]}, "no images"),
        ({"image": ["a"], "label": [0.5], "num_classes": 3}, "whole numbers"),
    ],
)
def test_bad_data_is_refused_with_what_to_change(data, message):
    with pytest.raises(AlexnetError, match=message):
        training_data(data)


def test_category_zips_given_as_images_stand_for_their_files_extracted_once(tmp_path, monkeypatch, caplog):
    """The original r-tensorflow/alexnet's list built by hand from a board's pins: with pins 1.x, pin_download()
    gives each category's zip, where pins 0.x's pin_get() gave its extracted files."""
    import logging
    import os
    import zipfile
    from pathlib import Path

    from alexnet.storage import cache

    monkeypatch.setattr(cache, "cache_root", lambda *parts: str(tmp_path.joinpath("cache", *parts)))

    def pin(wnid: str, count: int, text: str = "") -> str:
        path = tmp_path / "pins" / wnid / "20261207T000000Z-abcde" / f"{wnid}.zip"
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w") as archive:
            for i in range(count):
                archive.writestr(f"{wnid}_{i}.JPEG", f"{wnid}-{i}{text}".encode())
        return str(path)

    zips = {"n02": pin("n02", 3), "n01": pin("n01", 2), "n03": pin("n03", 2)}
    image = tmp_path / "a.JPEG"
    image.write_bytes(b"x")
    gone = str(tmp_path / "gone.zip")  # not there: kept, for the check before training to name
    data = {"image": [zips["n02"], str(image), zips["n01"], gone], "category": ["n02", "n01", "n01", "n02"],
            "categories": ["n01", "n02", "n03"], "val_image": [zips["n03"]], "val_category": ["n03"]}
    with caplog.at_level(logging.INFO, logger="alexnet.storage.given_zips"):
        td = training_data(data)
    names = [os.path.basename(f) for f in td.files]
    assert names == ["n02_0.JPEG", "n02_1.JPEG", "n02_2.JPEG", "a.JPEG", "n01_0.JPEG", "n01_1.JPEG", "gone.zip"]
    assert td.labels == [1, 1, 1, 0, 0, 0, 1] and td.num_classes == 3
    assert [os.path.basename(f) for f in td.val_files] == ["n03_0.JPEG", "n03_1.JPEG"] and td.val_labels == [2, 2]
    assert Path(td.files[1]).read_bytes() == b"n02-1" and td.files[3] == str(image)
    said = [r.getMessage() for r in caplog.records if r.name == "alexnet.storage.given_zips"]
    assert len(said) == 2 and 'data["image"] names 2 zip(s)' in said[0] and "extracting 2" in said[0]
    assert 'data["val_image"] names 1 zip(s)' in said[1]
    root = tmp_path / "cache" / "unzipped"
    assert all(f.startswith(str(root)) for f in td.files if f.endswith(".JPEG") and "n0" in f)
    assert list((root / ".tmp").iterdir()) == []

    # found again while unchanged: nothing extracted, nothing said
    caplog.clear()
    written = [os.stat(f).st_mtime_ns for f in td.files[:3]]
    with caplog.at_level(logging.INFO, logger="alexnet.storage.given_zips"):
        again = training_data(data)
    assert again.files == td.files and [os.stat(f).st_mtime_ns for f in td.files[:3]] == written
    assert not [r for r in caplog.records if r.name == "alexnet.storage.given_zips"]

    # a zip changed (another version downloaded over it): its files extracted again, the others kept
    pin("n01", 3, text="-new")
    os.utime(zips["n01"], ns=(1, 1))
    changed = training_data(data)
    assert [os.path.basename(f) for f in changed.files[4:7]] == ["n01_0.JPEG", "n01_1.JPEG", "n01_2.JPEG"]
    assert Path(changed.files[4]).read_bytes() == b"n01-0-new" and changed.files[:3] == td.files[:3]
    assert changed.labels == [1, 1, 1, 0, 0, 0, 0, 1]


def test_a_zip_of_jpegs_deflated_by_hand_is_taken_and_one_that_inflates_far_beyond_is_not(tmp_path, monkeypatch):
    """A category's zip made by hand with zip's default compression was refused as "not written by alexnet": its
    JPEGs had shrunk a few percent."""
    import io
    import os
    import zipfile

    from PIL import Image

    from alexnet.errors import IntegrityError
    from alexnet.storage import cache

    monkeypatch.setattr(cache, "cache_root", lambda *parts: str(tmp_path.joinpath("cache", *parts)))
    rng = np.random.default_rng(0)
    deflated = tmp_path / "n01.zip"
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for i in range(3):
            out = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype=np.uint8)).save(out, "JPEG", quality=90)
            archive.writestr(f"n01_{i}.JPEG", out.getvalue())
    with zipfile.ZipFile(deflated) as archive:
        assert sum(m.file_size for m in archive.infolist()) > os.path.getsize(deflated), "the JPEGs shrank"
    td = training_data({"image": [str(deflated)], "category": ["n01"], "categories": ["n01"]})
    assert [os.path.basename(f) for f in td.files] == ["n01_0.JPEG", "n01_1.JPEG", "n01_2.JPEG"]
    # one that says it holds far more than JPEGs deflated would: refused before anything is written
    bomb = tmp_path / "n02.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("n02_0.JPEG", b"\0" * 1_000_000)
    with pytest.raises(IntegrityError, match=r"more than 2 times the .* bytes of the zip itself .*: JPEGs deflated "
                                             r"shrink a few percent, not to less than 1/2, and it is not extracted"):
        training_data({"image": [str(bomb)], "category": ["n02"], "categories": ["n02"]})


def test_paths_given_as_a_mapping_are_refused_not_taken_for_its_keys(tmp_path):
    """A dict (R's named vector arrived as one) had its keys taken for the paths: an evaluation scored other images."""
    image = tmp_path / "a.JPEG"
    image.write_bytes(b"x")
    with pytest.raises(AlexnetError, match=r'^`data\["image"\]` must be strings, not a mapping of 1 entry \(a dict, or '
                                           r"R's named list\) whose names would be taken for them: give its values\.$"):
        training_data({"image": {"other.JPEG": str(image)}, "category": ["n01"], "categories": ["n01"]})
    from alexnet.model.evaluate import _data_images

    with pytest.raises(AlexnetError, match=r'^`data\["val_image"\]` must be strings, not a mapping'):
        _data_images({"val_image": {"b": str(image)}, "val_category": ["n01"]}, ["n01"])
