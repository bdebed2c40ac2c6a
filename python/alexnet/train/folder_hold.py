"""A run's hold on its folder of checkpoints, so that two runs never write in one: a folder's file lock
(:func:`hold_folder`, let go by the system when its process ends), a bucket's lease (:func:`hold_bucket`,
:mod:`alexnet.storage.lease`, taken over once a run killed stops renewing it), and on S3 the uploads a killed run left
unfinished there (:func:`abort_left_uploads`). :class:`alexnet.train.checkpoint_files.CheckpointFiles` takes the hold
of the chief of a run, with the lock's name and patience it declares."""

from __future__ import annotations

import logging
import os
import posixpath
import socket
import time
from collections.abc import Callable
from typing import Any

from ..checks import count_text
from ..errors import AlexnetError
from ..storage import lease
from ..storage.location import bucket_path
from ..storage.locking import Busy, hold_lock

logger = logging.getLogger(__name__)


def _note() -> str:
    """What the hold says of this run to another that finds it taken."""
    return f"the run of process {os.getpid()} on {socket.gethostname()}, begun {time.strftime('%Y-%m-%d %H:%M:%S')}"


def _waiting(location: str, patience: float, holder: str | None = None, how: str = "") -> None:
    """Say that this run waits, up to ``patience`` seconds, for the one that holds ``location`` (``holder``, when the
    hold names it; ``how``: how a killed holder is found out)."""
    named = f" ({holder or 'its process unknown'})" if holder is not None else ""
    logger.warning("Another training run%s is writing its checkpoints to %s; waiting up to %.0f s for it to end%s.",
                   named, location, patience, how)


def _busy(location: str, holder: str) -> AlexnetError:
    return AlexnetError(
        f"Another training run is writing its checkpoints to {location} ({holder or 'its process unknown'}), and two "
        "runs in one folder would write over each other's checkpoints: wait for it to end, or give this run another "
        "`checkpoint_dir`.")


def hold_folder(location: str, lock: str, patience: float) -> Callable[[], None]:
    """Hold the lock file ``lock`` of the folder of checkpoints ``location`` for this run; what lets go of it. Raises
    when another run keeps it beyond ``patience`` seconds."""
    try:
        return hold_lock(lock, patience=patience, note=_note(), waiting=lambda: _waiting(location, patience))
    except Busy as busy:
        raise _busy(location, busy.holder) from None


def hold_bucket(fs: object, path: str, location: str, patience: float) -> lease.Lease:
    """Hold the lease ``path`` of the checkpoints in the bucket ``location`` for this run, as :func:`hold_folder`
    holds a folder's lock. Raises when another run renews it beyond ``patience`` seconds."""
    def took_over(holder: str) -> None:
        logger.info("The checkpoints in %s were held by %s, which has not renewed its hold for %.0f s: taken over.",
                    location, holder or "a run", lease.STALE)

    how = f" (a run killed is taken for gone once it has not renewed its hold for {lease.STALE:.0f} s)"
    try:
        return lease.hold_lease(fs, path, note=_note(), patience=patience,
                                waiting=lambda holder: _waiting(location, patience, holder, how),
                                took_over=took_over, where=posixpath.join(location, posixpath.basename(path)))
    except Busy as busy:
        raise _busy(location, busy.holder) from None


def abort_left_uploads(fs: Any, location: str) -> None:
    """Abort the S3 multipart uploads that runs killed while they uploaded left in the folder ``location`` (a
    checkpoint's data, a model): never listed, they are billed until a lifecycle rule removes them. Called by a run
    that took the folder's lease over from a run killed (or fenced off: it writes no more), so that no upload under
    way is another's. Best-effort: one that cannot be aborted stays, said."""
    bucket, path = bucket_path(location)
    if "/" not in path:  # a whole bucket: uploads of other folders may be under way
        return
    prefix = path.split("/", 1)[1] + "/"
    left: list[dict[str, Any]] = []
    try:
        page: dict[str, Any] = {}
        while True:  # 1,000 a page
            listed = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix, **page)
            left += listed.get("Uploads") or []
            if not listed.get("IsTruncated"):
                break
            page = {"KeyMarker": listed.get("NextKeyMarker"), "UploadIdMarker": listed.get("NextUploadIdMarker")}
        for upload in left:
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    except Exception as error:  # a store without multipart listing, or no right to it: nothing is lost but room
        logger.warning("Cannot abort the uploads a killed run left unfinished in %s (%s): they stay until a lifecycle "
                       "rule of the bucket removes them.", location, error)
        return
    if left:
        logger.info("Aborted %s that a killed run left unfinished in %s.", count_text(len(left), "upload"), location)
