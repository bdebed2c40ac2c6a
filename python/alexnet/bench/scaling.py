"""The ``scaling`` stage: the same training on one worker and on N, over links of set bandwidth, with each lever.

For every set of training settings compared (a *lever set*: today's training, 16-bit gradients on the wire,
packs, accumulation, local SGD; see :data:`LEVER_SETS`) the stage trains the same model and recipe for the same
steps:

- on one worker, alone on ``cores_per_worker`` CPUs (its step time is the compute time ``t1`` of a step);
- on ``workers`` workers, each a process of its own with its ``TF_CONFIG``, each on as many CPUs of its own (N
  workers have N times the compute of one), joined by each link asked for: ``loopback`` (127.0.0.1) or a shaped
  link (``"1gbit"``...: one network namespace per worker on a switch, :mod:`.link`; needs root, and without it
  only loopback is measured, said once).

Every worker times each step after ``warmup_steps`` (the median counts; with local SGD, whose steps between two
averages take less time than the one that averages, the mean over whole periods of ``sync_every`` steps); the run's
own probe times one all-reduce of what a step exchanges, alone on the same link, before training. A row of the result,
per lever set and link, has the images per second of N workers, the scaling efficiency ``t1 / tN`` (= throughput(N) /
(N x throughput(1)): the same images per step everywhere), the step split into compute (``t1``) and the communication
left exposed (``tN - t1``), the CPU seconds a worker's step took beyond a lone worker's (the collective's own work on
the worker's CPUs: what of the exposed time is not waiting for the link), the all-reduce alone, the share of it hidden
behind computation, the bytes all-reduced per step, and the efficiency the run estimated before training from its
own probe (:func:`alexnet.train.probe.probe_communication`: a step's computation against the same plus the exchange
alone) with what the probe's step with packs hid (``probe_hidden_seconds``, where packs overlap). From the shaped
links' rows, :mod:`.projection` projects the efficiency at 2 to 256 workers for the step times given
(``step_seconds``: a GPU's, say) beside MXNet's published AlexNet scaling. The rows, their projections and the summary
against the targets are made from the runs by :mod:`.scaling_rows`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import held_text
from ..declare import declaration
from ..declare.declaration import setting
from ..errors import AlexnetError
from .lever_sets import DEFAULT_LEVERS, LEVER_SETS, alike_lever_sets, lever_text, parse_lever_set
from .link import LinkSpec, can_delay, can_shape, parse_links
from .measure import load_average
from .projection import MODEL, mxnet_efficiency
from .scaling_rows import projections, scaling_row, summarize_scaling
from .stages import warn_unused

logger = logging.getLogger(__name__)

#: What a record of :func:`measure_scaling`'s ``on_row`` holds besides its row.
RECORD_ONLY = ("runs", "measured_with")
#: The settings of a :class:`ScalingPlan` that no row depends on: which links and lever sets are measured, and the
#: projection's step times.
NOT_MEASURED_WITH = ("links", "levers", "step_seconds")
#: What the log adds to a run taken from a stopped run.
KEPT = " (kept from the stopped run)"
#: Classes of the model trained: ImageNet's, so that AlexNet has its 62.4 million weights (250 MB of gradients).
MODEL_CLASSES = 1000


@dataclass(frozen=True)
class ScalingSettings:
    """The ``scaling`` stage's own settings (a group of the benchmark's declaration, see :mod:`alexnet.bench.plan`);
    it trains the model of the shared settings (``batch_size``, ``image_size``, ``dense_units``, ``precision``,
    ``seed``) at ImageNet's 1000 classes."""

    scaling_workers: int = setting(2, "count", "workers trained together, each on CPUs of its own (at most the "
                                   "cores this process may use)", minimum=2)
    links: tuple[str, ...] = setting(("loopback", "1gbit", "10gbit"), "words", "the links joining the workers: "
                                     "loopback (127.0.0.1), or a rate as tc writes it (1gbit, 10gbit, 200mbit; "
                                     "/0.5ms adds a round trip, with the kernel's netem), each worker in a network "
                                     "namespace of its own (root only; without root, loopback alone; without netem, "
                                     "no link with a round trip)", metavar="LINK")
    levers: tuple[str, ...] = setting(DEFAULT_LEVERS, "words", f"the lever sets compared: {', '.join(LEVER_SETS)}, "
                                      "or training settings written setting=value+setting=value; those that train "
                                      "alike (bfloat16 and allreduce_precision=bfloat16) are measured once, every "
                                      "name keeping its rows", metavar="LEVERS")
    scaling_steps: int = setting(5, "count", "steps timed in each run, after its warm-up (the median counts; with "
                                 "local SGD, rounded up to whole periods of sync_every steps, whose mean counts)",
                                 minimum=1)
    scaling_warmup_steps: int = setting(2, "count", "steps of each run left out of the timing", minimum=1)
    step_seconds: tuple[float, ...] = setting((0.15,), "numbers", "seconds a step of `batch_size` images computes "
                                              "on the hardware the projection is for (a GPU's)", above=0.0,
                                              metavar="SECONDS")
    scaling_classes: int = setting(8, "count", "categories of the stage's synthetic images (shared out among the "
                                   "workers; the model has 1000 outputs whatever this is)", minimum=1)
    scaling_images_per_class: int = setting(40, "count", "training images per category of them", minimum=1)
    scaling_timeout: float = setting(3600.0, "number", "seconds a run of the workers may take before it is stopped",
                                     above=0.0)
    scaling_resume: bool = setting(False, "flag", "keep the rows a stopped run wrote to scaling-rows.jsonl in "
                                   "`output_dir` where it measured them with the same settings, and measure only "
                                   "the others (needs `output_dir`)")

    def check(self, common: Any) -> None:
        """The links and lever sets readable, and a CPU of its own for every worker, when the stage runs."""
        if "scaling" not in common.stages:
            warn_unused(self, "scaling")
            return
        parse_links(self.links)
        for word in self.levers:
            if parse_lever_set(word)[1].get("local_sgd_after"):
                raise AlexnetError(f"The lever set {word!r} sets local_sgd_after, but the scaling stage times a few "
                                   "steps of one epoch, all of them synchronous then: leave it out here, and measure "
                                   "its cost in accuracy with the time_to_accuracy stage (`accuracy_levers`).")
        if self.scaling_resume and common.output_dir is None:
            raise AlexnetError("`scaling_resume` reads the rows a stopped run wrote to its `output_dir`: give that "
                               "folder as `output_dir`.")
        if self.scaling_workers > int(common.cores or 1):
            raise AlexnetError(f"`scaling_workers` = {self.scaling_workers} but the benchmark has {common.cores} "
                               "core(s): every worker gets CPUs of its own; use fewer workers or more `cores`.")

    def plan(self, common: Any) -> ScalingPlan:
        """The stage's plan from these settings and the ``common`` ones."""
        return ScalingPlan(self.scaling_workers, tuple(parse_links(self.links)),
                           tuple(parse_lever_set(word) for word in self.levers), self.scaling_steps,
                           self.scaling_warmup_steps, common.batch_size, common.image_size, common.dense_units,
                           common.precision, tuple(self.step_seconds), self.scaling_classes,
                           self.scaling_images_per_class, common.seed, self.scaling_timeout)

    def record(self, precision: str | None, seed: int) -> dict[str, Any]:
        """The settings recorded in the result."""
        return {**declaration.to_dict(self), "precision": precision, "seed": seed}


@dataclass(frozen=True)
class ScalingPlan:
    """The stage's settings, checked."""

    workers: int
    links: tuple[LinkSpec, ...]
    levers: tuple[tuple[str, Mapping[str, Any]], ...]
    steps: int
    warmup_steps: int
    batch_size: int
    image_size: int
    dense_units: int
    precision: str | None
    step_seconds: tuple[float, ...]
    classes: int
    images_per_class: int
    seed: int
    timeout: float | None = None

    def settings(self) -> dict[str, Any]:
        """The settings recorded in the result."""
        return {"workers": self.workers, "links": [link.name for link in self.links],
                "levers": {name: dict(values) for name, values in self.levers}, "steps": self.steps,
                "warmup_steps": self.warmup_steps, "batch_size": self.batch_size, "image_size": self.image_size,
                "dense_units": self.dense_units, "precision": self.precision,
                "step_seconds": list(self.step_seconds), "classes": self.classes,
                "images_per_class": self.images_per_class, "seed": self.seed}

    def period(self, levers: Mapping[str, Any]) -> int:
        """The steps between two exchanges of ``levers``: ``sync_every`` with local SGD, else 1."""
        return max(1, int(levers.get("sync_every", 1)))

    def timing(self, levers: Mapping[str, Any]) -> tuple[int, int]:
        """The warm-up steps and timed steps of a run with ``levers``: each a whole number of periods
        (:meth:`period`), so that the timed steps hold exactly one exchange per period (with local SGD the models
        are also averaged after an epoch's last step, which ends the last timed period)."""
        period = self.period(levers)
        return -(-self.warmup_steps // period) * period, -(-self.steps // period) * period

    def training(self, levers: Mapping[str, Any]) -> dict[str, Any]:
        """``alexnet_train``'s keyword arguments for ``levers``. The stage's few images stand in for ImageNet's:
        its runs are advised, and take, micro-batches up to the global batch a run on ImageNet would
        (:data:`~alexnet.train.batch_bound.LARGEST_GLOBAL_BATCH`), unless ``levers`` say otherwise. A lever set
        whose own micro-batches go beyond it (``combined``) is timed as it is, without the warning about accuracy
        a training run gets: the stage measures speed, and the README says what such a batch costs."""
        from ..train.batch_bound import LARGEST_GLOBAL_BATCH

        own = self.batch_size * self.workers * int(levers.get("accumulate_steps", 1))
        return {"batch_size": self.batch_size, "epochs": 1, "steps_per_epoch": sum(self.timing(levers)),
                "image_size": self.image_size, "dense_units": self.dense_units, "precision": self.precision,
                "validation": False, "check_images": False, "cache": True, "seed": self.seed, "verbose": 0,
                "largest_global_batch": max(LARGEST_GLOBAL_BATCH, own), **levers}


def usable_links(links: Sequence[LinkSpec]) -> tuple[list[LinkSpec], str | None]:
    """The links this process can make, found out before anything is measured: every one as root on a kernel with
    ``netem``; the links without an added round trip on one without it; else loopback alone. And why the others
    were left out, when they were."""
    reason = can_shape() if any(link.shaped for link in links) else None
    if reason is not None:
        return ([link for link in links if not link.shaped] or list(parse_links("loopback")),
                f"{reason} (run it as root)")
    reason = can_delay() if any(link.rtt_ms is not None for link in links) else None
    if reason is not None:
        return [link for link in links if link.rtt_ms is None] or list(parse_links("loopback")), reason
    return list(links), None


def scaling_data(plan: ScalingPlan, workdir: str | os.PathLike) -> list[dict[str, Any]]:
    """Each worker's ``data``: a synthetic ImageNet written for the stage (photographs' sizes for the image size),
    its categories shared out among the workers, every label one of the model's :data:`MODEL_CLASSES` outputs."""
    from ..data.imagenet import read_imagenet
    from ..data.synthetic import imagenet_synthetic
    from .images import SOURCE_SIDE_FACTOR

    root = Path(workdir) / "scaling-imagenet"
    if not root.exists():
        imagenet_synthetic(root, classes=plan.classes, images_per_class=plan.images_per_class, val_per_class=0,
                           seed=plan.seed, max_side=round(plan.image_size * SOURCE_SIDE_FACTOR))
    tree = read_imagenet(root)
    files, labels = tree.training_files()
    shares = []
    for worker in range(plan.workers):
        keep = [i for i, label in enumerate(labels) if label % plan.workers == worker]
        shares.append({"image": [files[i] for i in keep], "label": [labels[i] for i in keep],
                       "num_classes": MODEL_CLASSES})
    return shares


#: A lone worker's run, in the name of the folder of its log (:func:`run_logs`).
ALONE = "alone"


def run_logs(log_dir: str | os.PathLike, levers: str, link: str | None = None, took: str = "") -> Path:
    """The folder (made) of the workers' logs of one run of the stage, in ``log_dir``: ``<lever set>/<link>`` for the
    run of several workers on ``link``, ``<lever set>/alone`` for the lone worker's (``None``), ``alone+<took>``
    for a lone worker's with the settings a run of several took; each name as a file's name may hold it, so that
    no run's logs take the place of another's."""
    run = link if link is not None else ALONE + (f"+{took}" if took else "")
    folder = Path(log_dir) / _file_name(levers) / _file_name(run)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _file_name(text: str) -> str:
    """``text`` as the name of a file: a link's ``/`` (``1gbit/0.5ms``) as ``-``, any character other than letters,
    digits and ``._+=-`` as ``_``."""
    name = re.sub(r"[^A-Za-z0-9._+=-]", "_", text.replace("/", "-"))
    return name if name.strip(".") else f"_{name}"


def _run(plan: ScalingPlan, levers: Mapping[str, Any], data: list[dict[str, Any]], link: LinkSpec, workers: int,
         cpus: list[list[int]], log_dir: Path) -> dict[str, Any]:
    """One training of ``workers`` workers on ``link``, their logs in ``log_dir`` (:func:`run_logs`): the workers'
    results and the load around it."""
    from .cluster import run_workers
    from .scaling_worker import train_worker

    tasks = [{"settings": plan.training(levers), "data": data[i], "warmup_steps": plan.timing(levers)[0],
              "period": plan.period(levers),
              "threads": len(cpus[i]), "collective_timeout": plan.timeout} for i in range(workers)]
    before = load_average()
    results = run_workers(train_worker, tasks, link=link, cpus=cpus[:workers], timeout=plan.timeout,
                          log_dir=log_dir)
    for result in results:  # the step times and what they mean; the rest of each history is not kept
        params = result.pop("history")["params"]
        result["precision"] = params["precision"]
        result["images_per_step"] = params["global_batch_size"] // workers
        result["micro_batches"] = int(params["accumulate_steps"])
        # what the run's own measurement before training estimated (multi-worker runs), what it took of its advice
        # (adapt_communication) and the lever set it advised beyond that: this one's settings with those it took and
        # adds, written as --levers takes it ("": none)
        estimate, advised = params.get("communication_efficiency"), params.get("advised_settings") or {}
        adapted = params.get("adapted_settings") or {}
        rest = {name: value for name, value in advised.items() if adapted.get(name) != value}
        result["estimated_efficiency"] = None if estimate is None else round(float(estimate), 4)
        # the probe's own timings: the computation behind that estimate, and what a step with packs hid (recorded,
        # not counted on CPUs)
        result["probe_compute_seconds"] = params.get("compute_seconds")
        result["hidden_seconds"] = params.get("hidden_seconds")
        result["adapted"] = lever_text(adapted)
        result["advised"] = lever_text({**levers, **adapted, **rest}) if rest else ""
    return {"workers": results, "load_before": before, "load_after": load_average()}


def _alike(plan: ScalingPlan, name: str, levers: Mapping[str, Any], many: Mapping[str, Any],
           alike: dict[str, dict[str, Any]], runs: list[dict[str, Any]],
           run_one: Callable[[dict[str, Any], str], dict[str, Any]]) -> dict[str, Any] | None:
    """The lone worker's run with the micro-batches that ``many``, a run of ``adapt_communication``, took (``None``:
    it took none, and the lone worker's run of ``levers`` does the same work): a lone worker takes no advice, and
    micro-batches speed a step up alone (fewer optimizer updates), which would be counted as scaling. One run per
    settings taken (``alike``), added to ``runs``; ``run_one(settings, took)`` runs it (``took``: what it took, as
    a lever set writes it)."""
    took = parse_lever_set(many["workers"][0]["adapted"])[1] if many["workers"][0].get("adapted") else {}
    if "accumulate_steps" not in took:
        return None
    text = many["workers"][0]["adapted"]
    if text not in alike:
        settings = {key: value for key, value in {**levers, **took}.items() if key != "adapt_communication"}
        alike[text] = run_one(settings, text)
        logger.info("scaling %s, 1 worker with what %d workers took (%s): %.3f s a step.", name, plan.workers, text,
                    alike[text]["workers"][0]["typical_step_seconds"])
        runs.append({"levers": name, "link": None, "took": text, **alike[text]})
    return alike[text]


def measured_with(plan: ScalingPlan, levers: Mapping[str, Any]) -> dict[str, Any]:
    """Everything a row of the lever set ``levers`` depends on besides its link (the plan's settings but
    :data:`NOT_MEASURED_WITH`), as JSON gives it back: a row kept from a stopped run is taken again only when all of
    it is the same."""
    settings = {name: value for name, value in plan.settings().items() if name not in NOT_MEASURED_WITH}
    return json.loads(json.dumps({**settings, "settings": dict(levers)}))


def measure_scaling(plan: ScalingPlan, workdir: str | os.PathLike, cpus: Sequence[int],
                    on_row: Callable[[Mapping[str, Any]], None] | None = None,
                    kept: Sequence[Mapping[str, Any]] = (), log_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Run the stage (see the module documentation) on ``cpus``; its result: ``rows`` (the table), ``runs`` (one per
    run: ``levers``, ``link`` (``None`` for the lone worker), ``workers``, every worker's step times and CPU seconds,
    ``load_before`` and ``load_after``), ``projection``, ``model`` (the projection's formula), ``mxnet``,
    ``skipped`` (the links left out and why, if any were) and ``kept`` (how many rows were taken from ``kept``).

    Lever sets that train alike (:func:`~.lever_sets.alike_lever_sets`: a name given twice, ``bfloat16`` and
    ``allreduce_precision=bfloat16``) are measured once, as the first name given them, which the log says: every
    name given has its rows, in the order given, those of the others a copy of the measured ones with ``same_as``
    naming it (and no projection of their own, nor runs).

    ``on_row(record)`` is called as soon as each row is measured, with the row, its runs (``runs``: ``one`` and
    ``many``) and what it was measured with (``measured_with``, :func:`measured_with`). ``kept`` holds such records
    of a stopped run: a row whose lever set and link are among them, measured with the same, is taken from them
    instead of measured again (and not given to ``on_row``, whose records hold it already), and so is the lone
    worker's run of a lever set that has one. The workers of each run keep their logs in a folder of ``log_dir``
    of their own (default: ``scaling-logs`` in ``workdir``), by lever set and link (:func:`run_logs`)."""
    from .cluster import split_cpus

    if len(cpus) < plan.workers:
        raise AlexnetError(f"The scaling stage gives each of its {plan.workers} workers CPUs of its own, and this "
                           f"process may use {len(cpus)}: use workers <= {len(cpus)}, or give it more cores.")
    links, why = usable_links(plan.links)
    skipped = None
    if why is not None:
        skipped = f"{', '.join(link.name for link in plan.links if link not in links)}: {why}"
        logger.warning("The scaling stage leaves out %s; it measures %s.", skipped,
                       ", ".join(link.name for link in links))
    shares = split_cpus(cpus, plan.workers)
    data = scaling_data(plan, workdir)
    log_dir = Path(log_dir) if log_dir is not None else Path(workdir) / "scaling-logs"  # the workers' logs
    log_dir.mkdir(parents=True, exist_ok=True)
    named: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in plan.levers}  # each name's rows, as asked
    runs, taken = [], 0
    alike: dict[str, dict[str, Any]] = {}  # lone workers' runs with what a run of several took, by what it took
    measured = alike_lever_sets(plan.levers)
    same = "; ".join(f"{', '.join(names[:-1])} and {names[-1]} (measured as {first})"
                     for first, _, names in measured if len(names) > 1)
    if same:
        logger.info("The scaling stage measures once the lever sets that train alike, and gives each name its "
                    "rows: %s.", same)
    for name, levers, names in measured:
        key = measured_with(plan, levers)
        earlier = {record["link"]: {**record, "levers": name} for record in kept
                   if record.get("levers") in names and record.get("measured_with") == key}
        one = next(iter(earlier.values()))["runs"]["one"] if earlier else \
            _run(plan, levers, data, LinkSpec("loopback"), 1, shares, run_logs(log_dir, name))
        logger.info("scaling %s, 1 worker: %.3f s a step%s.", name, one["workers"][0]["typical_step_seconds"],
                    KEPT if earlier else "")
        runs.append({"levers": name, "link": None, **one})

        def took_alone(settings: dict[str, Any], took: str, name: str = name) -> dict[str, Any]:
            return _run(plan, settings, data, LinkSpec("loopback"), 1, shares, run_logs(log_dir, name, took=took))

        for link in links:
            record = earlier.get(link.name)
            if record is not None:
                many, row = record["runs"]["many"], {k: v for k, v in record.items() if k not in RECORD_ONLY}
                taken += 1
            else:
                many = _run(plan, levers, data, link, plan.workers, shares, run_logs(log_dir, name, link.name))
                lone = _alike(plan, name, levers, many, alike, runs, took_alone) or one
                row = scaling_row(name, levers, link, lone, many, plan.workers)
            runs.append({"levers": name, "link": link.name, **many})
            named[name].append(row)
            for other in names[1:]:  # measured as `name`
                named[other].append({**row, "levers": other, "same_as": name})
            logger.info("scaling %s, %d workers over %s: efficiency %s%s%s.", name, plan.workers, link.name,
                        held_text(row["efficiency"]), KEPT if record is not None else "",
                        f" (slowed down by other work: the lone worker's step got {row['cpu_use_1']:.2f} of its CPUs, "
                        f"load average {row['load_before']})" if row.get("contended") else "")
            if on_row is not None and record is None:
                on_row({**row, "runs": {"one": one, "many": many}, "measured_with": key})
    rows = [row for each in named.values() for row in each]
    projected = projections([row for row in rows if "same_as" not in row], plan.step_seconds)
    return {"rows": rows, "runs": runs, "projection": projected, "model": MODEL,
            "mxnet": [{"workers": n, "efficiency": round(e, 4)} for n, e in mxnet_efficiency()], "skipped": skipped,
            "kept": taken, "summary": summarize_scaling(rows)}
