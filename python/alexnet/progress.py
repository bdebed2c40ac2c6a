"""Progress bars for long work, shown the same from a terminal, a notebook or R (through reticulate)."""

from __future__ import annotations

import os
import sys
from typing import Any

from tqdm.auto import tqdm


def progress_enabled() -> bool:
    """Progress bars are on unless ``ALEXNET_PROGRESS`` is ``0``/``false`` (tests and CI logs turn them off)."""
    return os.environ.get("ALEXNET_PROGRESS", "1").strip().lower() not in {"0", "false", "no", "off"}


def progress_bar(total: float | None, desc: str, unit: str = "it", **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr; works when stderr is not a terminal (R's console through reticulate)."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not progress_enabled(),
        dynamic_ncols=True,
        mininterval=0.5,
        **kwargs,
    )
