"""The command line's core functions replaced by fakes that keep the real functions' signatures (the help texts
read the core's defaults from them)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from helpers_processes import ctrl_c_as_in_a_terminal

from alexnet.cli import common


def fake_core(monkeypatch: Any, fake_for: Callable[[str], Callable[..., Any]]) -> None:
    """Each command's core function becomes ``fake_for(command)``, with the real function's signature."""
    real = common.core

    def core(command: str) -> Callable[..., Any]:
        return functools.wraps(real(command))(fake_for(command))

    monkeypatch.setattr(common, "core", core)


@functools.cache
def _parsers() -> tuple[Any, dict[str, Any]]:
    from alexnet.cli import build_parser

    parser = build_parser()
    return parser.get_default(common.COMMAND_CALLS), parser._subparsers._group_actions[0].choices  # type: ignore


def help_as_said(command: str, text: str) -> str:
    """``text``, a declared help, as ``alexnet COMMAND --help`` says it: in the command's own options and the
    commands of the command line (:func:`alexnet.cli.common.help_as_typed`)."""
    calls, commands = _parsers()
    return common.as_typed(text, commands[command].get_default(common.OPTION_NAMES) or {}, calls)


def interrupted(args: list[str], ready: Callable[[], bool], *, wait: float = 60,
                env: dict[str, str] | None = None) -> tuple[int, str]:
    """``alexnet ARGS`` sent Ctrl-C (SIGINT) once ``ready()`` (within ``wait`` seconds): its exit code and stderr.
    The command starts as from a terminal, SIGINT not ignored (:func:`helpers_processes.ctrl_c_as_in_a_terminal`)."""
    proc = subprocess.Popen([sys.executable, "-m", "alexnet.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
                            preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        deadline = time.monotonic() + wait
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, "the command ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, err
