"""The models this process has loaded, kept while they are in use (:data:`LOADED`), so that calls one after the other
on one model load it once and a long session that goes through model after model stays flat."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any


class LoadedModels:
    """The models loaded in this process, by file (its real path, and its SHA-256 or size and modification time):
    each kept while anything uses it (held weakly), and the last one asked for kept besides, so that calls one after
    the other on one model load it once. A session that goes through model after model (evaluating checkpoint after
    checkpoint) holds at most one that nothing uses any more: the one before is let go (and collected) before the
    next is loaded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: weakref.WeakValueDictionary[tuple[str, str], Any] = weakref.WeakValueDictionary()
        self._last: tuple[tuple[str, str], Any] | None = None

    def get(self, key: tuple[str, str], load: Callable[[], Any]) -> Any:
        """The model of ``key``: the one already loaded, else ``load()``'s."""
        with self._lock:
            model = self._used.get(key)
            if model is None:
                if self._last is not None:
                    self._last = None
                    gc.collect()  # a Keras model holds cycles: let the last one go before the next comes in
                model = load()
                self._used[key] = model
            self._last = (key, model)
            return model

    def clear(self) -> None:
        """Let go of the last model asked for (those still used elsewhere stay until they are not)."""
        with self._lock:
            self._last = None
        gc.collect()


#: The models this process has loaded (see :class:`LoadedModels`).
LOADED = LoadedModels()
