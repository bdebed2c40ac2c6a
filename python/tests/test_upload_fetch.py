"""Upload to and fetch from every board kind, for real: folder, gs:// (emulator), s3:// (moto), https://.

The synthetic tree is tiny (5 categories of 6 images at most 48 pixels, plus the quirk files) so that the
whole module runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import pytest
from helpers_cli import help_as_said
from helpers_imagenet import killed_upload
from helpers_mounts import fill, read_only_view, small_disk
from PIL import Image
from servers import free_port, http_server, random_bytes

from alexnet.checks import MIN_IMAGE_SIZE
from alexnet.data.fetch import imagenet_categories, imagenet_partition, imagenet_validation
from alexnet.data.imagenet import read_imagenet
from alexnet.data.images import check_image
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.errors import AlexnetError, BoardError, IntegrityError, LayoutError
from alexnet.storage import cache as cache_module
from alexnet.storage import transfer as transfer_module
from alexnet.storage.board import open_board
from alexnet.storage.transfer import extract_zip

BUCKET = "alexnet-test"
CLASSES, PER_CLASS, VAL_PER_CLASS = 5, 6, 2


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The synthetic ImageNet with quirks, and what a correct board must hold for it."""
    root = tmp_path_factory.mktemp("imagenet")
    info = imagenet_synthetic(root / "src", classes=CLASSES, images_per_class=PER_CLASS,
                              val_per_class=VAL_PER_CLASS, seed=1, quirks=True, max_side=48)
    parsed = read_imagenet(info["path"])
    bad = {os.path.basename(info["quirks"][k]) for k in ("truncated", "empty")}
    good = {c.id: {os.path.basename(f): Path(f).read_bytes() for f in c.files
                   if os.path.basename(f) not in bad} for c in parsed.categories}
    val = {}
    for path, label in zip(parsed.val_files, parsed.val_labels, strict=True):
        val.setdefault(label, {})[os.path.basename(path)] = Path(path).read_bytes()
    return {"path": info["path"], "info": info, "good": good, "val": val, "bad": bad,
            "index": {c.id: k for k, c in enumerate(sorted(parsed.categories, key=lambda c: c.id))}}


@contextlib.contextmanager
def board_pair(kind: str, tmp_path: Path):
    """(board to upload to, board to fetch from) of the given kind."""
    if kind == "folder":
        yield str(tmp_path / "board"), str(tmp_path / "board")
    elif kind == "https":
        (tmp_path / "www").mkdir()
        with http_server(tmp_path / "www") as url:
            yield str(tmp_path / "www" / "board"), f"{url}/board"
    else:
        prefix = f"{kind}://{BUCKET}/{tmp_path.name}/board"
        yield prefix, prefix


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_partition(data: dict, tree: dict, seen: dict) -> None:
    """Every returned image is byte-identical to its source; labels are the global indices."""
    assert len(data["image"]) == len(data["category"]) == len(data["label"])
    assert data["num_classes"] == CLASSES
    assert sorted(set(data["category"])) == data["categories"]
    for path, wnid, label in zip(data["image"], data["category"], data["label"], strict=True):
        assert os.path.isabs(path) and path.startswith(data["cache_dir"])
        assert label == tree["index"][wnid]
        name = os.path.basename(path)
        assert name not in tree["bad"], f"bad image {name} came back"
        assert Path(path).read_bytes() == tree["good"][wnid][name]
        seen.setdefault(wnid, set()).add(name)
    for path, wnid, label in zip(data["val_image"], data["val_category"], data["val_label"], strict=True):
        assert wnid in data["categories"] and label == tree["index"][wnid]
        assert Path(path).read_bytes() == tree["val"][wnid][os.path.basename(path)]
    assert len(data["val_image"]) == VAL_PER_CLASS * len(data["categories"])


# -- the round trip on every board ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "gs", "s3", "https"])
def test_round_trip(kind, tree, cloud_env, tmp_path):
    with board_pair(kind, tmp_path) as (up, down):
        report = imagenet_upload(tree["path"], up, workers=3)
        assert report["categories"] == CLASSES and sorted(report["uploaded"]) == sorted(tree["good"])
        assert report["images"] == sum(len(v) for v in tree["good"].values())
        assert report["val_images"] == CLASSES * VAL_PER_CLASS
        assert report["uploaded_bytes"] == report["bytes"] > 0
        assert {b["file"] for b in report["bad_images"]} == tree["bad"]
        assert {b["reason"].split(" ")[0] for b in report["bad_images"]} == {"empty", "truncated"}

        rows = imagenet_categories(down)
        assert [r["id"] for r in rows] == sorted(tree["good"]) and [r["index"] for r in rows] == list(range(CLASSES))
        assert {r["id"]: r["images"] for r in rows} == {w: len(v) for w, v in tree["good"].items()}
        on_board = open_board(down).pins.pin_read("bad_images")
        assert set(on_board["file"]) == tree["bad"]

        for total in (2, 3):
            seen: dict[str, set[str]] = {}
            owners: list[str] = []
            for partition in range(total):
                data = imagenet_partition(partition, total, down, cache_dir=tmp_path / f"cache{total}", workers=3)
                assert data["downloaded_bytes"] > 0
                check_partition(data, tree, seen)
                owners += data["categories"]
            assert sorted(owners) == sorted(tree["good"]), "categories missing or fetched twice"
            assert {w: names for w, names in seen.items()} == {w: set(v) for w, v in tree["good"].items()}

        again = imagenet_partition(1, 3, down, cache_dir=tmp_path / "cache3", workers=3)
        assert again["downloaded_bytes"] == 0

        second = imagenet_upload(tree["path"], up, workers=3)
        assert second["uploaded"] == [] and sorted(second["skipped"]) == sorted(tree["good"])
        assert second["uploaded_bytes"] == 0
        assert {b["file"] for b in second["bad_images"]} == tree["bad"]
        assert imagenet_categories(down) == rows


# -- upload behaviour (local folder board: the same code paths, fastest) -------------------------------------


def test_changed_category_is_the_only_one_uploaded_again(tree, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(tree["path"], src)
    board = tmp_path / "board"
    imagenet_upload(src, board, workers=2)
    before = {r["id"]: r for r in imagenet_categories(board)}
    wnid = sorted(tree["good"])[2]
    folder = src / "ILSVRC" / "Data" / "CLS-LOC" / "train" / wnid
    extra = folder / f"{wnid}_99999.JPEG"
    Image.new("RGB", (20, 16), (200, 10, 10)).save(extra, format="JPEG")
    report = imagenet_upload(src, board, workers=2)
    assert report["uploaded"] == [wnid]
    assert sorted(report["skipped"]) == sorted(w for w in tree["good"] if w != wnid)
    after = {r["id"]: r for r in imagenet_categories(board)}
    assert after[wnid]["images"] == before[wnid]["images"] + 1 and after[wnid]["sha256"] != before[wnid]["sha256"]
    assert all(after[w] == before[w] for w in before if w != wnid)
    data = imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
    fetched = [p for p in data["image"] if os.path.basename(p) == extra.name]
    assert len(fetched) == 1 and Path(fetched[0]).read_bytes() == extra.read_bytes()


def test_keep_versions_deletes_the_copies_a_changed_upload_replaced(tree, tmp_path):
    board = tmp_path / "board"
    imagenet_upload(tree["path"], board, workers=2)
    # the same tree re-encoded: the categories whose files change (the quirk category's CMYK, grayscale and PNG
    # files become RGB JPEGs; the others are smaller than `resize` already) and the tables get a new version; by
    # default both stay
    imagenet_upload(tree["path"], board, workers=2, resize=64)
    pins_dir = [p for p in board.iterdir() if p.is_dir() and p.name.startswith("n")]
    changed = [p for p in pins_dir if len([v for v in p.iterdir() if v.is_dir()]) == 2]
    assert changed and all(len([v for v in p.iterdir() if v.is_dir()]) in (1, 2) for p in pins_dir)
    before = {r["id"]: r for r in imagenet_categories(board)}

    report = imagenet_upload(tree["path"], board, workers=2, resize=64, keep_versions=1)
    assert report["uploaded"] == [] and report["pruned_versions"] >= len(changed)
    assert all(len([v for v in p.iterdir() if v.is_dir()]) == 1 for p in pins_dir)
    categories_pin = [v for v in (board / "categories").iterdir() if v.is_dir()]
    assert len(categories_pin) == 1
    # what is left is what the categories table names, and it still fetches and verifies
    assert {r["id"]: r for r in imagenet_categories(board)} == before
    data = imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
    assert sorted(data["categories"]) == sorted(tree["good"])
    with pytest.raises(AlexnetError, match="keep_versions"):
        imagenet_upload(tree["path"], board, keep_versions=0)


def manifest_and_board(board: str) -> tuple[dict, dict]:
    """The manifest of ``board`` (pin -> its versions' paths), and what pins finds there, in the manifest's words."""
    import yaml

    opened = open_board(board)
    listed = yaml.safe_load(opened.fs.cat_file(opened.path("_pins.yaml")))
    found = {name: [f"{name}/{v.version}/" for v in opened.pins.pin_versions(name, as_df=False)]
             for name in opened.pin_names()}
    return listed, found


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_the_manifest_lists_the_versions_an_upload_keeps(kind, tree, cloud_env, tmp_path, monkeypatch):
    """After every upload the manifest lists each pin's versions on the board, oldest first, as R pins lists them
    (it listed only the versions the upload had written): two under keep_versions = 2, one under 1, none deleted.
    The manifest written before the old versions are deleted leaves them out, and one another writer wrote while they
    were deleted (listing them still there) is written again after."""
    import yaml

    from alexnet.storage import prune as prune_module

    deleting = prune_module._delete_version
    seen: list[str] = []

    def delete(opened, name, version):
        if not seen:
            seen.append(opened.fs.cat_file(opened.path("_pins.yaml")).decode())
            open_board(board, write=True).write_manifest({})  # another writer, a model pinned
            assert f"{name}/{version}/" in opened.fs.cat_file(opened.path("_pins.yaml")).decode()
        deleting(opened, name, version)

    monkeypatch.setattr(prune_module, "_delete_version", delete)
    with board_pair(kind, tmp_path) as (board, _):
        imagenet_upload(tree["path"], board, workers=2)
        # re-encoded: the quirk category's files change, and so do the tables (see the test above)
        imagenet_upload(tree["path"], board, workers=2, resize=64, keep_versions=2)
        listed, found = manifest_and_board(board)
        assert listed == found and len(listed["categories"]) == 2
        changed = [name for name, versions in listed.items() if name.startswith("n") and len(versions) == 2]
        assert changed, "a category has two versions"
        report = imagenet_upload(tree["path"], board, workers=2, resize=64, keep_versions=1)
        assert report["pruned_versions"] >= len(changed) + 1
        older = {versions[0] for versions in listed.values() if len(versions) == 2}  # those deleted
        while_deleting = yaml.safe_load(seen[0])
        assert set(while_deleting) == set(listed) and not older & {p for ps in while_deleting.values() for p in ps}
        listed, found = manifest_and_board(board)
        assert listed == found and all(len(versions) == 1 for versions in listed.values())
        newest = {row["id"]: row["version"] for row in imagenet_categories(board)}
        assert all(listed[name] == [f"{name}/{version}/"] for name, version in newest.items())


def test_a_second_source_on_the_board_of_a_first_is_warned_of(tree, tmp_path, caplog):
    """A source that gives other categories than the board's categories pin lists replaces that list: said, with
    the categories no longer listed; a source that gives them all again (or a rerun) says nothing of it."""
    board = tmp_path / "board"
    imagenet_upload(tree["path"], board, workers=2)
    other = imagenet_synthetic(tmp_path / "other", classes=2, images_per_class=3, val_per_class=0, seed=7,
                               layout="folders", max_side=48)
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        imagenet_upload(tree["path"], board, workers=2)
    assert "does not give" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        imagenet_upload(other["path"], board, workers=2)
    listed = sorted(r["id"] for r in imagenet_categories(board))
    unlisted = sorted(set(tree["good"]) - set(listed))
    assert unlisted and f"listed {len(unlisted)} categories that {other['path']} does not give ({unlisted[0]}, " \
        in caplog.text
    assert "no longer see them (their zips stay on the board)" in caplog.text


def test_touched_files_with_same_content_are_not_uploaded_again(tree, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(tree["path"], src)
    board = tmp_path / "board"
    imagenet_upload(src, board, workers=2)
    for path in (src / "ILSVRC").rglob("*.JPEG"):
        os.utime(path, (time.time() + 100, time.time() + 100))
    report = imagenet_upload(src, board, workers=2)
    assert report["uploaded"] == [] and report["uploaded_bytes"] == 0


def test_killed_upload_completes_when_run_again(tree, tmp_path, monkeypatch):
    board = tmp_path / "board"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    killed_upload(tree["path"], board, {**os.environ, "TMPDIR": str(scratch)})
    done = sorted(p.parent.parent.name for p in board.glob("n*/*/*.zip"))
    assert 2 <= len(done) < CLASSES
    assert not (board / "categories").exists(), "the categories pin must only be written when all is uploaded"
    with pytest.raises(BoardError, match="has no categories pin"):
        imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
    left = list(scratch.glob("alexnet-upload-*"))
    assert len(left) == 1, "the killed upload leaves its scratch folder behind"

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    report = imagenet_upload(tree["path"], board, workers=2)
    assert not left[0].exists(), "the next upload removes the scratch folder of the killed one"
    assert list(scratch.glob("alexnet-upload-*")) == []
    assert set(done) <= set(report["skipped"])
    assert sorted(report["uploaded"] + report["skipped"]) == sorted(tree["good"])
    seen: dict[str, set[str]] = {}
    check_partition(imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache"), tree, seen)
    assert seen == {w: set(v) for w, v in tree["good"].items()}


def copies_of_zips(monkeypatch) -> list[tuple[str, str]]:
    """The copies of a ``.zip`` file made from now on (``shutil.copyfile``, which pins and fsspec's local file
    system copy with; a copy of a file onto itself, which pins asks for and ``copyfile`` refuses, is not one)."""
    made: list[tuple[str, str]] = []
    original = shutil.copyfile

    def copyfile(src, dst, *args, **kwargs):
        result = original(src, dst, *args, **kwargs)
        if str(src).endswith(".zip"):
            made.append((str(src), str(dst)))
        return result

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    return made


def test_a_folder_board_takes_each_zip_as_it_was_written(tree, tmp_path, monkeypatch):
    """On a folder board on the scratch folder's file system, each zip is renamed into its version folder: not copied
    into a temporary folder for pins and then again onto the board (as pins' pin_upload() does). The version folders
    have the mode folders made under the umask have, as pins' own."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    copies = copies_of_zips(monkeypatch)
    umask = os.umask(0o027)
    try:
        report = imagenet_upload(tree["path"], tmp_path / "board", workers=2)
    finally:
        os.umask(umask)
    assert sorted(report["uploaded"]) == sorted(tree["good"])
    assert copies == []
    versions = [*(tmp_path / "board").glob("n*/*/"), *(tmp_path / "board").glob("val-n*/*/")]
    assert len(versions) == 2 * CLASSES
    assert {v.stat().st_mode & 0o777 for v in versions} == {0o750}
    assert [p.name for p in scratch.iterdir()] == [], "the scratch folder and the version folders are gone"
    seen: dict[str, set[str]] = {}
    check_partition(imagenet_partition(0, 1, tmp_path / "board", cache_dir=tmp_path / "cache"), tree, seen)
    assert seen == {w: set(v) for w, v in tree["good"].items()}


def test_a_folder_board_on_another_file_system_gets_a_copy_of_each_zip(tree, tmp_path, monkeypatch):
    """When the version folder cannot be renamed onto the board (another file system: EXDEV), it is copied there,
    once, and renamed into place."""
    import errno

    from alexnet.storage import publish

    class OtherFileSystem:
        @staticmethod
        def rename(src, dst):
            if os.path.basename(str(src)).startswith(".pin-") and Path(dst).parent.parent == tmp_path / "board":
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            os.rename(src, dst)

        def __getattr__(self, name):
            return getattr(os, name)

    monkeypatch.setattr(publish, "os", OtherFileSystem())
    copies = copies_of_zips(monkeypatch)
    report = imagenet_upload(tree["path"], tmp_path / "board", workers=2)
    assert sorted(report["uploaded"]) == sorted(tree["good"])
    assert len(copies) == 2 * CLASSES
    # each into a hidden folder of the board, renamed into place once whole
    assert all(Path(dst).parent.parent == tmp_path / "board" and Path(dst).parent.name.startswith(".alexnet-version-")
               for _, dst in copies)
    assert not list((tmp_path / "board").glob(".alexnet-version-*"))
    assert imagenet_upload(tree["path"], tmp_path / "board", workers=2)["uploaded"] == []
    seen: dict[str, set[str]] = {}
    check_partition(imagenet_partition(0, 1, tmp_path / "board", cache_dir=tmp_path / "cache"), tree, seen)
    assert seen == {w: set(v) for w, v in tree["good"].items()}


def test_the_scratch_folder_is_made_where_scratch_says(tree, tmp_path, monkeypatch):
    """``scratch`` (made when missing) holds the upload's scratch folder and every zip on its way to the board; the
    system's temporary folder holds none of them, and both are left empty."""
    from alexnet.data import packing

    elsewhere, scratch = tmp_path / "tmp", tmp_path / "disk" / "scratch"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    zips: list[str] = []
    original = packing.publish_file

    def publish(board, path, *args, **kwargs):
        zips.append(path)
        assert not list(elsewhere.glob("alexnet-upload-*"))
        return original(board, path, *args, **kwargs)

    monkeypatch.setattr(packing, "publish_file", publish)
    report = imagenet_upload(tree["path"], tmp_path / "board", workers=2, scratch=scratch)
    assert sorted(report["uploaded"]) == sorted(tree["good"])
    assert len(zips) == 2 * CLASSES
    assert all(Path(z).parent.parent == scratch and Path(z).parent.name.startswith("alexnet-upload-") for z in zips)
    assert list(scratch.iterdir()) == [] and list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("scratch, message", [
    ("gs://bucket/scratch", "is not a local folder"),
    ("", "is not a local folder"),
    ("a-file/below", "cannot hold the upload.s scratch folder \\(it, or a folder above it, is a file"),
])
def test_a_scratch_that_is_not_a_local_folder_is_refused_before_any_work(tree, tmp_path, monkeypatch, scratch,
                                                                         message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(AlexnetError, match=message) as raised:
        imagenet_upload(tree["path"], tmp_path / "board", scratch=scratch)
    assert "scratch" in str(raised.value)
    assert not (tmp_path / "board").exists()


def test_a_full_disk_names_the_scratch_folder_and_the_option(tree, tmp_path, monkeypatch):
    """A disk that fills up (ENOSPC) while a category is packed, or while the source is read, ends the upload with
    one error that says where the scratch folder was and how to give another."""
    import errno

    from alexnet.data import packing

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    scratch = tmp_path / "small-disk"
    monkeypatch.setattr(packing, "zip_images", full)
    with pytest.raises(BoardError, match="a disk is full") as packing_full:
        imagenet_upload(tree["path"], tmp_path / "board", workers=2, scratch=scratch)
    assert str(scratch) in str(packing_full.value) and "a scratch folder (`scratch`) on a disk with room " \
        "for a few categories' zips, or free some space" in str(packing_full.value)
    # the command line says the option as typed
    assert "a scratch folder (`--scratch`) on a disk" in help_as_said("upload", str(packing_full.value))
    monkeypatch.undo()

    monkeypatch.setattr(packing.Uploader, "_run", full)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(AlexnetError, match=r"No space left on device.*a disk is full") as reading_full:
        imagenet_upload(tree["path"], tmp_path / "board", workers=2)
    assert f"the system's temporary folder, {tmp_path}" in str(reading_full.value)


def test_a_board_folder_that_cannot_be_written_is_refused_before_any_work(tree, tmp_path, monkeypatch):
    """An existing board folder that cannot be written (a read-only file system) is refused with one error naming it,
    before any category is packed."""
    from alexnet.data import packing

    board = tmp_path / "board"
    imagenet_upload(tree["path"], board, workers=2)
    packed: list[str] = []
    monkeypatch.setattr(packing, "zip_images", lambda part, *args: packed.append(part.wnid))
    view = tmp_path / "view"
    with read_only_view(board, view), \
            pytest.raises(BoardError, match=f"^board folder {view} cannot be written \\(Read-only file system\\)"):
        imagenet_upload(tree["path"], view, workers=2, resize=63)  # other zips: every category would be packed
    assert packed == []


def test_a_full_board_disk_is_said_and_the_upload_completes_once_it_has_room(tree, tmp_path):
    """A board folder on a disk that fills up (the scratch folder on another one): the upload ends with one error
    naming the board's folder and its full disk, leaves no version or pin folder that was cut short, and, run again
    with room, completes."""
    with small_disk(tmp_path / "disk", "64k") as disk:
        board = disk / "board"
        with pytest.raises(BoardError) as raised:
            imagenet_upload(tree["path"], board, workers=2)
        message = str(raised.value)
        assert f"the disk of board folder {board} is full (No space left on device): free some space on it, or " \
            "give a board on a disk with room; then run imagenet_upload() again to finish" in message
        assert "KeyError" not in message
        opened = open_board(board)
        assert [p.name for p in board.iterdir() if not any(p.iterdir())] == [], "no empty pin folder"
        assert not list(board.glob(".alexnet-version-*"))
        for pin in opened.pin_names():
            for version in opened.pins.pin_versions(pin, as_df=False):
                assert (board / pin / version.version / "data.txt").exists()
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        report = imagenet_upload(tree["path"], board, workers=2)
        assert sorted(report["uploaded"] + report["skipped"]) == sorted(tree["good"])
        check_partition(imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache"), tree, {})


@pytest.mark.parametrize("free_pages", [1, 2, 3])
def test_a_table_write_on_a_full_board_disk_leaves_the_board_writable(tree, tmp_path, free_pages):
    """The disk fills up while the tables are written (every category on the board already): the upload says so,
    leaves no table version that is not whole, and, with room again, completes; the board then fetches."""
    with small_disk(tmp_path / "disk", "2m") as disk:
        board = disk / "board"
        imagenet_upload(tree["path"], board, workers=2)
        for table in ("categories", "bad_images", "_pins.yaml"):
            shutil.rmtree(board / table) if (board / table).is_dir() else (board / table).unlink()
        filler = fill(disk, free_pages)
        with pytest.raises(BoardError, match=f"^the disk of board folder {board} is full"):
            imagenet_upload(tree["path"], board, workers=2, retries=0)
        for table in ("categories", "bad_images"):
            for version in (board / table).glob("*") if (board / table).exists() else []:
                assert sorted(p.name for p in version.iterdir()) == sorted(["data.txt", f"{table}.csv"])
        assert not list(board.glob(".alexnet-version-*"))
        filler.unlink()
        report = imagenet_upload(tree["path"], board, workers=2, retries=0)
        assert sorted(report["skipped"]) == sorted(tree["good"])
        check_partition(imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache"), tree, {})


@pytest.mark.parametrize("kind", ["folder", "gs"])
def test_a_moved_file_gets_the_version_pins_would_write(kind, cloud_env, tmp_path):
    """A file published by moving it gets the version folder and data.txt that pins' pin_upload() writes for it (the
    same file name, size, hash, title and metadata), pins reads it, and the file and its folder are gone."""
    import yaml

    from alexnet.storage.publish import publish_file

    def version(board, moved: bool) -> dict:
        source = tmp_path / f"work-{moved}" / "n01440764.zip"
        source.parent.mkdir()
        source.write_bytes(payload)
        opened = open_board(board, write=True)
        publish_file(opened, str(source), "n01440764", title="a title", metadata={"alexnet": 1, "images": 3},
                     exists=False, retries=0, move=moved)
        assert source.exists() is not moved
        assert [p.name for p in source.parent.iterdir()] == ([] if moved else [source.name])
        (found,) = opened.pins.pin_versions("n01440764", as_df=False)
        path = opened.pins.construct_path(["n01440764", found.version, "data.txt"])
        meta = yaml.safe_load(opened.fs.cat_file(path))
        files = sorted(opened.fs.ls(opened.pins.construct_path(["n01440764", found.version]), detail=False))
        assert [f.rsplit("/", 1)[-1] for f in files] == ["data.txt", "n01440764.zip"]
        assert opened.pins.pin_meta("n01440764").file == "n01440764.zip"
        assert opened.fs.cat_file(files[1]) == payload
        del meta["created"]
        return meta

    payload = random_bytes(3000)
    if kind == "folder":
        boards = [str(tmp_path / "copied"), str(tmp_path / "moved")]
    else:
        boards = [f"gs://{BUCKET}/{tmp_path.name}/copied", f"gs://{BUCKET}/{tmp_path.name}/moved"]
    copied, moved = version(boards[0], False), version(boards[1], True)
    assert moved == copied
    assert moved["file"] == "n01440764.zip" and moved["file_size"] == 3000
    assert moved["user"] == {"alexnet": 1, "images": 3} and moved["title"] == "a title"


def next_second() -> None:
    """Sleep (really: ``time.sleep`` may be patched) until the clock's second changes."""
    import select

    select.select([], [], [], 1.01 - time.time() % 1)


@pytest.mark.parametrize("landed", ["whole", "no data.txt", "zip cut short"])
@pytest.mark.parametrize("move", [True, False])
def test_a_failed_copy_is_retried_as_the_same_version(landed, move, cloud_env, tmp_path, monkeypatch):
    """A copy to a bucket cut off by a dropped connection, after the whole version or a part of it reached the bucket,
    is retried in a later second: the retry writes the version the first attempt began, which ends up whole and alone
    (not a second version, nor one half-written beside it), after the pin's earlier version."""
    from alexnet.storage.publish import publish_file

    source = tmp_path / "work" / "n01440764.zip"
    source.parent.mkdir()
    source.write_bytes(random_bytes(1000))
    opened = open_board(f"gs://{BUCKET}/{tmp_path.name}/board", write=True)
    earlier = publish_file(opened, str(source), "n01440764", title="t", metadata={"alexnet": 1}, exists=False,
                           retries=0)
    payload = random_bytes(2000)
    source.write_bytes(payload)
    put, failed = opened.fs.put, []

    def cut_off(lpath, rpath, recursive=False, **kwargs):  # the copy reaches the bucket, then the link drops
        put(lpath, rpath, recursive=recursive, **kwargs)
        if not failed:
            failed.append(rpath)
            if landed == "no data.txt":  # the zip landed, pins' data.txt did not
                opened.fs.rm(f"{rpath}/data.txt")
            elif landed == "zip cut short":  # pins' data.txt landed, a part of the zip
                opened.fs.pipe_file(f"{rpath}/n01440764.zip", payload[:1000])
            next_second()  # the retry names its version in a later second than this attempt did
            raise ConnectionResetError("connection reset by peer (injected)")

    monkeypatch.setattr(opened.fs, "put", cut_off)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # the retry's wait
    version = publish_file(opened, str(source), "n01440764", title="t", metadata={"alexnet": 1}, exists=True,
                           retries=1, move=move)
    assert failed, "the first copy failed"
    versions = opened.pins.pin_versions("n01440764", as_df=False)
    assert [str(v.version) for v in versions] == [earlier, version]
    assert failed[0].rstrip("/").endswith(f"/{version}")
    assert opened.pins.pin_meta("n01440764").file == "n01440764.zip"
    assert opened.fs.cat_file(opened.pins.construct_path(["n01440764", version, "n01440764.zip"])) == payload


@pytest.mark.parametrize("damage", ["zip cut short", "no data.txt", "empty pin folder"])
def test_partially_written_pin_on_board_is_written_again(tree, tmp_path, damage):
    board = tmp_path / "board"
    imagenet_upload(tree["path"], board, workers=2)
    wnid = sorted(tree["good"])[1]
    (zip_path,) = board.glob(f"{wnid}/*/{wnid}.zip")
    if damage == "zip cut short":  # an upload killed while copying the zip
        with open(zip_path, "r+b") as f:
            f.truncate(zip_path.stat().st_size // 2)
    elif damage == "no data.txt":  # killed after the zip, before the metadata
        (zip_path.parent / "data.txt").unlink()
    else:  # killed right after creating the pin's folder
        shutil.rmtree(zip_path.parent)
    report = imagenet_upload(tree["path"], board, workers=2)
    assert report["uploaded"] == [wnid]
    data = imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
    check_partition(data, tree, {})


@pytest.mark.parametrize("held", ["a folder", "images"])
def test_a_folder_by_a_categorys_name_that_is_no_pin_is_refused_and_kept(tree, tmp_path, held):
    """A board folder holding the user's own n01440764/ (photos in a sub-folder, or loose images: the source given as
    the board) had that sub-folder deleted as "an incomplete version", or failed after 4 tries in a
    NotADirectoryError."""
    board = tmp_path / "board"
    wnid = sorted(tree["good"])[0]
    mine = board / wnid / "2019-trip" if held == "a folder" else board / wnid
    mine.mkdir(parents=True)
    (mine / "photo.JPEG").write_bytes(b"mine")
    with pytest.raises(BoardError, match=rf"^board {board} holds {wnid}/ that is no pin \(it holds "
                                         rf"{'2019-trip' if held == 'a folder' else 'photo.JPEG'}, no version of "
                                         r"one\): the upload writes a pin of that name there"):
        imagenet_upload(tree["path"], board, workers=2)
    assert (mine / "photo.JPEG").read_bytes() == b"mine"


def test_the_bad_images_an_upload_finds_are_named_in_a_warning_once(tree, tmp_path, caplog):
    """From Python the bad images were only counted, at INFO: a script saw none of them."""
    board = tmp_path / "board"
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        report = imagenet_upload(tree["path"], board, workers=2)
    (said,) = [r.getMessage() for r in caplog.records if "bad image" in r.getMessage()]
    assert said.startswith(f"{len(tree['bad'])} bad images left out (all in the result's bad_images and the board's "
                           "bad_images pin):\n  ")
    assert [line.strip().split(": ")[0] for line in said.splitlines()[1:]] == [
        f"{b['category']}/{b['file']}" for b in report["bad_images"]]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        imagenet_upload(tree["path"], board, workers=2)
    assert "bad image" not in caplog.text, "named when their categories were uploaded, not again"


def test_min_images_leaves_small_categories_out(tree, tmp_path):
    board = tmp_path / "board"
    sizes = {w: len(v) for w, v in tree["good"].items()}
    big = [w for w, n in sizes.items() if n > PER_CLASS]
    assert big, "the quirk category has more good images than the others"
    report = imagenet_upload(tree["path"], board, min_images=PER_CLASS + 1)
    assert [r["id"] for r in imagenet_categories(board)] == sorted(big)
    assert [r["index"] for r in imagenet_categories(board)] == list(range(len(big)))
    assert sorted(e["category"] for e in report["excluded"]) == sorted(w for w in sizes if w not in big)
    assert report["val_images"] == VAL_PER_CLASS * len(big)


def test_a_category_without_a_good_image_is_left_out_as_under_min_images(tree, tmp_path):
    """A folder of photos where one category holds only files that are no images: no class to learn, not listed (it
    made a class of 0 images, and a partition of none)."""
    src = tmp_path / "photos"
    first, second = sorted(tree["good"])[:2]
    for wnid in (first, second):
        (src / wnid).mkdir(parents=True)
        for name in sorted(tree["good"][wnid])[:3]:
            (src / wnid / name).write_bytes(tree["good"][wnid][name])
    (src / "n09999999").mkdir()
    (src / "n09999999" / "empty.jpg").write_bytes(b"")
    (src / "n09999999" / "photo.heic").write_bytes(b"not a JPEG")
    report = imagenet_upload(src, tmp_path / "board")
    assert [r["id"] for r in imagenet_categories(tmp_path / "board")] == [first, second]
    assert report["excluded"] == [{"category": "n09999999", "images": 0}]


def test_resize_reencodes_to_rgb_jpeg_with_short_side_limit(tmp_path):
    # images larger than the smallest resize AlexNet allows, so that every one is re-encoded
    info = imagenet_synthetic(tmp_path / "src", classes=2, images_per_class=3, val_per_class=1, seed=2, quirks=True,
                              max_side=100)
    board = tmp_path / "board"
    report = imagenet_upload(info["path"], board, resize=MIN_IMAGE_SIZE, quality=80)
    data = imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
    assert len(data["image"]) == report["images"] and len(data["val_image"]) == report["val_images"]
    for path in data["image"] + data["val_image"]:
        with Image.open(path) as img:
            assert img.format == "JPEG" and img.mode == "RGB"
            assert min(img.size) <= MIN_IMAGE_SIZE
    quirk = {os.path.basename(info["quirks"][k]) for k in ("cmyk", "grayscale", "png")}
    assert quirk <= {os.path.basename(p) for p in data["image"]}


def test_resize_below_what_alexnet_takes_is_an_error_before_anything_is_written(tree, tmp_path):
    with pytest.raises(AlexnetError,
                       match=rf"`resize` = {MIN_IMAGE_SIZE - 1} .* use resize = 256 .* at least {MIN_IMAGE_SIZE}"):
        imagenet_upload(tree["path"], tmp_path / "b", resize=MIN_IMAGE_SIZE - 1)
    assert not (tmp_path / "b").exists()


def test_check_image_verdicts(tree):
    quirks = tree["info"]["quirks"]
    for kind in ("cmyk", "grayscale", "png"):
        data = Path(quirks[kind]).read_bytes()
        assert check_image(data) == (data, ""), kind
    assert check_image(Path(quirks["empty"]).read_bytes()) == (None, "empty file")
    stored, reason = check_image(Path(quirks["truncated"]).read_bytes())
    assert stored is None and reason.startswith("truncated or corrupt")
    assert check_image(b"not an image at all")[1] == "not a recognised image format"


def test_images_above_max_pixels_are_left_out_by_name_unless_resize_shrinks_them_within_it(tmp_path, recwarn):
    from helpers_images import encoded, png_claiming

    folder = tmp_path / "photos" / "n01440764"
    folder.mkdir(parents=True)
    images = {
        "small.png": encoded(Image.new("RGB", (40, 30), (200, 40, 20)), "PNG"),  # 1,200 pixels
        "big.png": encoded(Image.new("RGB", (300, 100), (20, 40, 200)), "PNG"),  # 30,000
        # 63,000, its short side already within resize
        "panorama.jpg": encoded(Image.new("RGB", (1000, MIN_IMAGE_SIZE), (20, 200, 40)), "JPEG"),
        "claim.png": png_claiming(10000, 10000),  # 100 million pixels claimed: decoded, it would be found truncated
        "bomb.png": png_claiming(20000, 20000),  # 400 million: more than Pillow opens
    }
    for name, data in images.items():
        (folder / name).write_bytes(data)
    source, kept_board = folder.parent, tmp_path / "kept"
    kept = imagenet_upload(source, kept_board, max_pixels=12000)
    advice = "give `resize` to store it shrunk"
    assert {b["file"]: b["reason"] for b in kept["bad_images"]} == {
        "big.png": f"too large to store as it is (30000 pixels, more than max_pixels = 12000): {advice}",
        "panorama.jpg": f"too large to store as it is (63000 pixels, more than max_pixels = 12000): {advice}",
        "claim.png": f"too large to store as it is (100000000 pixels, more than max_pixels = 12000): {advice}",
        "bomb.png": "too large to decode safely (400000000 pixels, more than the limit 178956970, the most an upload "
                    "decodes, whatever `resize` and `max_pixels` say)"}
    assert kept["images"] == 1
    # the limit is part of what a category's zip is made from: under another one it is packed again
    again = imagenet_upload(source, kept_board, max_pixels=40000)
    assert again["uploaded"] == ["n01440764"] and again["images"] == 2
    assert {b["file"] for b in again["bad_images"]} == {"panorama.jpg", "claim.png", "bomb.png"}
    (folder / "claim.png").unlink()  # under resize it would be decoded, to be shrunk
    shrunk = imagenet_upload(source, tmp_path / "shrunk", max_pixels=12000, resize=MIN_IMAGE_SIZE)
    assert {b["file"]: b["reason"] for b in shrunk["bad_images"]} == {
        "panorama.jpg": "too large to store even shrunk (63000 pixels at 1000x63, more than max_pixels = 12000)",
        "bomb.png": "too large to decode safely (400000000 pixels, more than the limit 178956970, the most an upload "
                    "decodes, whatever `resize` and `max_pixels` say)"}
    data = imagenet_partition(0, 1, tmp_path / "shrunk", cache_dir=tmp_path / "cache")
    sizes = {os.path.basename(path): Image.open(path).size for path in data["image"]}
    assert sizes == {"small.png": (40, 30), "big.png": (189, 63)}
    # what the upload says of each image, without Pillow's own warning of a "decompression bomb DOS attack" beside it
    assert [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)] == []


def test_upload_arguments_checked_before_work(tree, tmp_path):
    with pytest.raises(AlexnetError, match=r"`workers` must be a whole number >= 1"):
        imagenet_upload(tree["path"], tmp_path / "b", workers=0)
    with pytest.raises(AlexnetError, match=r"`quality` must be in 1\.\.100"):
        imagenet_upload(tree["path"], tmp_path / "b", resize=64, quality=0)
    with pytest.raises(AlexnetError, match=r"`max_pixels` must be in 1\.\.89478485"):  # what training decodes
        imagenet_upload(tree["path"], tmp_path / "b", max_pixels=89478485 + 1)
    with pytest.raises(BoardError, match="read only"):
        imagenet_upload(tree["path"], "https://example.invalid/board")
    assert not (tmp_path / "b").exists()


def test_path_is_the_old_name_of_source(tree, tmp_path):
    board = tmp_path / "board"
    first = imagenet_upload(source=tree["path"], board=board, workers=2)
    assert first["source"] == os.path.abspath(tree["path"]) and "path" not in first
    with pytest.warns(DeprecationWarning, match="`path` is now `source`") as warned:
        again = imagenet_upload(path=tree["path"], board=board, workers=2)
    assert [w.filename for w in warned if "`path` is now" in str(w.message)] == [__file__]  # points at the caller
    # the same upload: the same source read, every category already on the board
    same = ("board", "source", "layout", "categories", "images", "val_images", "bytes", "excluded")
    assert {k: again[k] for k in same} == {k: first[k] for k in same}
    assert {b["file"] for b in again["bad_images"]} == {b["file"] for b in first["bad_images"]} == tree["bad"]
    assert again["uploaded"] == [] and again["skipped"] == first["uploaded"]
    # both names: an error before anything is written, whether `source` is given by name or by position
    with pytest.raises(AlexnetError, match="`source` only: `path` is its old name"):
        imagenet_upload(source=tree["path"], board=tmp_path / "b", path=tree["path"])
    with pytest.raises(AlexnetError, match="`source` only: `path` is its old name"):
        imagenet_upload(tree["path"], tmp_path / "b", path=tree["path"])
    with pytest.raises(AlexnetError, match="`source` is missing"):
        imagenet_upload(board=tmp_path / "b")
    assert not (tmp_path / "b").exists()


# -- fetch: integrity, cache, archive safety ------------------------------------------------------------------


@pytest.fixture
def uploaded(tree, tmp_path):
    board = tmp_path / "board"
    imagenet_upload(tree["path"], board, workers=2)
    return board


def count_downloads(monkeypatch, corrupt_first: str | None = None, fail_first: str | None = None) -> dict:
    """Wrap transfer.download: count calls per object name; optionally corrupt or fail the first one."""
    calls: dict[str, int] = {}
    original = transfer_module.download

    def wrapped(fs, remote, local, progress=None):
        name = remote.rsplit("/", 1)[-1]
        calls[name] = calls.get(name, 0) + 1
        if name == fail_first and calls[name] == 1:
            raise ConnectionResetError("connection reset by peer (injected)")
        original(fs, remote, local, progress)
        if name == corrupt_first and calls[name] == 1:
            with open(local, "r+b") as f:
                f.seek(100)
                f.write(b"\xff" * 16)

    monkeypatch.setattr(transfer_module, "download", wrapped)
    return calls


def test_corrupted_object_is_fetched_again_then_named(uploaded, tree, tmp_path, monkeypatch, caplog):
    wnid = imagenet_categories(uploaded)[0]["id"]
    (zip_path,) = uploaded.glob(f"{wnid}/*/{wnid}.zip")
    data = bytearray(zip_path.read_bytes())
    data[200:216] = b"\x00" * 16
    zip_path.write_bytes(bytes(data))
    calls = count_downloads(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="alexnet.storage.transfer"), \
            pytest.raises(IntegrityError, match=f"category {wnid}: .*/{wnid}.zip has SHA-256 .*, but the categories "
                          "pin says") as err:
        imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache", workers=2)
    assert f"delete {zip_path} (an upload keeps a file that is there), then upload the category again" \
        in str(err.value)
    assert calls[f"{wnid}.zip"] == 2
    assert any("fetching it again" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "cache" / "train" / wnid).exists()
    # the advice mends it: an upload alone keeps the damaged zip (its size is right), deleting it first does not
    imagenet_upload(tree["path"], uploaded, workers=2)
    assert zip_path.read_bytes() == bytes(data)
    zip_path.unlink()
    imagenet_upload(tree["path"], uploaded, workers=2)
    check_partition(imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache", workers=2), tree, {})


def test_corruption_in_transit_is_healed_by_fetching_again(uploaded, tree, tmp_path, monkeypatch):
    wnid = imagenet_categories(uploaded)[0]["id"]
    calls = count_downloads(monkeypatch, corrupt_first=f"{wnid}.zip")
    data = imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache", workers=2)
    assert calls[f"{wnid}.zip"] == 2
    check_partition(data, tree, {})


def test_transient_failure_is_retried(uploaded, tree, tmp_path, monkeypatch):
    wnid = imagenet_categories(uploaded)[1]["id"]
    calls = count_downloads(monkeypatch, fail_first=f"{wnid}.zip")
    data = imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache", workers=2)
    assert calls[f"{wnid}.zip"] == 2
    check_partition(data, tree, {})
    with pytest.raises(BoardError, match=r"stopped answering \(ConnectionResetError: .*\): fetching again resumes"):
        calls = count_downloads(monkeypatch, fail_first=f"{wnid}.zip")
        imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache2", workers=2, retries=0)
    assert calls[f"{wnid}.zip"] == 1  # retries = 0: one attempt


def test_a_cache_holds_one_boards_categories(uploaded, tree, tmp_path):
    """Two boards may name other images by the same category id: a cache_dir given to a second board is refused
    before anything is replaced, and the first board's partition stays whole."""
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, uploaded, cache_dir=cache)
    other = tmp_path / "other"
    imagenet_upload(imagenet_synthetic(tmp_path / "src2", classes=CLASSES, images_per_class=2, val_per_class=1,
                                       seed=7, max_side=40)["path"], other)
    with pytest.raises(AlexnetError, match=rf"`cache_dir` = {cache} holds the categories of board {uploaded}, and a "
                                           "cache holds one board's .* give this board a `cache_dir` of its own"):
        imagenet_partition(0, 1, other, cache_dir=cache)
    with pytest.raises(AlexnetError, match="holds the categories of board"):
        imagenet_validation(other, cache_dir=cache)
    assert all(Path(p).exists() for p in [*first["image"], *first["val_image"]])
    assert imagenet_partition(0, 1, uploaded, cache_dir=cache)["image"] == first["image"]  # its own board: reused
    (tmp_path / "link").symlink_to(uploaded.parent)  # the same board by another path: the same board
    assert imagenet_partition(0, 1, tmp_path / "link" / uploaded.name, cache_dir=cache)["categories"] == \
        first["categories"]
    assert imagenet_partition(0, 1, other, cache_dir=tmp_path / "cache-other")["image"]


def test_partial_files_in_cache_are_not_trusted(uploaded, tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, uploaded, cache_dir=cache)
    victim = Path(first["image"][3])
    victim.write_bytes(victim.read_bytes()[:50])  # cut short, as by a crash while writing
    wnid_b = first["categories"][1]
    (cache / "train" / wnid_b / cache_module.MARKER).unlink()  # extracted, never marked complete
    (cache / cache_module.TMP / "n00000000-1-abc.zip.part").write_bytes(b"half a download")
    calls = count_downloads(monkeypatch)
    second = imagenet_partition(0, 1, uploaded, cache_dir=cache)
    assert sorted(calls) == sorted([f"{Path(victim).parent.name}.zip", f"{wnid_b}.zip"])
    assert second["image"] == first["image"]
    check_partition(second, tree, {})


def test_flipped_bytes_in_a_cached_image_are_found_with_verify(uploaded, tree, tmp_path, monkeypatch, caplog):
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, uploaded, cache_dir=cache)
    victim = Path(first["image"][2])
    original = victim.read_bytes()
    damaged = bytearray(original)
    middle = len(damaged) // 2
    damaged[middle : middle + 8] = bytes(b ^ 0xFF for b in damaged[middle : middle + 8])
    victim.write_bytes(bytes(damaged))  # same size: the default check (names and sizes) cannot see it
    calls = count_downloads(monkeypatch)
    imagenet_partition(0, 1, uploaded, cache_dir=cache)
    assert calls == {} and victim.read_bytes() == bytes(damaged), "the default stays as fast as before"
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        again = imagenet_partition(0, 1, uploaded, cache_dir=cache, verify=True)
    category = victim.parent.name
    assert victim.read_bytes() == original, "the damaged category was extracted again"
    assert sorted(calls) == [f"{category}.zip"], calls
    assert any(category in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records), caplog.text
    check_partition(again, tree, {})


def test_zip_members_never_escape(tmp_path):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("fine.JPEG", b"ok")
        zf.writestr("../escaped.txt", b"x")
    dest = tmp_path / "a" / "dest"
    dest.mkdir(parents=True)
    for name in ("../escaped.txt", "/tmp/absolute-escape.txt", "sub/../../escaped.txt", "C:/escaped.txt",
                 "..\\escaped.txt"):
        with zipfile.ZipFile(evil, "w") as zf:
            zf.writestr("fine.JPEG", b"ok")
            zf.writestr(name, b"x")
        with pytest.raises(IntegrityError, match="would be written outside"):
            extract_zip(str(evil), str(dest), label="category n0")
        assert list(dest.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["dest"]
    assert not Path("/tmp/absolute-escape.txt").exists()
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("sub/ok.JPEG", b"ok")
        zf.writestr("./top.JPEG", b"top")
    assert extract_zip(str(evil), str(dest)) == [(os.path.join("sub", "ok.JPEG"), 2, zlib.crc32(b"ok")),
                                                 ("top.JPEG", 3, zlib.crc32(b"top"))]


def test_a_zip_that_would_inflate_to_more_than_it_holds_is_refused_before_anything_is_written(tmp_path):
    """A zip bomb (deflated zeros: 8 MB from a few kB) on a board, its SHA-256 matching, would fill the disk of
    every worker that fetches it: alexnet's zips are stored, so more declared than the zip holds is refused."""
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fine.JPEG", b"ok")
        zf.writestr("zeros.JPEG", bytes(8 << 20))
    assert bomb.stat().st_size < 100_000
    dest = tmp_path / "dest"
    with pytest.raises(IntegrityError, match=r"the zip of category n0 says it holds 8,388,610 bytes once extracted, "
                                             r"more than the [\d,]+ bytes of the zip itself \(its member "
                                             r"'zeros.JPEG' alone 8,388,608\).*re-upload the category"):
        extract_zip(str(bomb), str(dest), label="category n0")
    assert not dest.exists() or list(dest.iterdir()) == []
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:  # deflated, but no larger than the zip: extracted
        zf.writestr("noise.JPEG", os.urandom(5000))
    assert [name for name, _, _ in extract_zip(str(bomb), str(dest))] == ["noise.JPEG"]


def test_zip_members_through_a_link_out_of_the_folder_are_refused_and_folders_are_checked_once(tmp_path,
                                                                                                monkeypatch):
    """A member whose folder in ``dest`` is a link to outside it is refused; each folder is resolved once, however
    many members it holds (a category's zip holds about 1,300)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "link").symlink_to(outside, target_is_directory=True)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("fine.JPEG", b"ok")
        zf.writestr("link/escaped.JPEG", b"x")
    with pytest.raises(IntegrityError, match="resolves outside"):
        extract_zip(str(evil), str(dest), label="category n0")
    assert list(outside.iterdir()) == []
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as zf:
        for i in range(50):
            zf.writestr(f"{i:03d}.JPEG", b"a" * i)
            zf.writestr(f"sub/{i:03d}.JPEG", b"b" * i)
    resolved = []
    realpath = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda path, *a, **k: resolved.append(path) or realpath(path, *a, **k))
    listed = extract_zip(str(many), str(tmp_path / "out"))
    assert len(resolved) == 3, resolved  # dest, its root folder, sub/
    assert listed == sorted([(f"{i:03d}.JPEG", i, zlib.crc32(b"a" * i)) for i in range(50)]
                            + [(os.path.join("sub", f"{i:03d}.JPEG"), i, zlib.crc32(b"b" * i)) for i in range(50)])
    assert (tmp_path / "out" / "sub" / "049.JPEG").read_bytes() == b"b" * 49


def test_hostile_zip_on_board_is_refused_end_to_end(uploaded, tmp_path):
    """A board whose zip (with a matching sha256 in the categories pin) holds ../ and absolute names."""
    import pandas as pd

    board = open_board(uploaded)
    frame = board.pins.pin_read("categories")
    wnid = frame["id"][0]
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as zf:
        zf.writestr("ok.JPEG", b"fine")
        zf.writestr("../../../escaped.JPEG", b"escape")
        zf.writestr("/tmp/alexnet-absolute-escape.JPEG", b"escape")
    (zip_path,) = uploaded.glob(f"{wnid}/*/{wnid}.zip")
    zip_path.write_bytes(payload.getvalue())
    frame.loc[0, "sha256"] = sha(payload.getvalue())
    frame.loc[0, "bytes"] = len(payload.getvalue())
    # pins orders versions by their time to the second: make this one the latest for sure
    board.pins.pin_write(pd.DataFrame(frame), name="categories", type="csv",
                    created=datetime.datetime.now() + datetime.timedelta(seconds=2))
    cache = tmp_path / "deep" / "cache"
    with pytest.raises(IntegrityError, match=f"category {wnid}.*would be written outside"):
        imagenet_partition(0, 1, uploaded, cache_dir=cache)
    assert not list(tmp_path.rglob("escaped.JPEG"))
    assert not Path("/tmp/alexnet-absolute-escape.JPEG").exists()
    assert not (cache / "train" / wnid).exists()


def test_a_category_id_that_is_a_path_is_refused_before_anything_is_fetched(uploaded, tmp_path):
    """A categories pin (written by another hand) whose id climbs out of the cache: nothing is fetched, nothing
    outside the cache is replaced."""
    import pandas as pd

    from alexnet.storage.cache import category_folder

    board = open_board(uploaded)
    frame = board.pins.pin_read("categories")
    frame.loc[0, "id"] = "../../victim"
    board.pins.pin_write(pd.DataFrame(frame), name="categories", type="csv",
                         created=datetime.datetime.now() + datetime.timedelta(seconds=2))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("kept")
    with pytest.raises(BoardError, match=r"names categories that are not folder names \('\.\./\.\./victim'\): it "
                       "was not written by imagenet_upload"):
        imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache" / "root")
    assert [p.name for p in victim.iterdir()] == ["keep.txt"] and not (tmp_path / "cache").exists()
    for odd in ("..", ".", "", "a/b", "a\\b"):
        with pytest.raises(AlexnetError, match="is not a folder name"):
            category_folder(str(tmp_path), odd)
    assert category_folder(str(tmp_path), "flower-0") == str(tmp_path / "train" / "flower-0")


@pytest.mark.parametrize("edit, said", [
    (lambda frame: frame.loc.__setitem__((1, "index"), frame.loc[0, "index"]), "gives label 0 to 2 categories"),
    (lambda frame: frame.loc.__setitem__((1, "id"), frame.loc[0, "id"]), r"names category n\d+ 2 times"),
    (lambda frame: frame.loc.__setitem__((1, "index"), 7), r"gives label 7, outside 0\.\.\d+ for its \d+ categories"),
])
def test_a_categories_table_edited_to_share_a_label_is_refused(uploaded, tmp_path, edit, said):
    """A categories pin edited by hand so that two categories share a label, a category is listed twice, or a label is
    past the classes: refused before anything is fetched (two categories under one label trained as one class)."""
    import pandas as pd

    board = open_board(uploaded)
    frame = board.pins.pin_read("categories")
    assert len(frame) < 8
    edit(frame)
    board.pins.pin_write(pd.DataFrame(frame), name="categories", type="csv",
                         created=datetime.datetime.now() + datetime.timedelta(seconds=2))
    with pytest.raises(BoardError, match=f"the categories pin of .* {said}: each category is listed once with a "
                                         "label of its own, as imagenet_upload writes it; upload the data again$"):
        imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_unreachable_board_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")
    start = time.monotonic()
    # The tree does not exist either: the board is checked first, so the error is about the board.
    with pytest.raises(BoardError, match="cannot reach board gs://b/x"):
        imagenet_upload(tmp_path / "no-tree-here", "gs://b/x")
    with pytest.raises(BoardError, match="cannot reach board gs://b/x"):
        imagenet_partition(0, 2, "gs://b/x", cache_dir=tmp_path / "cache")
    assert time.monotonic() - start < 20
    assert not (tmp_path / "cache").exists()


def test_partition_errors_before_any_work(tmp_path):
    with pytest.raises(AlexnetError, match=r"`partition` must be in 0\.\.3"):
        imagenet_partition(4, 4, "gs://never-contacted/board")
    with pytest.raises(AlexnetError, match=r"`total` must be a whole number >= 1"):
        imagenet_partition(0, 0, "gs://never-contacted/board")
    with pytest.raises(BoardError, match="does not exist"):
        imagenet_partition(0, 1, tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BoardError, match="has no categories pin"):
        imagenet_categories(tmp_path / "empty")


def test_total_larger_than_categories(uploaded, tmp_path):
    with pytest.raises(AlexnetError, match=rf"must not exceed the number of categories \({CLASSES}\)"):
        imagenet_partition(0, CLASSES + 1, uploaded, cache_dir=tmp_path / "cache")


def test_a_categories_table_whose_first_hash_looks_like_a_number_is_read_as_text(tmp_path):
    """About one upload in a thousand gives its first category a SHA-256 such as ``80e9090399187286c...``: pandas
    2 guesses a column's type from its first value and its parser crashed the process (a segmentation fault, from
    Python and from R) on that 'exponent'. The table is read as text: the hashes come back as written. Read in a
    child process, so that a crash fails this test alone."""
    import pandas as pd

    odd = "80e9090399187286c" + "a" * 47
    version = "20261205T000000Z-ab12c"
    rows = [{"id": f"n0{i}", "name": f"class {i}", "index": i, "images": 3, "bytes": 100,
             "sha256": odd if i == 0 else "b" * 64, "version": version, "val_images": 1, "val_bytes": 10,
             "val_sha256": "9e990000000000000001" + "c" * 44, "val_version": version} for i in range(2)]
    open_board(str(tmp_path / "board"), write=True).pins.pin_write(pd.DataFrame(rows), name="categories", type="csv")
    script = (f"import json, alexnet; rows = alexnet.imagenet_categories({str(tmp_path / 'board')!r}); "
              "print(json.dumps([[r['sha256'], r['val_sha256'], r['index'], r['images']] for r in rows]))")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert json.loads(child.stdout.strip().splitlines()[-1]) == [[row["sha256"], row["val_sha256"], row["index"],
                                                                  row["images"]] for row in rows]


@pytest.mark.parametrize("column", ["version", "val_version"])
def test_a_version_that_is_a_path_is_refused_before_anything_is_fetched(uploaded, tmp_path, column):
    """A categories pin (written by another hand) whose version climbs out of the pin's folder: a zip elsewhere on
    the machine (its SHA-256 the table's) would be fetched as the category's. Refused before anything is read."""
    import pandas as pd

    board = open_board(uploaded)
    frame = board.pins.pin_read("categories")
    wnid = frame["id"][0]
    outside = tmp_path / "outside" / wnid
    outside.mkdir(parents=True)
    (zip_path,) = uploaded.glob(f"{wnid}/*/{wnid}.zip")
    shutil.copy(zip_path, outside / f"{wnid}.zip")
    frame.loc[0, column] = os.path.relpath(outside, zip_path.parent.parent)
    board.pins.pin_write(pd.DataFrame(frame), name="categories", type="csv",
                         created=datetime.datetime.now() + datetime.timedelta(seconds=2))
    with pytest.raises(BoardError, match=rf"gives category {wnid} the {column} '\.\./.*outside/{wnid}', which is "
                                         r"not a version's folder name .*nothing is fetched from it"):
        imagenet_partition(0, 1, uploaded, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_an_image_whose_name_holds_a_backslash_is_named_and_the_category_still_fetches(tree, tmp_path):
    """Linux allows ``x\\..\\..\\evil.JPEG`` as a file name; a fetch reads a backslash as a folder's and refuses the
    zip of any category that holds one. The upload leaves such an image out (named, with what to do), so that the
    category it belongs to can be fetched."""
    from alexnet.data.parts import NOT_A_FILE_NAME

    src = tmp_path / "src"
    shutil.copytree(tree["path"], src)
    wnid = sorted(tree["good"])[1]
    folder = src / "ILSVRC" / "Data" / "CLS-LOC" / "train" / wnid
    image = next(folder.iterdir())
    odd = "x\\..\\..\\evil.JPEG"
    shutil.copy(image, folder / odd)
    report = imagenet_upload(str(src), str(tmp_path / "board"), workers=2)
    assert {"category": wnid, "split": "train", "file": odd, "reason": NOT_A_FILE_NAME} in report["bad_images"]
    data = imagenet_partition(0, 1, str(tmp_path / "board"), cache_dir=tmp_path / "cache")
    mine = {os.path.basename(f) for f, category in zip(data["image"], data["category"], strict=True)
            if category == wnid}
    assert mine == set(tree["good"][wnid])


def test_a_password_in_a_boards_url_is_said_as_stars_in_logs_errors_records_and_cards(tree, tmp_path, caplog):
    """A board on a server given as https://user:password@host/...: the password reaches the server, and nowhere
    that others read: the fetch's log lines, the cache's record of its board, an error, a model's card."""
    from alexnet.cli.data import partition_summary
    from alexnet.model.card import ModelCard
    from alexnet.storage import cache as cache_module

    secret = "Sup3rS3cret"
    (tmp_path / "www").mkdir()
    imagenet_upload(tree["path"], str(tmp_path / "www" / "board"), workers=2)
    with http_server(tmp_path / "www") as url:
        board = url.replace("http://", f"http://alice:{secret}@") + "/board"
        with caplog.at_level(logging.DEBUG, logger="alexnet"):
            data = imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
        assert data["board"] == board  # what the caller gave, to open the board again
        said = "\n".join(record.getMessage() for record in caplog.records)
        assert "alice:***@127.0.0.1" in said and secret not in said
        assert secret not in partition_summary(data) and "alice:***@" in partition_summary(data)
        assert (tmp_path / "cache" / cache_module.BOARD_FILE).read_text().strip() == board.replace(secret, "***")
        imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")  # the same board, its record read back
        (tmp_path / "cache" / cache_module.BOARD_FILE).write_text(board + "\n")  # as an earlier version wrote it
        imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache")
        assert (tmp_path / "cache" / cache_module.BOARD_FILE).read_text().strip() == board.replace(secret, "***")
        with pytest.raises(AlexnetError) as refused:
            imagenet_partition(0, 1, board + "-missing", cache_dir=tmp_path / "other")
        assert secret not in str(refused.value) and "alice:***@" in str(refused.value)
        # the command line's -vv shows the libraries' own lines too (fsspec's requests): said without it as well
        command = subprocess.run([sys.executable, "-m", "alexnet.cli", "-vv", "fetch", "--board", board, "--total",
                                  "1", "--cache-dir", str(tmp_path / "cli")], capture_output=True, text=True,
                                 timeout=120, env={**os.environ, "ALEXNET_PROGRESS": "0"})
        assert command.returncode == 0, command.stderr[-2000:]
        assert "DEBUG" in command.stderr and "alice:***@" in command.stderr
        assert secret not in command.stderr + command.stdout
        printed = subprocess.run([sys.executable, "-m", "alexnet.cli", "fetch", "--json", "--board", board,
                                  "--total", "1", "--cache-dir", str(tmp_path / "cli")], capture_output=True,
                                 text=True, timeout=120, env={**os.environ, "ALEXNET_PROGRESS": "0"})
        assert printed.returncode == 0, printed.stderr[-2000:]
        assert json.loads(printed.stdout)["board"] == board.replace(secret, "***")  # what job logs keep
    from types import SimpleNamespace

    from alexnet.train.resumed import trained_on

    recorded = trained_on({"board": board, "partition": 0, "total": 1}, SimpleNamespace(class_ids=["n0"]),
                          SimpleNamespace(train_images=3, val_images=1), SimpleNamespace(workers=1))
    assert recorded["board"] == board.replace(secret, "***")  # what a checkpoint records of its data
    card = ModelCard(image_size=64, num_classes=1, class_ids=["n0"], class_names=["a"], board=board,
                     initial_model=f"{board}::alexnet", evaluation={"board": board, "images": 1})
    assert secret not in json.dumps(card.to_dict()) and card.board == board.replace(secret, "***")


def test_a_board_given_as_the_source_is_told_to_be_one(tree, tmp_path):
    """It was read as a folder of category folders, and refused for a folder named as a board's own pin."""
    board = tmp_path / "board"
    imagenet_upload(tree["path"], str(board), workers=2)
    with pytest.raises(LayoutError, match=rf"^{board} is a board \(what an upload writes, _pins\.yaml in it\), not "
                                          r"ImageNet: give the folder or archive of ImageNet as `source`"):
        imagenet_upload(str(board), str(tmp_path / "other"))
    assert not (tmp_path / "other").exists()


def test_the_validation_images_the_upload_left_out_are_counted_and_said_when_they_are_fetched(tmp_path, caplog):
    """An evaluation of a board said nothing of the validation images its upload had left out (its bad_images pin
    names them): a reader comparing counts with the source's could not tell."""
    src = imagenet_synthetic(tmp_path / "src", classes=3, images_per_class=4, val_per_class=2, seed=5,
                             max_side=40)["path"]
    val_folder = Path(src) / "ILSVRC" / "Data" / "CLS-LOC" / "val"
    broken = sorted(val_folder.iterdir())[:2]
    for path in broken:
        path.write_bytes(path.read_bytes()[:60])  # truncated where they lie
    report = imagenet_upload(src, tmp_path / "board")
    bad_val = [row for row in report["bad_images"] if row["split"] == "val"]
    assert len(bad_val) == 2
    with caplog.at_level("INFO", logger="alexnet"):
        whole = imagenet_validation(tmp_path / "board", cache_dir=tmp_path / "cache")
    assert whole["left_out_at_upload"] == 2 and len(whole["val_image"]) == 3 * 2 - 2
    assert f"{tmp_path / 'board'}: 2 validation images were left out when the board was uploaded" in caplog.text
    assert "not among these, which count those of the categories left without any." in caplog.text
    shares = [imagenet_validation(tmp_path / "board", p, 2, cache_dir=tmp_path / "cache") for p in range(2)]
    counts: dict[str, int] = {category: 0 for share in shares for category in share["categories"]}
    for row in bad_val:
        counts.setdefault(row["category"], 0)
        counts[row["category"]] += 1
    assert sum(s["left_out_at_upload"] for s in shares) == 2, "every image once"
    unshared = sum(n for c, n in counts.items() if not any(c in s["categories"] for s in shares))
    assert [s["left_out_at_upload"] for s in shares] == [
        sum(counts[c] for c in s["categories"]) + (unshared if p == 0 else 0) for p, s in enumerate(shares)]
    # a board whose upload left none out says nothing; one without the table (an older board) knows nothing
    clean = imagenet_synthetic(tmp_path / "clean", classes=2, images_per_class=3, val_per_class=1, seed=6,
                               max_side=40)["path"]
    imagenet_upload(clean, tmp_path / "clean-board")
    caplog.clear()
    with caplog.at_level("INFO", logger="alexnet"):
        assert imagenet_validation(tmp_path / "clean-board", cache_dir=tmp_path / "c2")["left_out_at_upload"] == 0
    assert "left out when the board was uploaded" not in caplog.text
    shutil.rmtree(tmp_path / "clean-board" / "bad_images")
    assert imagenet_validation(tmp_path / "clean-board", cache_dir=tmp_path / "c2")["left_out_at_upload"] is None


# -- one upload at a time on a board -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_a_second_upload_to_a_board_being_uploaded_to_is_refused_naming_the_first(kind, tree, cloud_env, tmp_path,
                                                                                  monkeypatch, caplog):
    """Two uploads to one board at once each wrote a categories table of their own categories, the last one the
    board's, and could collide on a version (retried as a transient error): the second is now refused, naming the
    first; the hold goes when an upload ends, and an upload killed (its lease left unrenewed) is taken over."""
    from alexnet.data import upload
    from alexnet.storage import lease
    from alexnet.storage.board import UPLOAD_LOCK
    from alexnet.storage.locking import hold_lock

    board = str(tmp_path / "board") if kind == "folder" else f"s3://{BUCKET}/{tmp_path.name}/board"
    opened = open_board(board, write=True)
    path = opened.path(UPLOAD_LOCK)
    monkeypatch.setattr(upload, "BUCKET_PATIENCE", 1.0)
    if kind == "folder":
        let_go = hold_lock(path, patience=0, note="the upload of a test", remove=True)
    else:
        let_go = lease.hold_lease(opened.fs, path, note="the upload of a test", patience=5).release
    try:
        with pytest.raises(AlexnetError, match=rf"^another upload is writing to board {board} \(the upload of a "
                                               r"test\): two at once would each write a categories table"):
            imagenet_upload(tree["path"], board, workers=2)
        assert opened.pin_names() == [], "nothing uploaded"
    finally:
        let_go()
    report = imagenet_upload(tree["path"], board, workers=2)
    assert len(report["uploaded"]) == CLASSES and not opened.fs.exists(path), "let go at its end"
    if kind == "s3":  # a lease its upload, killed, left: taken over once it has stayed as it is
        opened.fs.pipe_file(path, json.dumps({"token": "killed", "beat": 3, "note": "a killed upload"}).encode())
        monkeypatch.setattr(lease, "STALE", 0.5)
        monkeypatch.setattr(upload, "BUCKET_PATIENCE", 5.0)
        with caplog.at_level(logging.INFO, logger="alexnet"):
            again = imagenet_upload(tree["path"], board, workers=2)
        assert len(again["skipped"]) == CLASSES and not opened.fs.exists(path)
        assert f"Board {board} was held by a killed upload, which has not renewed its hold for 0 s: taken over." in [
            r.getMessage() for r in caplog.records], caplog.text
        # killed on this host: taken over at once, and said so
        ended = subprocess.Popen([sys.executable, "-c", "pass"])
        ended.wait()
        opened.fs.pipe_file(path, json.dumps({"token": "killed", "beat": 3, "note": "a killed upload",
                                              "process": {**lease._process(), "pid": ended.pid}}).encode())
        monkeypatch.setattr(lease, "STALE", 30.0)
        caplog.clear()
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="alexnet"):
            imagenet_upload(tree["path"], board, workers=2)
        assert time.monotonic() - started < 20 and not opened.fs.exists(path)
        if lease._process()["pid_namespace"]:
            assert f"Board {board} was held by a killed upload, whose process has ended: taken over." in [
                r.getMessage() for r in caplog.records], caplog.text
