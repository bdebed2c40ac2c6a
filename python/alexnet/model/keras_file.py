"""Reading an ``alexnet.keras`` into a ``keras.Model``, its weights read from the file once.

An ``alexnet.keras`` is tf-keras's zip: ``config.json``, ``metadata.json`` and ``model.weights.h5``, an HDF5 file
stored uncompressed (233 MB for the paper's model). tf-keras hands h5py the member as Python's zip reader opens it,
and under Python 3.11 that reader answers every seek backwards by reading the member again from its start: h5py
seeks back and forth, so a load read the member hundreds of times over (about 2.2 s of 4 s for the paper's model).
:func:`read_keras_file` has the member read once, into memory, and h5py read it there; the weights, the model
and the file are the same.

Loading a Keras file builds whatever its ``config.json`` names, and tf-keras resolves names of functions and
classes by importing the module they name: Keras's safe mode refuses Python lambdas, not a layer that calls a
function of any importable module. An ``alexnet.keras`` may come from a shared board, so :func:`read_keras_file`
first checks that the file names only what alexnet's networks are made of (:data:`OBJECTS`, :data:`OPERATIONS`),
and loads nothing else.
"""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

from ..errors import AlexnetError

#: The Keras objects (module, class) that a network alexnet builds is made of, in every variant (grouped, every
#: precision, the input's side fixed or open) and as older versions saved it (the custom pooling layer).
OBJECTS = frozenset({
    ("keras.layers", name) for name in ("InputLayer", "Normalization", "ZeroPadding2D", "Conv2D", "MaxPooling2D",
                                        "Flatten", "Dense", "Dropout", "Activation")
} | {
    ("keras.initializers", "GlorotUniform"),
    ("keras.initializers", "Zeros"),
    ("keras.mixed_precision", "Policy"),
    ("tf_keras.src.engine.functional", "Functional"),
    ("tf_keras.src.layers.core.tf_op_layer", "TFOpLambda"),
    ("tf_keras.src.layers.core.tf_op_layer", "SlicingOpLambda"),
    ("alexnet.model.network", "AdaptiveAveragePooling2D"),
})

#: The TensorFlow operations its layers of built-in operations (the pooling to 6x6) call, by the API names tf-keras
#: 2.21 writes, and the other names of the same operations another TensorFlow may write.
OPERATIONS = frozenset({
    "__operators__.add", "__operators__.getitem", "cast", "compat.v1.floor_div", "compat.v1.shape",
    "compat.v1.transpose", "linalg.matmul", "math.multiply", "math.subtract", "math.truediv", "sequence_mask",
    "dtypes.cast", "math.floordiv", "shape", "transpose", "matmul", "truediv", "multiply", "subtract", "math.add",
})

#: Values written as objects that are data alone (a tensor, an array, bytes).
_DATA = frozenset({"__tensor__", "__numpy__", "__bytes__"})


def _named(config: Any) -> Iterator[str]:
    """What ``config`` (a ``config.json``, read) names outside :data:`OBJECTS` and :data:`OPERATIONS`, each said
    as a reader would look for it."""
    if isinstance(config, list):
        for item in config:
            yield from _named(item)
        return
    if not isinstance(config, dict):
        return
    if "class_name" in config:
        module, name = config.get("module"), config["class_name"]
        if name not in _DATA and (module, name) not in OBJECTS:
            yield f"{name!r} of module {module!r}" if module else repr(name)
        elif name in ("TFOpLambda", "SlicingOpLambda"):
            function = (config.get("config") or {}).get("function")
            if function not in OPERATIONS:
                yield f"the TensorFlow function {function!r}"
    for key, value in config.items():
        if key != "compile_config":  # loaded with compile=False: tf-keras builds nothing of it
            yield from _named(value)


def check_objects(path: str) -> None:
    """Refuse the Keras file at ``path`` unless its ``config.json`` names only what alexnet's networks are made of
    (an :class:`~alexnet.errors.AlexnetError` naming the first thing that is not); reads that member alone."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise AlexnetError(f"{path} cannot be loaded as a Keras model ({type(error).__name__}: {error}): give the "
                           "alexnet.keras that training saved.") from None
    for found in _named(config):
        raise AlexnetError(
            f"{path} holds {found}, which no network of alexnet is made of: it is not loaded, since loading it "
            "would run code the file chooses. Give an alexnet.keras that alexnet's training saved, from a board "
            "you trust.")


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
    configuration; alexnet's own layers registered first, and nothing loaded from a file that names more than
    alexnet's networks are made of (:func:`check_objects`). Anything that cannot be loaded gets one
    :class:`~alexnet.errors.AlexnetError` naming the file."""
    from ..tfimport import keras
    from . import network as _registers_custom_objects  # noqa: F401  (AdaptiveAveragePooling2D)

    check_objects(path)
    _reads_members_once(keras)
    try:
        return keras.models.load_model(path, compile=False)
    except Exception as error:
        raise AlexnetError(f"{path} cannot be loaded as a Keras model ({type(error).__name__}: {error}): give the "
                           "alexnet.keras that training saved.") from None
