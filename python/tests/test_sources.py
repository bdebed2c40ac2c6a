"""ImageNet as people have it: each layout written by imagenet_synthetic(layout =) and uploaded in place gives the
board the extracted tree gives; from a local path, gs:// (emulator) and s3:// (moto); resumable; and damaged or
mislabelled sources get one clear error before anything is uploaded.

The synthetic set is tiny (6 categories of 4 images at most 40 pixels, 2 validation images each, the quirk files)
so that the module runs in well under a minute.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import threading
import time
import weakref
import zipfile
import zlib
from pathlib import Path

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_imagenet import killed_upload
from servers import random_bytes

from alexnet.data import archive_io, held, ilsvrc, packing, parquet, part_zip, tar_io, zip_io
from alexnet.data.classes import imagenet_classes
from alexnet.data.fetch import imagenet_categories, imagenet_partition
from alexnet.data.ilsvrc import DEVKIT, GROUND_TRUTH, TRAIN_TAR, VAL_TAR
from alexnet.data.kaggle_targz import KAGGLE_TARGZ
from alexnet.data.kaggle_zip import KAGGLE_ZIP
from alexnet.data.sources import held_out, open_source
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.data.val_solution import VAL_SOLUTION_FILE
from alexnet.errors import AlexnetError, LayoutError
from alexnet.storage.board import open_board

BUCKET = "alexnet-test"
CLASSES = 6
SMALL = {"classes": CLASSES, "images_per_class": 4, "val_per_class": 2, "seed": 3, "quirks": True, "max_side": 40}
ARCHIVE_LAYOUTS = ("archives", "kaggle_zip", "kaggle_targz", "parquet")
#: What a board's categories table must agree on across layouts.
COMPARED = ("id", "name", "index", "images", "bytes", "sha256", "val_images", "val_bytes", "val_sha256")


def table(board) -> list[dict]:
    return [{k: row[k] for k in COMPARED} for row in imagenet_categories(board)]


def bad_files(board) -> set[tuple[str, str]]:
    frame = open_board(board).pins.pin_read("bad_images")
    return set(zip(frame["category"], frame["file"], strict=True))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The synthetic ImageNet in every layout, and the board of its extracted (Kaggle) tree."""
    root = tmp_path_factory.mktemp("layouts")
    paths = {layout: imagenet_synthetic(root / layout, layout=layout, **SMALL)["path"]
             for layout in ("kaggle", *ARCHIVE_LAYOUTS, "imagefolder", "folders")}
    reference = root / "reference-board"
    imagenet_upload(paths["kaggle"], reference, workers=2)
    return {"root": root, "paths": paths, "reference": reference, "table": table(reference),
            "bad": bad_files(reference)}


def without_val(rows: list[dict]) -> list[dict]:
    return [{**row, "val_images": 0, "val_bytes": 0, "val_sha256": ""} for row in rows]


# -- every layout gives the same board -------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [*ARCHIVE_LAYOUTS, "imagefolder", "folders"])
def test_each_layout_uploads_the_board_of_the_extracted_tree(layout, made, tmp_path, caplog):
    board = tmp_path / "board"
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        report = imagenet_upload(made["paths"][layout], board, workers=2)
    # nothing but the quirk files said: no name left empty, no validation image missed, no file left out unsaid
    assert [r.getMessage() for r in caplog.records if "bad image" not in r.getMessage()
            and "gave no validation images" not in r.getMessage()] == []
    assert report["layout"] == layout and sorted(report["uploaded"]) == [r["id"] for r in made["table"]]
    # same categories, names, labels, image counts and zips byte for byte (sha256), validation included
    expected = made["table"] if layout != "folders" else without_val(made["table"])
    assert table(board) == expected
    assert bad_files(board) == made["bad"] and {b["file"].split("_")[0] for b in report["bad_images"]} == {
        made["table"][0]["id"]}
    again = imagenet_upload(made["paths"][layout], board, workers=2)
    assert again["uploaded"] == [] and len(again["skipped"]) == CLASSES and again["uploaded_bytes"] == 0


def test_names_come_from_the_standard_list_and_the_devkit(made):
    classes = imagenet_classes()
    assert [r["name"] for r in made["table"]] == [c["name"] for c in classes[:CLASSES]]
    assert [r["id"] for r in made["table"]] == [c["id"] for c in classes[:CLASSES]]


def test_the_class_list_is_ilsvrc2012():
    classes = imagenet_classes()
    ids = [c["id"] for c in classes]
    assert len(classes) == 1000 and ids == sorted(ids) and len(set(ids)) == 1000
    assert [c["index"] for c in classes] == list(range(1000))
    assert classes[0] == {"index": 0, "id": "n01440764", "name": "tench, Tinca tinca"}
    assert classes[999] == {"index": 999, "id": "n15075141", "name": "toilet tissue, toilet paper, bathroom tissue"}
    by_id = {c["id"]: c for c in classes}
    # the two cranes (bird and machine) and the two maillots of the devkit keep their own ids
    assert by_id["n02012849"]["name"] == by_id["n03126707"]["name"] == "crane"
    assert by_id["n03710637"]["name"] == "maillot" and by_id["n03710721"]["name"] == "maillot, tank suit"
    assert all(c["name"] and "\t" not in c["name"] for c in classes)


def test_a_compressed_training_tar_is_read_as_a_stream(made, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(made["paths"]["archives"], src)
    (src / f"{TRAIN_TAR}.gz").write_bytes(gzip.compress((src / TRAIN_TAR).read_bytes()))
    (src / TRAIN_TAR).unlink()
    board = tmp_path / "board"
    imagenet_upload(src, board, workers=2)
    assert table(board) == made["table"]
    assert imagenet_upload(src, board, workers=2)["uploaded"] == []


def test_no_extracted_copy_is_made(made, tmp_path, monkeypatch):
    """While a category is packed, the scratch folder holds the zips in flight and nothing else."""
    from alexnet.data import packing

    seen: list[tuple[int, int]] = []
    original = packing.publish_file

    def measure(board, path, *args, **kwargs):
        folder = Path(path).parent
        seen.append((sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()), os.path.getsize(path)))
        return original(board, path, *args, **kwargs)

    monkeypatch.setattr(packing, "publish_file", measure)
    for layout in ("archives", "kaggle_zip"):
        seen.clear()
        imagenet_upload(made["paths"][layout], tmp_path / f"board-{layout}", workers=1)
        assert len(seen) == 2 * CLASSES
        # one worker: the zip being packed is all there is (the owner marker aside)
        assert all(total - own < 1024 for total, own in seen), seen


def _tiny_jpeg() -> bytes:
    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(image, format="JPEG")
    return image.getvalue()


def _stream_uploader(tmp_path, categories: int, images: int, opener, read=lambda: None):
    """An upload (one worker) of a source read as a stream: ``categories`` training parts of ``images`` images each,
    whose ``Part.open`` is ``opener(wnid)``; ``read()`` is called after each part is read."""
    from alexnet.data.classes import class_ids
    from alexnet.data.packing import Uploader
    from alexnet.data.part_zip import Options
    from alexnet.data.parts import Part, Source

    class Stream(Source):
        layout, root, total_bytes = "folders", "a stream", 0

        def __init__(self):
            self.names = {}

        def parts(self, split, wanted, keep=None, workdir=""):
            if split != "train":
                return
            for wnid in class_ids()[:categories]:
                part = Part(wnid, "train", wnid.encode(), 1, opener(wnid), count=images)
                read()
                if wanted(part):
                    yield part

    return Uploader(Stream(), open_board(tmp_path / "board", write=True),
                    Options(min_images=0, resize=None, quality=90, retries=0), workers=1)


def test_a_part_is_let_go_once_it_is_done(tmp_path):
    """A part read from a stream holds its bytes until it is packed and published, and no longer: with 30 parts and
    one worker, no more than the parts in flight are ever alive (before, every part lived until the last was done)."""
    from alexnet.data.parts import Member

    jpeg = _tiny_jpeg()
    alive: set[int] = set()
    peak = [0]

    class Bytes:  # stands for a streamed category's bytes, held by its part
        def __init__(self, wnid: str):
            self.members = [Member(f"{wnid}_{k}.JPEG", jpeg) for k in range(2)]
            alive.add(id(self))
            weakref.finalize(self, alive.discard, id(self))

    def opener(wnid: str):
        held = Bytes(wnid)
        return lambda: lambda: held.members

    def read() -> None:
        peak[0] = max(peak[0], len(alive))

    uploader = _stream_uploader(tmp_path, 30, 2, opener, read)
    uploader.run()
    assert len(uploader.results) == 30 and not uploader.failures
    assert peak[0] <= 1 + 2 + 2, peak  # a worker, the 2 parts queued ahead of it, the part just read and the next


def test_a_part_whose_result_cannot_be_recorded_still_frees_its_slot(tmp_path, monkeypatch):
    """Recording a part's result runs in its future's callback; when it raises (a progress bar's write that fails),
    the part's slot is given back all the same: the upload ends instead of waiting for the slot for ever."""
    import threading

    from alexnet.data.classes import class_ids
    from alexnet.data.parts import Member

    members = [Member("a.JPEG", _tiny_jpeg())]
    uploader = _stream_uploader(tmp_path, 6, 1, lambda wnid: lambda: lambda: members)
    record = uploader._record

    def failing(part, result, source_bytes):
        if part.wnid == class_ids()[0]:
            raise OSError("the terminal went away")
        record(part, result, source_bytes)

    monkeypatch.setattr(uploader, "_record", failing)
    raised: list[BaseException] = []

    def upload() -> None:
        try:
            uploader.run()
        except Exception as error:  # what the upload makes of the lost result is not this test's
            raised.append(error)

    run = threading.Thread(target=upload, daemon=True)
    run.start()
    run.join(120)
    assert not run.is_alive(), "the upload waited for a slot that was never given back"
    assert sorted(wnid for wnid, _ in uploader.results) == list(class_ids()[1:6])


def test_every_source_takes_the_arguments_the_upload_gives():
    """The upload asks a source for its parts with ``(split, wanted, keep, workdir)``: the base class, whose
    signature a new source copies, declares them all as every source does (it declared no ``workdir``)."""
    import inspect

    from alexnet.data.ilsvrc import ArchivesSource
    from alexnet.data.kaggle_targz import KaggleTarGzSource
    from alexnet.data.kaggle_zip import KaggleZipSource
    from alexnet.data.parquet import ParquetSource
    from alexnet.data.parts import Source
    from alexnet.data.sources import FolderSource

    for source in (Source, ArchivesSource, FolderSource, KaggleTarGzSource, KaggleZipSource, ParquetSource):
        assert list(inspect.signature(source.parts).parameters) == ["self", "split", "wanted", "keep", "workdir"], \
            source.__name__


def test_one_part_per_cpu_is_packed_while_others_are_fetched_and_published(made, cloud_env, tmp_path, monkeypatch):
    """On one CPU with 4 workers, one category is zipped at a time, while other threads fetch their category's bytes
    from a bucket (two at once) and publish their zips (three at once): each barrier below breaks, and the upload
    with it, if fetching or publishing waited for the CPU's turn; and the board is the one of the extracted tree."""
    from alexnet.data import packing

    url = put_in_bucket("gs", made["paths"]["kaggle_zip"], f"{tmp_path.name}-zip")
    monkeypatch.setattr(packing, "usable_cpus", lambda: 1)
    lock = threading.Lock()
    now = {"fetching": 0, "packing": 0, "publishing": 0}
    most = dict(now)
    together = {"fetching": threading.Barrier(2, timeout=30), "publishing": threading.Barrier(3, timeout=30)}

    def tracked(kind, call):
        def run(*args, **kwargs):
            with lock:
                now[kind] += 1
                most[kind] = max(most[kind], now[kind])
                calls = most.setdefault(f"{kind} calls", 0) + 1
                most[f"{kind} calls"] = calls
            try:
                if kind in together and calls <= together[kind].parties:
                    together[kind].wait()
                elif kind == "packing":
                    time.sleep(0.05)  # time for a second packer to start, were there one
                return call(*args, **kwargs)
            finally:
                with lock:
                    now[kind] -= 1
        return run

    monkeypatch.setattr(archive_io.Files, "read_ranges", tracked("fetching", archive_io.Files.read_ranges))
    monkeypatch.setattr(packing, "zip_images", tracked("packing", packing.zip_images))
    monkeypatch.setattr(packing, "publish_file", tracked("publishing", packing.publish_file))
    board = tmp_path / "board"
    imagenet_upload(url, board, workers=4)
    assert most["packing"] == 1
    assert most["fetching"] >= 2 and most["publishing"] >= 3
    assert most["packing calls"] == most["publishing calls"] == 2 * CLASSES
    assert table(board) == made["table"]


# -- a category read in place: mapped, and one image at a time ---------------------------------------------------


def first_part(path, split: str = "train"):
    from alexnet.data.sources import open_source

    return next(open_source(path).parts(split, lambda part: True))


def test_zip_members_are_inflated_one_at_a_time(made, monkeypatch):
    inflated: list[int] = []
    original = zip_io.inflate_raw

    def count(data, size):
        inflated.append(size)
        return original(data, size)

    monkeypatch.setattr(zip_io, "inflate_raw", count)
    for split in ("train", "val"):
        part = first_part(made["paths"]["kaggle_zip"], split)
        members = iter(part.open()())
        inflated.clear()
        first = next(members)
        assert len(inflated) <= 1, "only the first member is inflated before it is packed"
        rest = list(members)
        names = [m.name for m in (first, *rest)]
        assert names == sorted(names) and len(names) == part.count
        assert len(inflated) >= 2


def record_read_ahead(monkeypatch) -> list[tuple[str, int, int]]:
    """Where the kernel is asked to read ahead, as (path, start, end), once os.posix_fadvise is patched to say so."""
    asked: list[tuple[str, int, int]] = []
    original = os.posix_fadvise

    def record(fd, offset, length, advice):
        assert advice == os.POSIX_FADV_WILLNEED
        asked.append((os.readlink(f"/proc/self/fd/{fd}"), offset, offset + length))
        return original(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    return asked


def covered(asked: list[tuple[str, int, int]], path: str) -> list[tuple[int, int]]:
    """The byte ranges of ``path`` asked for, pieces that follow one another joined."""
    joined: list[tuple[int, int]] = []
    for _, start, end in sorted(a for a in asked if a[0] == path):
        assert 0 < end - start <= archive_io.READ_AHEAD_PIECE
        if joined and joined[-1][1] == start:
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this system")
@pytest.mark.parametrize("layout", ["kaggle", "archives", "kaggle_zip"])
def test_a_local_part_is_asked_of_the_kernel_when_it_is_opened(layout, made, monkeypatch):
    """Opening a part (which the thread reading the source does, up to ``workers + 2`` parts ahead of packing) asks
    the kernel for all of its bytes, so that the disk reads them while the parts before it are packed."""
    asked = record_read_ahead(monkeypatch)
    for split in ("train", "val"):
        part = first_part(made["paths"][layout], split)
        asked.clear()
        part.open()
        paths = dict.fromkeys(path for path, _, _ in asked)
        assert sum(e - s for path in paths for s, e in covered(asked, path)) == part.source_bytes


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this system")
def test_a_folder_category_is_read_ahead_before_its_first_file_is_read(made, monkeypatch):
    """An extracted tree's category: the kernel is asked for all its files when the part is opened, and each file
    is read only when it is reached."""
    asked = record_read_ahead(monkeypatch)
    for split in ("train", "val"):
        part = first_part(made["paths"]["kaggle"], split)
        asked.clear()
        members = part.open()()
        before = list(asked)
        got = list(members)
        assert len(asked) == len(before), "nothing more is asked while the files are read"
        names = [m.name for m in got]
        assert names == sorted(names) and len(got) == part.count
        paths = list(dict.fromkeys(path for path, _, _ in before))
        # every file with bytes, whole, in the order they are read (an empty file has nothing to read ahead)
        assert [os.path.basename(path) for path in paths] == [m.name for m in got if m.data]
        assert all(covered(before, path) == [(0, os.path.getsize(path))] for path in paths)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this system")
def test_a_mapped_range_is_read_ahead_whole_in_pieces(tmp_path, monkeypatch):
    """The kernel reads at most its read-ahead window for one request: a category's range longer than that is asked
    for piece by piece, to its end (clipped at the end of the file)."""
    size = 5 * archive_io.READ_AHEAD_PIECE + 1234
    path = tmp_path / "archive"
    path.write_bytes(random_bytes(size))
    asked = record_read_ahead(monkeypatch)
    ranges = [(100, 3 * archive_io.READ_AHEAD_PIECE + 7), (4 * archive_io.READ_AHEAD_PIECE, size + 999)]
    archive_io.Files.at(tmp_path).read_ranges(str(path), ranges)
    assert covered(asked, str(path)) == [(100, 3 * archive_io.READ_AHEAD_PIECE + 7),
                                         (4 * archive_io.READ_AHEAD_PIECE, size)]


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this system")
def test_a_stream_is_asked_of_the_kernel_ahead_of_its_reads(tmp_path, monkeypatch):
    """A local tar.gz read front to back: when a byte is read, the kernel has been asked for it and for at least
    half of STREAM_AHEAD beyond, each byte once; a seek back asks again from there."""
    piece = archive_io.READ_AHEAD_PIECE
    monkeypatch.setattr(archive_io, "STREAM_AHEAD", 4 * piece)
    size = 10 * piece + 77
    path = tmp_path / "stream.tar.gz"
    path.write_bytes(content := random_bytes(size))
    asked = record_read_ahead(monkeypatch)
    read = bytearray()
    with archive_io.Files.at(tmp_path).open_stream(str(path)) as f:
        while chunk := f.read(50_000):
            read += chunk
            (start, end), = covered(asked, str(path))
            assert start == 0 and end >= min(len(read) + 2 * piece, size)
        assert bytes(read) == content
        once = sum(e - s for _, s, e in asked)
        assert once == covered(asked, str(path))[0][1], "no byte asked for twice"
        before = len(asked)
        f.seek(piece)
        assert f.read(10) == content[piece:piece + 10]
        assert covered(asked[before:], str(path)) == [(piece, 5 * piece)]


def test_tar_members_are_copied_out_when_reached(made):
    with tarfile.open(Path(made["paths"]["archives"]) / TRAIN_TAR) as outer:
        inner = next(m for m in outer if m.name.endswith(".tar"))
        blob = bytearray(outer.extractfile(inner).read())
    with tarfile.open(fileobj=io.BytesIO(bytes(blob))) as tar:
        images = sorted((m for m in tar if m.isfile() and m.size > 0), key=lambda m: os.path.basename(m.name))
    members = tar_io.tar_members(blob, "a category's tar")  # headers read here, no image yet
    last = images[-1]
    blob[last.offset_data:last.offset_data + 4] = b"LAZY"
    by_name = {m.name: m for m in members}
    assert by_name[os.path.basename(last.name)].data[:4] == b"LAZY"
    assert list(by_name) == sorted(by_name)
    with pytest.raises(LayoutError, match="not a readable tar"):
        tar_io.tar_members(bytes(blob[:last.offset_data + 10]), "a category's tar")


def a_tar(fmt: int, *names: str, link: bool = False) -> bytes:
    """A tar in ``fmt`` holding a folder, ``names`` with a few bytes each (one empty) and, with ``link``, a symlink."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        folder = tarfile.TarInfo("photos")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for k, name in enumerate(names):
            data = random_bytes(700 * k)
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_300_000_000 + k
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo("photos/link.JPEG")
            info.type, info.linkname = tarfile.SYMTYPE, "b.JPEG"
            tar.addfile(info)
    return out.getvalue()


def as_tarfile_reads(data: bytes) -> list[tar_io.TarEntry]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return [tar_io.TarEntry(m.name, m.offset_data, m.size, int(m.mtime)) for m in tar if m.isfile()]


PLAIN_NAMES = ("empty.JPEG", "photos/a.JPEG", "b.JPEG", "notes.txt", "photos/été.JPEG")
LONG_NAME = "photos/" + "x" * 120 + ".JPEG"


@pytest.mark.parametrize(("fmt", "names", "link", "plain"), [
    (tarfile.GNU_FORMAT, PLAIN_NAMES, False, True),
    (tarfile.USTAR_FORMAT, PLAIN_NAMES, False, True),
    (tarfile.PAX_FORMAT, PLAIN_NAMES[:4], False, True),
    (tarfile.USTAR_FORMAT, (*PLAIN_NAMES, "p" * 90 + "/" + "q" * 60 + ".JPEG"), False, True),  # ustar's prefix
    (tarfile.GNU_FORMAT, (*PLAIN_NAMES, LONG_NAME), False, False),  # a GNU long-name record
    (tarfile.PAX_FORMAT, PLAIN_NAMES, False, False),  # a pax record for the name that is not ASCII
    (tarfile.PAX_FORMAT, (*PLAIN_NAMES[:4], LONG_NAME), False, False),
    (tarfile.GNU_FORMAT, PLAIN_NAMES, True, False),
], ids=["gnu", "ustar", "pax-plain", "ustar-prefix", "gnu-long-name", "pax-utf8", "pax-long-name", "symlink"])
def test_tar_headers_are_read_as_tarfile_reads_them(fmt, names, link, plain, monkeypatch):
    """Plain headers are read without tarfile, anything else with it; the files found are the same either way."""
    data = a_tar(fmt, *names, link=link)
    expected = as_tarfile_reads(data)
    assert [os.path.basename(e.name) for e in expected] == [os.path.basename(n) for n in names]
    view = memoryview(data)
    read = tar_io.plain_tar_entries(lambda at: bytes(view[at:at + 512]), len(data))
    assert read == (expected if plain else None)
    if plain:  # tarfile is not needed at all
        monkeypatch.setattr(tar_io.tarfile, "open", lambda *a, **k: pytest.fail("tarfile read a plain tar"))
    assert tar_io.tar_index(io.BytesIO(data), "a tar", len(data)) == expected
    members = {m.name: m for m in tar_io.tar_members(data, "a tar")}
    assert sorted(members) == sorted(os.path.basename(n) for n in names)
    for entry in expected:
        member = members[os.path.basename(entry.name)]
        if entry.name.endswith(".JPEG"):
            assert member.data == data[entry.offset:entry.offset + entry.size]
        else:
            assert member.data is None and "not an image" in member.reason


def test_every_synthetic_category_tar_is_read_without_tarfile(made):
    """The category tars imagenet_synthetic() writes (plain headers, as in ImageNet's) take the quick way."""
    with tarfile.open(Path(made["paths"]["archives"]) / TRAIN_TAR) as outer:
        blobs = [outer.extractfile(m).read() for m in outer if m.name.endswith(".tar")]
    assert len(blobs) == CLASSES
    for blob in blobs:
        view = memoryview(blob)
        assert tar_io.plain_tar_entries(lambda at, v=view: bytes(v[at:at + 512]), len(blob)) \
            == as_tarfile_reads(blob)


@pytest.mark.parametrize("damage", ["checksum", "cut-in-a-header", "cut-in-data"])
def test_a_damaged_tar_is_left_to_tarfile_which_says_so(damage):
    data = bytearray(a_tar(tarfile.GNU_FORMAT, *PLAIN_NAMES))
    second = as_tarfile_reads(bytes(data))[2].offset - 512  # the header of the third file
    if damage == "checksum":
        data[second] ^= 0x01
    cut = {"checksum": len(data), "cut-in-a-header": second + 100, "cut-in-data": second + 600}[damage]
    data = bytes(data[:cut])
    view = memoryview(data)
    assert tar_io.plain_tar_entries(lambda at: bytes(view[at:at + 512]), len(data)) is None
    with pytest.raises(LayoutError, match=r"(cut short|damaged header at byte \d+).*download it again"):
        tar_io.tar_index(io.BytesIO(data), "a tar", len(data))
    with pytest.raises(LayoutError, match=r"not a readable tar.*download it again"):
        tar_io.tar_members(data, "a tar")


def streamed(data: bytes, read_every: int = 1) -> list[tuple[tar_io.TarEntry, bytes | None]]:
    """The files :func:`tar_io.stream_tar` finds in ``data`` gzipped, the bytes of every ``read_every``-th read."""
    found: list[tuple[tar_io.TarEntry, bytes | None]] = []
    with gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(data)), mode="rb") as stream:
        for k, (entry, read) in enumerate(tar_io.stream_tar(stream)):
            found.append((entry, read() if k % read_every == 0 else None))
    return found


@pytest.mark.parametrize(("fmt", "names", "link", "plain"), [
    (tarfile.GNU_FORMAT, PLAIN_NAMES, False, True),
    (tarfile.USTAR_FORMAT, (*PLAIN_NAMES, "p" * 90 + "/" + "q" * 60 + ".JPEG"), False, True),
    (tarfile.GNU_FORMAT, (*PLAIN_NAMES, LONG_NAME, "after.JPEG"), False, False),  # tarfile from the long name on
    (tarfile.PAX_FORMAT, PLAIN_NAMES, False, False),
    (tarfile.GNU_FORMAT, PLAIN_NAMES, True, False),
], ids=["gnu", "ustar-prefix", "gnu-long-name", "pax-utf8", "symlink"])
@pytest.mark.parametrize("read_every", [1, 2], ids=["all-read", "every-other-skipped"])
def test_a_tar_streamed_is_read_as_tarfile_reads_it(fmt, names, link, plain, read_every, monkeypatch):
    """A tar read front to back from a gzip stream: the files tarfile finds, with their bytes; those not read are
    skipped; plain headers are read without tarfile, and tarfile takes over at the first other one."""
    data = a_tar(fmt, *names, link=link)
    expected = as_tarfile_reads(data)
    if plain:
        monkeypatch.setattr(tar_io.tarfile, "open", lambda *a, **k: pytest.fail("tarfile read a plain tar"))
    found = streamed(data, read_every)
    assert [entry for entry, _ in found] == expected
    for k, (entry, content) in enumerate(found):
        assert content == (data[entry.offset:entry.offset + entry.size] if k % read_every == 0 else None)


def test_a_tar_streamed_by_tarfile_keeps_no_headers(monkeypatch):
    """tarfile would keep every header it reads (about 490 bytes each, a GB for Kaggle's two million files)."""
    names = [LONG_NAME.replace("x" * 120, f"{k:0120d}") for k in range(300)]  # long names: tarfile reads them
    data = a_tar(tarfile.GNU_FORMAT, *names)

    live: weakref.WeakSet[tarfile.TarInfo] = weakref.WeakSet()
    made = [0]

    class Counted(tarfile.TarInfo):
        """A header tarfile made, tracked while it lives (unreachable cycles count until they are collected)."""

        def __init__(self, *args: object, **kwargs: object):
            super().__init__(*args, **kwargs)
            made[0] += 1
            live.add(self)

    monkeypatch.setattr(tarfile.TarFile, "tarinfo", Counted)
    alive = []
    with gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(data)), mode="rb") as stream:
        for _entry, read in tar_io.stream_tar(stream):
            read()
            alive.append(len(live))
    assert len(alive) == len(names)
    assert made[0] >= 2 * len(names)  # tarfile read every one (a long name's header and its file's)
    assert max(alive) <= 3, alive


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=["plain", "tarfile"])
@pytest.mark.parametrize("damage", ["checksum", "cut-in-data"])
def test_a_damaged_tar_streamed_is_an_error_not_its_end(fmt, damage):
    """tarfile ends a tar quietly at a header it cannot read: in a stream that lost every file after it."""
    data = bytearray(a_tar(fmt, *PLAIN_NAMES))
    third = as_tarfile_reads(bytes(data))[2].offset - 512
    if damage == "checksum":
        data[third] ^= 0x01
    else:
        data = data[:third + 600]
    with pytest.raises((tarfile.ReadError, EOFError), match=rf"damaged header at byte {third}|ends inside"):
        streamed(bytes(data))


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=["plain", "tarfile"])
def test_a_gzip_stream_is_read_to_its_end_so_its_crc_is_checked(fmt):
    """Even past zero blocks beyond the tar's end (a tar written in large records has them)."""
    data = bytearray(gzip.compress(a_tar(fmt, *PLAIN_NAMES) + bytes(1 << 20)))
    data[-6] ^= 0x01  # the CRC-32 in the gzip trailer
    with gzip.GzipFile(fileobj=io.BytesIO(bytes(data)), mode="rb") as stream, \
            pytest.raises(gzip.BadGzipFile, match="CRC check failed"):
        for _entry, read in tar_io.stream_tar(stream):
            read()


@pytest.mark.parametrize(("mapped", "advised"), [(True, True), (True, False), (False, True)],
                         ids=["mapped", "mapped-without-fadvise", "read"])
def test_ranges_of_a_local_file(tmp_path, monkeypatch, mapped, advised):
    data = random_bytes(300_000)
    path = tmp_path / "archive"
    path.write_bytes(data)
    if not mapped:
        def refuse(*args, **kwargs):
            raise OSError("this file system cannot map files")

        monkeypatch.setattr(archive_io.mmap, "mmap", refuse)
    if not advised:
        monkeypatch.delattr(os, "posix_fadvise", raising=False)
    files = archive_io.Files.at(tmp_path)
    ranges = [(70_001, 140_000), (0, 10), (5, 5), (299_990, 300_000), (299_995, 310_000), (4_097, 200_000)]
    got = files.read_ranges(str(path), ranges)
    assert [bytes(b) for b in got] == [data[s:e] for s, e in ranges]
    assert all(isinstance(b, memoryview) == mapped for b in got)
    ahead = files.read_ranges_ahead(str(path), [(12_345, 67_890)])
    assert bytes(ahead()[0]) == data[12_345:67_890]


SLOW_READER = """
import json, sys, threading, time
from alexnet.data import archive_io
path, size = sys.argv[1], int(sys.argv[2])
# opened before the clock starts: what it imports (fsspec, ssl, ...) would load libraries from the slowed disk
files = archive_io.Files.at(path)
gaps, done = [], threading.Event()

def tick():  # wakes every millisecond, and needs the GIL each time
    last = time.monotonic()
    while not done.is_set():
        time.sleep(0.001)
        now = time.monotonic()
        gaps.append(now - last)
        last = now

ticker = threading.Thread(target=tick)
ticker.start()
time.sleep(0.05)
start = time.monotonic()
view = files.read_ranges_ahead(path, [(0, size)])()[0]
total = sum(view[k] for k in range(0, size, 4096))  # a page at a time, as headers are parsed
elapsed = time.monotonic() - start
done.set()
ticker.join()
# the reading thread held the GIL while the disk read: the ticker stopped for 0.1 s or more, many times over
stalls = [gap for gap in gaps if gap >= 0.1]
print(json.dumps({"elapsed": elapsed, "longest": max(gaps), "stalls": len(stalls), "stalled": sum(stalls),
                  "sum": total}))
"""


def test_a_mapped_range_is_waited_for_without_holding_the_gil(tmp_path):
    """A thread that touches a mapped page the disk has not read yet holds the GIL while it waits, stopping every
    other thread of the upload: a part's bytes are waited for by reads instead, before they are used. Read here
    from a disk slowed to 1 MB/s (a blkio cgroup, as root) a page at a time, the other thread of the reading
    process is not stopped again and again (without the wait it stopped for each 128 KB piece the disk read, 0.1-0.2 s
    each time)."""
    blkio = Path("/sys/fs/cgroup/blkio")
    if os.geteuid() != 0 or not (blkio / "blkio.throttle.read_bps_device").exists():
        pytest.skip("needs root and cgroup v1's blkio controller to slow a disk")
    path = tmp_path / "archive"
    size = 2 << 20
    data = random_bytes(size)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    dev = os.stat(path).st_dev
    sysfs = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
    if not (sysfs / "dev").exists():
        pytest.skip(f"{tmp_path} is not on a block device")
    disk = (sysfs.parent if (sysfs / "partition").exists() else sysfs) / "dev"
    group = blkio / f"alexnet-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "blkio.throttle.read_bps_device").write_text(f"{disk.read_text().strip()} {1 << 20}")
        ran = subprocess.run(["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"),
                              sys.executable, "-c", SLOW_READER, str(path), str(size)],
                             capture_output=True, text=True, timeout=120, check=False)
    finally:
        group.rmdir()
    assert ran.returncode == 0, ran.stderr[-3000:]
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["sum"] == sum(data[k] for k in range(0, size, 4096))
    assert seen["elapsed"] >= 1.5, seen  # the disk was slow: 2 MB at 1 MB/s
    # without the wait, each 128 KB piece the disk reads stops the ticker for 0.125 s or more: about 16 stalls,
    # 2 s in all; a busy machine may hold the ticker back once in a while (76 ms seen under the whole suite)
    assert seen["stalls"] <= 1 and seen["stalled"] < 0.3, seen


# -- from buckets --------------------------------------------------------------------------------------------


def put_in_bucket(kind: str, local: str, name: str) -> str:
    from alexnet.storage.location import open_filesystem

    url = f"{kind}://{BUCKET}/{name}"
    fs = open_filesystem(url, write=True)
    for path in sorted(Path(local).rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{BUCKET}/{name}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return url


@pytest.mark.parametrize("kind", ["gs", "s3"])
def test_a_source_in_a_bucket_that_is_not_there_says_so(kind, cloud_env, tmp_path):
    with pytest.raises(LayoutError, match=rf"^ImageNet source {kind}://no-such-bucket/imagenet does not exist, nor "
                                          r"does its bucket 'no-such-bucket': it is none of the layouts read"):
        imagenet_upload(f"{kind}://no-such-bucket/imagenet", tmp_path / "board")
    with pytest.raises(LayoutError, match=rf"^ImageNet source {kind}://{BUCKET}/no-such-folder does not exist: it is"):
        imagenet_upload(f"{kind}://{BUCKET}/no-such-folder", tmp_path / "board")


@pytest.mark.parametrize("kind", ["gs", "s3"])
@pytest.mark.parametrize("layout", [*ARCHIVE_LAYOUTS, "kaggle", "imagefolder", "folders"])
def test_from_a_bucket(kind, layout, made, cloud_env, tmp_path):
    """Each layout read in place from a bucket gives the board of the local extracted tree: the archives' ranges, the
    extracted trees' objects (listed once, their folders the prefixes of their names), the same zips byte for byte,
    the same bad images named; uploaded again, nothing is."""
    url = put_in_bucket(kind, made["paths"][layout], f"{tmp_path.name}-{layout}")
    board = tmp_path / "board"
    report = imagenet_upload(url, board, workers=2)
    assert report["source"].startswith(url) and report["layout"] == layout
    assert table(board) == (made["table"] if layout != "folders" else without_val(made["table"]))
    assert bad_files(board) == made["bad"]
    again = imagenet_upload(url, board, workers=2)
    assert again["uploaded"] == [] and len(again["skipped"]) == CLASSES


class TreeBucket:
    """A bucket holding a local folder's files under ``gs://b/x``, as gcsfs and s3fs answer for it: delimited
    listings (folders the prefixes of object names), objects read whole; every listing and fetch is recorded."""

    def __init__(self, local: Path, gone: tuple[str, ...] = (), sizes: dict[str, int] | None = None,
                 failing: dict[str, list[BaseException]] | None = None):
        self.objects = {f"b/x/{p.relative_to(local).as_posix()}": p.read_bytes()
                        for p in sorted(local.rglob("*")) if p.is_file()}
        self.gone, self.sizes = set(gone), sizes or {}
        #: the errors each object's next fetches fail with, by its file name, one per fetch
        self.failing = {name: list(errors) for name, errors in (failing or {}).items()}
        self.listed: list[str] = []
        self.fetched: list[list[str]] = []
        self.lock = threading.Lock()
        self.in_flight = self.most = 0
        self.overlapping: list[tuple[str, int]] = []  # each listing's path, with the listings in flight as it began

    def _read(self, path):
        name = path.rsplit("/", 1)[1]
        if name in self.gone:
            return FileNotFoundError(path)
        if self.failing.get(name):
            return self.failing[name].pop(0)
        return self.objects[path]

    def ls(self, path, detail=True, refresh=False):
        with self.lock:
            self.listed.append(path)
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.overlapping.append((path, self.in_flight))
        time.sleep(0.005)  # a request's round trip: listings sent together overlap
        with self.lock:
            self.in_flight -= 1
        folders, files = {}, {}
        for name, data in self.objects.items():
            if name.startswith(path + "/"):
                rest = name[len(path) + 1:]
                if "/" in rest:
                    folder = f"{path}/{rest.split('/')[0]}"
                    folders[folder] = {"name": folder, "type": "directory", "size": 0}
                else:
                    files[name] = {"name": name, "type": "file", "generation": 1,
                                   "size": self.sizes.get(name[len("b/x/"):], len(data))}
        if not folders and not files:
            raise FileNotFoundError(path)
        entries = [*folders.values(), *files.values()]  # gcsfs's order: the folders, then the objects
        return entries if detail else [entry["name"] for entry in entries]

    def invalidate_cache(self, path=None):
        pass

    def isfile(self, path):
        return path.split("://", 1)[-1] in self.objects

    def isdir(self, path):
        return any(n.startswith(path.split("://", 1)[-1] + "/") for n in self.objects)

    def cat_file(self, path, start=None, end=None):
        got = self._read(path.split("://", 1)[-1])
        if isinstance(got, BaseException):
            raise got
        return got

    def cat_ranges(self, paths, starts, ends, on_error="return"):
        with self.lock:
            self.fetched.append(list(paths))
        return [self._read(p) for p in paths]


def bucket_tree(fs):
    from alexnet.data.tree_files import BucketTree

    return BucketTree(archive_io.Files(fs, "gs://b/x"))


@pytest.mark.parametrize("layout", ["kaggle", "imagefolder", "folders"])
def test_a_bucket_tree_reads_as_the_local_one_listing_only_what_it_reads(layout, made, tmp_path, caplog):
    """The tree read from a bucket is the local tree, its paths the bucket's URLs: the same categories, names, files,
    validation labels and warnings. Each folder is listed once, and only those the reading asks about: Kaggle's
    annotations (544,546 objects in ImageNet) are never listed."""
    from alexnet.data.imagenet import read_imagenet, read_tree

    local = Path(made["paths"][layout])
    copy = tmp_path / "tree"
    shutil.copytree(local, copy)
    if layout == "kaggle":
        (copy / "ILSVRC" / "Annotations" / "CLS-LOC" / "train" / "n0").mkdir(parents=True)
        (copy / "ILSVRC" / "Annotations" / "CLS-LOC" / "train" / "n0" / "n0_1.xml").write_text("<annotation/>")
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        expected = read_imagenet(copy)
        said_local = [r.getMessage().replace(str(copy), "gs://b/x") for r in caplog.records]
        caplog.clear()
        fs = TreeBucket(copy)
        got = read_tree(bucket_tree(fs), "gs://b/x")
        said_bucket = [r.getMessage() for r in caplog.records]

    def url(path: str) -> str:
        return "gs://b/x" + path[len(str(copy)):]

    assert got.layout == expected.layout == layout and got.root == "gs://b/x"
    assert [(c.id, c.name, c.index, c.files) for c in got.categories] == [
        (c.id, c.name, c.index, tuple(map(url, c.files))) for c in expected.categories]
    assert got.val_files == tuple(map(url, expected.val_files)) and got.val_labels == expected.val_labels
    assert said_bucket == said_local
    assert len(fs.listed) == len(set(fs.listed)), "each folder listed once"
    assert not [p for p in fs.listed if "Annotations" in p]
    # the category folders, and torchvision's val/<wnid>/ ones, listed several at a time, not one after another
    for kind in ("train", "val") if layout == "imagefolder" else ("train",):
        folders = [(p, n) for p, n in fs.overlapping if re.search(rf"/{kind}/n\d+$", p) or layout == "folders"]
        assert max(n for _, n in folders) > 1, (kind, fs.overlapping)


def test_a_bucket_trees_images_are_fetched_together_the_next_ones_while_these_are_packed(made, tmp_path, monkeypatch):
    """A category's objects are fetched FILES_AT_ONCE at a time in one call (its requests sent together), the first
    when the members are asked for (before a packing slot is waited for), the next while the first are used; an
    object gone since the listing, or larger than an image may be, is named with why, and the second is not
    fetched; one whose fetch failed once is fetched again."""
    from alexnet.data import images, tree_files
    from alexnet.data.imagenet import read_tree
    from alexnet.data.sources import FolderSource

    monkeypatch.setattr(tree_files, "FILES_AT_ONCE", 3)
    folder = tmp_path / "tree" / "n01440764"
    folder.mkdir(parents=True)
    for i in range(8):
        (folder / f"n01440764_{i}.JPEG").write_bytes(bytes([i]) * 100)
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 1000)
    fs = TreeBucket(tmp_path / "tree", gone=("n01440764_2.JPEG",), sizes={"n01440764/n01440764_5.JPEG": 5000},
                    failing={"n01440764_6.JPEG": [ConnectionResetError(104, "reset by peer")]})
    tree = bucket_tree(fs)
    source = FolderSource(read_tree(tree, "gs://b/x"), files=tree)
    (part,) = list(source.parts("train", lambda part: True))
    assert part.source_bytes == 7 * 100 + 5000
    members = iter(part.open()())
    time.sleep(0.2)
    assert len(fs.fetched) >= 1, "the first window is fetched once the members are asked for, before they are used"
    first = next(members)
    assert first == ("n01440764_0.JPEG", bytes([0]) * 100, "", None)
    time.sleep(0.2)
    assert len(fs.fetched) == 2, "the second window is fetched while the first is used"
    rest = list(members)
    assert [len(window) for window in fs.fetched] == [3, 2, 2], "5 is not fetched"
    assert "n01440764/n01440764_5.JPEG" not in {p.rsplit("/", 2)[1] + "/" + p.rsplit("/", 1)[1]
                                                for window in fs.fetched for p in window}
    by_name = {m.name: m for m in [first, *rest]}
    assert len(by_name) == 8 and by_name["n01440764_7.JPEG"].data == bytes([7]) * 100
    assert by_name["n01440764_2.JPEG"] == ("n01440764_2.JPEG", None, tree_files.GONE, None)
    assert by_name["n01440764_5.JPEG"].data is None and "5,000" in by_name["n01440764_5.JPEG"].reason
    assert by_name["n01440764_6.JPEG"].data == bytes([6]) * 100, "fetched again after a dropped connection"


def test_a_bucket_trees_object_that_cannot_be_fetched_fails_its_part_not_one_image(tmp_path, monkeypatch):
    """A fetch failing for good was named among the bad images and the category counted as done: a dropped
    connection kept the image off the board for good (the next upload skipped the category). It fails the part now,
    which the next upload reads again; an object the credentials may list but not read says so."""
    from alexnet.data.imagenet import read_tree
    from alexnet.data.sources import FolderSource
    from alexnet.errors import BoardError
    from alexnet.storage import transfer

    monkeypatch.setattr(transfer, "backoff", lambda attempt: 0.0)
    folder = tmp_path / "tree" / "n01440764"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"n01440764_{i}.JPEG").write_bytes(bytes([i]) * 100)
    for error, raised in ((ConnectionResetError(104, "reset by peer"), BoardError),
                          (PermissionError("Forbidden"), BoardError)):
        fs = TreeBucket(tmp_path / "tree", failing={"n01440764_1.JPEG": [error] * 10})
        tree = bucket_tree(fs)
        (part,) = list(FolderSource(read_tree(tree, "gs://b/x"), files=tree).parts("train", lambda part: True))
        with pytest.raises(raised) as caught:
            list(part.open()())
        said = str(caught.value)
        assert ("access to gs://b/x/n01440764/n01440764_1.JPEG was refused (Forbidden)" in said
                if isinstance(error, PermissionError) else "fetching gs://b/x/n01440764/n01440764_1.JPEG" in said), said


def test_a_bucket_trees_odd_objects_are_read_as_the_folders_they_stand_for(made, tmp_path):
    """An object named as a category folder (an old tool's marker, no slash) dropped the category on GCS, whose
    listing gives it after the folder; a folder's own marker object (``folder/``) is none of its names; the name files
    are looked for up to the bucket, not above it; and the category folders are listed 16 at a time as they are read,
    so that a first one without images stops the reading after one round of listings."""
    from alexnet.data import tree_files
    from alexnet.data.imagenet import read_imagenet, read_tree

    local = Path(made["paths"]["folders"])
    fs = TreeBucket(local)
    first = sorted(p.name for p in local.iterdir() if p.is_dir())[0]
    fs.objects[f"b/x/{first}"] = b""  # the marker object of the folder, named as the folder
    fs.objects["b/x/_hidden/"] = b""
    got = read_tree(bucket_tree(fs), "gs://b/x")
    assert [c.id for c in got.categories] == [c.id for c in read_imagenet(local).categories]
    tree = bucket_tree(fs)
    assert tree.dirname("gs://b/x") == "gs://b" and tree.dirname("gs://b") == "gs://b"
    assert archive_io.Files(fs, "gs://b/x").names("b/x/_hidden") == []

    many = tmp_path / "many"
    for k in range(40):
        (many / f"n{k:08d}").mkdir(parents=True)
        (many / f"n{k:08d}" / "notes.txt").write_text("no image here")
    fs = TreeBucket(many)
    with pytest.raises(LayoutError, match=r"n00000000 holds no images"):
        read_tree(bucket_tree(fs), "gs://b/x")
    assert len(fs.listed) == 1 + tree_files.LISTINGS_AT_ONCE, fs.listed


def test_a_bucket_range_that_failed_raises_its_error_and_a_folders_marker_is_no_sub_folder():
    """A range cat_ranges gave back as its error raised "TypeError: cannot convert 'FileNotFoundError' object to
    bytes"; gcsfs lists a folder's own marker as a folder in it, which made a train/ of images torchvision's tree."""
    from alexnet.data.imagenet import is_imagefolder
    from alexnet.data.tree_files import BucketTree

    class Bucket:
        def cat_ranges(self, paths, starts, ends, on_error="return"):
            return [b"ab", FileNotFoundError("b/x/gone.zip")]

        def ls(self, path, detail=True, refresh=False):
            return {"b/x": [{"name": "b/x/train", "type": "directory"}],
                    "b/x/train": [{"name": "b/x/train/", "type": "directory"},
                                  {"name": "b/x/train/a.JPEG", "type": "file", "size": 2}]}[path]

        def invalidate_cache(self, path=None):
            pass

    files = archive_io.Files(Bucket(), "gs://b/x")
    with pytest.raises(FileNotFoundError, match=r"gone\.zip"):
        files.read_ranges("b/x/gone.zip", [(0, 2), (4, 8)])
    assert is_imagefolder("gs://b/x", BucketTree(files)) is False


def test_an_upload_that_finds_its_zips_on_the_board_records_its_source_and_the_next_one_reads_nothing(
        made, tmp_path, monkeypatch):
    """The same images from another source (another layout, a copy elsewhere, objects written again) make the same
    zips, which the upload skips; unrecorded, every later upload read and packed each category again to find it
    unchanged (140 GB of reading for ImageNet, reported as "skipped")."""
    from alexnet.data import packing

    board = tmp_path / "board"
    imagenet_upload(made["paths"]["kaggle"], board, workers=2)
    packed: list[str] = []
    real = packing.zip_images
    monkeypatch.setattr(packing, "zip_images", lambda part, *args: packed.append(part.pin) or real(part, *args))
    second = imagenet_upload(made["paths"]["kaggle_zip"], board, workers=2)
    assert second["uploaded"] == [] and len(packed) == 2 * CLASSES, "read and packed once, found the same"
    packed.clear()
    third = imagenet_upload(made["paths"]["kaggle_zip"], board, workers=2)
    assert third["uploaded"] == [] and len(third["skipped"]) == CLASSES and packed == []
    assert table(board) == made["table"]


def test_a_source_that_cannot_be_recorded_fails_no_category(made, tmp_path, monkeypatch, caplog):
    """A 503 of the board while recording the source failed the category whose zip was on the board already."""
    from alexnet.data import packing
    from alexnet.storage import transfer

    board = tmp_path / "board"
    imagenet_upload(made["paths"]["kaggle"], board, workers=2)
    monkeypatch.setattr(transfer, "backoff", lambda attempt: 0.0)

    def unavailable(*args):
        raise RuntimeError("Backend Error, 503")

    monkeypatch.setattr(packing, "record_source", unavailable)
    with caplog.at_level(logging.INFO, logger="alexnet"):
        report = imagenet_upload(made["paths"]["kaggle_zip"], board, workers=2)
    assert report["uploaded"] == [] and len(report["skipped"]) == CLASSES
    assert "that could not be recorded" in caplog.text and "503" in caplog.text


@pytest.mark.parametrize("kind", ["gs", "s3"])
def test_a_bucket_tree_given_below_its_name_files_or_with_odd_names(kind, made, cloud_env, tmp_path):
    """Kaggle's tree given by its CLS-LOC prefix finds its LOC_* files above it, as a local one does; an image whose
    name holds a pattern's characters ([, *, ?) is read as it is named."""
    from alexnet.storage.location import open_filesystem

    url = put_in_bucket(kind, made["paths"]["kaggle"], f"{tmp_path.name}-kaggle")
    board = tmp_path / "board"
    report = imagenet_upload(f"{url}/ILSVRC/Data/CLS-LOC", board, workers=2)
    assert report["layout"] == "kaggle" and table(board) == made["table"]
    # the prefix given is an object too (the marker an old tool made of the folder): the folder is read
    open_filesystem(url, write=True).pipe_file(url.split("://", 1)[1], b"")
    again = imagenet_upload(url, board, workers=2)
    assert again["layout"] == "kaggle" and again["uploaded"] == [] and len(again["skipped"]) == CLASSES
    odd = tmp_path / "odd"
    shutil.copytree(made["paths"]["folders"], odd)
    first = sorted(p for p in odd.iterdir() if p.is_dir())[0]
    image = sorted(first.glob("*.JPEG"))[-1]
    image.rename(first / "photo [1] *?.JPEG")
    odd_url = put_in_bucket(kind, str(odd), f"{tmp_path.name}-odd")
    odd_board = tmp_path / "odd-board"
    imagenet_upload(odd_url, odd_board, workers=2)
    local_board = tmp_path / "local-board"
    imagenet_upload(odd, local_board, workers=2)
    assert table(odd_board) == table(local_board)
    with zipfile.ZipFile(next(odd_board.glob(f"{first.name}/*/*.zip"))) as z:
        assert "photo [1] *?.JPEG" in z.namelist()


class SlowBucket:
    """A bucket file system's ``cat_file``: each request takes 50 ms; the requests in flight are counted."""

    def __init__(self, data: bytes, served: int | None = None):
        self.data, self.served = data, len(data) if served is None else served
        self.lock, self.in_flight, self.most, self.asked = threading.Lock(), 0, 0, []

    def cat_file(self, path, start, end):
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.asked.append((start, end))
        try:
            time.sleep(0.05)
            return self.data[start:min(end, self.served)]
        finally:
            with self.lock:
                self.in_flight -= 1


def test_a_bucket_stream_is_fetched_several_blocks_at_a_time():
    data = random_bytes(10 * 4096 + 100)
    bucket = SlowBucket(data)
    with io.BufferedReader(archive_io.BlocksAhead(bucket, "b/f", len(data), block=4096, depth=3)) as f:
        got = b"".join(iter(lambda: f.read(1000), b""))
    assert got == data
    assert 2 <= bucket.most <= 3, "several requests in flight, never more than depth"
    assert sorted(bucket.asked) == [(i * 4096, min(len(data), (i + 1) * 4096)) for i in range(11)], "each block once"


def test_a_bucket_stream_seeks_anywhere_and_ends_where_its_bytes_do():
    data = random_bytes(5 * 1024 + 7)
    f = io.BufferedReader(archive_io.BlocksAhead(SlowBucket(data), "b/f", len(data), block=1024, depth=2))
    for at, size in [(4000, 300), (10, 2000), (1023, 2), (5 * 1024, 100), (0, 10), (len(data) + 5, 10)]:
        f.seek(at)
        assert f.read(size) == data[at:at + size]
        assert f.tell() == at + len(data[at:at + size])
    f.seek(-7, io.SEEK_END)
    assert f.read() == data[-7:]
    f.close()
    with pytest.raises(ValueError):
        f.read(1)
    # an object shorter than its size (replaced while it is read): it ends where its bytes do, as a file would
    short = io.BufferedReader(archive_io.BlocksAhead(SlowBucket(data, served=3000), "b/f", len(data), block=1024))
    assert short.read() == data[:3000]


@pytest.mark.parametrize("kind", ["gs", "s3"])
def test_from_a_bucket_streams_and_validation_index_are_read_blocks_ahead(kind, made, cloud_env, tmp_path,
                                                                         monkeypatch):
    opened: list[str] = []
    original = archive_io.BlocksAhead.__init__

    def init(self, fs, path, size, *args, **kwargs):
        opened.append(os.path.basename(path))
        original(self, fs, path, size, *args, **kwargs)

    monkeypatch.setattr(archive_io.BlocksAhead, "__init__", init)
    for layout, streamed in [("archives", VAL_TAR), ("kaggle_targz", KAGGLE_TARGZ)]:
        url = put_in_bucket(kind, made["paths"][layout], f"{tmp_path.name}-{layout}")
        board = tmp_path / f"board-{layout}"
        imagenet_upload(url, board, workers=2)
        assert streamed in opened, (layout, opened)
        assert table(board) == made["table"]


# -- an interrupted upload from the training tar ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["local", "gs", "s3"])
def test_killed_upload_from_the_training_tar_skips_what_is_done(kind, made, cloud_env, tmp_path, monkeypatch):
    source = made["paths"]["archives"]
    if kind != "local":
        source = put_in_bucket(kind, source, f"{tmp_path.name}-killed")
    board = tmp_path / "board"
    killed_upload(source, board, dict(os.environ))
    done = sorted(p.parent.parent.name for p in board.glob("n*/*/*.zip"))
    assert 2 <= len(done) < CLASSES and not (board / "categories").exists()

    # the second run reads no byte of a finished category's tar
    ranges: list[tuple[str, int, int]] = []
    original = archive_io.Files.read_ranges

    def read_ranges(self, path, asked):
        ranges.extend((os.path.basename(path), start, end) for start, end in asked)
        return original(self, path, asked)

    monkeypatch.setattr(archive_io.Files, "read_ranges", read_ranges)
    report = imagenet_upload(source, board, workers=2)
    assert sorted(report["skipped"]) == done, "the finished categories are skipped, and only they"
    assert sorted(report["uploaded"]) == sorted(set(r["id"] for r in made["table"]) - set(done))
    assert table(board) == made["table"], "the board of one uninterrupted upload"
    with tarfile.open(Path(made["paths"]["archives"]) / TRAIN_TAR) as tar:
        finished = [(m.offset_data, m.offset_data + m.size) for m in tar if m.name[:-4] in done]
    train_reads = [(s, e) for name, s, e in ranges if name == TRAIN_TAR]
    assert len(train_reads) == CLASSES - len(done)
    assert not [r for r in train_reads for f in finished if r[0] < f[1] and f[0] < r[1]]


# -- damaged and mislabelled sources: one clear error, nothing uploaded -------------------------------------------


def copy_layout(made, layout: str, tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(made["paths"][layout], src)
    return src


def assert_nothing_uploaded(board: Path) -> None:
    assert not board.exists() or not [p for p in board.iterdir() if p.name.startswith(("n", "val-", "categories"))]


@pytest.mark.parametrize("cut", ["half way", "before its last category", "gzipped, before its last category"])
def test_truncated_training_tar(made, tmp_path, cut):
    src = copy_layout(made, "archives", tmp_path)
    data = (src / TRAIN_TAR).read_bytes()
    with tarfile.open(src / TRAIN_TAR) as tar:
        last = tar.getmembers()[-1].offset  # its header: a tar reader ends there quietly, one category short
    (src / TRAIN_TAR).write_bytes(data[:len(data) // 2 if cut == "half way" else last])
    if cut.startswith("gzipped"):  # a whole gzip stream of a tar cut short: read as a stream, said at the cut
        (src / f"{TRAIN_TAR}.gz").write_bytes(gzip.compress((src / TRAIN_TAR).read_bytes()))
        (src / TRAIN_TAR).unlink()
    with pytest.raises(LayoutError, match=rf"{TRAIN_TAR}(\.gz)? .*(cut short|damaged).*download it again") as err:
        imagenet_upload(src, tmp_path / "board")
    assert "\n" not in str(err.value)
    if cut.startswith("gzipped"):  # read as it comes: the categories before the cut are on the board, and said so
        assert "skipped next time" in str(err.value)
    else:
        assert_nothing_uploaded(tmp_path / "board")


def test_a_training_tar_cut_inside_a_category_names_that_one(made, tmp_path):
    """Cut inside its second category's tar, it was said "cannot be read as a tar after <that category>", as if the
    damage came after it."""
    src = copy_layout(made, "archives", tmp_path)
    with tarfile.open(src / TRAIN_TAR) as tar:
        second = tar.getmembers()[1]
    data = (src / TRAIN_TAR).read_bytes()
    (src / TRAIN_TAR).write_bytes(data[:second.offset_data + second.size // 2])
    with pytest.raises(LayoutError, match=rf"{TRAIN_TAR} is cut short: it ends inside {second.name} \(\d+ bytes\); "
                                          "download it again$"):
        imagenet_upload(src, tmp_path / "board")
    assert_nothing_uploaded(tmp_path / "board")


def added_again(tar_path: Path, index: int) -> tarfile.TarInfo:
    """Member ``index`` of the tar ``tar_path`` added at its end once more, as an archive written to twice holds it."""
    with tarfile.open(tar_path) as tar:
        member = tar.getmembers()[index]
        data = tar.extractfile(member).read()
    with tarfile.open(tar_path, "a") as tar:
        tar.addfile(member, io.BytesIO(data))
    return member


def test_a_validation_tar_holding_an_image_twice_is_refused_as_the_training_tar_is(made, tmp_path):
    """An image twice in the validation tar (written to twice, or two joined) ended the upload in a TypeError and a
    traceback: the two copies' numbers were equal, and their entries were compared."""
    src = copy_layout(made, "archives", tmp_path)
    second = added_again(src / VAL_TAR, 1)
    with pytest.raises(LayoutError, match=rf"{VAL_TAR} holds {second.name} more than once: it is not the archive as "
                                          "released .*download it again, or make a tar with one copy of each image; "
                                          "nothing was uploaded$") as err:
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert "\n" not in str(err.value)
    assert_nothing_uploaded(tmp_path / "board")


def test_an_empty_train_folder_beside_val_is_said_as_such(tmp_path):
    """Empty train/ and val/ folders (torchvision's tree not filled yet) were read as a folder of category folders,
    and refused as a category named train holding no images."""
    (tmp_path / "src" / "train").mkdir(parents=True)
    (tmp_path / "src" / "val").mkdir()
    with pytest.raises(LayoutError, match=rf"^{tmp_path / 'src'}/train is empty: torchvision's tree holds its "
                                          r"training images in train/<wnid>/ folders"):
        imagenet_upload(tmp_path / "src", tmp_path / "board")
    assert_nothing_uploaded(tmp_path / "board")


@pytest.mark.parametrize("layout", ["archives", "parquet"])
def test_validation_images_of_a_category_with_no_training_images_are_left_out_and_said(made, tmp_path, layout,
                                                                                       caplog):
    """A training tar (or training shards) without one category, whose validation images are there: they were left
    out and nothing said so. (Kaggle's solution file labelling an image of no training folder is refused: it can be
    edited, a validation tar cannot.)"""
    src = copy_layout(made, layout, tmp_path)
    gone = made["table"][-1]["id"]
    if layout == "archives":
        with tarfile.open(src / TRAIN_TAR) as tar, tarfile.open(tmp_path / "fewer.tar", "w") as fewer:
            for member in tar.getmembers():
                if member.name != f"{gone}.tar":
                    fewer.addfile(member, tar.extractfile(member))
        os.replace(tmp_path / "fewer.tar", src / TRAIN_TAR)
    else:
        label = len(made["table"]) - 1  # the synthetic categories are the first classes, in label order
        for shard in sorted((src / "data").glob("train-*.parquet")):
            rows = pq.read_table(shard)
            kept = [k for k, v in enumerate(rows.column("label").to_pylist()) if v != label]
            pq.write_table(rows.take(pa.array(kept, pa.int64())), shard, row_group_size=8)
    board = tmp_path / "board"
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        report = imagenet_upload(src, board, workers=2)
    said = [m for m in (r.getMessage() for r in caplog.records) if "left out" in m and "bad image" not in m]
    assert len(said) == 1 and re.fullmatch(
        rf"The validation images of 1 category with no training images in {src}(/data)? are left out \({gone}\): a "
        "model trained on the board has no output for their categories", said[0]), said
    assert gone not in report["uploaded"] and [r["id"] for r in table(board)] == [
        r["id"] for r in made["table"][:-1]]
    assert not (board / f"val-{gone}").exists()


@pytest.mark.parametrize("compressed", [False, True])
def test_a_training_tar_holding_a_category_twice_is_refused(made, tmp_path, compressed):
    """A category's tar twice in the training tar (an archive written to twice): which copy holds the category
    cannot be told, so the upload stops on one line naming it, with several packing threads as with one."""
    src = copy_layout(made, "archives", tmp_path)
    first = added_again(src / TRAIN_TAR, 0)
    if compressed:
        (src / f"{TRAIN_TAR}.gz").write_bytes(gzip.compress((src / TRAIN_TAR).read_bytes()))
        (src / TRAIN_TAR).unlink()
    with pytest.raises(LayoutError, match=rf"{TRAIN_TAR}(\.gz)? holds {first.name} more than once: .*download it "
                                          "again") as err:
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert "\n" not in str(err.value)
    if compressed:  # read as a stream: what came before it is on the board, and said so
        assert "skipped next time" in str(err.value)
    else:
        assert "nothing was uploaded" in str(err.value)
        assert_nothing_uploaded(tmp_path / "board")


class _Unseekable(io.RawIOBase):
    """A file that can only be appended to, as a download written on the fly is."""

    def __init__(self, f):
        self.f = f

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return self.f.write(b)


@pytest.mark.parametrize("zip64", [False, True])
def test_a_kaggle_zip_written_as_a_stream_uploads_the_board_of_the_tree(made, tmp_path, zip64):
    """A zip written by a streaming writer leaves the CRC and sizes out of each local header and puts them in a data
    descriptor after the member (with a zip64 extra field when the writer cannot know the size will stay small):
    read from the central directory, its members upload as the tree's."""
    src = copy_layout(made, "kaggle_zip", tmp_path)
    streamed = tmp_path / "streamed.zip"
    with zipfile.ZipFile(src / KAGGLE_ZIP) as old, open(streamed, "wb") as raw, \
            zipfile.ZipFile(_Unseekable(raw), "w") as new:
        for info in old.infolist():
            member = zipfile.ZipInfo(info.filename, info.date_time)
            member.compress_type = zipfile.ZIP_DEFLATED
            with old.open(info) as r, new.open(member, "w", force_zip64=zip64) as w:
                shutil.copyfileobj(r, w)
    with zipfile.ZipFile(streamed) as zf:
        infos = zf.infolist()
    assert infos and all(i.flag_bits & 0x08 for i in infos)  # every member's sizes follow it
    data = streamed.read_bytes()
    first = infos[0]
    # its local header gives no CRC and no sizes (zip64: the 0xFFFFFFFF that points to the zeros of its extra field)
    assert data[first.header_offset + 14:first.header_offset + 26] == (
        b"\0" * 4 + b"\xff" * 8 if zip64 else b"\0" * 12)
    shutil.move(streamed, src / KAGGLE_ZIP)
    report = imagenet_upload(src, tmp_path / "board", workers=2)
    assert report["layout"] == "kaggle_zip" and table(tmp_path / "board") == made["table"]
    assert bad_files(tmp_path / "board") == made["bad"]


def test_truncated_kaggle_zip(made, tmp_path):
    src = copy_layout(made, "kaggle_zip", tmp_path)
    data = (src / KAGGLE_ZIP).read_bytes()
    (src / KAGGLE_ZIP).write_bytes(data[:len(data) - 200])
    with pytest.raises(LayoutError, match=rf"{KAGGLE_ZIP} is not a complete zip .*download it again"):
        imagenet_upload(src, tmp_path / "board")
    assert_nothing_uploaded(tmp_path / "board")


def test_kaggles_archives_hold_only_kaggles_files(made):
    """Kaggle's zip and tar.gz as written by imagenet_synthetic() hold its tree and LOC_* files, and nothing of the
    folder they were made in (its owner file once slipped in)."""
    with zipfile.ZipFile(Path(made["paths"]["kaggle_zip"]) / KAGGLE_ZIP) as zf:
        zipped = zf.namelist()
    with tarfile.open(Path(made["paths"]["kaggle_targz"]) / KAGGLE_TARGZ) as tar:
        tarred = tar.getnames()
    for names in (zipped, tarred):
        assert names and all(name.startswith(("ILSVRC/", "LOC_")) for name in names), names[:5]


def test_kaggles_zip_index_keeps_only_the_files_the_upload_reads(made, tmp_path):
    """The real download lists two million files, half of them test images and annotations: the index keeps the
    training and validation images and the LOC_* files it reads, and nothing else; the upload is unchanged."""
    src = copy_layout(made, "kaggle_zip", tmp_path)
    with zipfile.ZipFile(src / KAGGLE_ZIP) as zf:
        read = [i.filename for i in zf.infolist() if "/test/" not in i.filename and "sample" not in i.filename]
        train = [name for name in read if "/train/" in name]
    with zipfile.ZipFile(src / KAGGLE_ZIP, "a") as zf:
        for name in train[:20]:
            wnid, image = name.split("/")[-2:]
            zf.writestr(f"ILSVRC/Annotations/CLS-LOC/train/{wnid}/{image[:-5]}.xml", "<annotation></annotation>")
        for k in range(20):
            zf.writestr(f"ILSVRC/Data/CLS-LOC/test/ILSVRC2012_test_{k + 2:08d}.JPEG", b"\xff\xd8 a test image")
            zf.writestr(f"ILSVRC/Annotations/CLS-LOC/val/ILSVRC2012_val_{k + 1:08d}.xml", "<annotation/>")
        zf.writestr("LOC_train_solution.csv", "ImageId,PredictionString\n")
    source = open_source(src / KAGGLE_ZIP)
    assert sorted(source.index.names) == sorted(read) and len(read) > len(train) > 0
    assert not any("/test/" in name or "Annotations" in name for name in source.index.names)
    assert {e.name for e in source.index} == set(read)
    report = imagenet_upload(src, tmp_path / "board", workers=2)
    assert report["layout"] == "kaggle_zip" and table(tmp_path / "board") == made["table"]


@pytest.mark.parametrize("stored", [True, False])
def test_a_damaged_image_in_kaggle_zip_is_named(made, tmp_path, stored):
    """One image's bytes changed inside the zip (stored: its CRC no longer matches; deflated: it no longer
    inflates to its size, or its CRC fails): that image is named as bad, the rest is uploaded as from the tree."""
    src = copy_layout(made, "kaggle_zip", tmp_path)
    wnid = made["table"][2]["id"]
    rewritten, target = tmp_path / "rewritten.zip", None
    with zipfile.ZipFile(src / KAGGLE_ZIP) as old, zipfile.ZipFile(rewritten, "w") as new:
        for info in old.infolist():
            data = old.read(info)
            if f"/train/{wnid}/" in info.filename and info.filename.endswith(".JPEG") and target is None:
                target, info.compress_type = info.filename, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            new.writestr(info, data)
    with zipfile.ZipFile(rewritten) as zf:
        info = zf.getinfo(target)
    data = bytearray(rewritten.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0x55
    (src / KAGGLE_ZIP).write_bytes(bytes(data))
    report = imagenet_upload(src, tmp_path / "board", workers=2)
    named = [b for b in report["bad_images"] if b["file"] == os.path.basename(target)]
    assert len(named) == 1 and named[0]["category"] == wnid
    assert "download" in named[0]["reason"] and ("CRC-32" in named[0]["reason"] or "decompressed" in
                                                 named[0]["reason"])
    if stored:
        assert "CRC-32" in named[0]["reason"]
    rows = {r["id"]: r for r in table(tmp_path / "board")}
    assert rows.pop(wnid)["images"] == next(r for r in made["table"] if r["id"] == wnid)["images"] - 1
    assert list(rows.values()) == [r for r in made["table"] if r["id"] != wnid]


def rewrite_devkit(src: Path, change) -> None:
    with tarfile.open(src / DEVKIT) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    files = change(files)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (src / DEVKIT).write_bytes(out.getvalue())


def drop_last_label(files: dict[str, bytes]) -> dict[str, bytes]:
    name = next(n for n in files if n.endswith(GROUND_TRUTH))
    files[name] = b"".join(files[name].splitlines(keepends=True)[:-1])
    return files


FEWER_LABELS = (rf"{VAL_TAR} holds {CLASSES * SMALL['val_per_class']} validation images but the ground truth .* "
                rf"labels {CLASSES * SMALL['val_per_class'] - 1}.*nothing was uploaded")


def test_devkit_with_fewer_labels_than_validation_images(made, tmp_path):
    src = copy_layout(made, "archives", tmp_path)
    rewrite_devkit(src, drop_last_label)
    with pytest.raises(LayoutError, match=FEWER_LABELS):
        imagenet_upload(src, tmp_path / "board")
    assert_nothing_uploaded(tmp_path / "board")


def index_val_after_first_pack(monkeypatch, linger: float = 0.0) -> tuple[list[str], dict[str, object]]:
    """Make the validation tar's index wait until a training category has been packed (10 s at most), and ``linger``
    seconds more; return the categories packed, and what the index saw ("packed first", the categories "packed
    meanwhile") and when it ended ("indexed", an Event)."""
    packed, indexed, seen = threading.Event(), threading.Event(), {}
    seen["indexed"] = indexed
    parts: list[str] = []
    index, zip_images = ilsvrc.tar_index, packing.zip_images

    def slow_index(f, label, total):
        if not label.endswith(VAL_TAR):
            return index(f, label, total)
        seen["packed first"] = packed.wait(timeout=10)
        time.sleep(linger)
        seen["packed meanwhile"] = len(parts)
        try:
            return index(f, label, total)
        finally:
            indexed.set()

    def zipped(part, members, dest, options):
        out = zip_images(part, members, dest, options)
        parts.append(part.wnid)
        packed.set()
        return out

    monkeypatch.setattr(ilsvrc, "tar_index", slow_index)
    monkeypatch.setattr(packing, "zip_images", zipped)
    return parts, seen


def test_validation_tar_is_indexed_while_training_categories_are_packed(made, tmp_path, monkeypatch):
    """The validation tar's headers (50,000, read one after another) do not hold back the first training categories;
    no pin is published before they have been checked."""
    parts, seen = index_val_after_first_pack(monkeypatch)
    published: list[bool] = []
    publish = packing.publish_file
    monkeypatch.setattr(packing, "publish_file",
                        lambda *a, **k: published.append(seen["indexed"].is_set()) or publish(*a, **k))
    imagenet_upload(made["paths"]["archives"], tmp_path / "board", workers=2)
    assert seen["packed first"] is True and len(parts) == 2 * CLASSES
    assert len(published) == 2 * CLASSES and all(published)
    assert table(tmp_path / "board") == made["table"]


def test_while_labels_are_checked_one_zip_a_packing_slot_waits(made, tmp_path, monkeypatch):
    """The zips packed before the validation labels are checked wait in the scratch folder: one per part packed at
    a time (here one), not one per part in flight (here all six)."""
    monkeypatch.setattr(packing, "usable_cpus", lambda: 1)
    parts, seen = index_val_after_first_pack(monkeypatch, linger=1.0)
    imagenet_upload(made["paths"]["archives"], tmp_path / "board", workers=8)
    assert seen["packed first"] is True and seen["packed meanwhile"] == 1 and len(parts) == 2 * CLASSES
    assert table(tmp_path / "board") == made["table"]


def test_labels_found_wrong_while_training_is_packed_stop_the_upload(made, tmp_path, monkeypatch, caplog):
    """Labels that disagree, found once training categories are being packed: the reading stops, nothing is
    published, and the error is said once (not again for each category packed meanwhile)."""
    src = copy_layout(made, "archives", tmp_path)
    rewrite_devkit(src, drop_last_label)
    parts, seen = index_val_after_first_pack(monkeypatch)
    with caplog.at_level(logging.ERROR), pytest.raises(LayoutError, match=FEWER_LABELS):
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert seen["packed first"] is True
    assert_nothing_uploaded(tmp_path / "board")
    # at most workers + 2 categories in flight, and one more read before the failure was known
    assert 1 <= len(parts) < CLASSES
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_closing_an_archives_source_stops_its_validation_index(made, monkeypatch):
    class Slow:
        """A file whose reads take half a second."""

        def __init__(self, f):
            self.f = f

        def read(self, size=-1):
            time.sleep(0.5)
            return self.f.read(size)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

    real_open = archive_io.Files.open
    monkeypatch.setattr(archive_io.Files, "open", lambda self, path, block: Slow(real_open(self, path, block))
                        if path.endswith(VAL_TAR) else real_open(self, path, block))
    source = open_source(made["paths"]["archives"])
    indexing = [t for t in threading.enumerate() if t.name.startswith("alexnet-labels")]
    assert indexing  # a header each half second: still reading
    source.close()
    for thread in indexing:
        thread.join(timeout=1.5)
    assert not any(t.is_alive() for t in indexing)


@pytest.mark.parametrize("damage", ["cut", "not gzip"])
def test_damaged_devkit(made, tmp_path, caplog, damage):
    """The devkit is read in the background: found damaged (cut short, or not a tar.gz at all, which tarfile says
    in a line per compression it tried), it stops the upload before anything is published, in one line."""
    src = copy_layout(made, "archives", tmp_path)
    (src / DEVKIT).write_bytes((src / DEVKIT).read_bytes()[:100] if damage == "cut" else b"<html>not found</html>")
    with caplog.at_level(logging.ERROR), pytest.raises(LayoutError, match=rf"{DEVKIT} cannot be read as a tar.gz "
                                                                          r".*download the devkit again") as err:
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert "\n" not in str(err.value)
    assert_nothing_uploaded(tmp_path / "board")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_the_validation_tar_or_devkit_given_alone_says_to_give_the_folder(made, tmp_path):
    src = copy_layout(made, "archives", tmp_path)
    for name, which in [(VAL_TAR, "validation tar"), (DEVKIT, "devkit")]:
        with pytest.raises(LayoutError, match=rf"{name} is the official archives' {which}: pass the folder that "
                                              rf"holds the three archives, or {TRAIN_TAR} "):
            imagenet_upload(src / name, tmp_path / "board")
    assert not (tmp_path / "board").exists()


def test_quality_without_resize_is_said_unused(made, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        imagenet_upload(made["paths"]["kaggle"], tmp_path / "board", quality=50)
    assert "`quality` is only used with `resize`: the images are stored as they are, not re-encoded." in caplog.text
    assert table(tmp_path / "board") == made["table"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"), pytest.raises(
            AlexnetError, match=r"^`resize` = 0 would store images too small for AlexNet, which needs a side of at "
                                r"least 63"):
        imagenet_upload(made["paths"]["kaggle"], tmp_path / "other", resize=0)


def test_validation_tar_without_devkit(made, tmp_path):
    src = copy_layout(made, "archives", tmp_path)
    (src / DEVKIT).unlink()
    with pytest.raises(LayoutError, match=rf"{VAL_TAR} has no {DEVKIT} beside it"):
        imagenet_upload(src, tmp_path / "board")


#: The files that hold a layout's validation images, left out of a copy of the source and added back.
VALIDATION_FILES = {"archives": (VAL_TAR, DEVKIT), "parquet": ("data/validation-00000-of-00001.parquet",),
                    "kaggle": ("ILSVRC/Data/CLS-LOC/val", VAL_SOLUTION_FILE), "imagefolder": ("val",)}


def no_validation_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "gave no validation images" in r.getMessage()]


@pytest.mark.parametrize("layout", sorted(VALIDATION_FILES))
def test_a_source_without_validation_says_where_its_layout_keeps_them(layout, made, tmp_path, caplog):
    whole, left_out = Path(made["paths"][layout]), VALIDATION_FILES[layout]
    src, board = tmp_path / "src", tmp_path / "board"
    shutil.copytree(whole, src, ignore=lambda folder, names: [
        n for n in names if Path(folder, n).relative_to(whole).as_posix() in left_out])
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        first = imagenet_upload(src, board, workers=2)
    assert first["val_images"] == 0 and table(board) == without_val(made["table"])
    said = no_validation_warnings(caplog)
    assert len(said) == 1 and f"the {layout} layout holds them in" in said[0]
    assert all(Path(name).name.replace("00000-of-00001", "*") in said[0] for name in left_out), said[0]
    # done as it says: the validation files added, the training categories are skipped and the board is whole
    for name in left_out:
        (shutil.copytree if (whole / name).is_dir() else shutil.copy)(whole / name, src / name)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        again = imagenet_upload(src, board, workers=2)
    assert len(again["skipped"]) == CLASSES and again["uploaded"] == [] and not no_validation_warnings(caplog)
    assert table(board) == made["table"]


def test_a_layout_without_a_validation_set_names_those_with_one(made, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        imagenet_upload(made["paths"]["folders"], tmp_path / "board", workers=2)
    said = no_validation_warnings(caplog)
    assert len(said) == 1 and "the folders layout has no validation set" in said[0]
    assert all(f"{layout}: " in said[0] for layout in (*ARCHIVE_LAYOUTS, "kaggle", "imagefolder")), said[0]


def test_a_folder_trees_validation_images_are_grouped_by_category_in_one_pass(monkeypatch, tmp_path):
    """20,000 validation images of one category (and a few of another) are grouped at once, in their order: a tuple
    rebuilt per image made it quadratic (40,000 images of one category took 42 s)."""
    from alexnet.data import sources
    from alexnet.data.imagenet import Category, ImageNetTree
    from alexnet.data.tree_files import TreeFiles

    monkeypatch.setattr(TreeFiles, "stat", lambda self, path: (7, 0))
    many = [f"{tmp_path}/val/a_{i:06d}.JPEG" for i in range(20_000)]
    few = [f"{tmp_path}/val/b_{i}.JPEG" for i in range(3)]
    files = [*many[:10], *few, *many[10:]]
    labels = ["n00000001"] * 10 + ["n00000002"] * 3 + ["n00000001"] * (len(many) - 10)
    categories = (Category("n00000001", "", 0, (f"{tmp_path}/train/a.JPEG",)),
                  Category("n00000002", "", 1, (f"{tmp_path}/train/b.JPEG",)))
    source = sources.FolderSource(ImageNetTree(str(tmp_path), "kaggle", categories, tuple(files), tuple(labels)))
    assert source.val == {"n00000001": tuple(many), "n00000002": tuple(few)}
    assert source.total_bytes == 7 * (len(files) + 2)


def test_held_out_images_depend_on_their_names_alone():
    files = tuple(f"/photos/roses/rose_{i}.jpg" for i in range(200))
    held = held_out(files, 0.1)
    assert 10 <= len(held) <= 30  # about a tenth
    assert held_out(tuple(reversed(files)), 0.1) == held  # not their order
    more = held_out((*files, *(f"/photos/roses/new_{i}.jpg" for i in range(50))), 0.1)
    assert more & set(files) == held  # photos added: the images held out before stay held out, the others stay in
    assert held_out(files, 0.0) == frozenset() and held_out(files[:1], 0.5) == frozenset()
    assert len(held_out(files[:2], 1e-9)) == 1  # at least one of a category of two images or more
    assert len(held_out(files[:3], 0.999)) == 2  # never every one


def test_val_share_holds_out_validation_images_of_a_folder_of_folders(made, tmp_path, caplog):
    source = tmp_path / "photos"
    shutil.copytree(made["paths"]["folders"], source)
    # photos of one's own: the categories are named by their folders, not by WordNet ids
    for i, folder in enumerate(sorted(p for p in source.iterdir() if p.is_dir())):
        folder.rename(source / f"flower-{i}")
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        report = imagenet_upload(source, tmp_path / "board", workers=2, val_share=0.3)
    assert not no_validation_warnings(caplog)
    rows = {row["id"]: row for row in imagenet_categories(tmp_path / "board")}
    data = imagenet_partition(0, 1, board=tmp_path / "board", cache_dir=tmp_path / "cache")
    validation = {}
    for path, label in zip(data["val_image"], data["val_label"], strict=True):
        validation.setdefault(data["class_ids"][label], set()).add(os.path.basename(path))
    bad = {b["file"] for b in report["bad_images"]}
    for wnid, files in open_source(source).train.items():
        held = {os.path.basename(p) for p in held_out(files, 0.3)}
        assert 1 <= len(held) < len(files)
        assert validation[wnid] == held - bad  # the held-out images, each labelled with its own category
        assert rows[wnid]["val_images"] == len(held - bad)
        assert rows[wnid]["images"] == len({os.path.basename(p) for p in files} - held - bad)
    assert report["val_images"] == len(data["val_image"]) > 0
    again = imagenet_upload(source, tmp_path / "board", workers=2, val_share=0.3)
    assert again["uploaded"] == [] and again["skipped"] == [f"flower-{i}" for i in range(CLASSES)]
    # a model may not be published as one of them, nor a category named as one of the board's own pins
    from alexnet.train.settings_check import check_settings

    with pytest.raises(AlexnetError, match=r"^`model_pin` = 'flower-0': board .* has a pin 'flower-0' that holds no "
                                           r"model .*: choose another name, e.g. model_pin = 'flower-0-model'\.$"):
        check_settings({"model_pin": "flower-0", "model_board": str(tmp_path / "board")})
    (source / "flower-0").rename(source / "categories")
    with pytest.raises(LayoutError, match=r"Category folder .*categories is named as one of a board's own pins"):
        imagenet_upload(source, tmp_path / "board", val_share=0.3)
    (source / "categories").rename(source / "flower-0")
    with pytest.raises(LayoutError, match="in the kaggle_zip layout, whose validation images are the zip's"):
        imagenet_upload(made["paths"]["kaggle_zip"], tmp_path / "other", val_share=0.3)
    with pytest.raises(LayoutError, match=r"has validation images of its own \(12\): `val_share` holds out"):
        imagenet_upload(made["paths"]["kaggle"], tmp_path / "other", val_share=0.3)


def test_an_imagefolder_tree_of_categories_of_ones_own(made, tmp_path):
    """train/ and val/ folders of categories named as one likes: validation images labelled by their folder, an
    upload run again skips them all, and val_share is refused since the tree has validation images."""
    source = tmp_path / "pets"
    shutil.copytree(made["paths"]["imagefolder"], source)
    ids = [row["id"] for row in made["table"]]
    for i, wnid in enumerate(ids):
        for split in ("train", "val"):
            (source / split / wnid).rename(source / split / f"pet-{i}")
    board = tmp_path / "board"
    report = imagenet_upload(source, board, workers=2)
    assert report["layout"] == "imagefolder"
    renamed = [{**row, "id": f"pet-{i}", "name": ""} for i, row in enumerate(made["table"])]
    assert table(board) == renamed  # the same zips, validation ones included, under the folders' names
    again = imagenet_upload(source, board, workers=2)
    assert again["uploaded"] == [] and again["skipped"] == [f"pet-{i}" for i in range(CLASSES)]
    with pytest.raises(LayoutError, match=r"has validation images of its own \(12\): `val_share` holds out"):
        imagenet_upload(source, tmp_path / "other", val_share=0.3)


@pytest.mark.parametrize("budget", [None, 1])
def test_shuffled_parquet_shards_give_the_same_board(made, tmp_path, monkeypatch, budget):
    """Rows shuffled across the shards, so that every category is unfinished until the last row groups: held in
    memory (the default budget) or moved to spool files (a budget of 1 byte), the board is the tree's."""

    if budget is not None:
        monkeypatch.setattr(held, "MEMORY_BUDGET", budget)
    spooled: list[str] = []
    read_spool = held._read_spool
    monkeypatch.setattr(held, "_read_spool", lambda path: spooled.append(path) or read_spool(path))
    src = copy_layout(made, "parquet", tmp_path)
    shards = sorted((src / "data").glob("train-*.parquet"))
    rows = pa.concat_tables([pq.read_table(shard) for shard in shards])
    order = list(range(rows.num_rows))
    import random

    random.Random(5).shuffle(order)
    rows = rows.take(pa.array(order))
    per_shard = -(-rows.num_rows // len(shards))
    for k, shard in enumerate(shards):
        pq.write_table(rows.slice(k * per_shard, per_shard), shard, row_group_size=5)
    imagenet_upload(src, tmp_path / "board", workers=2)
    assert table(tmp_path / "board") == made["table"]
    # every category spooled with a budget of 1 byte (training and validation), none with the default
    assert len(spooled) == (2 * CLASSES if budget == 1 else 0)


def test_a_kaggle_zip_without_its_names_file_takes_the_shipped_names_as_the_extracted_tree_does(made, tmp_path, caplog):
    """Without LOC_synset_mapping.txt, the zip's categories were uploaded without names (with a warning), where the
    same download extracted took the names the package ships."""
    from alexnet.data.classes import class_names

    src = tmp_path / "src"
    src.mkdir()
    with zipfile.ZipFile(Path(made["paths"]["kaggle_zip"]) / KAGGLE_ZIP) as full, \
            zipfile.ZipFile(src / KAGGLE_ZIP, "w") as cut:
        for info in full.infolist():
            if not info.filename.endswith("LOC_synset_mapping.txt"):
                cut.writestr(info, full.read(info))
    with caplog.at_level("WARNING", logger="alexnet"):
        imagenet_upload(src, tmp_path / "board", workers=2)
    rows = imagenet_categories(tmp_path / "board")
    assert rows and [row["name"] for row in rows] == [class_names()[row["id"]] for row in rows]
    assert "left empty" not in caplog.text


def test_parquet_shards_missing_from_those_their_names_count_are_refused(made, tmp_path):
    """A shard missing (train-00001-of-00002 alone) uploaded part of ImageNet without a word: the categories of that
    shard left out, one cut at its edge with part of its images, and their validation images dropped."""
    src = copy_layout(made, "parquet", tmp_path)
    shards = sorted((src / "data").glob("train-*.parquet"))
    assert len(shards) >= 2 and all("-of-" in shard.name for shard in shards)
    shards[-1].unlink()
    lost = shards[-1].name.removesuffix(".parquet")
    with pytest.raises(LayoutError, match=rf"^{src / 'data'} lacks 1 of the shards their names count \({lost}\): a "
                                          r"download cut short, .*Give every shard .*; nothing was uploaded$"):
        imagenet_upload(src, tmp_path / "board")
    assert_nothing_uploaded(tmp_path / "board")
    from alexnet.data.parquet import missing_shards

    assert missing_shards(["validation-00001-of-00003-x.parquet", "train-7.parquet"]) == [
        "validation-00000-of-00003", "validation-00002-of-00003"]


def test_parquet_label_outside_the_1000_classes(made, tmp_path):
    src = copy_layout(made, "parquet", tmp_path)
    shard = sorted((src / "data").glob("train-*.parquet"))[-1]
    frame = pq.read_table(shard)
    labels = frame.column("label").to_pylist()
    labels[-1] = 1000
    pq.write_table(frame.set_column(1, "label", pa.array(labels, pa.int64())), shard, row_group_size=8)
    with pytest.raises(LayoutError, match=rf"{shard.name}, row group \d+, holds the label 1000, outside 0..999"):
        imagenet_upload(src, tmp_path / "board")
    assert_nothing_uploaded(tmp_path / "board")


def count_fetches(monkeypatch) -> dict[str, list]:
    """What sources fetch from now on: ``read_ahead``, the bytes of each block a read-ahead file
    (:meth:`~alexnet.data.archive_io.Files.open`) fetches; ``ranges``, the sizes of each call's ranges fetched
    together (:meth:`~alexnet.data.archive_io.Files.read_ranges`)."""
    fetches: dict[str, list] = {"read_ahead": [], "ranges": []}
    opened, read_ranges = archive_io.Files.open, archive_io.Files.read_ranges

    def counted_open(self, path, block_size):
        f = opened(self, path, block_size)
        if hasattr(f, "cache"):
            fetch = f.cache.fetcher

            def counted(start, end):
                data = fetch(start, end)
                fetches["read_ahead"].append(len(data))
                return data

            f.cache.fetcher = counted
        return f

    def counted_ranges(self, path, ranges):
        blobs = read_ranges(self, path, ranges)
        fetches["ranges"].append([len(b) for b in blobs])
        return blobs

    monkeypatch.setattr(archive_io.Files, "open", counted_open)
    monkeypatch.setattr(archive_io.Files, "read_ranges", counted_ranges)
    return fetches


def test_parquet_row_groups_are_fetched_from_a_bucket_several_at_a_time(made, cloud_env, tmp_path, monkeypatch):
    """A row group after another through the read-ahead file, the reading thread waited for each request; they are
    fetched REQUESTS_AHEAD together, each once, and the board is the tree's."""
    url = put_in_bucket("s3", made["paths"]["parquet"], tmp_path.name)
    source = open_source(url)
    groups = sum(len(shard) for split in source.splits.values() for shard in split.labels)
    fetches = count_fetches(monkeypatch)
    imagenet_upload(url, tmp_path / "board", workers=2)
    assert table(tmp_path / "board") == made["table"]
    windows = [sizes for sizes in fetches["ranges"] if sum(sizes) > 10_000]  # the row groups, not the labels
    assert sum(len(w) for w in windows) == groups
    assert max(len(w) for w in windows) > 1 and all(len(w) <= archive_io.REQUESTS_AHEAD for w in windows), windows
    assert sum(fetches["read_ahead"]) < (groups // 2) * 65536, "only footers through the read-ahead file"


def test_parquet_labels_are_read_from_a_bucket_without_the_images_around_them(cloud_env, tmp_path, monkeypatch):
    """Each row group's `label` chunk lies after its images: read one row group after another through the bucket's
    read-ahead file, every label fetched the 8 MB after it too (nearly the whole shard). The labels alone are
    fetched, and they are the shards' labels."""
    folder = tmp_path / "shards"
    folder.mkdir()
    labels = {}
    for s in range(2):
        rows = [{"bytes": random_bytes(200_000), "path": f"image_{s}_{k}.JPEG"} for k in range(24)]
        labels[s] = [(7 * k + s) % 1000 for k in range(24)]
        pq.write_table(pa.table({"image": rows, "label": labels[s]}), folder / f"train-0000{s}-of-00002.parquet",
                       row_group_size=4)
    url = put_in_bucket("s3", folder, tmp_path.name)
    fetches = count_fetches(monkeypatch)
    source = open_source(url)
    shard_bytes = sum(p.stat().st_size for p in folder.iterdir())
    # pyarrow reads the last 64 KB of each shard for its footer; then 24 labels a shard, a few hundred bytes
    fetched = sum(fetches["read_ahead"]) + sum(map(sum, fetches["ranges"]))
    assert 0 < fetched < 2 * 65536 + 5000 < shard_bytes // 50, (fetched, shard_bytes)
    assert source.splits["train"].labels == [[labels[s][k:k + 4] for k in range(0, 24, 4)] for s in range(2)]


def test_the_held_ranges_serve_what_they_hold_and_fetch_the_rest():
    data = bytes(range(256)) * 40
    asked = []

    def fetch(start, end):
        asked.append((start, end))
        return data[start:end]

    ranges = [(100, 300), (5000, 5100)]
    held = io.BufferedReader(parquet._Ranges(ranges, [data[a:b] for a, b in ranges], len(data), fetch), 16)
    for at, size in [(120, 50), (5000, 100), (290, 20), (4990, 20), (len(data) - 5, 10), (0, 10)]:
        held.seek(at)
        assert held.read(size) == data[at:at + size]
    assert not [(a, b) for a, b in asked for start, end in ranges if start <= a and b <= end], asked
    assert asked, "reads outside the held ranges are fetched"


def test_a_file_in_a_tar_that_is_not_an_image(made, tmp_path, caplog):
    src = copy_layout(made, "archives", tmp_path)
    wnid = made["table"][1]["id"]
    with tarfile.open(src / TRAIN_TAR) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w") as tar:
        with tarfile.open(fileobj=io.BytesIO(members[f"{wnid}.tar"])) as old:
            for m in old:
                tar.addfile(m, old.extractfile(m))
        info = tarfile.TarInfo("notes.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"notes"))
    members[f"{wnid}.tar"] = inner.getvalue()
    members["README.txt"] = b"not a category"
    with tarfile.open(src / TRAIN_TAR, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        report = imagenet_upload(src, tmp_path / "board", workers=2)
    notes = [b for b in report["bad_images"] if b["file"] == "notes.txt"]
    assert len(notes) == 1 and notes[0]["category"] == wnid
    assert "not an image file" in notes[0]["reason"] and "remove it" in notes[0]["reason"]
    assert any("README.txt" in r.getMessage() and "not a category's tar" in r.getMessage() for r in caplog.records)
    # the other images are all there, labelled as before
    assert table(tmp_path / "board") == made["table"]


@pytest.mark.parametrize("cut", ["inside an image", "between two images"])
def test_a_category_tar_cut_short_is_said_once_with_what_is_on_the_board(made, tmp_path, caplog, cut):
    """A category's tar cut short (the training tar's index is whole), inside an image or between two (where a tar
    reader stops quietly, the images after the cut missing): one error naming it, said once, that says the
    categories packed are on the board and skipped when the upload runs again."""
    src = copy_layout(made, "archives", tmp_path)
    wnid = made["table"][1]["id"]
    with tarfile.open(src / TRAIN_TAR) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    with tarfile.open(fileobj=io.BytesIO(members[f"{wnid}.tar"])) as old:
        last = old.getmembers()[-1]
    members[f"{wnid}.tar"] = members[f"{wnid}.tar"][:last.offset_data + last.size // 2 if cut == "inside an image"
                                                    else last.offset]
    said = rf"\({last.name} is cut short\)" if cut == "inside an image" else \
        rf"\(it ends at byte {last.offset} without the blocks that end a tar: it is cut short\)"
    with tarfile.open(src / TRAIN_TAR, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with caplog.at_level(logging.ERROR, logger="alexnet"), pytest.raises(LayoutError) as err:
        imagenet_upload(src, tmp_path / "board", workers=1)
    on_board = [p.name for p in (tmp_path / "board").iterdir() if p.name.startswith("n")]
    assert wnid not in on_board and len(on_board) == len(made["table"]) - 1
    assert re.fullmatch(rf"{wnid}\.tar in .*{TRAIN_TAR} is not a readable tar {said}: .*"
                        rf"download it again \(the {len(on_board)} categories packed are on the board and skipped "
                        r"next time\)", str(err.value)), str(err.value)
    assert not [r for r in caplog.records if wnid in r.getMessage()], "said once, as the upload's error"


def test_unrecognised_source_lists_the_layouts(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "photos.tar").write_bytes(b"x")
    (tmp_path / "src" / "notes.txt").write_text("x")
    with pytest.raises(LayoutError) as err:
        imagenet_upload(tmp_path / "src", tmp_path / "board")
    message = str(err.value)
    assert "holds notes.txt, photos.tar" in message
    for layout in ("archives", "kaggle_zip", "kaggle_targz", "parquet", "kaggle", "imagefolder", "folders"):
        assert f"  - {layout}: " in message
    assert not (tmp_path / "board").exists(), "a refused source leaves no empty board behind"
    # a board that is already there stays, empty or not
    (tmp_path / "kept").mkdir()
    with pytest.raises(LayoutError):
        imagenet_upload(tmp_path / "missing", tmp_path / "kept")
    assert (tmp_path / "kept").is_dir()


def test_a_board_inside_its_own_source_is_refused_where_it_would_be_read(made, tmp_path):
    """A folder board in a folder of category folders (or the source itself) would be read as a category: refused
    before anything is made. In a folder of archives, which the upload reads by name, it is a board like another."""
    src = copy_layout(made, "folders", tmp_path)
    for board, said in [(src / "board", f"inside the ImageNet source {src}"), (src, "the ImageNet source")]:
        with pytest.raises(AlexnetError, match=rf"^board {board} is {said}, whose folders the folders layout reads as "
                                               "categories: give a board outside it$"):
            imagenet_upload(src, board)
    assert not (src / "board").exists()
    assert imagenet_upload(src, tmp_path / "board")["categories"] == len(made["table"])
    archives = copy_layout(made, "archives", tmp_path / "a")
    assert imagenet_upload(archives, archives / "board")["categories"] == len(made["table"])
    assert imagenet_upload(archives, archives / "board")["skipped"]  # and again, the board beside the archives


def test_a_refused_upload_leaves_none_of_the_folders_it_made(tmp_path):
    (tmp_path / "new").mkdir()
    with pytest.raises(LayoutError):
        imagenet_upload(tmp_path / "missing", tmp_path / "new" / "a" / "b")
    assert [p.name for p in tmp_path.iterdir()] == ["new"] and not any((tmp_path / "new").iterdir())


@pytest.mark.parametrize(("kind", "compression"), [("local", zipfile.ZIP_STORED), ("local", zipfile.ZIP_DEFLATED),
                                                   ("gs", zipfile.ZIP_DEFLATED)])
def test_kaggles_earlier_zip_is_read_without_unzipping(kind, compression, made, cloud_env, tmp_path):
    """Kaggle's earlier zip holds the tree as one tar.gz beside the LOC files: its member is streamed in place,
    stored or deflated, from a path or a bucket, and gives the tree's board."""
    folder = tmp_path / "zip"
    folder.mkdir()
    with zipfile.ZipFile(folder / KAGGLE_ZIP, "w", compression=compression) as zf:
        for path in sorted(Path(made["paths"]["kaggle_targz"]).iterdir()):
            zf.write(path, path.name)
    where = str(folder) if kind == "local" else put_in_bucket(kind, folder, tmp_path.name)
    source = f"{where}/{KAGGLE_ZIP}"
    report = imagenet_upload(source, tmp_path / "board", workers=2)
    assert report["layout"] == "kaggle_targz" and report["source"] == f"{source}: {KAGGLE_TARGZ}"
    assert table(tmp_path / "board") == made["table"]


def test_a_zip_member_is_streamed_and_one_cut_short_is_said(tmp_path):
    data = random_bytes(5000)
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("member", data)
    files = archive_io.Files.at(tmp_path)
    with open(path, "rb") as f:
        (entry,) = zip_io.zip_index(f, "a.zip")
    with zip_io.zip_member_stream(files, str(path), entry) as stream:
        assert stream.read() == data and stream.tell() == entry.compressed
    # a record that says less than the stream holds: the stream ends early
    entry = dataclasses.replace(entry, compressed=entry.compressed // 2)
    with zip_io.zip_member_stream(files, str(path), entry) as stream, \
            pytest.raises(EOFError, match="ends before its deflate stream does"):
        stream.read()


@pytest.mark.parametrize("form", ["the-tar-gz", "a-mirror-s-name"])
def test_kaggles_tar_gz_is_read_from_its_own_path(form, made, tmp_path):
    folder = tmp_path / "kaggle-2019"
    shutil.copytree(made["paths"]["kaggle_targz"], folder)
    name = KAGGLE_TARGZ if form == "the-tar-gz" else KAGGLE_TARGZ.replace(".tar.gz", " (1).tar.gz")
    if name != KAGGLE_TARGZ:
        (folder / KAGGLE_TARGZ).rename(folder / name)
    report = imagenet_upload(folder / name, tmp_path / "board", workers=2)
    assert report["layout"] == "kaggle_targz"
    assert table(tmp_path / "board") == made["table"]


def test_kaggles_tar_gz_validation_images_wait_in_spool_files(made, tmp_path, monkeypatch):
    """Beyond the memory budget (here 1 byte) the validation images wait in spool files: the same board."""
    monkeypatch.setattr(held, "MEMORY_BUDGET", 1)
    spooled = []
    real_open = open

    def watched(path, *args, **kwargs):
        if "spool-val-" in str(path):
            spooled.append(os.path.basename(str(path)))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watched)
    imagenet_upload(made["paths"]["kaggle_targz"], tmp_path / "board", workers=2)
    assert len(set(spooled)) == CLASSES
    assert table(tmp_path / "board") == made["table"]


def test_a_spooled_member_comes_back_whole(tmp_path, monkeypatch):
    from alexnet.data.parts import Member

    monkeypatch.setattr(held, "MEMORY_BUDGET", 1)
    kept = held.Held(str(tmp_path), "val")
    members = [Member("a.JPEG", b"\xff\xd8 image", "", 0x1234ABCD), Member("b.JPEG", None, "empty file"),
               Member("c.JPEG", b"", "", None), Member("d.JPEG", b"more", "odd", 0)]
    for member in members:
        kept.add(7, member)
    kept.spill()
    assert list(tmp_path.iterdir()) == [tmp_path / "spool-val-7"] and kept.bytes == 0
    assert kept.take(7)() == members, "bytes, None, reason and CRC as they were added"
    assert not list(tmp_path.iterdir())


def test_an_upload_from_kaggles_tar_gz_run_again_decodes_nothing(made, tmp_path, monkeypatch):
    """A stream is read again on a second run, but a category already on the board is not decoded."""
    source = made["paths"]["kaggle_targz"]
    imagenet_upload(source, tmp_path / "board", workers=2)
    monkeypatch.setattr(part_zip, "check_image", lambda *a, **k: pytest.fail("a finished category was decoded"))
    report = imagenet_upload(source, tmp_path / "board", workers=2)
    assert report["uploaded"] == [] and len(report["skipped"]) == CLASSES
    assert table(tmp_path / "board") == made["table"]


def test_a_truncated_kaggle_tar_gz_names_the_file(made, tmp_path):
    folder = tmp_path / "kaggle-2019"
    shutil.copytree(made["paths"]["kaggle_targz"], folder)
    packed = folder / KAGGLE_TARGZ
    packed.write_bytes(packed.read_bytes()[:packed.stat().st_size * 2 // 3])
    with pytest.raises(LayoutError, match=f"{KAGGLE_TARGZ} cannot be read to its end.*download it again"):
        imagenet_upload(folder, tmp_path / "board", workers=2)
    assert not (tmp_path / "board" / "categories").exists()


@pytest.mark.parametrize("layout", ["kaggle_targz", "archives"])
def test_a_damaged_header_in_a_tar_gz_is_said_not_taken_for_its_end(layout, made, tmp_path):
    """Kaggle's tar.gz and a compressed training tar with a header damaged half way (the gzip stream intact): one
    error naming the byte, no categories pin (tarfile alone would end the tar there and lose what follows)."""
    src = tmp_path / "src"
    shutil.copytree(made["paths"][layout], src)
    if layout == "archives":
        packed, data = src / f"{TRAIN_TAR}.gz", bytearray((src / TRAIN_TAR).read_bytes())
        (src / TRAIN_TAR).unlink()
    else:
        packed = src / KAGGLE_TARGZ
        data = bytearray(gzip.decompress(packed.read_bytes()))
    entries = as_tarfile_reads(bytes(data))
    header = entries[len(entries) // 2].offset - 512
    data[header + 150] ^= 0x01  # its checksum
    packed.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(LayoutError, match=rf"cannot be read to its end \(a damaged header at byte {header}\)"):
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert not (tmp_path / "board" / "categories").exists()


@pytest.mark.parametrize("layout", ["kaggle_targz", "archives"])
def test_a_tar_gz_whose_crc_is_wrong_is_said(layout, made, tmp_path):
    """The stream is read to its end after the tar's, where gzip checks the CRC of everything decompressed."""
    src = tmp_path / "src"
    shutil.copytree(made["paths"][layout], src)
    if layout == "archives":
        packed = src / f"{TRAIN_TAR}.gz"
        packed.write_bytes(gzip.compress((src / TRAIN_TAR).read_bytes()))
        (src / TRAIN_TAR).unlink()
    else:
        packed = src / KAGGLE_TARGZ
    data = bytearray(packed.read_bytes())
    data[-6] ^= 0x01  # the CRC-32 in the gzip trailer
    packed.write_bytes(bytes(data))
    with pytest.raises(LayoutError, match=r"cannot be read to its end \(CRC check failed.*download it again"):
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert not (tmp_path / "board" / "categories").exists()


def test_a_val_solution_that_lists_images_kaggles_tar_gz_lacks(made, tmp_path):
    folder = tmp_path / "kaggle-2019"
    shutil.copytree(made["paths"]["kaggle_targz"], folder)
    solution = folder / VAL_SOLUTION_FILE
    solution.write_text(solution.read_text() + f"ILSVRC2012_val_09999999,{made['table'][0]['id']} 1 2 3 4\n")
    with pytest.raises(LayoutError, match=r"holds 12 of them.*no validation image was uploaded"):
        imagenet_upload(folder, tmp_path / "board", workers=2)
    board = open_board(tmp_path / "board")
    assert not [n for n in board.pin_names() if n.startswith("val-") or n == "categories"]


def _without_first_row(text: str) -> tuple[str, str]:
    """A solution file's text without its first row, and the image that row labelled."""
    lines = text.splitlines(keepends=True)
    return "".join([lines[0], *lines[2:]]), lines[1].split(",")[0]


@pytest.mark.parametrize("layout", ["kaggle", "kaggle_zip", "kaggle_targz"])
def test_a_val_solution_that_leaves_an_image_unlabelled(layout, made, tmp_path):
    """A solution file that labels fewer validation images than the source holds is not the release's: one error
    naming both, and no validation image uploaded half-labelled (it left them out with a warning)."""
    src = copy_layout(made, layout, tmp_path)
    if layout == "kaggle_zip":
        rewritten = tmp_path / "rewritten.zip"
        with zipfile.ZipFile(src / KAGGLE_ZIP) as old, zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as new:
            for info in old.infolist():
                data = old.read(info)
                if info.filename.endswith(VAL_SOLUTION_FILE):
                    text, image = _without_first_row(data.decode())
                    data = text.encode()
                new.writestr(info, data)
        shutil.move(rewritten, src / KAGGLE_ZIP)
    else:
        text, image = _without_first_row((src / VAL_SOLUTION_FILE).read_text())
        (src / VAL_SOLUTION_FILE).write_text(text)
    with pytest.raises(LayoutError, match=rf"^1 validation images in .* are not in .*{VAL_SOLUTION_FILE}"
                                          rf"(, e\.g\. {image})?: they are not of the same release; .* \(no "
                                          r"validation image was uploaded\)") as err:
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert layout == "kaggle_targz" or image in str(err.value)
    assert "\n" not in str(err.value)
    board = tmp_path / "board"
    assert not board.exists() or not [p for p in board.iterdir() if p.name.startswith(("val-", "categories"))]


def test_a_category_in_two_places_of_kaggles_tar_gz(made, tmp_path):
    """A category's images apart from each other cannot be packed from a stream: said, with what to do."""
    folder = tmp_path / "kaggle-2019"
    folder.mkdir()
    first, second = made["table"][0]["id"], made["table"][1]["id"]
    with tarfile.open(Path(made["paths"]["kaggle_targz"]) / KAGGLE_TARGZ) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar if m.isfile()]
    moved = next(k for k, (m, _) in enumerate(members) if f"/train/{first}/" in m.name)
    later = max(k for k, (m, _) in enumerate(members) if f"/train/{second}/" in m.name)
    members.insert(later + 1, members.pop(moved))
    with tarfile.open(folder / KAGGLE_TARGZ, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data))
    with pytest.raises(LayoutError, match=f"the training images of {first} are not all together.*extract it"):
        imagenet_upload(folder / KAGGLE_TARGZ, tmp_path / "board", workers=2)


def test_a_folder_holding_several_layouts_reads_one_and_names_the_others(made, tmp_path, caplog):
    """Kaggle's zip, Hugging Face's shards and the extracted tree in one folder: the zip is read, then, each moved
    away in turn, the shards and the tree; each time one warning names what is read and what is left alone."""
    both = tmp_path / "several"
    shutil.copytree(made["paths"]["kaggle"], both)
    shutil.copy(Path(made["paths"]["kaggle_zip"]) / KAGGLE_ZIP, both)
    shutil.copytree(Path(made["paths"]["parquet"]) / "data", both / "data")

    def recognised() -> tuple[str, list[str]]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="alexnet.data.sources"):
            layout = open_source(both).layout
        return layout, [r.getMessage() for r in caplog.records]

    layout, said = recognised()
    assert layout == "kaggle_zip" and len(said) == 1, said
    assert (f"reading the kaggle_zip layout ({KAGGLE_ZIP}), leaving alone the parquet layout (data/), the kaggle "
            "layout (ILSVRC)") in said[0]
    (both / KAGGLE_ZIP).unlink()
    layout, said = recognised()
    assert layout == "parquet" and len(said) == 1 and "leaving alone the kaggle layout (ILSVRC);" in said[0], said
    shutil.rmtree(both / "data")
    assert recognised() == ("kaggle", [])


def test_a_tar_gz_beside_the_tree_it_was_extracted_to_is_left_alone(made, tmp_path):
    tree = tmp_path / "kaggle"
    shutil.copytree(made["paths"]["kaggle"], tree)
    (tree / KAGGLE_TARGZ).write_bytes(b"not read")
    assert open_source(tree).layout == "kaggle"


def test_synthetic_layout_is_checked(tmp_path):
    with pytest.raises(LayoutError, match="did you mean `parquet`"):
        imagenet_synthetic(tmp_path / "x", layout="parket")
    with pytest.raises(LayoutError, match="classes <= 1000"):
        imagenet_synthetic(tmp_path / "y", classes=1001, layout="archives")


def test_min_images_and_resize_hold_for_an_archive(made, tmp_path):
    """The upload's options act on an archive as on the extracted tree: the same categories left out, the same
    re-encoded zips."""
    options = {"min_images": 5, "resize": 64, "workers": 2}
    archive = imagenet_upload(made["paths"]["archives"], tmp_path / "archives", **options)
    extracted = imagenet_upload(made["paths"]["kaggle"], tmp_path / "kaggle", **options)
    assert archive["excluded"] == extracted["excluded"] and len(archive["excluded"]) == CLASSES - 1
    assert table(tmp_path / "archives") == table(tmp_path / "kaggle")
    assert table(tmp_path / "archives")[0]["sha256"] != made["table"][0]["sha256"], "CMYK, grayscale, PNG re-encoded"
    # run again on a board that holds every category (an archive's counts are known once a category is read): the
    # categories now too small are left out as from a fresh board, not counted as already there
    whole = imagenet_upload(made["paths"]["archives"], tmp_path / "again", resize=64, workers=2)
    assert not whole["excluded"]
    again = imagenet_upload(made["paths"]["archives"], tmp_path / "again", **options)
    assert again["excluded"] == archive["excluded"] and again["categories"] == archive["categories"]
    assert table(tmp_path / "again") == table(tmp_path / "kaggle")


def test_command_line_writes_and_uploads_a_layout(tmp_path, capsys):
    from alexnet.cli import main

    dest, board = tmp_path / "hf", tmp_path / "board"
    assert main(["synth", str(dest), "--classes", "2", "--images-per-class", "2", "--val-per-class", "1",
                 "--max-side", "24", "--layout", "parquet"]) == 0
    assert "(parquet layout)" in capsys.readouterr().out
    assert sorted(p.name for p in (dest / "data").iterdir())[-1].startswith("validation-")
    assert main(["upload", str(dest), "--board", str(board)]) == 0
    out = capsys.readouterr().out
    assert ": 2 categories (2 uploaded, 0 already there" in out and f"Read {dest / 'data'} (parquet layout)" in out


# -- members that say they hold more than an image may -----------------------------------------------------------


def _insert_after(members: list[tuple[tarfile.TarInfo, bytes | None]], wnid: str, info: tarfile.TarInfo,
                  data: bytes | None) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """``members`` with ``info`` inserted after the first image of ``wnid`` (a category's images stay together)."""
    at = next(i for i, (m, _) in enumerate(members) if f"/train/{wnid}/" in m.name or m.name.startswith(wnid))
    return [*members[:at + 1], (info, data), *members[at + 1:]]


def _big_member(src: Path, layout: str, wnid: str, name: str, size: int) -> None:
    """Add to the source in ``layout`` a training image ``name`` of category ``wnid`` holding ``size`` zeros: in
    Kaggle's tar.gz a member of that size; in the official training tar a sparse member (GNU tar: all hole)."""
    if layout == "kaggle_targz":
        with tarfile.open(src / KAGGLE_TARGZ) as tar:
            members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
        info = tarfile.TarInfo(f"ILSVRC/Data/CLS-LOC/train/{wnid}/{name}")
        info.size = size
        with tarfile.open(src / KAGGLE_TARGZ, "w:gz", compresslevel=1) as tar:
            for m, data in _insert_after(members, wnid, info, bytes(size)):
                tar.addfile(m, io.BytesIO(data) if data is not None else None)
        return
    with tarfile.open(src / TRAIN_TAR) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    folder = src.parent / "sparse"
    folder.mkdir()
    with tarfile.open(fileobj=io.BytesIO(members[f"{wnid}.tar"])) as old:
        old.extractall(folder, filter="data")
    with open(folder / name, "wb") as f:
        f.truncate(size)
    subprocess.run(["tar", "-S", "--format=gnu", "-cf", str(src.parent / "inner.tar"), "-C", str(folder), "."],
                   check=True)
    members[f"{wnid}.tar"] = (src.parent / "inner.tar").read_bytes()
    with tarfile.open(src / TRAIN_TAR, "w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("layout", ["kaggle_targz", "archives"])
def test_a_member_larger_than_an_image_may_be_is_named_and_left_unread(layout, made, tmp_path, monkeypatch):
    """A small archive can hold a member that says it holds gigabytes (a compressed stream of zeros, a sparse
    file in a tar): the upload names it as a bad image without reading it into memory, and uploads the rest."""
    from alexnet.data import images

    if layout == "archives" and shutil.which("tar") is None:
        pytest.skip("GNU tar writes the sparse member")
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 1 << 20)  # the limit read when checked: a 3 MB member is over it
    src = copy_layout(made, layout, tmp_path)
    wnid = made["table"][1]["id"]
    _big_member(src, layout, wnid, f"{wnid}_0large.JPEG", 3 << 20)
    report = imagenet_upload(src, tmp_path / "board", workers=2)
    named = [b for b in report["bad_images"] if b["file"] == f"{wnid}_0large.JPEG"]
    assert len(named) == 1 and named[0]["category"] == wnid, report["bad_images"]
    assert named[0]["reason"] == images.TOO_MANY_BYTES.format(size=3 << 20, limit=1 << 20)
    assert table(tmp_path / "board") == made["table"]


def test_a_zip_member_that_inflates_past_its_recorded_size_is_stopped_there(made, tmp_path):
    """A deflated member of Kaggle's zip whose record says 0 bytes, inflating to 64 MB of zeros: it is inflated no
    further than one byte past its record (not 64 MB into memory), named, and the rest is uploaded."""
    import tracemalloc

    from alexnet.storage.zipformat import inflate_raw

    stream = zlib.compressobj(1, zlib.DEFLATED, -15)
    raw = stream.compress(bytes(64 << 20)) + stream.flush()
    tracemalloc.start()
    try:
        for size in (0, 100):
            with pytest.raises(zlib.error, match=f"it inflates to more than the {size} bytes its record gives|"
                                                 f"does not inflate to the {size} bytes"):
                inflate_raw(raw, size)
        assert tracemalloc.get_traced_memory()[1] < 4 << 20
    finally:
        tracemalloc.stop()
    src = copy_layout(made, "kaggle_zip", tmp_path)
    wnid = made["table"][2]["id"]
    name = f"ILSVRC/Data/CLS-LOC/train/{wnid}/{wnid}_0zeros.JPEG"
    rewritten = tmp_path / "rewritten.zip"
    with zipfile.ZipFile(src / KAGGLE_ZIP) as old, zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            new.writestr(info, old.read(info))
        new.writestr(name, bytes(8 << 20))
    data = bytearray(rewritten.read_bytes())
    with zipfile.ZipFile(rewritten) as zf:
        info = zf.getinfo(name)
    record = data.rindex(b"PK\x01\x02", 0, data.rindex(name.encode()))  # its record in the central directory
    assert struct.unpack_from("<L", data, record + 24)[0] == info.file_size
    struct.pack_into("<L", data, record + 24, 0)  # the central record's size: 0
    (src / KAGGLE_ZIP).write_bytes(bytes(data))
    report = imagenet_upload(src, tmp_path / "board", workers=2)
    named = [b for b in report["bad_images"] if b["file"] == f"{wnid}_0zeros.JPEG"]
    assert len(named) == 1 and "inflates to more than the 0 bytes its record gives" in named[0]["reason"], \
        report["bad_images"]
    assert table(tmp_path / "board") == made["table"]


@pytest.mark.parametrize("layout", ["folders", "parquet"])
def test_an_image_file_over_the_limit_is_named_in_folders_and_parquet_shards(layout, made, tmp_path, monkeypatch):
    """The limit of an image's bytes holds for a folder's files (a sparse file of gigabytes is named without being
    read) and a shard's images as for an archive's members: the largest image, one byte over it, is left out."""
    from alexnet.data import images

    train = Path(made["paths"]["kaggle"]) / "ILSVRC" / "Data" / "CLS-LOC" / "train"
    largest = max((p for p in train.rglob("*.JPEG") if p.name not in {f for _, f in made["bad"]}),
                  key=lambda p: p.stat().st_size)
    size, wnid = largest.stat().st_size, largest.parent.name
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", size - 1)
    report = imagenet_upload(made["paths"][layout], tmp_path / "board", workers=2)
    over = [b for b in report["bad_images"] if b["reason"].startswith("says it holds")]
    assert [(b["category"], b["reason"]) for b in over] == [
        (wnid, images.TOO_MANY_BYTES.format(size=size, limit=size - 1))], report["bad_images"]
    rows = {r["id"]: r for r in table(tmp_path / "board")}
    assert rows[wnid]["images"] == next(r["images"] for r in made["table"] if r["id"] == wnid) - 1


def test_a_parquet_row_group_larger_than_an_upload_reads_at_once_is_refused(made, tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "MAX_ROW_GROUP_BYTES", 1000)
    with pytest.raises(LayoutError, match=r"its row group 0 holds [\d,]+ bytes uncompressed, more than an upload "
                                          r"reads at once \(1,000\): write the shard again with smaller row groups"):
        imagenet_upload(made["paths"]["parquet"], tmp_path / "board", workers=2)


def test_a_devkit_file_that_says_it_holds_more_than_a_devkit_does_is_refused_unread(made, tmp_path, monkeypatch):
    """The devkit's files are read whole: a tar.gz of a few kB whose ground truth inflates to 100 MB of zeros is
    refused from its header, before anything is uploaded."""
    src = copy_layout(made, "archives", tmp_path)
    rewrite_devkit(src, lambda files: {**files, next(n for n in files if n.endswith(GROUND_TRUTH)): bytes(100 << 20)})
    assert (src / DEVKIT).stat().st_size < 1 << 20
    with pytest.raises(LayoutError, match=rf"{DEVKIT}: its .*{GROUND_TRUTH} says it holds 104,857,600 bytes, which is "
                                          r"not ILSVRC2012's devkit .*download the devkit again"):
        imagenet_upload(src, tmp_path / "board", workers=2)
    assert_nothing_uploaded(tmp_path / "board")
