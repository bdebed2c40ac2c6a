"""The lease that holds a folder of a bucket (:mod:`alexnet.storage.lease`): waited for while its holder renews it,
taken over once it stays as it is, lost by a holder that could not renew it, and one holder of two taking it at once,
also where the storage does not refuse the second write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from alexnet.storage import lease
from alexnet.storage.locking import Busy


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    """Seconds made small: renewed every 0.05 s, stale after 0.4 s."""
    for name, value in (("BEAT", 0.05), ("STALE", 0.4), ("POLL", 0.02), ("SETTLE", 0.05)):
        monkeypatch.setattr(lease, name, value)


@pytest.fixture
def path() -> str:
    return f"/leases-{uuid.uuid4().hex}/.alexnet-run.lock"


def _fs() -> MemoryFileSystem:
    return fsspec.filesystem("memory")


def test_a_renewed_lease_is_waited_for_then_refused_naming_its_holder_and_taken_once_released(path):
    fs = _fs()
    first = lease.hold_lease(fs, path, note="the run of process 1 on a", patience=1)
    waited: list[str] = []
    started = time.monotonic()
    with pytest.raises(Busy) as busy:
        lease.hold_lease(fs, path, note="the run of process 2 on b", patience=1.0, waiting=waited.append)
    assert time.monotonic() - started >= 1.0, "waited its patience, though the lease stayed longer than STALE"
    assert busy.value.holder == "the run of process 1 on a" and waited == ["the run of process 1 on a"]
    first.release()
    assert not fs.exists(path), "released: deleted"
    started = time.monotonic()
    second = lease.hold_lease(fs, path, note="the run of process 2 on b", patience=1.0, waiting=waited.append)
    assert time.monotonic() - started < 0.5 and len(waited) == 1, "taken at once"
    second.release()


def test_a_lease_its_holder_stopped_renewing_is_taken_over_and_the_holder_finds_it_lost(path):
    fs = _fs()
    first = lease.hold_lease(fs, path, note="the run killed", patience=1)
    first._stop.set()  # killed: renewed no more, and never deleted
    first._thread.join()
    taken: list[str] = []
    started = time.monotonic()
    second = lease.hold_lease(fs, path, note="the run relaunched", patience=5,
                              took_over=lambda note, ended: taken.append(note))
    assert lease.STALE <= time.monotonic() - started < 3, "once it has stayed as it is for STALE seconds"
    assert taken == ["the run killed"] and second.lost() is None
    # the first was only suspended: back, it finds the lease another's at its next renewal, and writes nothing
    first._stop.clear()
    first.start()
    deadline = time.monotonic() + 3
    while first.lost() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert first.lost() == "the run relaunched"
    first.release()
    assert fs.exists(path), "a lost lease is not deleted by the holder that lost it"
    time.sleep(3 * lease.BEAT)
    assert second.lost() is None
    second.release()


def test_what_is_no_lease_is_taken_over_once_it_stays_so_and_a_deleted_lease_is_made_again(path):
    fs = _fs()
    fs.pipe_file(path, b"half a lease")
    held = lease.hold_lease(fs, path, note="me", patience=3)
    assert lease._read(fs, path)["note"] == "me"
    fs.rm_file(path)
    deadline = time.monotonic() + 3
    while not fs.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lease._read(fs, path)["token"] == held.token and held.lost() is None
    held.release()


class _NoRefusal(MemoryFileSystem):
    """A store that does not refuse a second exclusive create (a local GCS emulator): the last write wins."""

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        return super().pipe_file(path, value, **kwargs)


def _ended_process() -> int:
    """The id of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="a system that says its process namespace")
def test_a_lease_whose_process_ended_on_this_host_is_taken_over_at_once_and_no_other(path, monkeypatch):
    """An upload killed and run again on the same host waited the 30 s a lease takes to go stale."""
    monkeypatch.setattr(lease, "STALE", 1.0)
    fs = _fs()
    here = lease._process()
    taken: list[tuple[str, bool]] = []

    def left(**process: object) -> None:
        fs.pipe_file(path, json.dumps({"token": "t", "beat": 1, "note": "the upload killed",
                                       "process": {**here, **process}}).encode())

    left(pid=_ended_process())
    started = time.monotonic()
    held = lease.hold_lease(fs, path, note="the upload again", patience=10,
                            took_over=lambda note, ended: taken.append((note, ended)))
    assert time.monotonic() - started < 0.5 and taken == [("the upload killed", True)]
    assert json.loads(fs.cat_file(path))["process"] == here, "a lease names its process"
    held.release()
    # a process alive, or one of another host or process namespace, or none named: taken once stale, as before
    for other in ({"pid": os.getpid()}, {"host": "elsewhere"}, {"pid_namespace": "1"}, {"pid": None}):
        left(**({"pid": _ended_process()} | other))
        taken.clear()
        started = time.monotonic()
        held = lease.hold_lease(fs, path, note="the upload again", patience=10,
                                took_over=lambda note, ended: taken.append((note, ended)))
        assert time.monotonic() - started >= lease.STALE and taken == [("the upload killed", False)], other
        held.release()
    assert lease._gone({"process": {**here, "pid": os.getpid()}}) is False, "alive"


@pytest.mark.parametrize("refuses", [True, False])
def test_of_two_takers_at_once_one_holds_the_lease(path, refuses):
    fs = _fs() if refuses else _NoRefusal()
    held: list[lease.Lease] = []
    refused: list[str] = []
    barrier = threading.Barrier(2)

    def take(name: str) -> None:
        barrier.wait()
        try:
            held.append(lease.hold_lease(fs, path, note=name, patience=1.0))
        except Busy as busy:
            refused.append(busy.holder)

    threads = [threading.Thread(target=take, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(held) == 1 and refused == [held[0].note], (held, refused)
    time.sleep(3 * lease.BEAT)
    assert held[0].lost() is None
    held[0].release()


def test_a_holder_that_could_not_renew_finds_the_lease_taken_before_it_writes_not_a_beat_later(path):
    """Fenced: a holder suspended (or cut off from the bucket) past STALE less a beat reads the lease again before it
    writes; it used to trust a flag its thread set only at the next beat."""
    fs = _fs()
    first = lease.hold_lease(fs, path, note="the run suspended", patience=1)
    assert first.held() is None, "renewed just now: trusted without a read"
    first._stop.set()  # suspended: no renewal
    first._thread.join()
    second = lease.hold_lease(fs, path, note="the run that took it", patience=5)
    assert first.lost() is None, "its thread has not looked"
    assert first.held() == "the run that took it", "found at once, before any write"
    second.release()


class _Conflicting(MemoryFileSystem):
    """S3 answers two exclusive creates at once with 409 ConditionalRequestConflict, an OSError through s3fs."""

    conflicts = 1

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        if mode == "create" and self.conflicts:
            type(self).conflicts -= 1
            raise OSError(5, "ConditionalRequestConflict")
        return super().pipe_file(path, value, mode=mode, **kwargs)


def test_a_conflict_of_two_creates_is_looked_at_again_and_its_own_lease_found_is_held(path):
    held = lease.hold_lease(_Conflicting(), path, note="me", patience=3)
    assert lease._read(_fs(), path)["token"] == held.token
    held.release()
    # its own lease, written by an attempt whose answer was lost: held at once, not waited for as another's
    fs = _fs()
    mine = lease.Lease(fs, path, "me again")
    mine._write(create=True)
    waited: list[str] = []
    original = lease.Lease
    try:
        lease.Lease = lambda *args: mine  # type: ignore[misc,assignment]
        taken = lease.hold_lease(fs, path, note="me again", patience=3, waiting=waited.append)
    finally:
        lease.Lease = original  # type: ignore[misc]
    assert taken is mine and waited == [] and taken.taken_over is None
    taken.release()


def test_a_take_cut_short_by_ctrl_c_leaves_no_lease_nobody_renews(path, monkeypatch):
    fs = _fs()
    real = time.sleep

    def interrupted(seconds):
        if seconds == lease.SETTLE:
            raise KeyboardInterrupt
        real(seconds)

    monkeypatch.setattr(lease.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lease.hold_lease(fs, path, note="me", patience=3)
    assert not fs.exists(path)


class _LostAnswer(MemoryFileSystem):
    """A write that lands but whose answer is lost (an OSError after it), once."""

    lost = 1

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        super().pipe_file(path, value, mode=mode, **kwargs)
        if type(self).lost:
            type(self).lost -= 1
            raise OSError(104, "Connection reset by peer")


def test_a_takeover_whose_write_lost_its_answer_still_says_whose_lease_it_took(path):
    fs = _LostAnswer()
    killed = lease.Lease(fs, path, "the run killed")
    _LostAnswer.lost = 0
    killed._write(create=True)
    _LostAnswer.lost = 1
    taken: list[str] = []
    held = lease.hold_lease(fs, path, note="the run relaunched", patience=5,
                            took_over=lambda note, ended: taken.append(note))
    assert taken == ["the run killed"] and held.taken_over == "the run killed"
    held.release()


def test_a_holder_back_after_the_run_that_took_over_has_let_go_does_not_make_the_lease_again(path):
    """Suspended past STALE, taken over, and that holder ended: the lease is gone, and the first made it again and wrote
    over the finished run's folder."""
    fs = _fs()
    first = lease.hold_lease(fs, path, note="the run suspended", patience=1, where=f"s3://{path}")
    first._stop.set()
    first._thread.join()
    second = lease.hold_lease(fs, path, note="the run that took it", patience=5)
    second.release()
    assert not fs.exists(path)
    assert first.held() == "one that has ended since: the folder's lease is gone"
    assert not fs.exists(path), "not made again"
