"""Progress bars for long work, shown the same from a terminal, a notebook or R (through reticulate).

Where bars are off (``ALEXNET_PROGRESS=0``: a log file, a job's output), a bar logs a line of where it stands every
:data:`LINE_EVERY` seconds instead, so that an upload or a fetch of hours is not silent until its end.

Code that runs the work of others can also follow their bars: :func:`watch_progress` hands every step of every
bar to a listener (a Spark worker's evaluation reports its images to the driver that way), shown or not.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tqdm.auto import tqdm

from .environment import env_switch

logger = logging.getLogger(__name__)

#: Seconds between two lines of a bar that is not drawn (bars off): where it stands, its rate and the time left.
LINE_EVERY = 60.0


def progress_enabled() -> bool:
    """Progress bars are on unless ``ALEXNET_PROGRESS`` is an off word (``0``, ``false``, ``no``, ``off``, ``none``;
    tests and CI logs turn them off): see :func:`alexnet.environment.env_switch`."""
    return env_switch("ALEXNET_PROGRESS")


def fit_verbosity(verbose: int) -> int:
    """Keras fit's ``verbose`` for the ``verbose`` asked: its progress bar (1) only where bars are drawn
    (:func:`progress_enabled`) on a terminal, else one line per epoch (2): a bar redrawn with carriage returns and
    backspaces at every step is noise in a log file, a pipe or a notebook's saved output."""
    if verbose != 1 or (progress_enabled() and getattr(sys.stdout, "isatty", lambda: False)()):
        return verbose
    return 2


#: What :func:`watch_progress` listeners are called with: the bar's ``desc``, the steps just done, the total.
Listener = Callable[[str, float, "float | None"], None]
_listeners: list[Listener] = []
_listeners_lock = threading.Lock()


@contextlib.contextmanager
def watch_progress(listener: Listener) -> Iterator[None]:
    """While in the block, every bar of this process calls ``listener(desc, steps, total)`` as it moves (also when
    bars are not shown, see :func:`progress_enabled`)."""
    with _listeners_lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _listeners_lock:
            _listeners.remove(listener)


class _Bar(tqdm):
    """A tqdm bar whose closing does not print its last line again when that line already showed it complete.

    Closing a tqdm bar redraws it once more (to show the final rate); where carriage returns do not overwrite a
    line (R's console through reticulate, a log file) that would print the finished bar twice.
    """

    #: The description the bar was made with (what :func:`watch_progress` listeners get).
    label: str = ""

    def update(self, n: float | None = 1) -> bool | None:
        """Move the bar ``n`` steps, and tell the listeners of :func:`watch_progress`; a bar not drawn logs a line of
        where it stands every :data:`LINE_EVERY` seconds."""
        for listener in list(_listeners):
            listener(getattr(self, "label", ""), 1 if n is None else n, getattr(self, "total", None))
        if getattr(self, "disable", False):
            self._log_line(1 if n is None else n)
        return super().update(n)

    def _log_line(self, n: float) -> None:
        """Count ``n`` steps of a bar not drawn, and log where it stands when :data:`LINE_EVERY` seconds have passed
        since its start or its last line."""
        now = time.monotonic()
        if not hasattr(self, "_line_done"):  # a bar made otherwise than by progress_bar()
            self.line_began = getattr(self, "line_began", now)
            self._line_done, self._line_said = 0.0, self.line_began
        self._line_done += n
        total = getattr(self, "total", None)
        if now - self._line_said < LINE_EVERY or not total:
            return
        self._line_said = now
        done, seconds = min(self._line_done, total), now - self.line_began
        unit, scale, divisor = getattr(self, "line_unit", ("it", False, 1000))

        def amount(value: float) -> str:
            return tqdm.format_sizeof(value, unit, divisor) if scale else f"{value:,.0f} {unit}"

        rate = done / seconds if seconds > 0 else 0.0
        left = f", about {tqdm.format_interval((total - done) / rate)} left" if rate > 0 and done < total else ""
        logger.info("%s: %.0f%% (%s of %s) at %s/s%s", getattr(self, "label", ""), 100 * done / total, amount(done),
                    amount(total), amount(rate), left)

    def close(self) -> None:
        """End the bar's line, without redrawing it when its last drawing already showed every step done."""
        if not getattr(self, "disable", True) and self.n > 0 and getattr(self, "last_print_n", -1) == self.n:
            self._drawn_complete = True
        super().close()

    def refresh(self, *args: Any, **kwargs: Any) -> Any:
        """Redraw the bar, counting the drawing as the last print (a bar moved by ``n =`` and ``refresh()``)."""
        drawn = super().refresh(*args, **kwargs)
        self.last_print_n = self.n
        return drawn

    def display(self, *args: Any, **kwargs: Any) -> Any:
        """Draw the bar (not again once closing found it drawn complete)."""
        if getattr(self, "_drawn_complete", False):
            return True
        return super().display(*args, **kwargs)


class BarSafeHandler(logging.StreamHandler):
    """A log handler writing to a stream (standard error by default) as tqdm's ``write`` does: the progress bars drawn
    there are cleared while a record is written and drawn again below it, so that a line logged during a fetch or an
    upload starts a line of its own instead of following the bar's."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def progress_bar(total: float | None, desc: str, unit: str = "it", **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr; works when stderr is not a terminal (R's console through reticulate)."""
    bar = _Bar(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not progress_enabled(),
        dynamic_ncols=True,
        mininterval=0.5,
        **kwargs,
    )
    bar.label = desc  # what listeners are told, also when the bar is not shown (tqdm then keeps no desc)
    # what a bar not drawn says in its lines (tqdm then keeps none of it)
    bar.line_unit = (unit, bool(kwargs.get("unit_scale")), int(kwargs.get("unit_divisor", 1000)))
    bar.line_began = time.monotonic()
    return bar


class LazyBar:
    """A progress bar in bytes (the upload's: of the source), drawn once :meth:`start` is called, what was counted
    before shown then: a run that finds every pin already on the board transfers nothing and shows no bar."""

    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.pending, self.lock = total, desc, 0, threading.Lock()
        self.bar: tqdm | None = None

    def start(self) -> None:
        with self.lock:
            if self.bar is None:
                self.bar = progress_bar(self.total, self.desc, unit="B", unit_scale=True, unit_divisor=1000)
                self.bar.update(self.pending)

    def update(self, count: int, images: int) -> None:
        with self.lock:
            if self.bar is None:
                self.pending += count
            else:  # the count of images first: the update draws it (the last one drawn is the bar's final line)
                self.bar.set_postfix(images=images, refresh=False)
                self.bar.update(min(count, self.total - self.bar.n))

    def finish(self) -> None:
        """Fill the bar: the bytes of the parts left out (validation images of excluded categories) count as done."""
        with self.lock:
            if self.bar is not None:
                self.bar.update(max(0, self.total - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
