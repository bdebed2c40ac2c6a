"""The extraction cache's layout: where a board's cache is, where each category's files live, and the marker
that says an extraction is complete, so that nothing half-written is ever trusted.

Layout of a cache folder (by default ``<user cache dir>/alexnet/data/<hash of the board>``)::

    train/<wnid>/<files>  + .alexnet-cache.json     a category's training zip, extracted, with its marker
    val/<wnid>/<files>    + .alexnet-cache.json     its validation zip, likewise
    .tmp/fetch-<random>/                            a fetch's downloads and extractions in progress, with its
                                                    owner (host and process id): removed as it ends, or by the
                                                    next fetch when its process was killed
    .locks/<split>-<wnid>.lock                      held by the process bringing that folder in
    train/<wnid>/.alexnet-checked.json              the image check's result there (written after the first run)

The marker holds the zip's sha256 and every file's name, size and CRC-32, as the zip recorded them. Beside it,
``.alexnet-checked.json`` records which files the usable-image check (:mod:`alexnet.input.scan`) found bad, for that
sha256 and that check, so that a category is checked once, not at every run; a category fetched again is a new folder
without it. A cached
folder counts when its marker names the expected sha256 and every file is there with its size
(:func:`cached_files`); with ``verify`` every file's CRC-32 is checked as well, which finds bytes changed
in place at the cost of reading them. Bringing zips in (staged in ``.tmp``, marked, then renamed into place)
is :mod:`alexnet.storage.fetch`'s job.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from ..checks import some_names
from ..errors import AlexnetError, without_passwords
from ..scratch import sweep_stale, sweep_unchanged
from .layout import is_file_name
from .outputs import local_location, made_folder
from .transfer import safe_member
from .zipformat import crc32

log = logging.getLogger(__name__)

MARKER = ".alexnet-cache.json"
#: The file of a category folder that remembers which of its files the usable-image check found bad
#: (:func:`read_checked`, :func:`record_checked`); written in a temporary file of this name's prefix, then renamed.
CHECKED = ".alexnet-checked.json"
#: The names of a category folder the cache writes itself (the marker, and the marker while it is written; the record
#: of the image check): no file of a zip may have them.
RESERVED = frozenset({MARKER, MARKER + ".part", CHECKED})
TMP = ".tmp"
#: How the folders of fetches in ``.tmp`` begin (:func:`alexnet.scratch.make_scratch` folders, which name their owner).
FETCH_PREFIX = "fetch-"
#: The folder of the cache's lock files (:func:`alexnet.storage.fetch.category_lock`): one per category folder, kept
#: (a lock file removed while held would let a third process lock a new one).
LOCKS = ".locks"
#: What :func:`marker_stamp` says of a marker: its inode and modification time, None when there is none.
Stamp = tuple[int, int] | None


def cache_root(*parts: str) -> str:
    """``parts`` joined under the package's folder of the user's cache directory (``~/.cache/alexnet`` on Linux),
    the one place every default cache is: ``board`` (the default board), ``data/<key>`` (a board's extracted
    categories), ``models`` (model pins' files; ``models/remote/<key>``, copies of models read from a bucket) and
    ``precision.json`` (the precision measurements)."""
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("alexnet"), *parts)


def location_key(location: str) -> str:
    """The name of the folder of what is cached of ``location`` (a resolved location string): the first 16 hex
    digits of its SHA-256."""
    return hashlib.sha256(location.encode()).hexdigest()[:16]


def default_cache_dir(location: str) -> str:
    """``<user cache dir>/alexnet/data/<location_key(location)>``: one cache per board."""
    return cache_root("data", location_key(location))


def open_cache(cache_dir: str | os.PathLike | None, location: str) -> str:
    """The absolute cache folder (``cache_dir``, else :func:`default_cache_dir`), with its ``.tmp`` folder made
    and cleared of what interrupted runs left there (:func:`_clean_stale_tmp`).

    A cache holds one board's categories: two boards may name different images by the same category id, and a fetch
    from one would replace the other's files. The board a cache was first opened for is recorded in it
    (:data:`BOARD_FILE`), and another board given the same ``cache_dir`` is an :class:`AlexnetError`.

    A cache this process may read but not write (shared read-only, a read-only mount) is opened as it is: what it
    holds is read, and a fetch that finds a zip missing there says the cache cannot be written."""
    if cache_dir is None:
        root = os.path.abspath(default_cache_dir(location))
    else:
        root = os.path.abspath(local_location(cache_dir, "cache_dir", "the cache"))
        _not_others(root)
    tmp = os.path.join(root, TMP)
    try:
        for own in (tmp, os.path.join(root, LOCKS)):
            made_folder(own, "cache_dir", "the user cache", holds="the cache", root=root)
        writable = True
    except AlexnetError:
        if not (os.path.isdir(root) and os.access(root, os.R_OK | os.X_OK)) or os.access(root, os.W_OK):
            raise
        writable = False
        log.debug("the cache %s cannot be written: what it holds is read", root)
    # a folder by any path, a URL without its password
    _own_board(root, os.path.realpath(location) if "://" not in location else without_passwords(location))
    if writable:
        _clean_stale_tmp(tmp)
    return root


def _not_others(root: str) -> None:
    """Refuse ``root`` as a cache when it is a folder that holds files and is no cache: a fetch replaces a category's
    folder whole (``train/<wnid>``, torchvision's layout of ImageNet too), and would delete what was there."""
    try:
        held = [entry for entry in os.listdir(root) if entry not in (BOARD_FILE, TMP, LOCKS)]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return  # made as a cache, refused as a file, or read as it is: open_cache says which
    if held and not any(os.path.exists(os.path.join(root, own)) for own in (BOARD_FILE, TMP, LOCKS)):
        found = some_names(sorted(held))
        raise AlexnetError(f"`cache_dir` = {root} holds files and is no cache of this package ({found}): a fetch "
                           "replaces each category's folder there whole, deleting what it held; give an empty or new "
                           "folder.")


#: The file of a cache folder that names the board its categories are from.
BOARD_FILE = ".alexnet-board"


def _own_board(root: str, location: str) -> None:
    """Record ``location`` as the board of the cache ``root``, or refuse it when the cache holds another board's."""
    path = os.path.join(root, BOARD_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            recorded = f.read().strip()
    except FileNotFoundError:
        recorded = ""
    # a record an earlier version wrote holds a board's URL with its password: compared as it is said now, and
    # written again so
    written, recorded = recorded, without_passwords(recorded)
    if recorded and recorded != location:
        raise AlexnetError(f"`cache_dir` = {root} holds the categories of board {recorded}, and a cache holds one "
                           f"board's (a category of board {location} would replace files of the same category id "
                           "there): give this board a `cache_dir` of its own, or leave `cache_dir` unset (each "
                           "board then has its own).")
    if not recorded or written != recorded:
        staged = f"{path}.{os.getpid()}.tmp"
        with contextlib.suppress(OSError):  # a cache that cannot record it still works, unguarded
            with open(staged, "w", encoding="utf-8") as f:
                f.write(location + "\n")
            os.replace(staged, path)


def category_folder(root: str, wnid: str, *, validation: bool = False) -> str:
    """Where category ``wnid``'s training (or, with ``validation``, validation) files live in the cache ``root``;
    an id that is not one folder's name (``../x``) is refused: nothing is written outside the cache."""
    if not is_file_name(wnid):
        raise AlexnetError(f"category {wnid!r} is not a folder name: a board's category ids never hold a path; "
                           "upload the data again")
    return os.path.join(root, "val" if validation else "train", wnid)


def _clean_stale_tmp(tmp: str) -> None:
    """Remove from ``tmp`` the folders of this host's fetches whose process has ended (killed, they could not remove
    their own), and what else is there that has not changed for a day: another host's or container's (whose
    processes this one cannot see), an older version's, or a killed fetch's whose process id has since been given
    to another process (a container restarted)."""
    sweep_stale(FETCH_PREFIX, tmp)
    sweep_unchanged(tmp)


def read_marker(folder: str) -> dict[str, Any] | None:
    """The marker of ``folder``, or None when it has none that can be read."""
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            marker = json.load(f)
        return marker if isinstance(marker, dict) else None
    except (OSError, ValueError):
        return None


def marker_stamp(folder: str) -> Stamp:
    """The inode and modification time (ns) of ``folder``'s marker, None when it has none: a marker written anew
    since an earlier look has another stamp."""
    try:
        info = os.stat(os.path.join(folder, MARKER))
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


def write_marker(folder: str, sha256: str, files: Sequence[tuple[str, int, int]], **extra: Any) -> None:
    """Describe the extraction in ``folder``: the zip's ``sha256`` and ``(name, size, crc32)`` of every file."""
    marker = {"sha256": sha256, **extra, "files": [list(entry) for entry in files]}
    part = os.path.join(folder, MARKER + ".part")  # one of RESERVED
    with open(part, "w", encoding="utf-8") as f:
        json.dump(marker, f)
    os.replace(part, os.path.join(folder, MARKER))


def read_checked(folder: str, sha256: str, check: str) -> tuple[set[str], set[str]]:
    """The files of ``folder`` that the image check ``check`` (its kind and version) has read, and those of them it
    found bad, as recorded when the folder held the zip ``sha256``; none recorded, or recorded of another zip, is
    two empty sets."""
    try:
        with open(os.path.join(folder, CHECKED), encoding="utf-8") as f:
            record = json.load(f)
        if not isinstance(record, dict) or record.get("sha256") != sha256:
            return set(), set()
        result = record.get("checks", {}).get(check, {})
        return set(result.get("checked", [])), set(result.get("bad", []))
    except (OSError, ValueError, AttributeError, TypeError):
        return set(), set()


def record_checked(folder: str, sha256: str, check: str, checked: set[str], bad: set[str], stamp: Stamp) -> None:
    """Record in ``folder`` that the image check ``check`` read the files ``checked`` of the zip ``sha256`` and found
    ``bad`` among them (added to what was recorded of that check; another check's record is kept). Nothing is
    written when the folder's marker no longer has the ``stamp`` it had when the check began (the category was
    fetched again meanwhile), nor when the folder cannot be written (a shared, read-only cache: the check then runs
    every time). Written whole under a temporary name, then renamed, as the marker is."""
    import tempfile

    if marker_stamp(folder) != stamp:
        return
    try:
        with open(os.path.join(folder, CHECKED), encoding="utf-8") as f:
            record = json.load(f)
        if not isinstance(record, dict) or record.get("sha256") != sha256 or not isinstance(record.get("checks"), dict):
            raise ValueError
    except (OSError, ValueError):
        record = {"sha256": sha256, "checks": {}}
    before, before_bad = read_checked(folder, sha256, check)
    bad = (before_bad - checked) | bad
    record["checks"][check] = {"checked": sorted(before | checked), "bad": sorted(bad)}
    try:
        # a new file of its own (mkstemp never takes an existing name, so no file of the zip is overwritten)
        handle, part = tempfile.mkstemp(prefix=CHECKED + ".", suffix=".part", dir=folder)
    except OSError as error:
        log.debug("%s cannot record its image check: %s", folder, error)
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.chmod(part, 0o644)  # as readable as the marker, for the other users of a shared cache
        os.replace(part, os.path.join(folder, CHECKED))
    except OSError as error:
        log.debug("%s cannot record its image check: %s", folder, error)
        with contextlib.suppress(OSError):
            os.remove(part)


def crc32_file(path: str) -> int:
    """The CRC-32 of a file, as zip archives record it."""
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = crc32(block, crc)
    return crc


def cached_files(folder: str, sha256: str, *, verify: bool = False) -> list[str] | None:
    """The file names extracted in ``folder`` if it holds a complete extraction of the zip ``sha256``, else None.

    Complete means: the marker names that sha256, and every file it lists exists with its size; with
    ``verify``, also with its CRC-32 (a marker without CRCs then does not count).
    """
    marker = read_marker(folder)
    if marker is None or marker.get("sha256") != sha256:
        return None
    names = []
    for entry in marker.get("files", []):
        name, size, *rest = entry
        if safe_member(str(name)) != name:  # a marker written by another hand (a shared cache): not the fetch's
            log.warning("%s: its record names %r, which no extraction writes; fetching the zip again", folder, name)
            return None
        path = os.path.join(folder, name)
        try:
            if os.stat(path).st_size != size:
                return None
            if verify and (not rest or crc32_file(path) != int(rest[0])):
                log.warning("%s in the cache is damaged (its CRC-32 differs from the zip's)", path)
                return None
        except OSError:
            return None
        names.append(name)
    return names
