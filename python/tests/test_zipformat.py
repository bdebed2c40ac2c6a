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


@pytest.mark.parametrize("fast", [True, False])
def test_crc_and_inflate_agree_with_zlib(monkeypatch, fast):
    if not fast:
        monkeypatch.setattr(zipformat, "_fast", zlib)
    data = b"".join(bytes([i % 251]) * (i % 97) for i in range(5000))
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = compressor.compress(data) + compressor.flush()
    assert crc32(data) == zlib.crc32(data) and crc32(data[100:], crc32(data[:100])) == zlib.crc32(data)
    assert inflate_raw(raw, len(data)) == data and inflate_raw(memoryview(raw), len(data)) == data
    damaged = raw[:len(raw) // 3] + b"\xff" * 40
    with pytest.raises(zipformat.INFLATE_ERRORS):
        inflate_raw(damaged, len(data))


def test_isal_is_used_where_installed():
    pytest.importorskip("isal")
    assert zipformat._fast is not zlib
