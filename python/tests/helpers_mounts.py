"""File systems that behave as real disks do at their limits, for the tests of folder boards: a small disk that fills
up (tmpfs) and a read-only view of a folder (a read-only bind mount).

Both need the right to mount (root); a test that cannot have them is skipped. Each is unmounted at the end, also
when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = 4096


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here (mount {' '.join(args)}: {done.stderr.strip()})")


def _unmount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True, check=True)


@contextlib.contextmanager
def small_disk(path: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (made if missing)."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _unmount(path)


def fill(disk: Path, leave_pages: int) -> Path:
    """Fill the tmpfs ``disk`` with a file until ``leave_pages`` pages of it are free; the file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * PAGE):
                pass
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave_pages * PAGE))
    return filler


@contextlib.contextmanager
def read_only_view(folder: Path, view: Path) -> Iterator[Path]:
    """``folder`` seen read-only at ``view`` (a read-only bind mount; made if missing)."""
    view.mkdir(parents=True, exist_ok=True)
    _mount("--bind", "-o", "ro", str(folder), str(view))
    try:
        probe = view / ".probe"
        try:
            probe.write_bytes(b"")
        except OSError:
            pass
        else:  # an old kernel binds read-write first: made read-only by a remount
            probe.unlink()
            subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True, check=True)
        yield view
    finally:
        _unmount(view)
