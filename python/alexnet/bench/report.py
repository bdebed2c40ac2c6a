"""The benchmark's result read: ratios against the targets, the bottleneck, a Markdown table, the machine."""

from __future__ import annotations

import math
import platform
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import held_text
from ..machine import usable_cpus
from .stages import COMPARISONS, CONTENDED, PIPELINE_STAGES, STAGES, TARGETS, contended, label, rate


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """The CPU, cores, GPUs, platform, Python and TensorFlow a benchmark ran on, TensorFlow's allocator of the
    machine's memory and glibc's malloc settings."""
    from ..environment import malloc_in_effect
    from ..tfimport import cpu_allocator, tf

    return {
        "cpu": _cpu_model(),
        "cores": usable_cpus(),
        "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "cpu_allocator": cpu_allocator(),
        "malloc": malloc_in_effect(),
    }


def _ratio(numerator: float | None, denominator: float | None, target: str) -> dict[str, Any]:
    what, minimum = TARGETS[target]
    if numerator is None or denominator is None or denominator <= 0:
        return {"what": what, "value": None, "target": minimum, "met": None}
    value = numerator / denominator
    return {"what": what, "value": round(value, 3), "target": minimum, "met": bool(value >= minimum)}


def model_devices(stages: Sequence[Mapping[str, Any]]) -> int:
    """The devices the model trains on together on this machine: its GPUs (the ``synthetic`` record's ``gpus``),
    else 1 (the CPU)."""
    gpus = next((s.get("gpus") for s in stages if s.get("stage") == "synthetic"), None)
    return max(1, int(gpus or 0))


def summarize(stages: Sequence[Mapping[str, Any]], cores: int,
              accuracy: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Ratios against the targets, the bottleneck and the cores the pipeline needs, from measured ``stages``;
    with the ``time_to_accuracy`` stage's result (``accuracy``), its ``time_ratio`` and ``accuracy_difference``
    against their targets under ``time_to_accuracy``.

    The pipeline on every core is compared with the model's rate on every device of the machine
    (``model_images_per_second``): the ``synthetic`` rate, timed on one device, times the machine's GPUs
    (``model_devices``, 1 without a GPU), as a ``mirrored`` run would train on all of them; the same devices set
    the cores the pipeline needs to feed the model (``cores_to_feed_synthetic``). ``train_vs_bound`` compares the
    ``train`` stage, which trains on one device, with the one device's rate."""
    io1, io2, ion = rate(stages, "io", 1), rate(stages, "io", 2), rate(stages, "io", cores)
    fetch = {s["workers"]: s.get("bytes_per_second") for s in stages if s.get("stage") == "fetch"}
    serial = fetch.get(1)
    parallel = max((v for k, v in fetch.items() if k != 1 and v), default=None)
    ratios = {
        "io_vs_decode_per_core": _ratio(io1, rate(stages, "decode", 1), "io_vs_decode_per_core"),
        "io_2_cores_vs_1": _ratio(io2, io1, "io_2_cores_vs_1"),
        "io_vs_naive_2_cores": _ratio(io2, rate(stages, "naive", 2), "io_vs_naive_2_cores"),
    }
    if fetch:
        ratios["fetch_parallel_vs_serial"] = _ratio(parallel, serial, "fetch_parallel_vs_serial")
    auto2 = rate(stages, "naive_auto", 2)
    comparisons = {
        "io_vs_naive_auto_2_cores": {
            "what": COMPARISONS["io_vs_naive_auto_2_cores"],
            "value": round(io2 / auto2, 3) if io2 is not None and auto2 else None,
        },
    }
    compute, train = rate(stages, "synthetic"), rate(stages, "train")
    devices = model_devices(stages)
    machine = None if compute is None else compute * devices
    summary: dict[str, Any] = {"ratios": ratios, "comparisons": comparisons, "bottleneck": None,
                               "cores_to_feed_synthetic": None, "model_devices": devices,
                               "model_images_per_second": machine}
    if ion is not None and compute is not None and machine is not None:
        summary["bottleneck"] = "input pipeline" if ion < machine else "model compute"
        trains = f"{compute:.0f} images/s on batches already in memory"
        if devices > 1:
            trains = (f"{compute:.0f} images/s on one GPU on batches already in memory, {machine:.0f} on the "
                      f"machine's {devices} GPUs ({devices} times one GPU's rate, as if they scaled linearly)")
        summary["bottleneck_detail"] = (
            f"the input pipeline delivers {ion:.0f} images/s on {cores} core(s); the model trains {trains}"
        )
    if io1 and machine is not None:
        summary["cores_to_feed_synthetic"] = math.ceil(machine / io1)
    if train is not None:  # the train stage trains on one device, as synthetic times it
        bound = min(v for v in (ion, compute, train) if v is not None)
        summary["train_vs_bound"] = round(train / bound, 3) if bound else None
    summary["contended"] = [label(s) for s in stages if contended(s)]
    peaks = [s for s in stages if s.get("stage") == "io" and s.get("peak_rss_mb") is not None]
    if peaks:
        worst = max(peaks, key=lambda s: s["peak_rss_mb"])
        summary["io_peak_rss_mb"] = worst["peak_rss_mb"]
        summary["io_rss_growth_mb"] = round(worst["peak_rss_mb"] - (worst.get("rss_before_mb") or 0.0), 1)
    if accuracy is not None:
        summary["time_to_accuracy"] = dict(accuracy["targets"])
    return summary


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f} s"


def _spread(value: Mapping[str, Any] | None, show: Any) -> str:
    """A :func:`alexnet.bench.accuracy.spread` as ``median (min-max)``."""
    if value is None:
        return ""
    if value["min"] == value["max"]:
        return show(value["median"])
    return f"{show(value['median'])} ({show(value['min'])}-{show(value['max'])})"


def _accuracy(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def accuracy_table(accuracy: Mapping[str, Any]) -> str:
    """The ``time_to_accuracy`` stage as Markdown: one row per recipe (medians over the seeds, ranges in
    brackets, and the workers and their link when there were several), then its targets."""
    settings = accuracy["settings"]
    target, epochs = settings["target_accuracy"], settings["max_epochs"]
    seeds = settings.get("repeats", 1)
    lines = [f"| recipe | precision | image sizes (epochs) | learning rate | time to {target:g} | accuracy after "
             f"{epochs} epochs | best accuracy | largest fall, 2nd half | final model at +32 px |",
             "| --- | --- | --- | --- | --: | --: | --: | --: | --: |"]
    for r in accuracy["recipes"].values():
        sizes = ", ".join(f"{s} ({e})" for s, e in zip(r["image_sizes"], r["image_size_epochs"], strict=True))
        rate = f"{r['learning_rate']:g}, {r['lr_schedule']}"
        plus = r.get("final_eval_accuracy_plus32")
        took = sorted({run["adapted"] for run in r.get("runs", ()) if run.get("adapted")})
        recipe = r["recipe"] + (f" (took {', '.join(took)})" if took else "") + \
            (f" (trained as {r['same_as']})" if r.get("same_as") else "")
        lines.append(f"| {recipe} | {r['precision']} | {sizes} | {rate} "
                     f"| {_spread(r['seconds_to_target'], _seconds)} | {_spread(r['final_accuracy'], _accuracy)} "
                     f"| {_spread(r['best_accuracy'], _accuracy)} | {_spread(r['late_drop'], _accuracy)} "
                     f"| {_spread(plus, _accuracy) if plus else 'n/a'} |")
    workers = int(settings.get("accuracy_workers") or 1)
    joined = f"; {workers} workers over {settings.get('accuracy_link') or 'loopback'}" if workers > 1 else ""
    lines += ["", f"Medians over {seeds} seed(s), ranges in brackets{joined}.", "",
              "| target | measured | needed | met |", "| --- | --: | --: | :-: |"]
    for name, t in accuracy["targets"].items():
        value = "n/a" if t["value"] is None else f"{held_text(t['value'], t['bound'])}x" if name == "time_ratio" \
            else f"{'+' if t['value'] >= 0 else ''}{held_text(t['value'], t['bound'], 3)}"
        needed = f"{t['bound']} {t['target']:g}" + ("x" if name == "time_ratio" else "")
        met = "" if t["met"] is None else "yes" if t["met"] else "no"
        lines.append(f"| {t['what']} | {value} | {needed} | {met} |")
    levers = accuracy.get("levers") or {}
    if levers:
        lines += ["", f"| recipe | epochs to {target:g} | defaults | time to {target:g} | defaults | accuracy after "
                      f"{epochs} epochs | defaults | same epochs or fewer |",
                  "| --- | --: | --: | --: | --: | --: | --: | :-: |"]
        for name, r in levers.items():
            same = "" if r["same_epochs_or_fewer"] is None else "yes" if r["same_epochs_or_fewer"] else "no"
            shown = ["never" if r[key] is None else f"{r[key]:g}" for key in ("epochs_to_target",
                                                                           "defaults_epochs_to_target")]
            named = name + (f" (trained as {r['same_as']})" if r.get("same_as") else "")
            lines.append(f"| {named} | {shown[0]} | {shown[1]} | {_seconds(r['seconds_to_target'])} "
                         f"| {_seconds(r['defaults_seconds_to_target'])} | {_accuracy(r['final_accuracy'])} "
                         f"| {_accuracy(r['defaults_final_accuracy'])} | {same} |")
    return "\n".join(lines)


def scaling_table(scaling: Mapping[str, Any]) -> str:
    """The ``scaling`` stage as Markdown: one row per lever set and link, then its targets."""
    rows = scaling.get("rows") or []
    if not rows:
        return ""
    workers = rows[0]["workers"]
    lines = [f"| levers | link | images/s, 1 worker | images/s, {workers} workers | efficiency | step (s) "
             "| compute (s) | exposed (s) | extra CPU (s) | all-reduce alone (s) | MB all-reduced per step "
             "| estimated before training | advised | CPU share, 1 worker |",
             "| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- | --: |"]
    for r in rows:
        estimate = r.get("estimated_efficiency")
        took = f" (took {r['adapted']})" if r.get("adapted") else ""
        took += f" (measured as {r['same_as']})" if r.get("same_as") else ""
        share = r.get("cpu_use_1")
        shown = "" if share is None else f"{share:.2f}" + (" *" if r.get("contended") else "")
        lines.append(f"| {r['levers']}{took} | {r['link']} | {r['images_per_second_1']:.1f} "
                     f"| {r['images_per_second']:.1f} "
                     f"| {held_text(r['efficiency'])} | {r['step_seconds']:.2f} | {r['compute_seconds']:.2f} "
                     f"| {r['exposed_seconds']:.2f} | {r['extra_cpu_seconds']:.2f} | {r['allreduce_seconds']:.2f} "
                     f"| {r['bytes_per_step'] / 1e6:.1f} | {'' if estimate is None else held_text(estimate)} "
                     f"| {r.get('advised') or ''} | {shown} |")
    slowed = [r for r in rows if r.get("contended")]
    if slowed:
        loads = ", ".join(f"{r['load_before']:.1f}" for r in slowed if r.get("load_before") is not None)
        lines += ["", f"\\* Slowed down by other work: the lone worker's step got less than {CONTENDED:.0%} of its "
                  f"CPUs{f' (load average {loads} before the run)' if loads else ''}, so that its rate, and every "
                  "ratio to it, is off: measure again on a quiet machine."]
    targets = (scaling.get("summary") or {}).get("targets") or {}
    if targets:
        lines += ["", "| target | measured | needed | met |", "| --- | --: | --: | :-: |"]
        lines += [f"| {t['what']} ({t['levers']}) | {held_text(t['value'])} | at least {t['target']:g} "
                  f"| {'yes' if t['met'] else 'no'}{' (slowed down by other work)' if t.get('contended') else ''} |"
                  for t in targets.values()]
    if scaling.get("skipped"):
        lines += ["", f"Links left out: {scaling['skipped']}."]
    if scaling.get("kept"):
        lines += ["", f"Rows kept from a stopped run (`scaling_resume`): {scaling['kept']} of {len(rows)}."]
    return "\n".join(lines)


def benchmark_table(result: Mapping[str, Any]) -> str:
    """The benchmark as Markdown tables: images per second per stage, fetch speed, ratios against the targets.

    Stages in the order they were asked for (``settings.stages``), then by cores; targets whose stages were not
    run are left out.
    """
    lines: list[str] = []
    asked = list(result.get("settings", {}).get("stages") or []) + [s for s in STAGES]
    order: dict[str, int] = {}
    for name in asked:
        order.setdefault(name, len(order))
    images = sorted((s for s in result["stages"] if "images_per_second" in s),
                    key=lambda s: (order.get(s["stage"], len(order)), s.get("cores", 0)))
    if images:
        lines += [
            "| stage | cores | images/s | images/s per core | images per CPU-second | CPU use | peak RSS (MB) "
            "| load avg |",
            "| --- | --: | --: | --: | --: | --: | --: | --: |",
        ]
    for s in images:
        ips = s["images_per_second"]
        per_core = f"{ips / s['cores']:.0f}" if s.get("stage") in PIPELINE_STAGES else ""
        per_cpu = "" if s.get("images_per_cpu_second") is None else f"{s['images_per_cpu_second']:.0f}"
        use = "" if s.get("cpu_use") is None else f"{100 * s['cpu_use']:.0f}%"
        peak = "" if s.get("peak_rss_mb") is None else f"{s['peak_rss_mb']:.0f}"
        load = "" if s.get("load_average") is None else f"{s['load_average']:.2f}"
        lines.append(f"| {s['stage']} | {s['cores']} | {ips:.0f} | {per_core} | {per_cpu} | {use} | {peak} | {load} |")
    fetches = [s for s in result["stages"] if s.get("stage") == "fetch"]
    if fetches:
        lines += ["", "| fetch | workers | MB/s | seconds |", "| --- | --: | --: | --: |"]
        lines += [f"| fetch | {s['workers']} | {(s['bytes_per_second'] or 0) / 1e6:.1f} | {s['seconds']:.2f} |"
                  for s in fetches]
    ratios = [r for r in result["summary"]["ratios"].values() if r["value"] is not None]
    if ratios:
        lines += ["", "| target | measured | needed | met |", "| --- | --: | --: | :-: |"]
        lines += [f"| {r['what']} | {held_text(r['value'])}x | {r['target']:g}x | {'yes' if r['met'] else 'no'} |"
                  for r in ratios]
        lines += [f"| {c['what']} | {c['value']:.2f}x | no target | |"
                  for c in result["summary"].get("comparisons", {}).values() if c["value"] is not None]
    summary = result["summary"]
    if summary.get("contended"):
        lines += ["", f"Slowed down by other work on the machine (less than {CONTENDED:.0%} of their CPUs): "
                      f"{', '.join(summary['contended'])}."]
    if result.get("time_to_accuracy"):
        lines += ["", accuracy_table(result["time_to_accuracy"])]
    if result.get("scaling"):
        lines += ["", scaling_table(result["scaling"])]
    if summary.get("bottleneck"):
        devices = int(summary.get("model_devices") or 1)
        on = f" on {devices} GPUs" if devices > 1 else ""
        lines += ["", f"Bottleneck: {summary['bottleneck']} ({summary['bottleneck_detail']}); the pipeline needs "
                      f"{summary['cores_to_feed_synthetic']} core(s) to feed the model's rate{on}."]
    return "\n".join(lines).strip("\n")
