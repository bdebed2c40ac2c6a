"""How a run resuming checkpoints compares with the run that wrote them: refused when it builds another model
(:func:`check_resume`) or trains on other classes (:func:`check_classes`: each output would stand for another class),
warned of when it trains on other images of the same classes or learns otherwise (:func:`warn_of_changes`,
what it trains on as :func:`trained_on` records it, each change kept by :func:`record_changes`), and what more
epochs do to the learning rate (:func:`relaid`; a finished run, :func:`say_finished`)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..checks import count_text
from ..errors import AlexnetError, without_passwords

if TYPE_CHECKING:
    from ..input.inputs import TrainingData
    from ..tfimport import tf
    from .agreement import Steps
    from .checkpoint import CheckpointStore, Resume
    from .precision import Precision
    from .schedule import RateSchedule
    from .settings import TrainSettings
    from .strategy import Topology

logger = logging.getLogger("alexnet.train.checkpoint")  # said as the checkpoints' own lines


#: What a checkpoint records of the images its run trained on (``data`` among its settings) that a resumed run may
#: change, warned of, as the warnings name it. (``class_ids``, recorded too, may not change: :func:`check_classes`.)
DATA_WORDS = {"board": "board", "partition": "partition", "total": "`total`", "train_images": "training images",
              "val_images": "validation images"}
#: The classes named, at most, in a refusal of other classes.
CLASSES_SAID = 3


def _data_changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, list[Any]]:
    """What differs between two records of the images trained on (``data``), by name: ``[then, now]``. Runs whose
    every worker trained on its own partition of as many as there were workers (a Spark job's, where `workers` is
    what its caller gave) differ in their ``workers``, said instead of their partition and ``total``."""
    found = {name: [then[name], now[name]] for name in DATA_WORDS
             if name in then and name in now and then[name] != now[name]}
    if ("partition" in found or "total" in found) and _own_partitions(then) and _own_partitions(now):
        found = {"workers": [then["workers"], now["workers"]],
                 **{name: pair for name, pair in found.items() if name not in ("partition", "total")}}
    return found


def _own_partitions(data: Mapping[str, Any]) -> bool:
    """Did each worker of the run that recorded ``data`` train on its own partition of ``total`` = its workers?"""
    return isinstance(data.get("workers"), int) and data.get("total") == data["workers"]


def changes(saved: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, list[Any]]:
    """What a run resuming the checkpoints whose recorded settings are ``saved`` changes with ``current`` (the
    settings it records), by name, ``[then, now]``: the images trained on (``data``, a dict of what differs), the
    settings that change what is learnt (:data:`alexnet.train.settings.LEARNT_WITH`), the global batch, the steps of
    an epoch and the epochs. Only what both record is compared (an older history file records less)."""
    found: dict[str, Any] = {}
    data = _data_changes(saved.get("data") or {}, current.get("data") or {})
    if data:
        found["data"] = data
    then, now = saved.get("learnt_with") or {}, current.get("learnt_with") or {}
    found.update({name: [then[name], now[name]] for name in now if name in then and then[name] != now[name]})
    for name in ("global_batch_size", "steps", "epochs"):
        if saved.get(name) is not None and current.get(name) is not None and saved[name] != current[name]:
            found[name] = [saved[name], current[name]]
    return found


def _said(changed: Mapping[str, Any], relaid: str | None) -> list[str]:
    """``changed`` (of :func:`changes`) in words, one clause each; ``epochs`` only with ``relaid``."""
    words = []
    for name, (then, now) in ((k, v) for k, v in changed.items() if k != "data"):
        if name == "global_batch_size":
            words.append(f"a global batch of {then} images then, {now} now (other workers, `batch_size` or "
                         "`accumulate_steps`: a learning rate scaled to the new batch)")
        elif name == "steps":
            words.append(f"{count_text(int(then), 'step')} an epoch then, {now} now")
        elif name == "epochs":
            if relaid:
                words.append(f"`epochs`: {then} then, {now} now ({relaid})")
        else:
            words.append(f"`{name}`: {then!r} then, {now!r} now")
    data = changed.get("data") or {}
    if data:
        said = [f"{count_text(int(then), 'worker')} then, {now} now" if name == "workers" else
                f"{DATA_WORDS[name]} {then} then, {now} now" for name, (then, now) in data.items()]
        words.insert(0, f"other images ({', '.join(said)})")
    return words


def warn_of_changes(saved: Mapping[str, Any], current: Mapping[str, Any], location: str, *,
                    relaid: str | None = None) -> dict[str, list[Any]]:
    """Warn, in one line, when a run resumes the checkpoints at ``location``, whose run recorded ``saved``, with
    ``current`` changing what it trains on or how it learns (:func:`changes`; the epochs only with ``relaid``, what
    they do to the learning rate): the epochs left would learn otherwise than the epochs done, and one history
    would hold the metrics of both. What changed and was said, as :func:`changes` says it (the history records it)."""
    changed = changes(saved, current)
    if relaid is None:  # more or fewer epochs that leave the rate as it was: a run extended, nothing to say
        changed.pop("epochs", None)
    said = _said(changed, relaid)
    if said:
        learning = any(name != "epochs" for name in changed)
        logger.warning("The checkpoints in %s were written by a run that trained otherwise: %s. What is left trains "
                       "so, and the history holds the metrics of both (its `settings_changed` says from which epoch)"
                       "%s.", location, "; ".join(said),
                       "; resume with the same to continue the run as it began" if learning else "")
    return changed


def check_resume(saved: Mapping[str, Any], current: Mapping[str, Any], location: str) -> None:
    """Raise when the checkpoints at ``location`` were written for another model than ``current`` describes."""
    differ = [f"`{k}`: {_value(saved[k])} then, {_value(current[k])} now" for k in current
              if k in saved and saved[k] != current[k]]
    if differ:
        raise AlexnetError(
            f"The checkpoints in {location} were written for another model ({'; '.join(differ)}): use another "
            "`checkpoint_dir`, or the same settings, to resume."
        )


def _value(value: Any) -> str:
    """A setting's value in words every caller reads alike (R's ``TRUE``, Python's ``True`` and an option given or
    not): a switch on or off, none for a setting left unset."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def class_digest(class_ids: Sequence[str]) -> str:
    """What histories written before the class ids were recorded whole kept of them (``data``'s ``class_ids``)."""
    return hashlib.sha256("\n".join(str(i) for i in class_ids).encode()).hexdigest()[:16]


def check_classes(saved: Mapping[str, Any], class_ids: Sequence[str], location: str,
                  card_ids: Callable[[], Sequence[str] | None], model_there: Callable[[], bool]) -> None:
    """Raise when the checkpoints at ``location``, whose run recorded ``saved``, were trained on other classes than
    ``class_ids`` (the run's, by label): each output of the model would stand for another class.

    Their classes are the ids ``saved`` records (``data``'s ``class_ids``); a history written before they were
    recorded whole keeps their digest, and an older one none: then the card of the model saved beside the checkpoints
    tells them (``card_ids()``: its ``class_ids``, None without one), when it names the classes recorded. Nothing
    known, nothing refused. ``model_there()``: is that model there, a start for a run on other classes?"""
    now = [str(i) for i in class_ids]
    recorded = (saved.get("data") or {}).get("class_ids")
    if isinstance(recorded, (list, tuple)):
        then: list[str] | None = [str(i) for i in recorded]
    elif recorded == class_digest(now):
        return
    else:
        card = card_ids()
        then = [str(i) for i in card] if card is not None and recorded in (None, class_digest(card)) else None
        if then is None and recorded is None:
            return
    if then == now:
        return
    if then is not None:
        differ = [i for i in range(max(len(then), len(now))) if then[i:i + 1] != now[i:i + 1]]
        named = "; ".join(f"label {i}: {(then[i:i + 1] or ['none'])[0]} then, {(now[i:i + 1] or ['none'])[0]} now"
                          for i in differ[:CLASSES_SAID])
        what = (f"{len(differ)} of their {len(then)} outputs would stand for another class ({named}"
                f"{', ...' if len(differ) > CLASSES_SAID else ''}"
                f"{f'; {len(now)} classes now' if len(now) != len(then) else ''})")
    else:
        what = "the class ids differ, of which their history keeps a digest only"
    start = (f'give `initial_model` = "{location}" (the model saved there)' if model_there() else
             "give `initial_model` = the `model_dir` their run saved its model to")
    raise AlexnetError(
        f"The checkpoints in {location} were trained on other classes than this data's: {what}. To train on these "
        f"classes from their model, {start} and a new `checkpoint_dir`; to resume, give the data of their classes."
    )


def refuse_other_classes(strategy: tf.distribute.Strategy, topology: Topology, store: CheckpointStore,
                         start: Resume, class_ids: Sequence[str]) -> None:
    """Raise when the run resuming ``start`` from ``store`` trains on other classes than its checkpoints
    (:meth:`.CheckpointStore.check_classes`): checked on the chief, whose ``class_ids`` are the model's (its card
    names them; other workers' hand-made data may name only their own classes), and with several workers raised on
    every worker, the chief's words, so that none of them hangs. A collective then: every worker calls it after
    restoring."""
    said = ""
    if topology.chief:
        try:
            store.check_classes(start.settings, [str(i) for i in class_ids])
        except AlexnetError as error:
            if topology.workers == 1:
                raise
            said = str(error)
    if topology.workers > 1:
        from .agreement import all_gather_texts

        said = next((text for text in all_gather_texts(strategy, said) if text), "")
        if said:
            raise AlexnetError(said)


def say_finished(settings: TrainSettings, start: Resume, extended: str, current: Mapping[str, Any]) -> None:
    """Log that the checkpoints of ``settings.checkpoint_dir`` hold a run that trained every epoch asked for, and
    what a larger ``epochs`` would do to the learning rate (``extended``, of :func:`extended`); warn, naming them,
    of the settings of this run (``current``, as the checkpoints record settings) other than that run's: with nothing
    left to train they change nothing, and the model is the one it ended with."""
    done = (f"all {settings.epochs}" if start.epoch == settings.epochs
            else f"{start.epoch}, more than the {settings.epochs}")
    logger.info("%s holds a finished run: it trained %s epochs asked for, and nothing is left to train. The model "
                "and the history are the ones it ended with; give a larger `epochs` to train further: %s.",
                settings.checkpoint_dir, done, extended)
    unused = changes(start.settings, current)
    unused.pop("epochs", None)
    if said := _said(unused, None):
        logger.warning("%s holds a finished run, which trained otherwise than asked now: %s. Nothing is trained with "
                       "these, and the model is the one that run ended with; to train with them, give a new "
                       "`checkpoint_dir` (and `initial_model` = that run's model to start from it), or a larger "
                       "`epochs` to train further so.", settings.checkpoint_dir, "; ".join(said))


def _ended_at(start: Resume) -> str:
    """What the last epoch done ended at, as the history records it (``""`` when it does not)."""
    rates = start.schedule.get("learning_rate") or []
    return f", where epoch {start.epoch} ended at {float(rates[-1]):.3g}" if rates and start.step == 0 else ""


def extended(settings: TrainSettings, start: Resume, global_batch: int, steps: int) -> str:
    """What a run extended past ``start`` (every epoch of ``settings`` done) does to the learning rate: the
    ``lr_schedule`` laid out again over the new ``epochs``, and, for twice the epochs, the rate the first epoch added
    starts at (the warm-up and the way down are those of a run of that many epochs from the start: the rate of a
    linear or cosine schedule, which ended at zero, comes back up)."""
    more = 2 * start.epoch
    rates = dataclasses.replace(settings, epochs=more, image_size_epochs=None).rates(global_batch, steps)
    return (f"the `lr_schedule` is then laid out again over the new `epochs`, as for a run of that many from the "
            f"start (with epochs = {more}, epoch {start.epoch + 1} starts at a rate of "
            f"{rates.at(start.epoch * steps):.3g}{_ended_at(start)})")


def relaid(settings: TrainSettings, start: Resume, rates: RateSchedule, global_batch: int,
            steps: int) -> str | None:
    """With ``epochs`` other than the checkpoints' run recorded, and a learning rate that changes with them where
    the run resumes (the warm-up, or the way down of a linear or cosine schedule): what happens to the rate, in
    words; else None."""
    then = start.settings.get("epochs")
    if then is None or int(then) == settings.epochs:
        return None
    step = start.epoch * steps + start.step
    before = dataclasses.replace(settings, epochs=int(then), image_size_epochs=None).rates(global_batch, steps)
    if f"{before.at(step):.3g}" == f"{rates.at(step):.3g}":
        return None
    over = count_text(settings.epochs, "epoch")
    return (f"the `lr_schedule` is laid out again over {over}, as for a run of {settings.epochs} from the start"
            f": epoch {start.epoch + 1} {'goes on' if start.step else 'starts'} at a rate of "
            f"{rates.at(step):.3g}{_ended_at(start)}")


def record_changes(store: CheckpointStore, start: Resume, relaid: str | None) -> None:
    """Warn when the run resuming ``start`` trains on other images or learns otherwise than the checkpoints' run
    (:func:`.resumed.warn_of_changes`), and record in ``store`` from where, with the changes recorded before
    (``settings_changed``: the epoch, 1-based, and step where the changes began, and each change, then and now)."""
    changed = warn_of_changes(start.settings, store.settings, store.location, relaid=relaid)
    earlier = list(start.settings.get("settings_changed") or [])
    if changed:
        earlier.append({"epoch": start.epoch + 1, "step": start.step, "changed": changed})
    store.settings["settings_changed"] = earlier


def trained_on(data: Mapping[str, Any], td: TrainingData, steps: Steps, topo: Topology) -> dict[str, Any]:
    """What the run trains on, as its checkpoints record it (see :func:`.resumed.changes`): the board and
    partition of ``data`` (the partition with one worker only: each worker trains on its own), the workers, the ids of
    the model's classes, by label (:func:`check_classes`), and the training and validation images of every worker."""
    def one(name: str) -> Any:
        value: Any = data.get(name)  # a number, a string or None, or from R one of them in a list
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        return value if value is None or isinstance(value, str) else int(value)

    board = one("board")
    # checkpoints are read by whoever reads their folder (a shared bucket, often): no password of a board's URL
    return {"board": board if board is None else without_passwords(str(board)),
            "partition": one("partition") if topo.workers == 1 else None,
            "total": one("total"), "workers": topo.workers, "class_ids": [str(i) for i in td.class_ids],
            "train_images": int(steps.train_images),
            "val_images": int(steps.val_images)}


def finished_precision(settings: TrainSettings) -> Precision | None:
    """With ``precision`` unset, the one the run in ``settings.checkpoint_dir`` computed in when its history says it
    trained every epoch asked for: nothing is left to train, and the precisions are not measured (None otherwise,
    also when the history cannot be read: the resume says what is wrong with it). Every worker reads the same."""
    from .checkpoint import recorded_history
    from .precision import Precision

    if settings.precision is not None or not settings.checkpoint_dir:
        return None
    try:
        history = recorded_history(settings.checkpoint_dir)
    except AlexnetError:
        return None
    trained = (history.get("settings") or {}).get("run") or {}
    position = recorded_position(history)
    if position is None or position[0] < settings.epochs or position[1] != 0 or not trained.get("precision"):
        return None
    return Precision(str(trained["precision"]), f"as the finished run in {settings.checkpoint_dir} trained: nothing "
                     "is left to train")


def recorded_position(history: Mapping[str, Any]) -> tuple[int, int] | None:
    """The epoch and step of the newest checkpoint a history file records (``position``; an older file's
    ``epochs_done``, at step 0); None when it cannot be read as two whole numbers."""
    try:
        epoch, step = (int(value) for value in history.get("position") or (history.get("epochs_done", 0), 0))
    except (TypeError, ValueError):
        return None
    return epoch, step
