"""Open a zip laid out as Kaggle's ImageNet download, at the real download's counts of files, and measure what
reading its index costs: the wall and CPU seconds of ``open_source()`` on it, the memory it takes at its peak, and
the memory the opened source keeps for the rest of the upload.

The zip holds every file of the real download by name, each one byte long, so that it is small (about 0.4 GB) and
its central directory is the real one's size: 1,281,167 training and 50,000 validation images of 1000 categories,
100,000 test images, 544,546 training and 50,000 validation annotations, and the ``LOC_*`` files. It is written once
to ``--zip`` (default: ``imagenet-object-localization-challenge.zip`` in the system's temporary folder) and kept
there for later runs.

    .venv/bin/python tools/measure-zip-index.py [--zip PATH] [--repeats 3]

Each measurement runs in a child process of its own; medians are printed with the range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

TRAIN, VAL, TEST, TRAIN_XML = 1_281_167, 50_000, 100_000, 544_546
CLS_LOC = "ILSVRC/Data/CLS-LOC"
KAGGLE_ZIP = "imagenet-object-localization-challenge.zip"

CHILD = """
import json, resource, sys, time

def status(key):
    return int(next(line for line in open("/proc/self/status") if line.startswith(key)).split()[1]) / 1024

import alexnet.data.sources as sources
before = status("VmRSS:")
start, cpu = time.monotonic(), time.process_time()
source = sources.open_source(sys.argv[1])
seconds, cpu = time.monotonic() - start, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_mb": status("VmHWM:") - before,
                  "kept_mb": status("VmRSS:") - before, "categories": len(source.names)}))
"""


def write_zip(path: str) -> None:
    """Kaggle's download at its real counts of files, each holding one byte."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    # the package's table of the 1000 classes
    from alexnet.data.classes import class_ids

    wnids = list(class_ids())
    per_class = [TRAIN // len(wnids) + (k < TRAIN % len(wnids)) for k in range(len(wnids))]
    temporary = path + ".part"
    started = time.monotonic()
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr("LOC_synset_mapping.txt", "".join(f"{w} category {w}\n" for w in wnids))
        zf.writestr("LOC_val_solution.csv", "ImageId,PredictionString\n" + "".join(
            f"ILSVRC2012_val_{k + 1:08d},{wnids[k % len(wnids)]} 1 2 3 4\n" for k in range(VAL)))
        zf.writestr("LOC_sample_submission.csv", "ImageId,PredictionString\n")
        xml = 0
        for wnid, count in zip(wnids, per_class, strict=True):
            for k in range(count):
                zf.writestr(f"{CLS_LOC}/train/{wnid}/{wnid}_{k}.JPEG", b"x")
            for k in range(min(count, TRAIN_XML - xml, TRAIN_XML // len(wnids) + 1)):
                zf.writestr(f"ILSVRC/Annotations/CLS-LOC/train/{wnid}/{wnid}_{k}.xml", b"x")
                xml += 1
        for k in range(VAL):
            zf.writestr(f"{CLS_LOC}/val/ILSVRC2012_val_{k + 1:08d}.JPEG", b"x")
            zf.writestr(f"ILSVRC/Annotations/CLS-LOC/val/ILSVRC2012_val_{k + 1:08d}.xml", b"x")
        for k in range(TEST):
            zf.writestr(f"{CLS_LOC}/test/ILSVRC2012_test_{k + 1:08d}.JPEG", b"x")
        files = len(zf.infolist())
    os.replace(temporary, path)
    print(f"wrote {path}: {files} files, {os.path.getsize(path) / 1e6:.0f} MB, in {time.monotonic() - started:.0f} s",
          file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zip", default=os.path.join(tempfile.gettempdir(), KAGGLE_ZIP))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    path = os.path.abspath(args.zip)
    if not os.path.exists(path):
        write_zip(path)
    runs = []
    for _ in range(args.repeats):
        done = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(done.stderr)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    with zipfile.ZipFile(path) as zf:
        members = len(zf.infolist())
    print(f"{path}: {members} files, {os.path.getsize(path) / 1e6:.0f} MB; {runs[0]['categories']} categories; "
          f"{args.repeats} runs")
    for key, what in (("seconds", "seconds"), ("cpu", "CPU seconds"), ("peak_mb", "peak memory MB"),
                      ("kept_mb", "memory kept MB")):
        values = [run[key] for run in runs]
        print(f"{what:16} {statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
