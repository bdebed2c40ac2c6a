"""Writing the board's pins so that a failure never leaves a board that cannot be read or written again: tables read
from their newest complete version and written whole, versions that failed cleaned up, a full disk said, pruning
that keeps what the newest categories table names. Folder boards, with gs:// (emulator) and s3:// (moto) where the
behaviour is the buckets' too."""

from __future__ import annotations

import datetime
import errno
import os
import shutil
import threading
import time
from pathlib import Path

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import pytest
from servers import random_bytes

from alexnet.errors import BoardError
from alexnet.storage import layout, publish
from alexnet.storage.board import open_board
from alexnet.storage.prune import board_versions, prune
from alexnet.storage.publish import publish_file, quiet_pins, write_table

BUCKET = "alexnet-test"


def rows(n: int, images: int = 1300) -> list[dict]:
    return [{"id": f"n{i:08d}", "name": f"class {i}", "index": i, "images": images, "bytes": 100, "sha256": "a" * 64,
             "version": "20200101T000000Z-abcde", "val_images": 0, "val_bytes": 0, "val_sha256": "",
             "val_version": ""} for i in range(n)]


def write(board, table: list[dict], name: str = layout.CATEGORIES_PIN) -> str:
    with quiet_pins():
        meta = write_table(board, table, layout.CATEGORY_COLUMNS, name, "t", {"alexnet": 1})
    return str(meta.version.version)


def versions(board, name: str) -> list[str]:
    """The versions of pin ``name`` on the board, the newest last (none without the pin)."""
    if not board.fs.exists(board.pins.construct_path([name])):
        return []
    return [str(v.version) for v in board.pins.pin_versions(name, as_df=False)]


def location(kind: str, tmp_path: Path) -> str:
    return str(tmp_path / "board") if kind == "folder" else f"{kind}://{BUCKET}/{tmp_path.name}/board"


def later(version: str, seconds: int) -> str:
    """A version name ``seconds`` after ``version``'s time, with another hash."""
    from pins.versions import Version

    parsed = Version.from_string(version)
    return Version(parsed.created + datetime.timedelta(seconds=seconds), "0dead").version


def copy_version(board, name: str, version: str, to: str) -> str:
    """Copy version ``version`` of pin ``name`` to version ``to`` on the board's file system; ``to``'s path."""
    fs = board.fs
    source, target = board.pins.construct_path([name, version]), board.pins.construct_path([name, to])
    if board.kind == "file":
        os.makedirs(target)
    for path in fs.ls(source, detail=False):
        fs.pipe_file(f"{target}/{path.rsplit('/', 1)[-1]}", fs.cat_file(path))
    return target


def damage(board, target: str, file: str, how: str) -> None:
    fs = board.fs
    if how == "no data.txt":  # a write killed before pins' metadata
        fs.rm(f"{target}/data.txt")
    elif how == "empty data.txt":  # a disk that filled up while writing it
        fs.pipe_file(f"{target}/data.txt", b"")
    else:  # "table cut short": the table's bytes, a part of them
        data = fs.cat_file(f"{target}/{file}")
        fs.pipe_file(f"{target}/{file}", data[:len(data) // 2])


# -- tables: read from the newest complete version, written over an incomplete one --------------------------------


@pytest.mark.parametrize("kind", ["folder", "gs", "s3"])
@pytest.mark.parametrize("how", ["no data.txt", "empty data.txt", "table cut short"])
def test_a_table_version_left_incomplete_is_passed_over_and_written_anew(kind, how, cloud_env, tmp_path):
    """A categories version that a write left incomplete (newer than a complete one) is not read; the next write of
    the table succeeds, on top of it, and removes it on a folder board (on a bucket it may be a write under way)."""
    board = open_board(location(kind, tmp_path), write=True)
    first = write(board, rows(3))
    broken = later(first, 5)
    damage(board, copy_version(board, layout.CATEGORIES_PIN, first, broken), "categories.csv", how)
    assert versions(board, layout.CATEGORIES_PIN) == [first, broken]

    assert layout.read_categories(board) == rows(3)

    second = write(board, rows(4))
    assert layout.read_categories(board) == rows(4)
    left = versions(board, layout.CATEGORIES_PIN)
    assert left == ([first, second] if kind == "folder" else [first, broken, second])


def test_a_stale_incomplete_table_version_on_a_bucket_is_deleted(cloud_env, tmp_path):
    board = open_board(location("gs", tmp_path), write=True)
    first = write(board, rows(2))
    broken = later(first, 10)
    damage(board, copy_version(board, layout.CATEGORIES_PIN, first, broken), "categories.csv", "no data.txt")
    second = write(board, rows(3))  # a young one: perhaps a write under way
    assert versions(board, layout.CATEGORIES_PIN) == [first, broken, second]
    damage(board, copy_version(board, layout.CATEGORIES_PIN, second, later(second, 20)), "categories.csv",
           "no data.txt")
    publish.STALE_SECONDS, before = -1e9, publish.STALE_SECONDS  # every one is stale now
    try:
        third = write(board, rows(4))
    finally:
        publish.STALE_SECONDS = before
    assert versions(board, layout.CATEGORIES_PIN) == [first, broken, second, third]


def test_a_table_with_no_complete_version_is_no_table(tmp_path):
    board = open_board(tmp_path / "board", write=True)
    first = write(board, rows(2))
    damage(board, board.pins.construct_path([layout.CATEGORIES_PIN, first]), "categories.csv", "no data.txt")
    with pytest.raises(BoardError, match="has no categories pin"):
        layout.read_categories(board)
    write(board, rows(2))
    assert len(layout.read_categories(board)) == 2


def test_an_empty_table_pin_folder_is_written_again(tmp_path):
    """A table pin's folder without a version (a write killed after making it) is no obstacle to writing it (pins
    raised KeyError: 'version' there)."""
    board = open_board(tmp_path / "board", write=True)
    (tmp_path / "board" / layout.BAD_IMAGES_PIN).mkdir()
    write(board, rows(1), layout.BAD_IMAGES_PIN)
    assert len(versions(board, layout.BAD_IMAGES_PIN)) == 1


def test_the_same_table_again_writes_no_version(tmp_path):
    board = open_board(tmp_path / "board", write=True)
    first = write(board, rows(2))
    assert write(board, rows(2)) == first
    assert versions(board, layout.CATEGORIES_PIN) == [first]


def test_a_reader_while_the_table_is_written_reads_a_whole_version(tmp_path):
    """A reader of the categories table while new versions of it are written reads a whole one, each time."""
    board = open_board(tmp_path / "board", write=True)
    write(board, rows(300, images=0))
    stop, errors, writes = threading.Event(), [], [0]

    def writer():
        try:
            while not stop.is_set():
                writes[0] += 1
                write(board, rows(300, images=writes[0]))
        except Exception as err:  # the test fails on it below
            errors.append(err)

    thread = threading.Thread(target=writer)
    thread.start()
    reads, reader = [], open_board(tmp_path / "board")
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not errors:
            try:
                table = layout.read_categories(reader)
                reads.append((len(table), len({r["images"] for r in table})))
            except Exception as err:
                errors.append(err)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors[:3]
    assert writes[0] > 2 and len(reads) > 10
    assert set(reads) == {(300, 1)}


# -- a version that failed: nothing left behind, a full disk said ----------------------------------------------------


@pytest.fixture
def another_file_system(monkeypatch, tmp_path):
    """The scratch folder on another file system than the board folder ``tmp_path/board``: a version folder is not
    renamed onto the board (EXDEV) but copied. Returns the list of failures to inject into the copies, in turn
    (``None``: a copy that succeeds)."""
    board = tmp_path / "board"

    class OtherFileSystem:
        @staticmethod
        def rename(src, dst):
            if os.path.basename(str(src)).startswith(".pin-") and Path(dst).parent.parent == board:
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            os.rename(src, dst)

        def __getattr__(self, name):
            return getattr(os, name)

    failures: list[OSError | None] = []
    copyfile = shutil.copyfile

    def failing_copy(src, dst, *args, **kwargs):
        if failures and str(dst).startswith(str(board)):
            failure = failures.pop(0)
            if failure is not None:
                with open(dst, "wb") as f:  # a part of the file is written, then the copy fails
                    f.write(b"x")
                raise failure
        return copyfile(src, dst, *args, **kwargs)

    monkeypatch.setattr(publish, "os", OtherFileSystem())
    monkeypatch.setattr(shutil, "copyfile", failing_copy)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # retries' waits
    return failures


def zip_to_publish(tmp_path: Path, name: str = "n01440764") -> Path:
    source = tmp_path / "work" / f"{name}.zip"
    source.parent.mkdir(exist_ok=True)
    source.write_bytes(random_bytes(2000))
    return source


@pytest.mark.parametrize("landed", ["whole", "part"])
def test_a_table_write_cut_off_is_retried_as_the_same_version(landed, cloud_env, tmp_path, monkeypatch):
    """A table's copy to a bucket cut off by a dropped connection, after all or a part of it reached the bucket, is
    retried in a later second as the same version: the table ends up with one version, whole."""
    import select

    board = open_board(location("gs", tmp_path), write=True)
    first = write(board, rows(2))
    put, failed = board.fs.put, []

    def cut_off(lpath, rpath, recursive=False, **kwargs):
        put(lpath, rpath, recursive=recursive, **kwargs)
        if not failed:
            failed.append(rpath)
            if landed == "part":  # the table landed, pins' data.txt did not
                board.fs.rm(f"{rpath}/data.txt")
            select.select([], [], [], 1.01 - time.time() % 1)  # the retry runs in a later second (sleep is patched)
            raise ConnectionResetError("connection reset by peer (injected)")

    monkeypatch.setattr(board.fs, "put", cut_off)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # the retry's wait
    with quiet_pins():
        meta = write_table(board, rows(3), layout.CATEGORY_COLUMNS, layout.CATEGORIES_PIN, "t", {"alexnet": 1},
                           retries=1)
    second = str(meta.version.version)
    assert failed and failed[0].rstrip("/").endswith(f"/{second}")
    assert versions(board, layout.CATEGORIES_PIN) == [first, second]
    assert layout.read_categories(board) == rows(3)


def left_on(board: Path) -> list[str]:
    return sorted(str(p.relative_to(board)) for p in board.rglob("*") if p.name != ".alexnet-manifest.lock")


def test_a_first_version_whose_copy_failed_is_retried_from_a_clean_board(another_file_system, tmp_path):
    """A copy of a pin's first version onto a folder board that fails (an I/O error) leaves neither the version nor
    the pin's folder: the retry writes it (pins raised KeyError: 'version' for the empty pin folder, every retry)."""
    another_file_system.append(OSError(errno.EIO, "Input/output error"))
    board = open_board(tmp_path / "board", write=True)
    version = publish_file(board, str(zip_to_publish(tmp_path)), "n01440764", title="t", metadata={"alexnet": 1},
                           exists=False, retries=1, move=True)
    assert not another_file_system, "the first copy failed"
    assert versions(board, "n01440764") == [version]
    assert (tmp_path / "board" / "n01440764" / version / "n01440764.zip").stat().st_size == 2000
    assert left_on(tmp_path / "board") == ["n01440764", f"n01440764/{version}", f"n01440764/{version}/data.txt",
                                           f"n01440764/{version}/n01440764.zip"]


def test_a_pin_of_several_files_whose_copy_failed_leaves_no_version(another_file_system, tmp_path):
    """A pin of files copied onto a folder board (a model and its export) whose copy fails half way leaves no version
    that names a file it lacks (pins' own upload left one, read as the pin's newest); written again, the same files
    make one version, and once more none."""
    files = []
    for name, size in (("alexnet.keras", 3000), ("alexnet-export.zip", 2000)):
        files.append(tmp_path / name)
        files[-1].write_bytes(random_bytes(size))
    board = open_board(tmp_path / "board", write=True)
    another_file_system.extend([None, OSError(errno.EIO, "Input/output error")])
    with pytest.raises(BoardError, match=r"^uploading alexnet failed after 1 attempt: OSError: \[Errno 5\] "
                                         "Input/output error$"):
        publish_file(board, [str(f) for f in files], "alexnet", title="t", metadata={"alexnet": 1}, exists=False,
                     retries=0)
    assert left_on(tmp_path / "board") == []
    version = publish_file(board, [str(f) for f in files], "alexnet", title="t", metadata={"alexnet": 1},
                           exists=False, retries=0)
    assert left_on(tmp_path / "board") == ["alexnet", f"alexnet/{version}", f"alexnet/{version}/alexnet-export.zip",
                                           f"alexnet/{version}/alexnet.keras", f"alexnet/{version}/data.txt"]
    for file in files:
        assert (tmp_path / "board" / "alexnet" / version / file.name).read_bytes() == file.read_bytes()
    again = publish_file(board, [str(f) for f in files], "alexnet", title="t", metadata={"alexnet": 1}, exists=True,
                         retries=0)
    assert again == version and versions(board, "alexnet") == [version]


def test_a_full_board_disk_is_said_and_leaves_nothing(another_file_system, tmp_path):
    """A board folder whose disk is full is said at once (no retries), naming the folder; nothing of the version is
    left, so that the next attempt, with room, writes it."""
    another_file_system.append(OSError(errno.ENOSPC, "No space left on device"))
    board = open_board(tmp_path / "board", write=True)
    with pytest.raises(BoardError, match=f"^the disk of board folder {tmp_path / 'board'} is full \\(No space left "
                                         "on device\\): free some space on it, or give a board on a disk with room$"):
        publish_file(board, str(zip_to_publish(tmp_path)), "n01440764", title="t", metadata={"alexnet": 1},
                     exists=False, retries=3, move=True)
    assert left_on(tmp_path / "board") == []
    version = publish_file(board, str(zip_to_publish(tmp_path)), "n01440764", title="t", metadata={"alexnet": 1},
                           exists=False, retries=0, move=True)
    assert versions(board, "n01440764") == [version]


def test_what_killed_writers_left_at_the_board_root_goes_a_day_later(tmp_path):
    """A version made whole in a hidden folder, a manifest's next text or a probe, left at a folder board's root by a
    writer killed before its rename, is removed when the board is next opened for writing once nothing in it has
    changed for a day; a younger one (a writer at work) and the manifest's lock stay."""
    root = tmp_path / "board"
    root.mkdir()
    day_old = time.time() - 25 * 3600
    old_version = root / ".alexnet-version-0123456789abcdef"
    old_version.mkdir()
    (old_version / "n01440764.zip").write_bytes(b"z" * 100)
    (old_version / "data.txt").write_text("x")
    left = [old_version / "n01440764.zip", old_version / "data.txt", old_version,
            root / ".alexnet-_pins.yaml-0123456789ab", root / ".alexnet-probe-abc"]
    for path in left[3:]:
        path.write_text("x")
    young = root / ".alexnet-version-fedcba9876543210"
    young.mkdir()
    (young / "n01440765.zip").write_bytes(b"z")
    lock = root / ".alexnet-manifest.lock"
    lock.write_text("")
    for path in [*left, lock]:
        os.utime(path, (day_old, day_old))
    os.utime(young, (day_old, day_old))  # its file is new: a writer at work

    open_board(root, write=True)
    assert sorted(p.name for p in root.iterdir()) == [".alexnet-manifest.lock", ".alexnet-version-fedcba9876543210"]
    open_board(root)  # a reader removes nothing
    assert (young / "n01440765.zip").exists()


# -- pruning keeps what the newest categories table names ----------------------------------------------------------


def _zip_version(board, tmp_path, exists: bool) -> str:
    """A new version of category n00000000's zip on ``board`` (its first when not ``exists``)."""
    with quiet_pins():
        return publish_file(board, str(zip_to_publish(tmp_path, "n00000000")), "n00000000", title="t",
                            metadata={"alexnet": 1}, exists=exists, retries=0, move=True)


def test_pruning_keeps_the_versions_the_newest_categories_table_names(tmp_path):
    """An upload that prunes after another upload wrote a newer categories table (naming an older version of a pin
    than the one this upload wrote) deletes no version that table names; what no table names is deleted."""
    board = open_board(tmp_path / "board", write=True)

    oldest = _zip_version(board, tmp_path, False)
    named = _zip_version(board, tmp_path, True)
    table = rows(1)
    table[0]["version"] = named
    other_upload_table = write(board, table)  # the other upload's table, the board's newest
    this_upload = _zip_version(board, tmp_path, True)  # this upload's, written before its table, which came first
    deleted = prune(board, {"n00000000": this_upload}, keep=1, retries=0)
    assert versions(board, "n00000000") == [named, this_upload]
    assert deleted == 1 and oldest not in versions(board, "n00000000")
    assert versions(board, layout.CATEGORIES_PIN) == [other_upload_table]
    assert all(board.fs.exists(layout.zip_path(board, r["id"], r["version"])) for r in layout.read_categories(board))


def test_pruning_chooses_what_it_deletes_from_one_listing_of_the_board(tmp_path, monkeypatch):
    """Pruning chooses the versions to delete from one listing of the board (:func:`board_versions`), where it listed
    each pin's versions in turn: a request per pin on a bucket, 2,000 for ImageNet. Only the categories table, which
    says what it keeps, is read through its own listing."""
    board = open_board(tmp_path / "board", write=True)
    oldest = _zip_version(board, tmp_path, False)
    newest = _zip_version(board, tmp_path, True)
    table = rows(1)
    table[0]["version"] = newest
    old_table = write(board, table)
    table[0]["name"] = "renamed"
    new_table = write(board, table)
    listed: list[str] = []
    pin_versions = board.pins.pin_versions

    def listing(name, *args, **kwargs):
        listed.append(name)
        return pin_versions(name, *args, **kwargs)

    monkeypatch.setattr(board.pins, "pin_versions", listing)
    deleted = prune(board, {"n00000000": newest, layout.CATEGORIES_PIN: new_table}, keep=1, retries=0)
    assert set(listed) == {layout.CATEGORIES_PIN}, "no pin's versions listed alone but the table's, to read it"
    assert deleted == 2 and board_versions(board) == {"n00000000": {newest}, layout.CATEGORIES_PIN: {new_table}}
    assert oldest != newest and old_table != new_table


def test_pruning_keeps_the_versions_another_upload_wrote_meanwhile(tmp_path):
    """An upload's pruning deletes no version that was not on the board when the upload began: another upload at the
    same time wrote it, and that upload's categories table, written after this one's pruning, names it."""
    board = open_board(tmp_path / "board", write=True)

    oldest = _zip_version(board, tmp_path, False)
    before = board_versions(board)
    assert before == {"n00000000": {oldest}}
    other_upload = _zip_version(board, tmp_path, True)  # the other upload's version, its table still to come
    this_upload = _zip_version(board, tmp_path, True)
    table = rows(1)
    table[0]["version"] = this_upload
    this_table = write(board, table)
    deleted = prune(board, {"n00000000": this_upload, layout.CATEGORIES_PIN: this_table}, keep=1, retries=0,
                    before=before)
    assert (deleted, versions(board, "n00000000")) == (1, [other_upload, this_upload])
    table[0]["version"] = other_upload
    write(board, table)  # the other upload's table comes last: what it names is there
    assert all(board.fs.exists(layout.zip_path(board, r["id"], r["version"])) for r in layout.read_categories(board))
