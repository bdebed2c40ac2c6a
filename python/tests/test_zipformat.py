"""The one-pass stored zip writer gives the bytes Python's zipfile gives (so boards written before keep their
sha256), with or without the CRC given, past the zip64 limits too; CRC-32 and raw inflate agree with zlib's, with
ISA-L and without it."""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
import zlib

import pytest

from alexnet.storage import zipformat
from alexnet.storage.zipformat import crc32, inflate_raw, stored_zip

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="zipfile writes another create_system on Windows")

MEMBERS = [("n01440764_10026.JPEG", b"\xff\xd8jpeg bytes\xff\xd9" * 50), ("empty.JPEG", b""),
           ("naïve_ü.JPEG", b"a name that is not ASCII"), ("n01440764_2.png", bytes(range(256)) * 9)]


def zipfile_bytes(members) -> bytes:
    """The zip as Python's zipfile writes these members stored, dated 1980-01-01, mode 644."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=zipformat.ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return out.getvalue()


def written(tmp_path, members, *, give_crc: bool):
    dest = tmp_path / "out.zip"
    with stored_zip(dest) as zip_file:
        for name, data in members:
            zip_file.add(name, data, zlib.crc32(data) if give_crc else None)
    return dest.read_bytes(), zip_file


@pytest.mark.parametrize("give_crc", [False, True])
@pytest.mark.parametrize("count", [0, 1, 4])
def test_the_bytes_of_zipfile(tmp_path, give_crc, count):
    data, zip_file = written(tmp_path, MEMBERS[:count], give_crc=give_crc)
    assert data == zipfile_bytes(MEMBERS[:count])
    assert zip_file.size == len(data) and zip_file.sha256 == hashlib.sha256(data).hexdigest()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        assert [(i.filename, zf.read(i)) for i in zf.infolist()] == MEMBERS[:count]


@pytest.mark.parametrize("limits", [(300, 1 << 16), (10**6, 2), (4000, 2)])
def test_the_bytes_of_zipfile_past_the_zip64_limits(tmp_path, monkeypatch, limits):
    """Members, offsets and counts past the limits, which would otherwise take gigabytes to reach."""
    size_limit, count_limit = limits
    for module in (zipfile, zipformat):
        monkeypatch.setattr(module, "ZIP64_LIMIT", size_limit)
        monkeypatch.setattr(module, "ZIP_FILECOUNT_LIMIT", count_limit)
    members = [*MEMBERS, ("big.JPEG", b"x" * 1000), ("last.JPEG", b"y" * 10)]
    data, _ = written(tmp_path, members, give_crc=True)
    assert data == zipfile_bytes(members)
    assert (b"PK\x06\x06" in data) == (len(members) > count_limit or len(data) > size_limit)


def test_a_failed_block_leaves_no_complete_zip(tmp_path):
    dest = tmp_path / "out.zip"
    with pytest.raises(RuntimeError), stored_zip(dest) as zip_file:
        zip_file.add("a.JPEG", b"abc")
        raise RuntimeError("stop")
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(dest)


@pytest.mark.parametrize("inflater", ["libdeflate", "isal", "zlib"])
def test_crc_and_inflate_agree_with_zlib(monkeypatch, inflater):
    if inflater == "libdeflate":
        pytest.importorskip("deflate")
    else:
        monkeypatch.setattr(zipformat, "_whole", None)
    if inflater == "zlib":
        monkeypatch.setattr(zipformat, "_fast", zlib)
    data = b"".join(bytes([i % 251]) * (i % 97) for i in range(5000))
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = compressor.compress(data) + compressor.flush()
    assert crc32(data) == zlib.crc32(data) and crc32(data[100:], crc32(data[:100])) == zlib.crc32(data)
    assert inflate_raw(raw, len(data)) == data and inflate_raw(memoryview(raw), len(data)) == data
    damaged = raw[:len(raw) // 3] + b"\xff" * 40
    for stream, size in [(damaged, len(data)), (raw, len(data) - 1), (raw, len(data) + 1), (raw, 0)]:
        with pytest.raises(zipformat.INFLATE_ERRORS):
            inflate_raw(stream, size)
    empty = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert inflate_raw(empty.compress(b"") + empty.flush(), 0) == b""


def test_isal_and_libdeflate_are_used_where_installed(monkeypatch):
    pytest.importorskip("isal")
    deflate = pytest.importorskip("deflate")
    assert zipformat._fast is not zlib and zipformat._whole is deflate
    calls = []
    monkeypatch.setattr(deflate, "deflate_decompress", lambda data, size: calls.append(size) or bytearray(size))
    assert inflate_raw(b"\x03\x00", 5) == bytes(5) and calls == [5]


def directory_of(data: bytes, keep=None):
    return zipformat.read_directory(io.BytesIO(data), keep)


def as_zipfile_reads_it(data: bytes, keep=lambda name: True):
    """(names, rows, start) of the zip ``data`` as zipfile reads it, in read_directory's terms."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
        start = zf.start_dir
    ends = [*(i.header_offset for i in infos[1:]), start]
    rows = [(i.filename, (i.header_offset, end, i.compress_type, i.compress_size, i.file_size, i.CRC))
            for i, end in zip(infos, ends, strict=True) if not i.is_dir() and keep(i.filename)]
    return [name for name, _ in rows], [row for _, row in rows], start


def rows_of(directory) -> list[tuple[int, ...]]:
    width = len(zipformat.FIELDS)
    return [tuple(directory.table[k:k + width]) for k in range(0, len(directory.table), width)]


def zips_of_every_kind() -> dict[str, bytes]:
    """Zips as zipfile writes them: stored and deflated members, folders, a comment, a program before the zip."""
    members = [*MEMBERS, ("big.JPEG", b"x" * 3000)]
    out = {"stored": zipfile_bytes(members)}
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.mkdir("train")
        for name, data in members:
            zf.writestr(f"train/{name}", data)
        zf.mkdir("train/empty")
        zf.comment = b"a comment after the end record " * 3
    out["deflated, folders, a comment"] = deflated.getvalue()
    out["a program before the zip"] = b"#!/bin/sh\nexec unzip \"$0\"\n" * 20 + out["stored"]
    return out


@pytest.mark.parametrize("block", [8 << 20, 64, 47])
@pytest.mark.parametrize("kind", list(zips_of_every_kind()))
def test_the_directory_is_read_as_zipfile_reads_it(monkeypatch, kind, block):
    """Each member's name, local header, end of record, method, sizes and CRC, read a block at a time, whatever the
    block cuts through."""
    monkeypatch.setattr(zipformat, "DIRECTORY_BLOCK", block)
    data = zips_of_every_kind()[kind]
    directory = directory_of(data)
    names, rows, start = as_zipfile_reads_it(data)
    assert directory.names == names and rows_of(directory) == rows and directory.start == start
    assert "train/naïve_ü.JPEG" in names or "naïve_ü.JPEG" in names


@pytest.mark.parametrize("limits", [(300, 1 << 16), (10**6, 2), (4000, 2)])
@pytest.mark.parametrize("writer", ["zipfile", "stored_zip"])
def test_the_directory_is_read_past_the_zip64_limits(tmp_path, monkeypatch, limits, writer):
    """Sizes, offsets and counts given in the zip64 records, as zipfile and the project's writer write them."""
    size_limit, count_limit = limits
    for module in (zipfile, zipformat):
        monkeypatch.setattr(module, "ZIP64_LIMIT", size_limit)
        monkeypatch.setattr(module, "ZIP_FILECOUNT_LIMIT", count_limit)
    members = [*MEMBERS, ("big.JPEG", b"x" * 1000), ("last.JPEG", b"y" * 10)]
    data = zipfile_bytes(members) if writer == "zipfile" else written(tmp_path, members, give_crc=False)[0]
    assert b"PK\x06\x06" in data or b"\x01\x00\x08\x00" in data or b"\x01\x00\x10\x00" in data  # zip64 records
    directory = directory_of(data)
    names, rows, start = as_zipfile_reads_it(data)
    assert directory.names == names == [name for name, _ in members] and rows_of(directory) == rows
    assert directory.start == start


def test_a_name_without_the_utf8_flag_is_read_as_code_page_437():
    data = zipfile_bytes([("caf?.JPEG", b"abc")]).replace(b"caf?", b"caf\x82")  # 0x82 is é in code page 437
    assert directory_of(data).names == as_zipfile_reads_it(data)[0] == ["café.JPEG"]


def test_members_left_out_are_not_kept_and_the_ends_still_reach_the_next_record():
    data = zips_of_every_kind()["deflated, folders, a comment"]
    keep = lambda name: name.endswith(".JPEG")  # noqa: E731
    directory = directory_of(data, keep)
    names, rows, _ = as_zipfile_reads_it(data, keep)
    assert directory.names == names == ["train/n01440764_10026.JPEG", "train/empty.JPEG", "train/naïve_ü.JPEG",
                                        "train/big.JPEG"]
    assert rows_of(directory) == rows
    # the record after empty.JPEG is naïve_ü's; after naïve_ü.JPEG comes the png, which is left out
    png = next(i for i in zipfile.ZipFile(io.BytesIO(data)).infolist() if i.filename.endswith(".png"))
    assert rows_of(directory)[2][1] == png.header_offset


def test_an_end_record_is_told_from_its_likeness_in_the_comment():
    """zipfile takes the last signature for the end record and fails; the comment's length tells the real one."""
    data = zips_of_every_kind()["stored"]
    comment = b"PK\x05\x06 looks like an end record " * 3
    commented = data[:-2] + len(comment).to_bytes(2, "little") + comment
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(commented))
    directory, plain = directory_of(commented), directory_of(data)
    assert directory.names == plain.names and directory.table == plain.table and directory.start == plain.start


def damaged_zips() -> dict[str, bytes]:
    good = zips_of_every_kind()["stored"]
    start = as_zipfile_reads_it(good)[2]
    end = good.rindex(b"PK\x05\x06")
    return {
        "cut short in its members": good[:len(good) // 2],
        "cut short in its directory": good[:start + 60],
        "cut short in its end record": good[:-5],
        **{f"{cut} byte(s) short": good[:-cut] for cut in (1, 2, 3)},  # the signature kept, no room for the record
        "not a zip": b"this is not a zip, only text " * 100,
        "an empty file": b"",
        "a damaged directory record": good[:start + 1] + b"X" + good[start + 2:],
        "a directory larger than the file": good[:end + 12] + (10**6).to_bytes(4, "little") + good[end + 16:],
    }


@pytest.mark.parametrize("kind", list(damaged_zips()))
def test_a_damaged_zip_is_told(kind):
    with pytest.raises(zipformat.DamagedZip):
        directory_of(damaged_zips()[kind])


def test_a_zip64_member_without_its_extra_field_is_told(monkeypatch):
    for module in (zipfile, zipformat):
        monkeypatch.setattr(module, "ZIP64_LIMIT", 300)
    data = zipfile_bytes([("big.JPEG", b"x" * 1000)])
    start = as_zipfile_reads_it(data)[2]
    extra = data.index(b"\x01\x00\x10\x00", start)  # the central record's zip64 field: id 1, 16 bytes
    damaged = data[:extra] + b"\x09\x00" + data[extra + 2:]  # now a field of another kind
    with pytest.raises(zipformat.DamagedZip, match="zip64 extra field"):
        directory_of(damaged)
