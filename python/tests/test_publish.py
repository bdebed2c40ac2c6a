"""Writing the board's pins so that a failure never leaves a board that cannot be read or written again: tables read
from their newest complete version and written whole, versions that failed cleaned up, a full disk said, pruning
that keeps what the newest categories table names. Folder boards, with gs:// (emulator) and s3:// (moto) where the
behaviour is the buckets' too."""

from __future__ import annotations

import datetime
import os
import threading
import time
from pathlib import Path

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


from alexnet.storage import layout
from alexnet.storage.board import open_board
from alexnet.storage.publish import quiet_pins, write_table

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


# -- tables: read from the newest complete version ------------------------------------------------------------


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
