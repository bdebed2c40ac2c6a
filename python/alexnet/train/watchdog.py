"""``collective_timeout`` kept by one thread of the worker, not by TensorFlow's collectives.

Given a timeout (``CommunicationOptions(timeout_seconds=...)``), TensorFlow starts, for every collective operation, a
thread that sleeps for the whole timeout before it checks whether the operation ended (``SchedClosureAfter``): a
training step of AlexNet runs about 16 collectives, so under a timeout of 1800 s a worker held some 16 x 1800 sleeping
threads per step a second, enough to exhaust a machine's processes (thousands per worker on two CPUs; on GPUs,
hundreds of thousands). The strategy of ``"multi_worker"`` is therefore built without one, and this module keeps the
bound instead: the run watches each step, validation step, average and agreement of the workers (:func:`watching`),
and one thread (:class:`Watchdog`) aborts the workers' collectives when one has waited longer than the timeout,
which fails the operation with ``DeadlineExceededError`` as TensorFlow's own timeout did
(:func:`alexnet.train.lost.lost_worker` says it). A dead or paused worker is declared lost sooner by the coordination
service's heartbeats; the watchdog is for a worker that is alive but does not come (a hung read, a deadlock).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..tfimport import keras
from .cluster import TRACE_GRACE

logger = logging.getLogger(__name__)



def _abort_collectives(message: str) -> None:
    """Fail this process's collective operations, those waiting and any later one, with ``message``."""
    from tensorflow.python.eager import context  # imported already, by the run (through alexnet.tfimport)

    from ..tfimport import tf

    context.context().abort_collective_ops(tf.errors.DEADLINE_EXCEEDED, message)


class Watchdog:
    """One thread that aborts this process's collective operations (``abort``) once the operation watched has taken
    longer than ``timeout`` seconds (plus its grace), looking every ``poll`` seconds."""

    def __init__(self, timeout: float, abort: Callable[[str], None] = _abort_collectives, poll: float | None = None):
        self.timeout, self.abort = float(timeout), abort
        self.poll = poll if poll is not None else min(1.0, self.timeout / 10)
        self._lock = threading.Lock()
        self._watched: tuple[str, float, str] | None = None  # what, when it is late, and the seconds it had, said
        self.fired: str | None = None
        #: seconds of a training step's own computation, allowed besides ``timeout`` (the run measures them)
        self.step_seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="alexnet-collective-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            with self._lock:
                watched = self._watched
                late = watched is not None and time.monotonic() > watched[1]
                if late:
                    self._watched = None
            if late and watched is not None and self.fired is None:
                self.fired = f"{watched[0]} waited {watched[2]}"
                logger.error("%s: stopping this worker's collective operations.", self.fired)
                self.abort(self.fired)

    def start(self, what: str, grace: float = 0.0, own: float = 0.0) -> None:
        """Watch ``what``, which may take ``timeout`` + ``grace`` (a first run) + ``own`` (its own computation)
        seconds from now."""
        allowed = self.timeout + grace + own
        said = (f"more than {allowed:g} s for the other workers (`collective_timeout` = {self.timeout:g} s"
                + (f", and {grace:g} s for its first run" if grace else "")
                + (f", and {own:.3g} s for its own computation" if own else "") + ")")
        with self._lock:
            self._watched = (what, time.monotonic() + allowed, said)

    def stop(self) -> None:
        """What was watched has ended."""
        with self._lock:
            self._watched = None

    @contextlib.contextmanager
    def watching(self, what: str, grace: float = 0.0) -> Iterator[None]:
        self.start(what, grace)
        try:
            yield
        finally:
            self.stop()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


#: The watchdog of the run in progress in this process (None: nothing is watched).
_active: Watchdog | None = None


@contextlib.contextmanager
def watched_run(timeout: float | None, workers: int) -> Iterator[Watchdog | None]:
    """A :class:`Watchdog` for a run of ``workers`` workers under ``timeout`` (none for one worker, or no timeout),
    made the one :func:`watching` uses until the run ends."""
    global _active
    if timeout is None or workers < 2:
        yield None
        return
    dog = Watchdog(timeout)
    previous, _active = _active, dog
    try:
        yield dog
    finally:
        _active = previous
        dog.close()


@contextlib.contextmanager
def watching(what: str, grace: float = 0.0) -> Iterator[None]:
    """Watch ``what`` (a collective operation of every worker) with the run's watchdog, if it has one."""
    dog = _active
    if dog is None:
        yield
        return
    with dog.watching(what, grace):
        yield


class WatchedSteps(keras.callbacks.Callback):
    """Watches each training step, from its start to its end (Keras brings its results to the callbacks' end of the
    step, so that the step has ended there), allowing the step's own computation (the watchdog's ``step_seconds``,
    twice what the run measured: micro-batches of a slow machine may take minutes); an epoch's first step has
    :data:`TRACE_GRACE` more. First among the
    callbacks, so that the others' own work at a step's end (a checkpoint written every few steps; a local SGD
    average is watched on its own) is not counted as waiting for the other workers."""

    def __init__(self, dog: Watchdog):
        super().__init__()
        self.dog = dog

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.dog.start("a training step", TRACE_GRACE if batch == 0 else 0.0, self.dog.step_seconds)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.dog.stop()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.dog.stop()


__all__ = ["TRACE_GRACE", "Watchdog", "WatchedSteps", "watched_run", "watching"]
