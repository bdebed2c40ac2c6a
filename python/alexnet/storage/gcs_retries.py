"""gcsfs's own retries said: gcsfs tries a failed request up to 6 times over about 30 s, logging each repeat at DEBUG
only, so that a bucket gone for a while would block a training or a fetch without a word. :func:`hear_gcsfs_retries`,
called by every GCS location opened (:mod:`alexnet.storage.location`), says the first repeat of a burst as alexnet's
warning, and changes nothing else of logging."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

log = logging.getLogger("alexnet.storage.location")  # said as the locations' own lines


#: Seconds between two of the warnings that gcsfs tries a request again (:func:`hear_gcsfs_retries`): one warning a
#: burst of its retries, which run about 30 s a request.
RETRIES_SAID_EVERY = 30.0


class _HeardLogger:
    """The logger of gcsfs's retries (``gcsfs.retry.logger``), as it was, but for one thing: a request gcsfs tries
    again, which it logs at DEBUG only, is also said as alexnet's warning, at most once every
    :data:`RETRIES_SAID_EVERY` seconds. gcsfs repeats a failed request up to 6 times over about 30 s, and a bucket
    gone for a while would otherwise block a training or a fetch without a word."""

    MARK = " retrying after exception: "

    def __init__(self, real: logging.Logger):
        self.real = real
        self.said_at = -RETRIES_SAID_EVERY
        self.lock = threading.Lock()

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if isinstance(msg, str) and self.MARK in msg:
            now = time.monotonic()
            with self.lock:
                say = now - self.said_at >= RETRIES_SAID_EVERY
                if say:
                    self.said_at = now
            if say:
                log.warning("A request to Google Cloud Storage failed (%s); gcsfs tries it again, up to 5 times more "
                            "in about 30 s, before the transfer's own attempts (said when they fail).",
                            msg.split(self.MARK, 1)[1][:300])
        kwargs.setdefault("stacklevel", 2)  # the line of gcsfs that logs it, as without this logger
        self.real.debug(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def hear_gcsfs_retries() -> None:
    """Put :class:`_HeardLogger` in place of the logger gcsfs's retries log to (once a process; each GCS location
    opened asks). Nothing else of logging changes: the ``gcsfs`` logger, its level and its records are as they were."""
    import gcsfs.retry

    if not isinstance(gcsfs.retry.logger, _HeardLogger):
        gcsfs.retry.logger = _HeardLogger(gcsfs.retry.logger)
