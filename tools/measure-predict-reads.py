"""Time ``alexnet_predict()`` on a folder of images in an S3 bucket, with its images read one at a time and
``READERS`` at a time, over a link of no delay and of a set round trip.

The bucket is moto's S3 server (started on 127.0.0.1 as the tests start it, stopped after), reached through the
delay line of ``tools/measure-bucket-reads.py`` (every byte held half a round trip each way, the rate not
limited). The model is the tests' small one (6 classes, 64 pixels), so that the seconds are mostly reading; the
images are drawn JPEGs of 300 x 400 pixels. Each setting is timed ``--rounds`` times, taking turns.

    .venv/bin/python tools/measure-predict-reads.py [--images 96] [--rtt 0,30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python" / "tests"))  # the tests' servers and small model


def bucket_reads_tool() -> Any:
    """``tools/measure-bucket-reads.py`` as a module (its delay line)."""
    spec = importlib.util.spec_from_file_location("measure_bucket_reads", HERE / "measure-bucket-reads.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=96)
    parser.add_argument("--rtt", default="0,30", help="round trips in ms, one table row each")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ["ALEXNET_PROGRESS"] = "0"

    import numpy as np
    import s3fs
    from alexnet.model import predict
    from helpers_model import card_for, save_model_dir, tiny_model
    from helpers_train import class_image, jpeg_bytes
    from servers import free_port, moto_s3_server

    tool = bucket_reads_tool()
    classes = [{"id": f"n0000100{i}", "name": f"class {i}"} for i in range(6)]
    scratch = tempfile.TemporaryDirectory()  # the model's folder, removed at the end
    model_dir = save_model_dir(tiny_model(len(classes), seed=2), Path(scratch.name) / "model", card_for(classes))
    rng = np.random.default_rng(0)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    parallel = predict.READERS
    with moto_s3_server(("src",)) as server:
        os.environ["AWS_ENDPOINT_URL"] = server
        fs = s3fs.S3FileSystem(anon=False)
        for k in range(args.images):
            fs.pipe_file(f"src/photos/image{k:04d}.jpg", jpeg_bytes(class_image(rng, k % 3, 300, 400)))
        print(f"{args.images} images in s3://src/photos; {args.rounds} rounds; seconds (median of the rounds)")
        print(f"{'rtt ms':>7} {'1 reader':>10} {f'{parallel} readers':>11} {'speed-up':>9}")
        for rtt in [float(r) for r in args.rtt.split(",")]:
            line = free_port()
            threading.Thread(target=tool.delay_line, args=(line, int(server.rsplit(":", 1)[1]), rtt),
                             daemon=True).start()
            tool.listening(line)
            os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{line}"
            s3fs.S3FileSystem.clear_instance_cache()
            predict.alexnet_predict(str(model_dir), ["s3://src/photos/image0000.jpg"])  # the model loaded once
            times: dict[int, list[float]] = {1: [], parallel: []}
            for _ in range(args.rounds):
                for readers in times:
                    predict.READERS = readers
                    start = time.perf_counter()
                    predict.alexnet_predict(str(model_dir), "s3://src/photos", top=1)
                    times[readers].append(time.perf_counter() - start)
            one, many = (float(np.median(times[r])) for r in (1, parallel))
            print(f"{rtt:7.0f} {one:10.2f} {many:11.2f} {one / many:9.2f}")
    scratch.cleanup()


if __name__ == "__main__":
    main()
