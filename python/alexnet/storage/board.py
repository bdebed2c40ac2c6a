"""Boards: where the zipped categories live. A board is a location string; this module opens it as a pins board.

``None`` means ``$ALEXNET_BOARD``, else the folder ``<user cache dir>/alexnet/board``. Any other string is a
storage location (see :mod:`alexnet.storage.location`): a folder, ``gs://``, ``s3://``, or ``https://``
(read only, through the ``_pins.yaml`` manifest that ``imagenet_upload`` and a model's publishing write at the board's
root, listing every complete version of every pin as R pins does, so a folder, GCS or S3 board can be served over
HTTP(S): :meth:`Board.write_manifest`).

:func:`open_board` resolves the string once and checks that the board can be reached (and, for writing,
that credentials exist) before returning, so that mistakes show up as one clear ``BoardError`` before any
long work starts. Every board holds versioned pins (``<name>/<version>/<file>`` plus ``data.txt``), so
boards written here can be read by R's and Python's pins packages as well.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..environment import env_value
from ..errors import AlexnetError, BoardError, reason
from ..scratch import sweep_unchanged
from .location import bucket_path, check_bucket, location_kind, open_filesystem, resolve_location
from .locking import file_lock
from .transfer import DISK_FULL

MANIFEST = "_pins.yaml"
#: What this package makes at a folder board's root besides the pins while it writes, hidden (R's pins lists no hidden
#: folder): the lock taken while the manifest is rewritten and its next text, folders that become a pin's version once
#: whole (both renamed into place), a file that checks that the board can be written. None stays once written (Python's
#: pins takes every name at the root for a pin). :meth:`Board.pin_names` leaves them out.
OWN_PREFIX = ".alexnet-"
#: The manifest's lock: deleted by its holder as it lets go (one that older versions left is deleted by the next write).
MANIFEST_LOCK = f"{OWN_PREFIX}manifest.lock"
#: The hold of the upload writing to a board (a folder's file lock, a bucket's lease), deleted when it ends: two
#: uploads at once would each write a categories table of their own categories, the last one the board's.
UPLOAD_LOCK = f"{OWN_PREFIX}upload.lock"
#: How what a writer killed half way leaves at a folder board's root begins (all of :data:`OWN_PREFIX`'s but the lock):
#: removed once unchanged for a day (:func:`sweep_left`).
LEFT_PREFIXES = (f"{OWN_PREFIX}version-", f"{OWN_PREFIX}probe-", f"{OWN_PREFIX}{MANIFEST}-")


def yaml_load(text: str | bytes) -> Any:
    """``text`` parsed as YAML by the safe loader, libyaml's (``yaml.CSafeLoader``) when PyYAML was built with it:
    the same data as ``yaml.safe_load``, ten or more times sooner (a board's ``_pins.yaml``, a pin's ``data.txt``)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def yaml_dump(data: Any) -> str:
    """``data`` as ``yaml.safe_dump(data, default_flow_style=False)`` writes it, by libyaml's dumper when there is one
    (the same text for the plain mappings, lists and strings written here)."""
    import yaml

    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=False)


class _PinsYaml:
    """The ``yaml`` pins' metadata module reads a version's ``data.txt`` with: PyYAML itself, but for ``safe_load``,
    which is :func:`yaml_load` (pins parses with the pure-Python loader: 5 ms of a thread's CPU per pin, so that
    reading 2,000 pins' states to resume an upload took 12 s). The same data either way."""

    def __getattr__(self, name: str) -> Any:
        import yaml

        return getattr(yaml, name)

    @staticmethod
    def safe_load(stream: Any) -> Any:
        return yaml_load(stream.read() if hasattr(stream, "read") else stream)


#: How much of a file pins' version hash reads at a time (:func:`_hash_in_blocks`).
HASH_BLOCK = 1 << 20


def _hash_in_blocks(f: Any, block_size: int = -1) -> str:
    """pins' version hash of the open file ``f`` (xxh64 of its bytes, the same hex digest), read :data:`HASH_BLOCK`
    bytes at a time whatever ``block_size`` asks: pins reads the whole file at once, so that every category zip
    published (140 MB on ImageNet, up to one per upload worker at a time) was held in memory whole once."""
    from xxhash import xxh64

    hasher = xxh64()
    while block := f.read(HASH_BLOCK):
        hasher.update(block)
    return hasher.hexdigest()


def _tune_pins() -> None:
    """Have pins read each version's metadata through :class:`_PinsYaml` and hash a version's files in blocks
    (:func:`_hash_in_blocks`): once per process."""
    import pins.meta
    from pins.versions import Version

    if not isinstance(pins.meta.yaml, _PinsYaml):
        pins.meta.yaml = _PinsYaml()
    if Version.__dict__.get("hash_file") is not _HASH_IN_BLOCKS:
        Version.hash_file = _HASH_IN_BLOCKS


_HASH_IN_BLOCKS = staticmethod(_hash_in_blocks)


def full_board(folder: str, error: OSError) -> BoardError:
    """The error for the board folder ``folder`` whose disk is full (``error``), raised from ``error``: no other
    attempt is made (see :func:`is_full_board`)."""
    return BoardError(f"the disk of board folder {folder} is full ({reason(error)}): free some space on it, or give a "
                      "board on a disk with room")


def is_full_board(error: BaseException) -> bool:
    """Whether ``error`` is :func:`full_board`'s: a ``BoardError`` raised from a full disk's ``OSError``."""
    cause = error.__cause__
    return isinstance(error, BoardError) and isinstance(cause, OSError) and cause.errno in DISK_FULL


def default_board() -> str:
    """``$ALEXNET_BOARD`` when set, else the folder ``board`` under the user's cache directory."""
    env = env_value("ALEXNET_BOARD")
    if env:
        return env
    from .cache import cache_root  # not at the top: the cache's module imports the board's (through layout)

    return cache_root("board")


def resolve_board(board: str | os.PathLike | None) -> str:
    """The canonical board string (see :func:`alexnet.storage.location.resolve_location`); ``None`` is the default."""
    return resolve_location(default_board() if board is None else board, "board")


@dataclass(frozen=True)
class Board:
    """An open board: its canonical ``location``, its ``kind`` and the pins board that reads and writes it."""

    location: str
    kind: str
    pins: Any

    @property
    def fs(self) -> Any:
        """The fsspec file system of the board (no pins cache in between)."""
        return self.pins.fs

    def path(self, *parts: str) -> str:
        """The path of ``parts`` under the board's root, on :attr:`fs`."""
        return "/".join([self.pins.board.rstrip("/"), *parts])

    def pin_names(self) -> list[str]:
        """Names of the pins on the board (the manifest's for https:// boards)."""
        from pins.boards import BoardManual

        if isinstance(self.pins, BoardManual):
            return list(self.pins.pin_paths)
        try:
            return [name for name in self.pins.pin_list() if not name.startswith(OWN_PREFIX)]
        except FileNotFoundError:
            return []

    def write_manifest(self, versions: Mapping[str, str],
                       leaving: Mapping[str, Collection[str]] | None = None) -> None:
        """Write ``_pins.yaml`` at the board's root: every pin on the board and each of its complete versions, oldest
        first and newest last, as R pins' ``write_board_manifest()`` writes it (pin -> ``[<pin>/<version>/, ...]``).
        https:// readers find the pins through it: R pins' ``board_url()`` every version, this package's reader the
        newest (:func:`_read_manifest`).

        ``versions`` (pin -> the version this writer just wrote) and ``leaving`` (pin -> versions about to be deleted,
        left out) say what the writer knows. What is listed comes from one listing of the board
        (:func:`board_files`), so that writers of different pins (an upload, a trained model) keep each other's
        entries, and a version pruned or deleted leaves the manifest with the next write. A version is complete when
        the writer wrote it, the manifest listed it already, or its ``data.txt`` lists files the listing holds at the
        sizes it records (read for these versions alone, at once: :func:`_complete`). Hidden names (``.alexnet-*``)
        are no pins nor versions.

        A reader never finds the file cut short: on a folder board it is written beside and renamed into place, under
        a lock (:data:`MANIFEST_LOCK`) that writers at the same time take in turn, so that none drops another's
        entries; a bucket's object is written whole by one request.
        """
        import yaml

        def listed() -> str:
            known: dict[str, set[str]] = {}
            path = self.path(MANIFEST)
            if self.fs.exists(path):
                try:
                    known = _manifest_versions(yaml_load(self.fs.cat_file(path)))
                except (yaml.YAMLError, TypeError, ValueError, AttributeError):
                    known = {}  # not a manifest: written anew
            for name, version in versions.items():
                known.setdefault(name, set()).add(version)
            left = {name: set(gone) for name, gone in (leaving or {}).items()}
            complete = _complete(self, board_files(self), known, left)
            return yaml_dump({name: [f"{name}/{version}/" for version in complete[name]] for name in sorted(complete)})

        if self.kind != "file":  # a bucket's object is replaced whole by one write
            self.fs.pipe_file(self.path(MANIFEST), listed().encode())
            return
        try:
            with file_lock(os.path.join(self.location, MANIFEST_LOCK), remove=True):
                _replace_file(os.path.join(self.location, MANIFEST), listed())
        except OSError as err:
            if err.errno in DISK_FULL:
                raise full_board(self.location, err) from err
            raise


#: The files of a board's versions, by pin and version: pin -> version -> file -> size (:func:`board_files`).
BoardFiles = dict[str, dict[str, dict[str, int]]]


def board_files(board: Board) -> BoardFiles:
    """Every pin on ``board``, its versions (the folders below it) and each version's files with their sizes, from one
    listing of the board; names that begin with a dot are no pin nor version (R pins lists none). On a bucket the
    listing is of all objects under the board, a request per 1,000, and the depth ``<pin>/<version>/<file>`` is kept
    here (s3fs lists a depth it is given a request per folder); a folder board is walked three folders deep."""
    root = board.pins.board.rstrip("/")
    try:
        found = board.fs.find(root, withdirs=True, detail=True, **({"maxdepth": 3} if board.kind == "file" else {}))
    except FileNotFoundError:
        return {}
    files: BoardFiles = {}
    for path, info in found.items():
        parts = str(path)[len(root):].strip("/").split("/")
        if len(parts) < 2 or len(parts) > 3 or any(part.startswith(".") for part in parts[:2]):
            continue
        held = files.setdefault(parts[0], {}).setdefault(parts[1], {})
        if len(parts) == 3 and info.get("type") != "directory":
            held[parts[2]] = int(info.get("size") or 0)
    return files


def _manifest_versions(manifest: Any) -> dict[str, set[str]]:
    """The versions a manifest's text, parsed, lists: pin -> versions."""
    return {str(name): {str(path).rstrip("/").rsplit("/", 1)[-1] for path in paths}
            for name, paths in dict(manifest or {}).items() if isinstance(paths, list)}


def _complete(board: Board, files: BoardFiles, known: Mapping[str, set[str]], leaving: Mapping[str, set[str]]
              ) -> dict[str, list[str]]:
    """The complete versions of each pin in ``files``, sorted (pins' order: oldest first), but those in ``leaving``:
    those in ``known`` (written or listed before, and still holding their ``data.txt``), and the others whose
    ``data.txt`` names files ``files`` holds at the sizes it records, their ``data.txt`` read in one call (on a bucket,
    requests at the same time). Pins without a complete version are left out."""
    import yaml

    complete: dict[str, list[str]] = {}
    unknown: dict[str, tuple[str, str]] = {}
    for name, held in files.items():
        for version, version_files in held.items():
            if "data.txt" not in version_files or version in leaving.get(name, ()):
                continue
            if version in known.get(name, ()):
                complete.setdefault(name, []).append(version)
            else:
                unknown[board.path(name, version, "data.txt")] = (name, version)
    paths = list(unknown)  # read as they are named (fsspec's cat() would take [, * and ? in a name for a pattern)
    read = board.fs.cat_ranges(paths, None, None, on_error="return") if paths else []
    for path, text in zip(paths, read, strict=True):
        name, version = unknown[path]
        if not isinstance(text, bytes):
            continue
        try:
            meta = yaml_load(text)
            names, sizes = meta["file"], meta["file_size"]
        except (yaml.YAMLError, TypeError, KeyError):
            continue  # cut short, or no pins metadata
        names = names if isinstance(names, list) else [names]
        sizes = sizes if isinstance(sizes, list) else [sizes]
        listed = files[name][version]
        with contextlib.suppress(TypeError, ValueError):
            if len(names) == len(sizes) and all(listed.get(str(file)) == int(size)
                                                for file, size in zip(names, sizes, strict=True)):
                complete.setdefault(name, []).append(version)
    return {name: sorted(versions) for name, versions in complete.items()}


def _replace_file(path: str, text: str) -> None:
    """Write ``text`` as the file ``path`` at once: to a hidden file beside it (with the mode of a new file), then
    renamed over it, so that a reader sees the old file or the new one, never one cut short."""
    part = os.path.join(os.path.dirname(path), f"{OWN_PREFIX}{os.path.basename(path)}-{uuid.uuid4().hex[:12]}")
    try:
        with open(part, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(part)


def sweep_left(folder: str) -> None:
    """Remove from the board folder ``folder`` the versions, manifest texts and probes of writers killed half way
    (:data:`LEFT_PREFIXES`) that have not changed for a day (:func:`~alexnet.scratch.sweep_unchanged`): a version
    made whole there is renamed into place within seconds."""
    sweep_unchanged(folder, prefixes=LEFT_PREFIXES)


def check_writable(folder: str) -> None:
    """``BoardError`` naming the board folder ``folder`` when this process cannot make a file in it (a read-only
    file system, no permission): found before any work, by writing (and removing) an empty hidden file."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f"{OWN_PREFIX}probe-", dir=folder)
    except OSError as err:
        raise BoardError(f"board folder {folder} cannot be written ({reason(err)}): give a board folder this process "
                         "may write") from None
    os.close(fd)
    os.remove(probe)


def _read_manifest(fs: Any, resolved: str) -> dict[str, str]:
    import yaml

    url = f"{resolved}/{MANIFEST}"
    try:
        text = fs.cat_file(url)
    except FileNotFoundError:
        raise BoardError(
            f"board {resolved} has no {MANIFEST} manifest: it was not written by imagenet_upload(), or the "
            "upload has not finished; run imagenet_upload() on the board this URL serves"
        ) from None
    except Exception as err:
        raise BoardError(f"cannot reach board {resolved}: {reason(err)}") from None
    try:
        manifest = yaml_load(text) or {}
        return {str(name): str(list(versions)[-1]) for name, versions in manifest.items() if versions}
    except (yaml.YAMLError, AttributeError, TypeError) as err:
        raise BoardError(f"the manifest {url} is not a pins manifest ({err}); run imagenet_upload() again") from None


def open_board(board: str | os.PathLike | None, *, write: bool = False) -> Board:
    """Open ``board`` (a location string, or ``None`` for the default), checking up front that it can be reached.

    ``write=True`` also checks that it can be written: credentials exist for gs:// and s3://, the
    bucket exists, and the board is not an https:// one (read only); a local folder is created, and a file made in
    it (a read-only file system, a folder of another user's), and what writers killed there a day or more ago left
    is removed (:func:`sweep_left`).
    Problems raise ``BoardError`` saying what to change.
    """
    import pins
    from pins.boards import BaseBoard, BoardManual

    resolved = resolve_board(board)
    _tune_pins()
    kind = location_kind(resolved)
    if kind == "file":
        if os.path.exists(resolved) and not os.path.isdir(resolved):
            raise BoardError(f"board {resolved} is a file, not a folder: give the board's folder")
        if write:
            try:
                os.makedirs(resolved, exist_ok=True)
            except OSError as err:
                raise BoardError(f"cannot create the board folder {resolved}: {reason(err)}") from None
            check_writable(resolved)
            sweep_left(resolved)
        elif not os.path.isdir(resolved):
            env = env_value("ALEXNET_BOARD")
            try:  # the default's, or the same
                named = bool(env) and resolve_location(env or "", "board") == resolved
            except AlexnetError:  # not a location at all: not this one
                named = False
            raise BoardError(
                f"board folder {resolved} does not exist: upload with imagenet_upload(..., board = "
                f"{resolved!r}) first, or "
                + ("set ALEXNET_BOARD, which names this folder, to the board's location" if named else
                   "give the board's location as `board` (or set ALEXNET_BOARD to it)")
            )
        return Board(resolved, kind, pins.board_folder(resolved))
    fs = open_filesystem(resolved, write=write)
    if kind == "http":
        return Board(resolved, kind, BoardManual(resolved, fs, versioned=False, pin_paths=_read_manifest(fs, resolved)))
    check_bucket(fs, resolved, write, empty_hint="check the location, or upload with imagenet_upload() first")
    return Board(resolved, kind, BaseBoard(bucket_path(resolved)[1], fs, versioned=True))
