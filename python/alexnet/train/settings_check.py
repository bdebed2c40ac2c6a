"""The one check of a run's settings, :func:`check_settings`, before any data is fetched or Spark job launched:
every value converted and held to its limits as :class:`~alexnet.train.settings.TrainSettings` declares them, the
settings checked against each other, output locations proven writable, a trained start found and its card read, and
a model pin's board opened. What decides on the validation top-1 of every epoch is refused in a run without
validation (:func:`need_validation`), here when ``validation`` is off and by the run when its images have none. This
module does not import TensorFlow.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..declare import declaration
from ..errors import AlexnetError
from .initial import LEARNING_LAYERS
from .settings import TrainSettings, check_names, specs

logger = logging.getLogger("alexnet.train.settings")  # its lines keep the logger they had in settings.py


def need_validation(lr_schedule: str, keep_best: bool, missing: str, fix: str) -> None:
    """Refuse what decides on the validation top-1 of every epoch (``lr_schedule = "plateau"``, ``keep_best``) in a
    run without validation: the error says why there is none (``missing``) and what to do (``fix``)."""
    for needed, shown in ((lr_schedule == "plateau", "lr_schedule = 'plateau'"), (keep_best, "keep_best = True")):
        if needed:
            raise AlexnetError(f"{shown} decides on the validation top-1 of every epoch, but {missing}: {fix}")


def _together(values: dict[str, Any]) -> None:
    """The settings checked against each other (in place: the defaults that follow from others filled in)."""
    epochs = values["epochs"]
    sizes, counts = values["image_size"], values["image_size_epochs"]
    if counts is None and len(sizes) > epochs:
        raise AlexnetError(f"`image_size` has {len(sizes)} sizes but `epochs` is {epochs}: every size needs at "
                           "least one epoch; give more epochs or fewer sizes.")
    if counts is not None and (len(counts) != len(sizes) or sum(counts) != epochs):
        raise AlexnetError(
            f"`image_size_epochs` = {list(counts)} does not fit: it needs one whole number >= 1 per size of "
            f"`image_size` ({len(sizes)}) adding up to `epochs` ({epochs}).")
    warmup = values["warmup_epochs"]
    if warmup is not None and warmup > epochs:
        raise AlexnetError(f"`warmup_epochs` = {warmup} is more than `epochs` ({epochs}): the rate would never "
                           "reach its peak; give fewer warm-up epochs.")
    if warmup and values["lr_scaling"] == "none":
        raise AlexnetError("`warmup_epochs` warms up to the rate scaled with the batch, and lr_scaling = 'none' "
                           "scales nothing: use lr_scaling = 'linear', or leave out `warmup_epochs`.")
    if warmup is not None and warmup == epochs and values["lr_schedule"] in ("linear", "cosine"):
        raise AlexnetError(f"`warmup_epochs` = {warmup} is every epoch: the {values['lr_schedule']} schedule would end "
                           "at its peak and never come down; give fewer warm-up epochs, or more `epochs`.")
    mixed = values.pop("mixed_precision")
    if mixed is not None:
        mapped = "float16" if mixed else "float32"
        if values["precision"] is not None and values["precision"] != mapped:
            raise AlexnetError(f"`mixed_precision` = {mixed} means precision {mapped!r}, but `precision` is "
                               f"{values['precision']!r}: give only `precision`.")
        values["precision"] = mapped
    values["mixed_precision"] = None
    if not values["validation"]:
        need_validation(values["lr_schedule"], values["keep_best"], "`validation` is off",
                        "set validation = True (which needs validation images among the images trained on), or "
                        "leave it out.")
    if values["train_from"] != LEARNING_LAYERS[0] and values["initial_model"] is None:
        raise AlexnetError(f"train_from = '{values['train_from']}' keeps the layers before it as they start, which "
                           "only a trained start makes sense of: start from a trained model, `initial_model` as a "
                           "model_dir or a model pin (alexnet_model()), or leave `train_from` at "
                           f"'{LEARNING_LAYERS[0]}'.")
    if values["checkpoint_every"] is not None and values["checkpoint_dir"] is None:
        raise AlexnetError("`checkpoint_every` needs `checkpoint_dir`: the storage the checkpoints are written to.")
    if values["model_dir"] is None:
        values["model_dir"] = values["checkpoint_dir"]


def check_settings(arguments: Mapping[str, Any], *, data_board: str | None = None, shared: bool = False,
                   where: str = "alexnet_train()",
                   reserved: Mapping[str, str] | None = None) -> TrainSettings:
    """``arguments`` (settings by name; the others take their defaults) checked and converted: a
    :class:`TrainSettings`, or an :class:`AlexnetError` naming the setting to change.

    Output locations (``checkpoint_dir``, ``model_dir``, ``log_dir``) are resolved and proven writable, and
    ``initial_model`` is found and its card read; with ``shared`` (a cluster, where every node has its own folders)
    a local path among them gets a warning, unless its mount is a network or cluster file system the nodes share
    (:func:`alexnet.storage.location.local_path_warning`). ``model_pin``'s board (``model_board``, else
    ``data_board``, the board the data comes from) is opened for writing.
    """
    from ..model.publishing import check_model_board, check_pin_holds_models
    from ..model.saved import model_reference
    from ..storage.location import local_path_warning, location_kind
    from ..storage.outputs import writable_location

    check_names(list(arguments), where, reserved=reserved)
    table = specs()
    values = declaration.convert(TrainSettings, arguments)
    _together(values)
    paths: set[str] = set()  # said once each: `model_dir` is `checkpoint_dir` unless given
    for name, spec in table.items():
        if values[name] is None:
            continue
        if spec.output:  # each made when it is first written: a run refused before then leaves no folder
            values[name] = writable_location(values[name], name, keep=False)[0]
        elif spec.kind == "model":
            values[name] = model_reference(values[name], name)
        else:
            continue
        if (shared and isinstance(values[name], str) and location_kind(values[name]) == "file"
                and values[name] not in paths):
            paths.add(values[name])
            if (warning := local_path_warning(f"`{name}` = {values[name]}", values[name])) is not None:
                logger.warning("%s", warning)
    if values["model_dir"] is not None:
        from .formats import check_model_dir

        check_model_dir(values["model_dir"], values["checkpoint_dir"])
    if values["initial_model"] is not None:
        from .initial import check_architecture

        check_architecture(values["initial_model"], values["dense_units"], values["grouped"])
    declaration.warn_unused(values, logger, TrainSettings)
    drops = values["lr_drop_epochs"]
    if values["lr_schedule"] == "step" and drops and min(drops) >= values["epochs"]:
        logger.warning("`lr_drop_epochs` = %s holds no epoch below `epochs` (%d): lr_schedule = 'step' never drops "
                       "the rate in this run; %s.", list(drops), values["epochs"],
                       f"give lr_drop_epochs below {values['epochs']}" if values["epochs"] > 1 else
                       "a run of one epoch has no epoch to drop it at: give more epochs")
    if values["sync_every"] > 1 and values["local_sgd_after"] >= (epochs := values["epochs"]):
        logger.warning("`local_sgd_after` = %d is not below `epochs` (%d): every epoch trains synchronously, and "
                       "`sync_every` is not used; give `local_sgd_after` below %d.", values["local_sgd_after"], epochs,
                       epochs)
    values["model_board"] = None
    if values["model_pin"] is not None:
        values["model_board"] = check_model_board(arguments.get("model_board"), data_board, pin=values["model_pin"])
        check_pin_holds_models(values["model_board"], values["model_pin"])
    return TrainSettings(**values)
