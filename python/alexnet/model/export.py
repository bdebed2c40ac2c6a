"""``alexnet_export()``: a trained model as a TensorFlow SavedModel (or a TF Lite file) that needs neither this
package nor Keras, written to a folder, ``gs://`` or ``s3://``, and/or carried by its model pin.

What the SavedModel's signatures take and return, and how an image that cannot be decoded is reported, is
:mod:`.serving`'s. An export folder holds the SavedModel (``saved_model.pb``, ``variables/``, ``assets/``,
``fingerprint.pb``) or ``alexnet.tflite``, and the model card beside it as ``alexnet-model.json`` (the same JSON as a
``model_dir``'s), written last. A model pin carries the export beside its ``alexnet.keras``, as one more file of
the same version (:mod:`.pin`): the SavedModel zipped as ``alexnet-savedmodel.zip``, or ``alexnet.tflite``.

Refused before any work: a model without a card (its classes' names and its image size would be unknown), and a
``path`` that exists and is not empty, unless ``overwrite`` is true and what is there is an earlier export and
nothing else, checked through the SavedModel's folders (a folder holding anything else is never emptied).
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import shutil
import zipfile
from collections.abc import Iterator
from typing import Any

from ..checks import some_names
from ..declare import declaration
from ..errors import AlexnetError
from ..result import returns_result
from ..scratch import make_scratch
from ..storage.location import fs_path, location_kind, open_filesystem, resolve_location
from ..storage.outputs import writable_location
from .card import CARD_FILE, ModelCard
from .options import EXPORT_MARKS, ExportOptions, ModelPinOptions, PredictOptions, check_model_pin
from .pin import EXPORT_FILES
from .publishing import check_model_board, check_pin_holds_models, publish_model, published_with
from .saved import load_model, model_source
from .saving import inference_copy

logger = logging.getLogger(__name__)

#: The name an export publishes under when neither `name` nor the pin it was read from says one: the model pin read
#: by default.
_PIN_NAME = declaration.specs(ModelPinOptions)["name"].default

#: The TF Lite file of a ``tflite`` export (the same name in a folder and in a model pin).
TFLITE_FILE = EXPORT_FILES["tflite"]
#: What an export writes at the top of its folder: the files, and the SavedModel's folders.
_EXPORT_FILES_AT_TOP = frozenset({"saved_model.pb", "fingerprint.pb", CARD_FILE, TFLITE_FILE})
_EXPORT_FOLDERS = frozenset({"variables", "assets"})
#: The files of a SavedModel's ``variables/`` (its ``assets/`` stays empty: the export has no asset).
_VARIABLES_FILE = re.compile(r"variables\.(index|data-[0-9]+-of-[0-9]+)")


def _entries(fs: Any, path: str, local: bool) -> list[str]:
    """The names in the folder ``path`` (empty when it does not exist); an error when it is a file."""
    if local:
        if os.path.isfile(path):
            raise AlexnetError(f"`path` = {path} is a file: give a folder for the export.")
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    try:
        if fs.isfile(path):
            raise AlexnetError(f"`path` = {path} is a file: give a folder for the export.")
        return sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))
    except FileNotFoundError:
        return []


def _written_by_export(parts: list[str], folder: bool) -> bool:
    """Whether the relative path ``parts`` (a folder when ``folder``) is one an export writes."""
    if len(parts) == 1:
        return parts[0] in (_EXPORT_FOLDERS if folder else _EXPORT_FILES_AT_TOP)
    return (len(parts) == 2 and parts[0] == "variables" and not folder
            and _VARIABLES_FILE.fullmatch(parts[1]) is not None)


def _not_an_export(fs: Any, path: str, local: bool) -> list[str]:
    """The relative paths under the folder ``path`` that no export writes, each named by its outermost folder that
    is not an export's (``src``, not ``src/analysis.R``); a link is never an export's."""
    found: list[tuple[str, bool]] = []
    strangers: set[str] = set()
    if local:
        for root, folders, names in os.walk(path):
            for name in [*folders, *names]:
                full = os.path.join(root, name)
                rel = os.path.relpath(full, path).replace(os.sep, "/")
                if os.path.islink(full):
                    strangers.add(rel)
                else:
                    found.append((rel, name in folders))
            folders[:] = [f for f in folders if not os.path.islink(os.path.join(root, f))]
    else:
        root = path.rstrip("/")
        # a key ending in "/" is a folder's placeholder object (as some tools write for an empty folder)
        found = [(p.rstrip("/")[len(root) + 1:], p.endswith("/")) for p in fs.find(root) if p.rstrip("/") != root]
    for rel, folder in found:
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            if not _written_by_export(parts[:depth], folder or depth < len(parts)):
                strangers.add("/".join(parts[:depth]))
                break
    return sorted(strangers)


def _check_replaceable(fs: Any, resolved: str, local: bool, entries: list[str]) -> None:
    """Raise unless the folder ``resolved`` (holding ``entries``) holds an earlier export and nothing else, which
    ``overwrite`` may replace whole."""
    strangers = _not_an_export(fs, fs_path(resolved), local)
    if strangers:
        raise AlexnetError(f"`path` = {resolved} holds files that are not an export ({some_names(strangers, 4)}): "
                           "`overwrite` replaces only a folder holding an earlier export and nothing else, and this "
                           "folder is not emptied. Give a new or empty folder, or move those files away.")
    if not any(mark in entries for mark in EXPORT_MARKS):
        raise AlexnetError(f"`path` = {resolved} holds no earlier export (neither {' nor '.join(EXPORT_MARKS)}): "
                           "`overwrite` replaces only an earlier export, and this folder is not emptied. Give a new "
                           "or empty folder.")


def _check_target(path: Any, overwrite: bool) -> str:
    """``path`` resolved, refused when it holds something (anything but an earlier export with ``overwrite``),
    then proven writable."""
    resolved = resolve_location(path, "path")
    local = location_kind(resolved) == "file"
    fs = None if local else open_filesystem(resolved, write=True, what="`path`")
    entries = _entries(fs, fs_path(resolved), local)
    shown = some_names(entries, 4)
    if entries and not overwrite:
        raise AlexnetError(f"`path` = {resolved} exists and is not empty ({len(entries)} entries: {shown}): give a new "
                           "or empty folder, or overwrite = True to replace an earlier export there.")
    if entries:
        _check_replaceable(fs, resolved, local, entries)
    return writable_location(resolved, "path")[0]


def _files(folder: str) -> Iterator[str]:
    """The files under ``folder``, as relative paths with ``/``, the card last."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            found.append(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/"))
    yield from sorted(found, key=lambda rel: (rel == CARD_FILE, rel))


def _write(folder: str, target: str) -> None:
    """Copy the export in the local ``folder`` to ``target`` (checked by :func:`_check_target`), replacing what is
    there, checked again first (files may have come while the export was made); the card is written last."""
    local = location_kind(target) == "file"
    fs = None if local else open_filesystem(target, write=True, what="`path`")
    entries = _entries(fs, fs_path(target), local)
    if entries:
        _check_replaceable(fs, target, local, entries)
    if fs is None:  # a local folder
        staged = make_scratch("alexnet-export-", os.path.dirname(target))
        try:
            copy = os.path.join(staged, "export")
            shutil.copytree(folder, copy)
            shutil.rmtree(target, ignore_errors=True)
            os.replace(copy, target)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        return
    root = fs_path(target)
    for name in _entries(fs, root, False):
        fs.rm(posixpath.join(root, name), recursive=True)
    for rel in _files(folder):
        fs.put_file(os.path.join(folder, *rel.split("/")), posixpath.join(root, rel))


def build_export(model: Any, card: ModelCard, top: int, folder: str, format: str) -> dict[str, Any]:
    """Write the export of ``model`` (with ``card``) in ``format`` into the new local ``folder``, with the card beside
    it; the signatures it offers (see :func:`.serving.signature_summary`)."""
    from ..tfimport import root_logging_untouched
    from .serving import PIXELS_SIGNATURE, save_serving, tflite_bytes

    with root_logging_untouched():
        if format == "savedmodel":
            signatures = save_serving(model, card, top, folder)
        else:
            saved = f"{folder}-savedmodel"
            signatures = {PIXELS_SIGNATURE: save_serving(model, card, top, saved)[PIXELS_SIGNATURE]}
            os.makedirs(folder)
            with open(os.path.join(folder, TFLITE_FILE), "wb") as f:
                f.write(tflite_bytes(saved))
            shutil.rmtree(saved, ignore_errors=True)
    with open(os.path.join(folder, CARD_FILE), "w", encoding="utf-8") as f:
        f.write(card.to_json())
    return signatures


def _pinned_file(folder: str, format: str, scratch: str) -> str:
    """The file a model pin carries for the export in ``folder``: the SavedModel zipped (stored: its weights do
    not compress), or the ``.tflite``."""
    if format == "tflite":
        return os.path.join(folder, TFLITE_FILE)
    archive = os.path.join(scratch, EXPORT_FILES[format])
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for rel in _files(folder):
            zf.write(os.path.join(folder, *rel.split("/")), rel)
    return archive


#: The classes per image of the export a training pins beside its model (``model_format``): a prediction's.
PINNED_TOP = int(declaration.specs(PredictOptions)["top"].default)


def export_format_of(model_format: str) -> str | None:
    """The export a ``model_format`` (:data:`~.pin.MODEL_FORMATS`) pins beside the Keras file, or None."""
    return model_format.split("+", 1)[1] if "+" in model_format else None


def pinned_already(board: str | None, name: str, card: ModelCard, format: str | None,
                   top: int = PINNED_TOP) -> dict[str, str] | None:
    """The newest version of model pin ``name`` on ``board`` when it holds this model already (``card``'s weights),
    with a ``format`` export of ``top`` classes (any or none when ``format`` is None: every version holds the Keras
    file), said in one line: a new version would repeat it. Else None."""
    pin = published_with(board, name, card.weights_sha256, format, min(top, card.num_classes) if format else None)
    if pin is not None:
        with_export = f" with its {format} export" if format else ""
        logger.info("Model pin %s version %s on %s holds this model%s already: no new version, that one is kept.",
                    pin["name"], pin["version"], pin["board"], with_export)
    return pin


def publish_with_export(board: str | None, name: str, model_file: str, card: ModelCard, model_format: str,
                        model: Any) -> dict[str, str]:
    """Publish the model pin ``name`` on ``board``: ``model_file`` (an ``alexnet.keras`` saved for inference) and,
    when ``model_format`` (:data:`~.pin.MODEL_FORMATS`) asks for it, the export of ``model`` beside it (the top
    :data:`PINNED_TOP` classes per image)."""
    format = export_format_of(model_format)
    if format is None:
        return publish_model(board, name, model_file, card)
    scratch = make_scratch("alexnet-export-")
    try:
        folder = os.path.join(scratch, "export")
        build_export(model, card, PINNED_TOP, folder, format)
        return publish_model(board, name, model_file, card, export_file=_pinned_file(folder, format, scratch),
                             export_format=format, export_top=min(PINNED_TOP, card.num_classes))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: The defaults of an export's options: ``format`` is also given by position.
_DEFAULTS = declaration.defaults(ExportOptions)


def check_destination(path: Any, board: Any) -> None:
    """Raise unless an export goes somewhere: to ``path``, to a model pin on ``board``, or both (the command line
    checks it before it reads a model pin)."""
    if path is None and board is None:
        raise AlexnetError("give `path` (a folder, gs:// or s3:// location to write the export to), `board` (to "
                           "publish it in a model pin), or both.")
    named = str(os.fspath(path)).rstrip("/") if isinstance(path, (str, os.PathLike)) else ""
    if named.lower().endswith((".tflite", ".keras", ".pb", ".zip")):
        raise AlexnetError(f"`path` = {named!r} names a file, and an export is a folder (a SavedModel's files, or "
                           f"alexnet.tflite in it): give the folder to write, e.g. {named.rsplit('.', 1)[0]!r}.")


@returns_result
def alexnet_export(model: Any, path: str | os.PathLike | None = None, format: str = _DEFAULTS["format"], *,
                   board: str | os.PathLike | None = None, name: str | None = None, **options: Any) -> dict[str, Any]:
    """Export ``model`` for serving without this package: a TensorFlow SavedModel, or a TF Lite file.

    ``model``: a model pin from :func:`alexnet.alexnet_model` or a ``model_dir`` / ``alexnet.keras`` location with
    its card (a model without a card is refused: its classes' names and image size would be unknown). ``path``: the
    folder to write, a path, ``file://``, ``gs://`` or ``s3://`` location; one that exists and is not empty is
    refused unless ``overwrite`` is true and it holds an earlier export and nothing else, which is then replaced.
    ``format``: ``"savedmodel"`` (the default) or ``"tflite"`` (the SavedModel's ``pixels`` signature converted by
    ``tf.lite.TFLiteConverter.from_saved_model``: TF Lite has no image decoding). ``top``: the classes returned per
    image (at most the model's). ``board``: also publish the export in a model pin there, beside the model's
    ``alexnet.keras``, as a new version of pin ``name`` (default: the pin ``model`` came from, else ``"alexnet"``),
    unless its newest version holds this model with the same export already (that version is kept and returned);
    :func:`alexnet.alexnet_model` reads it back with ``export=True``, SHA-256 checked. Give ``path``, ``board`` or
    both.

    The SavedModel computes in float32 whatever precision the model trained in. Its ``serving_default`` signature
    takes ``images``, a batch of encoded images as strings, decodes and crops them inside the graph as
    :func:`alexnet.alexnet_predict` does, and returns per image ``indices``, ``ids``, ``names`` and
    ``probabilities`` of the ``top`` classes, best first, with ``ok`` and ``error``: an image that cannot be
    decoded gets ``ok`` false and its reason, -1 indices, empty ids and names and zero probabilities, and the
    other images their answers. The ``pixels`` signature takes float32 ``[batch, size, size, 3]`` pixels (0-255,
    already cropped to the card's size) and returns the four rankings. From plain TensorFlow::

        served = tf.saved_model.load(path).signatures["serving_default"]
        answer = served(images=tf.constant([open("cat.jpg", "rb").read()]))
        answer["names"][0], answer["probabilities"][0]

    Returns a dict: ``path`` (the location written, or None), ``format``, ``files`` (relative paths) and ``bytes``
    of the export, ``model`` (what was exported), ``image_size``, ``num_classes``, ``top``, ``signatures`` (by
    name: ``inputs`` and ``outputs``, each name to ``dtype[dims]``) and ``pin`` (``board``, ``name``, ``version``
    of the model pin published, or None).
    """
    chosen = declaration.check(ExportOptions, {"format": format, **options}, "alexnet_export()")
    format, top, overwrite = chosen.format, chosen.top, chosen.overwrite
    check_destination(path, board)
    source = model_source(model)
    if source.card is None:
        raise AlexnetError(f"the model {source.description} has no card ({CARD_FILE} beside it): its classes' names "
                           "and its image size would be unknown. Export a model pin (alexnet_model()) or a model_dir "
                           "that alexnet_train() saved.")
    target = _check_target(path, overwrite) if path is not None else None
    pin_name = None
    if board is None and name is not None:
        logger.warning("`name` is the name of the model pin published on `board`, and no `board` is given: no pin is "
                       "published.")
    if board is not None:
        default = source.reference.get("name") if source.kind == "pin" else None
        pin_name = check_model_pin(name if name is not None else default or _PIN_NAME, "name")
        board = check_model_board(board, None, "board", pin_name)
        check_pin_holds_models(board, pin_name, "name")
    loaded = load_model(source)
    scratch = make_scratch("alexnet-export-")
    try:
        folder = os.path.join(scratch, "export")
        logger.info("Exporting the model %s as a %s", loaded.description, format)
        signatures = build_export(loaded.model, loaded.card, top, folder, format)
        files = list(_files(folder))
        size = sum(os.path.getsize(os.path.join(folder, *rel.split("/"))) for rel in files)
        if target is not None:
            _write(folder, target)
            logger.info("Wrote the %s export (%.1f MB) to %s", format, size / 1e6, target)
        pin = pinned_already(board, pin_name, loaded.card, format, top) if pin_name is not None else None
        if pin_name is not None and pin is None:
            with inference_copy(loaded.model) as model_file:
                pin = publish_model(board, pin_name, model_file, loaded.card,
                                    export_file=_pinned_file(folder, format, scratch), export_format=format,
                                    export_top=min(top, loaded.card.num_classes))
            logger.info("Published the model with its %s export as pin %s version %s on %s.", format, pin["name"],
                        pin["version"], pin["board"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"path": target, "format": format, "files": files, "bytes": size, "model": loaded.description,
            "image_size": loaded.card.image_size, "num_classes": loaded.card.num_classes,
            "top": min(top, loaded.card.num_classes), "signatures": signatures, "pin": pin}


declaration.take_declared(alexnet_export, ExportOptions, title="Its options, with their defaults:")
