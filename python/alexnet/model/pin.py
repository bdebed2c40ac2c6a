"""The model pin, written and read here only: :func:`publish_model` after training or export, ``alexnet_model()`` to
use it.

A model pin holds one ``alexnet.keras``; its metadata is the model card (:mod:`.card`) plus ``kind: model`` and
the file's ``sha256`` and ``bytes`` (:func:`model_pin_metadata`). It may also carry an export of the same model
beside it (``alexnet_train(model_format = "keras+savedmodel")``, or ``alexnet_export()`` with a board): the
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

import logging
import os
import re
import shutil
import socket
import uuid
from collections.abc import Mapping
from typing import Any

from ..checks import some_names
from ..declare import declaration
from ..declare.kinds import given_as
from ..errors import AlexnetError, BoardError
from ..result import returns_result
from ..storage.board import Board, open_board
from ..storage.cache import cache_root
from ..storage.layout import is_file_name
from ..storage.location import WRITABLE, resolve_location
from ..storage.outputs import made_folder
from ..storage.transfer import download_verified, extract_zip, retry, sha256_file
from .card import ModelCard
from .options import EXPORT_FILES, ModelPinOptions, check_read_pin

logger = logging.getLogger(__name__)

#: Attempts after the first of a download of a model pin's file that fails (a network error, say).
DOWNLOAD_RETRIES = 3

#: What a model pin's metadata says it is (``kind``), beside the board's format version (``alexnet``).
MODEL_PIN_KIND = "model"

#: What a model pin carries (the training setting ``model_format``): the Keras file alone, or an export beside it.
MODEL_FORMATS = ("keras", *(f"keras+{name}" for name in EXPORT_FILES))


def check_model_board(model_board: str | os.PathLike | None, data_board: str | None,
                      setting: str = "model_board") -> str:
    """The board a model pin goes to (``model_board``, given as the argument ``setting``, else the data's board),
    opened for writing to prove it can be; an :class:`AlexnetError` saying what to pass when there is none, a
    ``BoardError`` naming the argument when it cannot be written."""
    board = model_board if model_board is not None else data_board
    if board is None:
        raise AlexnetError(
            f"`model_pin` needs a board to write the model to, and `data` comes from no board: pass `{setting}` "
            "(a folder, gs:// or s3:// board)."
        )
    if model_board is not None:  # a mistyped location named as the argument that gave it, once
        resolve_location(model_board, setting, takes=WRITABLE)
    try:
        return open_board(board, write=True).location
    except BoardError as err:
        which = (f"`{setting}`" if model_board is not None else
                 f"the data's board, where `model_pin` publishes without a `{setting}`")
        raise BoardError(f"{which}: {err}") from None


def model_pin_metadata(card: ModelCard, sha256: str, size: int, export: dict[str, Any] | None = None
                       ) -> dict[str, Any]:
    """The pins metadata of a model pin: the card, the kind, the SHA-256 and size of its model file and, when it
    carries one, its ``export`` (``format``, ``file``, ``sha256``, ``bytes``)."""
    from ..storage.layout import FORMAT_VERSION

    extra = {"export": export} if export else {}
    return {"alexnet": FORMAT_VERSION, "kind": MODEL_PIN_KIND, "sha256": sha256, "bytes": int(size),
            **card.to_dict(), **extra}


def publish_model(board: str | None, name: str, model_file: str, card: ModelCard, *, retries: int = 3,
                  export_file: str | None = None, export_format: str | None = None,
                  export_top: int | None = None) -> dict[str, str]:
    """Upload ``model_file`` (an ``alexnet.keras`` saved for inference) as a new version of pin ``name`` on ``board``,
    with ``export_file`` beside it when given (named :data:`EXPORT_FILES` ``[export_format]``, returning the
    ``export_top`` classes per image, which its metadata records).

    The pin's metadata is :func:`model_pin_metadata`; the board's manifest lists the new version, so the pin
    can also be read over https://. A board that holds no pins yet gets a warning that the pin makes it a new board
    (a mistyped location would otherwise go unnoticed). Returns ``board`` (resolved), ``name`` and ``version``.
    """
    from ..storage.publish import publish_file, quiet_pins

    opened = open_board(board, write=True)
    files, export = [model_file], None
    if export_file is not None:
        wanted = EXPORT_FILES[str(export_format)]
        if os.path.basename(export_file) != wanted:
            raise AlexnetError(f"internal: a {export_format} export is pinned as {wanted}, not {export_file}")
        files.append(export_file)
        export = {"format": export_format, "file": wanted, "sha256": sha256_file(export_file),
                  "bytes": os.path.getsize(export_file), **({"top": int(export_top)} if export_top else {})}
    metadata = model_pin_metadata(card, sha256_file(model_file), os.path.getsize(model_file), export)
    names = opened.pin_names()
    exists = name in names
    if exists:
        _warn_of_other_classes(opened, name, card)
    elif not names:  # reading from a board that is not there is an error: a mistyped location is told here
        logger.warning("Board %s holds no pins: model pin %s makes it a new board. If you meant an existing board, "
                       "its location is mistyped.", opened.location, name)
    with quiet_pins():
        version = publish_file(opened, files, name, title=f"AlexNet, {card.num_classes} classes",
                               metadata=metadata, exists=exists, retries=retries)
    retry("writing the board manifest", lambda: opened.write_manifest({name: version}), retries)
    return {"board": opened.location, "name": name, "version": version}


def published_with(board: str | None, name: str, weights_sha256: str | None, export_format: str | None = None,
                   export_top: int | None = None) -> dict[str, str] | None:
    """``board`` (resolved), ``name`` and ``version`` of the newest version of model pin ``name`` when it holds a
    model of these weights (its card's ``weights_sha256``) with what is asked: the Keras file, which every version
    holds, when ``export_format`` is None (an export pinned beside it since stays the newest version's), else an
    export of that format returning ``export_top`` classes per image too. ``None`` when the pin is not there, holds
    other weights or another export, or the card does not know its weights' SHA-256."""
    opened = open_board(board)
    if not weights_sha256 or name not in opened.pin_names():
        return None
    user, version = _latest_metadata(opened, name)
    if user.get("kind") != MODEL_PIN_KIND or user.get("weights_sha256") != weights_sha256:
        return None
    carried = dict(user.get("export") or {})
    if export_format is not None and (carried.get("format") != export_format or carried.get("top") != export_top):
        return None
    return {"board": opened.location, "name": name, "version": version}


def _warn_of_other_classes(opened: Board, name: str, card: ModelCard) -> None:
    """Warn when the latest version of model pin ``name`` is a model of other classes than ``card``'s: the new version
    replaces it as the one read by default."""
    user, version = _latest_metadata(opened, name)
    if user.get("kind") != MODEL_PIN_KIND:
        return
    theirs = [str(v) for v in user.get("class_ids") or []]
    if theirs and theirs != list(card.class_ids):
        logger.warning("Model pin %s on %s held a model of other classes (%d: %s) in its version %s; the new version, "
                       "of %d classes (%s), is now the one read by default: give another name to keep both in reach.",
                       name, opened.location, len(theirs), some_names(theirs), version, card.num_classes,
                       some_names(card.class_ids))


def check_pin_holds_models(board: str, name: str, setting: str = "model_pin") -> None:
    """Raise when pin ``name`` of ``board`` (resolved) is there and holds something else than models (a category's
    images, one of the board's tables): a model published as ``name`` would be a version of it. The board is opened
    for writing, as the model goes there: a prefix of a bucket that holds nothing yet is a board to write to."""
    opened = open_board(board, write=True)
    if name in opened.pin_names() and _latest_metadata(opened, name)[0].get("kind") != MODEL_PIN_KIND:
        raise AlexnetError(f"{given_as(f'`{setting}`', repr(name))}: board {opened.location} has a pin {name!r} that "
                           "holds no model (a category's images or one of the board's tables): choose another name, "
                           f"e.g. {given_as(setting, repr(name + '-model'))}.")


def _latest_metadata(opened: Board, name: str) -> tuple[dict[str, Any], str]:
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
            f"board {opened.location} is read over https://, where only the current version of pin {name!r} "
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
    again = "publish the model again (train with `model_pin`), or use another version"  # a new version, whole
    download_verified(opened.fs, remote, local, sha256, what=where, retries=DOWNLOAD_RETRIES, pin=pin, remedy=again,
                      damaged_remedy=again)


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
    """Read model pin ``name`` (its latest version, or ``version``) from ``board`` and bring its file here.

    ``board`` is any board string (folder, ``file://``, ``gs://``, ``s3://``, ``https://``). The file is
    downloaded into ``cache_dir`` (default :func:`default_model_cache`) under a temporary name, checked
    against the SHA-256 in the pin's metadata and renamed into place; a file already cached is reused when its
    SHA-256 matches. A mismatch raises :class:`~alexnet.errors.IntegrityError` ("tampered or damaged") and
    leaves nothing to load. A pin that does not exist, or is not a model pin (no ``kind: model`` in its
    metadata), raises :class:`~alexnet.errors.AlexnetError`. With ``export=True`` the export the pin carries
    beside the model (``alexnet_train(model_format = "keras+savedmodel")``, :func:`alexnet.alexnet_export` with a
    board) is brought here too, checked the same way, a SavedModel extracted; a pin without one is an error.

    Returns a plain dict (a list in R): ``path`` (the local file), ``name``, ``version``, ``board``, ``cache_dir``
    (the absolute ``cache_dir`` given, else None: a process that uses the dict where ``path`` is missing, such as a
    Spark worker on another machine, brings the file there again, or to its own default when None), ``sha256``,
    ``bytes``, ``formats`` (what the pin carries: ``keras``, and ``savedmodel`` or ``tflite`` when it has an
    export), ``export_path`` (the local SavedModel folder or ``.tflite`` file with ``export=True``, else
    None), and the card's fields: ``image_size``, ``num_classes``, ``class_ids``,
    ``class_names``, ``epochs``, ``metrics`` (the saved epoch's), ``best_epoch`` (with ``keep_best``: the 1-based
    epoch the weights are from, else ``None``), ``board_trained_from`` (the board the model was trained from),
    ``categories_version``, ``weights_sha256``, ``created``, ``evaluation`` (``None``, or the evaluation the
    model's training ended with: see :func:`alexnet.alexnet_spark_train`'s ``evaluate``), ``initial_model`` (what its
    training started from) and ``architecture`` (``dense_units`` and ``grouped``, which a run started from it must
    have; ``None`` on older cards). Give the dict as ``model``
    to :func:`alexnet.alexnet_evaluate`, :func:`alexnet.alexnet_predict` or :func:`alexnet.alexnet_export`.
    """
    pin = declaration.check(ModelPinOptions, {"name": name, "version": version, **options}, "alexnet_model()")
    return _read_model_pin(board, pin.name, pin.version, cache_dir=pin.cache_dir, export=pin.export, fetch=True)


def model_pin_reference(board: str | os.PathLike | None, name: str, version: str | None = None, *,
                        cache_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """What :func:`alexnet_model` returns of model pin ``name`` (its latest version, or ``version``) of ``board``, read
    from its metadata without bringing its file here (``path`` and ``export_path`` are None): a model that loading
    fetches when it is used, and only then (a training resumed from its checkpoint never does), into ``cache_dir``
    (:func:`fetch_again`; unset: the user cache of the machine that loads it)."""
    cache_dir = declaration.specs(ModelPinOptions)["cache_dir"].convert(cache_dir, "cache_dir")
    return _read_model_pin(board, check_read_pin(name, "name"), version, cache_dir=cache_dir, export=False,
                           fetch=False)


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
