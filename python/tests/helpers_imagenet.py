"""Hand-made ImageNet trees for the layout tests (a few placeholder files, written fast, no decoding needed), and an
upload killed half way."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

NAMES = {
    "n01440764": "tench, Tinca tinca",
    "n01443537": "goldfish, Carassius auratus",
    "n01484850": "great white shark, white shark, man-eater, man-eating shark, Carcharodon carcharias",
}


def touch(path: Path, data: bytes = b"\xff\xd8 placeholder \xff\xd9") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_category(folder: Path, names: Iterable[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        touch(folder / name)


def write_kaggle(
    root: Path,
    train: Mapping[str, Iterable[str]],
    val: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = NAMES,
    solution: bool = True,
) -> Path:
    """Kaggle's layout under ``root``: ``train`` maps wnid -> file names, ``val`` maps ImageId -> wnid.

    Validation rows are written in reverse order with a second box, as in the real solution file, which is
    neither sorted nor limited to one box per image.
    """
    cls_loc = root / "ILSVRC" / "Data" / "CLS-LOC"
    for wnid, files in train.items():
        write_category(cls_loc / "train" / wnid, files)
    if names is not None:
        (root / "LOC_synset_mapping.txt").write_text("".join(f"{w} {n}\n" for w, n in names.items()))
    if val is not None:
        for image_id in val:
            touch(cls_loc / "val" / f"{image_id}.JPEG")
        if solution:
            rows = [f"{i},{w} 10 20 110 120 {w} 5 6 50 60 \n" for i, w in reversed(list(val.items()))]
            (root / "LOC_val_solution.csv").write_text("ImageId,PredictionString\n" + "".join(rows))
    return root


def write_folders(root: Path, train: Mapping[str, Iterable[str]]) -> Path:
    """A plain folder of ``<wnid>/`` folders (the fall11 layout)."""
    for wnid, files in train.items():
        write_category(root / wnid, files)
    return root


def write_imagefolder(root: Path, train: Mapping[str, Iterable[str]],
                      val: Mapping[str, Iterable[str]] | None = None) -> Path:
    """torchvision's ImageFolder tree under ``root``: ``train/<wnid>/`` and, with ``val`` (wnid -> file names),
    ``val/<wnid>/``."""
    for wnid, files in train.items():
        write_category(root / "train" / wnid, files)
    for wnid, files in (val or {}).items():
        write_category(root / "val" / wnid, files)
    return root


def killed_upload(source: str | Path, board: Path, env: dict[str, str], done: int = 2, timeout: float = 90) -> None:
    """Upload ``source`` to ``board`` in a child process, one category at a time and slowed down, and kill it
    (SIGKILL) once ``done`` category zips are on the board."""
    script = textwrap.dedent(f"""
        import time
        import alexnet.data.packing as packing
        import alexnet.data.upload as upload
        original = packing._publish
        def slow(*args, **kwargs):
            result = original(*args, **kwargs)
            time.sleep(0.4)
            return result
        packing._publish = slow
        upload.imagenet_upload({str(source)!r}, {str(board)!r}, workers=1)
        """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**env, "ALEXNET_PROGRESS": "0"},
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(list(board.glob("n*/*/*.zip"))) < done:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
