"""Checkpoints and the history file, on any storage a board can be on (``checkpoint_dir``: the files, where they
are written and how they get to a bucket and back, are :mod:`.checkpoint_files`'s).

Only the chief (worker 0) keeps checkpoints and the history file. The other workers save too (saving takes every
worker of a multi-worker run), into a scratch folder that is deleted at the end.

A checkpoint records how far training got: ``epoch`` (epochs completed) and ``step`` (steps completed in the next
epoch, 0 after an epoch ends), so that a run resumes where its last checkpoint was written, including in the middle
of an epoch. :class:`CheckpointStore` is the one owner of that position: its :meth:`~CheckpointStore.restore`
returns a :class:`Resume`, and its :meth:`~CheckpointStore.save` takes the position and the metrics so far.

The history file also records what the run trained on (the board, partition, classes and images) and the
settings that change what it learns; a run resuming on other classes is refused (each output would stand for another
class: :func:`alexnet.train.resumed.check_classes`), one resuming with other images or settings is warned, in one line
naming each change (:func:`alexnet.train.resumed.warn_of_changes`), and its history's ``settings_changed`` says from
which epoch.

The history records the format of the checkpoint (:data:`.formats.CHECKPOINT_FORMAT`, what its saved state means);
a checkpoint of another format is refused rather than resumed with its state misread (:mod:`.formats`).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import AlexnetError
from ..storage.location import fs_path, open_filesystem
from ..storage.transfer import brief
from ..tfimport import keras, tf
from .checkpoint_files import INDEX_FILE, KEEP, CheckpointFiles
from .formats import CHECKPOINT_FORMAT, check_checkpoint_classes, check_format, check_optimizer
from .history_file import HISTORY_FILE
from .resumed import check_resume
from .schedule import schedule_apart

logger = logging.getLogger(__name__)

#: Per-epoch metrics and settings kept next to the checkpoints, so that a resumed run returns them all.
STATE_FILE = HISTORY_FILE
#: The weights of the best epoch so far (``keep_best``), with that epoch, kept next to the checkpoints.
BEST_FILE = "alexnet-best-weights.npz"
#: The key, in a checkpoint, of the copy of the history file it keeps.
HISTORY_KEY = "history/.ATTRIBUTES/VARIABLE_VALUE"


@dataclass(frozen=True)
class Resume:
    """Where training resumes: ``epoch`` epochs done, ``step`` steps of the next one done (0 after an epoch ends),
    the per-epoch ``metrics`` and ``schedule`` (what each trained with) of the epochs done, and the ``settings`` the
    checkpoints' run recorded (all empty for a fresh start)."""

    epoch: int = 0
    step: int = 0
    metrics: Mapping[str, list[float]] = field(default_factory=dict)
    schedule: Mapping[str, list[float]] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: whether a checkpoint was restored (its weights are the model's now)
    restored: bool = False

    def finished(self, epochs: int) -> bool:
        """Did the checkpoints' run train every one of ``epochs`` epochs already (nothing left to train)?"""
        return self.restored and self.step == 0 and self.epoch >= epochs


class CheckpointStore(CheckpointFiles):
    """The checkpoints of one run at ``location`` (a resolved location string), seen from one worker (their files:
    :class:`.checkpoint_files.CheckpointFiles`).

    :meth:`restore` attaches the model and its optimizer (and restores the latest checkpoint when there is
    one); :meth:`save` then writes a checkpoint and the history file at a position. ``steps`` is the number of
    steps of an epoch (checkpoints are numbered by the global step); ``settings`` are recorded in the
    history file, with the params of the run's history (:attr:`params`, when the run gives them).
    """

    whole_files = (STATE_FILE, BEST_FILE)

    def __init__(self, location: str, *, chief: bool, steps: int = 1, settings: Mapping[str, Any] | None = None):
        super().__init__(location, chief=chief)
        self.steps = steps
        self.settings = dict(settings or {})
        #: the params of the run's history as they are now (:func:`.run_history.run_params`), which the history
        #: file keeps beside ``settings`` (its ``params``); None: none kept
        self.params: Callable[[], Mapping[str, Any]] | None = None
        self._manager: tf.train.CheckpointManager | None = None
        self._position: tuple[tf.Variable, tf.Variable] | None = None
        self._history: tf.Variable | None = None

    # -- the history file --------------------------------------------------------------------------------

    def read_state(self) -> dict[str, Any] | None:
        """The history file of earlier runs, or None when there is none."""
        return _read_state(self.fs, self._remote(STATE_FILE), self.location)

    def write_state(self, state: Mapping[str, Any]) -> None:
        """Replace the history file with ``state`` (the chief only; a no-op elsewhere)."""
        if not self.chief:
            return
        self.write_whole(STATE_FILE, json.dumps(state, indent=1).encode())

    # -- checkpoints -------------------------------------------------------------------------------------

    def _choose(self, state: Mapping[str, Any] | None) -> tuple[str, str, Any] | None:
        """The newest whole checkpoint: its name, local path prefix and reader; None when there is none (a fresh
        start). A damaged newest checkpoint gives way to the one before it, said in a warning; raises when the
        history records epochs done but no checkpoint is there, or when every checkpoint is damaged."""
        names, passed_over = self._candidates()
        if not names:
            if state is not None:
                epoch, step = state.get("position") or (state.get("epochs_done", 0), 0)
                raise AlexnetError(
                    f"{self.location}/{STATE_FILE} records {epoch} epoch(s) and {step} step(s) done, but there is no "
                    f"checkpoint in {self.location} to resume from: put its ckpt-* files back, or delete {STATE_FILE} "
                    "there, or use another `checkpoint_dir`, to start afresh."
                )
            return None
        if passed_over:
            names = self._by_position(names)
            logger.warning("The checkpoints in %s: %s; resuming from the newest checkpoint there, %s.", self.location,
                           passed_over, names[0])
        damaged: list[tuple[str, str]] = []
        for name in names:
            prefix = self._fetch(name)
            reader, damage = _open_whole(prefix)
            if damage is None:
                break
            if self.remote:  # said of the bucket's files, not of the scratch folder they were downloaded to
                damage = damage.replace(os.path.dirname(prefix), self.location)
            damaged.append((name, damage))
        else:
            raise AlexnetError(
                f"The checkpoints in {self.location} are damaged ({'; '.join(f'{n}: {d}' for n, d in damaged)}): "
                f"delete its ckpt-* files, its {INDEX_FILE} file and {STATE_FILE} to start afresh, or use another "
                "`checkpoint_dir`."
            )
        if damaged:
            logger.warning("The newest checkpoint in %s, %s, is damaged (%s): resuming from %s, the one before it.",
                           self.location, damaged[0][0], damaged[0][1], name)
        # the checkpoints the next ones are kept beside in a bucket: this one and those before it
        self._kept = names[names.index(name):]
        if self.chief and not self.remote and (passed_over or damaged):
            # the index names the checkpoint resumed from, so that the checkpoints saved next replace it in turn
            index = os.path.join(self.location, INDEX_FILE)
            with open(index + ".tmp", "w") as f:
                f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n'
                        f"all_model_checkpoint_timestamps: {time.time()}\n")
            os.replace(index + ".tmp", index)
        return name, prefix, reader

    def restore(self, model: keras.Model, optimizer: Any, checked: Collection[str] = ()) -> Resume:
        """Attach ``model`` and ``optimizer`` to this store, restore the newest whole checkpoint into them when
        there is one, and say where training resumes.

        Every checkpoint keeps its own copy of the history file as it was when the checkpoint was written, so that
        the two agree however a run stopped: the copy is what the run resumes with, also when the history file
        lags behind (a run stopped between the two), is missing or cannot be read.

        Raises :class:`~alexnet.errors.AlexnetError` when the checkpoints were written for another model (one of the
        ``checked`` settings differs from the recorded ones, or the checkpoint does not fit), cannot be resumed by
        this version (:mod:`.formats`: another format, an older optimizer's state), when every checkpoint is
        damaged, or when the history records epochs done but no checkpoint is there."""
        unfinished = self.remove_unfinished()
        if unfinished:
            logger.info("Removed the checkpoint(s) an earlier run began to write in %s and did not finish: %s.",
                        self.location, ", ".join(unfinished))
        position = (tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch"),
                    tf.Variable(0, dtype=tf.int64, trainable=False, name="step"))
        self._position = position
        self._history = tf.Variable("", dtype=tf.string, trainable=False, name="history")
        trackables = {"model": model, "optimizer": optimizer, "epoch": position[0], "step": position[1]}
        unreadable: AlexnetError | None = None
        try:
            state = self.read_state()
        except AlexnetError as error:
            state, unreadable = None, error
        chosen = self._choose(state)
        # created after the index may have been mended, so that the manager deletes the checkpoints it names
        self._manager = tf.train.CheckpointManager(tf.train.Checkpoint(**trackables, history=self._history),
                                                   self.local, max_to_keep=KEEP)
        if chosen is None:
            if unreadable is not None:
                raise unreadable
            return Resume()
        name, latest, reader = chosen
        check_optimizer(reader, latest, self.location, self.fs, self.root)
        kept = _kept_history(reader)
        if kept is not None:
            if unreadable is not None:
                logger.warning("%s/%s cannot be read: resuming with the copy of it that %s keeps.", self.location,
                               STATE_FILE, name)
            elif state is None:
                logger.warning("%s has no %s: resuming with the copy of it that %s keeps.", self.location,
                               STATE_FILE, name)
            elif state.get("position") != kept.get("position"):
                logger.info("%s/%s was written at %s, and %s at %s: resuming with the history %s keeps.",
                            self.location, STATE_FILE, _said_at(state.get("position")), name,
                            _said_at(kept.get("position")), name)
            state = kept
        elif unreadable is not None:  # a checkpoint of an older version, without a copy
            raise unreadable
        elif state is None:
            logger.warning("%s has checkpoints but no %s: the run resumes without checking the settings they were "
                           "written with, and its history lacks the metrics of the epochs done before.",
                           self.location, STATE_FILE)
        if state is not None:
            check_format(state, self.location, self.fs, self.root)
            check_resume(state.get("settings", {}), {k: self.settings[k] for k in checked if k in self.settings},
                         self.location)
        try:
            kept_too = {"history": self._history} if kept is not None else {}
            tf.train.Checkpoint(**trackables, **kept_too).restore(latest).assert_existing_objects_matched()
        except (IndexError, tf.errors.DataLossError) as error:  # whole when read just before: changed since
            raise AlexnetError(
                f"The checkpoint {latest} of {self.location} is damaged ({error}): delete its {name}.* files, or use "
                "another `checkpoint_dir`."
            ) from error
        except (AssertionError, ValueError, tf.errors.OpError) as error:
            said = str(error)
            if "loss_scale" in said or "good_steps" in said:  # the optimizer's state in float16, and only there
                raise AlexnetError(
                    f"The checkpoint {latest} of {self.location} was written by a run that did not compute in float16, "
                    "and this run does (its optimizer keeps a loss scale the checkpoint has not): give `precision` "
                    "the one the checkpoint was written in (float32 or bfloat16), which a run left to choose (`auto`) "
                    "may not choose again on another machine, or use another `checkpoint_dir`."
                ) from error
            raise AlexnetError(
                f"The checkpoint {latest} of {self.location} does not fit this model ({error}): use another "
                "`checkpoint_dir`, or the settings it was written with."
            ) from error
        epoch, step = int(position[0].numpy()), int(position[1].numpy())
        metrics = {k: list(v)[:epoch] for k, v in (state or {}).get("metrics", {}).items()}
        schedule = {k: list(v)[:epoch] for k, v in (state or {}).get("schedule", {}).items()}
        metrics, older = schedule_apart(metrics)
        for name, values in older.items():
            schedule.setdefault(name, values)
        resume = Resume(epoch, step, metrics, schedule, dict((state or {}).get("settings", {})), restored=True)
        epochs = self.settings.get("epochs")
        if epochs is not None and resume.finished(int(epochs)):  # said by the run, which returns it as it is
            logger.debug("%s holds a run of %d epoch(s) done.", self.location, epoch)
        else:
            logger.info("Resuming from %s at epoch %d, step %d.", self.location, epoch + 1, step)
        return resume

    def check_classes(self, saved: Mapping[str, Any], class_ids: list[str]) -> None:
        """Raise when the checkpoints (their run recorded ``saved``) learnt other classes than ``class_ids``."""
        check_checkpoint_classes(saved, class_ids, self.location, self.fs, self.root)

    def save(self, epoch: int, step: int, metrics: Mapping[str, list[float]],
             schedule: Mapping[str, list[float]] | None = None) -> None:
        """Save a checkpoint at ``epoch`` epochs and ``step`` steps done, and the history file with ``metrics`` and
        ``schedule`` (every worker must call it at the same point; after :meth:`restore`). The checkpoint keeps a
        copy of the history, written with it; the history file follows it."""
        if self._manager is None or self._position is None or self._history is None:
            raise AlexnetError("Internal error: CheckpointStore.save() before restore().")
        state = {"format": CHECKPOINT_FORMAT, "epochs_done": epoch, "position": [epoch, step],
                 "settings": {**self.settings, **({} if self.params is None else {"params": dict(self.params())})},
                 "metrics": {k: list(v) for k, v in metrics.items()},
                 "schedule": {k: list(v) for k, v in (schedule or {}).items()}}
        self._position[0].assign(epoch)
        self._position[1].assign(step)
        self._history.assign(json.dumps(state))
        try:
            self._manager.save(checkpoint_number=epoch * self.steps + step)
            if self.chief and self.remote:
                self._publish(self._manager)
            self.write_state(state)
        except (OSError, tf.errors.OpError, AlexnetError) as error:
            self.remove_unfinished()
            if self.taken_by() is not None:  # its own words: running the same command again would not resume
                raise
            raise AlexnetError(self.unsaved(self._manager.latest_checkpoint, epoch, step, error)) from error
        if step:  # inside an epoch: said as a resumed run says where it goes on
            logger.info("Checkpoint at epoch %d, step %d: a run resumed from it goes on there.", epoch + 1, step)
        else:
            logger.info("Checkpoint after epoch %d.", epoch)

    # -- the best epoch's weights (keep_best) --------------------------------------------------------------

    def save_best(self, epoch: int, weights: list[Any]) -> None:
        """Keep ``weights``, of epoch ``epoch`` (0-based), as the best so far (the chief only; a no-op elsewhere)."""
        if not self.chief:
            return
        import numpy as np

        self.write_whole(BEST_FILE, lambda f: np.savez(f, epoch=np.int64(epoch),
                                                       **{f"w{i}": w for i, w in enumerate(weights)}))

    def read_best(self) -> tuple[int, list[Any]] | None:
        """The best epoch's number and weights kept by :meth:`save_best`, or None when there are none or they
        cannot be read (said in a warning: a file cut short by a run stopped while writing it, by an earlier
        version, or damaged since)."""
        import io
        import zipfile

        import numpy as np

        path = self._remote(BEST_FILE)
        try:
            if not self.fs.exists(path):
                return None
            with np.load(io.BytesIO(self.fs.cat_file(path))) as saved:
                weights = [saved[f"w{i}"] for i in range(len(saved.files) - 1)]
                return int(saved["epoch"]), weights
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            logger.warning("keep_best: %s/%s cannot be read (%s), and is passed over.", self.location, BEST_FILE,
                           brief(error))
            return None



def _read_state(fs: Any, path: str, location: str) -> dict[str, Any] | None:
    """The history file at ``path`` on ``fs`` (of the checkpoints at ``location``), or None when there is none."""
    try:
        if not fs.exists(path):
            return None
        return json.loads(fs.cat_file(path))
    except (OSError, ValueError) as error:
        raise AlexnetError(
            f"{location}/{STATE_FILE} cannot be read ({error}): use another `checkpoint_dir`, or delete that folder's "
            f"ckpt-* files, its {INDEX_FILE} file and {STATE_FILE}, to start afresh."
        ) from error


def _open_whole(prefix: str) -> tuple[Any, str | None]:
    """A reader of the checkpoint at ``prefix`` and None when every tensor of it can be read; otherwise what is
    damaged (a file missing, cut short or corrupt)."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except (IndexError, OSError, ValueError, tf.errors.OpError) as error:
        return None, str(getattr(error, "message", None) or error) or type(error).__name__
    return reader, None


def _kept_history(reader: Any) -> dict[str, Any] | None:
    """The copy of the history file a checkpoint keeps (None for a checkpoint of an older version, without one)."""
    if not reader.has_tensor(HISTORY_KEY):
        return None
    value = reader.get_tensor(HISTORY_KEY)
    return json.loads(value.decode() if isinstance(value, bytes) else value)


def recorded_settings(location: str | None) -> dict[str, Any]:
    """The settings the checkpoints at ``location`` (a resolved location; None: none) recorded when they were
    written (empty: none written yet), as :func:`recorded_history` finds them."""
    return dict(recorded_history(location).get("settings") or {})


def recorded_history(location: str | None) -> dict[str, Any]:
    """The history the checkpoints at ``location`` (a resolved location; None: none) recorded (empty: none written
    yet): the history file's, or, when it is missing or cannot be read, the copy the newest checkpoint keeps, which a
    resumed run takes (:meth:`CheckpointStore.restore`). Raises when it is of another format (:func:`check_format`),
    as the run would."""
    if not location:
        return {}
    fs, root = open_filesystem(location, what="checkpoint_dir"), fs_path(location)
    try:
        state = _read_state(fs, posixpath.join(root, STATE_FILE), location)
    except AlexnetError as unreadable:
        state = _newest_kept_history(location)
        if state is None:
            raise unreadable from None
    if state is None:
        state = _newest_kept_history(location)
    if state is not None:
        check_format(state, location, fs, root)
    return dict(state or {})


def _newest_kept_history(location: str) -> dict[str, Any] | None:
    """The copy of the history file the newest checkpoint at ``location`` that has one keeps (None: no checkpoint
    there keeps one), read without the checkpoint's weights."""
    store = CheckpointStore(location, chief=False)
    try:
        for name in store._candidates()[0]:
            try:
                kept = _kept_history(tf.train.load_checkpoint(store._fetch(name)))
            except (IndexError, OSError, ValueError, tf.errors.OpError):  # damaged: the one before it
                continue
            if kept is not None:
                return kept
        return None
    finally:
        store.close()


def _said_at(position: Any) -> str:
    """A position ``[epoch, step]`` (its epoch counted from 0) as the other lines say it: ``epoch 2, step 50``."""
    try:
        epoch, step = (int(value) for value in position)
    except (TypeError, ValueError):
        return "an unknown position"
    return f"epoch {epoch + 1}, step {step}"
