"""Category zips given as images: a ``data`` list built by hand from a board's pins, as the original
r-tensorflow/alexnet built it, names each category's zip where pins 0.x named its extracted files (pins 1.x's
``pin_download()`` gives the file a pin holds, here ``<wnid>.zip``). :func:`unzipped` puts each such zip's files in
its place, extracted once into the user cache (``<user cache dir>/alexnet/unzipped``) and found there again while the
zip is unchanged (same path, size and modification time).

Layout of that cache, as a board's cache (:mod:`.cache`)::

    <key>-<zip's name>/<files> + .alexnet-cache.json   a zip's files with the marker that says they are complete
    .tmp/, .locks/                                     extractions under way, and the lock of each folder
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence

from ..progress import progress_bar
from ..scratch import make_scratch
from . import cache
from .fetch import category_lock, install_extraction
from .transfer import JPEG_ZIP_GROWS, extract_zip

log = logging.getLogger(__name__)

#: The folder of the user cache that holds the zips' files.
FOLDER = "unzipped"


def is_category_zip(path: str) -> bool:
    """Whether ``path`` names a zip file there is (by its name and first bytes: a JPEG named ``.zip`` is an image)."""
    import zipfile

    return path.lower().endswith(".zip") and os.path.isfile(path) and zipfile.is_zipfile(path)


def _folder(path: str, root: str) -> tuple[str, str]:
    """Where the cache ``root`` keeps the files of the zip at ``path``, and the key its marker records: the zip's real
    path, size and modification time."""
    stat = os.stat(path)
    key = cache.location_key(f"{os.path.realpath(path)}|{stat.st_size}|{stat.st_mtime_ns}")
    return os.path.join(root, f"{key}-{os.path.basename(path)[:-4]}"), key


def _extracted(path: str, root: str) -> list[str]:
    """The names of the files of the zip at ``path`` in the cache ``root``, extracted there unless another process
    did it meanwhile."""
    dest, key = _folder(path, root)
    seen = cache.marker_stamp(dest)
    with category_lock(root, dest, path):
        names = cache.cached_files(dest, key)  # extracted by another process while this one waited
        if names is not None:
            return names
        work = make_scratch(cache.FETCH_PREFIX, os.path.join(root, cache.TMP))
        try:
            staging = os.path.join(work, "files")
            os.makedirs(staging)
            files = extract_zip(path, staging, label=path, remedy="download it again", grows=JPEG_ZIP_GROWS)
            cache.write_marker(staging, key, files, item=path)
            install_extraction(staging, dest, key, seen)
            return [name for name, _, _ in files]
        finally:
            shutil.rmtree(work, ignore_errors=True)


def unzipped(files: Sequence[str], labels: Sequence[int], what: str) -> tuple[list[str], list[int]]:
    """``files`` and their ``labels`` with every category zip among them (:func:`is_category_zip`) replaced by the
    files it holds, each with the zip's label; ``files`` as they are when none is a zip. ``what`` names them in what
    is said (``data["image"]``)."""
    named = {path for path in files if path[-4:].lower() == ".zip"}  # by name first: no file is looked at otherwise
    zips = sorted(path for path in named if is_category_zip(path))
    if not zips:
        return list(files), list(labels)
    root = cache.open_cache(cache.cache_root(FOLDER), "category zips given as images")
    held: dict[str, list[str]] = {}
    for path in zips:
        dest, key = _folder(path, root)
        names = cache.cached_files(dest, key)
        if names is not None:
            held[path] = [os.path.join(dest, name) for name in names]
    left = [path for path in zips if path not in held]
    if left:
        log.info("%s names %d zip(s), each taken as a category's images (as pins' pin_download() gives them): "
                 "extracting %d into %s, once (found there again while the zip is unchanged)", what, len(zips),
                 len(left), root)
        with progress_bar(len(left), f"Unzipping {what}", unit="zip") as bar:
            for path in left:
                dest, _ = _folder(path, root)
                held[path] = [os.path.join(dest, name) for name in _extracted(path, root)]
                bar.update(1)
    out_files: list[str] = []
    out_labels: list[int] = []
    for path, label in zip(files, labels, strict=True):
        inside = held.get(path, [path])
        out_files += inside
        out_labels += [label] * len(inside)
    return out_files, out_labels
