"""How a run resuming checkpoints compares with the run that wrote them: refused when it builds another model
(:func:`check_resume`), warned of when it trains on other images or learns otherwise (:func:`warn_of_changes`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import AlexnetError

logger = logging.getLogger("alexnet.train.checkpoint")  # said as the checkpoints' own lines


#: What a checkpoint records of the images its run trained on (``data`` among its settings), as the warnings name it.
DATA_WORDS = {"board": "board", "partition": "partition", "total": "`total`", "class_ids": "class ids",
              "train_images": "training images", "val_images": "validation images"}


def _data_changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, list[Any]]:
    """What differs between two records of the images trained on (``data``), by name: ``[then, now]``."""
    return {name: [then[name], now[name]] for name in DATA_WORDS
            if name in then and name in now and then[name] != now[name]}


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
            words.append(f"{then} steps an epoch then, {now} now")
        elif name == "epochs":
            if relaid:
                words.append(f"`epochs`: {then} then, {now} now ({relaid})")
        else:
            words.append(f"`{name}`: {then!r} then, {now!r} now")
    data = changed.get("data") or {}
    if data:
        said = ["the class ids differ" if name == "class_ids" else f"{DATA_WORDS[name]} {then} then, {now} now"
                for name, (then, now) in data.items()]
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
    differ = [f"{k}: {saved[k]} then, {current[k]} now" for k in current if k in saved and saved[k] != current[k]]
    if differ:
        raise AlexnetError(
            f"The checkpoints in {location} were written for another model ({'; '.join(differ)}): use another "
            "`checkpoint_dir`, or the same settings, to resume."
        )
