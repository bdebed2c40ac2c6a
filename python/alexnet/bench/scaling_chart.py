"""The ``scaling`` stage drawn: measured efficiency by link and lever set, and the projection to 256 workers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Colours of the lever sets, in the order they were measured.
COLOURS = ("#7f7f7f", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def measured_panel(axes: Any, scaling: Mapping[str, Any]) -> None:
    """Grouped bars: the efficiency of each lever set on each link, the ideal (1) and the targets marked."""
    rows = scaling["rows"]
    links = list(dict.fromkeys(row["link"] for row in rows))
    levers = list(dict.fromkeys(row["levers"] for row in rows))
    width = 0.8 / max(1, len(levers))
    for j, name in enumerate(levers):
        values = [next((r["efficiency"] for r in rows if r["link"] == link and r["levers"] == name), 0.0)
                  for link in links]
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(links))]
        bars = axes.bar(xs, values, width, label=name, color=COLOURS[j % len(COLOURS)])
        for bar, value in zip(bars, values, strict=True):
            axes.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom",
                          fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="linear (ideal)")
    targets = scaling.get("summary", {}).get("targets", {})
    for i, link in enumerate(links):
        if link in targets:
            axes.hlines(targets[link]["target"], i - 0.45, i + 0.45, colors="black", linestyles=":", linewidth=1)
    axes.set_xticks(range(len(links)), links)
    axes.set_ylim(0, 1.25)
    axes.set_ylabel("efficiency: images/s of N / (N x images/s of 1)")
    workers = rows[0]["workers"] if rows else 2
    axes.set_title(f"{workers} workers, measured (dotted: target)", fontsize=9)
    axes.legend(fontsize=6, loc="upper right", ncol=2)


def projection_panel(axes: Any, scaling: Mapping[str, Any]) -> None:
    """Lines: the projected efficiency at 2 to 256 workers of each lever set on each shaped link, at the step time
    given for the projection; MXNet's AlexNet points beside them."""
    projected = scaling.get("projection") or []
    levers = list(dict.fromkeys(p["levers"] for p in projected))
    styles = ("-", "--", "-.", ":")
    links = list(dict.fromkeys(p["link"] for p in projected))
    for record in projected:
        if record is not _given(projected, record):
            continue
        colour = COLOURS[levers.index(record["levers"]) % len(COLOURS)]
        axes.plot(record["workers"], record["efficiency"], styles[links.index(record["link"]) % len(styles)],
                  color=colour, linewidth=1.2,
                  label=f"{record['levers']}, {record['link']}, {record['compute_seconds']:g} s a step")
    mxnet = scaling.get("mxnet") or []
    axes.plot([m["workers"] for m in mxnet], [m["efficiency"] for m in mxnet], "ko", markersize=4,
              label="MXNet AlexNet, K80s (published)")
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes.set_xscale("log", base=2)
    axes.set_ylim(0, 1.1)
    axes.set_xlabel("workers")
    axes.set_ylabel("projected efficiency")
    # each line at its own compute a step: a lever set of k micro-batches computes k of them a step
    axes.set_title("projection (compute a step in each line's label)", fontsize=9)
    # outside the axes: the lines of a slow link lie low, where a legend inside would cover them
    axes.legend(fontsize=5, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1)


def _given(projected: list[Mapping[str, Any]], record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The projection of ``record``'s lever set and link at the first step time given (not the measured one): the
    second record of that pair, or the first when only one exists."""
    same = [p for p in projected if p["levers"] == record["levers"] and p["link"] == record["link"]]
    return same[1] if len(same) > 1 else same[0]
