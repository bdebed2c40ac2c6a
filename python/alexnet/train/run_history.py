"""The history :func:`alexnet.alexnet_train` returns (:func:`run_history`): the run's settings and what they resolved
to, its metrics and schedule; for a finished run given again, what its checkpoints recorded of how it trained."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import without_passwords
from .history_file import recorded_params
from .schedule import describe
from .validation import VALIDATION_METRICS

if TYPE_CHECKING:
    from ..input.inputs import TrainingData
    from .agreement import Steps
    from .callbacks import Recorder
    from .checkpoint import Resume
    from .precision import Precision
    from .schedule import RateSchedule
    from .settings import TrainSettings
    from .strategy import Topology

#: The metrics of a history, in the order it gives them (others after them).
METRIC_ORDER = ("loss", "accuracy", "top5_accuracy", *VALIDATION_METRICS)


#: What a run measured of its communication before training, and what it took of the advice (the history's
#: ``params`` of these names, given to :func:`run_params` by the run; ``None`` where a run of one worker measures none).
MEASURED = ("communication", "allreduce_bytes_per_step", "allreduce_seconds", "asked_allreduce_seconds",
            "sixteen_bit_allreduce_seconds", "hidden_seconds", "compute_seconds", "communication_efficiency",
            "advised_settings", "communication_advice", "adapted_settings", "micro_batches_up_to")

#: The ``params`` of a history named as settings that :func:`run_params` gives as they resolved (the image sizes'
#: epochs, the precision, the warm-up, XLA), not as asked.
RESOLVED = ("image_size_epochs", "precision", "mixed_precision", "warmup_epochs", "jit_compile")


def run_params(settings: TrainSettings, topology: Topology, td: TrainingData, steps: Steps, start: Resume,
               precision: Precision, rates: RateSchedule, xla: tuple[bool, str], measured: Mapping[str, Any],
               seconds: float, started_from: Mapping[str, Any] | None, settings_changed: list[Any]) -> dict[str, Any]:
    """The ``params`` of a run's history: its settings and what they resolved to, what it measured of its
    communication (``measured``, by the names of :data:`MEASURED`), the ``seconds`` it trained, and where it started
    (``initial_epoch``, ``initial_step``, ``started_from``, ``settings_changed``). The run's history
    (:func:`run_history`) has them, and its history file keeps them as they are when each checkpoint is written
    (``settings``' ``params``, the seconds trained until then), so that :func:`alexnet.alexnet_history` reads back
    the same."""
    jit_compile, jit_compile_reason = xla
    return {
        **settings.to_dict(),
        "image_size_epochs": list(settings.sizes.epochs),
        "initial_epoch": start.epoch, "initial_step": start.step, "steps": steps.train,
        "global_batch_size": topology.global_batch(settings.step_batch), "num_classes": td.num_classes,
        "strategy": topology.name, "replicas": topology.replicas, "workers": topology.workers,
        "train_images": len(td.files), "val_images": steps.val_images, "worker_val_images": steps.val_share,
        "precision": precision.name, "precision_reason": precision.reason, "mixed_precision": precision.mixed,
        "precision_rates": precision.rates,
        "plateau_drops": list(rates.drop_epochs) if rates.kind == "plateau" else None,
        "lr_factor": rates.factor, "peak_learning_rate": rates.peak, "warmup_epochs": rates.warmup_epochs,
        "jit_compile": jit_compile, "jit_compile_reason": jit_compile_reason,
        **{name: measured.get(name) for name in MEASURED},
        "seconds": float(seconds), "started_from": started_from,
        "settings_changed": list(settings_changed),
    }


def kept_params(params: Mapping[str, Any], initial_model: str | None) -> dict[str, Any]:
    """What a history file keeps of a run's ``params`` (:func:`run_params`): them all, but ``initial_model`` as the
    checkpoints name it (``initial_model``: a pin's ``name@version``, or its location) and no password of a URL
    (:func:`~alexnet.errors.without_passwords`): whoever reads the folder reads them."""
    return {name: initial_model if name == "initial_model" else _without_passwords(value)
            for name, value in params.items()}


def _without_passwords(value: Any) -> Any:
    """``value`` with every string in it said by :func:`~alexnet.errors.without_passwords`."""
    if isinstance(value, str):
        return without_passwords(value)
    if isinstance(value, Mapping):
        return {name: _without_passwords(item) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_passwords(item) for item in value]
    return value


def run_history(settings: TrainSettings, topology: Topology, td: TrainingData, steps: Steps, start: Resume,
                recorder: Recorder, precision: Precision, rates: RateSchedule, xla: tuple[bool, str],
                measured: Mapping[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The history :func:`alexnet.alexnet_train` returns: the run's settings and what they resolved to (``params``,
    of :func:`run_params`: ``xla``, whether its step was compiled with XLA and why; ``measured``, what it measured of
    its communication; and ``extra``'s ``started_from``, ``settings_changed`` and ``seconds``), ``metrics`` and
    ``schedule``, and the rest of ``extra``. A finished run given again (nothing trained) has those its checkpoints
    recorded where they record them: the batch, steps, image sizes, precision, ... its model was trained with, not
    this call's."""
    from .precision import Precision

    trained = {name: value for name, value in recorded_params(start.settings).items() if value is not None
               } if start.finished(settings.epochs) else {}
    if trained.get("precision"):
        precision = Precision(str(trained["precision"]), str(trained.get("precision_reason") or "as trained"))
    metrics = recorder.metrics
    ordered = {name: [float(v) for v in metrics[name]] for name in METRIC_ORDER if name in metrics}
    ordered.update({k: [float(x) for x in v] for k, v in metrics.items() if k not in ordered})
    schedule: dict[str, Any] = {name: list(values) for name, values in recorder.schedule.items()}
    schedule["summary"] = describe(schedule, precision.name, precision.reason,
                                   trained.get("peak_learning_rate", rates.peak))
    params = run_params(settings, topology, td, steps, start, precision, rates, xla, measured, extra.pop("seconds"),
                        extra.pop("started_from"), extra.pop("settings_changed"))
    params.update({name: trained[name] for name in params.keys() & trained.keys() if name != "precision_rates"})
    return {"params": params, "metrics": ordered, "schedule": schedule, **extra}


def finished_run_history(settings: TrainSettings, start: Resume, card: dict[str, Any], model_pin: dict[str, str] | None,
                         extra: dict[str, Any]) -> dict[str, Any]:
    """The history a finished run given again returns (:mod:`.finished`: its model saved already, or saved now from
    its last checkpoint): what its checkpoints recorded (``start``: the metrics, schedule and settings of the epochs
    done), its ``params`` those the run kept (how it trained, what it measured), but where this call gives a setting
    they do not record as trained with; nothing trained (``initial_epoch`` the epochs done), and the model its ``card``
    describes, with the rest of ``extra`` (``model_path``, ``bad_images``, ``weights_agree``)."""
    from .history_file import read_params
    from .schedule import schedule_apart

    metrics = {name: list(values)[:start.epoch] for name, values in start.metrics.items()}
    schedule = {name: list(values)[:start.epoch] for name, values in start.schedule.items()}
    metrics, older = schedule_apart(metrics)
    for name, values in older.items():
        schedule.setdefault(name, values)
    trained = recorded_params(start.settings)
    params = {**{name: value for name, value in read_params(start.settings).items() if name != "data"},
              **{name: value for name, value in settings.to_dict().items()
                 if name not in trained and name not in RESOLVED},
              "initial_epoch": start.epoch, "initial_step": 0, "seconds": 0.0,
              "settings_changed": list(start.settings.get("settings_changed") or [])}
    ordered = {name: [float(v) for v in metrics[name]] for name in METRIC_ORDER if name in metrics}
    ordered.update({k: [float(x) for x in v] for k, v in metrics.items() if k not in ordered})
    said: dict[str, Any] = {name: list(values) for name, values in schedule.items()}
    said["summary"] = describe(said, params.get("precision"), params.get("precision_reason"),
                               params.get("peak_learning_rate"))
    return {"params": params, "metrics": ordered, "schedule": said, "model_path": extra.get("model_path"),
            "bad_images": list(extra.get("bad_images") or []), "skipped_images": [], "images_per_second": None,
            "weights_sha256": card.get("weights_sha256"), "weights_agree": extra.get("weights_agree"), "card": card,
            "model_pin": model_pin, "best_epoch": card.get("best_epoch")}
