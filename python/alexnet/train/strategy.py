"""Distribution strategies by name or object, and which process is the chief.

``strategy`` in :func:`alexnet.alexnet_train` is one of:

- ``None`` or ``"default"``: TensorFlow's default strategy, one device (the first GPU, else the CPU);
- ``"mirrored"``: :class:`tf.distribute.MirroredStrategy` over every GPU of this machine, or every logical
  CPU device when there is no GPU;
- ``"multi_worker"``: :class:`tf.distribute.MultiWorkerMirroredStrategy` over the workers named in the
  ``TF_CONFIG`` environment variable (see :mod:`alexnet.train.cluster`), with a timeout on collective
  operations so that a lost worker ends the run instead of hanging it, a wait for the workers to join that says
  whom it waits for and ends after ``collective_timeout``, and SIGTERM left as it was before (see
  :mod:`alexnet.train.joining`);
- any :class:`tf.distribute.Strategy` object, such as one created from R with
  ``tf$distribute$MirroredStrategy()``.

A name is checked without TensorFlow (:func:`check_strategy`), so that a misspelt one is refused before any work;
TensorFlow is imported when a strategy is resolved.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..checks import as_seconds, name_hints
from ..errors import AlexnetError
from . import cluster, joining
from .cluster import DEFAULT_COLLECTIVE_TIMEOUT, HEARTBEAT_TIMEOUT, check_port_free, read_tf_config, took_port

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger(__name__)


#: Strategy names accepted by :func:`resolve_strategy` (and the command line's ``--strategy``), and what each spreads
#: training over.
STRATEGIES = {"default": "one device", "mirrored": "every GPU of this machine",
              "multi_worker": "the workers TF_CONFIG names, this one among them"}
STRATEGY_NAMES = tuple(STRATEGIES)


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
    :func:`check_strategy_object`), and for objects that are not strategies; warns when TF_CONFIG names several
    workers and the strategy trains on this worker alone (:func:`warn_of_a_cluster_left_out`). Call it before any other
    TensorFlow work: ``MultiWorkerMirroredStrategy`` must be created at program start-up. This is where
    Python reads TF_CONFIG, from ``os.environ``.
    """
    from ..tfimport import tf

    name = check_strategy(strategy)
    if name == "multi_worker":
        return _multi_worker(collective_timeout)
    workers = cluster.tf_config_workers()  # read first: TF_CONFIG normalised, as TensorFlow's strategies read it too
    if strategy is not None and name is None:
        check_strategy_object(strategy)
        resolved = strategy
    elif name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        resolved = tf.distribute.MirroredStrategy(devices=devices)
    else:
        resolved = tf.distribute.get_strategy()
    warn_of_a_cluster_left_out(resolved, workers)
    return resolved


def warn_of_a_cluster_left_out(strategy: tf.distribute.Strategy, workers: int) -> None:
    """Warn when TF_CONFIG names several ``workers`` but ``strategy`` trains on this worker alone: workers launched by
    hand without ``strategy = 'multi_worker'`` each train a model of their own, and nothing else would say so. A
    warning, not an error: a TF_CONFIG left over in a shell must not block a run of one machine."""
    if workers <= 1 or num_workers(strategy) > 1:
        return
    logger.warning("TF_CONFIG names %d workers, but this run's strategy (%s) trains on this worker alone: each worker "
                   "launched so trains a model of its own. Give strategy = 'multi_worker' to train them as one, or "
                   "unset TF_CONFIG for a run of one machine.", workers, strategy_name(strategy))


def _multi_worker(collective_timeout: float | None) -> tf.distribute.Strategy:
    """The strategy of ``"multi_worker"`` (see the module documentation), for :func:`resolve_strategy`."""
    from ..tfimport import tf

    config = read_tf_config()
    timeout = as_seconds(collective_timeout, "collective_timeout")
    port = check_port_free(config)
    heartbeat = configure_heartbeat(config, timeout)
    options = multi_worker_options()
    joining.meet_workers(config, timeout, hold=port)
    with joining.waiting_for_workers(config, timeout), joining.keeping_sigterm():
        built = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    setattr(built, OWN_TIMEOUT, timeout)  # kept by the run's watchdog (alexnet.train.watchdog)
    took_port(port)
    logger.info(
        "MultiWorkerMirroredStrategy: worker %d of %d, collective timeout %s s, heartbeat timeout %s, all-reduce %s.",
        task_index(built),
        num_workers(built),
        timeout,
        f"{heartbeat:g} s" if heartbeat is not None else "TensorFlow's default",
        options.implementation.name,
    )
    return built


def all_reduce_implementation(gpus: int, split: bool = False) -> str:
    """The all-reduce of a multi-worker run whose workers each compute on ``gpus`` GPUs (``split``: some of them
    split into several logical devices), as ``tf.distribute.experimental.CommunicationImplementation`` names it:
    ``"NCCL"`` on GPUs, ``"RING"`` on logical GPUs (which NCCL does not take), ``"AUTO"`` on CPUs.

    ``MirroredStrategy`` takes NCCL on GPUs by itself; ``MultiWorkerMirroredStrategy`` left at ``AUTO`` has
    TensorFlow's collectives use their own ring on GPUs too (between workers over gRPC, through the hosts' memory)
    unless asked for NCCL. On CPUs ``AUTO`` is what it always had (the ring)."""
    if not gpus:
        return "AUTO"
    return "RING" if split else "NCCL"


def multi_worker_options() -> Any:
    """The ``CommunicationOptions`` of ``"multi_worker"``: the all-reduce of this worker's devices
    (:func:`all_reduce_implementation`), read without starting TensorFlow's runtime (the strategy must come first).
    No timeout: TensorFlow would keep a thread sleeping for it per collective operation; the run's watchdog keeps
    ``collective_timeout`` instead (:mod:`alexnet.train.watchdog`)."""
    from ..tfimport import tf

    gpus = tf.config.get_visible_devices("GPU")
    split = any(len(tf.config.get_logical_device_configuration(gpu) or ()) > 1 for gpu in gpus)
    implementation = tf.distribute.experimental.CommunicationImplementation[all_reduce_implementation(len(gpus), split)]
    return tf.distribute.experimental.CommunicationOptions(implementation=implementation)


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
    """What is amiss, in words, with a run of ``workers`` workers under the strategy object the host program built:
    no collective timeout (a hung worker could then hang the others), or one in its communication options (a
    thread sleeping for it per collective operation), and a heartbeat timeout of TensorFlow's 10 s (a busy worker
    could then end the run). Empty for one worker, and for what ``"multi_worker"`` built, whatever its
    ``collective_timeout`` (never too)."""
    if workers <= 1:
        return []
    said = []
    timeout = options_timeout(strategy)
    if hasattr(strategy, OWN_TIMEOUT):
        pass  # "multi_worker" built it, with the collective_timeout asked for (never, too)
    elif timeout is None:
        said.append(
            "This MultiWorkerMirroredStrategy has no collective timeout: if a worker hangs, the others may wait for "
            "ever. Pass strategy = 'multi_worker' with a collective_timeout "
            f"({DEFAULT_COLLECTIVE_TIMEOUT:g} s unless set to never).")
    else:
        said.append(
            f"This MultiWorkerMirroredStrategy has a collective timeout of {timeout:g} s in its communication "
            "options: TensorFlow keeps a thread sleeping that long for each collective operation (about 16 a step), "
            "thousands per worker, enough to exhaust the processes a machine allows. Pass strategy = 'multi_worker' "
            "with collective_timeout, which one thread keeps.")
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
    workers = cluster.tf_config_workers()
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


#: The attribute of a strategy ``"multi_worker"`` built that holds its ``collective_timeout`` (seconds, or None).
OWN_TIMEOUT = "_alexnet_collective_timeout"


def watched_timeout(strategy: tf.distribute.Strategy) -> float | None:
    """The ``collective_timeout`` the run's watchdog keeps (:mod:`alexnet.train.watchdog`): that of a strategy
    ``"multi_worker"`` built; ``None`` for a strategy object built elsewhere, whose own options keep theirs."""
    return getattr(strategy, OWN_TIMEOUT, None)


def options_timeout(strategy: tf.distribute.Strategy) -> float | None:
    """The collective timeout (seconds) in a multi-worker strategy's communication options, which TensorFlow keeps
    itself; ``None`` when it has none or is local. Reads the options the strategy was built with (not part of
    TensorFlow's public API, so ``None`` also when they cannot be found)."""
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
