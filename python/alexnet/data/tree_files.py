"""Where an extracted tree is read: a local folder, or a bucket prefix (``gs://``, ``s3://``), behind the few
questions :mod:`alexnet.data.imagenet` asks of it (is this a folder, what does it hold, read this small file) and the
two the upload asks (how large is each image, and its bytes, a category at a time).

A local folder is asked with one ``os.scandir`` per folder and no per-file ``stat`` (:mod:`alexnet.data.folders`).
A bucket has no folders, only prefixes of object names: each folder the tree's reading asks about is listed once, with
its objects' sizes and versions (about 2,000 requests for ImageNet-1k, 16 at a time), and what lies elsewhere under the
prefix (Kaggle's annotations and test images) is not listed at all. A category's images are then fetched
:data:`FILES_AT_ONCE` at a time, in one call of the file system (gcsfs and s3fs send them together), the next ones while
these are packed: one request after another, at a bucket's latency, would set the pace of the upload.

Paths are what the user would write: a local path, or the bucket's URL (``gs://bucket/prefix/train/n01440764``).
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..storage.location import refused
from ..storage.transfer import retry
from .archive_io import Files, fetched_ahead, read_files_ahead
from .folders import Listing, category_dirs, classify, list_folder
from .images import too_many_bytes
from .parts import Member, Members, member_read

log = logging.getLogger(__name__)

#: A bucket's images fetched together (one call of the file system, its requests sent at once), and as many again
#: while they are packed.
FILES_AT_ONCE = 64

#: A bucket's folders listed at once.
LISTINGS_AT_ONCE = 16
#: Times an object whose fetch failed (not one gone, nor one refused) is fetched again before its part fails.
FETCH_RETRIES = 3
#: Why an object listed and gone when fetched is left out.
GONE = "not found: deleted since the source was listed"

#: The object fields that change when an object is written again, the first one an object has being kept: a part's
#: identity holds it, so that an image replaced under the same name and size is uploaded again.
_VERSION_FIELDS = ("generation", "ETag", "etag", "md5Hash", "mtime", "LastModified", "updated")


class TreeFiles:
    """A local folder's files (the base, with ``os``); :class:`BucketTree` answers for a bucket prefix."""

    local = True

    def join(self, folder: str, *names: str) -> str:
        return os.path.join(folder, *names)

    def dirname(self, path: str) -> str:
        return os.path.dirname(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listing(self, folder: str) -> Listing:
        """What ``folder`` holds (:class:`~alexnet.data.folders.Listing`)."""
        return list_folder(folder)

    def folders(self, folder: str) -> list[str]:
        """The sub-folders of ``folder`` that can be categories (:func:`~alexnet.data.folders.category_dirs`)."""
        return category_dirs(folder)

    def text(self, path: str) -> io.StringIO:
        """The small text file at ``path`` (a name file, the validation labels), read whole."""
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return io.StringIO(f.read())

    def stat(self, path: str) -> tuple[int, object]:
        """The size of the file at ``path`` and what changes when it is written again (its modification time); of a
        link that leads nowhere, the link's own: an image that cannot be read, which the upload reports among the bad
        images when it comes to read it."""
        try:
            st = os.stat(path)
        except OSError:
            st = os.lstat(path)
        return st.st_size, st.st_mtime_ns

    def open_files(self, files: Iterable[str]) -> Members:
        """The files of a part opened: asked of the kernel now, so that the disk reads them while the categories
        before them are packed (:func:`~alexnet.data.archive_io.read_files_ahead`, as for an archive's category),
        and each read when it is reached."""
        ordered = sorted(files, key=os.path.basename)
        read_files_ahead(ordered)
        return lambda: _each_file(ordered)


def _each_file(ordered: list[str]) -> Iterator[Member]:
    for path in ordered:
        try:
            with open(path, "rb") as f:
                # a file larger than an image may be (a sparse file of gigabytes, say) is named, not read
                member = member_read(os.path.basename(path), os.fstat(f.fileno()).st_size, f.read)
        except OSError as err:
            yield Member(os.path.basename(path), None, f"cannot be read ({err})")
            continue
        yield member


def _version(info: dict[str, Any]) -> object:
    return next((info[field] for field in _VERSION_FIELDS if info.get(field) is not None), "")


#: What a bucket's folder holds: each name with its object's size and version, or None for a sub-folder.
Held = dict[str, "tuple[int, object] | None"]


class BucketTree(TreeFiles):
    """The objects under a bucket prefix as a tree of folders, each folder listed when it is first asked about (a
    delimited listing: the folders it holds, not their objects), and kept as names, sizes and versions only: the
    file system's own listing of ImageNet's 1.28M objects would hold about 2 GB. The sub-folders of a folder asked
    for its categories are listed :data:`LISTINGS_AT_ONCE` at a time, since each is asked about next."""

    local = False

    def __init__(self, files: Files):
        self.files, self.root = files, files.location.rstrip("/")
        self.listed: dict[str, Held] = {}
        #: folders named by :meth:`folders` and not listed yet, in the order they will be asked about
        self._siblings: list[str] = []

    def join(self, folder: str, *names: str) -> str:
        return posixpath.join(folder, *names)

    def dirname(self, path: str) -> str:
        """The folder above ``path``; the bucket's own URL for the bucket (nothing is above it)."""
        return path if path.rstrip("/").count("/") <= 2 else posixpath.dirname(path.rstrip("/"))

    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + "/")

    def _list(self, folder: str) -> Held:
        fs, path = self.files.fs, folder.split("://", 1)[1]
        try:
            entries = fs.ls(path, detail=True, refresh=True)
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except PermissionError as err:
            raise refused(fs, folder, err) from None
        finally:
            fs.invalidate_cache(path)  # the file system's listing, much larger than what is kept here
        held: Held = {}
        for info in entries:
            name = info["name"].rstrip("/")
            if name == path or not name.startswith(path + "/"):
                continue  # the folder's own marker object, or the object ``path`` itself
            base = name.rsplit("/", 1)[1]
            if info.get("type") == "directory":
                held[base] = None  # a name that is a folder and an object too (an old tool's marker) is the folder
            elif not info["name"].endswith("/"):
                held.setdefault(base, (int(info.get("size") or 0), _version(info)))
        return held

    def held(self, folder: str) -> Held:
        """What ``folder`` holds (empty when it is no folder), listed on first asking; a category folder named by
        :meth:`folders` with the next :data:`LISTINGS_AT_ONCE` - 1 of them, which are asked about next (a first folder
        that holds no image stops the reading after one round of listings, not after all of them)."""
        folder = folder.rstrip("/")
        if folder not in self.listed:
            batch = [folder]
            if folder in self._siblings:
                at = self._siblings.index(folder)
                batch += [path for path in self._siblings[at + 1:at + LISTINGS_AT_ONCE] if path not in self.listed]
            if len(batch) == 1:
                self.listed[folder] = self._list(folder)
            else:
                with ThreadPoolExecutor(len(batch), thread_name_prefix="alexnet-list") as pool:
                    self.listed.update(zip(batch, pool.map(self._list, batch), strict=True))
        return self.listed[folder]

    def _entry(self, path: str) -> tuple[bool, tuple[int, object] | None]:
        """Whether ``path`` is named in its folder's listing, and its size and version (None for a folder)."""
        folder, name = path.rstrip("/").rsplit("/", 1)
        if folder not in self.listed and folder != self.root and self._inside(folder) and not self.isdir(folder):
            return False, None  # in a folder that is not there: nothing to list (one listed is there)
        held = self.held(folder)
        return name in held, held.get(name)

    def isdir(self, path: str) -> bool:
        if path.rstrip("/") == self.root:
            return bool(self.held(self.root))
        if not self._inside(path):
            return bool(self.files.fs.isdir(path))
        named, entry = self._entry(path)
        return named and entry is None

    def isfile(self, path: str) -> bool:
        if not self._inside(path):  # a name file looked for above the prefix given
            return bool(self.files.fs.isfile(path))
        return self._entry(path)[1] is not None

    def exists(self, path: str) -> bool:
        return self.isdir(path) or self.isfile(path)

    def listing(self, folder: str) -> Listing:
        return classify((name, "folder" if entry is None else "file") for name, entry in self.held(folder).items())

    def folders(self, folder: str) -> list[str]:
        found = sorted(name for name, entry in self.held(folder).items()
                       if entry is None and not name.startswith((".", "_")))
        self._siblings = [f"{folder.rstrip('/')}/{name}" for name in found]
        return found

    def text(self, path: str) -> io.StringIO:
        try:
            data = bytes(self.files.fs.cat_file(path))
        except PermissionError as err:
            raise refused(self.files.fs, path, err) from None
        return io.StringIO(data.decode("utf-8", errors="replace"))

    def stat(self, path: str) -> tuple[int, object]:
        return self._entry(path)[1] or (0, "")

    def open_files(self, files: Iterable[str]) -> Members:
        """The files of a part, fetched from when the members are asked for (by the thread that packs the part,
        before it waits for a packing slot): :data:`FILES_AT_ONCE` at a time, the next ones while these are packed
        (:func:`~alexnet.data.archive_io.fetched_ahead`)."""
        ordered = sorted(files, key=posixpath.basename)
        return lambda: self._members(ordered)

    def _members(self, ordered: list[str]) -> Iterator[Member]:
        windows = [ordered[k:k + FILES_AT_ONCE] for k in range(0, len(ordered), FILES_AT_ONCE)]
        fetched = fetched_ahead(windows, self._fetch)  # the first window fetched from now
        return (members[path] for window, members in fetched for path in window)

    def _fetch(self, window: list[str]) -> dict[str, Member]:
        """The objects of ``window`` as members, their requests sent together; one that is larger than an image may
        be is named and not fetched, one gone since the listing is named as gone. Any other failure is asked again
        (:func:`~alexnet.storage.transfer.retry`) and, failing still, fails the part, which the next upload reads
        again: named among the bad images, an image a dropped connection kept from the board was left out for good."""
        members: dict[str, Member] = {}
        wanted = []
        for path in window:
            too_large = too_many_bytes(self.stat(path)[0])
            if too_large is None:
                wanted.append(path)
            else:
                members[path] = Member(posixpath.basename(path), None, too_large)
        # objects read whole (no range), their names as they are: ``cat`` would take [, * and ? for a pattern's
        got = self.files.fs.cat_ranges([p.split("://", 1)[1] for p in wanted], None, None, on_error="return") \
            if wanted else []
        for path, data in zip(wanted, got, strict=True):
            name = posixpath.basename(path)
            if isinstance(data, FileNotFoundError):
                members[path] = Member(name, None, GONE)
                continue
            if isinstance(data, PermissionError):
                raise refused(self.files.fs, path, data) from None
            members[path] = self._fetch_again(path) if isinstance(data, BaseException) else Member(name, bytes(data))
        return members

    def _fetch_again(self, path: str) -> Member:
        """The object ``path`` whose fetch failed, fetched alone, again (a failure still fails the part)."""
        name = posixpath.basename(path)
        fs, key = self.files.fs, path.split("://", 1)[1]
        try:
            return Member(name, retry(f"fetching {path}", lambda: bytes(fs.cat_file(key)), FETCH_RETRIES))
        except FileNotFoundError:
            return Member(name, None, GONE)
        except PermissionError as err:
            raise refused(self.files.fs, path, err) from None


def tree_files(files: Files) -> TreeFiles:
    """The files of the tree at ``files``: a local folder's, or a bucket prefix's, listed."""
    return TreeFiles() if files.local else BucketTree(files)


__all__ = ["FETCH_RETRIES", "FILES_AT_ONCE", "GONE", "LISTINGS_AT_ONCE", "BucketTree", "TreeFiles", "tree_files"]
