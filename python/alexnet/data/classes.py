"""The 1000 classes of ILSVRC2012 (ImageNet-1k): label index, WordNet id and name, as the package ships them.

The list is the standard one (the devkit's ``meta.mat`` leaves, Kaggle's ``LOC_synset_mapping.txt``): WordNet
ids in sorted order, so that a class's position is its label, the convention of TensorFlow Datasets, torchvision,
Keras and Hugging Face's ``imagenet-1k`` alike. Sources that carry only label numbers (the parquet shards) take
their ids and names from it; sources that carry ids are checked against it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ..checks import some_names
from ..errors import LayoutError, importing

log = logging.getLogger(__name__)

CLASSES_FILE = "ilsvrc2012_classes.tsv"
#: How many classes ILSVRC2012 has.
NUM_CLASSES = 1000


@functools.cache
def _classes() -> tuple[tuple[int, str, str], ...]:
    text = resources.files(__package__).joinpath(CLASSES_FILE).read_text(encoding="utf-8")
    lines = text.splitlines()
    if lines[0].split("\t") != ["index", "id", "name"]:
        raise LayoutError(f"the package's {CLASSES_FILE} has the header {lines[0]!r}; reinstall alexnet")
    rows = []
    for line in lines[1:]:
        index, wnid, name = line.split("\t")
        rows.append((int(index), wnid, name))
    return tuple(rows)


class ClassTable(list[dict[str, Any]]):
    """What :func:`imagenet_classes` returns: a list of one ``{"index", "id", "name"}`` dict per class (indexed,
    iterated, compared and written as JSON as any list), shown as a table of its first and last :data:`SHOWN` rows
    and its length, and offered as a pandas DataFrame (:meth:`to_pandas`)."""

    #: How many rows its repr shows at each end.
    SHOWN = 3
    #: The widest name its repr shows whole; a longer one ends with ``...``.
    NAME_WIDTH = 60

    def _line(self, row: Mapping[str, Any], width: int) -> str:
        name = str(row["name"])
        if len(name) > self.NAME_WIDTH:
            name = name[:self.NAME_WIDTH - 3] + "..."
        return f"  {row['index']:>{width}}  {row['id']}  {name}"

    def __repr__(self) -> str:
        rows: list[Any] = list(self)
        if len(rows) > 2 * self.SHOWN:
            rows = [*rows[:self.SHOWN], None, *rows[-self.SHOWN:]]
        width = max((len(str(row["index"])) for row in rows if row is not None), default=1)
        count = f"{len(self)} class" if len(self) == 1 else f"{len(self)} classes"
        lines = [f"{count} (index, id, name), a list of dicts; .to_pandas() for a DataFrame" + (":" if rows else "")]
        lines += [f"  {'...':>{width}}" if row is None else self._line(row, width) for row in rows]
        return "\n".join(lines)

    def to_pandas(self) -> Any:
        """The classes as a pandas DataFrame: columns ``index``, ``id`` and ``name``, one row per class."""
        with importing():
            import pandas as pd

        return pd.DataFrame(list(self), columns=["index", "id", "name"])


def imagenet_classes() -> ClassTable:
    """The 1000 ILSVRC2012 classes: one ``{"index", "id", "name"}`` per class, in label order (ids sorted).

    ``index`` is the 0-based label, ``id`` the WordNet id (``n01440764``), ``name`` the synonyms of the
    devkit's ``words`` (``"tench, Tinca tinca"``). A :class:`ClassTable`: a list of those dicts, which a notebook
    or the REPL shows as a short table of its first and last classes; ``.to_pandas()`` gives a DataFrame.
    """
    return ClassTable({"index": index, "id": wnid, "name": name} for index, wnid, name in _classes())


def class_ids() -> tuple[str, ...]:
    """The 1000 WordNet ids, sorted: position = label."""
    return tuple(wnid for _, wnid, _ in _classes())


def class_names() -> dict[str, str]:
    """WordNet id -> name of the 1000 classes."""
    return {wnid: name for _, wnid, name in _classes()}


def check_classes(found: Mapping[str, str], where: str, *, strict: bool) -> None:
    """Check the ``wnid -> name`` pairs a source declares against the standard list.

    An id outside the list is a ``LayoutError`` naming ``where`` when ``strict`` (the source claims to be
    ILSVRC2012), a warning otherwise (an extracted tree may hold other categories); a name that differs is a
    warning: the board keeps the source's name.
    """
    names = class_names()
    unknown = sorted(w for w in found if w not in names)
    if unknown:
        listing = some_names(unknown, 5)
        message = (f"{where} names {len(unknown)} WordNet id(s) that are not among the 1000 ILSVRC2012 classes "
                   f"({listing})")
        if strict:
            raise LayoutError(f"{message}: it is not the ILSVRC2012 release; use the official files, or extract "
                              "the images into <wnid>/ folders and upload that folder")
        log.warning("%s; they are uploaded as categories of their own", message)
    differing = sorted(w for w, name in found.items() if w in names and name and name != names[w])
    if differing:
        log.warning("%s names %d class(es) differently from the standard ILSVRC2012 list (e.g. %s: %r, not %r); "
                    "the board keeps the source's names", where, len(differing), differing[0], found[differing[0]],
                    names[differing[0]])


__all__ = ["NUM_CLASSES", "ClassTable", "check_classes", "class_ids", "class_names", "imagenet_classes"]
