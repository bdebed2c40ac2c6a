"""``alexnet_spark_train()`` and ``alexnet_spark_evaluate()`` from Python: one barrier job each, planned, launched
with pyspark and combined by the one path of :mod:`alexnet.launch.job`."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..declare import declaration
from ..model.options import EvaluationOptions
from ..result import returns_result
from ..train.settings import TrainSettings
from .job import combine_job, plan_job
from .options import LaunchOptions, TrainingJobOptions
from .session import SparkToStart
from .spark import barrier_slots, launch_job, spark_context
from .training import worker_specs
from .work import row_of

logger = logging.getLogger(__name__)


class SparkRun(list[dict[str, Any]]):
    """What :func:`alexnet_spark_train` returns: one dict per worker, in worker order (a list, as it always was),
    and ``evaluation``, the model's evaluation when the training ended with one (else ``None``)."""

    evaluation: dict[str, Any] | None = None


class _SlotsOnceStarted:
    """The barrier task slots of a :class:`~alexnet.launch.session.SparkToStart`'s application, counted when called
    (which starts it); ``known``, those of a local master, before it starts (:func:`alexnet.launch.job.plan_job`
    checks them first: a job that asks too many workers of ``local[2]`` is refused without starting Spark)."""

    def __init__(self, spark: SparkToStart):
        self.spark, self.known = spark, spark.local_slots()

    def __call__(self) -> int | None:
        return barrier_slots(self.spark.context())


def _driver(spark: Any) -> tuple[Callable[[], Any], int | Callable[[], int | None] | None, bool]:
    """What gives the SparkContext of ``spark`` (a :class:`~alexnet.launch.session.SparkToStart` starts its session
    when it is first called), its barrier task slots (for a session not started, what gives them once it is), and
    whether its master is local."""
    if isinstance(spark, SparkToStart):
        return spark.context, _SlotsOnceStarted(spark), spark.local
    context = spark_context(spark)
    return (lambda: context), barrier_slots(context), (context.master or "").startswith("local")


def alexnet_spark_train(spark: Any, workers: int, board: str | os.PathLike | None = None, *,
                        settings: TrainSettings | None = None, callbacks: Sequence[Any] | None = None,
                        **arguments: Any) -> SparkRun:
    """Train AlexNet on ``workers`` Spark tasks at once, each on its own partition of ``board``; with
    ``evaluate``, end with the model's evaluation on every validation image of the board, in the same job.

    One barrier task per worker (``rdd.barrier().mapPartitions``): task ``k`` runs
    :func:`alexnet.launch.training.train_work` in a fresh Python process, which fetches partition ``k`` of
    ``workers``, sets TF_CONFIG from the barrier addresses (worker ``k`` listens on its host at ``base_port + k``;
    worker 0 is the chief) and trains with ``MultiWorkerMirroredStrategy``. Besides ``spark``, ``workers`` and
    ``board``, it takes by name the job's options (the launch options of :class:`alexnet.launch.options.LaunchOptions`,
    and the training job's own, :class:`alexnet.launch.options.TrainingJobOptions`: ``evaluate``, ``crops``; listed
    with their defaults below) and its training settings, last in its signature with the defaults its workers train
    with (those of :func:`alexnet.alexnet_train`, whose help says what each does, but ``verbose``, 2: one line per
    epoch in a worker's log; ``epochs``, ``batch_size`` per worker, ``image_size``, ``checkpoint_dir`` and
    ``model_dir`` on storage every worker reaches (``gs://``, ``s3://``), ``checkpoint_every``,
    ``collective_timeout``, ``model_pin``, ...), or ``settings`` holds those already checked
    (:func:`alexnet.launch.training.worker_settings`). ``spark`` is a SparkSession or SparkContext (or a
    :class:`~alexnet.launch.session.SparkToStart`, started once the checks below have passed); ``python`` the worker's
    Python (default: the executor's); ``env`` extra environment variables for the worker processes; ``timeout``
    bounds each launch in seconds; ``callbacks`` are Keras callbacks every worker trains with (they travel to the
    workers pickled).

    With ``evaluate``, after the last epoch each worker scores the validation images of its partition with the
    model it holds (``crops``: 1, the centre crop, or 10), and the driver adds the counts: every category is in
    one partition, so the evaluation equals :func:`alexnet.alexnet_evaluate` of the saved model on one machine
    over every validation image of the board. The evaluation is recorded in the model card: in ``model_dir``'s
    ``alexnet-model.json``, and, with ``model_pin``, in the pin's one new version, which the evaluation's
    ``model_pin`` names.

    Before anything runs on the cluster: more workers than Spark task slots (or than categories), an
    unreachable board, an output location that cannot be written, or checkpoints in ``checkpoint_dir`` that every
    worker would refuse to resume (of another checkpoint format, written for another model, or trained on other
    classes than the board's, told by the history file and the model card beside them) is an error, in the words
    the workers would use; with ``probe``, a short job
    then checks that the executors' Python imports alexnet and TensorFlow, and names those that do not. While
    the workers train, the chief's progress is shown here (``progress``), and each worker's while it evaluates.
    When a worker fails, Spark stops the others; with ``retries``, the stage is launched again (up to that many
    times) and training resumes from the last checkpoint of ``checkpoint_dir``. The error of the last failure
    leads with the worker's own Python error and says where its whole log is.

    Returns a :class:`SparkRun`: a list of one dict per worker, in worker order (see
    :func:`alexnet.launch.training.train_work`), each with ``attempt`` (1 when the first launch succeeded) and ``log``
    (``host:path``, where the worker's log is kept on its host); every worker ends with the same weights
    (``history["weights_sha256"]``). Its ``evaluation`` is the dict of
    :func:`alexnet.alexnet_evaluate` with ``workers``, ``per_worker`` (each worker's ``log`` among them) and
    ``model_pin`` (with ``evaluate``; else ``None``).

    The job's options, with their defaults:
    """
    context, slots, local = _driver(spark)
    plan = plan_job(workers, board, slots, kind="train", local_master=local, settings=settings, **arguments)
    run = launch_job(context(), plan, callbacks=list(callbacks or []))
    digests = {row["history"].get("weights_sha256") for row in run.rows}
    if len(digests) > 1:
        logger.warning("The workers ended with different weights (%d digests): they were not in step.", len(digests))
    result = SparkRun(run.rows)
    result.evaluation = combine_job(plan, [row_of(plan.task, row) for row in run.rows], run.seconds, run.shown)
    return result


@returns_result
def alexnet_spark_evaluate(spark: Any, model: Any, workers: int, board: str | os.PathLike | None = None,
                           **options: Any) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over every validation image of ``board``, split over ``workers``
    Spark barrier tasks; the same result as a one-machine :func:`alexnet.alexnet_evaluate`.

    Task ``k`` evaluates share ``k`` of ``workers`` of the validation images in a fresh Python process
    (:func:`alexnet.launch.evaluation.evaluate_work`; ``python``, default the executor's; ``env`` extra environment
    variables; fetched into ``cache_dir``, ``fetch_workers`` downloads at once); the driver adds the correct
    counts. ``model`` must be something every worker reaches: a ``model_dir`` or ``alexnet.keras`` location
    (``gs://``, ``s3://``; a local path with a non-local master gets a warning, unless it is on a network or
    cluster file system every node shares) or a model pin from :func:`alexnet.alexnet_model` (a worker without
    its file fetches it from its board, into the ``cache_dir`` given to :func:`alexnet.alexnet_model`, which it
    must be able to write, else its own user cache); a loaded ``keras.Model`` is an error.
    ``spark`` is a SparkSession or SparkContext (or a :class:`~alexnet.launch.session.SparkToStart`, started once the
    checks have passed).

    The same job as a training's: before anything runs, the checks of :func:`alexnet.launch.job.plan_job`, then,
    with ``probe``, a short job checks that the executors' Python imports alexnet and TensorFlow. While the
    workers score, their progress is shown here (``progress``). ``timeout`` bounds each launch in seconds (the
    Spark job is cancelled, and the error says so). An evaluation is idempotent: when a worker fails, the job is
    launched again whole, up to ``retries`` times. Returns the dict of :func:`alexnet.alexnet_evaluate`
    (``seconds``: the stage's wall time; ``images_per_second``: the workers' own, the images over the slowest
    worker's seconds of scoring) plus ``workers``, ``per_worker`` (each worker's ``seconds`` of scoring among them,
    and its ``log``, ``host:path``, where the worker's log is kept on its host) and ``attempt``.

    ``options`` are, by name, the evaluation's (:class:`alexnet.model.options.EvaluationOptions`) and the launch
    options (:class:`alexnet.launch.options.LaunchOptions`), with their defaults:
    """
    context, slots, local = _driver(spark)
    plan = plan_job(workers, board, slots, kind="evaluate", model=model, local_master=local, **options)
    run = launch_job(context(), plan)
    evaluation = combine_job(plan, [row_of(plan.task, row) for row in run.rows], run.seconds) or {}
    return {**evaluation, "attempt": run.attempt}


# the job's own arguments, then its options by keyword, then its other keywords (a training's settings last)
declaration.take_declared(alexnet_spark_train, TrainingJobOptions, LaunchOptions, keywords=worker_specs())
declaration.take_declared(alexnet_spark_evaluate, EvaluationOptions, LaunchOptions)
