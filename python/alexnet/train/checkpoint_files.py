"""The files of a run's checkpoints, on any storage a board can be on, seen from one worker: where TensorFlow
writes them, how they get to the storage and back, and which are there (:class:`CheckpointFiles`, what the
checkpoint store of :mod:`alexnet.train.checkpoint` saves and restores through).

``checkpoint_dir`` takes the same strings as a board (see :mod:`alexnet.storage.location`):
a folder, ``file://``, ``gs://`` or ``s3://``. On a local (or shared) file system TensorFlow writes the
checkpoints in place. On a bucket it writes them to a local staging folder, and each checkpoint is then
uploaded through fsspec: its data files first, TensorFlow's ``checkpoint`` index last, so that the index
never names files that are not there yet; older checkpoints are deleted after. Restoring downloads the
checkpoint the index names.

Only the chief (worker 0) writes to the storage; the other workers' checkpoints go to a scratch folder of their own,
deleted at the end (:meth:`CheckpointFiles.close`). The chief holds the folder while it runs, :data:`RUN_LOCK`
there: a second run given the same folder waits for it up to :data:`RUN_LOCK_PATIENCE` seconds, then stops, where the
two would have written over each other's checkpoints. In a folder it is a file lock, deleted as the run ends (a killed
run's is let go when its process ends, and the next run takes it); on a
bucket, a lease (:mod:`alexnet.storage.lease`) the run renews every few seconds, taken over once it has not been
renewed for :data:`alexnet.storage.lease.STALE` seconds (a run killed), and a run whose lease another took over (it
could not renew it so long) stops before it writes another checkpoint (the holds: :mod:`alexnet.storage.hold`, in the
words of :mod:`.folder_hold`).

The checkpoints there are those TensorFlow's index names, or, when it is missing or cannot be read, every checkpoint
whose files are there, the latest epoch and step each was written at first.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import posixpath
import re
import shutil
import time
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

from ..errors import AlexnetError
from ..scratch import make_scratch
from ..storage import lease
from ..storage.location import fs_path, location_kind, open_filesystem
from ..storage.transfer import disk_full, retry
from ..tfimport import tf
from .folder_hold import RUN, abort_left_uploads
from .formats import RUN_LOCK, RUN_LOCK_PATIENCE, listed_checkpoints

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: TensorFlow's index of the checkpoints in a folder.
INDEX_FILE = "checkpoint"
#: Checkpoints kept.
KEEP = 2
#: Attempts after the first of each upload of a checkpoint's file to a bucket (and of each deletion of an older one):
#: 0.5 to 30 s apart, enough for :data:`UPLOAD_PATIENCE` (see :func:`upload_retry`).
UPLOAD_RETRIES = 10
#: Seconds a bucket that does not answer at all is tried for by the uploads of checkpoints, before the run ends
#: (it resumes when run again).
UPLOAD_PATIENCE = 120.0
#: The name TensorFlow writes a checkpoint under before it is whole (``ckpt-9_temp``), left behind when the writing
#: failed or its process was killed.
_UNFINISHED = re.compile(r"^ckpt-\d+_temp$")
#: What a file :meth:`CheckpointFiles.write_whole` writes is called until it is whole (its name, then this).
_BEGUN = ".tmp"
#: The keys of the epoch and step a checkpoint was written at.
POSITION_KEYS = ("epoch/.ATTRIBUTES/VARIABLE_VALUE", "step/.ATTRIBUTES/VARIABLE_VALUE")


def upload_retry(what: str, fn: Callable[[], T]) -> T:
    """``fn()``, a write to the bucket of the checkpoints, retried through an outage of a minute or so
    (:data:`UPLOAD_RETRIES`, :data:`UPLOAD_PATIENCE`): a run of days is not to end on a bucket's short outage."""
    return retry(what, fn, UPLOAD_RETRIES, patience=UPLOAD_PATIENCE)


def upload_order(entries: list[str]) -> list[str]:
    """The files of one checkpoint in the order they are uploaded: its data files first, its ``.index`` last, so
    that a checkpoint with an index in the bucket has its data there too (one killed while uploading is not taken
    for a whole one, damaged)."""
    return sorted(entries, key=lambda entry: (entry.endswith(".index"), entry))


class CheckpointFiles:
    """The checkpoints' files at ``location`` (a resolved location string), seen from one worker (the ``chief``
    writes to the storage): ``local`` is the folder TensorFlow writes them in, the storage itself or a scratch
    folder."""

    #: The files :meth:`write_whole` writes beside the checkpoints (whose ``NAME.tmp`` a killed run may leave).
    whole_files: tuple[str, ...] = ()

    def __init__(self, location: str, *, chief: bool):
        self.location = location
        self.chief = chief
        self.remote = location_kind(location) != "file"
        self.fs = open_filesystem(location, write=chief)
        self.root = fs_path(location)
        self._scratch: list[str] = []
        #: On a bucket, the checkpoints there that the next upload keeps beside its own, newest first: the one a run
        #: resumed from and those before it (TensorFlow's manager, over a scratch folder, knows none of them).
        self._kept: list[str] = []
        self._release: Callable[[], None] = lambda: None
        self._lease: lease.Lease | None = None
        if chief and not self.remote:
            os.makedirs(location, exist_ok=True)
            self._release = RUN.hold_folder(location, os.path.join(location, RUN_LOCK), RUN_LOCK_PATIENCE, remove=True)
            self.local = location  # TensorFlow writes in place
        else:
            if chief:
                self._lease = RUN.hold_bucket(self.fs, self._remote(RUN_LOCK), location, RUN_LOCK_PATIENCE,
                                              where=posixpath.join(location, RUN_LOCK))
                self._release = self._lease.release
                if location_kind(location) == "s3" and self._lease.taken_over is not None:
                    abort_left_uploads(self.fs, location)  # the killed run's: none is another's under way
            try:
                self.local = self._new_scratch()
            except BaseException:
                self.let_go()
                raise

    def _new_scratch(self) -> str:
        folder = make_scratch("alexnet-checkpoint-")
        self._scratch.append(folder)
        return folder

    def _remote(self, name: str) -> str:
        return posixpath.join(self.root, name)

    def _candidates(self) -> tuple[list[str], str | None]:
        """The checkpoints to resume from, newest first, by name (``ckpt-N``): those TensorFlow's index names, or,
        when the index is missing or cannot be read, every checkpoint whose files are there, by number; with why the
        index was passed over (None: it was read)."""
        listed, numbers = listed_checkpoints(self.fs, self.root)
        found = sorted(numbers, key=numbers.__getitem__, reverse=True)
        if not found:
            return [], None
        if INDEX_FILE not in listed:
            return found, f"its index file {INDEX_FILE} is missing"
        try:
            index = self.fs.cat_file(self._remote(INDEX_FILE)).decode("utf-8", errors="replace")
        except OSError as error:
            return found, f"its index file {INDEX_FILE} cannot be read ({error})"
        # the index names checkpoints by the path they were written at (for a bucket, a scratch folder of a run)
        def name(path: str) -> str:
            return posixpath.basename(path.replace("\\", "/"))

        latest = re.search(r'^model_checkpoint_path:\s*"(.+)"\s*$', index, re.MULTILINE)
        if latest is None:
            return found, f"its index file {INDEX_FILE} cannot be read"
        newest = name(latest.group(1))
        if newest not in numbers:
            return found, f"its index file {INDEX_FILE} names {newest}, whose files are not there"
        kept = [name(p) for p in re.findall(r'^all_model_checkpoint_paths:\s*"(.+)"\s*$', index, re.MULTILINE)]
        return [newest, *(n for n in reversed(kept) if n != newest and n in numbers)], None

    def _fetch(self, name: str) -> str:
        """The checkpoint ``name`` as a local path prefix TensorFlow can read (downloaded first from a bucket)."""
        if not self.remote:
            return os.path.join(self.location, name)
        folder = self._new_scratch()
        for remote in self.fs.ls(self.root, detail=False):
            if posixpath.basename(remote).startswith(name + "."):
                self.fs.get_file(remote, os.path.join(folder, posixpath.basename(remote)))
        return os.path.join(folder, name)

    def _by_position(self, names: list[str]) -> list[str]:
        """``names`` (checkpoints found without their index), the latest epoch and step each was written at first:
        a checkpoint's number counts steps of its run's epochs, which a run resumed at another global batch
        changes. A checkpoint whose position cannot be read comes last, by number."""
        def position(name: str) -> tuple[int, int, int]:
            try:
                reader = tf.train.load_checkpoint(self._fetch(name))
                return (1, *(int(reader.get_tensor(key)) for key in POSITION_KEYS))  # type: ignore[return-value]
            except (IndexError, OSError, ValueError, tf.errors.OpError):
                return (0, 0, 0)

        return sorted(names, key=position, reverse=True)  # stable: by number where positions are equal

    def _publish(self, manager: tf.train.CheckpointManager) -> None:
        """Upload the checkpoint ``manager`` wrote last to the bucket (data files, then index), then an index of the
        :data:`KEEP` newest there, and delete the older ones."""
        latest = manager.latest_checkpoint
        if latest is None:
            raise AlexnetError(f"Internal error: no checkpoint was written in {self.local} to upload.")
        name = os.path.basename(latest)
        self._still_held()

        def put(entry: str) -> None:
            upload_retry(f"uploading {entry} of the checkpoints to {self.location}",
                         lambda: self._held_then(self.fs.put_file, os.path.join(self.local, entry),
                                                 self._remote(entry)))

        entries = upload_order([e for e in os.listdir(self.local) if e.startswith(name + ".")])
        # files of an earlier checkpoint of the same number (one cut short, or damaged) that this one does not write
        try:
            listed = upload_retry(f"listing the checkpoints of {self.location}",
                                  lambda: self.fs.ls(self.root, detail=False))
        except FileNotFoundError:  # the first checkpoint of a new folder
            listed = []
        self._delete([r for r in listed if posixpath.basename(r).startswith(name + ".")
                      and posixpath.basename(r) not in entries])
        for entry in entries:
            put(entry)
        kept = [name, *(n for n in self._kept if n != name)][:KEEP]
        index = "".join([f'model_checkpoint_path: "{name}"\n',
                         *(f'all_model_checkpoint_paths: "{n}"\n' for n in reversed(kept)),
                         f"all_model_checkpoint_timestamps: {time.time()}\n"])
        upload_retry(f"uploading {INDEX_FILE} of the checkpoints to {self.location}",
                     lambda: self._held_then(self.fs.pipe_file, self._remote(INDEX_FILE), index.encode()))
        self._kept = kept
        self._delete([r for r in listed if posixpath.basename(r).startswith("ckpt-")
                      and posixpath.basename(r).split(".", 1)[0] not in kept])

    def _held_then(self, write: Callable[..., T], *args: Any) -> T:
        """``write(*args)``, a write to the bucket, once :meth:`_still_held` finds the folder still this run's."""
        self._still_held()
        return write(*args)

    def taken_by(self) -> str | None:
        """Who took the bucket's lease of this run over (:mod:`alexnet.storage.lease`), as found so far; else None."""
        return self._lease.lost() if self._lease is not None else None

    def _still_held(self) -> None:
        """Raise when another run took over the bucket's lease of this run (:meth:`alexnet.storage.lease.Lease.held`,
        which reads it again when its last renewal is not recent enough): writing more would write over that run's
        checkpoints. Asked before every write to the bucket, also each attempt of one tried again."""
        self.raise_if_taken(self._lease.held() if self._lease is not None else None)

    def raise_if_taken(self, taker: str | None = None) -> None:
        """Raise when another run took over the bucket's lease of this run, as found so far (``taker``: as
        :meth:`_still_held` found it): a run stops at once rather than train on for an epoch it cannot keep."""
        taker = taker if taker is not None else self.taken_by()
        if taker is not None:
            raise AlexnetError(
                f"Another training run ({taker}) took over the checkpoints in {self.location}: this run could not "
                f"renew its hold on them for {lease.STALE:.0f} s (the bucket out of reach, or its process "
                "suspended), and stops here rather than write over that run's checkpoints. Give this run another "
                "`checkpoint_dir`, or run it again once the other has ended to resume from the last checkpoint.")

    def _delete(self, remotes: list[str]) -> None:
        """Delete the files ``remotes`` of older checkpoints from the bucket: one already gone is not missed, and one
        that cannot be deleted stays there, said in a warning (the checkpoint just uploaded is whole)."""
        for remote in remotes:
            base = posixpath.basename(remote)
            try:
                upload_retry(f"deleting {base} of the checkpoints in {self.location}",
                             functools.partial(self._held_then, self.fs.rm_file, remote))
            except FileNotFoundError:  # deleted by an attempt whose answer was lost
                pass
            except Exception as error:
                logger.warning("Cannot delete %s of the older checkpoints in %s (%s): it stays there.", base,
                               self.location, error)

    def remove_unfinished(self) -> list[str]:
        """Delete the checkpoints TensorFlow began to write in this worker's folder and never finished (their
        ``ckpt-N_temp`` folders), and the files :meth:`write_whole` began to write beside them (``NAME.tmp``: the best
        epoch's weights of a full-size AlexNet, 240 MB, were left by a run killed while writing them); their names."""
        removed = [entry for entry in os.listdir(self.local)
                   if _UNFINISHED.match(entry) and os.path.isdir(os.path.join(self.local, entry))]
        for entry in removed:
            shutil.rmtree(os.path.join(self.local, entry), ignore_errors=True)
        if self.chief and not self.remote:  # the folder of the run that holds its lock, the chief's
            begun = [name + _BEGUN for name in self.whole_files
                     if os.path.isfile(os.path.join(self.location, name + _BEGUN))]
            for entry in begun:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(self.location, entry))
            removed += begun
        return removed

    def write_whole(self, name: str, data: bytes | Callable[[BinaryIO], None]) -> None:
        """Write the file ``name`` beside the checkpoints so that it is there whole or not at all: an object of a
        bucket appears so; in a folder, a file written beside it (``NAME.tmp``) replaces it. ``data``: its bytes, or
        what writes them to a file (in a folder straight to the file, with no copy of them in memory)."""
        if self.remote:
            self._still_held()
            if callable(data):
                buffer = io.BytesIO()
                data(buffer)
                data = buffer.getvalue()
            whole = data
            upload_retry(f"writing {name} to {self.location}",
                         lambda: self._held_then(self.fs.pipe_file, self._remote(name), whole))
            return
        temporary = os.path.join(self.location, name + _BEGUN)
        with open(temporary, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
        os.replace(temporary, os.path.join(self.location, name))

    def unsaved(self, latest: str | None, epoch: int, step: int, error: BaseException) -> str:
        """What to say when the checkpoint at ``epoch`` and ``step`` could not be written (``latest``: the path of
        the last one written, None: none); with how much room a checkpoint takes when a disk is full."""
        where = f"after epoch {epoch}" if step == 0 else f"at step {step} of epoch {epoch + 1}"
        # TensorFlow's messages begin with the function that raised them: left out
        text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", str(getattr(error, "message", None) or error))
        lines = text.strip().splitlines()
        said = f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__
        room = ""
        if disk_full(error) or "No space left" in text:
            try:
                free = f"{shutil.disk_usage(self.local).free / 1e6:,.0f} MB are free in {self.local}"
            except OSError:
                free = f"{self.local} is full"
            room = (f"; {free}, and a checkpoint of this model takes {_size_of(latest)}, {KEEP + 1} of them while "
                    "one is written: make room there or give another `checkpoint_dir`")
        return (f"The checkpoint {where} could not be written to {self.location} ({said}){room}. Running the same "
                "command again resumes from the last checkpoint written.")

    def close(self, *, hold: bool = False) -> None:
        """Delete this worker's scratch folders; let go of the folder's lock or lease, unless ``hold`` (the run lets
        go of it with :meth:`let_go` once the model it saves there is whole)."""
        for folder in self._scratch:
            shutil.rmtree(folder, ignore_errors=True)
        self._scratch.clear()
        if not hold:
            self.let_go()

    def let_go(self) -> None:
        """Let go of the folder's lock or lease (once; a no-op after)."""
        release, self._release = self._release, lambda: None
        release()


def _size_of(latest: str | None) -> str:
    """The bytes of the checkpoint at path prefix ``latest``, said."""
    if latest is None:
        return "an unknown size"
    folder, name = os.path.split(latest)
    try:
        size = sum(os.path.getsize(os.path.join(folder, entry)) for entry in os.listdir(folder)
                   if entry.startswith(name + "."))
    except OSError:
        return "an unknown size"
    return f"{size / 1e6:,.0f} MB"
