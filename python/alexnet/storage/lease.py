"""A hold on a folder of a bucket (``gs://``, ``s3://``), which takes no file locks: the lease of :func:`hold_lease`.

The holder writes a small object, its *lease*, naming it (a note such as "the run of process 123 on node7") with a
token of its own and a count it raises every :data:`BEAT` seconds from a thread. A second holder finds the lease
renewed and waits; one whose count has not moved for :data:`STALE` seconds of the waiter's own clock (its holder
was killed, or lost the bucket) is taken over, so that no clocks of two machines are compared. The lease is made
only where none is (an exclusive create: S3's ``If-None-Match``, GCS's ``ifGenerationMatch=0``) and read back
after :data:`SETTLE` seconds, so that of two holders taking it at once one goes on, also where the storage does not
refuse the second write (a local emulator).

A lease also names its holder's process (:func:`_process`: the host, the process id and its namespace): a waiter
on the same host and namespace whose holder's process is gone (killed, and started again by hand)
takes the lease over at once rather than after :data:`STALE` seconds.

A holder fences itself: before each write of its work it asks :meth:`Lease.held`, which trusts its last renewal for
:data:`STALE` less one :data:`BEAT` seconds (a waiter takes the lease over only once it has stayed as it is for
:data:`STALE` seconds since it saw it), and past that reads the lease again and renews it, or finds it taken over by
another holder (it could not renew it so long: the bucket out of reach, its process suspended): then its work stops
before writing more.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..scratch import owned_here, pid_namespace, process_alive
from .locking import Busy

logger = logging.getLogger(__name__)

#: Seconds between two renewals of a lease by its holder.
BEAT = 10.0
#: Seconds a lease may stay as it is before a waiter takes it for its holder's, gone.
STALE = 30.0
#: Seconds between two looks of a waiter at a lease.
POLL = 2.0
#: Seconds a lease just written is left before it is read back, to find whether another holder wrote it meanwhile.
SETTLE = 1.0


def _read(fs: Any, path: str) -> dict[str, Any] | None:
    """The lease at ``path``: None when there is none; an empty dict when what is there is no lease this module
    wrote whole (a holder killed while writing it, or another file), which no holder renews."""
    try:
        found = json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return found if isinstance(found, dict) and "token" in found else {}


def _process() -> dict[str, Any]:
    """This process as a lease names it: its host, id and pid namespace (:func:`alexnet.scratch.pid_namespace`), as
    a scratch folder's owner file does."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_namespace": pid_namespace()}


def _gone(found: dict[str, Any] | None) -> bool:
    """Is the process that holds ``found`` one this process can see (:func:`alexnet.scratch.owned_here`), and
    ended? (Not known: it is not.)"""
    holder = (found or {}).get("process")
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int) or isinstance(holder["pid"], bool):
        return False
    made_by = (str(holder.get("host")), holder["pid"], str(holder.get("pid_namespace") or ""))
    return owned_here(made_by) and not process_alive(made_by[1])


class Lease:
    """A lease held at ``path`` of the file system ``fs`` (see the module): renewed from a thread until
    :meth:`release`. ``taken_over``: the note of the holder whose lease this one took over (its holder killed),
    None when it was free."""

    def __init__(self, fs: Any, path: str, note: str, where: str | None = None):
        self.fs, self.path, self.note = fs, path, note
        self.where = where or path  # the lease as its messages name it: the location given (gs://..., s3://...)
        self.token = uuid.uuid4().hex
        self._process = _process()
        self.taken_over: str | None = None
        self._beat = 0
        self._renewed = time.monotonic()  # when the last write of the lease that was answered was sent
        self._lost: str | None = None
        self._lock = threading.Lock()  # one renewal at a time: the thread's, or held()'s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self, *, create: bool) -> None:
        sent = time.monotonic()
        data = json.dumps({"token": self.token, "beat": self._beat, "note": self.note,
                           "process": self._process}).encode()
        if create:
            self.fs.pipe_file(self.path, data, mode="create")
        else:
            self.fs.pipe_file(self.path, data)
        self._renewed = sent

    def _mine(self, found: dict[str, Any] | None) -> bool:
        return found is not None and found.get("token") == self.token

    def _renew_now(self) -> None:
        """Read the lease and renew it, or find it lost (:attr:`_lost`): another holder's, or gone once this holder's
        last renewal is too old to be sure no other holder took it and let it go meanwhile; the storage's errors
        raised."""
        with self._lock:
            if self._lost is not None:
                return
            found = _read(self.fs, self.path)
            if found is not None and not self._mine(found):
                self._lost = str(found.get("note") or "another holder")
            elif found is None and time.monotonic() - self._renewed >= STALE - BEAT:
                self._lost = "one that has ended since: the folder's lease is gone"
            if self._lost is not None:
                logger.warning("The hold on %s was taken over by %s.", self.where, self._lost)
                return
            self._beat += 1
            self._write(create=found is None)  # deleted a moment ago (by hand): made again, unless another did

    def _renew(self) -> None:
        while not self._stop.wait(BEAT):
            try:
                self._renew_now()
            except Exception as error:  # the bucket out of reach, or the lease made again by another: next beat
                logger.debug("Cannot renew %s (%s); trying again in %.0f s.", self.path, error, BEAT)
            if self._lost is not None:
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self._renew, name="alexnet-lease", daemon=True)
        self._thread.start()

    def lost(self) -> str | None:
        """Who took the lease over (its note), as found so far; else None."""
        return self._lost

    def held(self) -> str | None:
        """Whether this holder may still write its work: None when it holds the lease, else who took it over. A
        renewal sent less than :data:`STALE` less :data:`BEAT` seconds ago is trusted (no waiter can have taken the
        lease over since); past that, the lease is read again and renewed first (the storage's errors raised)."""
        if self._lost is None and time.monotonic() - self._renewed >= STALE - BEAT:
            self._renew_now()
        return self._lost

    def release(self) -> None:
        """Stop renewing the lease, and delete it when it is still this holder's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=BEAT + 5)
        with self._lock, contextlib.suppress(Exception):  # a renewal under way ends first
            if self._lost is None and self._mine(_read(self.fs, self.path)):
                self.fs.rm_file(self.path)
                self._lost = "nobody: it was let go"  # a renewal still under way writes it no more


def hold_lease(fs: Any, path: str, *, note: str, patience: float, waiting: Callable[[str], None] | None = None,
               took_over: Callable[[str, bool], None] | None = None, where: str | None = None) -> Lease:
    """Take the lease at ``path`` of the file system ``fs`` (see the module), writing ``note`` in it, and keep it
    renewed until its :meth:`Lease.release`. A lease another holder renews is waited for, up to ``patience`` seconds
    (``waiting`` is called first with that holder's note), then :class:`~alexnet.storage.locking.Busy` is raised with
    it; one left as it is for :data:`STALE` seconds, or whose holder's process has ended on this host (:func:`_gone`),
is taken over (``took_over`` is called with its note, and whether that process was seen ended). ``where``:
    the lease as messages name it (its location), ``path`` by default."""
    lease = Lease(fs, path, note, where)
    deadline = time.monotonic() + patience
    seen: dict[str, Any] | None = None
    unchanged_since = time.monotonic()
    taking: dict[str, Any] | None = None  # the lease left as it is that this holder takes over
    ended = False  # ... its holder's process seen ended
    said = False
    while True:
        found = _read(fs, path)
        now = time.monotonic()
        write: bool | None = None  # None: wait; False: take over; True: make it
        if lease._mine(found):  # its own: written by an attempt whose answer was lost
            write = False
        elif found is None:
            write = True
        elif found and _gone(found):  # its holder's process ended here: nothing will renew it
            write, taking, ended = False, found, True
        elif found != seen:  # another holder's, renewed (or new): waited for from now
            seen, unchanged_since, taking = found, now, None
        elif now - unchanged_since >= STALE:
            write, taking = False, found
        if write is not None:
            if not _taken(lease, write):
                if time.monotonic() >= deadline:
                    raise Busy(path, str((_read(fs, path) or {}).get("note") or ""))
                continue
            if taking is not None:
                lease.taken_over = str(taking.get("note") or "another holder")
                if took_over is not None:
                    took_over(lease.taken_over, ended)
            lease.start()
            return lease
        holder = str((found or {}).get("note") or "")
        if now >= deadline:
            raise Busy(path, holder)
        if not said and waiting is not None:
            waiting(holder)
            said = True
        time.sleep(min(POLL, max(0.0, deadline - now)))


def _taken(lease: Lease, create: bool) -> bool:
    """Write ``lease`` (made where none is, with ``create``) and read it back after :data:`SETTLE` seconds: whether it
    is this holder's. A write refused (made by another holder since it was read; S3's conflict of two at once) is
    not; one cut short (Ctrl-C, an error of the storage) is deleted when it is this holder's, and raised."""
    try:
        lease._write(create=create)
    except OSError as error:  # FileExistsError, or S3's 409 ConditionalRequestConflict as an OSError
        logger.debug("Cannot write %s (%s); looking again.", lease.path, error)
        time.sleep(POLL)
        return False
    try:
        time.sleep(SETTLE)
        return lease._mine(_read(lease.fs, lease.path))
    except BaseException:
        with contextlib.suppress(Exception):
            if lease._mine(_read(lease.fs, lease.path)):
                lease.fs.rm_file(lease.path)
        raise
