"""tools/measure-upload-sources.py: the sets it measures, with real JPEGs in place of the drawn ones (--jpegs)."""

from __future__ import annotations

import argparse
import importlib.util
import io
import zipfile
from pathlib import Path

import pytest
from PIL import Image

TOOL = Path(__file__).resolve().parents[2] / "tools" / "measure-upload-sources.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("measure_upload_sources", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jpegs(folder: Path, sizes: list[tuple[int, int]]) -> list[bytes]:
    folder.mkdir()
    out = []
    for i, size in enumerate(sizes):
        buf = io.BytesIO()
        Image.new("RGB", size, (40 * i, 90, 200 - 30 * i)).save(buf, format="JPEG", quality=80)
        (folder / f"photo_{i}.jpg").write_bytes(buf.getvalue())
        out.append(buf.getvalue())
    (folder / "notes.txt").write_text("not an image")
    return out


def _args(jpegs: Path | None) -> argparse.Namespace:
    return argparse.Namespace(classes=2, images=7, val=2, jpegs=str(jpegs) if jpegs else None)


def test_real_jpegs_replace_the_drawn_images_in_every_layout(tool, tmp_path):
    real = _jpegs(tmp_path / "real", [(64, 48), (50, 70), (33, 33)])
    root = tmp_path / "sets"
    sources, image_bytes = tool.write_sets(root, ["kaggle", "kaggle_zip", "kaggle_zip_stored", "archives"],
                                           _args(tmp_path / "real"))
    tree = Path(sources["kaggle"])
    data = tree / "ILSVRC" / "Data"
    files = sorted(data.rglob("*.JPEG"))
    # every image, training and validation, is a real JPEG, in turn
    assert len(files) == 2 * 7 + 2 * 2
    assert [p.read_bytes() for p in files] == [real[i % 3] for i in range(len(files))]
    assert image_bytes == sum(p.stat().st_size for p in data.rglob("*") if p.is_file())

    def members(layout: str) -> dict[str, tuple[int, bytes]]:
        archive = Path(sources[layout]) / "imagenet-object-localization-challenge.zip"
        with zipfile.ZipFile(archive) as zf:
            return {i.filename: (i.compress_type, zf.read(i)) for i in zf.infolist() if "/Data/" in i.filename}

    for layout, method in (("kaggle_zip", zipfile.ZIP_DEFLATED), ("kaggle_zip_stored", zipfile.ZIP_STORED)):
        held = members(layout)
        for path in files:
            name = path.relative_to(tree).as_posix()
            assert held[name] == (method, path.read_bytes())
    assert (Path(sources["archives"]) / "ILSVRC2012_img_train.tar").is_file()


def test_sets_are_kept_for_the_same_shape_and_written_again_for_another(tool, tmp_path):
    real = _jpegs(tmp_path / "real", [(40, 30)])
    root = tmp_path / "sets"
    sources, _ = tool.write_sets(root, ["kaggle", "kaggle_zip"], _args(None))
    archive = Path(sources["kaggle_zip"]) / "imagenet-object-localization-challenge.zip"
    written = archive.stat().st_mtime_ns
    drawn = sorted((Path(sources["kaggle"]) / "ILSVRC" / "Data").rglob("*.JPEG"))[-1].read_bytes()
    assert drawn not in real

    again, _ = tool.write_sets(root, ["kaggle", "kaggle_zip"], _args(None))
    assert again == sources and archive.stat().st_mtime_ns == written

    tool.write_sets(root, ["kaggle", "kaggle_zip"], _args(tmp_path / "real"))
    last = sorted((Path(sources["kaggle"]) / "ILSVRC" / "Data").rglob("*.JPEG"))[-1]
    assert last.read_bytes() == real[0]
    with zipfile.ZipFile(archive) as zf:
        assert zf.read(last.relative_to(Path(sources["kaggle"])).as_posix()) == real[0]


def test_a_folder_without_jpegs_is_refused(tool, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match=r"holds no \.JPEG or \.jpg file"):
        tool.real_jpegs(str(tmp_path / "empty"))
