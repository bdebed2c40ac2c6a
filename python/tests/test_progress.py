"""Progress bars: shown unless ALEXNET_PROGRESS=0, each finished bar's last line printed once."""

from __future__ import annotations

import io
import re
import time

import pytest

from alexnet.progress import progress_bar


def _run(monkeypatch, pause_before_last: float) -> str:
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = progress_bar(30, "work", "img")
    bar.update(29)
    time.sleep(pause_before_last)  # past the bar's minimum interval, the last update is drawn
    bar.update(1)
    bar.close()
    return stream.getvalue()


def test_a_finished_bar_prints_its_last_line_once(monkeypatch):
    for pause in (0.0, 0.7):
        text = _run(monkeypatch, pause)
        assert text.count("30/30") == 1, text
        assert text.endswith("\n")


@pytest.mark.parametrize("handler", ["the command line's", "logging's own"])
def test_a_line_logged_under_a_bar_starts_a_line_of_its_own(monkeypatch, handler):
    """The command line's log lines were written after a fetch's bar, on its line (``...B/s]INFO alexnet...``)."""
    import logging

    from alexnet.progress import BarSafeHandler

    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    logger = logging.getLogger("alexnet.test-bar")
    given = BarSafeHandler() if handler == "the command line's" else logging.StreamHandler()
    logger.addHandler(given)
    logger.propagate = False
    try:
        bar = progress_bar(40, "fetch", "img")
        bar.update(15)
        bar.refresh()
        logger.warning("a line of the log")
        bar.close()
    finally:
        logger.removeHandler(given)
        logger.propagate = True
    text = stream.getvalue()
    before = text[:text.index("a line of the log")]
    own_line = before.endswith(("\r", "\n"))
    assert own_line == (handler == "the command line's"), repr(text)
    assert "15/40" in text


def test_an_unfinished_bar_shows_where_it_stopped(monkeypatch):
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = progress_bar(40, "work", "img")
    bar.update(15)
    bar.close()
    assert "15/40" in stream.getvalue()


def test_progress_off(monkeypatch):
    monkeypatch.setenv("ALEXNET_PROGRESS", "0")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = progress_bar(5, "work")
    bar.update(5)
    bar.close()
    assert stream.getvalue() == ""


def test_a_bar_moved_by_refresh_prints_its_last_line_once(monkeypatch):
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    with progress_bar(12, "Checking images", "img") as bar:  # as data/scan.py moves its bar
        bar.n = 12
        bar.refresh()
    assert stream.getvalue().count("12/12") == 1, stream.getvalue()


def test_a_watcher_hears_every_bar_even_when_bars_are_not_shown(monkeypatch):
    from alexnet.progress import watch_progress

    monkeypatch.setenv("ALEXNET_PROGRESS", "0")
    heard: list = []
    listener = lambda desc, steps, total: heard.append((desc, steps, total))  # noqa: E731
    with watch_progress(listener), progress_bar(10, "evaluate (centre crop)") as bar:
        bar.update(4)
        bar.update(6)
    with progress_bar(3, "after") as bar:
        bar.update(3)  # no longer watched
    assert heard == [("evaluate (centre crop)", 4, 10), ("evaluate (centre crop)", 6, 10)]


@pytest.mark.parametrize("progress, terminal, asked, given", [
    ("1", True, 1, 1), ("1", False, 1, 2), ("0", True, 1, 2), ("0", False, 0, 0), ("1", False, 2, 2),
])
def test_keras_draws_its_bar_only_where_bars_are_drawn_on_a_terminal(monkeypatch, progress, terminal, asked, given):
    """A bar redrawn at every step is noise in a log file or a pipe (about 100 backspaces a step): there Keras says
    one line per epoch; 0 and 2, asked for, are given as they are."""
    from alexnet.progress import fit_verbosity

    class Stdout(io.StringIO):
        def isatty(self) -> bool:
            return terminal

    monkeypatch.setenv("ALEXNET_PROGRESS", progress)
    monkeypatch.setattr("sys.stdout", Stdout())
    assert fit_verbosity(asked) == given


def test_the_uploads_last_line_counts_every_image(monkeypatch):
    """Its last line said images=52 after 3,052 images: the count was set after the bar's update had drawn it."""
    from alexnet.progress import LazyBar

    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = LazyBar(100, "upload")
    bar.start()
    bar.update(40, 52)
    time.sleep(0.7)  # past the bar's minimum interval: the last update is drawn, and closing does not draw it again
    bar.update(60, 3052)
    bar.close()
    last = stream.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert "100/100" in last and "images=3052" in last, stream.getvalue()


def test_a_bar_not_drawn_logs_where_it_stands_every_so_often(monkeypatch, caplog):
    """With bars off (a log file, a job's output), an upload or a fetch of hours said nothing until its end."""
    import logging

    from alexnet import progress

    monkeypatch.setattr(progress, "LINE_EVERY", 0.05)
    monkeypatch.setenv("ALEXNET_PROGRESS", "0")
    with caplog.at_level(logging.INFO, logger="alexnet"):
        with progress_bar(3_000_000, "upload", unit="B", unit_scale=True, unit_divisor=1000) as bar:
            for _ in range(3):
                time.sleep(0.1)
                bar.update(1_000_000)
        with progress_bar(10, "Checking images", unit="img") as bar:
            bar.update(4)  # the first line a while after its start: none yet
            monkeypatch.setattr(progress, "LINE_EVERY", 3600.0)
            bar.update(4)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and re.fullmatch(r"upload: 33% \(1\.00MB of 3\.00MB\) at \d\.\d\dMB/s, about 00:0\d left",
                                            lines[0]), lines
    assert lines[2].startswith("upload: 100% (3.00MB of 3.00MB) at ") and "left" not in lines[2]
    caplog.clear()
    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    with caplog.at_level(logging.INFO, logger="alexnet"), progress_bar(10, "Checking images", unit="img") as bar:
        time.sleep(0.05)
        bar.update(4)
    assert caplog.records[0].getMessage().startswith("Checking images: 40% (4 img of 10 img) at ")
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="alexnet"), progress_bar(10, "drawn", unit="img") as bar:
        bar.update(5)
    assert caplog.records == [], "a bar drawn logs no line"
