"""Upload the same synthetic ImageNet from each layout to a local folder board, side by side: wall time (from the
call of imagenet_upload() to its return), the CPU time of the whole child process, the extra disk the upload uses
while it runs (the peak of its scratch folder, sampled every 25 ms) and its peak memory. Each upload runs in a
child process with a temporary folder of its own, the layouts taking turns in a rotating order, several rounds;
medians are printed with the range, and each layout's time over the first layout's in the same round (a machine
whose speed drifts between rounds changes both alike).

With ``--cold`` the source's files are dropped from the page cache before each upload (``posix_fadvise``
``DONTNEED`` on each of them, nothing else), so that every upload reads its source from the disk, as an upload of
a real ImageNet (150 GB, more than the memory of most machines) does; without it the source is read from memory.

With ``--disk IOPS,MIBPS`` (as root, cgroup v1's blkio controller) the upload also reads from a disk as slow as a
cloud volume: each child runs in a cgroup whose reads from the source's disk are limited to IOPS requests and MIBPS
MiB a second (``3000,125`` is an EBS gp3 volume's default), and before each upload the kernel's cached directories
and inodes are dropped as well (``/proc/sys/vm/drop_caches``), so that a tree's folders and files are looked up
on the disk as on a disk just attached. It implies ``--cold``; the table then also gives the read requests and MB
the disk served to each upload (Python's libraries are read again before it, outside the cgroup).

With ``--board s3`` the uploads go to a bucket of moto's S3 server (started on 127.0.0.1 as the tests start it, on
the same CPUs, and stopped after; each board is deleted once measured) instead of a local folder board.

The layouts are those of ``imagenet_synthetic()``, and ``kaggle_zip_stored``: Kaggle's zip of the same images with
its members stored instead of deflated (as ``zip -0`` writes them), which tells the cost of inflating them apart from
the rest of reading a zip; and ``kaggle_zip_isal``: Kaggle's zip uploaded with libdeflate (the ``deflate`` package)
hidden from the child, so that its members are inflated as they are without it, by ISA-L.

With ``--per-image`` no upload is made: each layout's images are read by the upload's own code (every part of the
source opened and its members made, as a packing thread does, in a child process of its own), then each image is
checked as the upload checks it, one after another on one thread from the page cache, best of ``--repeats``; the
table gives the microseconds an image of each and their sum over the first layout's (and that ratio with the first
layout's checks in every row: the images are the same, and the machine's speed drifts between children). When the
CPU sets the pace, that sum is what an upload's CPU time is made of, and the ratio is how much faster or slower than
the first layout another can be.

With ``--jpegs FOLDER`` the drawn images of the synthetic set (training and validation; it has no odd files) are
replaced by the JPEGs in ``FOLDER``, in turn, before the layouts are written from it: how much inflating a zip's
members costs depends on how the deflater packed them, which depends on the JPEGs, so the drawn ones can be
checked against real ones (a category of ImageNet, say).

    .venv/bin/python tools/measure-upload-sources.py [--classes 16] [--images 80] [--val 10] [--repeats 5]
        [--workers 8,2] [--cold] [--disk 3000,125] [--board folder|s3] [--per-image] [--jpegs FOLDER]
        [--layouts kaggle,archives,kaggle_zip,kaggle_zip_stored,kaggle_zip_isal,parquet]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

CHILD = """
import json, resource, sys, time
import alexnet
from alexnet.storage import zipformat
start = time.monotonic()
report = alexnet.imagenet_upload(sys.argv[1], sys.argv[2], workers=int(sys.argv[3]))
seconds = time.monotonic() - start
# the peak resident memory of this program (VmHWM starts again at exec; ru_maxrss would count the parent's)
rss_kb = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
usage = resource.getrusage(resource.RUSAGE_SELF)
rows = alexnet.imagenet_categories(sys.argv[2])  # after the upload's numbers: the sizes of its zips
zips = sorted([r["bytes"] for r in rows] + [r["val_bytes"] for r in rows if r["val_bytes"]])
print(json.dumps({"seconds": seconds, "rss_kb": rss_kb, "cpu": usage.ru_utime + usage.ru_stime,
                  "images": report["images"], "val_images": report["val_images"], "layout": report["layout"],
                  "largest_zip": zips[-1], "median_zip": zips[len(zips) // 2],
                  "libdeflate": zipformat._whole is not None}))
"""

PER_IMAGE = """
import json, sys, tempfile, time
from alexnet.data.images import check_image
from alexnet.data.sources import open_source
from alexnet.storage import zipformat
rounds, workdir = int(sys.argv[2]), tempfile.mkdtemp()
best_read = best_check = float("inf")
for _ in range(rounds):
    source = open_source(sys.argv[1])  # its index read before the clock starts; opened again each round (a stream
    start = time.perf_counter()        # is read once)
    images = []
    for split in ("train", "val"):  # each part opened and read as the upload's reading thread gives it out
        for part in source.parts(split, lambda part: True, None, workdir):
            images.extend(member.data for member in part.open()() if member.data is not None)
    best_read = min(best_read, time.perf_counter() - start)
    start = time.perf_counter()
    for data in images:
        check_image(data)
    best_check = min(best_check, time.perf_counter() - start)
    source.close()
print(json.dumps({"images": len(images), "read": best_read, "check": best_check,
                  "libdeflate": zipformat._whole is not None}))
"""


def folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # gone while the folder was walked
                total += os.path.getsize(os.path.join(root, name))
    return total


#: The measured layout that is Kaggle's zip with its members stored (see :func:`store_members`).
STORED_ZIP = "kaggle_zip_stored"
#: The measured layout that is Kaggle's zip (the same file as ``kaggle_zip``) inflated without libdeflate.
ISAL_ZIP = "kaggle_zip_isal"
#: A module that stands for the ``deflate`` package and cannot be imported: put first on the child's path, it hides
#: libdeflate from :mod:`alexnet.storage.zipformat`.
NO_LIBDEFLATE = 'raise ImportError("libdeflate is left out of this measurement")\n'


def source_layout(layout: str) -> str:
    """The layout whose synthetic set the measured ``layout`` uploads (its own, but for :data:`ISAL_ZIP`)."""
    return "kaggle_zip" if layout == ISAL_ZIP else layout


def store_members(path: str) -> None:
    """Rewrite the zip ``path`` with each member stored instead of deflated (its name, date and mode kept)."""
    stored = f"{path}.stored"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as dest:
        for info in src.infolist():
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.external_attr = info.external_attr
            dest.writestr(copy, src.read(info))
    os.replace(stored, path)


def real_jpegs(folder: str) -> list[Path]:
    """The paths of every JPEG under ``folder`` (``.JPEG``, ``.jpg``, ...), sorted."""
    paths = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix.lower() in (".jpeg", ".jpg"))
    if not paths:
        raise SystemExit(f"--jpegs {folder}: it holds no .JPEG or .jpg file")
    return paths


def swap_images(tree: Path, jpegs: list[Path]) -> None:
    """Copy the files ``jpegs`` (in turn, again from the first when they run out) in place of the drawn images of
    the Kaggle ``tree``, training and validation alike; only as many are read as the tree holds images."""
    drawn = sorted((tree / "ILSVRC" / "Data").rglob("*.JPEG"))
    for i, path in enumerate(drawn):
        shutil.copyfile(jpegs[i % len(jpegs)], path)


def write_sets(root: Path, layouts: list[str], args: argparse.Namespace) -> tuple[dict[str, str], int]:
    """The source of each layout under ``root`` and the bytes of their images: a synthetic Kaggle tree (its drawn
    images replaced by those of ``--jpegs`` when it is given), then each other layout written from it, as
    ``imagenet_synthetic()`` writes them; the sets of an earlier run with the same shape are kept."""
    import alexnet
    from alexnet.data.imagenet import MAPPING_FILE, parse_names
    from alexnet.data.kaggle_zip import KAGGLE_ZIP
    from alexnet.data.layouts import write_layout

    shape = {"classes": args.classes, "images": args.images, "val": args.val,
             "jpegs": str(Path(args.jpegs).resolve()) if args.jpegs else None}
    tree, kept = root / "kaggle", root / "kaggle.json"
    earlier = json.loads(kept.read_text()) if kept.is_file() else {}
    if earlier.get("shape") != shape:
        for layout in earlier.get("layouts", []):
            shutil.rmtree(root / layout, ignore_errors=True)
        shutil.rmtree(tree, ignore_errors=True)
        alexnet.imagenet_synthetic(tree, classes=args.classes, images_per_class=args.images, val_per_class=args.val,
                                   seed=7)
        if args.jpegs:
            swap_images(tree, real_jpegs(args.jpegs))
        kept.write_text(json.dumps({"shape": shape, "layouts": [],
                                    "bytes": folder_bytes(tree / "ILSVRC" / "Data")}))
    record = json.loads(kept.read_text())
    synsets = list(parse_names((tree / MAPPING_FILE).read_text(encoding="utf-8").splitlines()).items())
    sources = {"kaggle": str(tree)}
    for layout in dict.fromkeys(source_layout(layout) for layout in layouts if layout != "kaggle"):
        dest = root / layout
        if layout not in record["layouts"]:
            shutil.rmtree(dest, ignore_errors=True)
            write_layout("kaggle_zip" if layout == STORED_ZIP else layout, tree, dest, synsets)
            if layout == STORED_ZIP:
                store_members(str(dest / KAGGLE_ZIP))
            record["layouts"].append(layout)
            kept.write_text(json.dumps(record))
        sources[layout] = str(dest)
    return sources, int(record["bytes"])


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


BLKIO = Path("/sys/fs/cgroup/blkio")


def whole_disk(path: str) -> str:
    """``major:minor`` of the disk that holds ``path`` (the disk, not its partition: blkio limits whole disks)."""
    dev = os.stat(path).st_dev
    sysfs = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
    if (sysfs / "partition").exists():
        sysfs = sysfs.parent
    return (sysfs / "dev").read_text().strip()


class DiskLimit:
    """A blkio cgroup (cgroup v1) whose reads from one disk are limited to ``iops`` requests and ``mibps`` MiB a
    second; :meth:`command` runs a command in it, :meth:`served` reads the requests and bytes that the disk has served
    to the cgroup (counted since the cgroup was made: ``blkio.reset_stats`` leaves them)."""

    def __init__(self, path: str, iops: int, mibps: float):
        if not (BLKIO / "blkio.throttle.read_iops_device").exists():
            raise SystemExit("--disk needs cgroup v1's blkio controller at /sys/fs/cgroup/blkio and root")
        self.disk = whole_disk(path)
        self.group = BLKIO / f"alexnet-measure-{os.getpid()}"
        self.group.mkdir()
        (self.group / "blkio.throttle.read_iops_device").write_text(f"{self.disk} {iops}")
        (self.group / "blkio.throttle.read_bps_device").write_text(f"{self.disk} {int(mibps * 2**20)}")

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into the cgroup (a child then reads nothing outside it)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.group / "cgroup.procs"), *argv]

    def served(self) -> tuple[int, int]:
        def read_count(name: str) -> int:
            for line in (self.group / name).read_text().splitlines():
                fields = line.split()
                if len(fields) == 3 and fields[0] == self.disk and fields[1] == "Read":
                    return int(fields[2])
            return 0

        return (read_count("blkio.throttle.io_serviced_recursive"),
                read_count("blkio.throttle.io_service_bytes_recursive"))

    def close(self) -> None:
        if self.group.exists():
            self.group.rmdir()


# what an upload imports, read again after drop_lookups() (outside the cgroup) so that the disk's limits fall on the
# source, not on Python's libraries
WARM = """
import importlib, pkgutil
import alexnet, alexnet.data, PIL.Image, PIL.JpegImagePlugin, scipy.io, pins, fsspec
for module in pkgutil.iter_modules(alexnet.data.__path__):
    importlib.import_module("alexnet.data." + module.name)
"""


def drop_lookups() -> None:
    """Drop the kernel's cached directory entries and inodes (all of them: nothing narrower exists; the files of
    the inodes dropped leave the page cache with them), then read Python's libraries again."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("2")
    subprocess.run([sys.executable, "-c", WARM], check=True)


def new_child(work: Path, without_libdeflate: bool) -> tuple[Path, dict[str, str]]:
    """A measuring child's folders, made anew in ``work``, and its environment: ``(scratch, env)``, its temporary
    folder ``scratch``, no progress bars, and with ``without_libdeflate`` the ``deflate`` package hidden from it."""
    scratch = work / "tmp"
    shutil.rmtree(work, ignore_errors=True)
    scratch.mkdir(parents=True)
    env = {**os.environ, "TMPDIR": str(scratch), "ALEXNET_PROGRESS": "0"}
    if without_libdeflate:
        hidden = work / "no-libdeflate"
        hidden.mkdir()
        (hidden / "deflate.py").write_text(NO_LIBDEFLATE)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hidden), env.get("PYTHONPATH")]))
    return scratch, env


def child_result(out: str, source: str, without_libdeflate: bool) -> dict:
    """The JSON a measuring child printed last, once its use of libdeflate is the one asked for."""
    result = json.loads(out.strip().splitlines()[-1])
    if result["libdeflate"] == without_libdeflate:
        raise SystemExit(f"the child reading {source} {'used' if without_libdeflate else 'did not use'} libdeflate")
    return result


def per_image(source: str, work: Path, rounds: int, without_libdeflate: bool = False) -> dict:
    """Microseconds an image of reading ``source`` and of checking its images, in a child process (see
    :data:`PER_IMAGE`), best of ``rounds``."""
    _, env = new_child(work, without_libdeflate)
    out = subprocess.run([sys.executable, "-c", PER_IMAGE, source, str(rounds)], capture_output=True, text=True,
                         env=env, check=True).stdout
    result = child_result(out, source, without_libdeflate)
    return {"images": result["images"], "read": result["read"] / result["images"] * 1e6,
            "check": result["check"] / result["images"] * 1e6}


def upload(source: str, work: Path, workers: int, cold: bool = False, disk: DiskLimit | None = None,
           bucket: str | None = None, without_libdeflate: bool = False) -> dict:
    """One upload of ``source`` in a child process, to a folder board in ``work`` or to a new board in the S3 bucket
    ``bucket`` (deleted after); ``without_libdeflate`` hides the ``deflate`` package from the child."""
    board = f"s3://{bucket}/board-{time.monotonic_ns()}" if bucket else str(work / "board")
    scratch, env = new_child(work, without_libdeflate)
    if cold or disk is not None:
        evict(source)
    if disk is not None:
        drop_lookups()
        before = disk.served()
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], folder_bytes(scratch))
            time.sleep(0.025)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        argv = [sys.executable, "-c", CHILD, source, board, str(workers)]
        out = subprocess.run(disk.command(argv) if disk is not None else argv, env=env, capture_output=True, text=True,
                             check=True).stdout
    finally:
        done.set()
        sampler.join()
    result = child_result(out, source, without_libdeflate)
    if disk is not None:
        after = disk.served()
        result["disk_reads"], result["disk_bytes"] = after[0] - before[0], after[1] - before[1]
    if bucket:
        import s3fs

        s3fs.S3FileSystem().rm(board.removeprefix("s3://"), recursive=True)
    return {**result, "peak_scratch": peak[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--images", type=int, default=80)
    parser.add_argument("--val", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layouts", default="kaggle,archives,kaggle_zip,parquet")
    parser.add_argument("--workers", default="8", help="workers of the upload, one table for each (e.g. 8,2)")
    parser.add_argument("--cold", action="store_true", help="read every source from the disk, not the page cache")
    parser.add_argument("--disk", help="IOPS,MIBPS: read the source from a disk limited to these (as root; implies "
                                       "--cold), e.g. 3000,125 for an EBS gp3 volume's default")
    parser.add_argument("--root", help="write the synthetic sets here and keep them (default: a temporary folder)")
    parser.add_argument("--board", choices=("folder", "s3"), default="folder",
                        help="upload to a local folder board (default) or to moto's S3 server on 127.0.0.1")
    parser.add_argument("--jpegs", help="a folder of real JPEGs (ImageNet's, say) put in place of the drawn images, "
                                        "in turn")
    parser.add_argument("--per-image", action="store_true",
                        help="no upload: each image read by the upload's code and checked, on one thread (rounds: "
                             "--repeats)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        bucket = None
        if args.board == "s3":
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python" / "tests"))
            from servers import moto_s3_server

            os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                              AWS_DEFAULT_REGION="us-east-1")
            os.environ["AWS_ENDPOINT_URL"] = stack.enter_context(moto_s3_server(("boards",)))
            bucket = "boards"
        measure(args, bucket)


def print_per_image(layouts: list[str], sources: dict[str, str], work: Path, rounds: int) -> None:
    """The table of ``--per-image``: each layout read and its images checked (see :func:`per_image`)."""
    costs = {layout: per_image(sources[source_layout(layout)], work, rounds, without_libdeflate=layout == ISAL_ZIP)
             for layout in layouts}
    first = costs[layouts[0]]
    print(f"each image read by the upload's code, then checked; one thread, from the page cache, best of {rounds}")
    # the same images are checked in every layout: the last column gives each layout's reading with the first
    # layout's checks, leaving out how the machine's speed drifted between the children's checks
    base = first["read"] + first["check"]
    print(f"{'layout':<18} {'images':>7} {'read us':>9} {'check us':>9} {'sum us':>9} {'x ' + layouts[0]:>10} "
          f"{'x ' + layouts[0] + ', its checks':>22}")
    for layout, cost in costs.items():
        total = cost["read"] + cost["check"]
        print(f"{layout:<18} {cost['images']:7d} {cost['read']:9.1f} {cost['check']:9.1f} {total:9.1f} "
              f"{total / base:10.3f} {(cost['read'] + first['check']) / base:22.3f}", flush=True)


def measure(args: argparse.Namespace, bucket: str | None) -> None:
    """Write the synthetic sets (or find them under ``--root``), then upload each layout, taking turns."""
    layouts = args.layouts.split(",")
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="alexnet-measure-"))
    disk = None
    try:
        sources, image_bytes = write_sets(root, layouts, args)
        print(f"{args.classes} categories x {args.images} training + {args.val} validation images, "
              f"{image_bytes / 1e6:.0f} MB of JPEG"
              + (f" ({args.jpegs}'s JPEGs in place of the drawn ones)" if args.jpegs else "")
              + f"; {os.cpu_count()} CPUs")
        if args.per_image:
            print_per_image(layouts, sources, root / "work", args.repeats)
            return
        if args.disk:
            iops, mibps = args.disk.split(",")
            disk = DiskLimit(str(root), int(iops), float(mibps))
            read_from = f"a disk limited to {iops} reads and {mibps} MiB a second (--disk)"
        else:
            read_from = "the disk (--cold)" if args.cold else "the page cache"
        for workers in [int(w) for w in args.workers.split(",")]:
            runs: dict[str, list[dict]] = {layout: [] for layout in layouts}
            for round_ in range(args.repeats):
                order = layouts[round_ % len(layouts):] + layouts[:round_ % len(layouts)]
                for layout in order:
                    runs[layout].append(upload(sources[source_layout(layout)], root / "work", workers, args.cold,
                                               disk, bucket, without_libdeflate=layout == ISAL_ZIP))
            print(f"workers = {workers}, {args.repeats} rounds, source read from {read_from}, to "
                  + ("moto's S3 server" if bucket else "a local folder board"))
            print(f"{'layout':<18} {'seconds (median, range)':<28} {'x ' + layouts[0] + ' (median, range)':<28} "
                  f"{'CPU s':<8} {'peak scratch MB':<20} {'largest zip MB':<15} {'peak RSS MB':<12}"
                  + ("  disk reads    disk MB" if disk else ""))
            for layout, results in runs.items():
                seconds = [r["seconds"] for r in results]
                # each round's time over the first layout's in the same round: the machine's drift between rounds
                # leaves it alone
                ratios = [r["seconds"] / first["seconds"] for r, first in zip(results, runs[layouts[0]], strict=True)]
                scratch = [r["peak_scratch"] / 1e6 for r in results]
                rss = [r["rss_kb"] / 1024 for r in results]
                cpu = statistics.median(r["cpu"] for r in results)
                print(f"{layout:<18} {statistics.median(seconds):6.2f} ({min(seconds):.2f}-{max(seconds):.2f})"
                      f"{'':<12} {statistics.median(ratios):6.3f} ({min(ratios):.3f}-{max(ratios):.3f}){'':<9} "
                      f"{cpu:6.2f}   {statistics.median(scratch):6.1f} (max {max(scratch):.1f}){'':<4} "
                      f"{results[0]['largest_zip'] / 1e6:6.1f}{'':<9} {statistics.median(rss):6.0f}"
                      + (f"{'':<8}{statistics.median(r['disk_reads'] for r in results):10.0f}"
                         f"{statistics.median(r['disk_bytes'] for r in results) / 1e6:10.0f}" if disk else ""),
                      flush=True)
    finally:
        if disk is not None:
            disk.close()
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
        else:
            shutil.rmtree(root / "work", ignore_errors=True)


if __name__ == "__main__":
    main()
