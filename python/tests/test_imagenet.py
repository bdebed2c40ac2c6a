"""read_imagenet: Kaggle's layout and plain <wnid>/ folders, and a clear error for each broken tree."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest
from helpers_imagenet import NAMES, touch, write_category, write_folders, write_kaggle

from alexnet.data.imagenet import ImageNetTree, read_imagenet
from alexnet.errors import LayoutError

# Insertion order deliberately not sorted: the reader must sort ids and files itself.
TRAIN = {
    "n01484850": ["n01484850_9.JPEG", "n01484850_10.JPEG"],
    "n01440764": ["n01440764_10026.JPEG", "n01440764_1003.JPEG", "n01440764_77.jpeg"],
    "n01443537": ["n01443537_2.PNG", "n01443537_1.jpg"],
}
VAL = {
    "ILSVRC2012_val_00000003": "n01443537",
    "ILSVRC2012_val_00000001": "n01484850",
    "ILSVRC2012_val_00000002": "n01440764",
}


def _junk(folder: Path) -> None:
    """Entries a category folder may hold that are not training images."""
    touch(folder / ".DS_Store")
    touch(folder / "._n01440764_1.JPEG")
    touch(folder / "notes.txt")
    touch(folder / "thumbnails" / "n01440764_5.JPEG")


def _check_train(tree: ImageNetTree, root: str, names: dict[str, str]) -> None:
    assert [c.id for c in tree.categories] == sorted(TRAIN)
    assert [c.index for c in tree.categories] == [0, 1, 2]
    assert [c.name for c in tree.categories] == [names.get(w, "") for w in sorted(TRAIN)]
    for category in tree.categories:
        assert category.files == tuple(sorted(os.path.join(root, category.id, f) for f in TRAIN[category.id]))
        assert all(os.path.isabs(f) and os.path.isfile(f) for f in category.files)
    assert tree.num_images == sum(len(v) for v in TRAIN.values())


@pytest.fixture()
def kaggle(tmp_path):
    root = write_kaggle(tmp_path / "imagenet", TRAIN, VAL)
    _junk(root / "ILSVRC" / "Data" / "CLS-LOC" / "train" / "n01440764")
    return root


@pytest.mark.parametrize("sub", ["", "ILSVRC", "ILSVRC/Data", "ILSVRC/Data/CLS-LOC"])
def test_kaggle_layout_from_root_or_any_folder_inside(kaggle, sub):
    tree = read_imagenet(kaggle / sub if sub else str(kaggle))  # a Path or a str
    cls_loc = str(kaggle / "ILSVRC" / "Data" / "CLS-LOC")
    assert tree.layout == "kaggle"
    assert tree.root == str(kaggle / sub)
    _check_train(tree, os.path.join(cls_loc, "train"), NAMES)
    ids = sorted(VAL)
    assert tree.val_files == tuple(os.path.join(cls_loc, "val", f"{i}.JPEG") for i in ids)
    assert tree.val_labels == tuple(VAL[i] for i in ids)


def test_categories_are_sorted_by_id_and_indexed_in_that_order(kaggle):
    tree = read_imagenet(kaggle)
    assert [c.id for c in tree.categories] == sorted(c.id for c in tree.categories)
    assert [c.index for c in tree.categories] == list(range(len(tree.categories)))
    goldfish = next(c for c in tree.categories if c.id == "n01443537")
    assert goldfish.index == 1 and goldfish.name.startswith("goldfish")


def test_kaggle_without_val_set_or_names(tmp_path):
    root = write_kaggle(tmp_path, TRAIN, val=None, names=None)
    tree = read_imagenet(root)
    assert tree.layout == "kaggle"
    assert tree.val_files == () and tree.val_labels == ()
    _check_train(tree, str(root / "ILSVRC" / "Data" / "CLS-LOC" / "train"), {})


def test_unlabelled_val_image_is_left_out_with_a_warning(kaggle, caplog):
    touch(kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "val" / "ILSVRC2012_val_00000009.JPEG")
    with caplog.at_level(logging.WARNING, logger="alexnet.data.imagenet"):
        tree = read_imagenet(kaggle)
    assert len(tree.val_files) == 3
    assert not any("00000009" in f for f in tree.val_files)
    assert any("1 images in" in r.getMessage() for r in caplog.records)


def test_summary_is_logged(kaggle, caplog):
    with caplog.at_level(logging.INFO, logger="alexnet.data.imagenet"):
        read_imagenet(kaggle)
    lines = [r.getMessage() for r in caplog.records if r.name == "alexnet.data.imagenet"]
    assert len(lines) == 1
    assert "3 categories, 7 training images, 3 validation images" in lines[0]


@pytest.mark.parametrize(
    ("name_file", "line"),
    [
        ("LOC_synset_mapping.txt", "{w} {n}\n"),
        ("synset_words.txt", "{w} {n}\n"),
        ("words.txt", "{w}\t{n}\n"),  # fall11's words.txt: tab-separated, all of WordNet
    ],
)
def test_plain_folders_with_names(tmp_path, name_file, line):
    root = write_folders(tmp_path, TRAIN)
    _junk(root / "n01440764")
    extra = {"n00001740": "entity"}
    (root / name_file).write_text("".join(line.format(w=w, n=n) for w, n in {**extra, **NAMES}.items()))
    tree = read_imagenet(root)
    assert tree.layout == "folders"
    assert tree.val_files == () and tree.val_labels == ()
    _check_train(tree, str(root), NAMES)


def test_plain_folders_skip_hidden_folders_and_have_empty_names(tmp_path):
    root = write_folders(tmp_path, TRAIN)
    write_category(root / ".cache", ["x.JPEG"])
    write_category(root / "__MACOSX", ["x.JPEG"])
    tree = read_imagenet(root)
    _check_train(tree, str(root), {})


# --- errors: each names the path and says what is wrong --------------------------------------------------


def test_missing_source(tmp_path):
    with pytest.raises(LayoutError, match=re.escape(str(tmp_path / "nope")) + " does not exist"):
        read_imagenet(tmp_path / "nope")
    touch(tmp_path / "file.JPEG")
    with pytest.raises(LayoutError, match="is not a folder"):
        read_imagenet(tmp_path / "file.JPEG")


def test_tree_without_categories(tmp_path):
    touch(tmp_path / "README.txt")
    with pytest.raises(LayoutError, match=rf"No category folders in {re.escape(str(tmp_path))}\."):
        read_imagenet(tmp_path)


def test_kaggle_with_empty_train_folder(tmp_path):
    (tmp_path / "ILSVRC" / "Data" / "CLS-LOC" / "train").mkdir(parents=True)
    train = re.escape(str(tmp_path / "ILSVRC" / "Data" / "CLS-LOC" / "train"))
    with pytest.raises(LayoutError, match=rf"No category folders in {train}\. Expected Kaggle"):
        read_imagenet(tmp_path)


def test_kaggle_without_train_folder(tmp_path):
    touch(tmp_path / "ILSVRC" / "Data" / "CLS-LOC" / "val" / "ILSVRC2012_val_00000001.JPEG")
    with pytest.raises(LayoutError, match=r"no ILSVRC/Data/CLS-LOC/train folder"):
        read_imagenet(tmp_path)


@pytest.mark.parametrize("layout", ["kaggle", "folders"])
def test_category_without_images(tmp_path, layout):
    train = {**TRAIN, "n01491361": []}
    if layout == "kaggle":
        root = write_kaggle(tmp_path, train)
        empty = root / "ILSVRC" / "Data" / "CLS-LOC" / "train" / "n01491361"
    else:
        root = write_folders(tmp_path, train)
        empty = root / "n01491361"
    touch(empty / "readme.txt")  # not an image: the folder still has none
    with pytest.raises(LayoutError, match=rf"Category folder {re.escape(str(empty))} holds no images"):
        read_imagenet(root)


def test_val_folder_without_solution_file(tmp_path):
    root = write_kaggle(tmp_path, TRAIN, VAL, solution=False)
    val = re.escape(str(root / "ILSVRC" / "Data" / "CLS-LOC" / "val"))
    with pytest.raises(LayoutError, match=rf"Validation folder {val} holds 3 images but LOC_val_solution\.csv"):
        read_imagenet(root)


def test_val_label_that_is_not_a_training_category(tmp_path):
    root = write_kaggle(tmp_path, TRAIN, {**VAL, "ILSVRC2012_val_00000004": "n09999999"})
    with pytest.raises(LayoutError, match=r"ILSVRC2012_val_00000004 is labelled n09999999 .* not a training"):
        read_imagenet(root)


def test_val_image_listed_but_missing(tmp_path):
    root = write_kaggle(tmp_path, TRAIN, VAL)
    os.remove(root / "ILSVRC" / "Data" / "CLS-LOC" / "val" / "ILSVRC2012_val_00000002.JPEG")
    with pytest.raises(LayoutError, match=r"1 validation images listed .* missing .* ILSVRC2012_val_00000002"):
        read_imagenet(root)


def test_solution_file_with_wrong_header(tmp_path):
    root = write_kaggle(tmp_path, TRAIN, VAL)
    (root / "LOC_val_solution.csv").write_text("image,label\nILSVRC2012_val_00000001,n01484850\n")
    with pytest.raises(LayoutError, match=r"LOC_val_solution\.csv has header image,label; expected ImageId"):
        read_imagenet(root)
