"""The command line's core functions replaced by fakes that keep the real functions' signatures (the help texts
read the core's defaults from them)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from alexnet.cli import common


def fake_core(monkeypatch: Any, fake_for: Callable[[str], Callable[..., Any]]) -> None:
    """Each command's core function becomes ``fake_for(command)``, with the real function's signature."""
    real = common.core

    def core(command: str) -> Callable[..., Any]:
        return functools.wraps(real(command))(fake_for(command))

    monkeypatch.setattr(common, "core", core)
