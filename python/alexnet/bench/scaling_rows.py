"""The ``scaling`` stage's table from its runs (a pure module): a row of a lever set on a link, from its lone worker's
run and its several workers' (:func:`scaling_row`), the projection of each shaped link's row to many workers
(:func:`projections`), and per link today's efficiency and the best lever set's against the targets
(:func:`summarize_scaling`). :mod:`.scaling` runs the stage and gives them its runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .link import LinkSpec, parse_links
from .measure import cpu_share
from .projection import WORKER_COUNTS, measured_from, project
from .stages import CONTENDED


def scaling_row(name: str, levers: Mapping[str, Any], link: LinkSpec, one: Mapping[str, Any],
                many: Mapping[str, Any], workers: int) -> dict[str, Any]:
    """The table row of lever set ``name`` (``levers``) on ``link``, from the run alone (``one``) and of ``workers``
    (``many``). A lone worker's step is counted for as many images as a worker's step of ``many`` took: with
    ``adapt_communication`` only the run of several workers takes more micro-batches."""
    images = int(many["workers"][0]["images_per_step"])
    scale = images / int(one["workers"][0]["images_per_step"])
    t1 = float(one["workers"][0]["typical_step_seconds"]) * scale
    tn = max(float(w["typical_step_seconds"]) for w in many["workers"])
    alone = statistics.median(float(w["allreduce_seconds"]) for w in many["workers"])
    exposed = max(0.0, tn - t1)
    # the CPU a worker's step takes beyond a lone worker's: the collective's own work (copies, casts, sums, messages)
    extra_cpu = max(0.0, max(float(w["typical_step_cpu_seconds"]) for w in many["workers"])
                    - float(one["workers"][0]["typical_step_cpu_seconds"]) * scale)
    # the share of its CPUs the lone worker's step got: its step computes only, so that well below 1 other work took
    # the rest, and every ratio to it is off (the several workers' steps also wait on the link: no such sign)
    lone = one["workers"][0]
    cpu_use = cpu_share(float(lone["typical_step_cpu_seconds"]), float(lone["typical_step_seconds"]),
                        int(lone.get("threads") or 1))
    return {"levers": name, "link": link.name, "rate": link.rate, "workers": workers,
            "images_per_step": images, "micro_batches": int(many["workers"][0]["micro_batches"]),
            "precision": many["workers"][0]["precision"],
            "images_per_second_1": round(images / t1, 2), "images_per_second": round(workers * images / tn, 2),
            "efficiency": round(t1 / tn, 4), "step_seconds": round(tn, 4), "compute_seconds": round(t1, 4),
            "exposed_seconds": round(exposed, 4), "extra_cpu_seconds": round(extra_cpu, 4),
            "allreduce_seconds": round(alone, 4),
            "hidden_fraction": round(max(0.0, min(1.0, 1 - exposed / alone)), 4) if alone > 0 else None,
            "estimated_efficiency": many["workers"][0]["estimated_efficiency"],
            "probe_hidden_seconds": many["workers"][0].get("hidden_seconds"),
            "adapted": many["workers"][0]["adapted"], "advised": many["workers"][0]["advised"],
            "bytes_per_step": float(many["workers"][0]["bytes_per_step"]),
            "load_before": many["load_before"], "load_after": many["load_after"],
            "cpu_use_1": cpu_use, "contended": cpu_use is not None and cpu_use < CONTENDED}


def projections(rows: Sequence[Mapping[str, Any]], step_seconds: Sequence[float]) -> list[dict[str, Any]]:
    """The projection of every shaped link's row (:func:`.projection.project`), at its measured compute time and
    at each of ``step_seconds`` (per micro-batch: a lever set that accumulates ``k`` of them computes ``k`` times
    as long per step)."""
    out = []
    for row in rows:  # the latency of the row's link: the projection's rounds wait on it too
        measured = measured_from({**row, "rtt_ms": parse_links(str(row["link"]))[0].rtt_ms})
        if measured is None:
            continue
        times = [measured.compute, *(s * int(row.get("micro_batches", 1)) for s in step_seconds)]
        for record in project(measured, times, WORKER_COUNTS):
            out.append({"levers": row["levers"], "link": row["link"], "share": round(measured.share, 4),
                        "hidden": round(measured.hidden, 4), "overhead": round(measured.overhead, 4), **record})
    return out


#: The stage's targets, for two workers: link -> (what is compared, least efficiency).
SCALING_TARGETS: dict[str, tuple[str, float]] = {
    "1gbit": ("the best lever set's efficiency, 2 workers over a 1 Gbit/s link", 0.85),
    "loopback": ("the best lever set's efficiency, 2 workers over loopback", 0.95),
}


def summarize_scaling(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per link: today's efficiency and the best lever set's, and the targets (:data:`SCALING_TARGETS`) of the links
    that were measured, each with ``what``, ``value``, ``target``, ``met`` and ``contended`` (its row's lone worker
    got less than :data:`~.stages.CONTENDED` of its CPUs: other work slowed the measurement)."""
    links: dict[str, Any] = {}
    for row in rows:
        entry = links.setdefault(row["link"], {"today": None, "best": None, "best_levers": None})
        if row["levers"] == "today":
            entry["today"] = row["efficiency"]
        if entry["best"] is None or row["efficiency"] > entry["best"]:
            entry["best"], entry["best_levers"] = row["efficiency"], row["levers"]
    slowed = {(row["link"], row["levers"]) for row in rows if row.get("contended")}
    targets = {link: {"what": what, "value": links[link]["best"], "levers": links[link]["best_levers"],
                      "target": bound, "met": links[link]["best"] >= bound,
                      "contended": (link, links[link]["best_levers"]) in slowed}
               for link, (what, bound) in SCALING_TARGETS.items() if link in links}
    return {"links": links, "targets": targets}
