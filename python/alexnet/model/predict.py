"""``alexnet_predict()``: the most probable classes of images, by WordNet id and name, best first.

Images are decoded as evaluation decodes them (:func:`alexnet.input.decode.decode_for_eval`: the centre crop at
the card's image size), so CMYK and grayscale JPEGs and PNGs named ``.JPEG`` all work. A folder (local, ``gs://`` or
``s3://``) stands for its image files, in the order of their names. Images are read :data:`READERS` at a time (an
object in a bucket is a round trip) and predicted a chunk at a time (:func:`decoded_chunks`), so that memory holds one
chunk's files and centre crops however many images are given. An image that cannot be used stops the predicting, and
the rest are only read, checked and decoded: the unusable ones are named together in one error, never dropped, and
nothing is returned.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..data.parts import is_image_name
from ..declare import declaration
from ..errors import AlexnetError, reason
from ..input.formats import (
    ANIMATED_WEBP,
    ANIMATED_WEBP_REASON,
    IMAGE_EXTENSIONS,
    IMAGE_FORMATS,
    formats_read,
    image_format,
)
from ..progress import progress_bar
from ..result import returns_result
from .options import PredictOptions
from .saved import load_model

logger = logging.getLogger(__name__)

#: The files of a folder given as an image: those of the formats :func:`~alexnet.input.decode.decode_for_eval` reads
#: (:data:`~alexnet.input.decode.IMAGE_FORMATS`). An upload reads fewer (JPEG and PNG, the formats of ImageNet).
FOLDER_IMAGES: frozenset[str] = IMAGE_EXTENSIONS
#: Images read at once; each chunk of ``4 * READERS`` is read, checked, decoded and used before the next is read.
READERS = 16


#: What ``images`` takes, for the messages that refuse something else.
IMAGES_TAKEN = "give image files, folders, locations or encoded image bytes (a JPEG's or PNG's)"


def _pixels_refused(value: Any) -> AlexnetError | None:
    """The error for ``value`` when it holds pixels (a NumPy array of numbers, a PIL image), which ``images`` does
    not take: found from the type alone, before any conversion of a large array."""
    if isinstance(value, np.ndarray) and value.dtype.kind not in "USO":
        what = f"a NumPy array of {value.dtype} of shape {value.shape}"
    elif type(value).__module__.split(".")[0] == "PIL":
        what = f"a PIL image ({type(value).__name__})"
    else:
        return None
    return AlexnetError(f"`images` takes no pixels, not {what}: {IMAGES_TAKEN}; encode pixels first, e.g. with "
                        "PIL: Image.fromarray(pixels).save(buffer, \"PNG\") into buffer = io.BytesIO(), then give "
                        "buffer.getvalue().")


def image_list(images: Any) -> list[str | bytes]:
    """``images`` as given to :func:`alexnet_predict` (one or many paths, locations, folders or encoded images as
    ``bytes``, ``bytearray`` or ``memoryview``; R's character vectors, raw vectors and NumPy arrays of strings too) as
    a list; an :class:`AlexnetError` when it is empty or holds something else (pixels are refused before any
    conversion, :func:`_pixels_refused`)."""
    if isinstance(images, (str, bytes, bytearray, memoryview, os.PathLike)):
        images = [images]
    refused = _pixels_refused(images)
    if refused is not None:
        raise refused
    if isinstance(images, np.ndarray):
        images = images.reshape(-1).tolist()
    if not isinstance(images, Iterable) or isinstance(images, Mapping):
        raise AlexnetError(f"`images` must be paths or locations of images, not a {type(images).__name__}: "
                           f"{IMAGES_TAKEN}.")
    out: list[str | bytes] = []
    for value in images:
        if isinstance(value, (bytes, bytearray, memoryview)):
            out.append(bytes(value))
        elif isinstance(value, (str, os.PathLike)):
            out.append(os.fspath(value))
        else:
            refused = _pixels_refused(value)
            if refused is not None:
                raise refused
            raise AlexnetError(f"`images` holds a {type(value).__name__} ({value!r:.40}), not a path, location or "
                               f"encoded image bytes: {IMAGES_TAKEN}.")
    if not out:
        raise AlexnetError(f"`images` is empty: {IMAGES_TAKEN}.")
    return out


def _with_names(items: Sequence[str | bytes], filesystems: dict[str, Any]) \
        -> tuple[list[str | bytes], list[str]]:
    """``items`` with each folder replaced by its image files (:func:`_folder_files`), and the name of each in the
    records: its path or location, or ``<bytes i>`` for bytes at position ``i`` of ``items``."""
    files: list[str | bytes] = []
    names: list[str] = []
    for i, item in enumerate(items):
        for file in _folder_files(item, filesystems):
            files.append(file)
            names.append(f"<bytes {i}>" if isinstance(file, bytes) else file)
    return files, names


def _folder_files(item: str | bytes, filesystems: dict[str, Any]) -> list[str | bytes]:
    """``[item]``, or the image files of the folder ``item`` (:data:`FOLDER_IMAGES`, hidden ones left out), sorted
    by name and named ``item/name``. A bucket location is asked whether it is a folder only when its name does not
    end as an image file's; one that cannot be resolved or reached is left to the reading, which names it."""
    from ..storage.location import fs_path, location_kind, resolve_location

    if isinstance(item, bytes):
        return [item]
    try:
        resolved = resolve_location(item, "images")
        kind = location_kind(resolved)
        if kind == "file":
            if not os.path.isdir(resolved):
                return [item]
            with os.scandir(resolved) as entries:
                names = [entry.name for entry in entries if entry.is_file()]
        elif kind == "http" or is_image_name(resolved, FOLDER_IMAGES):
            return [item]
        else:
            fs, path = _filesystem(resolved, filesystems), fs_path(resolved)
            if not fs.isdir(path):
                return [item]
            names = [info["name"].rsplit("/", 1)[-1] for info in fs.ls(path, detail=True) if info["type"] == "file"]
    except (AlexnetError, OSError):
        return [item]
    images = sorted(name for name in names if is_image_name(name, FOLDER_IMAGES))
    if not images:
        raise AlexnetError(f"the folder {item} holds no image files ({', '.join(sorted(FOLDER_IMAGES))}; the folders "
                           "in it are not read): give the images themselves, or a folder that holds them.")
    base = item.rstrip("/")
    return [f"{base}/{name}" for name in images]


def read_image(location: str, filesystems: dict[str, Any]) -> bytes:
    """The bytes of the image at ``location`` (a path, ``file://``, ``gs://``, ``s3://`` or ``https://``).

    ``filesystems`` keeps the file system of each kind of location once opened, so that a bucket's credentials are
    looked up and its service reached once for every image of a prediction, not once an image."""
    from ..storage.location import fs_path, location_kind, resolve_location

    resolved = resolve_location(location, "images")
    if location_kind(resolved) == "file":
        with open(resolved, "rb") as f:
            return f.read()
    return bytes(_filesystem(resolved, filesystems).cat_file(fs_path(resolved)))


def _filesystem(resolved: str, filesystems: dict[str, Any]) -> Any:
    """The file system of the resolved bucket or URL ``resolved``: the one in ``filesystems`` for its kind, or one
    opened now (and kept there)."""
    from ..storage.location import location_kind, open_filesystem

    kind = location_kind(resolved)
    if kind not in filesystems:
        filesystems[kind] = open_filesystem(resolved, what="image")
    return filesystems[kind]


def _read(item: str | bytes, filesystems: dict[str, Any]) -> tuple[bytes | None, str]:
    """The bytes of ``item`` (itself when it is bytes), or ``None`` and why they cannot be read."""
    if isinstance(item, bytes):
        return item, ""
    try:
        return read_image(item, filesystems), ""
    except AlexnetError as error:
        return None, str(error)
    except Exception as error:
        answered = _server_answer(item, error)
        if answered:
            return None, answered
        if isinstance(error, OSError):
            return None, f"cannot be read ({reason(error)})"
        raise


#: aiohttp's error for a URL answered with an error status, by module and name (aiohttp is imported with a URL's file
#: system only).
_STATUS_ERROR = "aiohttp.client_exceptions.ClientResponseError"


def _server_answer(location: str, error: BaseException) -> str:
    """What the server of the URL ``location`` answered when ``error`` is its error status (fsspec raises a 404 as
    ``FileNotFoundError``, whose words, those of a file missing on a disk, would say no such thing; any other status
    as aiohttp's ``ClientResponseError``): ``the server answered 404 (not found)``; else ``""``."""
    from http import HTTPStatus

    if location.split("://", 1)[0].lower() not in ("http", "https"):
        return ""
    status = getattr(error, "status", None)
    if isinstance(error, FileNotFoundError):
        status = 404
    elif not isinstance(status, int) or not any(f"{cls.__module__}.{cls.__name__}" == _STATUS_ERROR
                                                for cls in type(error).__mro__):
        return ""
    try:
        phrase = HTTPStatus(status).phrase.lower()
    except ValueError:  # a status of the server's own
        phrase = "an error status"
    return f"the server answered {status} ({phrase})"


def not_read(data: bytes) -> str:
    """Why the image ``data`` is of a format that is not read (``TIFF is not read (...)``), or ``""``: for one that
    is (:data:`~alexnet.input.decode.IMAGE_FORMATS`), and for bytes Pillow does not know either, which
    :func:`~alexnet.data.images.check_image` names."""
    from PIL import Image

    found = image_format(data)
    if not data or found in IMAGE_FORMATS:
        return ""
    if found is None:
        try:
            with Image.open(io.BytesIO(data)) as img:
                found = img.format or "its format"
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
            return ""
    if found == ANIMATED_WEBP:  # a WebP, of the one kind not read
        return ANIMATED_WEBP_REASON
    return f"{found} is not read (only {formats_read()} images are)"


def decoded_chunks(images: Sequence[str | bytes], image_size: int, outcome: str, what: str, *, skip: bool = False) \
        -> Iterator[tuple[list[str], np.ndarray]]:
    """The images of ``images`` (as :func:`alexnet_predict` takes them, through :func:`image_list`: a folder stands for
    its image files) decoded as evaluation decodes them, a chunk at a time: each chunk's usable images, by their name
    in the records, and their pixels ``[n, image_size, image_size, 3]``.

    Memory holds one chunk (``4 * READERS`` images) and what the caller keeps of it, however many images are given.
    Chunks are given while every image so far is usable; after the first that is not, the rest are only read, checked
    and decoded, and one :class:`AlexnetError` then names every image that cannot be used and says ``outcome`` (what was
    therefore not done), so that nothing half done is returned. With ``skip``, every chunk's usable images are given,
    and those that cannot be used are named in one warning at the end (an error when no image can be used). The
    progress bar ``what`` counts the images whose chunk the caller is done with."""
    from ..data.images import check_image, own_pixel_limit
    from ..input.decode import decode_for_eval
    from ..tfimport import tf

    filesystems: dict[str, Any] = {}  # each kind of bucket opened once for every image
    items, names = _with_names(images, filesystems)
    problems: list[str] = []
    chunk = 4 * READERS
    with ThreadPoolExecutor(max_workers=min(READERS, len(items)), thread_name_prefix="alexnet-predict") as pool, \
            progress_bar(len(items), what, unit="img") as bar:
        for start in range(0, len(items), chunk):
            read = pool.map(_read, items[start : start + chunk], [filesystems] * chunk)
            usable_names, pixels = [], []
            for name, (data, reason) in zip(names[start : start + chunk], read, strict=True):
                if data is not None:
                    with own_pixel_limit():  # here, not around the chunks this generator gives its caller
                        unread = not_read(data)
                        usable, reason = (None, unread) if unread else check_image(data)
                else:
                    usable = None
                if usable is None:
                    problems.append(f"{name}: {reason}")
                    continue
                try:
                    decoded = decode_for_eval(tf.constant(data), image_size).numpy()
                except (tf.errors.OpError, ValueError) as error:
                    problems.append(f"{name}: cannot be decoded ({type(error).__name__})")
                    continue
                if skip or not problems:  # after an unusable image, the rest are decoded only to be named if they fail
                    pixels.append(decoded)
                    usable_names.append(name)
            if pixels and (skip or not problems):
                yield usable_names, np.stack(pixels)
            bar.update(min(chunk, len(items) - start))
    if problems and (not skip or len(problems) == len(items)):
        raise AlexnetError(f"{len(problems)} of {len(items)} image(s) cannot be used, so {outcome}:\n  "
                           + "\n  ".join(problems) + "\nFix or leave out these images"
                           + (", or give skip_bad = True to go on without them." if not skip else "."))
    if problems:
        logger.warning("Left out %d of %d image(s) that cannot be used (`skip_bad`):\n  %s", len(problems), len(items),
                       "\n  ".join(problems))


#: The defaults of a prediction's options: ``top`` is also given by position.
_DEFAULTS = declaration.defaults(PredictOptions)


@returns_result
def alexnet_predict(model: Any, images: Any, top: int = _DEFAULTS["top"], **options: Any) -> list[dict[str, Any]]:
    """The ``top`` most probable classes of each image, in the order the images are given.

    ``model``: a model pin from :func:`alexnet.alexnet_model`, a ``model_dir`` or ``alexnet.keras`` location,
    or (Python) a ``keras.Model``. ``images``: file paths or locations (folder files, ``file://``, ``gs://``,
    ``s3://``, ``https://``), folders (local, ``gs://``, ``s3://``: their image files, :data:`FOLDER_IMAGES`, by
    name) or encoded images (a JPEG's or PNG's ``bytes``, ``bytearray`` or ``memoryview``; R's raw vectors). Pixels
    (a NumPy array of numbers, a PIL image) are refused: encode them first. Each is decoded as evaluation does, at
    the card's image size, and scored ``batch_size`` at a time. Its options
    (:class:`~alexnet.model.options.PredictOptions`) are listed below.

    Returns one record per image and rank: ``image`` (as given, or ``<bytes i>`` for the ``i``-th image given
    as bytes, 0-based), ``rank`` (1 = most probable), ``id`` (the class's WordNet id, from the model's card),
    ``name`` and ``probability``; within an image, probabilities descend. Images that cannot be read or decoded
    raise one :class:`AlexnetError` naming each of them, and nothing is returned (images are read and predicted a
    chunk at a time: see :func:`decoded_chunks`); with ``skip_bad``, they are left out, named in a warning.
    """
    items = image_list(images)
    chosen = declaration.check(PredictOptions, {"top": top, **options}, "alexnet_predict()")
    batch_size = chosen.batch_size
    loaded = load_model(model)
    card = loaded.card
    top = min(chosen.top, card.num_classes)
    records: list[dict[str, Any]] = []
    for names, pixels in decoded_chunks(items, card.image_size, "nothing was predicted", "predict",
                                        skip=chosen.skip_bad):
        for start in range(0, len(pixels), batch_size):
            probabilities = np.asarray(loaded.model.predict_on_batch(pixels[start : start + batch_size]))
            for offset, row in enumerate(probabilities):
                order = np.argsort(-row, kind="stable")[:top]
                for rank, label in enumerate(order, start=1):
                    records.append({"image": names[start + offset], "rank": rank, "id": card.class_ids[label],
                                    "name": card.class_names[label], "probability": float(row[label])})
    return records


declaration.take_declared(alexnet_predict, PredictOptions, title="Its options, with their defaults:")
