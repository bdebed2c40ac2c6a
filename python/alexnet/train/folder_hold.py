"""A run's hold on its folder of checkpoints, so that two runs never write in one: :data:`RUN`, a run's words for
the hold of :mod:`alexnet.storage.hold` (a folder's file lock, let go by the system when its process ends; a bucket's
lease, taken over once a run killed stops renewing it), which :class:`alexnet.train.checkpoint_files.CheckpointFiles`
takes for the chief of a run, with the lock's name and patience it declares; and on S3 the uploads a killed run left
unfinished there (:func:`abort_left_uploads`)."""

from __future__ import annotations

import logging
from typing import Any

from ..checks import count_text
from ..storage.hold import Writer
from ..storage.location import bucket_path

logger = logging.getLogger(__name__)

#: A training run, as it holds its folder of checkpoints and speaks of another run that holds it.
RUN = Writer(
    "run", logger,
    busy="Another training run is writing its checkpoints to %(location)s (%(holder)s), and two runs in one folder "
         "would write over each other's checkpoints: wait for it to end, or give this run another `checkpoint_dir`.",
    waiting_lease="Another training run (%(holder)s) is writing its checkpoints to %(location)s; waiting up to "
                  "%(patience).0f s for it to end (a run killed is taken for gone once it has not renewed its hold "
                  "for %(stale).0f s).",
    took_over="The checkpoints in %(location)s were held by %(holder)s, %(why)s: taken over.",
    waiting_lock="Another training run is writing its checkpoints to %(location)s; waiting up to %(patience).0f s for "
                 "it to end.")


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
