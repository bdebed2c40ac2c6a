"""Hugging Face's ``imagenet-1k`` as parquet shards, read in place with pyarrow, a row group at a time.

The folder (or bucket prefix, or its ``data/`` folder) holds ``train-*.parquet`` and ``validation-*.parquet``
(the ``test-*`` shards have no labels and are left out). Each row has ``image`` (a struct of the encoded
``bytes`` and the original file ``path``, or plain bytes) and ``label``, 0..999 in sorted WordNet-id order: the
package's list of the ILSVRC2012 classes gives each label its id and name.

The ``label`` column is read first, for every row group of every shard, its bytes alone fetched at once (they lie
between the row groups' images): a label outside 0..999 stops the upload before anything is written, and it tells
which row groups hold which categories. Then the row groups that hold a
category not yet on the board are read once, in order; each image is held in memory with its category's others,
and a category is packed as soon as the last row group that holds it has been read. When the shards hold the
categories one after another, as a conversion from the training tar does, only a few categories are unfinished at
a time and they stay in memory; when they are shuffled, the unfinished categories outgrow
:data:`~alexnet.data.held.MEMORY_BUDGET`
and the largest are moved to spool files in the upload's scratch folder, where they wait until the last shard that
holds them (the docs say so).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..checks import some_names
from ..errors import LayoutError
from .archive_io import REQUESTS_AHEAD, SMALL_MEMBERS_BLOCK, AtPosition, Files, fetched_ahead
from .classes import NUM_CLASSES, class_ids, class_names
from .held import Held
from .parts import Part, Source, Wanted, identity_of, member_read

#: The most bytes a row group of a shard may hold uncompressed (as its metadata says): each is read whole into
#: memory. Hugging Face's imagenet-1k shards hold about 100 images, some 11 MB, a row group.
MAX_ROW_GROUP_BYTES = 1 << 30

log = logging.getLogger(__name__)

SPLITS = {"train": "train", "val": "validation"}
_SHARD = re.compile(r"^(train|validation|test)-.*\.parquet$")
#: A shard's number and how many shards its split has, in the name (``train-00003-of-00257.parquet``).
_NUMBERED = re.compile(r"^(train|validation)-(\d+)-of-(\d+)\b")


def missing_shards(names: list[str]) -> list[str]:
    """The shards that the numbered shards among ``names`` count and that are not there (``train-00001-of-00002``,
    without the rest of its name): a download cut short, or some shards copied."""
    found: dict[tuple[str, int, int], set[int]] = {}  # (split, shards, digits): the numbers there
    for name in names:
        if m := _NUMBERED.match(name):
            found.setdefault((m.group(1), int(m.group(3)), len(m.group(2))), set()).add(int(m.group(2)))
    return [f"{split}-{k:0{digits}d}-of-{total:0{digits}d}"
            for (split, total, digits), numbers in sorted(found.items()) for k in range(total) if k not in numbers]


def shard_folder(files: Files, folder: str) -> str | None:
    """``folder`` or its ``data/`` folder, whichever holds ``train-*``/``validation-*`` parquet shards."""
    for candidate in (folder, f"{folder}/data"):
        if any(_SHARD.match(n) and not n.startswith("test-") for n in files.names(candidate)):
            return candidate
    return None


@dataclass
class _Split:
    shards: list[str] = field(default_factory=list)
    # per shard, per row group: the label of each row
    labels: list[list[list[int]]] = field(default_factory=list)
    # per label: ("<shard>:<size>:<row group>", rows of that label there)
    where: dict[int, list[tuple[str, int]]] = field(default_factory=dict)


def _chunk_range(chunk: Any, size: int) -> tuple[int, int]:
    """The bytes of a column chunk (pyarrow's ``ColumnChunkMetaData``) in a file of ``size`` bytes: its dictionary
    page, when it has one, and its data pages."""
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page and chunk.dictionary_page_offset \
        else chunk.data_page_offset
    return start, min(size, start + chunk.total_compressed_size)


class _Ranges(AtPosition, io.RawIOBase):
    """A file of ``size`` bytes of which ``ranges`` are held (``blobs``): reads inside them are served from memory,
    any other from ``read(start, end)``."""

    def __init__(self, ranges: list[tuple[int, int]], blobs: list[Any], size: int, read: Callable[[int, int], bytes]):
        super().__init__()
        self.held = sorted(zip((start for start, _ in ranges), (end for _, end in ranges), blobs, strict=True))
        self.starts = [start for start, _, _ in self.held]
        self.size, self.fetch, self.pos = size, read, 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = offset + (0, self.pos, self.size)[whence]
        return self.pos

    def readinto(self, buffer: Any) -> int:
        end = min(self.size, self.pos + len(buffer))
        if end <= self.pos:
            return 0
        k = bisect_right(self.starts, self.pos) - 1
        if k >= 0 and self.held[k][1] >= end:
            start, _, blob = self.held[k]
            data = memoryview(blob)[self.pos - start:end - start]
        else:
            data = memoryview(self.fetch(self.pos, end))
        buffer[:len(data)] = data
        self.pos += len(data)
        return len(data)


class ParquetSource(Source):
    """The parquet shards in ``folder``."""

    layout = "parquet"

    def __init__(self, files: Files, folder: str):
        import pyarrow.parquet as pq

        self.pq = pq
        self.files, self.folder, self.root = files, folder, files.url(folder)
        names = files.names(folder)
        missing = missing_shards([n for n in names if _SHARD.match(n)])
        if missing:
            raise LayoutError(
                f"{self.root} lacks {len(missing)} of the shards their names count ({some_names(missing, 5)}): a "
                "download cut short, or some shards copied. Give every shard (their categories are spread over "
                "them, some cut at a shard's edge), or upload a folder of category folders of the images you "
                "want; nothing was uploaded")
        if any(n.startswith("test-") for n in names if _SHARD.match(n)):
            log.info("%s: the test shards have no labels and are left out", self.root)
        self.splits = {split: self._scan(sorted(f"{folder}/{n}" for n in names if _SHARD.match(n)
                                                and n.startswith(f"{prefix}-")))
                       for split, prefix in SPLITS.items()}
        self.ids = class_ids()
        self.names = {self.ids[k]: class_names()[self.ids[k]] for k in self._present("train")}
        self.total_bytes = sum(files.size(s) for split in self.splits.values() for s in split.shards)

    @contextlib.contextmanager
    def _open(self, shard: str) -> Iterator[Any]:
        with self.files.open(shard, SMALL_MEMBERS_BLOCK) as f:
            try:
                pf = self.pq.ParquetFile(f)
            except Exception as err:  # pyarrow raises ArrowInvalid, OSError...
                raise LayoutError(f"{self.files.url(shard)} cannot be read as parquet ({type(err).__name__}: {err}): "
                                  "it is damaged or cut short; download it again") from None
            yield pf

    def _scan(self, shards: list[str]) -> _Split:
        split = _Split(shards)
        for shard in shards:
            with self._open(shard) as pf:
                self._scan_shard(split, shard, pf)
        return split

    def _scan_shard(self, split: _Split, shard: str, pf: Any) -> None:
        columns = set(pf.schema_arrow.names)
        if not {"image", "label"} <= columns:
            raise LayoutError(f"{self.files.url(shard)} has the columns {sorted(columns)}; imagenet-1k's shards "
                              "have `image` and `label`")
        groups = []
        size = self.files.size(shard)
        labels_only = self._labels_only(shard, pf, size)
        for g in range(pf.num_row_groups):
            labels = labels_only.read_row_group(g, columns=["label"]).column("label").to_pylist()
            bad = next((v for v in labels if v is None or not 0 <= int(v) < NUM_CLASSES), "ok")
            if bad != "ok":
                raise LayoutError(
                    f"{self.files.url(shard)}, row group {g}, holds the label {bad}, outside 0..{NUM_CLASSES - 1}: "
                    "it is not labelled as imagenet-1k; remove the shard or fix its labels (nothing was "
                    "uploaded)")
            groups.append([int(v) for v in labels])
            key = f"{os.path.basename(shard)}:{size}:{g}"
            for label, count in Counter(groups[-1]).items():
                split.where.setdefault(label, []).append((key, count))
        split.labels.append(groups)

    def _labels_only(self, shard: str, pf: Any, size: int) -> Any:
        """``pf`` over the bytes of its ``label`` column alone, fetched at once (together from a bucket, mapped from
        a local file) rather than a row group after another: each of those reads, from a bucket, was a request of
        its own that also fetched the next 8 MB of images (Hugging Face's ``datasets`` writes 100 rows a row group)."""
        metadata = pf.metadata
        leaf = next(k for k in range(metadata.num_columns) if metadata.schema.column(k).path == "label")
        ranges = [_chunk_range(metadata.row_group(g).column(leaf), size) for g in range(metadata.num_row_groups)]
        return self._held(shard, ranges, size, metadata)

    def _present(self, split: str) -> list[int]:
        return sorted(self.splits[split].where)

    def parts(self, split: str, wanted: Wanted, keep: frozenset[str] | None = None, workdir: str = "") \
            -> Iterator[Part]:
        data = self.splits[split]
        held = Held(workdir, split)
        todo: dict[int, Part] = {}
        for label in self._present(split):
            wnid = self.ids[label]
            if keep is not None and wnid not in keep:
                continue
            entries = data.where[label]
            identity, rows = identity_of(entries, "hf-parquet", split, label), sum(c for _, c in entries)
            part = Part(wnid, split, identity, 0, partial(held.take, label), count=rows)
            if wanted(part):
                todo[label] = part
        last: dict[int, tuple[int, int]] = {}
        for s, groups in enumerate(data.labels):
            for g, labels in enumerate(groups):
                for label in set(labels) & set(todo):
                    last[label] = (s, g)
        for s, (shard, groups) in enumerate(zip(data.shards, data.labels, strict=True)):
            if not any(set(labels) & set(todo) for labels in groups):
                continue
            wanted_groups = [g for g, labels in enumerate(groups) if set(labels) & set(todo)]
            with self._open(shard) as pf:
                for g, source in self._groups(shard, pf, wanted_groups):
                    self._read_group(source, shard, g, todo, held)
                    for label in sorted(k for k, at in last.items() if at == (s, g)):
                        yield todo[label]

    def _groups(self, shard: str, pf: Any, groups: list[int]) -> Iterator[tuple[int, Any]]:
        """Each of ``groups`` with the parquet file to read it from. A local shard is read in place. A bucket's row
        groups are fetched :data:`~alexnet.data.archive_io.REQUESTS_AHEAD` at a time, each a request of its own,
        together, and the next ones while these are read: one request after another, the reading thread waited
        for each, and at a bucket's rate for one stream it would set the pace of the upload."""
        if self.files.local:
            for g in groups:
                yield g, pf
            return
        metadata, size = pf.metadata, self.files.size(shard)
        windows = [groups[k:k + REQUESTS_AHEAD] for k in range(0, len(groups), REQUESTS_AHEAD)]

        def fetch(window: list[int]) -> Any:
            ranges = []
            for g in window:
                chunks = [_chunk_range(metadata.row_group(g).column(c), size) for c in range(metadata.num_columns)]
                ranges.append((min(start for start, _ in chunks), max(end for _, end in chunks)))
            return self._held(shard, ranges, size, metadata)

        for window, fetched in fetched_ahead(windows, fetch):
            for g in window:
                yield g, fetched

    def _held(self, shard: str, ranges: list[tuple[int, int]], size: int, metadata: Any) -> Any:
        """The shard as a parquet file of which ``ranges`` are fetched now (together, from a bucket; mapped, from a
        local file); any other read is fetched when it is made."""
        held = _Ranges(ranges, self.files.read_ranges(shard, ranges), size,
                       lambda start, end: self.files.read(shard, start, end))
        return self.pq.ParquetFile(held, metadata=metadata)

    def _read_group(self, pf: Any, shard: str, group: int, todo: dict[int, Part], held: Held) -> None:
        rows = pf.metadata.row_group(group)
        declared = sum(rows.column(c).total_uncompressed_size for c in range(rows.num_columns))
        if declared > MAX_ROW_GROUP_BYTES:  # read whole, into memory: a small shard may hold gigabytes of zeros
            raise LayoutError(f"{shard}: its row group {group} holds {declared:,} bytes uncompressed, more than an "
                              f"upload reads at once ({MAX_ROW_GROUP_BYTES:,}): write the shard again with smaller "
                              "row groups (Hugging Face's hold about 100 images each)")
        table = pf.read_row_group(group, columns=["image", "label"])
        images = table.column("image").to_pylist()
        stem = os.path.basename(shard).split(".")[0]
        for row, (image, label) in enumerate(zip(images, table.column("label").to_pylist(), strict=True)):
            if label not in todo:
                continue
            data, path = (image.get("bytes"), image.get("path")) if isinstance(image, dict) else (image, None)
            name = os.path.basename(path) if path else f"{self.ids[label]}_{stem}_{group}_{row}.JPEG"
            blob = bytes(data or b"")
            held.add(label, member_read(name, len(blob), partial(bytes, blob)))  # bytes(blob) is blob: no copy
            todo[label].source_bytes += len(blob)
        held.spill()
