"""The ``bench`` command: the input pipeline, the model and training measured side by side.

Its options are the benchmark's settings, one per setting its declaration puts on the command line
(:mod:`alexnet.bench.plan`); the ``fetch`` stage's board and partition are the options that choose a partition
(``--board``, ``--partition``, ``--total``), which also give the images when ``--data`` is left out.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import common


def bench_dest(name: str) -> str:
    """Where the parsed value of the benchmark's setting ``name`` is kept: apart from the partition's options."""
    return f"bench_{name}"


def bench_args(args: argparse.Namespace) -> dict[str, Any]:
    """The benchmark's settings given on the command line, as ``alexnet_benchmark`` takes them: the declared
    options, and the ``fetch`` stage's board and partition from the partition's options."""
    from ..bench.plan import specs

    chosen = common.declared_args(args, specs(), bench_dest)
    chosen.update({stage: getattr(args, option) for option, stage in
                   (("board", "board"), ("partition", "fetch_partition"), ("total", "fetch_total"))
                   if hasattr(args, option)})
    return chosen


def _bench(args: argparse.Namespace) -> None:
    from ..bench.plan import check_plan
    from ..bench.report import benchmark_table
    from ..bench.run import run

    plan = check_plan(bench_args(args), where="alexnet bench")  # checked before any partition is fetched
    data: Any = getattr(args, "data", None)
    if data is None and getattr(args, "board", None) is not None and set(plan.common.stages) - {"fetch"}:
        data = common.fetch(args)  # the other stages' images (the fetch stage downloads its own, twice)
    result = run(plan, data)
    common.emit(result, args.json,
                lambda r: common.typed(args)(f"{benchmark_table(r)}\n\nWrote {r['json']} and {r['png']}"))


def register(add: common.AddCommand) -> None:
    """Add ``bench`` to the parser."""
    from ..bench.plan import GROUPS
    from ..declare.declaration import specs

    bench = add("bench", _bench, "benchmark the input pipeline, the model and training; name the bottleneck",
                "Measure images/s of a plain JPEG decode, the original r-tensorflow/alexnet pipeline and this "
                "package's pipeline (on 1, 2 and all cores), the model on in-memory batches and real training, side "
                "by side on the same images; write JSON and a PNG chart. Images: --data, else a partition of "
                "--board, else a synthetic ImageNet.")
    common.core_option(bench, "data", "--data",
                       help="ImageNet folder to take the images from (default: a synthetic one)")
    common.partition_options(bench, "board whose partition gives the images, and that the fetch stage downloads "
                                    "from: a folder or file:// URL, gs://bucket/prefix, s3://bucket/prefix or "
                                    "https:// (read-only); none by default, not $ALEXNET_BOARD: a synthetic "
                                    "ImageNet, unless --data")
    for name, flag in (("fetch_partition", "--partition"), ("fetch_total", "--total")):  # the fetch stage's, by name
        common._name_option(bench, name, flag, False)
    for stage, group in GROUPS.items():  # each stage's own settings under its name in the help
        where = bench.add_argument_group(f"settings of the {stage} stage") if stage else bench
        common.declared_options(where, specs(group), bench_dest)
