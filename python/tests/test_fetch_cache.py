"""The fetch's cache under strain: processes sharing it, a disk that is full or cannot be written, fetches killed half
way, and a board whose zips were changed by hand."""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_cli import help_as_said
from helpers_processes import ctrl_c, ctrl_c_as_in_a_terminal, read_until

from alexnet import scratch
from alexnet.data.fetch import imagenet_categories, imagenet_partition
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.errors import AlexnetError, BoardError, IntegrityError
from alexnet.storage import cache as cache_module
from alexnet.storage import fetch as fetch_module
from alexnet.storage import layout
from alexnet.storage import transfer as transfer_module
from alexnet.storage.board import open_board
from alexnet.storage.cache import category_folder
from alexnet.storage.fetch import ZipItem

CLASSES, PER_CLASS, VAL_PER_CLASS = 4, 8, 2


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """A few small categories, each with validation images."""
    root = tmp_path_factory.mktemp("fetch-cache")
    return imagenet_synthetic(root / "src", classes=CLASSES, images_per_class=PER_CLASS, val_per_class=VAL_PER_CLASS,
                              seed=3, max_side=40)["path"]


@pytest.fixture(scope="module")
def board(source, tmp_path_factory) -> Path:
    """:func:`source` on a folder board."""
    folder = tmp_path_factory.mktemp("fetch-cache-board") / "board"
    imagenet_upload(source, folder, workers=2)
    return folder


def zip_bytes(board: Path) -> int:
    """The bytes of every zip of ``board``, as its categories table gives them."""
    return sum(r["bytes"] + r["val_bytes"] for r in imagenet_categories(board))


# -- processes sharing one cache ------------------------------------------------------------------------------------

_SHARER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from alexnet.data.fetch import imagenet_partition
    from alexnet.progress import watch_progress
    board, cache, meet, me, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    (meet / f"ready-{me}").touch()
    while len(list(meet.glob("ready-*"))) < count:  # start together
        time.sleep(0.005)
    bar = {"moved": 0, "total": None}

    def listen(desc, steps, total):
        bar["moved"] += steps
        bar["total"] = total

    with watch_progress(listen):
        result = imagenet_partition(0, 1, board, cache_dir=cache, workers=1)
    paths = result["image"] + result["val_image"]
    (meet / f"done-{me}").touch()
    missing = reads = 0
    end = None
    while end is None or time.monotonic() < end:  # read every file until the others are done, and a bit more
        if end is None and len(list(meet.glob("done-*"))) == count:
            end = time.monotonic() + 0.5
        for path in paths:
            reads += 1
            try:
                with open(path, "rb") as f:
                    f.read(1)
            except FileNotFoundError:
                missing += 1
    print(json.dumps({"images": len(result["image"]), "downloaded": result["downloaded_bytes"],
                      "missing": missing, "reads": reads, "bar": bar}))
    """)


def test_processes_fetching_into_one_cache_download_each_zip_once_and_keep_each_others_files(board, tmp_path):
    """The workers of one machine share the default cache: processes fetching the same categories at once take turns
    per category, the ones that waited use the copy the first installed, and no file a process was handed vanishes
    while the others fetch (a copy of the same zip installed over it would move it away for a moment)."""
    count = 3
    meet = tmp_path / "meet"
    meet.mkdir()
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", _SHARER, str(board), str(cache), str(meet), str(i), str(count)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "ALEXNET_PROGRESS": "0"}) for i in range(count)]
    try:
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outputs]
    said = [json.loads(out) for out, _ in outputs]
    assert [s["images"] for s in said] == [CLASSES * PER_CLASS] * count
    assert all(s["reads"] > 0 for s in said)
    assert [s["missing"] for s in said] == [0] * count
    assert sum(s["downloaded"] for s in said) == zip_bytes(board), "each zip is downloaded once between them"
    # each bar drawn ends full, the zips another process brought in counted as done
    assert all(s["bar"]["moved"] == (s["bar"]["total"] or 0) for s in said), said
    assert imagenet_partition(0, 1, board, cache_dir=cache)["downloaded_bytes"] == 0


def _item(board: Path, cache: Path, wnid: str) -> ZipItem:
    """The training zip of ``wnid`` as a fetch into ``cache`` brings it in."""
    row = {r["id"]: r for r in imagenet_categories(board)}[wnid]
    return ZipItem(f"train/{wnid}", layout.zip_path(open_board(board), wnid, row["version"]), row["sha256"],
                   row["bytes"], category_folder(str(cache), wnid), f"category {wnid}")


def _inodes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in folder.iterdir()}


def test_a_complete_category_is_kept_and_a_copy_of_it_discarded(board, tmp_path):
    """A process that found a category missing, then got its turn after another installed it, uses that copy without
    downloading; and a copy extracted anyway (a cache whose file system takes no locks) is thrown away rather than
    installed over the complete one, whose files stay where they are, the same files."""
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, board, cache_dir=cache)
    wnid = first["categories"][0]
    item = _item(board, cache, wnid)
    dest = Path(item.dest)
    before = _inodes(dest)
    files, downloaded = fetch_module._fetch_one(item, open_board(board), str(cache), work=str(tmp_path), seen=None,
                                                retries=0, progress=None)
    assert not downloaded and sorted(files) == sorted(n for n in before if n != cache_module.MARKER)
    assert _inodes(dest) == before

    staging = tmp_path / "staging"
    shutil.copytree(dest, staging)
    fetch_module.install_extraction(str(staging), item.dest, item.sha256, seen=None)  # looked before it was installed
    assert _inodes(dest) == before and not staging.exists()
    # the copy the first look found is replaced (as when `verify` found it damaged), so is an incomplete one
    for looked in (cache_module.marker_stamp(item.dest), "incomplete"):
        shutil.copytree(dest, staging)
        if looked == "incomplete":
            (dest / cache_module.MARKER).unlink()
            looked = None
        before = _inodes(dest)
        fetch_module.install_extraction(str(staging), item.dest, item.sha256, seen=looked)
        assert not staging.exists() and set(_inodes(dest)) == set(before) | {cache_module.MARKER}
        assert not set(_inodes(dest).values()) & set(before.values())
        assert cache_module.cached_files(item.dest, item.sha256) is not None


# -- what a killed fetch leaves -------------------------------------------------------------------------------------

_KILLED = textwrap.dedent("""
    import os, signal, sys
    from alexnet.data.fetch import imagenet_partition
    from alexnet.storage import fetch
    extract, extracted = fetch.extract_zip, []

    def extract_then_die(archive, dest, **kwargs):
        files = extract(archive, dest, **kwargs)
        extracted.append(dest)
        if len(extracted) == 2:  # the second zip downloaded and extracted, not yet in place: killed
            os.kill(os.getpid(), signal.SIGKILL)
        return files

    fetch.extract_zip = extract_then_die
    imagenet_partition(0, 1, sys.argv[1], cache_dir=sys.argv[2], workers=1)
    """)


def test_what_a_killed_fetch_left_in_the_cache_is_removed_by_the_next(board, tmp_path):
    """A fetch killed outright (SIGKILL: no ``finally`` runs) leaves its download and half-done extraction in the
    cache's ``.tmp``; the next fetch removes them, as the folder names its owner, who is gone, while a running fetch's
    folder stays however old it is, as long as the fetch writes in it. What else is there goes once nothing in it has
    changed for a day: another host's or container's, an older version's, or one whose owner's process id has been
    given to another process since (a container restarted)."""
    cache = tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(board), str(cache)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "ALEXNET_PROGRESS": "0"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    tmp = cache / cache_module.TMP
    left = [p for p in tmp.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in left) > 0 and any(p.suffix == ".JPEG" for p in left)
    long_ago = time.time() - 2 * 24 * 3600
    running = tmp / f"{cache_module.FETCH_PREFIX}running"  # a fetch of this process, started two days ago
    reused = tmp / f"{cache_module.FETCH_PREFIX}reused"  # a killed fetch's, whose process id this process has now
    for folder in (running, reused):
        folder.mkdir()
        (folder / scratch.OWNER_FILE).write_text(f"{socket.gethostname()}\n{os.getpid()}\n{scratch.pid_namespace()}\n")
        (folder / "n01440764.zip.part").write_bytes(b"part of a zip")
    for path in (reused / scratch.OWNER_FILE, reused / "n01440764.zip.part", running / scratch.OWNER_FILE, reused,
                 running):
        os.utime(path, (long_ago, long_ago))  # the running fetch is writing its zip
    stray_old, stray_new = tmp / "n01440764-1-0a1b2c3d.zip", tmp / "n01440764-2-0a1b2c3d.zip"  # an older version's
    for stray in (stray_old, stray_new):
        stray.write_bytes(b"part of a zip")
    os.utime(stray_old, (long_ago, long_ago))

    result = imagenet_partition(0, 1, board, cache_dir=cache)
    assert sorted(p.name for p in tmp.iterdir()) == sorted([running.name, stray_new.name])
    assert len(result["image"]) == CLASSES * PER_CLASS and all(os.path.isfile(p) for p in result["image"])


# -- a cache whose disk is full or cannot be written -----------------------------------------------------------------

def _zips(board: Path) -> int:
    return sum(1 + (r["val_images"] > 0) for r in imagenet_categories(board))


def test_a_full_cache_disk_ends_the_fetch_at_once_with_what_to_do(board, tmp_path, monkeypatch):
    """No space left (or the quota used up) while a zip is downloaded or extracted: no other attempt, no other
    download started, and one error naming the cache, the option and the room it takes, not a traceback or a download
    blamed for it."""
    cache = tmp_path / "cache"
    calls: list[str] = []

    def full(*args, **kwargs):
        calls.append(args[1])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transfer_module, "download", full)
    started = time.monotonic()
    with pytest.raises(AlexnetError) as raised:
        imagenet_partition(0, 1, board, cache_dir=cache, workers=2)
    zips, size = _zips(board), zip_bytes(board) / 1e6
    rows = imagenet_categories(board)
    two = sum(sorted([r["bytes"] for r in rows] + [r["val_bytes"] for r in rows], reverse=True)[:2]) / 1e6
    assert str(raised.value) == (
        f"fetching into the cache {cache} stopped: its disk is full (No space left on device): give `cache_dir` a "
        f"folder on a disk with room for {zips} zips more ({size:.1f} MB), and {two:.1f} MB more while they are "
        "fetched (2 downloads at once, each zip beside its extraction), or free some space, or fetch fewer zips at "
        "once (`workers`; an evaluation's or a Spark job's `fetch_workers`); then fetching again resumes, "
        f"0 of {zips} zips are in the cache")
    assert not isinstance(raised.value, BoardError)
    assert 1 <= len(calls) <= 2 and len(set(calls)) == len(calls), "tried once each, the ones under way only"
    assert time.monotonic() - started < 5
    monkeypatch.undo()

    first = imagenet_categories(board)[0]["id"]
    original = fetch_module.extract_zip

    def quota(archive, dest, *, label=""):
        if first in label:
            raise OSError(errno.EDQUOT, "Disk quota exceeded", os.path.join(dest, "x.JPEG"))
        return original(archive, dest, label=label)

    monkeypatch.setattr(fetch_module, "extract_zip", quota)
    with pytest.raises(AlexnetError, match=rf"^fetching into the cache {cache} stopped: its disk is full \(Disk quota "
                                           rf"exceeded\): give `cache_dir` .* fetching again resumes, \d+ of {zips} "
                                           "zips are in the cache$"):
        imagenet_partition(0, 1, board, cache_dir=cache, workers=1)
    assert list((cache / cache_module.TMP).iterdir()) == [], "nothing half-done is left"


def test_a_cache_disk_with_less_room_than_the_fetch_takes_is_said_before_it_fills(board, tmp_path, monkeypatch,
                                                                                    caplog):
    """A disk with room for the partition's zips but not for those fetched at once beside their extractions failed
    half way, saying it needed less than was free: the room is said before any download, counting both."""
    import logging

    rows = imagenet_categories(board)
    sizes = sorted([r["bytes"] for r in rows] + [r["val_bytes"] for r in rows], reverse=True)
    free = sum(sizes) + sizes[0]  # room for the zips and one more beside its extraction, not for two at once
    monkeypatch.setattr(fetch_module.shutil, "disk_usage", lambda path: SimpleNamespace(free=free))
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        imagenet_partition(0, 1, board, cache_dir=tmp_path / "one", workers=1)
    assert not caplog.records, "one download at once fits"
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        imagenet_partition(0, 1, board, cache_dir=tmp_path / "two", workers=2)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(
        f"fetch 0/1: the disk of the cache {tmp_path / 'two'} has {free / 1e6:.1f} MB free, and it takes "
        f"{len(sizes)} zips more ({sum(sizes) / 1e6:.1f} MB), and {(sizes[0] + sizes[1]) / 1e6:.1f} MB more while "
        "they are fetched (2 downloads at once, each zip beside its extraction): it may fill up"), said


def test_a_cache_folder_that_cannot_be_written_is_named(board, tmp_path, monkeypatch):
    """A category folder the system will not let this process replace (a read-only mount, an immutable folder): one
    error naming it and the option; reading the board refused stays the board's error."""
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, board, cache_dir=cache)
    wnid = first["categories"][0]
    (cache / "train" / wnid / cache_module.MARKER).unlink()  # incomplete: to be replaced
    rename = os.rename

    def refused(src, dst, *args, **kwargs):
        if os.fspath(src).startswith(str(cache / "train")):
            raise PermissionError(errno.EPERM, "Operation not permitted", src, dst)
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(fetch_module.os, "rename", refused)
    with pytest.raises(AlexnetError) as raised:
        imagenet_partition(0, 1, board, cache_dir=cache)
    zips = _zips(board)
    assert str(raised.value) == (
        f"fetching into the cache {cache} stopped: {cache / 'train' / wnid} cannot be written (Operation not "
        "permitted): give `cache_dir` a folder this process may write (or leave `cache_dir` unset for the user "
        f"cache); then fetching again resumes, {zips - 1} of {zips} zips are in the cache")
    assert "a folder this process may write (or leave `--cache-dir` unset" in help_as_said("fetch", str(raised.value))
    monkeypatch.undo()

    # a new category's extraction moved into place: the folder that refused it is named, not the fetch's own folder
    shutil.rmtree(cache / "train" / wnid)

    def refused_into(src, dst, *args, **kwargs):
        if os.fspath(dst).startswith(str(cache / "train")):
            raise PermissionError(errno.EPERM, "Operation not permitted", src, None, dst)  # as os.rename's own
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(fetch_module.os, "rename", refused_into)
    with pytest.raises(AlexnetError, match=rf"stopped: {cache / 'train'} cannot be written \(Operation not "
                                           r"permitted\)"):
        imagenet_partition(0, 1, board, cache_dir=cache)
    monkeypatch.undo()

    def unreadable(fs, remote, local, progress=None):
        raise PermissionError(errno.EACCES, "Permission denied", remote)

    monkeypatch.setattr(transfer_module, "download", unreadable)
    with pytest.raises(BoardError, match=rf"category {wnid} is listed in the categories pin but .*{wnid}.zip cannot be "
                                         r"read \(PermissionError: "):
        imagenet_partition(0, 1, board, cache_dir=cache)

    def swept(fs, remote, local, progress=None):  # the local file written to removed by another process
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", f"{local}.part-1")

    monkeypatch.setattr(transfer_module, "download", swept)
    said = r", .*, was removed meanwhile \(by another process sharing this folder\?\); run it again"
    with pytest.raises(AlexnetError, match=rf"^category {wnid}: the file it was being downloaded to{said}") as got:
        imagenet_partition(0, 1, board, cache_dir=cache)
    assert not isinstance(got.value, BoardError), "the board is not to blame"


def test_a_folder_of_other_files_is_refused_as_a_cache_and_loses_nothing(board, tmp_path, monkeypatch):
    """``cache_dir`` pointed at the folder ImageNet lives in (torchvision's train/<wnid>/, the cache's own layout)
    replaced each category's folder with the board's, deleting the files that were there."""
    mine = tmp_path / "imagenet"
    folder = mine / "train" / "n01440764"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(AlexnetError, match=rf"^`cache_dir` = {mine} holds files and is no cache of this package "
                                           r"\(train\): a fetch replaces each category's folder there whole"):
        imagenet_partition(0, 1, board, cache_dir=mine)
    assert (folder / "notes.txt").read_text() == "mine" and sorted(os.listdir(mine)) == ["train"]
    # a cache it made is taken again, with what it holds; an empty folder is one to make
    (tmp_path / "empty").mkdir()
    for cache in (tmp_path / "empty", tmp_path / "new"):
        first = imagenet_partition(0, 1, board, cache_dir=cache)
        assert imagenet_partition(0, 1, board, cache_dir=cache)["image"] == first["image"]
    # a URL is no folder of this machine: refused, where a folder named after it was made; file:// is one
    monkeypatch.chdir(tmp_path)
    for url in ("gs://bucket/cache", "s3://bucket/cache"):
        with pytest.raises(BoardError, match=rf"^`cache_dir` = {url}: the cache is written to a local folder"):
            imagenet_partition(0, 1, board, cache_dir=url)
    assert not (tmp_path / "gs:").exists() and not (tmp_path / "s3:").exists()
    by_url = imagenet_partition(0, 1, board, cache_dir=f"file://{tmp_path / 'by-url'}")
    assert by_url["cache_dir"] == str(tmp_path / "by-url") and not (tmp_path / "file:").exists()


@pytest.mark.parametrize("own", [cache_module.TMP, cache_module.LOCKS])
def test_a_file_in_place_of_a_folder_the_cache_keeps_is_named(board, tmp_path, own):
    """A file in place of the cache's .locks ended the fetch in a FileExistsError and a traceback, and one in place of
    its .tmp was said as the cache folder itself being a file."""
    cache = tmp_path / "cache"
    imagenet_partition(0, 1, board, cache_dir=cache)
    shutil.rmtree(cache / own)
    (cache / own).write_text("")
    with pytest.raises(AlexnetError, match=rf"^`cache_dir` = {cache} cannot hold the cache \({cache / own}, a folder "
                                           r"it keeps, is a file: remove that file\): give a folder"):
        imagenet_partition(0, 1, board, cache_dir=cache)


def test_a_cached_copy_fetched_again_says_why(board, tmp_path, caplog):
    """A damaged copy (a file cut short, or gone) was fetched again without a word unless `verify` found it, and a
    category the board holds in another version replaced its copy without a word: a user could tell neither from the
    other."""
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, board, cache_dir=cache)
    damaged, gone, other = first["categories"][:3]
    image = next(p for p in (cache / "train" / damaged).iterdir() if not p.name.startswith("."))
    image.write_bytes(image.read_bytes()[:10])
    next(p for p in (cache / "train" / gone).iterdir() if not p.name.startswith(".")).unlink()
    marker = cache / "train" / other / cache_module.MARKER  # as a category uploaded again leaves the copy
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "sha256": "0" * 64}))
    with caplog.at_level("INFO", logger="alexnet"):
        again = imagenet_partition(0, 1, board, cache_dir=cache)
    said = [r.getMessage() for r in caplog.records if "fetching" in r.getMessage() and "category" in r.getMessage()]
    assert sorted(said) == sorted([
        *(f"category {wnid}: the cached copy is damaged or incomplete (a file missing or of another size, or a "
          "CRC-32 that differs); fetching it again" for wnid in (damaged, gone)),
        f"category {other}: the board holds another version of it than the cache's copy (uploaded again since): "
        "fetching it in place of that copy"]), said
    assert again["image"] == first["image"] and image.stat().st_size > 10


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs takes root")
def test_a_cache_on_a_small_disk_says_so(board, tmp_path):
    """A real disk too small for the partition (a tmpfs of 64 KiB)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("this machine mounts no tmpfs")
    try:
        started = time.monotonic()
        with pytest.raises(AlexnetError, match=rf"^fetching into the cache {disk}/cache stopped: its disk is full "
                                               r"\(No space left on device\): give `cache_dir` a folder on a disk with "
                                               r"room for \d+ zips? more"):
            imagenet_partition(0, 1, board, cache_dir=disk / "cache", workers=2)
        assert time.monotonic() - started < 5
        assert list((disk / "cache" / cache_module.TMP).iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="a read-only bind mount takes root")
def test_a_complete_cache_on_a_read_only_disk_is_read(board, tmp_path):
    """A cache fetched once and shared read-only (a read-only mount, a volume) was refused as a folder that cannot be
    written, though nothing needed writing; a zip missing from it is still said to need a cache that can be."""
    cache, shared = tmp_path / "cache", tmp_path / "shared"
    whole = imagenet_partition(0, 1, board, cache_dir=cache)
    shared.mkdir()
    if subprocess.run(["mount", "--bind", str(cache), str(shared)]).returncode != 0:
        pytest.skip("this machine makes no bind mounts")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(shared)]).returncode != 0:
            pytest.skip("this machine makes no read-only bind mounts")
        assert not os.access(shared, os.W_OK)
        again = imagenet_partition(0, 1, board, cache_dir=shared)
        assert again["downloaded_bytes"] == 0
        assert again["image"] == [p.replace(str(cache), str(shared), 1) for p in whole["image"]]
        assert all(os.path.isfile(p) for p in again["image"] + again["val_image"])
        assert imagenet_partition(0, 1, board, cache_dir=shared, verify=True)["downloaded_bytes"] == 0
    finally:
        subprocess.run(["umount", str(shared)], check=True)

    half = tmp_path / "half"  # one of two partitions fetched, then shared read-only: the other cannot be fetched
    imagenet_partition(0, 2, board, cache_dir=half)
    shared.mkdir(exist_ok=True)
    for without_tmp in (False, True):  # its .tmp copied with it, or not: the fetch failed in a FileNotFoundError
        if without_tmp:
            shutil.rmtree(half / cache_module.TMP)
        subprocess.run(["mount", "--bind", str(half), str(shared)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,ro,bind", str(shared)], check=True)
            assert imagenet_partition(0, 2, board, cache_dir=shared)["downloaded_bytes"] == 0
            with pytest.raises(AlexnetError, match=rf"^fetching into the cache {shared} stopped: {shared} cannot be "
                                                   r"written \(Read-only file system\): give `cache_dir` a folder"):
                imagenet_partition(1, 2, board, cache_dir=shared)
        finally:
            subprocess.run(["umount", str(shared)], check=True)


def test_the_upload_knows_a_full_disk_by_the_same_errors(source, tmp_path, monkeypatch):
    """The upload tells a full disk by the errors the fetch does (the quota used up too), and a folder board whose
    disk is full is not tried again and again: one attempt per pin, and the error says a disk is full."""
    from alexnet.data import packing
    from alexnet.storage import publish

    def quota(*args, **kwargs):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(packing, "zip_images", quota)
    with pytest.raises(AlexnetError, match="a disk is full: the scratch folder's"):
        imagenet_upload(source, tmp_path / "board", workers=2, scratch=tmp_path / "scratch")
    monkeypatch.undo()

    calls: list[str] = []

    def full(board, folder, moved, name, *args):
        calls.append(name)
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(board.location, name))

    monkeypatch.setattr(publish, "_put_version", full)
    with pytest.raises(BoardError, match=r"could not be uploaded .* a disk is full: the scratch folder's \(in "
                                         rf"{tmp_path / 'scratch'}\) or a folder board's"):
        imagenet_upload(source, tmp_path / "board", workers=2, retries=2, scratch=tmp_path / "scratch")
    assert calls and len(calls) == len(set(calls)), calls


# -- a board changed by hand ----------------------------------------------------------------------------------------

def _replace_zip(board: Path, pin: str, members: dict[str, bytes]) -> Path:
    """Put a zip of ``members`` in place of pin ``pin``'s, and its SHA-256 and size in the categories table, as a
    hand that edits a board would: the fetch's checks of the SHA-256 pass. The zip's path."""
    import pandas as pd

    (path,) = board.glob(f"{pin}/*/{pin}.zip")
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    path.write_bytes(payload.getvalue())
    opened = open_board(board)
    frame = opened.pins.pin_read("categories")
    wnid = pin.removeprefix(layout.VAL_PREFIX)
    prefix = "val_" if pin != wnid else ""
    row = frame.index[frame["id"] == wnid][0]
    frame.loc[row, f"{prefix}sha256"] = hashlib.sha256(payload.getvalue()).hexdigest()
    frame.loc[row, f"{prefix}bytes"] = len(payload.getvalue())
    # pins orders versions by their time to the second: make this one the latest for sure
    opened.pins.pin_write(pd.DataFrame(frame), name="categories", type="csv",
                          created=datetime.datetime.now() + datetime.timedelta(seconds=2))
    return path


@pytest.mark.parametrize("change", ["a file named as the cache's record", "a file named as the record being written",
                                    "no images", "a validation image less"])
def test_a_zip_changed_by_hand_is_refused_with_what_to_do(source, board, tmp_path, change):
    """A zip whose SHA-256 the table was made to match, but which no upload wrote: one holding a file named as the
    cache's own record of an extraction (it would be overwritten, and the category never count as cached), or
    another number of images than the table says (an empty zip gave a category no images). Nothing of it reaches the
    cache, the error names the category and its zip and says what to do, and doing it mends the board."""
    board = Path(shutil.copytree(board, tmp_path / "board"))
    wnid = imagenet_categories(board)[0]["id"]
    (good,) = board.glob(f"{wnid}/*/{wnid}.zip")
    with zipfile.ZipFile(good) as zf:
        images = {name: zf.read(name) for name in zf.namelist()}
    (val,) = board.glob(f"{layout.VAL_PREFIX}{wnid}/*/*.zip")
    with zipfile.ZipFile(val) as zf:
        val_images = {name: zf.read(name) for name in zf.namelist()}
    if change.startswith("a file named"):
        name = cache_module.MARKER + (".part" if "written" in change else "")
        path = _replace_zip(board, wnid, {**images, name: b'{"sha256": "x"}'})
        said = rf"holds a file named '\{name}', the name the cache keeps for its own record"
    elif change == "no images":
        path = _replace_zip(board, wnid, {})
        said = f"holds 0 files, but the categories pin says {PER_CLASS} images"
    else:
        path = _replace_zip(board, f"{layout.VAL_PREFIX}{wnid}", dict(list(val_images.items())[1:]))
        said = f"holds {VAL_PER_CLASS - 1} file, but the categories pin says {VAL_PER_CLASS} images"
    cache = tmp_path / "cache"
    what = f"category {wnid}" + (" \\(validation images\\)" if layout.VAL_PREFIX in path.name else "")
    with pytest.raises(IntegrityError, match=rf"^{what}: its zip {path} {said}.* and is not used; delete {path} \(an "
                                             "upload keeps a file that is there\\), then upload the category again"):
        imagenet_partition(0, 1, board, cache_dir=cache, workers=1)
    assert not (cache / ("val" if "validation" in what else "train") / wnid).exists()

    path.unlink()
    imagenet_upload(source, board, workers=2)
    result = imagenet_partition(0, 1, board, cache_dir=cache)
    assert result["category"].count(wnid) == PER_CLASS and result["val_category"].count(wnid) == VAL_PER_CLASS
    assert all(os.path.isfile(p) for p in result["image"] + result["val_image"])


def test_a_cache_record_naming_a_file_outside_its_folder_is_not_taken_for_a_complete_category(board, tmp_path):
    """A shared cache folder whose record (written by another hand) lists ``../../elsewhere``: the category is not
    taken as cached with a file outside its folder; it is fetched again, and the record it writes is the fetch's."""
    cache = tmp_path / "cache"
    first = imagenet_partition(0, 1, board, cache_dir=cache)
    wnid = first["categories"][0]
    item = _item(board, cache, wnid)
    marker = Path(item.dest) / cache_module.MARKER
    record = json.loads(marker.read_text())
    outside = tmp_path / "elsewhere.JPEG"
    outside.write_bytes(b"x" * record["files"][0][1])
    record["files"][0] = [os.path.relpath(outside, item.dest), *record["files"][0][1:]]
    marker.write_text(json.dumps(record))
    assert cache_module.cached_files(item.dest, item.sha256) is None
    again = imagenet_partition(0, 1, board, cache_dir=cache)
    assert str(outside) not in again["image"] and sorted(again["image"]) == sorted(first["image"])
    assert cache_module.cached_files(item.dest, item.sha256) is not None


_INTERRUPTED = textwrap.dedent("""
    import sys, time
    from alexnet.data.fetch import imagenet_partition
    from alexnet.storage import fetch
    download = fetch.download_verified

    def slow(*args, **kwargs):  # a zip takes a second to come, as over a slow link
        time.sleep(1)
        download(*args, **kwargs)
        sys.stdout.write("downloaded\\n")  # one write: two threads' print() may run their lines together
        sys.stdout.flush()

    fetch.download_verified = slow
    print("started", flush=True)
    imagenet_partition(0, 1, sys.argv[1], cache_dir=sys.argv[2], workers=2)
    print("returned", flush=True)
    """)


def test_ctrl_c_stops_a_fetch_after_the_downloads_under_way(board, tmp_path):
    """Ctrl-C half way through a fetch: the downloads under way finish (into the cache), no other starts, and the
    fetch ends with KeyboardInterrupt; before, the pool's exit waited for every zip of the partition."""
    zips = 2 * CLASSES
    child = subprocess.Popen([sys.executable, "-c", _INTERRUPTED, str(board), str(tmp_path / "cache")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=ctrl_c_as_in_a_terminal, env={**os.environ, "ALEXNET_PROGRESS": "0"})
    try:
        assert child.stdout.readline().strip() == "started"
        assert child.stdout.readline().strip() == "downloaded"  # the first zip in, another under way, the rest waiting
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert "KeyboardInterrupt" in err and "returned" not in out, err[-2000:]
    assert out.count("downloaded") <= 3 < zips - 1, out  # the first, and those under way when Ctrl-C came


_WAITING = textwrap.dedent("""
    import json, logging, sys
    from alexnet.data.fetch import imagenet_partition
    from alexnet.progress import watch_progress
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    bar = {"moved": 0, "total": None}

    def listen(desc, steps, total):
        bar["moved"] += steps
        bar["total"] = total

    with watch_progress(listen):
        result = imagenet_partition(0, 1, sys.argv[1], cache_dir=sys.argv[2], workers=2, validation=False)
    print("returned", json.dumps({"bar": bar, "downloaded": result["downloaded_bytes"]}), flush=True)
    """)


def test_ctrl_c_ends_a_fetch_that_waits_for_another_process_and_the_wait_names_it(board, tmp_path):
    """A fetch waiting for a category that another process fetches (held here) ignored Ctrl-C until that process
    was done, for ever if it was stuck; and the wait did not say which process it was."""
    from alexnet.storage.fetch import category_lock

    cache = tmp_path / "cache"
    root = cache_module.open_cache(cache, str(board))  # the cache as the fetch opens it
    wnids = [r["id"] for r in imagenet_categories(board)]
    with contextlib.ExitStack() as held:
        for wnid in wnids:  # "another process": each hold opens the lock's file anew, and a flock waits for it
            held.enter_context(category_lock(root, category_folder(root, wnid), f"category {wnid}"))
        child = subprocess.Popen([sys.executable, "-c", _WAITING, str(board), str(cache)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal,
                                 env={**os.environ, "ALEXNET_PROGRESS": "0"})
        try:
            said = read_until(child.stderr, "waiting for it", 60)
            time.sleep(0.5)  # the pool's second download waiting too (said at DEBUG)
            out, err, seconds = ctrl_c(child, 30)
        finally:
            child.kill()
            child.wait()
    assert "returned" not in out, out
    assert seconds < 5, f"{seconds:.1f} s after Ctrl-C"
    assert f"another process (process {os.getpid()} on {socket.gethostname()}, fetching since " in said, said
    assert "stopping the 2 zips under way" in err, err[-2000:]
    assert not any(cache.glob("train/*/*")), "nothing was fetched"


def test_a_category_another_process_brought_in_counts_on_the_bar_and_in_the_log(board, tmp_path):
    """A fetch that waited for another process used its copy: its bar stopped short of its total (the bytes it did
    not download), and each such category took a line of the log."""
    from alexnet.storage.fetch import category_lock

    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    imagenet_partition(0, 1, board, cache_dir=elsewhere, validation=False)  # a copy of each category, to install
    root = cache_module.open_cache(cache, str(board))
    rows = imagenet_categories(board)
    waited = rows[0]["id"]
    with category_lock(root, category_folder(root, waited), f"category {waited}"):  # "another process" fetches it
        child = subprocess.Popen([sys.executable, "-c", _WAITING, str(board), str(cache)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "ALEXNET_PROGRESS": "0"})
        try:
            said = read_until(child.stderr, "waiting for it", 60)
            shutil.copytree(elsewhere / "train" / waited, cache / "train" / waited)  # and installs it
        except BaseException:
            child.kill()
            raise
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err[-2000:]
    result = json.loads(out.split("returned ", 1)[1])
    train = sum(r["bytes"] for r in rows)
    assert result["downloaded"] == train - rows[0]["bytes"]
    assert result["bar"] == {"moved": train, "total": train}, "the bar ends full"
    log = said + err
    assert log.count("waiting for it") == 1 and "using its copy" not in log, log
    assert "1 zip brought in by another process meanwhile" in log, log


def test_a_board_uploaded_to_during_a_fetch_is_said_so_with_fetch_again(source, board, tmp_path, monkeypatch):
    """An upload that prunes the old zips while a fetch reads the table before it: the zips it names are gone. The
    error says to fetch again (which reads the new table), not to upload again."""
    from alexnet.data import fetch as data_fetch

    copy, changed = tmp_path / "board", tmp_path / "src"
    shutil.copytree(board, copy)
    shutil.copytree(source, changed)
    for folder in (changed / "ILSVRC" / "Data" / "CLS-LOC" / "train").iterdir():  # one image more in each category
        first = sorted(folder.iterdir())[0]
        shutil.copy(first, folder / f"{folder.name}_99999.JPEG")
    real = data_fetch.fetch_zips

    def upload_meanwhile(*args, **kwargs):
        imagenet_upload(changed, copy, workers=2, keep_versions=1)  # every zip anew, the old ones pruned
        return real(*args, **kwargs)

    monkeypatch.setattr(data_fetch, "fetch_zips", upload_meanwhile)
    with pytest.raises(BoardError) as raised:
        imagenet_partition(0, 1, copy, cache_dir=tmp_path / "cache", retries=0)
    said = str(raised.value)
    assert said.startswith(f"board {copy} was uploaded to while this fetch read it (its categories table was "), said
    assert said.endswith("Fetching again reads the new table: run the same fetch again."), said
    assert "upload the category again" not in said and "imagenet_upload" not in said
    monkeypatch.setattr(data_fetch, "fetch_zips", real)
    again = imagenet_partition(0, 1, copy, cache_dir=tmp_path / "cache")
    assert len(again["image"]) == CLASSES * (PER_CLASS + 1)
