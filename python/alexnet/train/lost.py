"""A multi-worker run that lost a worker, said in one error instead of TensorFlow's traceback.

When a worker of a multi-worker run dies (killed, its machine gone) or is declared lost by the workers' coordination
service (its heartbeats stopped: a worker paused, or a slow or saturated link that starved them), the collective
operations of the others fail with one of TensorFlow's errors (``UnavailableError``: "The following tasks are
unhealthy (stopped sending heartbeats)", "Connection reset by peer"; ``DeadlineExceededError`` once
``collective_timeout`` has passed), a hundred lines of graph traceback. :func:`lost_worker` reads such an error as
what happened, which worker when TensorFlow says, and what to do: :class:`WorkerLostError`, which keeps
TensorFlow's error as its cause.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import AlexnetError
from .communication import Communication, sixteen_bit_wire
from .strategy import HEARTBEAT_TIMEOUT, heartbeat_timeout

if TYPE_CHECKING:
    from .settings import TrainSettings
    from .strategy import Topology

#: The names of TensorFlow's error classes a collective fails with when a worker is gone or silent.
LOST_ERRORS = ("UnavailableError", "DeadlineExceededError", "AbortedError")

#: A task TensorFlow names in an error: ``/job:worker/replica:0/task:1`` or ``/job:worker/task:1``.
_TASK = re.compile(r"/job:(?P<job>\w+)(?:/replica:\d+)?/task:(?P<task>\d+)")
#: The tasks the coordination service declared unhealthy, listed after its sentence.
_UNHEALTHY = re.compile(r"unhealthy[^\n]*\n(?P<tasks>(?:\s*/job:\S+)+)")
#: What the run's watchdog says of what it stopped (:mod:`.watchdog`).
_WATCHDOG = re.compile(r"((?:a|an) [^\n]*? waited more than [\d.]+ s for the other workers \(`collective_timeout` = "
                       r"[^)]*\))")
#: The RPC of TensorFlow's error when a worker's heartbeat to the coordination service itself timed out: heartbeats,
#: although the error is a ``DeadlineExceededError`` as a collective's timeout is.
_HEARTBEAT_RPC = "CoordinationService/Heartbeat"
#: The peer gRPC reports an error from.
_REMOTE = re.compile(r"remote target (?P<target>/job:\w+(?:/replica:\d+)?/task:\d+)")


class WorkerLostError(AlexnetError):
    """A multi-worker run stopped because a worker stopped answering: ``worker`` is its index when TensorFlow named
    it (``None`` otherwise), ``kind`` what TensorFlow saw (``"heartbeats"``, ``"connection"`` or ``"timeout"``)."""

    while_running = True

    def __init__(self, message: str, worker: int | None, kind: str):
        super().__init__(message)
        self.worker, self.kind = worker, kind


def _named_task(text: str, own: int) -> tuple[str, int] | None:
    """The task other than this worker (``own``, of job ``worker``) that ``text`` blames: the first one declared
    unhealthy, else the peer gRPC reported the error from."""
    found = _UNHEALTHY.search(text)
    candidates = list(_TASK.finditer(found["tasks"])) if found else []
    candidates += [named for m in _REMOTE.finditer(text) if (named := _TASK.search(m["target"]))]
    for match in candidates:
        job, task = match["job"], int(match["task"])
        if (job, task) != ("worker", own):
            return job, task
    return None


def lost_worker(error: BaseException, *, worker: int, workers: int, collective_timeout: float | None,
                checkpoint_dir: str | None, communication: Communication | None = None) -> WorkerLostError | None:
    """The :class:`WorkerLostError` that TensorFlow's ``error``, raised in worker ``worker`` of a run of ``workers``
    that exchanged its gradients as ``communication`` says (unset: the defaults), stands for; ``None`` when it is not
    a lost worker's (another error, or a run of one worker)."""
    if not _stands_for_lost(error, workers):
        return None
    text = str(getattr(error, "message", None) or error)
    named = _named_task(text, worker)
    who = ("a worker" if named is None else "the chief" if named[0] == "chief"
           else f"worker {named[1]} of {workers}")
    heartbeat = heartbeat_timeout(collective_timeout)
    watched = _WATCHDOG.search(text)
    if type(error).__name__ == "DeadlineExceededError" and _HEARTBEAT_RPC not in text:
        kind = "timeout"
        what = (watched[1] if watched else  # the run's watchdog's words (alexnet.train.watchdog)
                f"a collective operation waited {collective_timeout:g} s (`collective_timeout`) for {who} and gave up"
                if collective_timeout else f"a collective operation gave up waiting for {who}")
    elif _HEARTBEAT_RPC in text:
        kind = "heartbeats"
        what = f"its heartbeats to the workers' coordination service went unanswered for {heartbeat:g} s"
    elif "heartbeat" in text or "unhealthy" in text:
        kind = "heartbeats"
        what = f"{who} stopped sending heartbeats and was declared lost"
    else:
        kind = "connection"
        reason = "its connection was reset" if "reset by peer" in text else "its connection failed"
        what = f"{who} stopped answering ({reason})"
    busy = (" A machine too busy to answer in time (other work on its CPUs) misses heartbeats too: give the workers "
            "their machines' CPUs." if kind == "heartbeats" else "")
    slow = _slow_link(collective_timeout, heartbeat, communication or Communication())
    message = (f"Worker {worker} of {workers} cannot go on: {what}, so the run stopped on every worker. "
               f"{slow}{busy} {_resume(checkpoint_dir)}")
    return WorkerLostError(message, None if named is None or named[0] == "chief" else named[1], kind)


def _slow_link(collective_timeout: float | None, heartbeat: float, communication: Communication) -> str:
    """What to give when the worker was alive but its link too slow or too full: heartbeats are waited for
    ``heartbeat`` seconds (a minute, or ``collective_timeout`` if less), collectives ``collective_timeout``; of the
    settings that send less at each step, those ``communication`` (the run's) does not take yet: 16 bits on the wire
    named as the run's devices sum them (``communication.sixteen_bit``)."""
    said = (f"If that worker was still running, a slow or saturated link may have starved its heartbeats (a worker "
            f"is declared lost after {heartbeat:g} s without one: a minute, or `collective_timeout` if less) or "
            "held up a collective")
    if collective_timeout is not None and collective_timeout < HEARTBEAT_TIMEOUT:
        return (f"{said}: give `collective_timeout` = {HEARTBEAT_TIMEOUT:g} or more (seconds; "
                f"{collective_timeout:g} now), which lets the heartbeats wait a minute.")
    larger = (f"{said}: give a larger `collective_timeout` (seconds; "
              f"{'unset' if collective_timeout is None else f'{collective_timeout:g}'} now) for slow collectives")
    sixteen = f"`allreduce_precision` = '{communication.sixteen_bit}'"
    less = [name for name, taken in ((sixteen, communication.wire != "float32"),
                                     ("`accumulate_steps`", communication.accumulate > 1),
                                     ("`sync_every`", communication.sync_every > 1)) if not taken]
    if not less:
        return (f"{larger}; the settings that send less at each step are all taken already: a faster link, or fewer "
                "workers, is what is left for the heartbeats.")
    return f"{larger}, and send less at each step for the heartbeats ({', '.join(less)})."


def _resume(checkpoint_dir: str | None) -> str:
    """How to go on from where the run stopped."""
    if checkpoint_dir:
        return (f"Run the same training again on every worker, with `checkpoint_dir` = '{checkpoint_dir}': it resumes "
                "from the last checkpoint written there, or starts over where the run stopped before its first one.")
    return ("This run kept no checkpoints: run it again on every worker, with `checkpoint_dir` on storage every "
            "worker reaches, to be able to resume the next time.")


def _stands_for_lost(error: BaseException, workers: int) -> bool:
    """Can ``error`` be a lost worker's, in a run of ``workers``: one of TensorFlow's :data:`LOST_ERRORS`, with
    another worker to lose?"""
    return workers >= 2 and type(error).__name__ in LOST_ERRORS and _is_tensorflows(error)


def _is_tensorflows(error: BaseException) -> bool:
    """Is ``error`` one of TensorFlow's own errors (``tf.errors.OpError``)?"""
    return any(cls.__name__ == "OpError" and cls.__module__.startswith("tensorflow") for cls in type(error).__mro__)


#: The attribute of an error raised while a run trained that holds the settings it trained with (:func:`trained_with`).
_TRAINED_WITH = "alexnet_trained_with"
#: The attribute of such an error that holds the 16-bit wire format the workers agreed on (:func:`trained_with`).
_SIXTEEN_BIT = "alexnet_sixteen_bit"


def trained_with(error: BaseException, settings: TrainSettings, sixteen_bit: str | None = None) -> None:
    """Keep on ``error``, raised while the run trained, the ``settings`` it trained with (those
    ``adapt_communication`` took) and the 16-bit wire format every worker's devices sum (``sixteen_bit``, as
    :func:`.levers.agree_on_sixteen_bit` agreed it), which :func:`lost_in_run` advises from rather than the settings
    given and this worker's own devices."""
    with contextlib.suppress(AttributeError, TypeError):  # an error that takes no attribute: the settings given
        setattr(error, _TRAINED_WITH, settings)
        if sixteen_bit is not None:
            setattr(error, _SIXTEEN_BIT, sixteen_bit)


def lost_in_run(error: BaseException, topology: Topology, settings: TrainSettings) -> WorkerLostError | None:
    """:func:`lost_worker` for a run of ``topology`` given ``settings``: those it trained with when the error keeps
    them (:func:`trained_with`); the 16-bit format its advice names is the one the workers agreed on, kept on the
    error, else the one this worker's devices sum (:func:`.communication.sixteen_bit_wire`: float16 on GPUs without
    bfloat16 sums)."""
    if not _stands_for_lost(error, topology.workers):  # before the devices are asked
        return None
    from .precision import hardware

    settings = getattr(error, _TRAINED_WITH, None) or settings
    agreed = getattr(error, _SIXTEEN_BIT, None)
    communication = replace(Communication.of(settings, topology.workers),
                            sixteen_bit=agreed or sixteen_bit_wire(hardware(topology.gpu)))
    return lost_worker(error, worker=topology.worker_index, workers=topology.workers,
                       collective_timeout=settings.collective_timeout, checkpoint_dir=settings.checkpoint_dir,
                       communication=communication)
