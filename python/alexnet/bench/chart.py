"""The benchmark as a PNG: images per second per stage with the targets marked, and fetch speed."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .scaling_chart import measured_panel, projection_panel
from .stages import STAGES, TARGETS, label, rate


def write_chart(result: Mapping[str, Any], path: str | os.PathLike) -> str:
    """A bar chart of images per second per stage, with the targets marked, as a PNG at ``path``.

    A fetch measurement adds a panel: megabytes per second, one download at a time and in parallel. The
    ``time_to_accuracy`` stage adds one too: each recipe's validation accuracy against its cumulative wall time,
    epoch by epoch, one curve per seed, with the target accuracy as a horizontal line and each recipe's median
    time to it as a dotted one. The ``scaling`` stage adds two (:mod:`.scaling_chart`): the measured efficiency of
    each lever set on each link, and its projection to 256 workers beside MXNet's AlexNet.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    order = {name: i for i, name in enumerate(STAGES)}
    stages = sorted((s for s in result["stages"] if "images_per_second" in s),
                    key=lambda s: (order.get(s["stage"], len(order)), s.get("cores", 0)))
    fetches = [s for s in result["stages"] if s.get("stage") == "fetch" and s.get("bytes_per_second")]
    accuracy = result.get("time_to_accuracy")
    scaling = result.get("scaling")
    panels = [p for p in (stages, fetches) if p]
    widths = [max(4.0, 0.9 * len(p) + 2) for p in panels] + ([6.0] if accuracy else []) + (
        [6.0, 8.0] if scaling and scaling.get("rows") else [])
    widths = widths or [6.0]
    figure, axes_list = plt.subplots(1, len(widths), figsize=(sum(widths), 4.8),
                                     gridspec_kw={"width_ratios": widths}, squeeze=False)
    axes_iter = iter(axes_list[0])
    if stages:
        _images_panel(next(axes_iter), stages)
    if fetches:
        _fetch_panel(next(axes_iter), fetches)
    if accuracy:
        _accuracy_panel(next(axes_iter), accuracy)
    if scaling and scaling.get("rows"):
        measured_panel(next(axes_iter), scaling)
        projection_panel(next(axes_iter), scaling)
    machine, summary = result["machine"], result["summary"]
    title = f"{machine['cpu']}, {machine['cores']} core(s)"
    if result["data"]["images"] and (stages or fetches):
        title += f"; {result['data']['images']} images"
    if result["settings"].get("resize"):
        title += f" stored at short side {result['settings']['resize']} (decode: originals)"
    if summary.get("bottleneck"):
        title += f"\nbottleneck: {summary['bottleneck']}"
    if summary.get("io_peak_rss_mb") is not None:
        title += f"; io peak RSS {summary['io_peak_rss_mb']:.0f} MB"
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return os.fspath(path)


def _bars(axes: Any, labels: list[str], values: list[float], colours: list[str], digits: int = 0) -> Any:
    bars = axes.bar(labels, values, color=colours)
    for bar, value in zip(bars, values, strict=True):
        axes.annotate(f"{value:.{digits}f}", (bar.get_x() + bar.get_width() / 2, value), ha="center",
                      va="bottom", fontsize=8)
    axes.tick_params(axis="x", labelrotation=30, labelsize=8)
    return bars


def _mark(axes: Any, bar: Any, value: float, text: str, style: str) -> None:
    axes.hlines(value, bar.get_x() - 0.1, bar.get_x() + bar.get_width() + 0.1, colors="black", linestyles=style,
                label=text)


def _images_panel(axes: Any, stages: list[Mapping[str, Any]]) -> None:
    colours = {"decode": "#8c8c8c", "naive": "#d62728", "naive_auto": "#ff9896", "io": "#1f77b4",
               "synthetic": "#2ca02c", "train": "#9467bd"}
    labels = [label(s) for s in stages]
    bars = _bars(axes, labels, [s["images_per_second"] for s in stages],
                 [colours.get(s["stage"], "#7f7f7f") for s in stages])
    io1, decode1, naive2 = rate(stages, "io", 1), rate(stages, "decode", 1), rate(stages, "naive", 2)
    wanted = {name: minimum for name, (_, minimum) in TARGETS.items()}
    marks = []
    if decode1 is not None and "io 1c" in labels:
        factor = wanted["io_vs_decode_per_core"]
        marks.append(("io 1c", factor * decode1, f"target: {factor:g}x decode per core"))
    if io1 is not None and "io 2c" in labels:
        factor = wanted["io_2_cores_vs_1"]
        marks.append(("io 2c", factor * io1, f"target: {factor:g}x io 1c"))
    if naive2 is not None and "io 2c" in labels:
        factor = wanted["io_vs_naive_2_cores"]
        marks.append(("io 2c", factor * naive2, f"target: {factor:g}x naive 2c"))
    for (bar_label, value, text), style in zip(marks, ["--", ":", "-."], strict=False):
        _mark(axes, bars[labels.index(bar_label)], value, text, style)
    highest = max([s["images_per_second"] for s in stages] + [value for _, value, _ in marks])
    axes.set_ylim(0, highest * 1.35)  # room for the legend above the bars
    if marks:
        axes.legend(loc="upper left", fontsize=8)
    axes.set_ylabel("images / second")


def _fetch_panel(axes: Any, fetches: list[Mapping[str, Any]]) -> None:
    labels = [label(s) for s in fetches]
    bars = _bars(axes, labels, [s["bytes_per_second"] / 1e6 for s in fetches], ["#ff7f0e"] * len(fetches), 1)
    serial = next((s["bytes_per_second"] for s in fetches if s["workers"] == 1), None)
    factor = TARGETS["fetch_parallel_vs_serial"][1]
    axes.set_ylim(0, max([s["bytes_per_second"] for s in fetches] + [factor * (serial or 0)]) / 1e6 * 1.35)
    if serial:
        for bar, record in zip(bars, fetches, strict=True):
            if record["workers"] != 1:
                _mark(axes, bar, factor * serial / 1e6, f"target: {factor:g}x one at a time", "--")
        axes.legend(loc="upper left", fontsize=8)
    axes.set_ylabel("fetch, MB / second")


def _accuracy_panel(axes: Any, accuracy: Mapping[str, Any]) -> None:
    colours = {"paper": "#7f7f7f", "defaults": "#2ca02c"}
    others = iter(["#1f77b4", "#d62728", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"])
    for name, recipe in accuracy["recipes"].items():  # a lever recipe's seeds share one colour of its own
        if name not in colours and not recipe.get("same_as"):
            colours[name] = next(others, "#000000")
    target = accuracy["settings"]["target_accuracy"]
    for name, recipe in accuracy["recipes"].items():
        if recipe.get("same_as"):  # the curves of the recipe it trained as, named in that one's legend
            continue
        sizes = "/".join(str(s) for s in recipe["image_sizes"])
        also = [other for other, r in accuracy["recipes"].items() if r.get("same_as") == name]
        legend = f"{', '.join([name, *also])}: {recipe['precision']}, {sizes} px, {recipe['lr_schedule']}"
        for index, run in enumerate(recipe["runs"]):  # every seed's curve
            axes.plot(run["seconds"], run["val_accuracy"], marker="o", markersize=3, linewidth=1, alpha=0.8,
                      color=colours.get(name), label=None if index else legend)
        median = recipe["seconds_to_target"]["median"]
        if median is not None:
            axes.axvline(median, color=colours.get(name), linestyle=":", linewidth=1)
    axes.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target:g}")
    ratio = accuracy.get("time_ratio")
    seeds = accuracy["settings"].get("repeats", 1)
    title = (f"time to {target:g}, median of {seeds} seed(s): defaults / paper = "
             + ("n/a" if ratio is None else f"{ratio:.2f}x"))
    axes.set_title(title, fontsize=9)
    axes.set_xlabel("wall time (s)")
    axes.set_ylabel("validation accuracy (top-1)")
    axes.set_ylim(0, 1.05)
    axes.set_xlim(left=0)
    axes.legend(loc="lower right", fontsize=8)
