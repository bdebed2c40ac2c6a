"""The model pin, read here (``alexnet_model()``) and written by :mod:`.publishing` (its ``publish_model()``, after
training or export).

A model pin holds one ``alexnet.keras``; its metadata is the model card (:mod:`.card`) plus ``kind: model`` and
the file's ``sha256`` and ``bytes`` (:func:`.publishing.model_pin_metadata`). It may also carry an export of the
same model beside it (``alexnet_train(model_format = "keras+savedmodel")``, or ``alexnet_export()`` with a board): the
SavedModel zipped as ``alexnet-savedmodel.zip`` (or ``alexnet.tflite``), described by the metadata's ``export``
(``format``, ``file``, ``sha256``, ``bytes``, and ``top``: the classes it returns per image). Reading a file
downloads it to a temporary name beside its place in the cache, checks the SHA-256 against the metadata and only
then renames it into place, so a damaged or tampered file is never loaded, and never left where a later call would
find it. Cache layout, under ``cache_dir`` (default
``<user cache dir>/alexnet/models``)::

    <sha256 of the file>/<file name>
    <sha256 of the zip>/savedmodel/       (a SavedModel export, extracted)

A file already there is reused when its SHA-256 still matches. The model's dict records the ``cache_dir`` it was
read with (``None`` for the default), and another process that uses it where its file is missing (a Spark worker, a
process a job launches) brings the file into that folder again (:func:`fetch_again`), or says that it cannot.

Which model pin ``alexnet_model()`` reads and where it brings it is declared once:
:class:`~alexnet.model.options.ModelPinOptions`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import uuid
from collections.abc import Mapping
from typing import Any

from ..declare import declaration
from ..errors import AlexnetError
from ..result import returns_result
from ..storage.board import Board, open_board
from ..storage.cache import cache_root
from ..storage.layout import is_file_name
from ..storage.outputs import made_folder
from ..storage.transfer import download_verified, extract_zip, sha256_file
from .card import ModelCard
from .options import EXPORT_FILES, ModelPinOptions, check_read_pin, pin_and_version

logger = logging.getLogger(__name__)

#: Attempts after the first of a download of a model pin's file that fails (a network error, say).
DOWNLOAD_RETRIES = 3

#: What a model pin's metadata says it is (``kind``), beside the board's format version (``alexnet``).
MODEL_PIN_KIND = "model"

#: What a model pin carries (the training setting ``model_format``): the Keras file alone, or an export beside it.
MODEL_FORMATS = ("keras", *(f"keras+{name}" for name in EXPORT_FILES))


def latest_metadata(opened: Board, name: str) -> tuple[dict[str, Any], str]:
    """The user metadata of the latest version of pin ``name`` (which ``opened`` holds), and that version."""
    meta, version = _read_meta(opened, name, None)
    return dict(meta.user or {}), version


def default_model_cache() -> str:
    """``<user cache dir>/alexnet/models``: where model files are kept by their SHA-256."""
    return cache_root("models")


def _latest_version(opened: Board, name: str) -> str:
    from pins.boards import BoardManual

    if isinstance(opened.pins, BoardManual):  # https://: the manifest names the current version
        return opened.pins.pin_paths[name].rstrip("/").rsplit("/", 1)[-1]
    versions = opened.pins.pin_versions(name, as_df=False)
    if not versions:
        raise AlexnetError(f"pin {name!r} on board {opened.location} has no versions: publish the model again.")
    return str(versions[-1].version)


def _read_meta(opened: Board, name: str, version: str | None) -> tuple[Any, str]:
    """The pins metadata of version ``version`` (None: the latest) of pin ``name``, and that version."""
    from pins.boards import BoardManual

    if name not in opened.pin_names():
        raise AlexnetError(
            f"board {opened.location} has no pin {name!r}: train with alexnet_train(model_pin = {name!r}) to publish "
            "one there, or give the board and name of an existing model pin."
        )
    latest = _latest_version(opened, name)
    wanted = latest if version is None else str(version)
    manual = isinstance(opened.pins, BoardManual)
    if manual and wanted != latest:
        raise AlexnetError(
            f"board {opened.location} is read over {opened.location.split('://', 1)[0]}://, where only the current "
            f"version of pin {name!r} "
            f"({latest}) can be read, not {wanted}: leave `version` out, or read the board from its own location."
        )
    if not manual and wanted != latest:
        known = [str(v.version) for v in opened.pins.pin_versions(name, as_df=False)]
        if wanted not in known:
            raise AlexnetError(f"pin {name!r} on board {opened.location} has no version {wanted!r}; its versions: "
                               f"{', '.join(known)}.")
    try:
        meta = opened.pins.pin_meta(name) if manual else opened.pins.pin_meta(name, wanted)
    except Exception as error:
        raise AlexnetError(f"cannot read pin {name!r} version {wanted} of board {opened.location}: "
                           f"{type(error).__name__}: {error}") from None
    return meta, wanted


def _checked_sha256(value: Any, where: str) -> str:
    """A SHA-256 of a pin's metadata, which names a folder of the model cache: 64 hexadecimal digits, or refused."""
    text = str(value)
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise AlexnetError(f"{where} gives {text[:80]!r} as a SHA-256: it was not written by alexnet; publish the "
                           "model again (train with model_pin).")
    return text


def _metadata_of(name: str, version: str) -> str:
    """How the checked download names where a model pin's SHA-256 comes from."""
    return f"the metadata of pin {name!r} version {version}"


def _cached(opened: Board, remote: str, local: str, sha256: str, size: int, where: str, pin: str) -> None:
    """``remote`` at ``local``, SHA-256 checked against what ``pin`` says: the cached copy when it still matches, else
    downloaded by the one checked download (:func:`alexnet.storage.transfer.download_verified`)."""
    if os.path.isfile(local) and sha256_file(local) == sha256:
        logger.info("%s: using the cached %s", where, local)
        return
    logger.info("%s: downloading %s (%.1f MB)", where, os.path.basename(remote), size / 1e6)
    # a new version, whole
    again = "publish the model again (a training with `model_pin`), or read another version (`version`)"
    folder = os.path.dirname(local)  # <sha256>/ in the cache: removed again when the file never comes into it
    made = not os.path.isdir(folder)
    try:
        download_verified(opened.fs, remote, local, sha256, what=where, retries=DOWNLOAD_RETRIES, pin=pin,
                          remedy=again, damaged_remedy=again)
    except BaseException:
        if made:
            with contextlib.suppress(OSError):  # another process's download into it: theirs
                os.rmdir(folder)
        raise


def _export_here(opened: Board, name: str, version: str, export: dict[str, Any], root: str, where: str) -> str:
    """The pin's export brought into the cache (SHA-256 checked); a SavedModel is extracted next to its zip. Its
    local path: the SavedModel's folder, or the ``.tflite`` file."""
    sha256, file = _checked_sha256(export["sha256"], where), str(export["file"])
    if file not in EXPORT_FILES.values():
        raise AlexnetError(f"{where} names its export {file!r}, not a file an export is pinned as "
                           f"({', '.join(sorted(EXPORT_FILES.values()))}): it was not written by alexnet; publish the "
                           "export again (alexnet_export(model, board = ..., name = ...)).")
    local = os.path.join(root, sha256, file)
    what = f"the {export.get('format')} export of {where}"
    _cached(opened, opened.path(name, version, file), local, sha256, int(export.get("bytes") or 0), what,
            _metadata_of(name, version))
    if export.get("format") != "savedmodel":
        return local
    folder = os.path.join(root, sha256, "savedmodel")
    if not os.path.isdir(folder):  # extracted once, whole: staged beside it, then renamed into place
        staged = f"{folder}.partial-{uuid.uuid4().hex[:8]}"
        try:
            extract_zip(local, staged, label=what, remedy="publish the export again (alexnet_export(model, "
                        "board = ..., name = ...))")
            os.replace(staged, folder)
        except OSError:
            if not os.path.isdir(folder):
                raise
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    return folder


@returns_result
def alexnet_model(
    board: str | os.PathLike | None = None,
    name: str = "alexnet",
    version: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Read model pin ``name`` (its latest version, or ``version``; ``name@version`` reads that version too) from
    ``board`` and bring its file here.

    ``board`` is any board string (folder, ``file://``, ``gs://``, ``s3://``, ``https://``). The file is
    downloaded into ``cache_dir`` (default :func:`default_model_cache`) under a temporary name, checked
    against the SHA-256 in the pin's metadata and renamed into place; a file already cached is reused when its
    SHA-256 matches. A mismatch raises :class:`~alexnet.errors.IntegrityError` ("tampered or damaged") and
    leaves nothing to load. A pin that does not exist, or is not a model pin (no ``kind: model`` in its
    metadata), raises :class:`~alexnet.errors.AlexnetError`. With ``export=True`` the export the pin carries
    beside the model (``alexnet_train(model_format = "keras+savedmodel")``, :func:`alexnet.alexnet_export` with a
    board) is brought here too, checked the same way, a SavedModel extracted; a pin without one is an error.

    Returns a plain dict (a list in R): ``path`` (the local file, with the pin's card beside it), ``name``, ``version``,
    ``board``, ``cache_dir`` (the absolute ``cache_dir`` given, else None: a process that uses the dict where ``path``
    is missing, such as a Spark worker on another machine, brings the file there again, or to its own default when
    None), ``sha256``, ``bytes``, ``formats`` (what the pin carries: ``keras``, and ``savedmodel`` or ``tflite`` when it
    has an export), ``export_path`` (the local SavedModel folder or ``.tflite`` file with ``export=True``, else None),
    and the card's fields: ``image_size``, ``num_classes``, ``class_ids``, ``class_names``, ``epochs``, ``metrics`` (the
    saved epoch's), ``best_epoch`` (with ``keep_best``: the 1-based epoch the weights are from, else ``None``),
    ``board_trained_from`` (the board the model was trained from), ``categories_version``, ``weights_sha256``,
    ``created``, ``evaluation`` (``None``, or the evaluation the model's training ended with: see
    :func:`alexnet.alexnet_spark_train`'s ``evaluate``), ``initial_model`` (what its training started from) and
    ``architecture`` (``dense_units`` and ``grouped``, which a run started from it must have; ``None`` on older cards).
    Give the dict as ``model`` to :func:`alexnet.alexnet_evaluate`, :func:`alexnet.alexnet_predict` or
    :func:`alexnet.alexnet_export`.
    """
    pin = declaration.check(ModelPinOptions, {"name": name, "version": version, **options}, "alexnet_model()")
    named, version = pin_and_version(pin.name, pin.version)
    return _read_model_pin(board, named, version, cache_dir=pin.cache_dir, export=pin.export, fetch=True)


def model_pin_reference(board: str | os.PathLike | None, name: str, version: str | None = None, *,
                        cache_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """What :func:`alexnet_model` returns of model pin ``name`` (its latest version, or ``version``) of ``board``, read
    from its metadata without bringing its file here (``path`` and ``export_path`` are None): a model that loading
    fetches when it is used, and only then (a training resumed from its checkpoint never does), into ``cache_dir``
    (:func:`fetch_again`; unset: the user cache of the machine that loads it)."""
    cache_dir = declaration.specs(ModelPinOptions)["cache_dir"].convert(cache_dir, "cache_dir")
    named, version = pin_and_version(check_read_pin(name, "name"), version)
    return _read_model_pin(board, named, version, cache_dir=cache_dir, export=False, fetch=False)


def fetch_again(model: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`alexnet_model` again for ``model`` (what it returned, in another process: a Spark worker, a process a
    job launches, where its ``path`` is missing): the same pin from its ``board``, ``name`` and ``version``, brought
    into the ``cache_dir`` it was read with (unset: this machine's :func:`default_model_cache`). A ``cache_dir`` this
    process cannot write is an :class:`AlexnetError` that says so, never a fetch into another folder."""
    cache_dir = model.get("cache_dir")
    if cache_dir is not None:
        made_folder(os.fspath(cache_dir), "cache_dir", "the user cache",
                    holds=f"the model {model['name']}@{model['version']} on {socket.gethostname()}, which fetches its "
                          "file again",
                    advice="give alexnet_model() a `cache_dir` that every machine using the model may write (a "
                           "folder of the same path on each), or leave it unset for each machine's own user cache.")
    return alexnet_model(model["board"], model["name"], model["version"], cache_dir=cache_dir)


def _read_model_pin(board: str | os.PathLike | None, name: str, version: str | None, *, cache_dir: Any,
                    export: bool, fetch: bool) -> dict[str, Any]:
    """:func:`alexnet_model`'s reading of a pin; without ``fetch``, its metadata alone."""
    try:
        opened = open_board(board)
        meta, version = _read_meta(opened, name, version)
    except AlexnetError:
        _refuse_a_saved_model(board)
        raise
    user = dict(meta.user or {})
    where = f"pin {name!r} version {version} of board {opened.location}"
    if user.get("kind") != MODEL_PIN_KIND or not user.get("sha256"):
        raise AlexnetError(
            f"{where} is not a model pin (its metadata has no kind: {MODEL_PIN_KIND}): give the name of a pin "
            "written by alexnet_train(model_pin = ...)."
        )
    card = ModelCard.from_dict(user, where)
    sha256 = _checked_sha256(user["sha256"], where)
    carried = dict(user.get("export") or {})
    local = export_path = None
    root = os.path.abspath(os.fspath(cache_dir)) if cache_dir is not None else default_model_cache()
    if fetch:
        files = [meta.file] if isinstance(meta.file, str) else list(meta.file)
        file = str(next(f for f in files if f != carried.get("file")))
        if not is_file_name(file):
            raise AlexnetError(f"{where} names its model file {file!r}, which is not a file of the pin's folder (it "
                               "would read a file outside it): it was not written by alexnet; publish the model again "
                               "(alexnet_train(model_pin = ...)), or use another version.")
        made_folder(root, "cache_dir", "the user cache", holds="the model")
        local = os.path.join(root, sha256, os.path.basename(file))
        _cached(opened, opened.path(name, version, file), local, sha256, int(user.get("bytes") or 0), where,
                _metadata_of(name, version))
        _card_beside(local, card)
    if export:
        if not carried.get("file") or not carried.get("sha256"):
            raise AlexnetError(f"{where} carries no export: publish one with alexnet_export(model, board = ..., name "
                               f"= {name!r}), or train with model_format = 'keras+savedmodel'.")
        export_path = _export_here(opened, name, version, carried, root, where)
    values = card.to_dict()
    values.pop("format", None)
    values["board_trained_from"] = values.pop("board")
    return {"path": local, "name": name, "version": version, "board": opened.location,
            "cache_dir": root if cache_dir is not None else None, "sha256": sha256,
            "bytes": int(user.get("bytes") or (os.path.getsize(local) if local else 0)),
            "formats": ["keras", *([str(carried["format"])] if carried.get("format") else [])],
            "export_path": export_path, **values}


def _card_beside(local: str, card: ModelCard) -> None:
    """Write the pin's ``card`` beside its model file brought to ``local``, so that the file's path (the model's
    ``path``), given alone, is read with its classes and image size, and exported; a cache that cannot be written
    goes without it."""
    from .saving import write_card

    try:
        write_card(local, card)
    except OSError as error:
        logger.debug("no card written beside %s: %s", local, error)


def _refuse_a_saved_model(board: str | os.PathLike | None) -> None:
    """Raise, saying where it is taken, when ``board`` (that holds no model pin) is a saved model instead: a
    ``model_dir`` or ``alexnet.keras``, which :func:`alexnet_model` does not read."""
    from .saved import model_source

    if board is None:
        return
    try:
        source = model_source(os.fspath(board))
    except AlexnetError:
        return  # not a model either: the board's own error stands
    if source.card is None:  # alexnet_train() saves a card beside each model (a URL that answers is no proof)
        return
    raise AlexnetError(f"{source.description} is a saved model (a model_dir or alexnet.keras), not a board: "
                       "alexnet_model() reads model pins; give the saved model as it is where a model is taken "
                       "(alexnet_evaluate(), alexnet_predict(), alexnet_features(), alexnet_export(), initial_model).")


# the board, then the pin's name and version (by position too), then where it is brought and whether with its export
declaration.take_declared(alexnet_model, ModelPinOptions, title="Its options, with their defaults:")
