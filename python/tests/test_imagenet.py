"""read_imagenet: Kaggle's layout, train/ and val/ folders, plain <wnid>/ folders, and a clear error for each broken
tree; what a category folder holds that is not read is said."""

from __future__ import annotations

import errno
import logging
import os
import re
from pathlib import Path

import pytest
from helpers_imagenet import NAMES, touch, write_category, write_folders, write_imagefolder, write_kaggle

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


def test_kaggle_without_val_set_or_names(tmp_path, caplog):
    """Without LOC_synset_mapping.txt, ILSVRC2012's ids are named from the list the package ships, without a word."""
    root = write_kaggle(tmp_path, TRAIN, val=None, names=None)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    assert tree.layout == "kaggle"
    assert tree.val_files == () and tree.val_labels == ()
    _check_train(tree, str(root / "ILSVRC" / "Data" / "CLS-LOC" / "train"), NAMES)
    assert not caplog.records


@pytest.mark.parametrize("layout", ["kaggle", "imagefolder"])
def test_names_missing_are_said_only_for_ids_the_shipped_list_lacks(tmp_path, layout, caplog):
    train = {**TRAIN, "n09999999": ["a.JPEG"], "n09999998": ["b.JPEG"]}
    root = (write_kaggle(tmp_path, train, names=None) if layout == "kaggle"
            else write_imagefolder(tmp_path, train))
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    assert {c.id: c.name for c in tree.categories} == {**NAMES, "n09999998": "", "n09999999": ""}
    (said,) = [r.getMessage() for r in caplog.records]
    assert "LOC_synset_mapping.txt not found" in said
    assert "the names of 2 categories (n09999998, n09999999) are left empty" in said
    assert "none of the 1000 ILSVRC2012 classes" in said and "put LOC_synset_mapping.txt beside " in said
    # a mapping file names them, and those it leaves out still take the shipped names
    mapping = {"n09999999": "made-up nine", "n09999998": "made-up eight"}
    (Path(tree.root) / "LOC_synset_mapping.txt").write_text("".join(f"{w} {n}\n" for w, n in mapping.items()))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    assert {c.id: c.name for c in tree.categories} == {**NAMES, **mapping} and not caplog.records


def test_an_unlabelled_val_image_is_an_error_naming_it(kaggle):
    """A validation image the solution file does not label: the two are not of one release, and nothing is read
    half-labelled."""
    touch(kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "val" / "ILSVRC2012_val_00000009.JPEG")
    with pytest.raises(LayoutError, match=r"^1 validation images in .*val are not in .*LOC_val_solution.csv, e\.g\. "
                                          r"ILSVRC2012_val_00000009: they are not of the same release"):
        read_imagenet(kaggle)


def test_summary_is_logged(kaggle, caplog):
    with caplog.at_level(logging.INFO, logger="alexnet.data.imagenet"):
        read_imagenet(kaggle)
    lines = [r.getMessage() for r in caplog.records if r.name == "alexnet.data.imagenet" and r.levelno == logging.INFO]
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


def test_plain_folders_skip_hidden_folders_and_take_the_shipped_names(tmp_path, caplog):
    root = write_folders(tmp_path, {**TRAIN, "roses": ["r.jpg"]})
    write_category(root / ".cache", ["x.JPEG"])
    write_category(root / "__MACOSX", ["x.JPEG"])
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    assert {c.id: c.name for c in tree.categories} == {**NAMES, "roses": ""}
    assert not caplog.records  # photos of one's own have no names to miss


# --- torchvision's ImageFolder tree: train/<wnid>/ and val/<wnid>/ ------------------------------------------------

VAL_FOLDERS = {"n01440764": ["ILSVRC2012_val_00000002.JPEG"], "n01443537": ["ILSVRC2012_val_00000003.JPEG"],
               "n01484850": ["ILSVRC2012_val_00000001.JPEG", "ILSVRC2012_val_00000004.JPEG"]}


def test_imagefolder_layout_labels_validation_images_by_their_folder(tmp_path, caplog):
    root = write_imagefolder(tmp_path / "imagenet", TRAIN, VAL_FOLDERS)
    touch(root / "val" / "valprep.sh", b"mkdir -p n01440764\n")  # the script kept beside the images it moved
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    assert tree.layout == "imagefolder"
    _check_train(tree, str(root / "train"), NAMES)  # no name file: the shipped names
    expected = sorted((str(root / "val" / w / n), w) for w, names in VAL_FOLDERS.items() for n in names)
    assert list(zip(tree.val_files, tree.val_labels, strict=True)) == expected
    assert not caplog.records


def test_imagefolder_layout_without_val(tmp_path):
    tree = read_imagenet(write_imagefolder(tmp_path, TRAIN))
    assert tree.layout == "imagefolder" and tree.val_files == ()
    _check_train(tree, str(tmp_path / "train"), NAMES)


def test_imagefolder_val_folder_that_is_no_training_category(tmp_path):
    root = write_imagefolder(tmp_path, TRAIN, {**VAL_FOLDERS, "n09999999": ["x.JPEG"], "cat": ["y.JPEG"]})
    with pytest.raises(LayoutError, match=r"Validation folder .*val holds 2 folders not named as a training category "
                                          r"\(cat/, n09999999/\): .* no train/cat/\. Rename the folder"):
        read_imagenet(root)


def test_imagefolder_val_with_unlabelled_images(tmp_path):
    root = write_imagefolder(tmp_path, TRAIN)
    for i in (1, 2):
        touch(root / "val" / f"ILSVRC2012_val_0000000{i}.JPEG")
    with pytest.raises(LayoutError, match=r"holds 2 images directly \(ILSVRC2012_val_00000001.JPEG, .*\), which "
                                          r"nothing labels: .* val/<wnid>/\. Move each into the folder of its "
                                          r"category \(PyTorch's valprep\.sh .*LOC_val_solution\.csv"):
        read_imagenet(root)


def test_kaggles_cls_loc_folder_under_another_name_is_still_kaggles(tmp_path):
    """train/ beside a val/ of images with LOC_val_solution.csv near: Kaggle's CLS-LOC folder, moved and renamed."""
    root = write_kaggle(tmp_path / "kaggle", TRAIN, VAL)
    moved = tmp_path / "kaggle" / "imagenet"
    (root / "ILSVRC" / "Data" / "CLS-LOC").rename(moved)
    tree = read_imagenet(moved)
    assert tree.layout == "kaggle" and tree.val_labels == tuple(VAL[i] for i in sorted(VAL))


# --- what a category folder holds that is not read ---------------------------------------------------------------


@pytest.mark.parametrize("layout", ["folders", "kaggle", "imagefolder"])
def test_what_category_folders_hold_that_is_not_read_is_said(tmp_path, layout, caplog):
    root = {"folders": write_folders, "kaggle": write_kaggle, "imagefolder": write_imagefolder}[layout](
        tmp_path / "src", TRAIN)
    train = {"folders": root, "kaggle": root / "ILSVRC" / "Data" / "CLS-LOC" / "train",
             "imagefolder": root / "train"}[layout]
    for wnid, name in [("n01440764", "a.webp"), ("n01440764", "b.HEIC"), ("n01443537", "c.bmp"),
                       ("n01443537", "d.gif"), ("n01484850", "e.tiff")]:
        touch(train / wnid / name)
    touch(train / "n01440764" / "notes.txt")
    touch(train / "n01440764" / "2019" / "f.jpg")
    touch(train / "n01484850" / "2020" / "g.jpg")
    for quiet in (".DS_Store", "._n01440764_1.JPEG", ".thumbs/h.jpg", "LOC_synset_mapping.txt", "words.txt"):
        touch(train / "n01440764" / quiet)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    _check_train(tree, str(train), NAMES)  # the images read are those directly in each folder, as before
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3, said
    formats, others, folders = said
    assert formats.startswith(f"5 files in 3 category folders of {train} were left out: images in a format the "
                              "upload does not read, only JPEG and PNG (n01440764/a.webp, "
                              "n01440764/b.HEIC, n01443537/c.bmp, ... (2 more)): convert them to JPEG"), formats
    assert others.startswith(f"1 file in 1 category folder of {train} was left out: not an image file "
                             "(n01440764/notes.txt)"), others
    assert folders.startswith(f"2 sub-folders in 2 category folders of {train} were not read (n01440764/2019/, "
                              "n01484850/2020/)") and "move their images up into the category folder" in folders


def test_a_category_folder_of_sub_folders_says_what_it_holds(tmp_path):
    root = write_folders(tmp_path, TRAIN)
    touch(root / "roses" / "2019" / "a.jpg")
    touch(root / "roses" / "2020" / "b.jpg")
    touch(root / "roses" / "c.webp")
    touch(root / "roses" / ".DS_Store")
    roses = re.escape(str(root / "roses"))
    with pytest.raises(LayoutError, match=rf"^Category folder {roses} holds no images \(.JPEG, .jpg, .jpeg or .png\): "
                                          r"it holds 2 sub-folders \(2019/, 2020/\), whose files are not read: move "
                                          r"the images up into the folder itself; 1 image in a format not read "
                                          r"\(c\.webp\): convert them to JPEG\. Add its images or remove the "
                                          r"folder\.$"):
        read_imagenet(root)


def test_a_link_to_nothing_is_an_image_that_cannot_be_read_or_a_file_left_out(tmp_path, caplog):
    """A symbolic link that leads nowhere is what its name says: named as an image, an image, which the upload lists
    among the bad images with why (as any image it cannot read); named otherwise, a file left out with a warning."""
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    root = write_folders(tmp_path / "src", TRAIN)
    for name in ("gone.JPEG", "gone.txt"):
        (root / "n01440764" / name).symlink_to(tmp_path / "nowhere" / name)
    (root / "n01443537" / "loop.jpg").symlink_to("loop.jpg")  # a link to itself: leads nowhere either
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        tree = read_imagenet(root)
    files = {c.id: [os.path.basename(f) for f in c.files] for c in tree.categories}
    assert files["n01440764"] == sorted([*TRAIN["n01440764"], "gone.JPEG"])
    assert files["n01443537"] == sorted([*TRAIN["n01443537"], "loop.jpg"])
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"1 file in 1 category folder of {root} was left out: not an image file "
                           "(n01440764/gone.txt)"), said

    source = imagenet_synthetic(tmp_path / "synthetic", classes=2, images_per_class=3, seed=1, max_side=40,
                                layout="folders")["path"]
    wnid = sorted(p.name for p in Path(source).iterdir() if p.is_dir())[0]
    (Path(source) / wnid / "gone.JPEG").symlink_to(tmp_path / "nowhere" / "gone.JPEG")
    (Path(source) / wnid / "loop.jpg").symlink_to("loop.jpg")
    report = imagenet_upload(source, tmp_path / "board")
    gone, loop = sorted(report["bad_images"], key=lambda b: b["file"])
    assert (gone["category"], gone["file"], loop["category"], loop["file"]) == (wnid, "gone.JPEG", wnid, "loop.jpg")
    for bad, number in ((gone, errno.ENOENT), (loop, errno.ELOOP)):
        assert bad["reason"].startswith(f"cannot be read ([Errno {number}] {os.strerror(number)}"), bad


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
    with pytest.raises(LayoutError, match=rf"Category folder {re.escape(str(empty))} holds no images .*: it holds 1 "
                                          r"file that is not an image \(readme\.txt\)\. Add its images"):
        read_imagenet(root)
    os.remove(empty / "readme.txt")
    with pytest.raises(LayoutError, match=rf"Category folder {re.escape(str(empty))} holds no images \(.JPEG, .jpg, "
                                          r"\.jpeg or \.png\)\. Add its images"):
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


def test_a_category_named_train_is_a_category_of_a_folder_of_category_folders(tmp_path):
    """A `train/` of images (a category so named, as in PASCAL VOC's classes) is no torchvision tree, whose train/
    holds category folders."""
    for category in ("boat", "car", "train"):
        write_category(tmp_path / "photos" / category, [f"{category}_{k}.jpg" for k in range(2)])
    tree = read_imagenet(tmp_path / "photos")
    assert tree.layout == "folders" and [c.id for c in tree.categories] == ["boat", "car", "train"]
    from alexnet.data.sources import open_source

    assert open_source(tmp_path / "photos").layout == "folders"
