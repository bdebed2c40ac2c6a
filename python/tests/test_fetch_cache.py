"""The fetch's cache under strain: processes sharing it, a disk that is full or cannot be written, fetches killed half
way, and a board whose zips were changed by hand."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from alexnet.data.fetch import imagenet_categories, imagenet_partition
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.storage import cache as cache_module
from alexnet.storage import fetch as fetch_module
from alexnet.storage import layout
from alexnet.storage.board import open_board
from alexnet.storage.cache import category_folder
from alexnet.storage.fetch import ZipItem

CLASSES, PER_CLASS, VAL_PER_CLASS = 4, 8, 2


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> Path:
    """A board of a few small categories, each with validation images."""
    root = tmp_path_factory.mktemp("fetch-cache")
    info = imagenet_synthetic(root / "src", classes=CLASSES, images_per_class=PER_CLASS, val_per_class=VAL_PER_CLASS,
                              seed=3, max_side=40)
    imagenet_upload(info["path"], root / "board", workers=2)
    return root / "board"


def zip_bytes(board: Path) -> int:
    """The bytes of every zip of ``board``, as its categories table gives them."""
    return sum(r["bytes"] + r["val_bytes"] for r in imagenet_categories(board))


# -- processes sharing one cache ------------------------------------------------------------------------------------

_SHARER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from alexnet.data.fetch import imagenet_partition
    board, cache, meet, me, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    (meet / f"ready-{me}").touch()
    while len(list(meet.glob("ready-*"))) < count:  # start together
        time.sleep(0.005)
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
                      "missing": missing, "reads": reads}))
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
    files, downloaded = fetch_module._fetch_one(item, open_board(board), str(cache), seen=None, retries=0,
                                                progress=None)
    assert not downloaded and sorted(files) == sorted(n for n in before if n != cache_module.MARKER)
    assert _inodes(dest) == before

    staging = tmp_path / "staging"
    shutil.copytree(dest, staging)
    fetch_module._install(str(staging), item.dest, item.sha256, seen=None)  # looked before it was installed
    assert _inodes(dest) == before and not staging.exists()
    # the copy the first look found is replaced (as when `verify` found it damaged), so is an incomplete one
    for looked in (cache_module.marker_stamp(item.dest), "incomplete"):
        shutil.copytree(dest, staging)
        if looked == "incomplete":
            (dest / cache_module.MARKER).unlink()
            looked = None
        before = _inodes(dest)
        fetch_module._install(str(staging), item.dest, item.sha256, seen=looked)
        assert not staging.exists() and set(_inodes(dest)) == set(before) | {cache_module.MARKER}
        assert not set(_inodes(dest).values()) & set(before.values())
        assert cache_module.cached_files(item.dest, item.sha256) is not None
