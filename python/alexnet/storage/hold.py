"""A location held by one writer at a time, so that two never write in it at once (an upload's board, a run's folder
of checkpoints): in a folder a file lock (:func:`alexnet.storage.locking.hold_lock`, let go by the system when its
process ends), on a bucket a lease (:mod:`alexnet.storage.lease`, taken over once a writer killed stops renewing it).
Either holds a note naming its writer, which another writer that finds it taken says in its warning, and in its error
when it gives up. What differs from one kind of writer to another is only its words: a :class:`Writer`."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import AlexnetError
from . import lease
from .locking import Busy, hold_lock

#: What the words say of a holder that wrote no note.
UNKNOWN = "its process unknown"


@dataclass(frozen=True)
class Writer:
    """A kind of writer that holds a location for itself, and what it says of another that holds it. Each saying is a
    %-template of ``location`` (the location held, as the writer names it), ``holder`` (the other writer's note, or
    :data:`UNKNOWN`), ``patience`` (the seconds this writer waits for it) and ``stale`` (the seconds a lease stays
    unrenewed before it is taken over: :data:`alexnet.storage.lease.STALE`); :attr:`took_over` also ``why`` (why the
    hold was taken for gone)."""

    #: What holds, in its note: "upload" makes "the upload of process 12 on host, begun 2025-01-02 03:04:05".
    kind: str
    #: The logger of its lines (each kind's own module's).
    logger: logging.Logger
    #: The error raised when another writer holds the location beyond the patience given.
    busy: str
    #: The warning that this writer waits for another's lease of a bucket's location.
    waiting_lease: str
    #: The line (info) that this writer took over a lease its holder stopped renewing.
    took_over: str
    #: The warning that this writer waits for another's lock of a folder (the holder unread); None: none said.
    waiting_lock: str | None = None

    def note(self) -> str:
        """What this writer's hold says of it to another that finds it taken."""
        return (f"the {self.kind} of process {os.getpid()} on {socket.gethostname()}, begun "
                f"{time.strftime('%Y-%m-%d %H:%M:%S')}")

    def hold_folder(self, location: str, lock: str, patience: float, *, remove: bool = False) -> Callable[[], None]:
        """Hold the lock file ``lock`` of the folder ``location`` for this writer (the file deleted as it is let go,
        with ``remove``); what lets go of it. Raises when another writer keeps it beyond ``patience`` seconds (0: at
        once)."""
        said = self.waiting_lock
        waiting = None if said is None else lambda: self.logger.warning(said, self._words(location, "", patience))
        try:
            return hold_lock(lock, patience=patience, note=self.note(), waiting=waiting, remove=remove)
        except Busy as busy:
            raise self._busy(location, busy.holder, patience) from None

    def hold_bucket(self, fs: Any, path: str, location: str, patience: float, *, where: str | None = None
                    ) -> lease.Lease:
        """Hold the lease ``path`` of the file system ``fs``, for the location ``location`` of a bucket, for this
        writer, as :meth:`hold_folder` holds a folder's lock (``where``: the lease as its own messages name it,
        ``location`` by default). Raises when another writer renews it beyond ``patience`` seconds."""
        try:
            return lease.hold_lease(
                fs, path, note=self.note(), patience=patience, where=where or location,
                waiting=lambda holder: self.logger.warning(self.waiting_lease, self._words(location, holder, patience)),
                took_over=lambda holder, ended: self.logger.info(
                    self.took_over, {**self._words(location, holder, patience),
                                     "why": "whose process has ended" if ended else
                                     f"which has not renewed its hold for {lease.STALE:.0f} s"}))
        except Busy as busy:
            raise self._busy(location, busy.holder, patience) from None

    def _words(self, location: str, holder: str, patience: float) -> dict[str, Any]:
        return {"location": location, "holder": holder or UNKNOWN, "patience": patience, "stale": lease.STALE}

    def _busy(self, location: str, holder: str, patience: float) -> AlexnetError:
        return AlexnetError(self.busy % self._words(location, holder, patience))
