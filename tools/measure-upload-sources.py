"""Upload the same synthetic ImageNet from each layout to a local folder board, side by side: wall time (from the
call of imagenet_upload() to its return), the CPU time of the whole child process, the extra disk the upload uses
while it runs (the peak of its scratch folder, sampled every 25 ms) and its peak memory. Each upload runs in a
child process with a temporary folder of its own, the layouts taking turns in a rotating order, several rounds;
medians are printed with the range.

With ``--cold`` the source's files are dropped from the page cache before each upload (``posix_fadvise``
``DONTNEED`` on each of them, nothing else), so that every upload reads its source from the disk, as an upload of
a real ImageNet (150 GB, more than the memory of most machines) does; without it the source is read from memory.

    .venv/bin/python tools/measure-upload-sources.py [--classes 16] [--images 80] [--val 10] [--repeats 5]
        [--workers 8,2] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHILD = """
import json, resource, sys, time
import alexnet
start = time.monotonic()
report = alexnet.imagenet_upload(sys.argv[1], sys.argv[2], workers=int(sys.argv[3]))
# the peak resident memory of this program (VmHWM starts again at exec; ru_maxrss would count the parent's)
rss_kb = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": time.monotonic() - start, "rss_kb": rss_kb, "cpu": usage.ru_utime + usage.ru_stime,
                  "images": report["images"], "val_images": report["val_images"], "layout": report["layout"]}))
"""


def folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def evict(source: str) -> None:
    """Drop the files under ``source`` from the page cache (written back first, so that the pages are clean)."""
    os.sync()
    paths = [source] if os.path.isfile(source) else [os.path.join(root, name) for root, _, names in os.walk(source)
                                                      for name in names]
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def upload(source: str, work: Path, workers: int, cold: bool = False) -> dict:
    scratch, board = work / "tmp", work / "board"
    shutil.rmtree(work, ignore_errors=True)
    scratch.mkdir(parents=True)
    if cold:
        evict(source)
    env = {**os.environ, "TMPDIR": str(scratch), "ALEXNET_PROGRESS": "0"}
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], folder_bytes(scratch))
            time.sleep(0.025)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, source, str(board), str(workers)], env=env, capture_output=True,
                             text=True, check=True).stdout
    finally:
        done.set()
        sampler.join()
    result = json.loads(out.strip().splitlines()[-1])
    zips = sorted(p.stat().st_size for p in board.glob("n*/*/*.zip"))
    return {**result, "peak_scratch": peak[0], "largest_zip": zips[-1], "median_zip": statistics.median(zips)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--images", type=int, default=80)
    parser.add_argument("--val", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layouts", default="kaggle,archives,kaggle_zip,parquet")
    parser.add_argument("--workers", default="8", help="workers of the upload, one table for each (e.g. 8,2)")
    parser.add_argument("--cold", action="store_true", help="read every source from the disk, not the page cache")
    parser.add_argument("--root", help="write the synthetic sets here and keep them (default: a temporary folder)")
    args = parser.parse_args()
    import alexnet

    layouts = args.layouts.split(",")
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="alexnet-measure-"))
    try:
        sources = {}
        shape = {"classes": args.classes, "images": args.images, "val": args.val}
        for layout in layouts:
            kept = root / f"{layout}.json"
            if kept.is_file() and json.loads(kept.read_text())["shape"] == shape:
                info = json.loads(kept.read_text())
                sources[layout] = info["path"]
                continue
            shutil.rmtree(root / layout, ignore_errors=True)
            info = alexnet.imagenet_synthetic(root / layout, classes=args.classes, images_per_class=args.images,
                                              val_per_class=args.val, seed=7, layout=layout)
            sources[layout] = info["path"]
            kept.write_text(json.dumps({"shape": shape, "path": str(info["path"]), "bytes": info["bytes"]}))
        print(f"{args.classes} categories x {args.images} training + {args.val} validation images, "
              f"{info['bytes'] / 1e6:.0f} MB of JPEG; {os.cpu_count()} CPUs")
        for workers in [int(w) for w in args.workers.split(",")]:
            runs: dict[str, list[dict]] = {layout: [] for layout in layouts}
            for round_ in range(args.repeats):
                order = layouts[round_ % len(layouts):] + layouts[:round_ % len(layouts)]
                for layout in order:
                    runs[layout].append(upload(sources[layout], root / "work", workers, args.cold))
            print(f"workers = {workers}, {args.repeats} rounds, source read from "
                  f"{'the disk (--cold)' if args.cold else 'the page cache'}")
            print(f"{'layout':<12} {'seconds (median, range)':<28} {'CPU s':<8} {'peak scratch MB':<20} "
                  f"{'largest zip MB':<15} {'peak RSS MB':<12}")
            for layout, results in runs.items():
                seconds = [r["seconds"] for r in results]
                scratch = [r["peak_scratch"] / 1e6 for r in results]
                rss = [r["rss_kb"] / 1024 for r in results]
                cpu = statistics.median(r["cpu"] for r in results)
                print(f"{layout:<12} {statistics.median(seconds):6.2f} ({min(seconds):.2f}-{max(seconds):.2f})"
                      f"{'':<12} {cpu:6.2f}   {statistics.median(scratch):6.1f} (max {max(scratch):.1f}){'':<4} "
                      f"{results[0]['largest_zip'] / 1e6:6.1f}{'':<9} {statistics.median(rss):6.0f}", flush=True)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
        else:
            shutil.rmtree(root / "work", ignore_errors=True)


if __name__ == "__main__":
    main()
