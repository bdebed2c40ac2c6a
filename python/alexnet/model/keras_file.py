"""Reading an ``alexnet.keras`` into a ``keras.Model``, its weights read from the file once.

An ``alexnet.keras`` is tf-keras's zip: ``config.json``, ``metadata.json`` and ``model.weights.h5``, an HDF5 file
stored uncompressed (233 MB for the paper's model). tf-keras hands h5py the member as Python's zip reader opens it,
and under Python 3.11 that reader answers every seek backwards by reading the member again from its start: h5py
seeks back and forth, so a load read the member hundreds of times over (about 2.2 s of 4 s for the paper's model).
:func:`read_keras_file` has the member read once, into memory, and h5py read it there; the weights, the model
and the file are the same.
"""

from __future__ import annotations

import importlib
import io
import zipfile
from typing import Any

from ..errors import AlexnetError


class _OneMember:
    """What tf-keras's weight store asks of the zip it reads from (``open`` of its member), answered from the
    member's bytes read once."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def open(self, name: str, mode: str = "r") -> io.BytesIO:
        return io.BytesIO(self._data)  # shares the bytes: no copy until written to, and it is only read


def _reads_members_once(keras: Any) -> None:
    """tf-keras's HDF5 weight store, for reading from a zip, replaced by one that reads its member whole first
    (once per process; the store keeps its name and everything else it does). Without that store (another tf-keras),
    loading goes on as tf-keras does it."""
    try:
        saving_lib = importlib.import_module(f"{keras.__name__}.src.saving.saving_lib")
    except ImportError:
        return
    store = getattr(saving_lib, "H5IOStore", None)
    if store is None or getattr(store, "reads_member_once", False):
        return

    class WholeMemberH5IOStore(store):  # type: ignore[misc, valid-type]
        reads_member_once = True

        def __init__(self, root_path: str, archive: Any = None, mode: str = "r") -> None:
            if archive is not None and mode == "r" and isinstance(archive, zipfile.ZipFile):
                archive = _OneMember(archive.read(root_path))
            super().__init__(root_path, archive=archive, mode=mode)

    WholeMemberH5IOStore.__name__ = WholeMemberH5IOStore.__qualname__ = store.__name__
    setattr(saving_lib, "H5IOStore", WholeMemberH5IOStore)  # noqa: B010  (a module found at run time)


def read_keras_file(path: str) -> Any:
    """The ``keras.Model`` saved at ``path`` (an ``alexnet.keras`` on this machine), without its training
    configuration; alexnet's own layers registered first. Anything that cannot be loaded gets one
    :class:`~alexnet.errors.AlexnetError` naming the file."""
    from ..tfimport import keras
    from . import network as _registers_custom_objects  # noqa: F401  (AdaptiveAveragePooling2D)

    _reads_members_once(keras)
    try:
        return keras.models.load_model(path, compile=False)
    except Exception as error:
        raise AlexnetError(f"{path} cannot be loaded as a Keras model ({type(error).__name__}: {error}): give the "
                           "alexnet.keras that training saved.") from None
