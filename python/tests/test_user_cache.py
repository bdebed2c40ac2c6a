"""The user's cache: every default cache folder of the package is under one root, :func:`cache_root`, and what is
cached per location is in a folder named by one key, :func:`location_key`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from alexnet.errors import AlexnetError
from alexnet.model.pin import default_model_cache
from alexnet.storage.board import default_board
from alexnet.storage.cache import TMP, cache_root, default_cache_dir, location_key, open_cache
from alexnet.train.measure import CACHE_ENV, cache_file

PACKAGE = Path(__file__).resolve().parents[1] / "alexnet"


def test_every_default_cache_is_under_the_one_root(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ALEXNET_BOARD", raising=False)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    root = tmp_path / "alexnet"
    assert cache_root() == str(root)
    assert default_board() == str(root / "board")
    assert default_cache_dir("gs://bucket/board") == str(root / "data" / location_key("gs://bucket/board"))
    assert default_model_cache() == str(root / "models")
    assert cache_file() == root / "precision.json"


def test_the_user_cache_and_the_location_key_are_computed_in_one_place():
    sources = {path: path.read_text() for path in PACKAGE.rglob("*.py")}
    computed = [path.relative_to(PACKAGE).as_posix() for path, text in sources.items() if "user_cache_dir(" in text]
    assert computed == ["storage/cache.py"]
    keyed = [path.relative_to(PACKAGE).as_posix() for path, text in sources.items()
             if re.search(r"sha256\([^)]*\.encode\(\)\)\.hexdigest\(\)\[:16\]", text)]
    assert keyed == ["storage/cache.py"]
    assert location_key("gs://bucket/board") == location_key("gs://bucket/board") != location_key("gs://bucket/other")
    assert re.fullmatch(r"[0-9a-f]{16}", location_key("gs://bucket/board"))


def test_a_model_read_from_a_bucket_is_copied_into_the_model_cache(monkeypatch, tmp_path):
    import fsspec

    from alexnet.model import saved

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/model/alexnet.keras", b"the model")
    monkeypatch.setattr(saved, "_location_paths", lambda resolved: (fs, "/bucket/model/alexnet.keras", ""))
    local, _ = saved._remote_copy("s3://bucket/model")
    folder = tmp_path / "alexnet" / "models" / "remote" / location_key("s3://bucket/model")
    assert local == str(folder / "alexnet.keras")
    assert Path(local).read_bytes() == b"the model"


def test_a_cache_dir_that_cannot_be_written_is_refused_before_any_fetch_as_a_scratch_is(tmp_path, monkeypatch):
    from alexnet.data.upload import _scratch_parent
    from alexnet.storage import outputs

    locked = tmp_path / "locked"
    (locked / TMP).mkdir(parents=True)
    real_access = os.access
    # a folder this process may not write (chmod does not stop root, who runs some of the tests)
    monkeypatch.setattr(outputs.os, "access", lambda path, mode: not str(path).startswith(str(locked))
                        and real_access(path, mode))
    with pytest.raises(AlexnetError, match=r"^`cache_dir` = .*locked cannot hold the cache \(it cannot be written\): "
                                           r"give a folder this process may write, or leave `cache_dir` unset"):
        open_cache(locked, "gs://bucket/board")
    with pytest.raises(AlexnetError, match=r"^`scratch` = .*locked cannot hold the upload's scratch folder \(it "
                                           r"cannot be written\): .* leave `scratch` unset for the system's"):
        _scratch_parent(str(locked))
