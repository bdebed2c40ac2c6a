"""Errors the package raises on purpose: each message says what to change."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from .result import as_plain


def reason(error: BaseException) -> str:
    """Why ``error`` happened, for a message that names the path itself: the system's words for a failed file
    operation (``No such file or directory``, also where a bucket's file system raised the kind alone), else the
    error's kind and text."""
    if isinstance(error, OSError) and error.strerror:
        return str(error.strerror)
    for kind, number in _FILE_ERRORS.items():
        if isinstance(error, kind):
            return os.strerror(number)
    return f"{type(error).__name__}: {error}"


#: The system's error numbers of the file errors a bucket's file system raises without them.
_FILE_ERRORS: dict[type[OSError], int] = {FileNotFoundError: errno.ENOENT, PermissionError: errno.EACCES,
                                          FileExistsError: errno.EEXIST, NotADirectoryError: errno.ENOTDIR,
                                          IsADirectoryError: errno.EISDIR}


#: The password of a URL (``https://user:password@host/...``, as a board on a server may be given).
_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*):[^/\s@'\"]*@")


def without_passwords(text: str) -> str:
    """``text`` with the password of every URL in it said as ``***``: what the package writes where others read it
    (its messages, its log lines, a model's card, a cache's record of its board)."""
    return _PASSWORD.sub(r"\1:***@", text)


def _redact(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with its message formatted and said by :func:`without_passwords` (an argument that is not a
    string, a file object of a bucket say, may name the URL too); a message that does not format is left to
    logging, which says so."""
    try:
        message = record.getMessage()
    except Exception:
        return record
    said = without_passwords(message)
    if said != message:
        record.msg, record.args = said, ()
    return record


class WithoutPasswords(logging.Filter):
    """A handler's filter that says every record it shows, any library's, without a URL's password (the command
    line's handlers: ``-v`` shows the libraries' own lines, fsspec's requests among them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact(record)
        return True


def _records_without_passwords() -> None:
    """Log records of the package's loggers made with :func:`without_passwords` over their message and its string
    arguments (once per process; the factory in place, another library's, still makes every record)."""
    made = logging.getLogRecordFactory()
    if getattr(made, "without_passwords", False):
        return

    def record(name: str, *args: Any, **kwargs: Any) -> logging.LogRecord:
        new = made(name, *args, **kwargs)
        return _redact(new) if name == "alexnet" or name.startswith("alexnet.") else new

    record.without_passwords = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(record)


_records_without_passwords()


class AlexnetError(Exception):
    """Base class: bad input or a state the user can fix; the message says how (a URL's password said as ``***``)."""

    #: Whether the error was found while the work ran, once its settings were accepted (a worker, a child process or
    #: a Spark job that failed, a timeout reached, a cluster out of reach), rather than in its settings or input: the
    #: command line exits with status 1 after such an error, 2 after the others (as after a usage error).
    while_running = False

    def __init__(self, *args: object) -> None:
        super().__init__(*(without_passwords(a) if isinstance(a, str) else a for a in args))


#: The modules of the core's extras (pyproject.toml), by the extra that installs each; every other module the core
#: imports is one of its own dependencies.
EXTRA_MODULES = {"pyspark": "spark", "s3fs": "s3", "tensorboard": "tensorboard"}

#: The modules of the core's own dependencies (pyproject.toml's ``dependencies``), several of them imported only when
#: first used (TensorFlow, Keras, SciPy, PyArrow, ...): a core that imports may still lack one.
DEPENDENCY_MODULES = ("numpy", "PIL", "tensorflow", "tf_keras", "pins", "pandas", "yaml", "xxhash", "fsspec", "gcsfs",
                      "tqdm", "platformdirs", "matplotlib", "scipy", "pyarrow", "isal", "deflate")


def missing_dependencies() -> list[str]:
    """The modules of :data:`DEPENDENCY_MODULES` this Python cannot import, found without importing any (R's
    ``alexnet_available()``)."""
    import importlib.util

    def found(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a module of that name that is broken, or has no spec
            return False

    return [name for name in DEPENDENCY_MODULES if not found(name)]


class MissingModuleError(AlexnetError, ModuleNotFoundError):
    """A module this Python lacks that the core needs (TensorFlow, pyspark, ...), with what installs it: caught as
    an :class:`AlexnetError` and as the ``ModuleNotFoundError`` it stands for."""

    while_running = True


def missing_module(error: ModuleNotFoundError) -> AlexnetError | None:
    """What to install, for a module this Python lacks that the core imports when first used (TensorFlow, pyspark,
    ...): an :class:`AlexnetError` that names the module, the Python and the extra or the core's install that brings
    it (``error`` itself when it is one already); ``None`` for a module of alexnet's own (a fault of the package,
    said as it is)."""
    if isinstance(error, MissingModuleError):
        return error
    name = (error.name or "").split(".")[0]
    if not name or name == "alexnet":
        return None
    extra = EXTRA_MODULES.get(name)
    what = (f"the `{extra}` extra of the core, which this needs" if extra else
            "one of the core's own dependencies: the core was installed without them")
    spec = f"./python[{extra}]" if extra else "./python"
    from_r = ("alexnet::install_alexnet()" if extra in (None, "spark", "s3")  # its default extras: s3 and spark
              else f'alexnet::install_alexnet(extras = c("s3", "spark", "{extra}"))')
    missing = MissingModuleError(
        f"This Python ({sys.executable}) has no module `{name}`, {what}. Install it there: from a clone of alexnet, "
        f"pip install -c python/constraints.txt '{spec}'; from R, {from_r}.")
    missing.name = name
    return missing


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """The imports of the block are of modules this Python may lack (TensorFlow, pyspark, s3fs, gcsfs, ...): one it
    lacks is raised as :func:`missing_module` says it, a :class:`MissingModuleError` naming the module, the Python and
    what installs it; a module of alexnet's own missing is raised as it is. The package imports TensorFlow, the
    extras' modules (:data:`EXTRA_MODULES`) and a bucket's file system (gcsfs, s3fs) here, where first needed, so that
    a Python caller is told what to install as an R caller and the command line are."""
    try:
        yield
    except ModuleNotFoundError as error:
        raise (missing_module(error) or error) from None


def run_error(message: str) -> AlexnetError:
    """An :class:`AlexnetError` found while the work ran (:attr:`AlexnetError.while_running`)."""
    error = AlexnetError(message)
    error.while_running = True
    return error


class LayoutError(AlexnetError):
    """An ImageNet tree that cannot be read: the message names the path and what is wrong."""


class BoardError(AlexnetError):
    """A board that cannot be reached, read or written."""


class IntegrityError(AlexnetError):
    """Data on a board or in a cache that does not match its recorded hash."""


class BadImagesError(AlexnetError):
    """Too many images could not be decoded."""


def error_fields(error: BaseException) -> dict[str, Any]:
    """The attributes of ``error`` that say more than its message, by name: a worker's index, count and log
    (``worker``, ``workers``, ``log``), how it was lost (``kind``), a Spark job's whole message (``spark_message``);
    those it has."""
    return {name: getattr(error, name) for name in ("worker", "workers", "log", "kind", "spark_message")
            if hasattr(error, name)}


class CallFailure:
    """An exception as :func:`r_call` returns it to a front end that cannot catch Python's exceptions by
    class (R through reticulate): ``classes`` are the names of its class and ancestors, most specific first
    (the package's own and Python's built-in ones by bare name, others as ``module.Name``), ``message`` its
    whole text, ``fields`` the attributes that say more (a worker's index, count and log, how it was lost),
    ``traceback`` Python's formatted traceback."""

    def __init__(self, error: Exception):
        own = [cls.__module__.split(".")[0] in ("alexnet", "builtins") for cls in type(error).__mro__]
        self.classes = [cls.__name__ if mine else f"{cls.__module__}.{cls.__name__}"
                        for cls, mine in zip(type(error).__mro__, own, strict=True)]
        self.message = str(error)
        self.fields = error_fields(error)
        self.traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))


class KeptWarnings(logging.Handler):
    """The messages of the warnings (and worse) logged to it, from any thread; with ``relay``, each message is also
    handed to it the first time it is logged (as it happens: a worker's warnings sent to the driver's monitor)."""

    def __init__(self, relay: Callable[[str], Any] | None = None) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.relay = relay
        self._relaying = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        first = message not in self.messages
        self.messages.append(message)
        if self.relay is not None and first and not getattr(self._relaying, "now", False):
            self._relaying.now = True  # a relay that logs a warning of its own is not called again for it
            try:
                self.relay(message)
            except Exception:
                pass
            finally:
                self._relaying.now = False


class _BelowWarnings(logging.Handler):
    """Records below a warning, handed to the root logger's handlers as propagation would (while :func:`r_call`
    keeps the warnings for R)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING:
            for handler in logging.getLogger().handlers:
                if record.levelno >= handler.level:
                    handler.handle(record)


#: The warnings logged during calls of :func:`r_call`, until :func:`r_warnings` takes them.
_taken_by_r: list[str] = []


def r_call(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, or a :class:`CallFailure` for the exception it raised, so that the R package
    can raise the R condition of its kind with the whole message (reticulate shortens long messages).

    The warnings the package logs meanwhile, from any of its threads, are kept for :func:`r_warnings` (instead of
    standard error, where nobody configured logging), which the R package raises as R warnings once it returns."""
    logger = logging.getLogger("alexnet")
    kept, below = KeptWarnings(), _BelowWarnings()
    propagate = logger.propagate
    # warnings go to R alone: a handler that a library put on the root logger (TensorFlow's export calls
    # logging.basicConfig) would print them a second time; what is below a warning still reaches it
    logger.propagate = False
    logger.addHandler(kept)
    logger.addHandler(below)
    try:
        return as_plain(function(*args, **kwargs))
    except ModuleNotFoundError as error:  # TensorFlow or pyspark missing: what to install
        return CallFailure(missing_module(error) or error)
    except Exception as error:  # every kind goes back to R, which raises it
        return CallFailure(error)
    finally:
        logger.removeHandler(kept)
        logger.removeHandler(below)
        logger.propagate = propagate
        _taken_by_r.extend(kept.messages)


def r_warnings() -> list[str]:
    """The messages of the warnings logged during :func:`r_call` since the last time this was called, oldest
    first."""
    messages = list(_taken_by_r)
    del _taken_by_r[:len(messages)]
    return messages


#: The swaps of :func:`r_words`, in order: R's half of the words written for both front ends, R's names for what
#: only Python has, an entry of an argument (``data["image"]`` is R's ``data$image``), the kind of a value as Python
#: names it after "a"/"an".
_R_SWAPS = tuple((re.compile(pattern), swap) for pattern, swap in (
    (r"\bTRUE/True\b", "TRUE"), (r"\bFALSE/False\b", "FALSE"), (r"\bNULL/None\b", "NULL"),
    (r"\bNone\b(?! of\b)", "NULL"), (r"\bTrue\b", "TRUE"), (r"\bFalse\b", "FALSE"),
    (r"\btf_config_json\([^()]*\)", "tf_config_from_barrier(barrier)"),
    (r"\btf_config_json\b", "tf_config_from_barrier"),
    (r"(?<![\w$.])([A-Za-z_]\w*)\[\"([A-Za-z_]\w*)\"\]", r"\1$\2"),
    (r"\(Spark's whole message is logged at DEBUG level: logging\.getLogger\('alexnet'\)\.setLevel\('DEBUG'\)\)",
     "(Spark's whole message is the error's `spark_message`: tryCatch(..., error = function(e) e$spark_message))"),
    (r"logging\.getLogger\('alexnet'\)\.setLevel\('DEBUG'\)",
     'reticulate::import("logging")$getLogger("alexnet")$setLevel("DEBUG")'),
    (r"\ba dict/list\b", "a list"), (r"\ba dict\b", "a named list"), (r"\ba str\b", "a string"),
    (r"\ba float\b", "a number"), (r"\ban int\b", "a whole number"), (r"\ba bool\b", "a logical"),
    (r"\ba DataFrame\b", "a data frame"), (r"\ba NoneType\b", "NULL"),
))
_R_ITEM = r"(?:'[^'\n]*'|-?[0-9][0-9.e+-]*|TRUE|FALSE|NULL)"
#: A Python list of strings or numbers (not an index or a Spark master's cores: no word or bracket before it).
_R_LIST = re.compile(rf"(?<![\w\]])\[({_R_ITEM}(?:, {_R_ITEM})*)\]")
_R_EMPTY = re.compile(r"(?<![\w\]])\[\]")
_R_VECTOR = re.compile(r"\bc\([^()]*\)")
_R_WHOLE = re.compile(r"(?<![\w.])(-?[0-9]+)\.0(?=[,)])")
#: A 'quoted' Python string: no letter before the opening quote (not an apostrophe), no space inside.
_R_QUOTED = re.compile(r"(?<![\w'])'([^'\s]*)'(?!\w)")


def r_words(text: str) -> str:
    """A message of the core in R's words, as the R package says it (its ``r_words()``, which tests check this
    against): ``NULL``, ``TRUE``, ``FALSE``, strings in double quotes, ``c(...)`` for Python lists (``character(0)``
    for an empty one, whole numbers as R prints them), ``$`` for an entry of a list, and R's names for what only
    Python has. The driver's monitor of a job launched from R says the workers' lines with it."""
    for pattern, swap in _R_SWAPS:
        text = pattern.sub(swap, text)
    text = _R_EMPTY.sub("character(0)", _R_LIST.sub(r"c(\1)", text))
    text = _R_VECTOR.sub(lambda vector: _R_WHOLE.sub(r"\1", vector[0]), text)
    return _R_QUOTED.sub(r'"\1"', text)
