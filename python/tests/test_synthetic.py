"""imagenet_synthetic: Kaggle layout, realistic sizes and files, learnable classes, quirks, determinism."""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from alexnet.data.imagenet import read_imagenet
from alexnet.data.synthetic import COMMON_SIZES, QUALITY_RANGE, imagenet_synthetic
from alexnet.errors import AlexnetError, BoardError, LayoutError

CLS_LOC = Path("ILSVRC") / "Data" / "CLS-LOC"


def _files(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root``."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    dest = tmp_path_factory.mktemp("synthetic") / "imagenet"
    # Whole numbers as doubles, as they come from R.
    result = imagenet_synthetic(dest, classes=3.0, images_per_class=4, val_per_class=2, quirks=True, max_side=64)
    return dest, result


def test_kaggle_layout_and_result(small):
    dest, result = small
    tree = read_imagenet(dest)
    assert tree.layout == "kaggle"
    assert result["path"] == str(dest)
    assert result["classes"] == 3
    wnids = result["categories"]
    assert wnids == sorted(wnids) and len(set(wnids)) == 3
    assert all(re.fullmatch(r"n\d{8}", w) for w in wnids)
    assert [c.id for c in tree.categories] == wnids
    assert all(c.name for c in tree.categories)  # every category has a name in LOC_synset_mapping.txt

    # 4 per category, plus the 5 quirk files in the first one
    assert [len(c.files) for c in tree.categories] == [9, 4, 4]
    assert result["images"] == tree.num_images == 17
    for category in tree.categories:
        assert all(re.fullmatch(rf"{category.id}_\d+\.JPEG", Path(f).name) for f in category.files)

    assert result["val_images"] == len(tree.val_files) == 6
    assert Counter(tree.val_labels) == dict.fromkeys(wnids, 2)
    assert [Path(f).name for f in tree.val_files] == [f"ILSVRC2012_val_{i:08d}.JPEG" for i in range(1, 7)]

    on_disk = [p for p in (dest / CLS_LOC).rglob("*") if p.is_file()]
    assert len(on_disk) == 17 + 6
    assert result["bytes"] == sum(p.stat().st_size for p in on_disk)


def test_val_solution_boxes_frame_the_object(small):
    dest, _ = small
    with open(dest / "LOC_val_solution.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    boxes = []
    for row in rows:
        wnid, *coords = row["PredictionString"].split()
        x1, y1, x2, y2 = (int(v) for v in coords)
        with Image.open(dest / CLS_LOC / "val" / f"{row['ImageId']}.JPEG") as image:
            width, height = image.size
        assert 0 <= x1 < x2 < width and 0 <= y1 < y2 < height
        assert (x2 - x1) * (y2 - y1) > 0.05 * width * height  # a large object, visible at low resolution
        boxes.append((wnid, x1, y1))
    assert len(set(boxes)) == 6  # objects move from image to image


def test_max_side_keeps_common_aspect_ratios(small):
    dest, _ = small
    ratios = {w / h for w, h in COMMON_SIZES}
    for path in (dest / CLS_LOC).rglob("*.JPEG"):
        if path.stat().st_size == 0:
            continue
        with Image.open(path) as image:
            w, h = image.size
        assert max(w, h) <= 64
        assert min(abs(w / h - r) for r in ratios) < 0.03, (path, w, h)


def _quality_tables() -> dict[int, dict]:
    tables = {}
    for q in range(70, 101):
        buf = io.BytesIO()
        Image.new("RGB", (16, 16)).save(buf, "JPEG", quality=q)
        tables[q] = Image.open(io.BytesIO(buf.getvalue())).quantization
    return tables


def test_full_size_images_are_realistic(tmp_path):
    result = imagenet_synthetic(tmp_path, classes=2, images_per_class=10, val_per_class=0, seed=3)
    files = [p for p in (tmp_path / CLS_LOC / "train").rglob("*.JPEG")]
    assert len(files) == 20
    tables = _quality_tables()
    sizes, qualities = set(), set()
    for path in files:
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB"
            sizes.add(image.size)
            quality = [q for q, t in tables.items() if t == image.quantization]
            assert quality, f"{path}: quantization tables match no PIL quality"
            qualities.add(quality[0])
    assert sizes <= set(COMMON_SIZES)
    assert len(sizes) >= 2
    assert min(qualities) >= QUALITY_RANGE[0] and max(qualities) <= QUALITY_RANGE[1]
    assert len(qualities) >= 3
    mean_kb = result["bytes"] / len(files) / 1000
    assert 85 <= mean_kb <= 140, f"mean file size {mean_kb:.1f} KB, real ImageNet's is ~110 KB"


def _colour_signature(path: str) -> np.ndarray:
    """Histogram of hue weighted by saturation, from a 32x32 thumbnail."""
    with Image.open(path) as image:
        hsv = np.asarray(image.convert("RGB").resize((32, 32)).convert("HSV"), np.float32) / 255
    hist, _ = np.histogram(hsv[..., 0], bins=24, range=(0, 1), weights=hsv[..., 1] ** 2 * hsv[..., 2])
    return hist / max(float(hist.sum()), 1e-6)


def test_classes_are_told_apart_at_low_resolution(tmp_path):
    imagenet_synthetic(tmp_path, classes=6, images_per_class=12, val_per_class=8, seed=1, max_side=48)
    tree = read_imagenet(tmp_path)
    centroids = np.stack([np.mean([_colour_signature(f) for f in c.files], axis=0) for c in tree.categories])
    features = np.stack([_colour_signature(f) for f in tree.val_files])
    index = {c.id: c.index for c in tree.categories}
    truth = np.array([index[w] for w in tree.val_labels])
    predicted = np.argmin(((features[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (predicted == truth).mean() >= 0.9  # chance is 1/6

    # ...while images within a class differ: no two are near-duplicates at that resolution.
    def thumb(path: str) -> np.ndarray:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB").resize((32, 32)), np.float32)

    first = [thumb(f) for f in tree.categories[1].files]
    gaps = [np.abs(a - b).mean() for i, a in enumerate(first) for b in first[i + 1 :]]
    assert min(gaps) > 10


def test_quirks_are_the_odd_files_of_real_imagenet(small):
    tf = pytest.importorskip("tensorflow")
    dest, result = small
    quirks = {kind: Path(path) for kind, path in result["quirks"].items()}
    assert set(quirks) == {"cmyk", "grayscale", "png", "truncated", "empty"}
    first = dest / CLS_LOC / "train" / result["categories"][0]
    for path in quirks.values():
        assert path.parent == first and re.fullmatch(rf"{first.name}_\d+\.JPEG", path.name)

    expected = {"cmyk": ("JPEG", "CMYK"), "grayscale": ("JPEG", "L"), "png": ("PNG", "RGB")}
    for kind, (fmt, mode) in expected.items():
        data = quirks[kind].read_bytes()
        with Image.open(io.BytesIO(data)) as image:
            assert (image.format, image.mode) == (fmt, mode)
            reference = np.asarray(image.convert("RGB"), np.float32)
        decoded = tf.io.decode_image(data, channels=3, expand_animations=False).numpy()
        assert decoded.shape == reference.shape
        # Same colours as PIL sees (a CMYK file decoded with inverted channels would be far off).
        assert np.abs(decoded.astype(np.float32) - reference).mean() < 3, kind

    truncated = quirks["truncated"].read_bytes()
    assert truncated.startswith(b"\xff\xd8") and b"\xff\xda" in truncated and not truncated.endswith(b"\xff\xd9")
    with pytest.raises(OSError, match="truncated"), Image.open(io.BytesIO(truncated)) as image:
        image.load()
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.decode_image(truncated, channels=3)
    assert quirks["empty"].stat().st_size == 0


def test_deterministic_for_a_seed(tmp_path):
    args = {"classes": 2, "images_per_class": 3, "val_per_class": 2, "quirks": True, "max_side": 48}
    a = imagenet_synthetic(tmp_path / "a", seed=7, **args)
    b = imagenet_synthetic(tmp_path / "b", seed=7, **args)
    c = imagenet_synthetic(tmp_path / "c", seed=8, **args)
    files_a, files_b, files_c = _files(tmp_path / "a"), _files(tmp_path / "b"), _files(tmp_path / "c")
    assert len(files_a) == 2 * 3 + 5 + 2 * 2 + 2
    assert files_a == files_b
    assert a["bytes"] == b["bytes"] and a["categories"] == b["categories"]
    assert a["categories"] == c["categories"]
    # Another seed: other pictures (the empty quirk file aside), and other file numbers.
    images_a = {p: h for p, h in files_a.items() if p.endswith(".JPEG")}
    images_c = {p: h for p, h in files_c.items() if p.endswith(".JPEG")}
    assert len(images_a) == len(images_c) == 2 * 3 + 5 + 2 * 2
    assert len(set(images_a.values()) & set(images_c.values())) == 1
    assert set(images_a) != set(images_c)
    # All pictures differ from each other.
    assert len(set(images_a.values())) == len(images_a)


def test_quirks_off_writes_only_regular_images(tmp_path):
    result = imagenet_synthetic(tmp_path, classes=2, images_per_class=2, val_per_class=0, max_side=32)
    assert result["quirks"] == {}
    assert result["val_images"] == 0
    assert not (tmp_path / CLS_LOC / "val").exists()
    assert not (tmp_path / "LOC_val_solution.csv").exists()
    tree = read_imagenet(tmp_path)
    assert tree.num_images == result["images"] == 4
    for path in (f for c in tree.categories for f in c.files):
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB"


def test_more_categories_than_real_names(tmp_path):
    result = imagenet_synthetic(tmp_path, classes=45, images_per_class=1, val_per_class=0, max_side=16)
    wnids = result["categories"]
    assert len(wnids) == len(set(wnids)) == 45
    assert wnids == sorted(wnids) and all(re.fullmatch(r"n\d{8}", w) for w in wnids)
    assert len(read_imagenet(tmp_path).categories) == 45


def test_refuses_to_overwrite_a_tree(small):
    dest, _ = small
    with pytest.raises(LayoutError, match=rf"{re.escape(str(dest))} already holds an ImageNet tree"):
        imagenet_synthetic(dest, classes=1, images_per_class=1)


def test_a_dest_that_cannot_be_written_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(BoardError, match=r"`dest` = .*a-file/tree: it, or a folder above it, is a file, not a "
                                         r"folder: give a folder"):
        imagenet_synthetic(blocker / "tree", classes=1, images_per_class=1)


def test_a_dest_that_is_no_local_folder_is_refused_by_name(tmp_path, monkeypatch):
    """A bucket's URL was written as a local folder named after it (``./gs:/b/x``)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BoardError, match=r"^`dest` = gs://b/x: a synthetic ImageNet is written to a local folder"):
        imagenet_synthetic("gs://b/x", classes=1, images_per_class=1)
    with pytest.raises(BoardError, match=r"^`dest` 'ftp://h/x' uses the unsupported scheme ftp://; use a folder path "
                                         r"or file://$"):
        imagenet_synthetic("ftp://h/x", classes=1, images_per_class=1)
    with pytest.raises(AlexnetError, match=r"^`dest` must be a folder path or a URL \(a string\), not NoneType"):
        imagenet_synthetic(None, classes=1, images_per_class=1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"classes": 0}, "`classes` must be a whole number >= 1, not 0"),
        ({"images_per_class": 2.5}, "`images_per_class` must be a whole number >= 1, not 2.5"),
        ({"val_per_class": -1}, "`val_per_class` must be a whole number >= 0"),
        ({"seed": "1"}, "`seed` must be a whole number"),
        ({"max_side": 4}, "`max_side` must be a whole number >= 8"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(AlexnetError, match=re.escape(message)):
        imagenet_synthetic(tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())  # checked before anything is written


def test_a_layout_is_named_in_any_case_as_every_choice_is():
    """R lowercases every choice before it reaches the core: the core takes the layout so as well."""
    from alexnet.data.options import check_layout

    assert check_layout("Kaggle_Zip ") == "kaggle_zip"
    with pytest.raises(LayoutError, match="did you mean `kaggle`"):
        check_layout("kagle")


@pytest.mark.parametrize(("layout", "made"), [("kaggle", True), ("archives", False)])
def test_a_synthetic_imagenet_cut_short_leaves_nothing_that_refuses_it_run_again(tmp_path, monkeypatch, layout, made):
    """Ctrl-C half way left a partial tree, and the same call run again was refused: "already holds an ImageNet
    tree"."""
    from alexnet.data import layouts, synthetic

    dest = tmp_path / "new" if made else tmp_path / "empty"
    if not made:
        dest.mkdir()
        (dest / "notes.txt").write_text("mine")
    write_kaggle, write_layout = synthetic._write_kaggle, layouts.write_layout

    def interrupted(*args, **kwargs):
        (write_kaggle if layout == "kaggle" else write_layout)(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(synthetic, "_write_kaggle" if layout == "kaggle" else "write_layout", interrupted)
    with pytest.raises(KeyboardInterrupt):
        imagenet_synthetic(dest, classes=2, images_per_class=2, val_per_class=1, max_side=32, layout=layout)
    assert not dest.exists() if made else sorted(p.name for p in dest.iterdir()) == ["notes.txt"]
    monkeypatch.undo()
    assert imagenet_synthetic(dest, classes=2, images_per_class=2, val_per_class=1, max_side=32,
                              layout=layout)["images"] == 4
