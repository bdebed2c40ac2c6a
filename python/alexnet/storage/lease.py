"""A hold on a folder of a bucket (``gs://``, ``s3://``), which takes no file locks: the lease of :func:`hold_lease`.

The holder writes a small object, its *lease*, naming it (a note such as "the run of process 123 on node7") with a
token of its own and a count it raises every :data:`BEAT` seconds from a thread. A second holder finds the lease
renewed and waits; one whose count has not moved for :data:`STALE` seconds of the waiter's own clock (its holder
was killed, or lost the bucket) is taken over, so that no clocks of two machines are compared. The lease is made
only where none is (an exclusive create: S3's ``If-None-Match``, GCS's ``ifGenerationMatch=0``) and read back
after :data:`SETTLE` seconds, so that of two holders taking it at once one goes on, also where the storage does not
refuse the second write (a local emulator). A holder that finds another's token in its lease (it could not renew it
for :data:`STALE` seconds and was taken over) has lost it: :meth:`Lease.lost` says to whom, and its work stops before
writing more.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

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


class Lease:
    """A lease held at ``path`` of the file system ``fs`` (see the module): renewed from a thread until
    :meth:`release`."""

    def __init__(self, fs: Any, path: str, note: str):
        self.fs, self.path, self.note = fs, path, note
        self.token = uuid.uuid4().hex
        self._beat = 0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self, *, create: bool) -> None:
        data = json.dumps({"token": self.token, "beat": self._beat, "note": self.note}).encode()
        if create:
            self.fs.pipe_file(self.path, data, mode="create")
        else:
            self.fs.pipe_file(self.path, data)

    def _renew(self) -> None:
        while not self._stop.wait(BEAT):
            try:
                found = _read(self.fs, self.path)
                if found is not None and found.get("token") != self.token:
                    self._lost = str(found.get("note") or "another holder")
                    logger.warning("The hold on %s was taken over by %s.", self.path, self._lost)
                    return
                self._beat += 1
                self._write(create=found is None)  # deleted meanwhile: made again, unless another holder did
            except Exception as error:  # the bucket unreachable, or the lease made again by another: next beat
                logger.debug("Cannot renew %s (%s); trying again in %.0f s.", self.path, error, BEAT)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._renew, name="alexnet-lease", daemon=True)
        self._thread.start()

    def lost(self) -> str | None:
        """Who took the lease over (its note), when another holder did; else None."""
        return self._lost

    def release(self) -> None:
        """Stop renewing the lease, and delete it when it is still this holder's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=BEAT + 5)
        with contextlib.suppress(Exception):
            if self._lost is None and (_read(self.fs, self.path) or {}).get("token") == self.token:
                self.fs.rm_file(self.path)


def hold_lease(fs: Any, path: str, *, note: str, patience: float, waiting: Callable[[str], None] | None = None,
               took_over: Callable[[str], None] | None = None) -> Lease:
    """Take the lease at ``path`` of the file system ``fs`` (see the module), writing ``note`` in it, and keep it
    renewed until its :meth:`Lease.release`. A lease another holder renews is waited for, up to ``patience`` seconds
    (``waiting`` is called first with that holder's note), then :class:`~alexnet.storage.locking.Busy` is raised with
    it; one left as it is for :data:`STALE` seconds is taken over (``took_over`` is called with its note)."""
    lease = Lease(fs, path, note)
    deadline = time.monotonic() + patience
    seen: dict[str, Any] | None = None
    unchanged_since = time.monotonic()
    said = False
    while True:
        found = _read(fs, path)
        now = time.monotonic()
        write: bool | None = None  # None: wait; False: take over; True: make it
        if found is None:
            write = True
        elif found != seen:
            seen, unchanged_since = found, now
        elif now - unchanged_since >= STALE:
            write = False
        if write is not None:
            try:
                lease._write(create=write)
            except FileExistsError:  # made by another holder since it was read
                continue
            time.sleep(SETTLE)
            if (_read(fs, path) or {}).get("token") == lease.token:
                if write is False and took_over is not None and seen is not None:
                    took_over(str(seen.get("note") or "another holder"))
                lease.start()
                return lease
            seen, unchanged_since = None, time.monotonic()  # another holder wrote after it: its lease from now
            continue
        holder = str((found or {}).get("note") or "")
        if now >= deadline:
            raise Busy(path, holder)
        if not said and waiting is not None:
            waiting(holder)
            said = True
        time.sleep(min(POLL, max(0.0, deadline - now)))
