"""The options of what is done with a trained model, declared once: which model pin is read, an evaluation's (how
the images are cropped and scored, and which of a board's validation images), a prediction's and an export's.

:class:`EvaluationOptions` is the declaration of an evaluation's (a frozen dataclass of
:func:`alexnet.declare.declaration.setting` fields, as the training settings are). :func:`alexnet.alexnet_evaluate`
and :func:`alexnet.alexnet_spark_evaluate` take these options by name, with these defaults; the command line's
``evaluate`` and ``spark-evaluate`` have an option for each, R's ``alexnet_evaluate()`` and
``alexnet_spark_evaluate()`` a formal (``R/model-options.R``, generated from these declarations);
:func:`check_options` is their one check, and a Spark evaluation hands the result to every worker as it is.
:class:`BoardImagesOptions` says which of a board's validation images :func:`alexnet.alexnet_evaluate` scores (a
share of them) and how they are fetched; the command ``evaluate`` and R's ``alexnet_evaluate()`` take them too (a
Spark evaluation shares the images among its workers itself, and fetches them with its launch options).
:class:`PredictOptions`, :class:`FeaturesOptions` and :class:`ExportOptions` are those of
:func:`alexnet.alexnet_predict`, :func:`alexnet.alexnet_features` and :func:`alexnet.alexnet_export`, taken alike by the
commands ``predict``, ``features`` and ``export`` and R's functions.
:class:`ModelPinOptions` says which model pin :func:`alexnet.alexnet_model` reads and where it brings it; the commands
that take a model read it with them (``--model-pin``, ``--pin-version``, ``--model-cache``) when no model location is
given, and R's ``alexnet_model()`` has a formal for each; :func:`check_model_pin` is the one check of a model pin's
name, wherever one is given. This module does not import TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..checks import MIN_IMAGE_SIZE, as_int
from ..data.options import FetchOptions, ValidationPartitionOptions
from ..declare import declaration
from ..declare.declaration import like, setting
from ..declare.kinds import Spec, given_as
from ..errors import AlexnetError
from ..storage.layout import board_own_pin

#: The file of each export format in a model pin, beside ``alexnet.keras``.
EXPORT_FILES = {"savedmodel": "alexnet-savedmodel.zip", "tflite": "alexnet.tflite"}
#: Files that mark a folder as an export: a SavedModel's graph, or the TF Lite file.
EXPORT_MARKS = ("saved_model.pb", EXPORT_FILES["tflite"])

#: How each ``crops`` value evaluates, as the result's ``protocol`` says.
PROTOCOLS = {1: "centre crop", 10: "10 crops: corners, centre and their mirrors"}


def check_crops(crops: Any, name: str = "crops") -> int:
    """``crops`` as 1 or 10, a whole number as every count of the package is (:func:`alexnet.checks.as_int`: R's
    doubles too, a string never: the command line hands its words over as numbers); an :class:`AlexnetError` naming
    it as ``name`` otherwise."""
    try:
        value: int | None = as_int(crops, name)
    except AlexnetError:
        value = None
    if value not in PROTOCOLS:
        raise AlexnetError(f"`{name}` must be 1 (the centre crop) or 10 (the paper's corners, centre and mirrors), "
                           f"not {crops!r}.")
    return int(value)


@dataclass(frozen=True)
class EvaluationOptions:
    """How an evaluation scores its images (the declaration: see the module documentation)."""

    crops: int = setting(1, "count", "1: the centre crop; 10: the four corners and the centre of the image resized "
                         "to 256/224 of the crop, and their mirrors (the paper's)", choices=tuple(PROTOCOLS),
                         check=check_crops)
    batch_size: int = setting(64, "count", "images scored at once", minimum=1)
    parallel: int | None = setting(None, "count", "images decoded at once (unset: one per CPU this process may use)",
                                   minimum=1, optional=True)
    image_size: int | None = setting(None, "count", "the side of the crop scored (unset: the size the model trained "
                                     "at last; a model trained at a lower size often scores better 32 pixels above "
                                     "it)", minimum=MIN_IMAGE_SIZE, optional=True, metavar="PIXELS")


_FETCH = declaration.specs(FetchOptions)
_SHARE = declaration.specs(ValidationPartitionOptions)


@dataclass(frozen=True)
class BoardImagesOptions:
    """Which of a board's validation images :func:`alexnet.alexnet_evaluate` scores, and how they are fetched (the
    declaration: see the module documentation)."""

    partition: int = like(_SHARE["partition"], help="the 0-based share of the board's validation images scored")
    total: int = like(_SHARE["total"], help="the number of shares the board's validation images are split into (1: "
                      "all of them)")
    cache_dir: str | None = like(_FETCH["cache_dir"], help="where the validation images are extracted (unset: a "
                                 "folder under the user's cache directory)")
    fetch_workers: int = like(_FETCH["workers"], help="parallel downloads of the validation images")


@dataclass(frozen=True)
class PredictOptions:
    """How :func:`alexnet.alexnet_predict` ranks the classes of its images (the declaration: see the module
    documentation)."""

    top: int = setting(5, "count", "classes given for each image, the most probable first (a model with fewer "
                       "classes gives all of them)", minimum=1)
    batch_size: int = setting(32, "count", "images scored at once", minimum=1)
    skip_bad: bool = setting(False, "flag", "leave out the images that cannot be read or decoded, with a warning "
                             "naming each, and give the others' results (otherwise one error names them, and "
                             "nothing is given)")


#: The layers :func:`alexnet.alexnet_features` reads, by name (the network's own, :mod:`alexnet.model.network`), and
#: what each holds.
FEATURE_LAYERS = {
    "flatten": "the last convolution's maps, max-pooled and pooled to 6x6, flattened (9216 values)",
    "fc1": "the first hidden dense layer, after its ReLU (4096 values at full size)",
    "fc2": "the second hidden dense layer, after its ReLU (4096 values at full size): the paper's image "
           "similarity",
    "logits": "the class scores before the softmax (one per class)",
}


@dataclass(frozen=True)
class FeaturesOptions:
    """Which layer :func:`alexnet.alexnet_features` reads (the declaration: see the module documentation)."""

    layer: str = setting("fc2", "choice", "the layer whose values are returned: " + "; ".join(
        f"{name}, {what}" for name, what in FEATURE_LAYERS.items()), choices=tuple(FEATURE_LAYERS))
    batch_size: int = like(declaration.specs(PredictOptions)["batch_size"])
    skip_bad: bool = like(declaration.specs(PredictOptions)["skip_bad"])


@dataclass(frozen=True)
class ExportOptions:
    """What :func:`alexnet.alexnet_export` writes (the declaration: see the module documentation)."""

    format: str = setting("savedmodel", "choice", "savedmodel: a TensorFlow SavedModel; tflite: its pixels "
                          "signature as a TF Lite file", choices=tuple(EXPORT_FILES))
    top: int = like(declaration.specs(PredictOptions)["top"], help="classes the export returns for each image, the "
                    "most probable first (at most the model's)")
    overwrite: bool = setting(False, "flag", "replace an earlier export at path (a folder holding anything else is "
                              "never emptied)")


def specs() -> dict[str, Spec]:
    """Every option's spec of an evaluation, by name, in the declaration's order."""
    return declaration.specs(EvaluationOptions)


def check_options(arguments: Mapping[str, Any]) -> EvaluationOptions:
    """The options among ``arguments`` (by name; the others at their defaults) checked and converted."""
    return EvaluationOptions(**declaration.convert(EvaluationOptions, arguments))


#: What a model pin may be called: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit.
_PIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: The names of a data board's own pins: category pins are WordNet ids.
_WNID = re.compile(r"n[0-9]{8}")


def check_model_pin(name: Any, setting: str = "model_pin", *, read: bool = False) -> str:
    """``name``, the value of ``setting``, as a model pin name: letters, digits, ``.``, ``_``, ``-``, and none of a
    data board's own pins (``categories``, ``bad_images``, a WordNet id such as ``n01440764``, ``val-...``). A name
    given with its version (``alexnet@20260101T...``) is told to give the version apart for a pin ``read``, and that
    a new version is published otherwise."""
    if isinstance(name, (list, tuple)) and len(name) == 1:
        name = name[0]
    if not isinstance(name, str) or not _PIN_NAME.fullmatch(name):
        named, _, version = name.partition("@") if isinstance(name, str) else ("", "", "")
        if version and _PIN_NAME.fullmatch(named):
            versioned = (f", its version apart: {given_as(setting, repr(named))} and "
                         f"{given_as('version', repr(version))}" if read else
                         f": each publication is a new version of the pin; give {given_as(setting, repr(named))}")
        else:
            versioned = f": e.g. {given_as(setting, repr('alexnet'))}"
        raise AlexnetError(
            f"`{setting}` must be a pin name (letters, digits, '.', '_' and '-', starting with a letter or digit), "
            f"not {name!r}{versioned}."
        )
    if board_own_pin(name) or _WNID.fullmatch(name):
        raise AlexnetError(
            f"{given_as(f'`{setting}`', repr(name))} is the name of one of the data board's own pins (categories, "
            f"bad_images, the categories' WordNet ids, val-<wnid>), not a model pin's: e.g. "
            f"{given_as(setting, repr('alexnet'))}."
        )
    return name


def check_read_pin(name: Any, setting: str = "name") -> str:
    """:func:`check_model_pin` for the name of a pin read, whose version may be given with it (``alexnet@<version>``,
    as ``--initial-pin`` takes it too) or apart."""
    if isinstance(name, (list, tuple)) and len(name) == 1:
        name = name[0]
    if isinstance(name, str) and name.count("@") == 1 and all(_PIN_NAME.fullmatch(part) for part in name.split("@")):
        named, version = name.split("@")
        return f"{check_model_pin(named, setting, read=True)}@{version}"
    return check_model_pin(name, setting, read=True)


def pin_and_version(name: str, version: str | None, setting: str = "name") -> tuple[str, str | None]:
    """The pin name and version of ``name`` (checked by :func:`check_read_pin`: ``alexnet`` or ``alexnet@<version>``)
    and ``version`` given apart; an :class:`AlexnetError` when the two give different versions."""
    named, at, written = name.partition("@")
    if not at:
        return name, version
    if version is not None and version != written:
        raise AlexnetError(f"{given_as(f'`{setting}`', repr(name))} reads version {written!r} of pin {named!r}, and "
                           f"{given_as('`version`', repr(version))} another: give the version once.")
    return named, written


@dataclass(frozen=True)
class ModelPinOptions:
    """Which model pin :func:`alexnet.alexnet_model` reads and where it brings it (the declaration: see the module
    documentation)."""

    name: str = setting("alexnet", "pin", "the name of the model pin read (NAME@VERSION reads that version)",
                        option="--model-pin", metavar="NAME[@VERSION]", check=check_read_pin)
    version: str | None = setting(None, "pin", "the version of the pin read (unset: its latest)", optional=True,
                                  option="--pin-version", metavar="VERSION")
    cache_dir: str | None = setting(None, "location", "where the model's files are brought, here and by a Spark "
                                    "worker without a copy of them (a folder every such machine may write; unset: a "
                                    "folder under each machine's user cache directory)", optional=True,
                                    option="--model-cache", metavar="FOLDER")
    export: bool = setting(False, "flag", "bring the export the pin carries beside the model too (a SavedModel "
                           "extracted)", option=None)
