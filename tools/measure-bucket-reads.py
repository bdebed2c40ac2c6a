"""Read from an S3 server what an upload reads front to back from a bucket, side by side: the official validation
tar's index and a stream (a tar.gz), through fsspec's read-ahead file (one 8 MB request after another) and through
the package's reader (the same blocks, several requests in flight ahead of the reads).

The server is moto's (started on 127.0.0.1 as the tests start it, stopped after); each request reaches it through a
delay line (also started here, on 127.0.0.1) that holds every byte half a round trip each way without limiting the
rate, as a bucket's network does. The two readers take turns, several rounds; medians are printed with the range.

With ``--parquet ROW_GROUPS`` it measures instead what opening Hugging Face's parquet shards in the bucket costs (the
upload reads their ``label`` column first), and reading all their images as the upload does (without packing them):
the seconds, and the bytes and requests fetched, for one shard laid out as theirs (100 rows a row group, each row
an image of 100 KB and its label). Run it with the code before and after a
change (``PYTHONPATH`` set to its ``python`` folder). moto takes about 0.15 s a request from a shard this large, far
more than a bucket's service does: the bytes and the requests say more than the seconds.

With ``--tree CLASSES`` it measures an extracted tree (Kaggle's) in the bucket: opening it (its folders listed) and
reading every training image as the upload does, against the same images fetched one request after another.

    .venv/bin/python tools/measure-bucket-reads.py [--rtt 0,30] [--rounds 4] [--stream-mb 128] [--parquet 30]
        [--tree 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

#: The package, and its tests' local servers (moto's S3 server, started as the tests start it).
PYTHON = Path(__file__).resolve().parent.parent / "python"


def delay_line(listen: int, target: int, rtt_ms: float) -> None:
    """Serve 127.0.0.1:``listen`` forever, passing each connection to 127.0.0.1:``target``, every byte held
    ``rtt_ms / 2`` each way (in a thread of its own: call it as a daemon thread's target)."""
    half = rtt_ms / 2000

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def feed() -> None:
            while True:
                data = await reader.read(1 << 16)
                await queue.put((time.monotonic() + half, data))
                if not data:
                    return

        task = asyncio.create_task(feed())
        try:
            while True:
                due, data = await queue.get()
                if due > time.monotonic():
                    await asyncio.sleep(due - time.monotonic())
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        finally:
            task.cancel()
            writer.close()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer),
                             return_exceptions=True)

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", listen)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def listening(port: int) -> None:
    """Wait until 127.0.0.1:``port`` takes connections (a delay line just started)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt", default="0,30", help="round trips in ms to measure, e.g. 0,30")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--stream-mb", type=int, default=128, help="size of the stream read front to back")
    parser.add_argument("--parquet", type=int, default=0, metavar="ROW_GROUPS",
                        help="measure opening a parquet shard of this many row groups instead")
    parser.add_argument("--tree", type=int, default=0, metavar="CLASSES",
                        help="measure an extracted tree of this many categories instead")
    args = parser.parse_args()
    if "alexnet" not in sys.modules and not os.environ.get("PYTHONPATH"):
        sys.path[:0] = [str(PYTHON)]
    sys.path.append(str(PYTHON / "tests"))
    if args.tree:
        extracted_tree(args)
        return
    if args.parquet:
        parquet_labels(args)
        return
    import alexnet
    from alexnet.data.archive_io import SMALL_MEMBERS_BLOCK, Files
    from alexnet.data.ilsvrc import VAL_TAR
    from alexnet.data.tar_io import tar_index
    from servers import free_port, moto_s3_server

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      ALEXNET_PROGRESS="0")
    work = Path(tempfile.mkdtemp(prefix="alexnet-bucket-reads-"))
    try:
        made = alexnet.imagenet_synthetic(work / "archives", classes=40, images_per_class=2, val_per_class=15, seed=7,
                                          layout="archives")
        val = Path(made["path"]) / VAL_TAR
        with open(val, "rb") as f:
            images = len(tar_index(f, str(val), val.stat().st_size))
        with moto_s3_server(("src",)) as server:
            os.environ["AWS_ENDPOINT_URL"] = server
            files = Files.at("s3://src")
            files.fs.put_file(str(val), "src/val.tar")
            files.fs.pipe_file("src/stream", os.urandom(args.stream_mb << 20))
            print(f"the validation tar of {images} images, {val.stat().st_size / 1e6:.0f} MB; a stream of "
                  f"{args.stream_mb} MB; {args.rounds} rounds, the readers taking turns")

            def index(ahead: bool) -> None:
                size = files.size("src/val.tar")
                with files.open_headers("src/val.tar") if ahead else files.open("src/val.tar", SMALL_MEMBERS_BLOCK) \
                        as f:
                    assert len(tar_index(f, "val.tar", size)) == images

            def stream(ahead: bool) -> None:
                with files.open_stream("src/stream") if ahead else files.open("src/stream", SMALL_MEMBERS_BLOCK) as f:
                    assert sum(len(b) for b in iter(lambda: f.read(1 << 20), b"")) == args.stream_mb << 20

            jobs: dict[str, Callable[[bool], None]] = {"the validation tar's index": index, "a stream": stream}
            for rtt in [float(r) for r in args.rtt.split(",")]:
                line = free_port()
                target = int(server.rsplit(":", 1)[1])
                threading.Thread(target=delay_line, args=(line, target, rtt), daemon=True).start()
                listening(line)
                os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{line}"
                files = Files.at("s3://src")
                times: dict[tuple[str, bool], list[float]] = {}
                for round_ in range(args.rounds):
                    for ahead in (False, True) if round_ % 2 == 0 else (True, False):
                        for name, job in jobs.items():
                            start = time.perf_counter()
                            job(ahead)
                            times.setdefault((name, ahead), []).append(time.perf_counter() - start)
                print(f"round trip {rtt:g} ms")
                for name in jobs:
                    cells = [f"  {name:28}"]
                    for ahead, label in ((False, "one request at a time"), (True, "blocks ahead")):
                        t = times[(name, ahead)]
                        cells.append(f"{label} {statistics.median(t):5.2f} s ({min(t):.2f}-{max(t):.2f})")
                    print("   ".join(cells), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_all(source: str) -> None:
    """Read every image of ``source`` as an upload does (its parts, in order, each drained), without packing."""
    from alexnet.data.sources import open_source

    opened = open_source(source)
    with tempfile.TemporaryDirectory(prefix="alexnet-measure-") as workdir:
        for part in opened.parts("train", lambda part: True, None, workdir):
            for _ in part.open()():
                pass


def one_by_one(fs: Any, keys: list[str]) -> None:
    """Fetch the objects ``keys``, one request after another."""
    for key in keys:
        fs.cat_file(key)


def extracted_tree(args: argparse.Namespace) -> None:
    """Open Kaggle's extracted tree of ``args.tree`` categories in moto's bucket, and read its training images as the
    upload does, through each round trip; against the same objects fetched one request after another."""
    import alexnet
    from alexnet.data.archive_io import Files
    from alexnet.data.sources import open_source
    from servers import free_port, moto_s3_server

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      ALEXNET_PROGRESS="0")
    work = Path(tempfile.mkdtemp(prefix="alexnet-bucket-tree-"))
    try:
        made = alexnet.imagenet_synthetic(work / "kaggle", classes=args.tree, images_per_class=100, val_per_class=2,
                                          seed=7, layout="kaggle")
        local = Path(made["path"])
        with moto_s3_server(("src",)) as server:
            os.environ["AWS_ENDPOINT_URL"] = server
            fs = Files.at("s3://src").fs
            for path in sorted(local.rglob("*")):
                if path.is_file():
                    fs.pipe_file(f"src/tree/{path.relative_to(local).as_posix()}", path.read_bytes())
            images = sorted(p for p in local.glob("ILSVRC/Data/CLS-LOC/train/*/*") if p.is_file())
            keys = [f"src/tree/{p.relative_to(local).as_posix()}" for p in images]
            print(f"an extracted tree of {args.tree} categories, {len(images)} training images, "
                  f"{sum(p.stat().st_size for p in images) / 1e6:.0f} MB; {args.rounds} rounds")
            for rtt in [float(r) for r in args.rtt.split(",")]:
                line = free_port()
                threading.Thread(target=delay_line, args=(line, int(server.rsplit(":", 1)[1]), rtt),
                                 daemon=True).start()
                listening(line)
                os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{line}"
                for what, job in (("opening it", lambda: open_source("s3://src/tree").close()),
                                  ("reading its images", lambda: read_all("s3://src/tree")),
                                  ("one request after another", partial(one_by_one, Files.at("s3://src").fs, keys))):
                    times = []
                    for _ in range(args.rounds):
                        start = time.perf_counter()
                        job()
                        times.append(time.perf_counter() - start)
                    print(f"round trip {rtt:g} ms, {what}: {statistics.median(times):.2f} s ({min(times):.2f}-"
                          f"{max(times):.2f}), {len(images) / statistics.median(times):.0f} images/s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def parquet_labels(args: argparse.Namespace) -> None:
    """Open a parquet shard of ``args.parquet`` row groups in moto's bucket through each round trip: seconds and
    bytes fetched (counted in s3fs's two ways of fetching: a file's blocks and ranges asked for directly)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import s3fs
    from alexnet.data.sources import open_source
    from servers import free_port, moto_s3_server

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      ALEXNET_PROGRESS="0")
    rows = 100 * args.parquet
    table = pa.table({"image": [{"bytes": os.urandom(100_000), "path": f"n01440764_{k}.JPEG"} for k in range(rows)],
                      "label": [k % 10 for k in range(rows)]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=100)
    shard = sink.getvalue().to_pybytes()
    fetched = [0, 0]  # bytes, requests
    block, ranges = s3fs.core.S3File._fetch_range, s3fs.S3FileSystem._cat_file

    def count_block(self: Any, start: int, end: int) -> bytes:
        data = block(self, start, end)
        fetched[0] += len(data)
        fetched[1] += 1
        return data

    async def count_range(self: Any, path: str, *a: Any, **k: Any) -> bytes:
        data = await ranges(self, path, *a, **k)
        fetched[0] += len(data)
        fetched[1] += 1
        return data

    s3fs.core.S3File._fetch_range, s3fs.S3FileSystem._cat_file = count_block, count_range
    with moto_s3_server(("src",)) as server:
        os.environ["AWS_ENDPOINT_URL"] = server
        s3fs.S3FileSystem(anon=False).pipe_file("src/data/train-00000-of-00001.parquet", shard)
        print(f"one shard of {args.parquet} row groups, {len(shard) / 1e6:.0f} MB; {args.rounds} rounds")
        for rtt in [float(r) for r in args.rtt.split(",")]:
            line = free_port()
            threading.Thread(target=delay_line, args=(line, int(server.rsplit(":", 1)[1]), rtt), daemon=True).start()
            listening(line)
            os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{line}"
            for what, job in (("opening it", lambda: open_source("s3://src/data")),
                              ("reading it all", lambda: read_all("s3://src/data"))):
                times, sizes, requests = [], [], []
                for _ in range(args.rounds):
                    s3fs.S3FileSystem.clear_instance_cache()
                    fetched[:], start = [0, 0], time.perf_counter()
                    job()
                    times.append(time.perf_counter() - start)
                    sizes.append(fetched[0] / 1e6)
                    requests.append(fetched[1])
                print(f"round trip {rtt:g} ms, {what}: {statistics.median(times):.2f} s ({min(times):.2f}-"
                      f"{max(times):.2f}), {statistics.median(sizes):.1f} MB fetched in "
                      f"{statistics.median(requests):.0f} requests", flush=True)


if __name__ == "__main__":
    main()
