"""A synthetic ImageNet written in each layout people have it in, from the Kaggle tree that
:func:`alexnet.data.synthetic.imagenet_synthetic` draws: the same images, byte for byte, packed as the real
release packs them.

* ``archives``: ``ILSVRC2012_img_train.tar`` (one ``<wnid>.tar`` per category), ``ILSVRC2012_img_val.tar`` (the
  validation images in one folder) and ``ILSVRC2012_devkit_t12.tar.gz`` whose ``data/meta.mat`` is a MATLAB
  struct array ``synsets`` as the devkit's (``ILSVRC2012_ID``, ``WNID``, ``words``, ``gloss``, ``num_children``,
  ``children``, ``wordnet_height``, ``num_train_images``; the classes' ids in an order of their own, not the
  sorted one, and a few inner nodes with children) and ``data/ILSVRC2012_validation_ground_truth.txt`` one id
  per validation image, in image-number order.
* ``kaggle_zip``: ``imagenet-object-localization-challenge.zip``, deflated, with the tree, the ``LOC_`` files and
  a test image and sample submission that the upload does not read.
* ``kaggle_targz``: ``imagenet_object_localization_patched2019.tar.gz`` holding the tree (GNU tar, gzip) and a test
  image, with the ``LOC_`` files beside it, as Kaggle's earlier download unzipped.
* ``parquet``: ``data/train-*.parquet`` (rows in category order, as a conversion of the training tar writes
  them, several row groups a shard), ``data/validation-*.parquet`` (in image-number order) and a
  ``data/test-*.parquet`` whose labels are -1, as Hugging Face's; ``image`` is a struct of ``bytes`` and ``path``.
* ``imagefolder``: ``train/<wnid>/`` and ``val/<wnid>/``, each validation image in the folder of its label, as
  PyTorch's ``valprep.sh`` leaves them, and no name file (the names are the shipped ILSVRC2012 ones).
* ``folders``: the ``<wnid>/`` folders and a ``synset_words.txt``; this layout has no validation set.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .classes import class_ids
from .ilsvrc import DEVKIT, GROUND_TRUTH, META, TRAIN_TAR, VAL_TAR
from .imagenet import MAPPING_FILE
from .kaggle_targz import KAGGLE_TARGZ
from .kaggle_zip import KAGGLE_ZIP
from .val_solution import VAL_SOLUTION_FILE

#: Files or folders a layout writes at the top of ``dest`` (a second synthetic set there is refused).
LAYOUT_FILES = ("ILSVRC", MAPPING_FILE, VAL_SOLUTION_FILE, TRAIN_TAR, VAL_TAR, DEVKIT, KAGGLE_ZIP, KAGGLE_TARGZ,
                "data", "synset_words.txt", "train", "val")
_ROWS_PER_GROUP = 8
_SHARDS = 2
_DATE = 1_335_830_400  # 2012-05-01, the release's month


def _tar_bytes(files: list[tuple[str, bytes]], gzip: bool = False) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz" if gzip else "w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), _DATE, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _images(folder: Path) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file()]


def _val_labels(kaggle: Path) -> list[tuple[str, str]]:
    """``(ImageId, wnid)`` of the validation images, in image-number order."""
    solution = kaggle / VAL_SOLUTION_FILE
    if not solution.exists():
        return []
    rows = [line.split(",", 1) for line in solution.read_text().splitlines()[1:] if line]
    return sorted((image_id, prediction.split()[0]) for image_id, prediction in rows)


def _meta_mat(synsets: list[tuple[str, str]]) -> bytes:
    import scipy.io

    fields = ["ILSVRC2012_ID", "WNID", "words", "gloss", "num_children", "children", "wordnet_height",
              "num_train_images"]
    ids = _devkit_ids(synsets)
    leaves = [(ids[w], w, name, f"the class {name.split(',')[0]}", 0, np.zeros((0,)), 0, 1300) for w, name in synsets]
    # inner nodes as the devkit has them after the classes: ids above 1000, children by id
    children = np.array(sorted(ids.values()), dtype=np.uint16)
    inner = [(1001, "n00001740", "entity", "that which is perceived to have its own distinct existence", len(children),
              children, 18, 0),
             (1002, "n00021939", "artifact, artefact", "a man-made object", 1, children[:1], 17, 0)]
    table = np.zeros((len(leaves) + len(inner), 1), dtype=[(f, "O") for f in fields])
    for k, row in enumerate([*sorted(leaves), *inner]):
        table[k, 0] = row
    out = io.BytesIO()
    scipy.io.savemat(out, {"synsets": table})
    return out.getvalue()


def _devkit_ids(synsets: list[tuple[str, str]]) -> dict[str, int]:
    """ILSVRC2012 ids of the classes: the devkit numbers them in an order of its own (WordNet's hierarchy), not
    by sorted id; here a fixed shuffle of the 1000 stands for it."""
    order = np.random.default_rng(2012).permutation(len(class_ids()))
    position = {w: k for k, w in enumerate(class_ids())}
    return {w: int(order[position[w]]) + 1 for w, _ in synsets}


def _archives(kaggle: Path, dest: Path, synsets: list[tuple[str, str]]) -> dict[str, str]:
    train = kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "train"
    with tarfile.open(dest / TRAIN_TAR, "w", format=tarfile.USTAR_FORMAT) as tar:
        for wnid, _ in synsets:
            blob = _tar_bytes(_images(train / wnid))
            info = tarfile.TarInfo(f"{wnid}.tar")
            info.size, info.mtime, info.mode = len(blob), _DATE, 0o644
            tar.addfile(info, io.BytesIO(blob))
    labels = _val_labels(kaggle)
    if labels:
        val = kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "val"
        (dest / VAL_TAR).write_bytes(_tar_bytes([(f"{i}.JPEG", (val / f"{i}.JPEG").read_bytes()) for i, _ in labels]))
    ids = _devkit_ids(synsets)
    top = "ILSVRC2012_devkit_t12"
    (dest / DEVKIT).write_bytes(_tar_bytes([
        (f"{top}/readme.txt", b"ILSVRC2012 development kit (synthetic)\n"),
        (f"{top}/{META}", _meta_mat(synsets)),
        (f"{top}/{GROUND_TRUTH}", "".join(f"{ids[w]}\n" for _, w in labels).encode()),
    ], gzip=True))
    return {"train": str(dest / TRAIN_TAR)}


def _kaggle_zip(kaggle: Path, dest: Path) -> dict[str, str]:
    with zipfile.ZipFile(dest / KAGGLE_ZIP, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(kaggle.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(kaggle).as_posix())
        first = next((p for p in sorted((kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "val").glob("*.JPEG"))), None)
        if first is not None:  # parts of Kaggle's download that an upload does not read
            zf.writestr("ILSVRC/Data/CLS-LOC/test/ILSVRC2012_test_00000001.JPEG", first.read_bytes())
        zf.writestr("LOC_sample_submission.csv", "ImageId,PredictionString\nILSVRC2012_test_00000001,\n")
    return {"train": str(dest / KAGGLE_ZIP)}


def _kaggle_targz(kaggle: Path, dest: Path) -> dict[str, str]:
    val = kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "val"
    first = next((p for p in sorted(val.glob("*.JPEG"))), None) if val.is_dir() else None
    with tarfile.open(dest / KAGGLE_TARGZ, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(kaggle.rglob("*")):
            if path.is_file() and path.relative_to(kaggle).parts[0] == "ILSVRC":
                tar.add(path, path.relative_to(kaggle).as_posix())
            if first is not None and path.name == "CLS-LOC":  # a test image, which an upload does not read
                info = tarfile.TarInfo("ILSVRC/Data/CLS-LOC/test/ILSVRC2012_test_00000001.JPEG")
                info.size, info.mtime = first.stat().st_size, _DATE
                tar.addfile(info, io.BytesIO(first.read_bytes()))
    for name in (MAPPING_FILE, VAL_SOLUTION_FILE):
        if (kaggle / name).exists():
            shutil.copy(kaggle / name, dest / name)
    return {"train": str(dest / KAGGLE_TARGZ)}


def _parquet(kaggle: Path, dest: Path, synsets: list[tuple[str, str]]) -> dict[str, str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    label_of = {w: k for k, w in enumerate(class_ids())}
    cls_loc = kaggle / "ILSVRC" / "Data" / "CLS-LOC"
    train = [(name, data, label_of[w]) for w, _ in synsets for name, data in _images(cls_loc / "train" / w)]
    val = [(f"{i}.JPEG", (cls_loc / "val" / f"{i}.JPEG").read_bytes(), label_of[w]) for i, w in _val_labels(kaggle)]
    test = [(name, data, -1) for name, data, _ in val[:2]]
    folder = dest / "data"
    folder.mkdir()
    schema = pa.schema([("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("label", pa.int64())])
    for split, rows, shards in (("train", train, _SHARDS), ("validation", val, 1), ("test", test, 1)):
        if not rows:
            continue
        size = -(-len(rows) // shards)
        for s in range(shards):
            chunk = rows[s * size:(s + 1) * size]
            table = pa.table({"image": [{"bytes": d, "path": n} for n, d, _ in chunk],
                              "label": [label for _, _, label in chunk]}, schema=schema)
            pq.write_table(table, folder / f"{split}-{s:05d}-of-{shards:05d}.parquet", row_group_size=_ROWS_PER_GROUP)
    return {"train": str(folder)}


def _folders(kaggle: Path, dest: Path, synsets: list[tuple[str, str]]) -> dict[str, str]:
    for wnid, _ in synsets:
        shutil.copytree(kaggle / "ILSVRC" / "Data" / "CLS-LOC" / "train" / wnid, dest / wnid)
    (dest / "synset_words.txt").write_text("".join(f"{w} {n}\n" for w, n in synsets), encoding="utf-8")
    return {"train": str(dest)}


def _imagefolder(kaggle: Path, dest: Path, synsets: list[tuple[str, str]]) -> dict[str, str]:
    cls_loc = kaggle / "ILSVRC" / "Data" / "CLS-LOC"
    for wnid, _ in synsets:
        shutil.copytree(cls_loc / "train" / wnid, dest / "train" / wnid)
    for image_id, wnid in _val_labels(kaggle):
        folder = dest / "val" / wnid
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cls_loc / "val" / f"{image_id}.JPEG", folder)
    return {"train": str(dest / "train")}


#: Where a training image ``{name}`` of category ``{wnid}`` lies inside what :func:`write_layout` returns.
MEMBER_PATHS = {"archives": "{wnid}.tar/{name}", "kaggle_zip": "ILSVRC/Data/CLS-LOC/train/{wnid}/{name}",
                "kaggle_targz": "ILSVRC/Data/CLS-LOC/train/{wnid}/{name}",
                "parquet": "{name}", "imagefolder": "{wnid}/{name}", "folders": "{wnid}/{name}"}


def write_layout(layout: str, kaggle: Path, dest: Path, synsets: list[tuple[str, str]]) -> dict[str, Any]:
    """Write the Kaggle tree at ``kaggle`` (of the classes ``synsets``) into ``dest`` in ``layout``; where its
    training images are (``{"train": path}``: the archive, or the folder of shards or categories)."""
    dest.mkdir(parents=True, exist_ok=True)
    if layout == "archives":
        return _archives(kaggle, dest, synsets)
    if layout == "kaggle_zip":
        return _kaggle_zip(kaggle, dest)
    if layout == "kaggle_targz":
        return _kaggle_targz(kaggle, dest)
    if layout == "parquet":
        return _parquet(kaggle, dest, synsets)
    if layout == "imagefolder":
        return _imagefolder(kaggle, dest, synsets)
    return _folders(kaggle, dest, synsets)


__all__ = ["LAYOUT_FILES", "MEMBER_PATHS", "write_layout"]
