"""Downloads that wait for a byte, said: a board that keeps its connections open without answering is given up on only
after minutes (each request waits for its silent socket, then is tried again), and a bar standing still says nothing
meanwhile. :class:`Stalls` says it after :data:`STALL_SAID` seconds without a byte, and says when bytes come again."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from ..checks import count_text
from .reach import SILENT_TIMEOUT

log = logging.getLogger(__name__)

#: Seconds without a byte from the board, while downloads are under way, before a fetch says that it waits for one.
STALL_SAID = 30.0


class Stalls:
    """Says when the downloads under way have had no byte from the board for :data:`STALL_SAID` seconds (a board
    that keeps its connections open without answering is given up on only after minutes: each request waits for its
    silent socket, then is tried again), and when bytes come again. Time spent waiting for another process's
    category is no download."""

    def __init__(self, desc: str, location: str):
        self.desc, self.location = desc, location
        self.lock = threading.Lock()
        self.active, self.last, self.said = 0, time.monotonic(), 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="alexnet-fetch-stalls", daemon=True)
        self.thread.start()

    def moved(self) -> None:
        """Bytes came from the board."""
        with self.lock:
            now, said = time.monotonic(), self.said
            gap, self.last, self.said = now - self.last, now, 0.0
        if said:
            log.info("%s: bytes come from %s again, after %.0f s without any", self.desc, self.location, gap)

    @contextlib.contextmanager
    def downloading(self) -> Iterator[None]:
        """A download under way while in the block."""
        with self.lock:
            if not self.active:
                self.last = time.monotonic()
            self.active += 1
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1

    def _watch(self) -> None:
        while not self.stop.wait(min(1.0, STALL_SAID / 4)):
            with self.lock:
                stalled = self.active and not self.said and time.monotonic() - self.last >= STALL_SAID
                if stalled:
                    self.said, active = time.monotonic(), self.active
            if stalled:
                log.warning("%s: no byte has come from %s for %.0f s (%s under way): it may have stopped answering; "
                            "each request waits up to %.0f s for a silent connection and is tried again, so giving up "
                            "on it can take a few minutes (Ctrl-C stops; the same fetch run again resumes)",
                            self.desc, self.location, STALL_SAID, count_text(active, "download"),
                            SILENT_TIMEOUT)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
