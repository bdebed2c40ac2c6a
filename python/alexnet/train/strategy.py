"""Distribution strategies by name or object, and which process is the chief.

``strategy`` in :func:`alexnet.alexnet_train` is one of:

- ``None`` or ``"default"``: TensorFlow's default strategy, one device (the first GPU, else the CPU);
- ``"mirrored"``: :class:`tf.distribute.MirroredStrategy` over every GPU of this machine, or every logical
  CPU device when there is no GPU;
- ``"multi_worker"``: :class:`tf.distribute.MultiWorkerMirroredStrategy` over the workers named in the
  ``TF_CONFIG`` environment variable (see :mod:`alexnet.train.cluster`), with a timeout on collective
  operations so that a lost worker ends the run instead of hanging it, a wait for the workers to join that says
  whom it waits for and ends after ``collective_timeout`` (see :func:`waiting_for_workers`), and SIGTERM left as it
  was before (see :func:`keeping_sigterm`);
- any :class:`tf.distribute.Strategy` object, such as one created from R with
  ``tf$distribute$MirroredStrategy()``.

A name is checked without TensorFlow (:func:`check_strategy`), so that a misspelt one is refused before any work;
TensorFlow is imported when a strategy is resolved.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..checks import as_seconds, name_hints
from ..errors import AlexnetError
from .cluster import DEFAULT_COLLECTIVE_TIMEOUT, check_port_free, read_tf_config

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger(__name__)

#: Seconds a worker of a multi-worker run may go without a heartbeat (at most ``collective_timeout``).
HEARTBEAT_TIMEOUT = 60.0

#: Strategy names accepted by :func:`resolve_strategy` (and the command line's ``--strategy``).
STRATEGY_NAMES = ("default", "mirrored", "multi_worker")


def check_strategy(strategy: Any) -> str | None:
    """The name ``strategy`` gives (one of :data:`STRATEGY_NAMES`, written in any case, ``-`` for ``_``), ``None``
    for ``None`` or a strategy object; an :class:`AlexnetError` for another name, or for an object that cannot be
    a :class:`tf.distribute.Strategy` (TensorFlow not imported yet). Imports nothing heavy: run it before any
    work."""
    if strategy is None:
        return None
    if isinstance(strategy, str):
        name = strategy.strip().lower().replace("-", "_")
        if name in STRATEGY_NAMES:
            return name
        said = name_hints([strategy], STRATEGY_NAMES)
    elif "tensorflow" in sys.modules and isinstance(strategy, sys.modules["tensorflow"].distribute.Strategy):
        return None
    else:
        said = f"an object of type {type(strategy).__name__}"
    raise AlexnetError(f"`strategy` must be None, one of {', '.join(repr(n) for n in STRATEGY_NAMES)} or a "
                       f"tf.distribute.Strategy object, not {said}.")


def resolve_strategy(
    strategy: str | tf.distribute.Strategy | None = None,
    *,
    collective_timeout: float | None = DEFAULT_COLLECTIVE_TIMEOUT,
) -> tf.distribute.Strategy:
    """The :class:`tf.distribute.Strategy` that ``strategy`` names (see the module documentation).

    Raises :class:`~alexnet.errors.AlexnetError` for an unknown name, for ``"multi_worker"`` without a
    usable ``TF_CONFIG``, for a multi-worker strategy object that missed TF_CONFIG (see
    :func:`check_strategy_object`), and for objects that are not strategies. Call it before any other
    TensorFlow work: ``MultiWorkerMirroredStrategy`` must be created at program start-up. This is where
    Python reads TF_CONFIG, from ``os.environ``.
    """
    from ..tfimport import tf

    name = check_strategy(strategy)
    if strategy is None:
        return tf.distribute.get_strategy()
    if name is None:
        check_strategy_object(strategy)
        return strategy
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        return tf.distribute.MirroredStrategy(devices=devices)
    # "multi_worker"
    config = read_tf_config()
    timeout = as_seconds(collective_timeout, "collective_timeout")
    check_port_free(config)
    heartbeat = configure_heartbeat(config, timeout)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
    with waiting_for_workers(config, timeout), keeping_sigterm():
        built = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    logger.info(
        "MultiWorkerMirroredStrategy: worker %d of %d, collective timeout %s s, heartbeat timeout %s.",
        task_index(built),
        num_workers(built),
        timeout,
        f"{heartbeat:g} s" if heartbeat is not None else "TensorFlow's default",
    )
    return built


#: Seconds between the lines that say a worker still waits for the others to join.
JOIN_NOTE_EVERY = 30.0

#: The exit status of a worker that gave up waiting for the others to join.
JOIN_EXIT_STATUS = 2


def cluster_tasks(config: dict) -> tuple[tuple[str, str], list[tuple[str, str]]]:
    """This task and the others of TF_CONFIG ``config`` (as :func:`~alexnet.train.cluster.read_tf_config` gives it),
    each as its name (``"worker 1"``, ``"the chief"``) and address."""
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    me = (str(task.get("type") or "worker"), int(task.get("index") or 0))
    tasks = [((job, i), str(address)) for job in ("chief", "worker")
             for i, address in enumerate(cluster.get(job) or [])]

    def name(job: str, i: int) -> str:
        return "the chief" if job == "chief" else f"{job} {i}"

    own = next((address for key, address in tasks if key == me), "?")
    return (name(*me), own), [(name(*key), address) for key, address in tasks if key != me]


#: The watchdog of :func:`waiting_for_workers`, a process of its own: arguments the pid to end, the bound in seconds
#: (0: none), the seconds between notes, the note (``{seconds}`` in it) and the last words. It ends when its standard
#: input does (the strategy was built, or the worker ended).
_WATCHDOG = """
import os, select, signal, sys, time
pid, bound, every, note, fail = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
start, due = time.monotonic(), every
while True:
    wake = min(due, bound) if bound else due
    if select.select([sys.stdin], [], [], max(0.0, wake - (time.monotonic() - start)))[0]:
        sys.exit(0)
    waited = time.monotonic() - start
    if bound and waited >= bound:
        os.write(2, (fail + "\\n").encode())
        os.kill(pid, signal.SIGKILL)
        sys.exit(0)
    if waited >= due:
        os.write(2, (note.format(seconds=round(waited)) + "\\n").encode())
        due += every
"""


def _as_logged(level: int, message: str) -> str:
    """``message`` as this process's logging would write it at ``level`` for this module (through the handlers'
    filters and the first handler's format), for another process to write."""
    record = logger.makeRecord(logger.name, level, __file__, 0, message, (), None)
    handlers = logging.getLogger().handlers
    for handler in handlers:
        handler.filter(record)
    formatter = next((h.formatter for h in handlers if h.formatter is not None), None)
    return (formatter or logging.Formatter("%(levelname)s %(name)s: %(message)s")).format(record)


@contextlib.contextmanager
def waiting_for_workers(config: dict, bound: float | None, every: float | None = None) -> Iterator[None]:
    """Around the building of a multi-worker strategy, which waits (in TensorFlow's C++, holding Python's lock, so
    that neither a Python thread nor a Python signal handler runs) until every worker of TF_CONFIG ``config`` has
    joined: say whom this worker waits for; let SIGINT (Ctrl-C) end the process at once meanwhile (see
    :func:`default_signals`); and from a watchdog process of its own, say every ``every`` seconds
    (:data:`JOIN_NOTE_EVERY`) that it still waits and, after ``bound`` seconds (``collective_timeout``; ``None``: for
    ever), which workers never joined and what to do, and end this process (SIGKILL, the one signal TensorFlow's wait
    cannot hold).

    TensorFlow's registration timeout of the coordination service (``cluster_register_timeout_in_ms``) does not end
    that wait (TensorFlow 2.21: a worker alone still waited after ten times as long), and TensorFlow takes SIGTERM
    over before it waits, for a preemption notice that only records the signal; SIGTERM is put back once the strategy
    is built (:func:`keeping_sigterm`)."""
    (me, address), others = cluster_tasks(config)
    if not others:
        yield
        return
    every = JOIN_NOTE_EVERY if every is None else every
    workers = len(others) + 1
    waited_for = ", ".join(f"{name} ({where})" for name, where in others)
    logger.info("%s of %d (%s) waits for %s to join%s; Ctrl-C stops it.", me.capitalize(), workers, address,
                waited_for, f", for at most {bound:g} s (`collective_timeout`)" if bound else "")
    note = _as_logged(logging.INFO, f"{me.capitalize()} still waits for {waited_for} to join ({{seconds}} s).")
    fail = _as_logged(logging.ERROR, (
        f"{me.capitalize()} of {workers} gave up after {bound or 0:g} s (`collective_timeout`) waiting for "
        f"{waited_for} to join: start the same training on {'that worker' if len(others) == 1 else 'them'} too, "
        "with the same TF_CONFIG cluster, or check that the addresses and ports TF_CONFIG names are right and "
        "reachable from this machine (a firewall may block them)."))
    for handler in logging.getLogger().handlers:
        handler.flush()
    start = time.monotonic()
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(bound or 0), str(every), note, fail],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)  # Ctrl-C is not for it
    except OSError as error:  # pragma: no cover - a Python that cannot start itself
        logger.warning("No watchdog for the wait for the other workers (%s): it is not bounded.", error)
        watchdog = None
    try:
        with default_signals((int(signal.SIGINT),)):
            yield
    finally:
        if watchdog is not None:
            assert watchdog.stdin is not None
            watchdog.stdin.close()
            watchdog.wait()
    logger.debug("Every worker joined after %.1f s.", time.monotonic() - start)


@contextlib.contextmanager
def default_signals(signums: tuple[int, ...]) -> Iterator[None]:
    """The signals ``signums`` end the process at once within, as by default, and do again what they did on the way
    out.

    A Python handler (Ctrl-C's ``KeyboardInterrupt``) runs only once the main thread is back in Python, which a wait
    in C++ never is; what is put back is the whole ``struct sigaction`` as C sees it (a host program's handler, R's,
    runs again as before), and Python's own record of its handlers. Nothing is done outside the main thread (Python
    sets handlers there only) nor where the C library has no ``sigaction`` (Windows)."""
    libc = _libc()
    if libc is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {}
    for signum in signums:
        before = ctypes.create_string_buffer(_SIGACTION_BYTES)
        if libc.sigaction(signum, None, before) == 0:
            kept[signum] = (signal.getsignal(signum), before)
            signal.signal(signum, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, (python, before) in kept.items():
            if python is not None:
                signal.signal(signum, python)
            libc.sigaction(signum, before, None)


#: Bytes kept of a ``struct sigaction``: more than any C library's (glibc's is 152 on x86-64, 140 on aarch64).
_SIGACTION_BYTES = 1024


@contextlib.contextmanager
def keeping_sigterm() -> Iterator[None]:
    """Put back, on the way out, what SIGTERM did in this process on the way in.

    TensorFlow's multi-worker set-up takes SIGTERM over for its preemption notice, a handler that only records the
    signal: a worker sent SIGTERM (``kill``, ``timeout``, a scheduler ending a job) would then train on for ever.
    With what was there before put back, a worker stops on SIGTERM as a run of one process does (by default: at once,
    its last checkpoint whole; a handler of the host program, R's or the application's, runs as it did). The whole
    ``struct sigaction`` is kept, as C sees it, not Python's idea of it (Python does not know of TensorFlow's
    handler); where the C library has no ``sigaction`` (Windows), nothing is done.
    """
    libc = _libc()
    if libc is None:
        yield
        return
    before = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if libc.sigaction(int(signal.SIGTERM), None, before) != 0:
        logger.debug("SIGTERM's handler could not be read (errno %d): TensorFlow may keep it.", ctypes.get_errno())
        yield
        return
    try:
        yield
    finally:
        if libc.sigaction(int(signal.SIGTERM), before, None) != 0:  # pragma: no cover - cannot fail with a read one
            logger.warning("SIGTERM's handler could not be put back (errno %d): this worker ignores SIGTERM; stop "
                           "it with SIGINT (Ctrl-C) or SIGKILL.", ctypes.get_errno())


def _libc() -> ctypes.CDLL | None:
    """The C library, with ``sigaction``; ``None`` where there is none."""
    if sys.platform == "win32":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        libc.sigaction.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - every POSIX C library has it
        return None
    return libc


def heartbeat_timeout(collective_timeout: float | None) -> float:
    """Seconds without a heartbeat after which the workers' coordination service declares a worker lost.

    TensorFlow's own default (10 s) ends a whole run when one busy worker (a small machine decoding JPEGs on
    every core, a long pause of its process) is late with a heartbeat; :data:`HEARTBEAT_TIMEOUT` allows for
    that, but never more than ``collective_timeout``, the bound the run was given for waiting on a lost worker.
    """
    if collective_timeout is None:
        return HEARTBEAT_TIMEOUT
    return min(HEARTBEAT_TIMEOUT, float(collective_timeout))


def configure_heartbeat(config: dict, collective_timeout: float | None) -> float | None:
    """Set up TensorFlow's coordination service as ``MultiWorkerMirroredStrategy`` would for the cluster of
    ``config`` (TF_CONFIG, as :func:`~alexnet.train.cluster.read_tf_config` gives it), with the heartbeat timeout of
    :func:`heartbeat_timeout`; returns the heartbeat timeout the service has, in seconds, or ``None`` when it keeps
    TensorFlow's default.

    Call it right before the strategy is built. The strategy configures the service only when nothing has yet, so
    it keeps this configuration; when the service is already configured (by the host program, or by an earlier
    strategy of this process) it is left alone, and what it has is returned. The interfaces used are TensorFlow's
    own, not public: when they are missing, TensorFlow's default stays and the log says so.
    """
    try:
        from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
        from tensorflow.python.distribute import multi_worker_util
        from tensorflow.python.eager import context
    except ImportError:  # pragma: no cover - depends on TensorFlow's internals
        logger.info("This TensorFlow does not let the coordination service's heartbeat timeout be set.")
        return None
    configured = context.context().coordination_service
    if configured is not None:
        return _heartbeat_seconds(configured)
    spec = multi_worker_util.normalize_cluster_spec(config.get("cluster") or {})
    if (config.get("task") or {}).get("type") not in ("chief", "worker") or not spec.as_dict():
        return None
    seconds = heartbeat_timeout(collective_timeout)
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=spec.num_tasks(job))
            for job in ("chief", "worker") if job in spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(spec),
        coordinated_jobs=jobs,
        heartbeat_timeout_in_ms=int(seconds * 1000),
    )
    return seconds


def _heartbeat_seconds(service: Any) -> float | None:
    """The heartbeat timeout of a configured coordination service, in seconds; ``None``: TensorFlow's default."""
    return service.heartbeat_timeout_in_ms / 1000 if service.heartbeat_timeout_in_ms else None


def keeps_default_heartbeat() -> bool:
    """Is this process's coordination service configured with TensorFlow's default heartbeat timeout (10 s)?

    That is what a ``MultiWorkerMirroredStrategy`` object built by the host program has (see
    :func:`object_warnings`). ``False`` when no service is configured, when its timeout was set, and when
    TensorFlow's internals that tell it are missing."""
    try:
        from tensorflow.python.eager import context
    except ImportError:  # pragma: no cover - depends on TensorFlow's internals
        return False
    configured = getattr(context.context(), "coordination_service", None)
    return configured is not None and _heartbeat_seconds(configured) is None


def object_warnings(strategy: tf.distribute.Strategy, workers: int) -> list[str]:
    """What a run of ``workers`` workers under the strategy object the host program built lacks, in words: a
    collective timeout (a dead worker could then hang the others) and a heartbeat timeout longer than TensorFlow's
    10 s (a busy worker could then end the run). Empty for one worker, and for what ``"multi_worker"`` built with a
    collective timeout."""
    if workers <= 1:
        return []
    said = []
    if collective_timeout_of(strategy) is None:
        said.append(
            "This MultiWorkerMirroredStrategy has no collective timeout: if a worker dies, the others may wait "
            "until TensorFlow's own peer check gives up. Pass strategy = 'multi_worker' with a collective_timeout "
            f"({DEFAULT_COLLECTIVE_TIMEOUT:g} s unless set to none), or build it with "
            "communication_options=CommunicationOptions(timeout_seconds=...).")
    if keeps_default_heartbeat():
        said.append(
            "This MultiWorkerMirroredStrategy keeps TensorFlow's heartbeat timeout of 10 s: a worker busy or paused "
            "for longer is declared lost, which ends the run on every worker. Pass strategy = 'multi_worker', "
            f"which allows {HEARTBEAT_TIMEOUT:g} s (at most collective_timeout).")
    return said


def check_strategy_object(strategy: tf.distribute.Strategy) -> None:
    """Raise when a multi-worker strategy object was made without this process's TF_CONFIG.

    TensorFlow reads TF_CONFIG from ``os.environ`` when the strategy is created. A host program that set
    TF_CONFIG after Python started copies it there at its next call into alexnet (R: before each call and
    after each top-level call), so a strategy created from R within one function, right after
    ``Sys.setenv(TF_CONFIG = ...)`` and before any alexnet call, sees no cluster and would train alone.
    """
    if strategy_name(strategy) != "multi_worker" or num_workers(strategy) > 1:
        return
    raw = os.environ.get("TF_CONFIG", "")
    try:
        workers = len(json.loads(raw)["cluster"]["worker"]) if raw.strip() else 0
    except (ValueError, KeyError, TypeError):
        return
    if workers > 1:
        raise AlexnetError(
            f"This MultiWorkerMirroredStrategy sees no cluster, but TF_CONFIG names {workers} workers: it was "
            "made before TF_CONFIG was set. Create the strategy after setting TF_CONFIG, or pass "
            "strategy = 'multi_worker' instead of a strategy object."
        )


def _built(strategy: tf.distribute.Strategy, name: str) -> Any:
    """An attribute a multi-worker strategy's ``extended`` recorded when it was built (``None`` when absent).

    The strategy's cluster resolver reads TF_CONFIG again on every call, so once TF_CONFIG has changed it
    no longer tells what the strategy was built with; ``extended`` does (not public API, hence the fallback).
    """
    return getattr(getattr(strategy, "extended", None), name, None)


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """How many machines (workers, counting a chief) take part in ``strategy``; 1 for local strategies."""
    built = _built(strategy, "_num_workers")
    if isinstance(built, int):
        return max(1, built)
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return 1
    spec = resolver.cluster_spec().as_dict()
    count = sum(len(spec.get(job, [])) for job in ("chief", "worker"))
    return max(1, count)


def task_index(strategy: tf.distribute.Strategy) -> int:
    """This process's index among the workers of ``strategy`` (0 for local strategies)."""
    if isinstance(_built(strategy, "_num_workers"), int):
        return int(_built(strategy, "_task_id") or 0)
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_id is None:
        return 0
    return int(resolver.task_id)


def collective_timeout_of(strategy: tf.distribute.Strategy) -> float | None:
    """The collective timeout (seconds) of a multi-worker strategy; ``None`` when it has none or is local.

    Reads the communication options the strategy was built with (not part of TensorFlow's public API,
    so ``None`` also when they cannot be found).
    """
    options = getattr(getattr(strategy, "extended", None), "_communication_options", None)
    timeout = getattr(options, "timeout_seconds", None)
    return float(timeout) if timeout else None


def local_replicas(strategy: tf.distribute.Strategy) -> int:
    """Replicas (devices) of ``strategy`` on this machine."""
    return max(1, strategy.num_replicas_in_sync // num_workers(strategy))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, the saved model and logs (only one process does).

    Always true for local strategies. In a cluster, the chief is the ``chief`` task when there is one,
    else worker 0.
    """
    if isinstance(_built(strategy, "_is_chief"), bool):
        return bool(_built(strategy, "_is_chief"))
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return True
    spec = resolver.cluster_spec().as_dict()
    task_type, task_id = resolver.task_type, resolver.task_id
    if not spec or task_type in (None, "chief"):
        return True
    return task_type == "worker" and int(task_id or 0) == 0 and "chief" not in spec


def strategy_name(strategy: tf.distribute.Strategy) -> str:
    """A short name for reports: ``default``, ``mirrored``, ``multi_worker`` or the class name."""
    cls = type(strategy).__name__
    if cls.startswith("_Default") or cls == "DefaultDistributionStrategy":
        return "default"
    if cls.startswith("MirroredStrategy"):
        return "mirrored"
    if cls.startswith(("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy")):
        return "multi_worker"
    return cls


def uses_gpu(strategy: tf.distribute.Strategy) -> bool:
    """Does ``strategy`` compute on GPUs?"""
    try:
        devices = strategy.extended.worker_devices
    except (AttributeError, RuntimeError):
        devices = ()
    if any("GPU" in str(d).upper() for d in devices):
        return True
    from ..tfimport import tf

    return strategy_name(strategy) == "default" and bool(tf.config.list_logical_devices("GPU"))


@dataclass(frozen=True)
class Topology:
    """Where a strategy computes: its replicas, its workers, this worker's place among them, GPUs or not."""

    name: str
    replicas: int
    workers: int
    worker_index: int
    chief: bool
    local_replicas: int
    gpu: bool

    def global_batch(self, batch_size: int) -> int:
        """Images in one step of the whole cluster, for ``batch_size`` per replica."""
        return batch_size * self.replicas

    def worker_batch(self, batch_size: int) -> int:
        """This worker's share of one step, for ``batch_size`` per replica."""
        return batch_size * self.local_replicas


def topology(strategy: tf.distribute.Strategy) -> Topology:
    """The :class:`Topology` of ``strategy``."""
    return Topology(strategy_name(strategy), strategy.num_replicas_in_sync, num_workers(strategy),
                    task_index(strategy), is_chief(strategy), local_replicas(strategy), uses_gpu(strategy))
