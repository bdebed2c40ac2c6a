"""One training run: the steps of :func:`alexnet.train.api.train`, in order, each the job of its own module.
A finished run given again whose model is saved already returns what its checkpoints recorded once the workers
agree on the steps, before any model is built or link measured; one whose model is not saved builds it and saves it
from its last checkpoint, without measuring the link or training (:mod:`.finished`).

Resolve nothing here that the settings already say: check every image once and leave bad ones out
(:mod:`alexnet.input.scan`); agree with the other workers on the steps per epoch (:mod:`.agreement`); build the
tf.data pipelines (:mod:`alexnet.input.pipeline`, handed to the replicas by :mod:`.datasets`); build and compile
AlexNet under the strategy's scope (:mod:`.model`), starting from a trained model's weights when one is given
(:mod:`.initial`); restore the last checkpoint when there is one
(:mod:`.checkpoint`); fit for the remaining epochs, the image size and learning rate of each epoch and step from
the schedule (:mod:`.schedule`), checkpointing as it goes (:mod:`.callbacks`) and logging for TensorBoard
(:mod:`.tensorboard`); save the model with its card and publish it as a pin (:mod:`.trained`,
:mod:`alexnet.model.saving`, :mod:`alexnet.model.pin`); return the history as a plain dict (:mod:`.run_history`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..checks import count_text
from ..progress import fit_verbosity
from .datasets import RunDatasets, usable_data, warn_of_stored_side
from .finished import save_finished, saved_finish
from .resumed import (
    extended,
    finished_precision,
    record_changes,
    refuse_other_classes,
    relaid,
    say_finished,
    trained_on,
)
from .run_history import kept_params, run_history, run_params
from .schedule import one_epoch
from .settings import TrainSettings
from .trained import save_trained

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from ..input.inputs import TrainingData
    from ..model.card import ModelCard
    from .agreement import Steps
    from .checkpoint import Resume
    from .precision import Precision
    from .schedule import RateSchedule
    from .strategy import Topology
    from .watchdog import Watchdog

logger = logging.getLogger(__name__)

#: What a run calls once training is over, before saving: ``evaluate(strategy, model, card)``, the evaluation the card
#: records (see :func:`run`).
Evaluate = Callable[[Any, Any, "ModelCard"], "dict[str, Any] | None"]


def _xla(settings: TrainSettings, topology: Topology) -> tuple[bool, str]:
    """Whether the training step is compiled with XLA on ``topology``, and why (:meth:`TrainSettings.xla_choice`)."""
    return settings.xla_choice(topology.gpu, strategy=topology.name, replicas=topology.replicas)


def _precision(strategy: tf.distribute.Strategy, num_classes: int, settings: TrainSettings,
               topology: Topology) -> Precision:
    """The precision asked for, or the one measured fastest here for this model (:mod:`.measure`); the workers of
    a multi-worker run agree on one before the model is built."""
    from .agreement import all_gather_ints
    from .measure import agree, precision_for

    finished = finished_precision(settings)
    if finished is not None:
        return finished
    precision = precision_for(settings.precision, gpu=topology.gpu, num_classes=num_classes,
                              batch_size=settings.batch_size, image_size=settings.sizes.final,
                              dense_units=settings.dense_units, grouped=settings.grouped,
                              jit_compile=_xla(settings, topology)[0])
    if topology.workers > 1 and settings.precision is None:
        precision = agree(precision, lambda values: all_gather_ints(strategy, values), topology.worker_index,
                          topology.chief)
    return precision


def _build(strategy: tf.distribute.Strategy, num_classes: int, settings: TrainSettings, topology: Topology,
           precision: Precision) -> tuple[keras.Model, Any]:
    """AlexNet and its optimizer in ``precision``, made under ``strategy``'s scope and compiled; the optimizer's
    rate is set before every step (:class:`.callbacks.RateSetter`)."""
    from .model import say_building, training_model

    xla, why = _xla(settings, topology)
    say_building(topology, num_classes, settings)  # several workers: the chief's weights go to the others meanwhile
    with strategy.scope():
        net, optimizer = training_model(num_classes, precision, settings.learning_rate, settings.momentum,
                                        settings.weight_decay, dense_units=settings.dense_units,
                                        dropout=settings.dropout, grouped=settings.grouped,
                                        label_smoothing=settings.label_smoothing,
                                        jit_compile=xla, train_from=settings.train_from, seed=settings.seed)
    logger.info("Precision %s (%s); XLA %s (%s).", precision.name, precision.reason, "on" if xla else "off", why)
    return net, optimizer


def _log_rates(rates: RateSchedule) -> None:
    logger.info("Learning rate %g (%g for a batch of 128, x%g)%s, %s schedule.", rates.peak, rates.base, rates.factor,
                f", warmed up over {rates.warmup_epochs} epoch(s)" if rates.warmup_epochs else "", rates.kind)


def _agree_on_steps(strategy: tf.distribute.Strategy, topology: Topology, data: Mapping[str, Any],
                    td: TrainingData, settings: TrainSettings) -> Steps:
    """The steps of an epoch and of validation, agreed by every worker for ``settings`` (a collective), refusing
    what needs validation images when no worker has any."""
    from .agreement import agree_on_steps

    steps = agree_on_steps(strategy, topology, data, td, topology.worker_batch(settings.step_batch),
                           settings.steps_per_epoch, settings.validation, settings.validation_steps,
                           val_batch=topology.worker_batch(settings.batch_size))
    _check_validation(steps, settings)
    return steps


def _fit(net: keras.Model, datasets: RunDatasets, settings: TrainSettings, steps: Steps, start: Resume,
         callbacks: Sequence[Any]) -> None:
    """Fit from ``start`` to the last epoch, one ``fit`` per run of epochs at one image size; a run resumed
    mid-epoch finishes that epoch first, in a fit of the steps left (which is how the callbacks know the step;
    see :func:`.callbacks.epoch_step`); when another global batch leaves none, in a fit of the epoch's last step, so
    that the epoch still ends with its metrics, validation and checkpoint. Validation is a callback among
    ``callbacks`` (:mod:`.validation`), not Keras's own; local SGD's averages are not blamed as a slow callback
    (:func:`.local_sgd.averages_excused`). The datasets a strategy makes per device run untuned, so
    that the end of each ``fit`` does not wait (:func:`alexnet.input.pipeline.untuned_device_datasets`)."""
    from ..input.pipeline import untuned_device_datasets
    from .callbacks import RunProgress
    from .local_sgd import averages_excused

    epoch, step = start.epoch, start.step
    traced: list[int] = []

    def fit(first: int, last: int, steps_per_epoch: int, size: int, step: int = 0) -> None:
        if traced and traced[-1] != size:
            # a step traced for this size alone: Keras would otherwise relax the third shape it sees to any
            # size, a graph that runs slower than one of known shapes
            net.train_function = None
        traced.append(size)
        with untuned_device_datasets(), averages_excused(callbacks):
            net.fit(datasets.train(size, first, step), epochs=last, initial_epoch=first,
                    steps_per_epoch=steps_per_epoch, callbacks=[*callbacks, RunProgress(settings.epochs)],
                    verbose=fit_verbosity(settings.verbose))

    if step > 0 and epoch < settings.epochs:
        if step >= steps.train:  # checkpointed at a smaller global batch, whose epochs had more steps
            logger.info("The checkpoint was written after step %d of epoch %d, and an epoch has %d steps now: epoch %d "
                        "ends with its last step, and training goes on from epoch %d.", step, epoch + 1, steps.train,
                        epoch + 1, epoch + 2)
        fit(epoch, epoch + 1, max(1, steps.train - step), settings.sizes.at(epoch), min(step, steps.train - 1))
        epoch += 1
    for first, last, size in settings.sizes.segments(epoch, settings.epochs):
        if len(settings.sizes.sizes) > 1:
            logger.info("Epochs %d to %d at %d x %d pixels.", first + 1, last, size, size)
        fit(first, last, steps.train, size)


def _check_validation(steps: Steps, settings: TrainSettings) -> None:
    """Refuse, before any model is built, what needs validation images when no worker has any (every worker
    refuses alike: they all agreed on ``steps``)."""
    from .settings_check import need_validation

    if not steps.validate:
        need_validation(settings.lr_schedule, settings.keep_best, "the images trained on have no validation images",
                        "upload ImageNet with its validation images (imagenet_upload()) and fetch them with the "
                        "partition, or choose another `lr_schedule` / leave out `keep_best`.")


def _validation(strategy: tf.distribute.Strategy, net: keras.Model, datasets: RunDatasets, steps: Steps,
                num_classes: int) -> list[Any]:
    """The callback that validates after every epoch (:class:`.validation.Validation`), in a list; empty without
    validation."""
    from .validation import Validation

    if datasets.validation is None or not steps.validation:
        return []
    return [Validation(strategy, datasets.validation, steps=steps.validation, images=steps.val_images,
                       k=min(5, num_classes), loss=net.loss)]


def run(strategy: tf.distribute.Strategy, topo: Topology, data: Mapping[str, Any], settings: TrainSettings,
        extra_callbacks: list[Any], evaluate: Evaluate | None = None) -> dict[str, Any]:
    """Train on ``data`` under ``strategy`` (of ``topo``) with ``settings``; the history (see
    :func:`alexnet.alexnet_train`). ``evaluate(strategy, model, card)``, called on every worker once training is
    over, before the model is saved and published, gives the evaluation its card records (``None``: none), so that
    the card and the pin are written once, with it. The workers' collective operations are watched meanwhile,
    against the ``collective_timeout`` the strategy was built with (:mod:`.watchdog`)."""
    from .strategy import watched_timeout
    from .watchdog import watched_run

    with watched_run(watched_timeout(strategy), topo.workers) as dog:
        return _run(strategy, topo, data, settings, extra_callbacks, evaluate, dog)


def _run(strategy: tf.distribute.Strategy, topo: Topology, data: Mapping[str, Any], settings: TrainSettings,
         extra_callbacks: list[Any], evaluate: Evaluate | None, dog: Watchdog | None) -> dict[str, Any]:
    from ..tfimport import keras
    from . import callbacks as cb
    from .advice import adaptation_text
    from .agreement import agree_on_settings, batch_within_images, check_agreement, say_steps
    from .checkpoint import CheckpointStore, Resume
    from .initial import initial_description, initial_weights
    from .levers import (
        check_global_batch,
        check_levers,
        install_levers,
        measure_communication,
        parameter_count,
        warn_of_averages_beyond_an_epoch,
    )
    from .lost import trained_with
    from .strategy import object_warnings
    from .tensorboard import LogDir, TensorBoardLog

    for warning in object_warnings(strategy, topo.workers):
        logger.warning(warning)
    communication = check_levers(settings, topo)
    td, bad = usable_data(data, settings)
    if topo.chief and settings.model_dir is None and settings.model_pin is None and not extra_callbacks:
        logger.warning("Nothing of this run is kept once it ends: the model it trains is saved nowhere, and a run "
                       "stopped half way cannot resume. Give `checkpoint_dir` (checkpoints and the model), `model_dir` "
                       "or `model_pin` to keep it.")
    if settings.seed is not None:
        keras.utils.set_random_seed(settings.seed)
    agree_on_settings(strategy, topo, settings.shared_by_workers())
    steps = _agree_on_steps(strategy, topo, data, td, settings)
    if (batch := batch_within_images(settings.batch_size, settings.accumulate_steps, topo, steps)) is not None:
        settings = dataclasses.replace(settings, batch_size=batch)  # on every worker alike: a batch its images fill
        steps = _agree_on_steps(strategy, topo, data, td, settings)
    check_global_batch(settings, topo)
    warn_of_averages_beyond_an_epoch(settings, topo, steps.train)
    model_settings = {"num_classes": td.num_classes, **settings.model_settings(),
                      "initial_model": initial_description(settings.initial_model)}
    finished = saved_finish(strategy, topo, settings, data, td, steps, model_settings, bad,
                            whole_way=bool(extra_callbacks) or evaluate is not None)
    if finished.history is not None:  # its model saved already: neither built nor measured, nothing read or written
        return finished.history
    precision = _precision(strategy, td.num_classes, settings, topo)
    net, optimizer = _build(strategy, td.num_classes, settings, topo, precision)
    if settings.initial_model is not None and topo.workers > 1:
        from .agreement import agree_on_classes

        agree_on_classes(strategy, td.class_ids, topo)
    if finished.done:  # every epoch done: the model saved from the last checkpoint, the link not measured
        history = save_finished(strategy, topo, settings, data, td, steps, net, optimizer, model_settings, bad,
                                extra_callbacks, evaluate)
        if history is not None:
            return history
    settings, communication, steps, timing, advice, adapted, most_batch = measure_communication(
        strategy, net, settings, communication, topo, steps,
        lambda taken: _agree_on_steps(strategy, topo, data, td, taken))
    say_steps(steps)  # the steps trained with, said once: the settings taken may have changed them
    measured = {  # the history's, and its history file's (run_history.MEASURED)
        "communication": communication.describe(), "allreduce_seconds": timing.get("allreduce_seconds"),
        "asked_allreduce_seconds": timing.get("asked_allreduce_seconds"),
        "sixteen_bit_allreduce_seconds": timing.get("sixteen_bit_allreduce_seconds"),
        "hidden_seconds": timing.get("hidden_seconds"), "compute_seconds": timing.get("compute_seconds"),
        "communication_efficiency": None if advice is None else advice.efficiency,
        "advised_settings": {} if advice is None else dict(advice.settings),
        "communication_advice": None if advice is None else " ".join(
            [*([adaptation_text(adapted)] if settings.adapt_communication else []), advice.text]),
        "adapted_settings": adapted, "micro_batches_up_to": most_batch if topo.workers > 1 else None,
        "allreduce_bytes_per_step": communication.bytes_per_step(parameter_count(net), steps.train,
                                                                 settings.checkpoint_every)}
    worker_batch = topo.worker_batch(settings.step_batch)
    if topo.chief and settings.checkpoint_every is not None and settings.checkpoint_every >= steps.train:
        logger.warning("`checkpoint_every` = %d is not below the %s of an epoch: no checkpoint is written inside an "
                       "epoch, only at each epoch's end; give checkpoint_every below %d.", settings.checkpoint_every,
                       count_text(steps.train, "step"), steps.train)
    if dog is not None:  # a step's own computation (as measured, for the settings taken) is not waiting for the others
        dog.step_seconds = 2 * float(timing.get("compute_seconds", 0.0))
    datasets = RunDatasets(strategy, td, settings, topo, steps)
    rates = settings.rates(topo.global_batch(settings.step_batch), steps.train)
    _log_rates(rates)
    lever_callbacks = install_levers(strategy, net, optimizer, settings, communication, steps.train)
    global_batch = topo.global_batch(settings.step_batch)
    store = (CheckpointStore(settings.checkpoint_dir, chief=topo.chief, steps=steps.train,
                             settings={**model_settings, "epochs": settings.epochs, "steps": steps.train,
                                       "global_batch_size": global_batch, "learnt_with": settings.learnt_with(),
                                       "data": trained_on(data, td, steps, topo),
                                       # what a history read back (alexnet_history()) says as the run's own does
                                       "run": {"batch_size": settings.batch_size, "strategy": topo.name,
                                               "replicas": topo.replicas, "workers": topo.workers,
                                               "precision": precision.name, "precision_reason": precision.reason,
                                               "peak_learning_rate": rates.peak},
                                       **({"adapted_settings": adapted}
                                          if settings.adapt_communication and topo.workers > 1 else {})})
             if settings.checkpoint_dir else None)
    start = Resume()
    board_log: TensorBoardLog | None = None
    try:
        if store is not None:
            start = store.restore(net, optimizer, checked=model_settings)
            if start.restored:
                refuse_other_classes(strategy, topo, store, start, td.class_ids)
            if start.restored and not start.finished(settings.epochs):
                record_changes(store, start, relaid(settings, start, rates, global_batch, steps.train))
        started = initial_weights(strategy, net, settings.initial_model, td.class_ids, settings.train_from, start,
                                  store)
        if topo.workers > 1:
            check_agreement(strategy, (start.epoch, start.step), steps, settings.checkpoint_dir)
        if topo.chief and isinstance(data, Mapping):  # every worker's data comes from the one board: said once, and
            # only of images read: a run with every epoch done trains and validates on none (an evaluation at its end
            # says its own)
            trains = not start.finished(settings.epochs)
            warn_of_stored_side(data, settings, trains=trains,
                                validates=trains and settings.validation and bool(td.val_files))
        setter = cb.RateSetter(rates, optimizer, patience=settings.patience,
                               accuracies=lambda: recorder.metrics.get("val_accuracy", []))
        recorder = cb.Recorder(steps.train, lambda epoch: one_epoch(settings.sizes, setter.rates, epoch),
                               start=start, store=store, every=settings.checkpoint_every)
        best = cb.BestWeights(store, start, net) if settings.keep_best else None
        skipped = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: datasets.skipped.check(epoch))
        throughput = cb.Throughput()
        if settings.log_dir and topo.chief:
            board_log = TensorBoardLog(LogDir(settings.log_dir), steps=steps.train, every=settings.log_every,
                                       images_per_step=topo.global_batch(settings.step_batch),
                                       num_classes=td.num_classes, profile_steps=settings.profile_steps,
                                       sizes=settings.sizes, rates=setter, communication=timing,
                                       checkpoint_every=settings.checkpoint_every if store else None)
        # validation first: every callback after it sees the epoch's validation metrics in the same logs
        # local SGD's averages before validation and checkpoints, which must see the averaged model
        # TensorBoard's log before the checkpoint: a run killed between the two resumes after a point it has written
        # the checkpoint (and the recorder's check that the weights are finite) before the best epoch's weights
        callbacks: list[Any] = [*lever_callbacks, *_validation(strategy, net, datasets, steps, td.num_classes), setter,
                                *([board_log] if board_log else []), recorder, *([best] if best else []),
                                skipped, throughput, *extra_callbacks]
        if settings.progress_file and topo.chief:
            callbacks.append(cb.Progress(cb.progress_writer(settings.progress_file), epochs=settings.epochs,
                                         steps=steps.train, worker_batch=worker_batch, workers=topo.workers))
        if dog is not None:  # first: a step watched ends where its collectives have, before the others' work at its
            from .watchdog import WatchedSteps  # end (a checkpoint uploaded every few steps)

            callbacks.insert(0, WatchedSteps(dog))
        began = time.perf_counter()
        if store is not None:  # the history file keeps the params the run's history has, as at each checkpoint
            store.params = lambda: kept_params(
                run_params(settings, topo, td, steps, start, precision, setter.rates, _xla(settings, topo), measured,
                           time.perf_counter() - began, started, list(store.settings.get("settings_changed") or [])),
                model_settings["initial_model"])
        if start.finished(settings.epochs):
            say_finished(settings, start, extended(settings, start, global_batch, steps.train),
                          store.settings if store is not None else {})
        else:
            logger.info("Training AlexNet: %s, %s, %s of %s, global batch %d on %s (%s).",
                        count_text(len(td.files), "image"), count_text(td.num_classes, "class", "classes"),
                        count_text(settings.epochs, "epoch"), count_text(steps.train, "step"),
                        topo.global_batch(settings.step_batch), count_text(topo.replicas, "replica"), topo.name)
            _fit(net, datasets, settings, steps, start, callbacks)
        seconds = time.perf_counter() - began
    except BaseException as error:
        trained_with(error, settings, communication.sixteen_bit)  # a lost worker: advised for what was taken
        if store is not None:  # no model to save: the folder let go at once
            store.let_go()
        raise
    finally:
        if dog is not None:  # a step that raised left its watch on: nothing is watched from here
            dog.stop()
        if store is not None:
            store.close(hold=True)
        if board_log is not None:
            board_log.close()
    try:  # the folder of checkpoints held until the model saved there by default (`model_dir`) is whole
        saved = save_trained(strategy, topo, settings, net, td, data, recorder.metrics, best=best, started=started,
                             start=start, store=store, callbacks=extra_callbacks, evaluate=evaluate)
        changed = (store.settings if store is not None and not start.finished(settings.epochs) else start.settings
                   ).get("settings_changed", [])
        return run_history(settings, topo, td, steps, start, recorder, precision, setter.rates, _xla(settings, topo),
                           measured, {
            "settings_changed": list(changed),
            "seconds": float(seconds), "model_path": saved.model_path, "bad_images": list(bad),
            "skipped_images": list(datasets.skipped.found), "started_from": started,
            "images_per_second": throughput.images_per_second(worker_batch), "weights_sha256": saved.digest,
            "weights_agree": saved.agree, "card": saved.card.to_dict(), "model_pin": saved.model_pin,
            "best_epoch": None if saved.best_epoch is None else saved.best_epoch + 1})
    finally:
        if store is not None:
            store.let_go()
