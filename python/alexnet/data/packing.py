"""The upload's engine: a source's parts packed into stored zips, checked image by image, and published as pins.

One thread reads the source in order (:mod:`alexnet.data.parts`); a pool of ``workers`` threads packs the parts it
hands over, decoding every image (:func:`alexnet.data.images.check_image`) and publishing each zip. At most
``workers + 2`` parts are in flight, so a source read as a stream holds a bounded number of categories in memory
and the scratch folder a bounded number of zips. Packing is work for a CPU, publishing mostly waiting for the
board: at most one part per usable CPU is packed at a time (more threads decoding than cores only take turns: 8
workers on 2 cores were 4-5% slower than 2), while the other threads fetch their part's bytes from a bucket or
publish their zips.

Resuming: a part whose pin on the board has the same fingerprint (its identity in the source and the options)
is skipped before it is read; otherwise its zip is rebuilt and uploaded only when its sha256 differs from the
board's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..checks import count_text, some_names
from ..errors import AlexnetError, BoardError, LayoutError
from ..machine import usable_cpus
from ..progress import LazyBar
from ..scratch import outer_temporary_folder, scratch_folder
from ..storage import layout
from ..storage.board import Board, is_full_board
from ..storage.pin_state import pin_state, record_source
from ..storage.publish import publish_file, quiet_pins
from ..storage.transfer import brief, disk_full, retry, unreachable
from .images import own_pixel_limit
from .part_zip import Options, fingerprint, zip_images
from .parts import Kept, Members, Part, Source

log = logging.getLogger(__name__)

#: The pins of ImageNet's categories: a WordNet id, with ``val-`` for the validation images.
_CATEGORY_PIN = re.compile(r"^(val-)?n\d+$")


@dataclass
class Result:
    """What happened to one part: ``status`` is ``"uploaded"``, ``"skipped"`` or ``"excluded"``."""

    wnid: str
    split: str
    status: str
    images: int = 0
    bytes: int = 0
    sha256: str = ""
    version: str = ""
    bad: list[dict[str, str]] = field(default_factory=list)


def _record_source(board: Board, pin: str, version: str, old: str, new: str, retries: int) -> None:
    """:func:`~alexnet.storage.pin_state.record_source` (retried), said in the log when it cannot be recorded: the zip
    is on the board, only the next upload's read of the category is at stake, so no error of it fails the part."""
    try:
        if retry(f"recording the source of {pin}", lambda: record_source(board, pin, version, old, new), retries):
            return
        reason = "its data.txt does not say the source as this version writes it"
    except Exception as error:
        reason = brief(error)
    log.info("The zip of %s on the board equals the one packed from this source; that could not be recorded (%s), "
             "so the next upload reads the category again.", pin, reason)


class _Unpublished(Exception):
    """A part packed while the source's checks failed, or not started once the board stopped answering: not
    published, and not reported on its own (the upload raises the source's or the board's error once)."""


def _publish(part: Part, members: Members, print_: str, state: dict[str, Any] | None, board: Board, exists: bool,
             workdir: str, options: Options, packing: threading.Semaphore, ready: Callable[[bool], bool]) -> Result:
    """Zip ``members`` and publish the zip as a new version of the part's pin unless the board holds the same.

    ``members()`` is called before one of the ``packing`` slots is taken (a source in a bucket fetches the part's
    bytes then), and the zip is published after it is given back. ``ready(wait)`` is the source's
    :meth:`~alexnet.data.parts.Source.ready`, raising :class:`_Unpublished` for the error its checks found."""
    zip_path = os.path.join(workdir, layout.zip_name(part.pin))
    try:
        ready(False)  # the board stopped answering while this part waited for a thread: not started
        items = members()
        with packing:
            ready(False)  # the source's checks failed already: not packed
            images, bad, size, sha = zip_images(part, items, zip_path, options)
            # no zip leaves before the source's checks have passed: while they run, this slot waits with its zip (the
            # other parts wait for a slot), so that the scratch space stays a few zips
            ready(True)
        if part.split == "train" and images < max(options.min_images, 1):  # no good image: no class to learn
            return Result(part.wnid, part.split, "excluded", images=images, bad=bad)
        if state is not None and state.get("sha256") == sha:
            if state.get("source") != print_:  # the same zip from a source of another fingerprint: said for next time
                _record_source(board, part.pin, str(state["version"]), str(state.get("source")), print_,
                               options.retries)
            return Result(part.wnid, part.split, "skipped", images, size, sha, str(state["version"]), bad)
        metadata = {"alexnet": layout.FORMAT_VERSION, "category": part.wnid, "split": part.split, "images": images,
                    "bytes": size, "sha256": sha, "source": print_, "resize": options.resize,
                    "quality": options.quality if options.resize is not None else None,
                    "max_pixels": options.max_pixels, "bad": bad}
        version = publish_file(board, zip_path, part.pin, title=f"ImageNet {part.split} images of {part.wnid}",
                               metadata=metadata, exists=exists, retries=options.retries, move=True)
        return Result(part.wnid, part.split, "uploaded", images, size, sha, version, bad)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(zip_path)


class Uploader:
    """Packs and publishes the parts of one source to one board (see the module's docstring)."""

    def __init__(self, source: Source, board: Board, options: Options, workers: int, *, scratch: str | None = None):
        self.source, self.board, self.options, self.workers = source, board, options, workers
        #: where the scratch folder is made (None: the system's temporary folder)
        self.scratch = scratch
        #: slots of the parts packed at the same time: one per usable CPU, never more than ``workers``
        self.packing = threading.BoundedSemaphore(min(workers, usable_cpus()))
        self.results: dict[tuple[str, str], Result] = {}
        self.failures: dict[str, BaseException] = {}
        self.uploaded_bytes = self.images = 0
        self.lock = threading.Lock()
        self.bar = LazyBar(source.total_bytes, "upload")
        self.states: dict[str, dict[str, Any] | None] = {}
        self.existing: set[str] = set()
        self.prints: dict[str, str] = {}
        #: the first error that said the board does not answer: no part is started after it
        self.stopped: BaseException | None = None
        #: set by Ctrl-C: no part is read or started after it, those under way are finished
        self.interrupted = threading.Event()

    def _record(self, part: Part, result: Result, source_bytes: int) -> None:
        with self.lock:
            self.results[(part.wnid, part.split)] = result
            self.images += result.images
            self.uploaded_bytes += result.bytes if result.status == "uploaded" else 0
            self.bar.update(source_bytes, self.images)

    def _wanted(self, part: Part) -> bool:
        """Whether ``part`` must be read: False (with its result recorded) when it is too small or on the board."""
        self.prints[part.pin] = print_ = fingerprint(part, self.options)
        if part.split == "train" and part.count is not None and part.count < self.options.min_images:
            self._record(part, Result(part.wnid, part.split, "excluded", images=part.count), part.source_bytes)
            return False
        state = self.states.get(part.pin)
        if state is not None and state.get("source") == print_:
            if part.split == "train" and int(state["images"]) < self.options.min_images:
                # on the board from an upload that kept it (a source whose counts are known once read): too small now
                self._record(part, Result(part.wnid, part.split, "excluded", images=int(state["images"])),
                             part.source_bytes)
                return False
            self._record(part, Result(part.wnid, part.split, "skipped", int(state["images"]), int(state["bytes"]),
                                      str(state["sha256"]), str(state["version"]),
                                      [dict(b) for b in state.get("bad", [])]), part.source_bytes)
            return False
        return True

    def _ready(self, wait: bool) -> bool:
        """The source's :meth:`~alexnet.data.parts.Source.ready` for a packing thread: its error ends the part as
        :class:`_Unpublished` (the reading thread raises it, once)."""
        if self.stopped is not None:
            raise _Unpublished
        try:
            return self.source.ready(wait)
        except LayoutError as err:
            raise _Unpublished from err

    def _stop(self, error: BaseException) -> bool:
        """Whether ``error`` says the board stopped answering; the first such error stops the upload's new work."""
        if unreachable(error) is None:
            return False
        with self.lock:
            if self.stopped is None:
                self.stopped = error
        return True

    def _finished(self, part: Part, slots: threading.Semaphore, future: Future[Result]) -> None:
        """A part's packing ended: its result is recorded and its slot freed, also when recording it fails (a slot
        never given back, the upload waited for it for ever)."""
        try:
            self._done(part, future)
        finally:
            slots.release()

    def _done(self, part: Part, future: Future[Result]) -> None:
        error = future.exception()
        if error is None:
            self._record(part, future.result(), part.source_bytes)
            return
        if isinstance(error, _Unpublished):
            return
        with self.lock:
            self.failures[part.pin] = error
            self.bar.update(part.source_bytes, self.images)
        if self._stop(error):  # the upload's one error says it (run() raises it)
            log.debug("category %s (%s) failed: %s", part.wnid, part.split, error)
        elif not isinstance(error, LayoutError):  # a damaged source is the upload's one error (run() raises it)
            log.error("category %s (%s) failed: %s", part.wnid, part.split, brief(error, 300))

    def _run(self, pool: ThreadPoolExecutor, workdir: str, split: str, keep: frozenset[str] | None) -> None:
        """Hand the parts of ``split`` to the pool, at most ``workers + 2`` in flight, and wait for the last.

        No part is kept once it is done (the slots, not a list of futures, tell when all are): a part read from a
        stream holds its bytes until then."""
        in_flight = self.workers + 2
        slots = threading.BoundedSemaphore(in_flight)
        for part in self.source.parts(split, self._wanted, keep, workdir):
            if self.stopped is not None or self.interrupted.is_set():  # no more parts read, none started
                break
            self.source.ready(wait=False)  # a check that failed in the background stops the reading
            slots.acquire()
            if self.interrupted.is_set():  # Ctrl-C while this part waited for a slot: it is not started
                slots.release()
                break
            try:
                self.bar.start()
                members = part.open()
                state = self.states.get(part.pin)
                future = pool.submit(_publish, part, members, self.prints[part.pin], state, self.board,
                                     part.pin in self.existing, workdir, self.options, self.packing, self._ready)
            except BaseException:
                slots.release()
                raise
            future.add_done_callback(partial(self._finished, part, slots))
            del part, members, future
        for _ in range(in_flight):  # every slot back: every part done
            slots.acquire()

    def _states(self, pool: ThreadPoolExecutor) -> None:
        """The board's state of every category pin it holds, read in parallel before anything is decided."""
        self.existing = set(self.board.pin_names())
        # a category's pin is named by its id: a WordNet id, or in a folder of category folders (or train/ and val/
        # folders of them) the folder's own name (known once the folders are listed; the official archives learn
        # theirs while the first ones are packed)
        own = set(self.source.names) if self.source.layout in ("folders", "imagefolder") else set()
        names = sorted(n for n in self.existing
                       if _CATEGORY_PIN.match(n) or n in own or n.removeprefix(layout.VAL_PREFIX) in own)

        def state(name: str) -> dict[str, Any] | None:
            if self.stopped is not None:
                raise _Unpublished
            try:
                return retry(f"reading pin {name}", lambda: pin_state(self.board, name), self.options.retries)
            except Exception as err:
                self._stop(err)
                raise

        self.states = dict(zip(names, pool.map(state, names), strict=True))

    def run(self) -> None:
        """Upload every training part, then the validation parts of the categories kept.

        A disk that fills up ends it with one error saying where the scratch folder was and what to give: an
        :class:`~alexnet.errors.AlexnetError` when the scratch folder or the source's reading stopped, a
        :class:`~alexnet.errors.BoardError` listing the parts when packing or publishing them did. A board that stops
        answering (see :func:`~alexnet.storage.transfer.retry` for how long a transfer tries) ends it as soon as the
        parts under way have ended: no other part is read or started, and one ``BoardError`` names the board and how
        many categories it holds, which a run again skips."""
        try:
            with quiet_pins(), own_pixel_limit(), scratch_folder("alexnet-upload-", self.scratch) as workdir, \
                    contextlib.closing(self.bar), \
                    ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="alexnet-upload") as pool:
                self._in_thread(partial(self._run_all, pool, workdir))
        except OSError as err:  # the scratch folder, or a category or spool file of the reading thread
            if not disk_full(err):
                raise
            raise AlexnetError(f"the upload stopped ({err}): {_no_space(self.scratch)}; then run imagenet_upload() "
                               "again to finish") from err
        if self.stopped is not None:
            done = len({w for (w, _), r in self.results.items() if r.status in ("uploaded", "skipped")})
            why = brief(unreachable(self.stopped) or self.stopped)
            raise BoardError(
                f"the board {self.board.location} stopped answering ({why}): run imagenet_upload() again to resume; "
                f"{count_text(done, 'category', 'categories')} "
                f"{'is' if done == 1 else 'are'} on the board") from self.stopped
        if self.failures:
            layout_errors = [e for e in self.failures.values() if isinstance(e, LayoutError)]
            if layout_errors:
                done = len({w for (w, _), r in self.results.items() if r.status in ("uploaded", "skipped")})
                if not done:
                    raise layout_errors[0]
                said = "category packed is" if done == 1 else "categories packed are"
                raise LayoutError(f"{layout_errors[0]} (the {done} {said} on the board and skipped next "
                                  "time)") from layout_errors[0]
            names = sorted(self.failures)
            board_full = next((e for e in self.failures.values() if is_full_board(e)), None)
            if board_full is not None:  # the board's disk: said once, with the pins that are not on it
                raise BoardError(f"{len(self.failures)} pin(s) could not be uploaded ({some_names(names)}): "
                                 f"{board_full}; then run imagenet_upload() again to finish (the categories pin was "
                                 "not written, so the board is not yet complete)") from board_full
            listing = f"{some_names(names)}; {names[0]}: {brief(self.failures[names[0]])}"
            full = any(disk_full(e) for e in self.failures.values())
            raise BoardError(
                f"{len(self.failures)} pin(s) could not be uploaded to {self.board.location} ({listing}). The "
                "categories pin was not written, so the board is not yet complete; "
                + (f"{_no_space(self.scratch)}, then " if full else "") + "run imagenet_upload() again to finish")

    def _in_thread(self, work: Callable[[], None]) -> None:
        """``work()`` in a thread of its own, the main thread only waiting for it.

        Python raises KeyboardInterrupt (Ctrl-C) in the main thread between any two bytecodes: in a lock's acquire
        loop, or while tqdm draws the bar holding its write lock (``tqdm.refresh`` has no ``finally``), it left that
        lock held for ever, and the packing threads that draw the bar or log waited for it while the pool's end
        waited for them: the upload hung. Here it interrupts ``Thread.join``, which holds no lock; the thread that
        reads the source then starts no other part and ends once those under way have ended."""
        failed: list[BaseException] = []

        def run() -> None:
            try:
                work()
            except BaseException as error:  # raised in the main thread
                failed.append(error)

        # a daemon: a second Ctrl-C ends the process without waiting for it
        thread = threading.Thread(target=run, name="alexnet-upload-read", daemon=True)
        thread.start()
        try:
            thread.join()
        except KeyboardInterrupt:  # said, not silent: the categories under way are finished
            self.interrupted.set()
            log.warning("Interrupted: finishing the categories under way, which the next upload skips "
                        "(Ctrl-C again stops at once).")
            thread.join()
            raise
        if failed:
            raise failed[0]

    def _run_all(self, pool: ThreadPoolExecutor, workdir: str) -> None:
        """The board's states read, then the training parts, then the validation parts, then the source's checks."""
        try:
            self._states(pool)
        except Exception as err:
            if not self._stop(err):
                raise
        if self.stopped is None and not self.interrupted.is_set():  # the board answered the states' reading
            self._run(pool, workdir, "train", None)
        if self.stopped is None and not self.interrupted.is_set():
            kept = Kept(w for (w, s), r in self.results.items() if s == "train" and r.status != "excluded")
            self._run(pool, workdir, "val", kept)
            trained = {w for (w, s) in self.results if s == "train"}
            self._say_untrained(sorted(kept.asked_not_kept - trained))
        if self.stopped is None and not self.interrupted.is_set():  # the checks in the background not waited for
            self.source.ready()
        if not self.failures and self.stopped is None and not self.interrupted.is_set():
            self.bar.finish()

    def _say_untrained(self, wnids: list[str]) -> None:
        """Say the categories ``wnids`` of validation images with no training images in the source: left out."""
        if wnids:
            log.warning("The validation images of %s with no training images in %s are left out (%s): a model "
                        "trained on the board has no output for their categories", count_text(len(wnids), "category",
                                                                                 "categories"),
                        self.source.root, some_names(wnids))


def _no_space(scratch: str | None) -> str:
    """What to do when a disk filled up during an upload whose scratch folder is made in ``scratch``."""
    where = scratch if scratch is not None else f"the system's temporary folder, {outer_temporary_folder()}"
    return (f"a disk is full: the scratch folder's (in {where}) or a folder board's. Give the upload a scratch "
            "folder (`scratch`) on a disk with room for a few categories' zips, or free some space")
