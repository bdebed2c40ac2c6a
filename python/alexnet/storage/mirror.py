"""A folder of outputs on any location an output can be on (a folder, ``file://``, ``gs://``, ``s3://``), written as a
local folder: the folder itself, or a scratch folder whose files are uploaded as they grow (:class:`MirroredFolder`).

TensorBoard's event files (:mod:`alexnet.train.tensorboard`) and the benchmark's results (:mod:`alexnet.bench.run`)
are written so: their writers (TensorFlow's summary writer, a chart, child processes' logs) know only local files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil

from ..scratch import OWNER_FILE, make_scratch
from .location import fs_path, location_kind, open_filesystem
from .outputs import missing_folders, remove_empty
from .transfer import inside

logger = logging.getLogger(__name__)


class MirroredFolder:
    """The folder of outputs ``location`` (a resolved location string, given as the argument ``what``, e.g.
    ``"`log_dir`"``) as the local folder ``local``: on a bucket, a scratch folder that :meth:`sync` uploads. ``made``:
    the local folders made for it (itself first, then its parents), which :meth:`remove_if_empty` takes away again."""

    def __init__(self, location: str, what: str):
        self.location = location
        self.remote = location_kind(location) != "file"
        self._sent: dict[str, int] = {}
        self.made: list[str] = []
        if self.remote:
            self.fs = open_filesystem(location, write=True, what=what)
            self.root = fs_path(location)
            self.local = make_scratch("alexnet-output-")
        else:
            self.made = missing_folders(location)
            os.makedirs(location, exist_ok=True)
            self.local = location

    def where(self, name: str) -> str:
        """Where the file ``name`` (relative, with ``/``) of the folder is, said to a user."""
        return posixpath.join(self.location, name) if self.remote else os.path.join(self.local, name)

    def said(self, path: str | os.PathLike) -> str:
        """Where the local file ``path`` is, said to a user: a file of a bucket's scratch folder at its place in the
        bucket (where :meth:`sync` and :meth:`close` upload it), any other path as it is."""
        if not self.remote or not inside(path, self.local):
            return os.fspath(path)
        return self.where(os.path.relpath(path, self.local).replace(os.sep, "/"))

    def fetch(self, name: str) -> None:
        """Bring the file ``name`` of a bucket's folder into the scratch folder (when it is there), to go on from
        it; nothing for a local folder."""
        if self.remote and self.fs.exists(remote := posixpath.join(self.root, name)):
            local = os.path.join(self.local, *name.split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            self.fs.get_file(remote, local)

    def sync(self) -> int:
        """Upload the files of the scratch folder that are new or have changed size since the last sync (a no-op for
        a folder); the number uploaded. A failed upload is logged and tried again at the next sync."""
        if not self.remote:
            return 0
        sent = 0
        for folder, _, files in os.walk(self.local):
            for name in files:
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, self.local).replace(os.sep, "/")
                if relative == OWNER_FILE:
                    continue
                size = os.path.getsize(path)
                if self._sent.get(relative) == size:
                    continue
                try:
                    self.fs.put_file(path, posixpath.join(self.root, relative))
                except Exception as error:  # outputs on the way never stop the work they record
                    logger.warning("Cannot upload %s to %s (%s); trying again later.", relative, self.location, error)
                    continue
                self._sent[relative] = size
                sent += 1
        return sent

    def remove(self, name: str) -> None:
        """Delete the file ``name`` of the folder (and of the bucket), if it is there."""
        local = os.path.join(self.local, *name.split("/"))
        if os.path.exists(local):
            os.remove(local)
        if self.remote:
            self._sent.pop(name, None)
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(posixpath.join(self.root, name))

    def remove_if_empty(self) -> None:
        """Remove the local folder, when it was made for these outputs and holds no file (the empty folders in it
        removed first), and the parents made for it that are empty then: what a run stopped before it wrote anything
        leaves. A folder that was there before is kept, as is one holding any file; a bucket keeps no empty folder."""
        if not self.made:
            return
        for folder, _, _ in os.walk(self.local, topdown=False):
            if folder != self.local:
                with contextlib.suppress(OSError):  # only an empty folder goes
                    os.rmdir(folder)
        remove_empty(self.made)  # the folder itself, then its parents, as long as they are empty

    def close(self) -> None:
        """Upload what is left and delete the scratch folder."""
        self.sync()
        if self.remote:
            shutil.rmtree(self.local, ignore_errors=True)
