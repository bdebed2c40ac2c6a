"""A board whose server dies during an upload or a fetch: the transfer stops within a bound, starts nothing more and
ends with one short error; libraries' tracebacks stay out of the default log. A slow link is not cut while bytes
move; a server silent in the middle of a download is given up on after the silent socket's bound."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_processes import ctrl_c, ctrl_c_as_in_a_terminal
from servers import HOST, Trickle, _child, create_gcs_bucket, free_port, http_server, silent_listener

from alexnet.data import packing
from alexnet.data.fetch import imagenet_partition
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.errors import BoardError
from alexnet.storage import fetch as fetch_module
from alexnet.storage import transfer
from alexnet.storage.board import open_board

CLASSES = 5


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("imagenet")
    return imagenet_synthetic(root / "src", classes=CLASSES, images_per_class=4, val_per_class=1, seed=3,
                              max_side=40)["path"]


@contextlib.contextmanager
def killable(kind: str) -> Iterator[tuple[str, object]]:
    """A GCS emulator or a moto server of its own (with the bucket ``bkt``), and its process, to be killed."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    if kind == "gs":
        cmd = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", HOST, "--port", str(port),
               "--in-memory", "--quiet"]
        ready = f"{url}/storage/v1/b"
    else:
        cmd = [str(Path(sys.executable).with_name("moto_server")), "-H", HOST, "-p", str(port)]
        ready = f"{url}/moto-api/"
    with _child(cmd, ready) as proc:
        if kind == "gs":
            create_gcs_bucket(url, "bkt")
        else:
            import urllib.request

            with urllib.request.urlopen(urllib.request.Request(f"{url}/bkt", method="PUT"), timeout=10):
                pass
        yield url, proc


@pytest.fixture
def quick(monkeypatch):
    """Bounds made small so that a dead server ends a transfer in seconds: alexnet's window, and gcsfs's sleeps
    between its own retries (1, 2, 4, 8, 16 s) a twentieth."""
    monkeypatch.setattr(transfer, "UNREACHABLE_SECONDS", 1.0)
    import gcsfs.retry

    real = gcsfs.retry.asyncio.sleep
    monkeypatch.setattr(gcsfs.retry, "asyncio", types.SimpleNamespace(sleep=lambda s: real(s / 20)))


def point_at(monkeypatch, kind: str, url: str) -> str:
    if kind == "gs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    else:
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                            ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ENDPOINT_URL", url)):
            monkeypatch.setenv(name, value)
    return f"{kind}://bkt/board"


@pytest.mark.parametrize("kind", ["gs", "s3"])
def test_a_server_that_dies_during_an_upload_ends_it_in_seconds_with_one_line(kind, source, quick, monkeypatch,
                                                                              caplog):
    published, waits_after = [], []
    original = packing.publish_file

    def publish_then_kill(*args, **kwargs):
        if published:
            proc.kill()
            proc.wait()
        published.append(args[2])
        return original(*args, **kwargs)

    from alexnet.data.parts import Source

    def ready(self, wait=True):  # the source's checks in the background are not waited for once stopped
        if len(published) > 1:
            waits_after.append(wait)
        return True

    monkeypatch.setattr(packing, "publish_file", publish_then_kill)
    monkeypatch.setattr(Source, "ready", ready)
    with killable(kind) as (url, proc):
        board = point_at(monkeypatch, kind, url)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING), pytest.raises(BoardError) as err:
            imagenet_upload(source, board, workers=1)
        seconds = time.monotonic() - started
    message = str(err.value)
    assert message.startswith(f"the board {board} stopped answering (")
    assert "127.0.0.1" in message and message.endswith(
        "run imagenet_upload() again to resume; 1 category is on the board")
    assert "\n" not in message and len(message) < 400
    assert len(published) == 2  # the category under way when the server died; no other one started
    assert True not in waits_after
    assert seconds < 25
    assert len([r for r in caplog.records if r.name.startswith("alexnet")]) <= 3


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_server_that_dies_during_a_fetch_ends_it_in_seconds_with_one_line(source, quick, monkeypatch, tmp_path):
    started_zips = []
    original = fetch_module._fetch_one

    def fetch_then_kill(item, *args, **kwargs):
        if started_zips:
            proc.kill()
            proc.wait()
        started_zips.append(item.key)
        return original(item, *args, **kwargs)

    with killable("gs") as (url, proc):
        board = point_at(monkeypatch, "gs", url)
        imagenet_upload(source, board, workers=2)
        monkeypatch.setattr(fetch_module, "_fetch_one", fetch_then_kill)
        started = time.monotonic()
        with pytest.raises(BoardError) as err:
            imagenet_partition(0, 1, board, cache_dir=tmp_path / "cache", workers=1)
        seconds = time.monotonic() - started
    message = str(err.value)
    assert message.startswith(f"the board {board} stopped answering (")
    assert message.endswith(f"fetching again resumes; 1 of {CLASSES * 2} zips are in the cache")
    assert len(started_zips) == 2  # the zip under way; the queued ones were not started
    assert seconds < 25


@pytest.fixture(scope="module")
def served(source, tmp_path_factory) -> Path:
    """A folder whose ``board`` holds the upload of ``source``: to be served over http://."""
    www = tmp_path_factory.mktemp("www")
    imagenet_upload(source, www / "board", workers=2)
    return www


@pytest.fixture
def short_total(monkeypatch):
    """aiohttp's default timeout of a session, 5 minutes on the whole of each request, made 1 s; and no http(s):// file
    system kept from before, whose session would keep the real one: a client left with that default cuts any download
    longer than it, however fast its bytes move."""
    import aiohttp
    import aiohttp.client
    from fsspec.implementations.http import HTTPFileSystem

    monkeypatch.setattr(aiohttp.client, "DEFAULT_TIMEOUT", aiohttp.ClientTimeout(total=1.0, sock_connect=30))
    HTTPFileSystem.clear_instance_cache()


def test_an_https_board_on_a_slow_link_is_fetched_however_long_the_bytes_keep_moving(served, short_total, tmp_path):
    with http_server(served, trickle=Trickle(pieces=6, pause=0.3)) as url:  # each zip in 1.5 s, more than 1 s
        data = imagenet_partition(0, CLASSES, f"{url}/board", cache_dir=tmp_path / "cache", workers=1, retries=0)
    assert len(data["categories"]) == 1 and len(data["image"]) == 4 and len(data["val_image"]) == 1
    assert all(os.path.getsize(path) > 0 for path in data["image"] + data["val_image"])


def test_an_https_board_silent_in_the_middle_of_a_download_is_named(served, short_total, monkeypatch, tmp_path):
    from alexnet.storage import reach

    monkeypatch.setattr(reach, "SILENT_TIMEOUT", 0.5)
    with http_server(served, trickle=Trickle(pieces=4, silent=30)) as url:  # a first quarter, then nothing
        board = f"{url}/board"
        with pytest.raises(BoardError) as err:
            imagenet_partition(0, CLASSES, board, cache_dir=tmp_path / "cache", workers=1, retries=0)
    # the silent socket's bound, not a bound on the whole request (aiohttp's TimeoutError), ended it
    assert str(err.value) == (f"the board {board} stopped answering (SocketTimeoutError: Timeout on reading data "
                              "from socket): fetching again resumes; 0 of 2 zips are in the cache")


def test_downloads_that_wait_for_a_byte_say_so_and_say_when_bytes_come_again(served, short_total, monkeypatch,
                                                                             tmp_path, caplog):
    """A board that keeps its connections open and silent is given up on after minutes (each request waits for its
    silent socket, then is tried again): the fetch's bar stood still and nothing was said for 6 minutes."""
    from alexnet.storage import stalls

    monkeypatch.setattr(stalls, "STALL_SAID", 0.6)
    with http_server(served, trickle=Trickle(pieces=3, pause=1.5)) as url, caplog.at_level("INFO", logger="alexnet"):
        imagenet_partition(0, CLASSES, f"{url}/board", cache_dir=tmp_path / "cache", workers=1, retries=0)
    said = [r.getMessage() for r in caplog.records if r.name == "alexnet.storage.stalls"]
    stalled = [m for m in said if "no byte has come" in m]
    assert stalled and stalled[0].startswith(
        f"fetch 0/{CLASSES}: no byte has come from {url}/board for 1 s (1 download under way): it may have stopped "
        "answering; each request waits up to 30 s for a silent connection and is tried again, so giving up on it "
        "can take a few minutes (Ctrl-C stops; the same fetch run again resumes)"), said
    again = [m for m in said if "again, after" in m]
    assert len(again) == len(stalled) and re.fullmatch(
        rf"fetch 0/{CLASSES}: bytes come from {re.escape(url)}/board again, after [12] s without any", again[0]), said


def test_s3_sends_a_request_to_a_silent_endpoint_as_many_times_as_declared(monkeypatch):
    """botocore's ``max_attempts`` counts the retries, not the attempts: a silent S3 endpoint was sent 8 requests (4
    minutes of silent sockets), not the declared 6."""
    from alexnet.storage import location, reach

    monkeypatch.setattr(reach, "SILENT_TIMEOUT", 0.2)
    with silent_listener(answered=1) as (url, taken):  # answers the first look, then hangs
        board = point_at(monkeypatch, "s3", url)
        with pytest.raises(BoardError, match=f"^cannot reach board {board}: ReadTimeoutError: "):
            open_board(board)
        requests = len(taken) - 1
    assert requests == location._S3_ATTEMPTS * location._S3FS_RETRIES == 6


def test_a_dead_endpoint_is_tried_for_the_window_only(monkeypatch):
    monkeypatch.setattr(transfer, "UNREACHABLE_SECONDS", 0.5)
    monkeypatch.setattr(transfer, "backoff", lambda attempt: 0.05)
    calls = []

    def refused():
        calls.append(1)
        raise ConnectionRefusedError(111, "Connection refused")

    started = time.monotonic()
    with pytest.raises(BoardError, match=r"^reading x: nothing answered for \d+ s \(ConnectionRefusedError: "):
        transfer.retry("reading x", refused, retries=1000)
    assert time.monotonic() - started < 2
    assert 2 <= len(calls) < 30


def test_the_timeout_fsspec_raises_in_place_of_the_clients_gives_way_to_it():
    import aiohttp
    from fsspec.exceptions import FSTimeoutError

    silent = aiohttp.SocketTimeoutError("Timeout on reading data from socket")
    with pytest.raises(BoardError) as err:
        try:
            raise FSTimeoutError from silent  # what fsspec raises, saying nothing of its own
        except FSTimeoutError as wrapped:
            raise BoardError("downloading x failed after 1 attempt") from wrapped
    assert transfer.unreachable(err.value) is silent
    assert transfer.brief(silent) == "SocketTimeoutError: Timeout on reading data from socket"
    alone = FSTimeoutError()
    assert transfer.unreachable(alone) is alone
    said = FSTimeoutError("reading did not complete within 5s.")
    said.__cause__ = silent
    assert transfer.unreachable(said) is said  # it says something of its own


def test_a_slow_link_that_moves_bytes_is_not_given_up_on(monkeypatch):
    monkeypatch.setattr(transfer, "UNREACHABLE_SECONDS", 0.3)
    monkeypatch.setattr(transfer, "backoff", lambda attempt: 0.0)
    attempts = []

    def resets_while_moving():  # each attempt moves bytes for 0.4 s, more than the window, then its link drops
        attempts.append(1)
        time.sleep(0.4)
        if len(attempts) < 3:
            raise ConnectionResetError(104, "Connection reset by peer")
        return "done"

    assert transfer.retry("downloading x", resets_while_moving, retries=5, moved=time.monotonic) == "done"
    assert len(attempts) == 3


def test_library_tracebacks_are_left_out_without_verbose():
    from alexnet.cli import _NoLibraryTracebacks

    def logged(filtered: bool) -> str:
        out = io.StringIO()
        handler = logging.StreamHandler(out)
        if filtered:
            handler.addFilter(_NoLibraryTracebacks())
        library = logging.getLogger("gcsfs.test-b")
        library.addHandler(handler)
        library.propagate = False
        try:
            try:
                raise ConnectionRefusedError("refused")
            except ConnectionRefusedError:
                library.exception("_request out of retries on exception: refused")
                logging.getLogger("alexnet.test-b").addHandler(handler)
                logging.getLogger("alexnet.test-b").warning("own warning")
        finally:
            library.removeHandler(handler)
            logging.getLogger("alexnet.test-b").removeHandler(handler)
        return out.getvalue()

    assert logged(False).count("Traceback") == 1
    assert logged(True) == "_request out of retries on exception: refused\nown warning\n"


def test_gcsfs_trying_a_request_again_is_said_once_a_burst_and_logging_is_left_as_it_was(quick, monkeypatch, caplog):
    """gcsfs repeats a failed request up to 6 times over about 30 s, logging each at DEBUG only: a bucket gone for a
    while blocked a training without a word. Its first repeat is now alexnet's warning, once a burst; gcsfs's own
    logger keeps its level, and its DEBUG lines stay out of a log set to INFO."""
    from alexnet.storage import gcs_retries, location

    gcs_level = logging.getLogger("gcsfs").level
    with killable("gs") as (url, proc):
        point_at(monkeypatch, "gs", url)
        fs = location.open_filesystem("gs://bkt/board")
        assert fs.ls("bkt") == []
        import gcsfs.retry

        monkeypatch.setattr(gcsfs.retry.logger, "said_at", -gcs_retries.RETRIES_SAID_EVERY)  # no burst said before
        proc.kill()
        proc.wait()
        caplog.clear()  # the opening's own lines, kept when an earlier test left the package's logger at INFO
        with caplog.at_level(logging.INFO), pytest.raises(OSError):
            fs.ls("bkt/other", refresh=True)
    said = [r.getMessage() for r in caplog.records if r.name == "alexnet.storage.location"]
    assert len(said) == 1, said
    assert said[0].startswith("A request to Google Cloud Storage failed (") and "127.0.0.1" in said[0]
    assert said[0].endswith("gcsfs tries it again, up to 5 times more in about 30 s, before the transfer's own "
                            "attempts (said when they fail).")
    assert not [r for r in caplog.records if r.name == "gcsfs" and r.levelno < logging.INFO], "gcsfs's DEBUG lines"
    assert logging.getLogger("gcsfs").level == gcs_level
    # the next burst, RETRIES_SAID_EVERY later, is said again; gcsfs's own record goes on as it was
    caplog.clear()
    monkeypatch.setattr(gcs_retries, "RETRIES_SAID_EVERY", 0.0)
    with caplog.at_level(logging.DEBUG, logger="gcsfs"):
        gcsfs.retry.logger.debug("_request retrying after exception: boom")
    last = caplog.records[-1]
    assert (last.name, last.getMessage()) == ("gcsfs", "_request retrying after exception: boom")
    assert last.filename == "test_unreachable_board.py", "the line that logged it, not alexnet's"
    assert "failed (boom)" in caplog.text


_FETCH = textwrap.dedent("""
    import sys
    from alexnet.data.fetch import imagenet_partition
    imagenet_partition(0, 1, sys.argv[1], cache_dir=sys.argv[2], workers=2)
    print("returned", flush=True)
    """)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_ctrl_c_stops_the_downloads_under_way_at_their_next_bytes(served, tmp_path):
    """Ctrl-C on a slow link: the downloads under way stop at once, not when their zips are in (60 s each here), and
    leave no part file."""
    cache = tmp_path / "cache"

    def parts() -> list[Path]:
        return [p for p in cache.rglob("*.part-*") if p.is_file()] if cache.exists() else []

    with http_server(served, trickle=Trickle(pieces=120, pause=0.5)) as url:
        child = subprocess.Popen([sys.executable, "-c", _FETCH, f"{url}/board", str(cache)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal,
                                 env={**os.environ, "ALEXNET_PROGRESS": "0"})
        try:
            waited = time.monotonic()
            while not any(p.stat().st_size > 0 for p in parts()) and time.monotonic() - waited < 30:
                time.sleep(0.1)
            assert parts(), "a download was under way"
            out, _, seconds = ctrl_c(child, 60)
        finally:
            child.kill()
    assert "returned" not in out, out
    assert seconds < 10, f"{seconds:.1f} s after Ctrl-C"
    assert not parts() and not list(cache.rglob("n0*.zip"))


def test_the_retries_help_says_the_time_a_silent_board_is_given():
    from alexnet.data.options import FetchOptions, UploadOptions
    from alexnet.declare.declaration import specs

    for declaration in (FetchOptions, UploadOptions):
        said = specs(declaration)["retries"].help
        assert (f"their waits doubling from about 0.5 s (a board that does not answer at all is given up on once "
                f"they are used, or about {transfer.UNREACHABLE_SECONDS:.0f} s after it stopped if that comes first, "
                "a few minutes when it keeps its connections open without a word") in " ".join(said.split()), said
    from alexnet.storage.stalls import STALL_SAID

    assert f"said after {STALL_SAID:.0f} s without a byte" in specs(FetchOptions)["retries"].help


def test_a_checkpoints_bucket_down_for_a_minute_does_not_end_the_run(monkeypatch, caplog):
    """A checkpoint's upload gave up on a bucket that refused connections after its 4 attempts, 0.5 to 2 s apart: an
    outage of 13 s ended a run of days. The uploads of checkpoints now try for a minute and more, saying so each time;
    other transfers keep their 30 s."""
    from alexnet.train.checkpoint_files import UPLOAD_PATIENCE, upload_retry

    clock = {"now": 0.0}  # the transfers' own clock, not the process's
    monkeypatch.setattr(transfer, "time", types.SimpleNamespace(
        monotonic=lambda: clock["now"], sleep=lambda seconds: clock.__setitem__("now", clock["now"] + seconds)))
    monkeypatch.setattr(transfer, "random", types.SimpleNamespace(random=lambda: 0.5))  # no jitter: 0.5, 1, 2, 4 s...

    def down_for(seconds: float):
        def upload() -> str:
            if clock["now"] < seconds:
                raise ConnectionRefusedError(111, "Connection refused")
            return "uploaded"
        return upload

    with caplog.at_level(logging.WARNING, logger="alexnet"):
        assert upload_retry("uploading ckpt-20.index", down_for(60)) == "uploaded"
    assert len(caplog.records) == 7 and all("retrying in" in r.getMessage() for r in caplog.records)
    clock["now"] = 0.0
    with pytest.raises(BoardError, match=r"^uploading ckpt-20.index: nothing answered for 120 s"):
        upload_retry("uploading ckpt-20.index", down_for(UPLOAD_PATIENCE + 60))
    clock["now"] = 0.0
    with pytest.raises(BoardError, match="failed after 4 attempts"):  # the other transfers, as they were
        transfer.retry("downloading a zip", down_for(60), 3)
