"""MultiWorkerMirroredStrategy in alexnet_train(): two worker processes on 127.0.0.1, without Spark.

The workers are this file run as a script (see the bottom), so that each starts TensorFlow afresh with
its own TF_CONFIG. One worker is killed mid-epoch: the other must fail within the collective timeout
instead of hanging, and a second run must resume from the chief's checkpoint with both workers in step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from helpers_join import met_in_threads  # noqa: E402
from helpers_processes import Processes, ctrl_c_as_in_a_terminal  # noqa: E402
from helpers_train import keep_epoch_weights, make_tree, score_epochs, worker_env  # noqa: E402

from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.data.partition import partition_sizes  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.model.card import CARD_FILE  # noqa: E402
from alexnet.model.saved import MODEL_FILE  # noqa: E402
from alexnet.storage.board import open_board  # noqa: E402
from alexnet.train import agreement, cluster  # noqa: E402
from alexnet.train import api as training  # noqa: E402
from alexnet.train import strategy as strategies  # noqa: E402
from alexnet.train.checkpoint import STATE_FILE  # noqa: E402
from alexnet.train.cluster import tf_config_json  # noqa: E402
from alexnet.train.strategy import resolve_strategy  # noqa: E402

HERE = Path(__file__).resolve()
TIMEOUT = 20.0  # collective timeout of the worker-death test, seconds
PAUSED_TIMEOUT, PAUSE = 120.0, 25.0  # collective timeout and pause of the paused-worker test, seconds
KILL_EPOCH, KILL_STEP = 1, 1  # worker 1 dies after this step (0-based) of this epoch (0-based)


# ---------------------------------------------------------------------------------------------------------
# cheap checks, in this process


def test_steps_come_from_the_smallest_partition_whatever_the_workers_files(tmp_path):
    """imagenet_partition() carries every partition's size, so every worker derives the same steps per epoch."""
    from alexnet.data.fetch import imagenet_partition
    from alexnet.data.upload import imagenet_upload

    counts = {0: 14, 1: 9, 2: 6, 3: 5}
    for label, count in counts.items():
        make_tree(tmp_path / f"src{label}", classes=1, per_class=count, val_per_class=0, seed=label)
        wnid = f"n{label + 1:08d}"
        (tmp_path / "plain").mkdir(exist_ok=True)
        (tmp_path / f"src{label}" / "train" / "n00000000").rename(tmp_path / "plain" / wnid)
    board = tmp_path / "board"
    imagenet_upload(tmp_path / "plain", board=board)
    images = {f"n{label + 1:08d}": count for label, count in counts.items()}
    for total, batch in ((2, 4), (3, 2)):
        sizes = partition_sizes(images, total)
        assert len(set(sizes)) > 1, "the test needs unbalanced partitions"
        for partition in range(total):
            data = imagenet_partition(partition, float(total), board, cache_dir=tmp_path / "cache")  # R: doubles
            assert data["partition_sizes"] == sizes and len(data["image"]) == sizes[partition]
            assert agreement.partition_steps(data, batch) == min(sizes) // batch
    assert agreement.partition_steps({"image": ["a"]}, 4) is None


def test_two_workers_on_the_same_partition_are_refused_on_every_worker():
    """The same command pasted on every node (``--partition 0 --total 2``): half the categories were never trained and
    the validation counted every image twice, without a word."""
    with pytest.raises(AlexnetError, match=r"^workers 0 and 1 train on the same partition, 0 of 2: each worker must "
                                           r"train on its own partition \(partition = its worker index, total = the 2 "
                                           r"workers\)"):
        agreement._refuse_shared_partitions({0: 0, 1: 0}, 2)
    with pytest.raises(AlexnetError, match=r"^workers 0, 2 and 3 train on the same partition, 1 of 4"):
        agreement._refuse_shared_partitions({0: 1, 1: 0, 2: 1, 3: 1}, 4)
    agreement._refuse_shared_partitions({0: 0, 1: 1}, 2)
    agreement._refuse_shared_partitions({0: -1, 1: -1}, None)  # data that is no partition: nothing to compare


def test_validation_steps_cover_the_largest_share_and_every_image_once():
    # 13 and 29 images, 4 a step from each worker: 8 steps (29 = 7 * 4 + 1), worker 0 pads 19 places
    assert agreement.validation_plan([13, 29], 4) == (8, 42)
    assert agreement.validation_plan([29, 13, 0], 4) == (8, 42), "a worker without images pads every step"
    assert agreement.validation_plan([16, 16], 4) == (4, 32), "no padding when every share fills whole steps"
    assert agreement.validation_plan([13, 29], 4, limit=3) == (3, 24), "validation_steps: the first 3 * 4 of each"
    assert agreement.validation_plan([13, 29], 4, limit=50) == (8, 42), "never an image twice"
    assert agreement.validation_plan([0, 0], 4) == (0, 0) and agreement.validation_plan([], 4) == (0, 0)
    # padding is at most one step's share per worker beyond the largest share
    for shares in ([1, 2, 3], [7], [5, 40, 39]):
        steps, images = agreement.validation_plan(shares, 8)
        assert images == sum(shares) and steps * 8 - max(shares) < 8


def test_workers_that_disagree_all_fail_instead_of_hanging(monkeypatch):
    """The pre-training check raises on every worker when positions or steps differ between them."""
    tables = {
        "epoch": np.array([[2, 0, 5, 0], [0, 0, 5, 0]]),
        "step": np.array([[1, 3, 5, 0], [1, 0, 5, 0]]),
        "steps": np.array([[0, 0, 5, 2], [0, 0, 6, 2]]),
        "same": np.array([[1, 2, 5, 2], [1, 2, 5, 2]]),
    }
    steps = agreement.Steps(5, True, 2, 16, 8)
    for name, table in tables.items():
        monkeypatch.setattr(agreement, "all_gather_ints", lambda strategy, values, table=table: table)
        if name == "same":
            agreement.check_agreement(None, (1, 2), steps, "/shared/ckpt")
            continue
        match = "steps per epoch" if name == "steps" else "restored different checkpoints"
        with pytest.raises(AlexnetError, match=match):
            agreement.check_agreement(None, (0, 0), steps, "/shared/ckpt")


def test_workers_compare_their_weights_and_name_those_apart_from_the_chief(monkeypatch, caplog):
    """weights_agree(): each row a replica's (digest's first 60 bits, chief, worker index); replicas of one worker
    repeat its row."""
    digest, other = "a" * 64, "b" * 64
    first, second = int(digest[:15], 16), int(other[:15], 16)

    def agree(rows, chief=True):
        monkeypatch.setattr(agreement, "all_gather_ints", lambda strategy, values: np.array(rows))
        topology = strategies.Topology("multi_worker", len(rows), 3, 0, chief, 1, False)
        return agreement.weights_agree(None, digest, topology)

    with caplog.at_level("WARNING", logger=agreement.__name__):
        assert agree([[first, 1, 0], [first, 0, 1], [first, 0, 1], [first, 0, 2]])
        assert not caplog.records
        assert not agree([[first, 1, 0], [second, 0, 1], [second, 0, 1], [first, 0, 2]])
        assert "worker 1 holds weights other than the chief's, whose model is the one saved and published " \
               "(weights_sha256 aaaaaaaaaaaa...)." in caplog.text
        caplog.clear()
        # told on a worker that is not the chief: the chief's weights are the reference, not its own
        assert not agree([[second, 1, 0], [first, 0, 1], [first, 0, 2]], chief=False)
        assert "worker 1, worker 2 hold weights other than the chief's, whose model is the one saved and " \
               "published. Their" in caplog.text
        caplog.clear()
        # a cluster with a chief task besides worker 0: the chief named as such
        assert not agree([[first, 0, 0], [second, 1, 0]], chief=False)
        assert "worker 0 holds weights other than the chief's" in caplog.text
    # the digest's first 60 bits fit the int64 the gather carries
    assert int("f" * 15, 16) < 2 ** 63


def test_every_worker_stops_at_the_epoch_end_where_one_is_past_its_share_of_skipped_images(monkeypatch, tmp_path):
    """SkippedImages.check(): each worker tells the others, in one gather at each epoch's end, whether it is past
    its share of skipped images; a worker within its own share stops there too, naming the worker that is not, where
    it would otherwise go on to its next exchange and wait for that worker until `collective_timeout`."""
    from alexnet.errors import BadImagesError
    from alexnet.train.datasets import SkippedImages

    sent: list[list[int]] = []

    def skipped(rows, pending=()):
        def gather(strategy, values):
            sent.append(list(values))
            return np.array(rows)

        monkeypatch.setattr(agreement, "all_gather_ints", gather)
        topology = strategies.Topology("multi_worker", len(rows), 2, 0, True, 1, False)
        failures = SimpleNamespace(pending=lambda: list(pending))
        return SkippedImages(failures, 16, 0.05, strategy=object(), topology=topology)

    # rows: (chief, worker index, skipped, images, past its share), one per replica
    skipped([[1, 0, 0, 16, 0], [0, 1, 0, 12, 0]]).check(0)
    assert sent == [[1, 0, 0, 16, 0]]
    with pytest.raises(BadImagesError) as error:
        skipped([[1, 0, 0, 16, 0], [0, 1, 1, 12, 1], [0, 1, 1, 12, 1]]).check(1)
    message = str(error.value)
    assert "Training stopped by the end of epoch 2" in message
    assert "worker 1: 1 of 12 (8.33%)" in message and message.count("worker 1") == 1
    assert "max_bad_fraction = 0.05" in message and "verify = True" in message
    # the worker past its share says its own images, and has told the others first
    damaged = tmp_path / "damaged.jpg"
    damaged.write_bytes(bytes(64))
    sent.clear()
    with pytest.raises(BadImagesError) as error:
        skipped([[1, 0, 1, 16, 1], [0, 1, 0, 12, 0]], pending=[str(damaged)]).check(0)
    assert sent == [[1, 0, 1, 16, 1]]
    assert "1 of 16 training images (6.25%)" in str(error.value) and str(damaged) in str(error.value)


def test_multi_worker_settings_are_checked_before_tensorflow_starts(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], 0, 29000))
    with pytest.raises(AlexnetError, match="collective_timeout"):
        resolve_strategy("multi_worker", collective_timeout=0)
    with pytest.raises(AlexnetError, match="collective_timeout"):
        resolve_strategy("multi_worker", collective_timeout=-5)


def test_a_multi_worker_run_on_gpus_asks_for_nccl_and_one_on_cpus_keeps_tensorflows_choice(monkeypatch):
    """TensorFlow's collectives all-reduce with NCCL only when asked (MirroredStrategy asks by itself): "multi_worker"
    asks on GPUs, takes the ring on GPUs split into logical devices (NCCL does not take them) and leaves CPUs at AUTO,
    as before; the devices are faked, the strategy too (it would start TensorFlow's runtime)."""
    implementation = tf.distribute.experimental.CommunicationImplementation
    assert [strategies.all_reduce_implementation(*args) for args in ((8,), (2, True), (0,), (0, True))] == [
        "NCCL", "RING", "AUTO", "AUTO"]
    gpus = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(2)]
    halves = [tf.config.LogicalDeviceConfiguration(memory_limit=1000)] * 2
    built = []

    class Strategy:
        num_replicas_in_sync = 2

        def __init__(self, communication_options):
            built.append(communication_options)
            self.extended = SimpleNamespace(_num_workers=1, _task_id=0, _is_chief=True)

    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", Strategy)
    monkeypatch.setattr(strategies, "configure_heartbeat", lambda config, timeout: None)
    monkeypatch.setenv("TF_CONFIG", tf_config_json(["127.0.0.1:1"], 0, free_base_port(1)))
    for visible, split, expected in ((gpus, None, implementation.NCCL), (gpus, halves, implementation.RING),
                                     ([], None, implementation.AUTO)):
        monkeypatch.setattr(tf.config, "get_visible_devices",
                            lambda kind=None, visible=visible: visible if kind == "GPU" else [])
        monkeypatch.setattr(tf.config, "get_logical_device_configuration", lambda device, split=split: split)
        made = resolve_strategy("multi_worker", collective_timeout=30)
        # no timeout in the options (TensorFlow would keep a sleeping thread per collective): the run keeps it
        assert (built[-1].implementation, built[-1].timeout_seconds) == (expected, None)
        assert strategies.watched_timeout(made) == 30


def test_a_worker_may_miss_heartbeats_for_a_minute_but_never_longer_than_the_collective_timeout():
    assert strategies.heartbeat_timeout(None) == strategies.HEARTBEAT_TIMEOUT == 60
    assert strategies.heartbeat_timeout(1800) == 60 and strategies.heartbeat_timeout(20) == 20


def test_the_coordination_service_is_configured_with_the_heartbeat_timeout_once(tmp_path):
    """In a fresh process (TensorFlow's context is global): the service TensorFlow would configure, with the
    heartbeat timeout; a service configured already is left alone (its timeout told), and a process of no cluster
    gets none."""
    script = textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(HERE.parents[1])!r})
        from alexnet.train.cluster import tf_config_json
        from alexnet.train.strategy import configure_heartbeat, keeps_default_heartbeat
        from tensorflow.python.eager import context

        alone = configure_heartbeat({{"cluster": {{}}, "task": {{}}}}, 20)
        none_yet = keeps_default_heartbeat()
        cluster = json.loads(tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], 1, 29000))
        first, again = configure_heartbeat(cluster, 20), configure_heartbeat(cluster, 5)
        config = context.context().config.experimental.coordination_config
        print(json.dumps({{"alone": alone, "first": first, "again": again, "type": config.service_type,
                           "leader": config.service_leader, "ms": config.heartbeat_timeout_in_ms,
                           "jobs": [[job.name, job.num_tasks] for job in config.coordinated_job_list],
                           "default": [none_yet, keeps_default_heartbeat()]}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"alone": None, "first": 20.0, "again": 20.0, "type": "standalone",
                    "leader": "/job:worker/replica:0/task:0", "ms": 20000, "jobs": [["worker", 2]],
                    "default": [False, False]}


@pytest.mark.parametrize("handler", [None, "own"])
def test_a_multi_worker_process_stops_on_sigterm_as_it_did_before_its_strategy(handler):
    """TensorFlow's multi-worker set-up takes SIGTERM over (its preemption notice), a handler that only records it,
    and the worker trained on; what SIGTERM did before the strategy was built is put back: by default the process
    ends at once, and a handler of the host program still runs (a cluster of one worker sets up as two do)."""
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(HERE.parents[1])!r})
        from alexnet.train.cluster import tf_config_json
        from alexnet.train.strategy import resolve_strategy

        if {handler!r} == "own":
            signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(3))
        os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1:1"], 0, {free_base_port(1)})
        resolve_strategy("multi_worker", collective_timeout=30)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
        print("still running after SIGTERM")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=False)
    assert done.returncode == (3 if handler else -signal.SIGTERM), (done.stdout, done.stderr[-3000:])


def _alone(timeout: float, signum: int | None = None, caught: bool = False
           ) -> tuple[subprocess.CompletedProcess, float]:
    """Worker 0 of two started alone with ``collective_timeout`` = ``timeout``, its notes every second; ``signum``
    sent to it once its first note says it still waits for worker 1, or nothing. What it did, and how long it ran
    from the start of its wait, or from ``signum`` (TensorFlow's import before the wait takes seconds on a quiet
    machine, a minute on a busy one). It starts with SIGINT as in a terminal
    (:func:`helpers_processes.ctrl_c_as_in_a_terminal`)."""
    script = textwrap.dedent(f"""
        import logging, os, sys
        sys.path.insert(0, {str(HERE.parents[1])!r})
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        from alexnet.train import joining, strategy
        from alexnet.train.cluster import tf_config_json

        joining.JOIN_NOTE_EVERY = 1.0
        os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1", "127.0.0.1"], 0, {free_base_port(2)})
        try:
            strategy.resolve_strategy("multi_worker", collective_timeout={timeout})
            print("built")
        except Exception as error:
            if not {caught!r}:
                raise
            print("caught", type(error).__name__ + ":", error, "and on after it", flush=True)
    """)
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                              preexec_fn=ctrl_c_as_in_a_terminal)
    lines: list[str] = []
    waits, still_waits = threading.Event(), threading.Event()

    def read_stderr() -> None:
        assert worker.stderr is not None
        for line in worker.stderr:
            lines.append(line)
            if "waits for worker 1" in line:  # its first line as it starts waiting, then its watchdog's notes
                waits.set()
            if "still waits for worker 1" in line:
                still_waits.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        if not waits.wait(timeout=240):
            pytest.fail(f"worker 0 did not start waiting within 240 s: {''.join(lines)[-3000:]}")
        started = time.time()
        if signum is not None:
            # the watchdog's first note comes a second into the wait: the worker is in TensorFlow's constructor
            if not still_waits.wait(timeout=60):
                pytest.fail(f"worker 0 said no more after it started waiting: {''.join(lines)[-3000:]}")
            started = time.time()
            worker.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=90)
    finally:
        worker.kill()
        worker.wait()
    took = time.time() - started
    reader.join(timeout=30)
    assert worker.stdout is not None
    out = worker.stdout.read()
    return subprocess.CompletedProcess(worker.args, worker.returncode, out, "".join(lines)), took


@pytest.mark.workers
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_worker_whose_partner_never_starts_says_whom_it_waits_for_and_gives_up_after_the_collective_timeout():
    """TensorFlow waits for every worker to join inside the strategy's constructor, holding Python's lock: a worker
    started alone waited silently for ever, then was ended by SIGKILL (an R session or a notebook with it). It waits in
    Python first, until the others answer: an error its caller catches."""
    done, took = _alone(6, caught=True)
    assert done.returncode == 0 and took < 60, (took, done.stderr[-3000:])
    assert "built" not in done.stdout
    assert ("Worker 0 of 2 (127.0.0.1:" in done.stderr and "waits for worker 1 (127.0.0.1:" in done.stderr
            and "for at most 6 s (`collective_timeout`)" in done.stderr), done.stderr[-3000:]
    assert "INFO alexnet.train.strategy: Worker 0 still waits for worker 1 (127.0.0.1:" in done.stderr
    assert done.stdout.startswith("caught AlexnetError: Worker 0 of 2 gave up after 6 s (`collective_timeout`) waiting "
                                  "for worker 1 (127.0.0.1:"), done.stdout
    assert "start the same training on that worker too" in done.stdout and "firewall" in done.stdout
    assert "and on after it" in done.stdout, "the process goes on"


@pytest.mark.workers
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_worker_that_answers_late_is_waited_for_and_both_join():
    """The second worker starts 8 s after the first: the first waits in Python for it to answer, then both build the
    strategy; meanwhile each takes connections on its own port, so that the other's knock finds it."""
    base = free_base_port(2)
    script = textwrap.dedent(f"""
        import logging, os, sys, time
        sys.path.insert(0, {str(HERE.parents[1])!r})
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        from alexnet.train import strategy
        from alexnet.train.cluster import tf_config_json

        index = int(sys.argv[1])
        os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1", "127.0.0.1"], index, {base})
        built = strategy.resolve_strategy("multi_worker", collective_timeout=60)
        print("built", built.num_replicas_in_sync, flush=True)
    """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    first = subprocess.Popen([sys.executable, "-c", script, "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        time.sleep(8)
        second = subprocess.run([sys.executable, "-c", script, "1"], capture_output=True, text=True, env=env,
                                timeout=180)
        out, err = first.communicate(timeout=180)
    finally:
        first.kill()
    assert second.stdout.strip() == "built 2", second.stderr[-3000:]
    assert out.strip() == "built 2", err[-3000:]
    assert "Worker 0 of 2 (127.0.0.1:" in err and "waits for worker 1" in err


def _config(addresses: list[str], index: int) -> dict:
    return {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}


def test_workers_given_their_own_indices_meet_and_one_given_anothers_index_is_told():
    """Each waiting worker answers a knock with its name: two workers meet; a process whose TF_CONFIG gives it the
    wrong index (the other worker's address is its own host's) or the index of another worker is told which, where
    TensorFlow failed with 'a different incarnation' tracebacks and the other waited until its timeout."""
    from alexnet.train import greeting, joining

    base = free_base_port(2)
    ports = [base, base + 1]
    both = [f"127.0.0.1:{port}" for port in ports]
    # each takes its port with a server once met: TensorFlow's, which a later knock of the other worker finds
    failed = met_in_threads([both, both], 20)
    assert not failed
    # worker 1's address is this process's own: it was given index 0 on worker 1's host
    with pytest.raises(AlexnetError, match=rf"^TF_CONFIG gives this process worker 0 \(127\.0\.0\.2:{base}\), and the "
                                           rf"address it gives worker 1, 127\.0\.0\.1:{base}, is this process's own: "
                                           r"is this worker 1\? Give each worker its own `task\.index`"):
        joining.meet_workers(_config([f"127.0.0.2:{base}", f"127.0.0.1:{base}"], 0), 10, hold=base)
    # another process answers at worker 1's address as worker 0
    other = socket.create_server(("127.0.0.1", ports[1]))
    answering = greeting.answering(other, "worker 0", "feed", f"127.0.0.1:{ports[1]}",
                                   greeting.cluster_of(_config(both, 0)), [])
    try:
        with pytest.raises(AlexnetError, match=rf"^127\.0\.0\.1:{ports[1]}, the address TF_CONFIG gives worker 1, is "
                                               r"answered by a worker that was given worker 0, as this process "
                                               r"\(worker 0\) was: two workers have the same `task\.index`"):
            joining.meet_workers(_config(both, 0), 10, hold=ports[0])
    finally:
        answering()
        other.close()


def test_ctrl_c_stops_a_worker_waiting_for_the_others_at_once():
    """While the others have not answered, the worker waits in Python: Ctrl-C is a KeyboardInterrupt at once (R and
    notebooks stop the call and go on)."""
    done, took = _alone(300, signal.SIGINT)
    assert took < 20 and "KeyboardInterrupt" in done.stderr, (took, done.stderr[-3000:])
    assert done.returncode != 0 and "built" not in done.stdout
    assert "waits for worker 1" in done.stderr and "gave up" not in done.stderr


def test_a_worker_says_which_hosts_of_tf_config_do_not_resolve_and_when_its_own_address_is_not_this_machines(
        caplog, monkeypatch):
    """Either kept the worker waiting until `collective_timeout` without a word of why."""
    from alexnet.train import joining

    resolve = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):  # no name server asked: a .invalid name never resolves
        if str(host).endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    config = {"cluster": {"worker": ["192.0.2.77:19600", "no-such-host.invalid:19601", "127.0.0.1:19602"]},
              "task": {"type": "worker", "index": 0}}
    with caplog.at_level(logging.WARNING, logger=joining.logger.name), pytest.raises(AlexnetError, match="gave up"):
        joining.meet_workers(config, 0.5, every=60)
    said = [r.getMessage() for r in caplog.records if r.name == joining.logger.name]
    assert len(said) == 2, said
    assert said[0].startswith("TF_CONFIG names host(s) this machine cannot resolve: worker 1 "
                              "(no-such-host.invalid:19601). This worker waits")
    assert said[1].startswith("TF_CONFIG gives this process worker 0's address, 192.0.2.77:19600, which is not an "
                              "address of this machine")
    caplog.clear()
    # a cluster on this machine, every name resolved: nothing said
    config = {"cluster": {"worker": ["127.0.0.1:19600", "localhost:19601"]}, "task": {"type": "worker", "index": 0}}
    with caplog.at_level(logging.WARNING, logger=joining.logger.name), pytest.raises(AlexnetError, match="gave up") as \
            gave_up:
        joining.meet_workers(config, 0.5, every=60)
    assert not [r for r in caplog.records if r.name == joining.logger.name]
    # found while the work ran, not in its settings: the command line exits with 1 (2 is a usage error's)
    assert gave_up.value.while_running


def test_a_worker_that_answered_but_never_joins_ends_the_wait_after_the_bound_naming_only_those_known_not_joined():
    """The last resort: others that answered on their ports but never join TensorFlow's wait (which holds Python's
    lock) end the process after ``collective_timeout``, from the watchdog. Its notes and last words named every other
    worker, those that had joined too (a chief of three blamed the worker that had joined): they name those known not
    to have joined, one whose port closed (it stopped) and one still waiting for others, where any is known."""
    base = free_base_port(4)
    script = textwrap.dedent(f"""
        import logging, socket, sys, time
        sys.path.insert(0, {str(HERE.parents[1])!r})
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        from alexnet.train import greeting, joining

        workers = [f"127.0.0.1:{{{base} + i}}" for i in range(4)]
        config = {{"cluster": {{"worker": workers}}, "task": {{"type": "worker", "index": 0}}}}
        everyone = sys.argv[1] == "joined"  # every other port a TensorFlow server's: which joined is not known
        # TensorFlow's servers say nothing; worker 2's port is closed (it stopped), worker 3 still waits for others
        servers = [socket.create_server(("127.0.0.1", {base} + i)) for i in ((1, 2, 3) if everyone else (1, 3))]
        if not everyone:
            greeting.answering(servers[1], "worker 3", "feed", workers[3], greeting.cluster_of(config), [])
        with joining.waiting_for_workers(config, 3, every=1):
            time.sleep(60)  # as in TensorFlow's constructor
        print("returned")
    """)
    for case in ("known", "joined"):
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-c", script, case], capture_output=True, text=True, timeout=60)
        assert done.returncode == -signal.SIGKILL and time.monotonic() - began < 30, done
        if case == "joined":
            every = ", ".join(f"worker {i} (127.0.0.1:{base + i})" for i in (1, 2, 3))
            assert (f"ERROR alexnet.train.strategy: Worker 0 of 4 gave up after 3 s (`collective_timeout`) waiting for "
                    f"{every} to join: start the same training on them too") in done.stderr, done.stderr
            continue
        known = (f"worker 2 (127.0.0.1:{base + 2}, which answered but answers no more: see its own error), worker 3 "
                 f"(127.0.0.1:{base + 3}, which still waits for the others to answer)")
        assert f"INFO alexnet.train.strategy: Worker 0 still waits for {known} to join (1 s)." in done.stderr, \
            done.stderr
        assert (f"ERROR alexnet.train.strategy: Worker 0 of 4 gave up after 3 s (`collective_timeout`) waiting for "
                f"{known} to join: start the same training on them too") in done.stderr, done.stderr
        assert "worker 1" not in done.stderr, "worker 1 may have joined: it is not blamed"


@pytest.mark.parametrize("ignored", [False, True], ids=["as-in-a-terminal", "ignored"])
def test_ctrl_c_ends_the_wait_for_the_others_unless_the_worker_was_started_ignoring_it(ignored):
    """A worker started with SIGINT ignored (a shell's background job, ``nohup``) keeps ignoring it while it waits
    for the others, and its first line (meet_workers', which says it for both waits) does not offer Ctrl-C; one
    started as in a terminal ends at once."""
    script = textwrap.dedent(f"""
        import logging, os, signal, sys, time
        sys.path.insert(0, {str(HERE.parents[1])!r})
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
        from alexnet.errors import AlexnetError
        from alexnet.train import joining

        config = {{"cluster": {{"worker": ["127.0.0.1:1", "127.0.0.1:2"]}}, "task": {{"type": "worker", "index": 0}}}}
        try:
            joining.meet_workers(config, 0.3, every=60)
        except AlexnetError:  # nobody at worker 1's port: its first line said, and TensorFlow's wait as if it answered
            pass
        with joining.waiting_for_workers(config, None, every=60):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
            print("waited on", flush=True)
        print("ignored after:", signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
    """)
    start = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else ctrl_c_as_in_a_terminal
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=start)
    assert "Worker 0 of 2 (127.0.0.1:1) waits for worker 1 (127.0.0.1:2) to join" in done.stderr, done.stderr
    if ignored:
        assert done.returncode == 0 and done.stdout.split("\n")[:2] == ["waited on", "ignored after: True"], done
        assert "Ctrl-C" not in done.stderr, done.stderr
    else:
        assert done.returncode == -signal.SIGINT and "waited on" not in done.stdout, done
        assert "(`collective_timeout`); Ctrl-C stops it." in done.stderr, done.stderr


def test_whom_a_worker_waits_for_is_said_once_in_the_words_of_its_caller(caplog):
    """Under -v the wait for the others was said twice: by meet_workers, as INFO that the command line says in its
    options' words (--collective-timeout), and again by waiting_for_workers, as DEBUG, left as the core's words."""
    from alexnet.train import joining

    base = free_base_port(2)
    other = socket.create_server(("127.0.0.1", base + 1))  # worker 1, answering as TensorFlow's server would
    try:
        config = _config([f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"], 0)
        with caplog.at_level(logging.DEBUG, logger=joining.logger.name):
            joining.meet_workers(config, 10, every=60)
            with joining.waiting_for_workers(config, 10, every=60):
                pass
    finally:
        other.close()
    said = [r for r in caplog.records if "waits for worker 1" in r.getMessage()]
    assert [(r.levelname, r.getMessage().split(" to join")[0]) for r in said] == [
        ("INFO", f"Worker 0 of 2 (127.0.0.1:{base}) waits for worker 1 (127.0.0.1:{base + 1})")], said


#: What TensorFlow 2.21 raised on worker 0 when worker 1 was killed (its heartbeats stopped), and on worker 1 when
#: worker 0 was (its connection reset), without the graph traceback in between.
UNHEALTHY = ("Graph execution error:\n\nDetected at node CollectiveReduceV2_2 defined at (most recent call last):\n"
             "Collective ops is aborted by: Error reported from /job:worker/task:1: The following tasks are unhealthy "
             "(stopped sending heartbeats):\n/job:worker/replica:0/task:1\nThe tasks have crashed. Check the task "
             "logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.\n"
             "The error could be from a previous operation. Restart your program to reset.")
RESET = ("Graph execution error:\n\nCollective ops is aborted by: recvmsg:Connection reset by peer\nAdditional GRPC "
         "error information from remote target /job:worker/replica:0/task:0 while calling "
         "/tensorflow.WorkerService/CompleteInstance:\n:UNKNOWN:Error received from peer  {grpc_message:\"recvmsg:"
         "Connection reset by peer\", grpc_status:14}")


def test_a_lost_worker_is_said_in_one_error_naming_it_the_settings_to_give_and_how_to_resume():
    from alexnet.train.lost import WorkerLostError, lost_worker

    lost = lost_worker(tf.errors.UnavailableError(None, None, UNHEALTHY), worker=0, workers=2,
                       collective_timeout=1800, checkpoint_dir="/runs/1")
    assert isinstance(lost, WorkerLostError) and (lost.worker, lost.kind) == (1, "heartbeats")
    said = str(lost)
    assert said.startswith("Worker 0 of 2 cannot go on: worker 1 of 2 stopped sending heartbeats and was "
                           "declared lost, so the run stopped on every worker.")
    assert "a slow or saturated link may have starved its heartbeats" in said
    assert "give a larger `collective_timeout` (seconds; 1800 now)" in said
    assert "with `checkpoint_dir` = '/runs/1': it resumes from the last checkpoint written there, or starts over " \
           "where the run stopped before its first one." in said  # a worker lost before any checkpoint: said too
    assert "Graph execution" not in said and "\n" not in said
    # the chief killed: worker 1 sees its connection reset; a short collective_timeout shortens the heartbeats too
    lost = lost_worker(tf.errors.UnavailableError(None, None, RESET), worker=1, workers=2, collective_timeout=20,
                       checkpoint_dir=None)
    assert (lost.worker, lost.kind) == (0, "connection")
    assert "worker 0 of 2 stopped answering (its connection was reset)" in str(lost)
    assert "after 20 s without one" in str(lost) and "give `collective_timeout` = 60 or more" in str(lost)
    assert "This run kept no checkpoints" in str(lost)
    lost = lost_worker(tf.errors.DeadlineExceededError(None, None, "Collective has timed out"), worker=1, workers=3,
                       collective_timeout=30, checkpoint_dir="gs://b/runs")
    assert (lost.worker, lost.kind) == (None, "timeout")
    assert "a collective operation waited 30 s (`collective_timeout`) for a worker and gave up" in str(lost)
    # the run's watchdog stopped it: its words, with the grace of a first step
    watched = ("a validation step waited more than 150 s for the other workers (`collective_timeout` = 30 s, and "
               "120 s for its first run)")
    lost = lost_worker(tf.errors.DeadlineExceededError(None, None, f"{watched}\n\t [[{{node CollectiveReduceV2}}]]"),
                       worker=1, workers=3, collective_timeout=30, checkpoint_dir=None)
    assert str(lost).startswith(f"Worker 1 of 3 cannot go on: {watched}, so the run stopped on every worker.")
    # this worker's own heartbeat timed out (a machine too busy to send it): heartbeats, not the collective's timeout
    late = ("Deadline Exceeded\nAdditional GRPC error information from remote target /job:worker/replica:0/task:0 "
            "while calling /tensorflow.CoordinationService/Heartbeat:\n:{grpc_status:4}")
    lost = lost_worker(tf.errors.DeadlineExceededError(None, None, late), worker=1, workers=2, collective_timeout=1800,
                       checkpoint_dir=None)
    assert lost.kind == "heartbeats", "it said a collective had waited 1800 s"
    assert str(lost).startswith("Worker 1 of 2 cannot go on: its heartbeats to the workers' coordination service went "
                                "unanswered for 60 s, so the run stopped on every worker.")
    assert "A machine too busy to answer in time (other work on its CPUs) misses heartbeats too" in str(lost)
    assert "waited 1800 s" not in str(lost)
    # not a lost worker: one worker, or another error
    assert lost_worker(tf.errors.UnavailableError(None, None, UNHEALTHY), worker=0, workers=1, collective_timeout=30,
                       checkpoint_dir=None) is None
    for other in (tf.errors.InvalidArgumentError(None, None, "bad image"), ConnectionResetError("reset by peer")):
        assert lost_worker(other, worker=0, workers=2, collective_timeout=30, checkpoint_dir=None) is None


def test_a_lost_worker_s_advice_names_only_the_settings_that_send_less_which_the_run_did_not_take():
    """A run that already sent bfloat16 (given, or taken by ``adapt_communication``) was told to give it; one with
    every such setting taken is told what is left."""
    from alexnet.train.communication import Communication
    from alexnet.train.lost import lost_in_run, lost_worker, trained_with
    from alexnet.train.settings_check import check_settings
    from alexnet.train.strategy import Topology

    def said(communication: Communication | None) -> str:
        lost = lost_worker(tf.errors.UnavailableError(None, None, UNHEALTHY), worker=0, workers=2,
                           collective_timeout=1800, checkpoint_dir=None, communication=communication)
        assert lost is not None
        return str(lost)

    everything = "(`allreduce_precision` = 'bfloat16', `accumulate_steps`, `sync_every`)"
    assert f"send less at each step for the heartbeats {everything}." in said(None)
    sixteen = said(Communication("bfloat16", workers=2))
    assert "for the heartbeats (`accumulate_steps`, `sync_every`)." in sixteen and "bfloat16" not in sixteen
    assert "for the heartbeats (`allreduce_precision` = 'bfloat16')." in said(
        Communication(accumulate=4, sync_every=8, workers=2))
    taken = said(Communication("float16", 25, 4, 8, 2))
    assert ("give a larger `collective_timeout` (seconds; 1800 now) for slow collectives; the settings that send "
            "less at each step are all taken already: a faster link, or fewer workers, is what is left for the "
            "heartbeats.") in taken and "`accumulate_steps`" not in taken
    # the run's own: the settings it trained with, kept on the error, over those given
    given = check_settings({"collective_timeout": 1800})
    error = tf.errors.UnavailableError(None, None, UNHEALTHY)
    chief = Topology("multi_worker", 2, 2, 0, True, 1, False)
    assert everything in str(lost_in_run(error, chief, given))
    trained_with(error, dataclasses.replace(given, allreduce_precision="bfloat16", accumulate_steps=2))
    assert "for the heartbeats (`sync_every`)." in str(lost_in_run(error, chief, given))


def test_a_lost_worker_s_advice_names_the_16_bit_format_the_run_s_devices_sum(monkeypatch):
    """GPUs older than compute capability 8.0 have no bfloat16 sums: a run on them is told to send float16, the
    format its devices sum (the run's communication says which, or this worker's devices when the run's error has
    only the settings)."""
    from alexnet.train import precision
    from alexnet.train.communication import Communication
    from alexnet.train.lost import lost_in_run, lost_worker, trained_with
    from alexnet.train.settings_check import check_settings
    from alexnet.train.strategy import Topology

    def said(lost: AlexnetError | None) -> str:
        assert lost is not None
        found = re.search(r"send less at each step for the heartbeats \((.*)\)\.", str(lost))
        assert found, str(lost)
        return found[1]

    error = tf.errors.UnavailableError(None, None, UNHEALTHY)
    for sixteen in ("float16", "bfloat16"):
        assert said(lost_worker(error, worker=0, workers=2, collective_timeout=1800, checkpoint_dir=None,
                                communication=Communication(workers=2, sixteen_bit=sixteen))) == \
            f"`allreduce_precision` = '{sixteen}', `accumulate_steps`, `sync_every`"
    given = check_settings({"collective_timeout": 1800})
    for gpu, capabilities, sixteen in ((True, ((7, 0), (7, 5)), "float16"), (True, ((8, 0),), "bfloat16"),
                                       (False, (), "bfloat16")):
        monkeypatch.setattr(precision, "hardware", lambda on_gpu, c=capabilities: precision.Hardware(c))
        topology = Topology("multi_worker", 2, 2, 0, True, 1, gpu)
        assert said(lost_in_run(error, topology, given)).startswith(f"`allreduce_precision` = '{sixteen}', "), gpu
    assert lost_in_run(ValueError("not a lost worker's"), Topology("multi_worker", 2, 2, 0, True, 1, True),
                       given) is None
    # an Ampere worker of a cluster with Volta GPUs: the format the workers agreed on, kept on the error, not its own
    monkeypatch.setattr(precision, "hardware", lambda on_gpu: precision.Hardware(((8, 0),)))
    agreed = tf.errors.UnavailableError(None, None, UNHEALTHY)
    trained_with(agreed, given, "float16")
    assert said(lost_in_run(agreed, Topology("multi_worker", 2, 2, 0, True, 1, True), given)).startswith(
        "`allreduce_precision` = 'float16', ")


def test_the_command_line_ends_a_run_that_lost_a_worker_with_one_line_keeping_tensorflows_error(
        tmp_path, monkeypatch, capsys):
    """Through the command line's path (alexnet_train()'s too): TensorFlow's error raised by the run becomes one
    AlexnetError, TensorFlow's as its cause, said with the command's options and no traceback."""
    from alexnet.cli import common
    from alexnet.cli import main as cli_main
    from alexnet.train import run as runs
    from alexnet.train.lost import WorkerLostError
    from alexnet.train.strategy import Topology

    raised = tf.errors.UnavailableError(None, None, UNHEALTHY)

    def lose(*args, **kwargs):
        raise raised

    monkeypatch.setattr(common, "fetch", lambda args: {})
    monkeypatch.setattr(strategies, "resolve_strategy", lambda strategy, **kwargs: strategy)
    monkeypatch.setattr(strategies, "topology", lambda strategy: Topology("multi_worker", 2, 2, 0, True, 1, False))
    monkeypatch.setattr(runs, "run", lose)
    settings = training.check_settings({"checkpoint_dir": str(tmp_path / "ck"), "collective_timeout": 20},
                                       data_board=None)
    with pytest.raises(WorkerLostError) as caught:
        training.train(settings, {}, "multi_worker")
    assert caught.value.__cause__ is raised and caught.value.worker == 1
    assert cli_main(["train", "--board", str(tmp_path / "board"), "--strategy", "multi_worker",
                     "--checkpoint-dir", str(tmp_path / "ck"), "--collective-timeout", "20"]) == 1
    err = capsys.readouterr().err
    [line] = [said for said in err.splitlines() if said.startswith("alexnet train: error:")]
    assert line.startswith("alexnet train: error: Worker 0 of 2 cannot go on: worker 1 of 2 stopped sending "
                           "heartbeats and was declared lost")
    assert "give `--collective-timeout` 60 or more" in line and f"`--checkpoint-dir` '{tmp_path / 'ck'}'" in line
    assert "Traceback" not in err and "Graph execution" not in err


def test_a_strategy_object_configured_as_tensorflow_does_is_told_to_keep_its_10_s_heartbeat(tmp_path):
    """A MultiWorkerMirroredStrategy the host program built configures the coordination service as below (TensorFlow
    2.21's own call, no heartbeat timeout): the run warns that a worker silent for 10 s ends it, and says what to pass
    instead; the service a 'multi_worker' strategy configures is not warned about."""
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(HERE.parents[1])!r})
        from types import SimpleNamespace
        from tensorflow.python.distribute import multi_worker_util
        from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
        from tensorflow.python.eager import context
        from alexnet.train.strategy import keeps_default_heartbeat, object_warnings

        spec = multi_worker_util.normalize_cluster_spec({{"worker": ["127.0.0.1:1", "127.0.0.1:2"]}})
        context.context().configure_coordination_service(
            service_type="standalone", service_leader=multi_worker_util.coordination_leader(spec),
            coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=2)])
        timed = SimpleNamespace(extended=SimpleNamespace(_communication_options=SimpleNamespace(timeout_seconds=30)))
        print(json.dumps({{"default": keeps_default_heartbeat(), "two": object_warnings(timed, 2),
                           "one": object_warnings(timed, 1)}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["default"] is True and said["one"] == []
    threads, heartbeat = said["two"]
    assert "collective timeout of 30 s in its communication options: TensorFlow keeps a thread" in threads
    assert "heartbeat timeout of 10 s" in heartbeat and "Pass strategy = 'multi_worker', which allows 60 s" in heartbeat


def test_a_strategy_object_without_a_collective_timeout_is_warned_about(monkeypatch):
    """And one with a timeout in its options, which costs a sleeping thread per collective; not one "multi_worker"
    built, even with collective_timeout = never (it was told to pass what it had passed)."""
    monkeypatch.setattr(strategies, "keeps_default_heartbeat", lambda: False)
    untimed = SimpleNamespace(extended=SimpleNamespace(_communication_options=SimpleNamespace(timeout_seconds=None)))
    [warning] = strategies.object_warnings(untimed, 2)
    assert "has no collective timeout" in warning and "strategy = 'multi_worker' with a collective_timeout" in warning
    assert strategies.object_warnings(untimed, 1) == []
    timed = SimpleNamespace(extended=SimpleNamespace(_communication_options=SimpleNamespace(timeout_seconds=600)))
    [warning] = strategies.object_warnings(timed, 2)
    assert warning.startswith("This MultiWorkerMirroredStrategy has a collective timeout of 600 s in its "
                              "communication options: TensorFlow keeps a thread sleeping that long")
    for own in (None, 1800.0):
        ours = SimpleNamespace(extended=untimed.extended, **{strategies.OWN_TIMEOUT: own})
        assert strategies.object_warnings(ours, 2) == []
    monkeypatch.setattr(strategies, "keeps_default_heartbeat", lambda: True)
    assert len(strategies.object_warnings(untimed, 3)) == 2


def test_the_watchdog_aborts_what_waits_past_the_collective_timeout_once():
    from alexnet.train.watchdog import Watchdog, watched_run, watching

    aborted: list[str] = []
    dog = Watchdog(0.3, aborted.append, poll=0.02)
    try:
        with dog.watching("a quick step"):
            time.sleep(0.1)
        time.sleep(0.4)  # nothing watched: an epoch's end, a checkpoint written, however long
        with dog.watching("a first step", grace=0.5):
            time.sleep(0.6)
        assert aborted == []
        with dog.watching("a training step"):
            time.sleep(0.6)
        assert aborted == ["a training step waited more than 0.3 s for the other workers (`collective_timeout` = "
                           "0.3 s)"]
        with dog.watching("another"):
            time.sleep(0.6)
        assert len(aborted) == 1, "once: the collectives stay aborted"
    finally:
        dog.close()
    aborted.clear()
    dog = Watchdog(0.2, aborted.append, poll=0.02)
    try:
        dog.start("a training step", 0.1, own=0.2)  # a slow step's own computation is no waiting for the others
        time.sleep(0.4)
        assert aborted == []
        time.sleep(0.3)
        assert aborted == ["a training step waited more than 0.5 s for the other workers (`collective_timeout` = "
                           "0.2 s, and 0.1 s for its first run, and 0.2 s for its own computation)"]
    finally:
        dog.close()
    assert not dog._thread.is_alive()
    with watched_run(None, 2) as untimed, watched_run(30, 1) as alone:
        assert untimed is None and alone is None
        with watching("nothing is watched"):
            pass
    with watched_run(30, 2) as watched:
        assert watched is not None and watched.timeout == 30
    assert not watched._thread.is_alive()


def test_a_port_taken_by_another_training_is_told_before_tensorflow_listens(monkeypatch):
    """Two jobs on one host with the same ports: TensorFlow's server would fail with "Could not start gRPC server";
    the strategy is refused first, naming the port and what to change (even a listener that lets others share it)."""
    monkeypatch.setattr(cluster, "_OWN_PORTS", set())
    base = free_base_port(2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("", base))
        other.listen()
        monkeypatch.setenv("TF_CONFIG", tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], 0, base))
        with pytest.raises(AlexnetError, match=rf"Port {base} .* already in use.*`base_port`"):
            resolve_strategy("multi_worker")


class MultiWorkerMirroredStrategy:
    """Stands in for a strategy object built without TF_CONFIG: no cluster.

    As TensorFlow's: its cluster resolver reads TF_CONFIG from os.environ anew on every call, while
    ``extended`` keeps what the strategy was built with (see the real one below, in a process of its own).
    """

    num_replicas_in_sync = 1

    def __init__(self) -> None:
        self.cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        self.extended = SimpleNamespace(_num_workers=1, _task_type=None, _task_id=None, _is_chief=True)


def test_a_one_worker_tf_config_written_by_jsonlite_is_read_as_a_list(monkeypatch):
    one_worker = json.dumps({"cluster": {"worker": "127.0.0.1:8001"}, "task": {"type": "worker", "index": 0}})
    monkeypatch.setenv("TF_CONFIG", one_worker)  # jsonlite::toJSON(auto_unbox = TRUE) writes one worker bare
    assert cluster.read_tf_config()["cluster"] == {"worker": ["127.0.0.1:8001"]}
    assert json.loads(os.environ["TF_CONFIG"])["cluster"] == {"worker": ["127.0.0.1:8001"]}  # what TF reads
    assert cluster.normalise_tf_config("not json") == "not json"


@pytest.mark.parametrize(("config", "said"), [
    ({"cluster": {"worker": ["127.0.0.1:19000", "127.0.0.1:19001"]}, "task": {"type": "chief", "index": 0}},
     "TF_CONFIG's task type 'chief' names no task of its cluster, which has 'worker'"),
    ({"cluster": {"worker": ["127.0.0.1:19000", "127.0.0.1"]}, "task": {"type": "worker", "index": 0}},
     "TF_CONFIG's worker 1 is '127.0.0.1', not host:port"),
    ({"cluster": {"worker": ["127.0.0.1:19000", "::1:19001"]}, "task": {"type": "worker", "index": 0}},
     "TF_CONFIG's worker 1 is '::1:19001', not host:port"),
    ({"cluster": {"worker": ["127.0.0.1:19000", "127.0.0.1:70000"]}, "task": {"type": "worker", "index": 0}},
     "TF_CONFIG's worker 1 is '127.0.0.1:70000', not host:port"),
    ({"cluster": {"chief": ["h:1"], "worker": ["h:2"]}, "task": {"type": "chief", "index": 1}},
     "TF_CONFIG's task index 1 is outside its 1 chief(s): use 0 to 0."),
    ({"cluster": {"worker": ["h:2", "h:3"]}, "task": {"type": "worker", "index": 2}},
     "TF_CONFIG's task index 2 is outside its 2 worker(s): use 0 to 1."),
], ids=["chief-of-no-chief", "no-port", "ipv6-without-brackets", "port-too-large", "chief-index", "worker-index"])
def test_a_tf_config_that_names_no_task_of_its_own_or_an_address_without_its_port_is_refused(monkeypatch, config, said):
    """Each waited for the other workers until `collective_timeout` (30 minutes by default)."""
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    with pytest.raises(AlexnetError) as error:
        cluster.read_tf_config()
    assert said in str(error.value)


def test_addresses_of_a_tf_config_in_every_form_tensorflow_takes_are_read(monkeypatch):
    config = {"cluster": {"chief": ["host-a:8000"], "worker": ["[::1]:8001", "10.0.0.2:8002"]},
              "task": {"type": "chief", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    assert cluster.read_tf_config() == config


def test_a_strategy_object_that_missed_tf_config_is_refused(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    lonely = MultiWorkerMirroredStrategy()
    assert strategies.strategy_name(lonely) == "multi_worker" and strategies.num_workers(lonely) == 1
    strategies.check_strategy_object(lonely)  # no TF_CONFIG: a one-machine run, fine
    # TF_CONFIG set after the strategy was made (R copies it into os.environ before each call into the core):
    # the strategy's resolver reads the new value, but the strategy still is what it was built as
    monkeypatch.setenv("TF_CONFIG", tf_config_json(["10.0.0.1:1", "10.0.0.2:1"], 1))
    assert lonely.cluster_resolver.cluster_spec().as_dict() == {"worker": ["10.0.0.1:8000", "10.0.0.2:8001"]}
    assert strategies.num_workers(lonely) == 1 and strategies.task_index(lonely) == 0
    assert strategies.is_chief(lonely)
    with pytest.raises(AlexnetError, match="sees no cluster, but TF_CONFIG names 2 workers"):
        strategies.check_strategy_object(lonely)
    strategies.check_strategy_object(tf.distribute.get_strategy())  # other strategies are not concerned


def test_a_real_strategy_built_without_tf_config_stays_one_worker():
    # in a process of its own: a MultiWorkerMirroredStrategy configures TensorFlow's collectives for good
    code = textwrap.dedent("""
        import json, os
        import tensorflow as tf
        from alexnet.train import strategy as s
        lonely = tf.distribute.MultiWorkerMirroredStrategy()
        os.environ["TF_CONFIG"] = json.dumps(
            {"cluster": {"worker": ["10.0.0.1:1", "10.0.0.2:1"]}, "task": {"type": "worker", "index": 1}})
        spec = lonely.cluster_resolver.cluster_spec().as_dict()
        print(json.dumps([len(spec["worker"]), s.num_workers(lonely), s.task_index(lonely), s.is_chief(lonely)]))
        """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TF_CONFIG", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [2, 1, 0, True]


# ---------------------------------------------------------------------------------------------------------
# two worker processes


#: Validation images of worker 0 and worker 1: unequal shares, neither a whole number of steps of 4.
VAL_SHARES = (13, 29)
FULL_SIZE_STEPS = 20  # steps of the full-size run
NUDGE = 1e-3  # what worker 1 of the nudged run adds to its last bias after training


def _tree(root: Path) -> tuple[dict, dict]:
    """Worker 0: classes 0 and 1, 8 images each; worker 1: classes 2 and 3, 6 images each (fewer steps).
    Validation: 13 images on worker 0, 29 on worker 1 (:data:`VAL_SHARES`)."""
    big = make_tree(root / "w0", classes=4, per_class=8, val_per_class=8, seed=0, min_side=48, max_side=72)
    small = make_tree(root / "w1", classes=4, per_class=6, val_per_class=15, seed=1, min_side=48, max_side=72)

    def subset(data: dict, labels: set[int]) -> dict:
        keep = [i for i, y in enumerate(data["label"]) if y in labels]
        share = VAL_SHARES[0] if 0 in labels else VAL_SHARES[1]
        vkeep = [i for i, y in enumerate(data["val_label"]) if y in labels][:share]
        return {
            "image": [data["image"][i] for i in keep],
            "label": [data["label"][i] for i in keep],
            "category": [data["category"][i] for i in keep],
            "categories": [c for i, c in enumerate(data["categories"]) if i in labels],
            "num_classes": 4,
            "val_image": [data["val_image"][i] for i in vkeep],
            "val_label": [data["val_label"][i] for i in vkeep],
        }

    return subset(big, {0, 1}), subset(small, {2, 3})


def _start(
    processes: Processes, workdir: Path, index: int, base_port: int, data: dict, kill: bool, *, fresh: bool = False,
    image_size: list[int] | None = None, fake_rates: dict[str, float] | None = None, fake_wire: str | None = None,
    paused: bool = False, full_size: bool = False, nudge: bool = False, levers: dict[str, Any] | None = None,
    epochs: int | None = None, extra: dict[str, Any] | None = None,
) -> subprocess.Popen:
    """Start worker ``index``, kept in ``processes`` (the fixture kills it if it still runs when the test ends);
    ``fresh``: one epoch without checkpoints, seeded with its own index (one epoch per size with ``image_size``, a
    schedule of sizes); ``fake_rates``: its CPU claims bfloat16 instructions and measures these images per second
    in each precision (whatever this machine's CPU); ``fake_wire``: its packs
    overlap the backward pass and its own timing of the exchange advises this wire format; ``paused``: worker 1
    stops itself (SIGSTOP) after its second step, to be continued by the test, under a collective timeout of
    :data:`PAUSED_TIMEOUT` instead of :data:`TIMEOUT`; ``full_size``: AlexNet's own dense layers (4096 units),
    :data:`FULL_SIZE_STEPS` steps of 16 images, without validation; ``nudge``: worker 1 adds :data:`NUDGE` to its
    last bias once its training is over, before the workers compare their weights; ``levers``: training settings
    of the communication levers (``allreduce_precision``, ``sync_every``, ...) given to ``alexnet_train()``;
    ``epochs``: that many epochs, with checkpoints, in place of the 3 of a run that resumes; ``extra``: more of the
    worker's configuration (``threads``, ``stall``, ``collective_timeout``, ``steps_per_epoch``)."""
    config = {
        "fake_rates": fake_rates,
        "fake_wire": fake_wire,
        "index": index,
        "base_port": base_port,
        "data": data,
        "checkpoint_dir": None if fresh else str(workdir / "ckpt"),
        "epochs": (len(image_size) if image_size else 1) if fresh else epochs or 3,
        "image_size": image_size or 64,
        "out": str(workdir / f"result-{index}.json"),
        "died": str(workdir / "died.txt") if kill else None,
        "paused": str(workdir / "paused.txt") if paused else None,
        "nudge": nudge,
        "levers": levers or {},
        "collective_timeout": PAUSED_TIMEOUT if paused else TIMEOUT,
        # the run that completes: a model pin and TensorBoard logs, which only the chief writes
        "model_board": None if fresh or kill else str(workdir / "models"),
        "log_dir": None if fresh or kill else str(workdir / "logs"),
        # each epoch's weights, to score them again (the fresh run)
        "epoch_weights": str(workdir / f"weights-{index}") if fresh else None,
        # the fresh run learns enough in its few steps for its predictions to differ from image to image
        **({"learning_rate": 0.02, "lr_scaling": "none"} if fresh else {}),
        **({"dense_units": 4096, "batch_size": 16, "steps_per_epoch": FULL_SIZE_STEPS, "validation": False,
            "epoch_weights": None} if full_size else {}),
        **(extra or {}),
    }
    path = workdir / f"config-{index}.json"
    path.write_text(json.dumps(config))
    env = worker_env(workdir)
    kind = ("kill" if kill else "paused" if paused else "full" if full_size else "nudge" if nudge else
            "stall" if (extra or {}).get("stall") else "fresh" if fresh else "long" if epochs else "resume")
    with open(workdir / f"log-{index}-{kind}.txt", "w") as log:
        return processes.popen([sys.executable, str(HERE), str(path)], stdout=log, stderr=subprocess.STDOUT, env=env)


@pytest.mark.slow
@pytest.mark.workers
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_workers_seeded_differently_over_a_size_schedule_end_with_equal_weights(tmp_path, processes):
    # each worker initialises the model with its own seed; MultiWorkerMirroredStrategy broadcasts the
    # chief's initial values, or the workers would apply the same averaged updates to different weights; and
    # every worker trains the same image sizes in the same epochs. Validation, after each epoch, counts the
    # 13 + 29 validation images of both workers once each (test below, on the same run)
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)
    # and although worker 1 measures bfloat16 faster (worker 0 float32), both compute in float32: the workers
    # agree on one precision
    rates = ({"float32": 30.0, "bfloat16": 10.0}, {"float32": 10.0, "bfloat16": 30.0})
    # and although each worker's own timing of the exchange advises another wire format, the probe's step with
    # packs sends one (the chief's): a collective of two formats fails on both workers
    wires = ("bfloat16", "float32")
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, image_size=[64, 96],
                      fake_rates=rates[i], fake_wire=wires[i])
               for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    assert codes == [0, 0], [(tmp_path / f"log-{i}-fresh.txt").read_text()[-3000:] for i in range(2)]
    histories = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    for history in histories:
        params = history["params"]
        assert 0.0 <= params["hidden_seconds"] <= params["sixteen_bit_allreduce_seconds"], params
    assert [h["params"]["seed"] for h in histories] == [0, 1]
    for history in histories:
        assert history["schedule"]["image_size"] == [64, 96] and history["params"]["workers"] == 2
        assert history["params"]["image_size"] == [64, 96] and history["card"]["image_size"] == 96
        assert history["params"]["precision"] == "float32"
        assert "workers differ (bfloat16, float32)" in history["params"]["precision_reason"]
    assert histories[1]["params"]["precision_rates"] == {"float32": 10.0, "bfloat16": 30.0}
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert [h["weights_agree"] for h in histories] == [True, True]
    # each worker's pipelines batch what one replica takes a step (4 images), not the cluster's step (8): given
    # the cluster's, TensorFlow would cut it in two and feed this worker both halves, one step after the other
    for history in histories:
        assert history["params"]["global_batch_size"] == 8
        assert history["pipeline_batches"] == {"train": [4, 4], "validation": [4]}
    _validation_counts_every_image_once(tmp_path, histories, data0, data1)


@pytest.mark.workers
@pytest.mark.long  # make test-long (CI)
def test_workers_that_start_from_a_trained_model_train_its_dense_layers_in_step(tmp_path, processes):
    # each worker seeds its fresh weights differently; the convolutions come from the initial model and stay as they
    # are, the dense layers learn, the last layer keeps the model's weights of the classes both have, and both
    # workers end with the same weights
    from helpers_model import card_for, save_model_dir

    from alexnet.model.network import build_alexnet
    from alexnet.train.initial import frozen_layers

    data0, data1 = _tree(tmp_path / "images")
    keras.utils.set_random_seed(7)
    initial = build_alexnet(3, dense_units=32)
    save_model_dir(initial, tmp_path / "initial", card_for([{"id": i, "name": i} for i in
                                                           ("n00000003", "other", "n00000001")]))
    levers = {"initial_model": str(tmp_path / "initial"), "train_from": "fc1"}
    # each worker's data names only its own classes (the others by their label numbers): they would find other
    # classes of the initial model, and both refuse to train
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, levers=levers)
               for i, d in enumerate((data0, data1))]
    assert [processes.wait(w, 240) for w in workers] == [1, 1]
    for i in range(2):
        error = json.loads((tmp_path / f"result-{i}.json").read_text())["error"]
        assert "the workers name their classes differently (worker 0 and worker(s) 1 differ)" in error["message"]
    # with the classes named alike, as imagenet_partition() names them
    for data in (data0, data1):
        data["class_ids"] = [f"n{index:08d}" for index in range(4)]
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, levers=levers)
               for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    assert codes == [0, 0], [(tmp_path / f"log-{i}-fresh.txt").read_text()[-3000:] for i in range(2)]
    histories = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    assert [h["params"]["seed"] for h in histories] == [0, 1]
    for history in histories:
        assert history["params"]["started_from"]["classes_kept"] == 2
        assert history["params"]["started_from"]["classes_new"] == 2
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert [h["weights_agree"] for h in histories] == [True, True]
    # the epoch's weights, in the order of a model frozen as the run's
    trained = build_alexnet(4, dense_units=32)
    for name in frozen_layers("fc1"):
        trained.get_layer(name).trainable = False
    with np.load(tmp_path / "weights-0" / "epoch-1.npz") as saved:
        trained.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])
    for name in frozen_layers("fc1"):
        for mine, source in zip(trained.get_layer(name).get_weights(), initial.get_layer(name).get_weights(),
                                strict=True):
            np.testing.assert_array_equal(mine, source, err_msg=name)
    assert not np.array_equal(trained.get_layer("fc1").get_weights()[0], initial.get_layer("fc1").get_weights()[0])


def _validation_counts_every_image_once(tmp_path: Path, histories: list[dict], data0: dict, data1: dict) -> None:
    """Each epoch's val_ metrics, on both workers, are alexnet_evaluate()'s (centre crop, at the last size, 96)
    of that epoch's weights over the 42 validation images of both workers: none missed, none counted twice, the
    padding of the smaller share (8 steps of 4 each: worker 0 pads 19 places) counted for nothing."""
    both = {"val_image": data0["val_image"] + data1["val_image"], "val_label": data0["val_label"] + data1["val_label"],
            "num_classes": 4}
    assert len(both["val_image"]) == sum(VAL_SHARES) == 42
    scores = score_epochs(tmp_path / "weights-0", both, 96, num_classes=4, dense_units=32)
    assert len(scores) == 2
    for index, history in enumerate(histories):
        metrics, params = history["metrics"], history["params"]
        assert params["val_images"] == 42 and params["worker_val_images"] == VAL_SHARES[index]
        assert metrics["val_images"] == [42.0, 42.0]
        for epoch, score in enumerate(scores):
            assert score["images"] == 42 and score["bad_images"] == []
            assert metrics["val_accuracy"][epoch] == score["top1_correct"] / 42, (epoch, score)
            assert metrics["val_top5_accuracy"][epoch] == score["top5_correct"] / 42  # top 4 of 4: always 1
            assert metrics["val_loss"][epoch] == pytest.approx(score["loss"], rel=1e-5), "the mean over 42 images"
    for name in ("val_loss", "val_accuracy", "val_top5_accuracy"):  # all-reduced: the same on every worker
        assert histories[0]["metrics"][name] == histories[1]["metrics"][name], name


@pytest.mark.workers
@pytest.mark.long
def test_a_dead_worker_stops_the_other_and_a_rerun_resumes_in_step(tmp_path, processes):
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)

    # run 1: worker 1 dies during the second epoch
    survivor = _start(processes, tmp_path, 0, base, data0, kill=True)
    victim = _start(processes, tmp_path, 1, base, data1, kill=True)
    assert processes.wait(victim, 240) == 17, (tmp_path / "log-1-kill.txt").read_text()[-3000:]
    died_at = float((tmp_path / "died.txt").read_text())
    code = processes.wait(survivor, 240)
    stopped_after = time.time() - died_at
    log0 = (tmp_path / "log-0-kill.txt").read_text()
    assert code == 1, log0[-3000:]
    assert stopped_after < TIMEOUT + 20, f"worker 0 took {stopped_after:.0f} s to give up"
    error = json.loads((tmp_path / "result-0.json").read_text())["error"]
    assert error["type"] != "Interrupted" and error["message"], error
    # the chief checkpointed the first epoch only; the victim never wrote there
    assert json.loads((tmp_path / "ckpt" / STATE_FILE).read_text())["epochs_done"] == KILL_EPOCH

    # run 2: both resume after the completed epoch and end in step
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False) for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    logs = [(tmp_path / f"log-{i}-resume.txt").read_text()[-3000:] for i in range(2)]
    assert codes == [0, 0], logs
    histories = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    for history in histories:
        params = history["params"]
        assert params["initial_epoch"] == KILL_EPOCH and params["workers"] == 2 and params["replicas"] == 2
        assert len(history["metrics"]["loss"]) == 3, "the history covers the epoch of the first run"
        # worker 1 has 12 images, worker 0 has 16: both run 12 // 4 = 3 steps per epoch
        assert params["steps"] == min(len(data0["image"]), len(data1["image"])) // 4
        assert params["global_batch_size"] == 8
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert histories[0]["model_path"] and Path(histories[0]["model_path"]).exists()
    assert histories[1]["model_path"] is None, "only the chief saves the model"
    # and with the losses and weights of the same run that nothing stopped: each step's images, crops and dropout
    # masks are functions of the worker's seed and the step, not of what its process drew before
    straight = tmp_path / "straight"
    straight.mkdir()
    base = free_base_port(2)
    workers = [_start(processes, straight, i, base, d, kill=False) for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    assert codes == [0, 0], [(straight / f"log-{i}-resume.txt").read_text()[-3000:] for i in range(2)]
    unstopped = [json.loads((straight / f"result-{i}.json").read_text()) for i in range(2)]
    assert [h["metrics"]["loss"] for h in unstopped] == [h["metrics"]["loss"] for h in histories]
    assert [h["weights_sha256"] for h in unstopped] == [h["weights_sha256"] for h in histories]
    # only the chief wrote the card, the pin (one version) and the logs (one event file)
    card = json.loads((tmp_path / "ckpt" / CARD_FILE).read_text())
    assert card == histories[0]["card"] and card["epochs"] == 3 and card["num_classes"] == 4
    assert histories[0]["model_pin"]["name"] == "alexnet" and histories[1]["model_pin"] is None
    board = open_board(str(tmp_path / "models"))
    assert list(board.pins.pin_versions("alexnet")["version"]) == [histories[0]["model_pin"]["version"]]
    assert board.pins.pin_meta("alexnet").user["weights_sha256"] == histories[1]["weights_sha256"]
    assert len(list((tmp_path / "logs").glob("events.out.tfevents.*"))) == 1

    # run 3, given again: the chief finds the finished run before either worker builds or measures, both return its
    # history, and the model, its card and the pin are left as they were
    assert all("Training AlexNet" in (tmp_path / f"log-{i}-resume.txt").read_text() for i in range(2))
    model = tmp_path / "ckpt" / MODEL_FILE
    before = (model.stat().st_mtime_ns, model.stat().st_size, (tmp_path / "ckpt" / CARD_FILE).read_bytes())
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False, epochs=3) for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    logs = [(tmp_path / f"log-{i}-long.txt").read_text() for i in range(2)]
    assert codes == [0, 0], [log[-3000:] for log in logs]
    assert not any("Training AlexNet" in log or "Precision " in log for log in logs), logs
    assert "holds a finished run: it trained all 3 epochs asked for" in logs[0]
    again = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    assert again[0]["metrics"] == histories[0]["metrics"] and again[0]["card"] == histories[0]["card"]
    assert [h["weights_sha256"] for h in again] == [histories[0]["weights_sha256"]] * 2
    assert again[0]["model_pin"] == histories[0]["model_pin"] and again[1]["model_pin"] is None
    assert again[1]["model_path"] is None and again[1]["params"]["initial_epoch"] == 3
    # whether the workers agreed, as the run ended (recorded beside the model saved), and each worker's own images
    assert [h["weights_agree"] for h in again] == [h["weights_agree"] for h in histories] == [True, True]
    assert [h["params"]["train_images"] for h in again] == [h["params"]["train_images"] for h in histories] == [16, 12]
    assert (model.stat().st_mtime_ns, model.stat().st_size, (tmp_path / "ckpt" / CARD_FILE).read_bytes()) == before
    assert len(board.pins.pin_versions("alexnet")) == 1


@pytest.mark.workers
@pytest.mark.long
def test_a_worker_past_its_share_of_skipped_images_stops_every_worker_at_that_epochs_end(tmp_path, processes):
    # worker 1 skips one of its 12 training images, damaged after the check before training (here: no check), more
    # than its max_bad_fraction; worker 0 skips none, and stops with it, saying why, instead of going on to its next
    # exchange and saying it lost worker 1 (when worker 1's process ends) or waiting for it until the collective
    # timeout (when the process lives on, as an R session does)
    data0, data1 = _tree(tmp_path / "images")
    damaged = data1["image"][0]
    with open(damaged, "r+b") as file:
        file.write(bytes(64))
    base = free_base_port(2)
    settings = {"check_images": False, "max_bad_fraction": 0.05}
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, levers=settings)
               for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    logs = [(tmp_path / f"log-{i}-fresh.txt").read_text()[-3000:] for i in range(2)]
    assert codes == [1, 1], logs
    errors = [json.loads((tmp_path / f"result-{i}.json").read_text())["error"] for i in range(2)]
    assert [e["type"] for e in errors] == ["BadImagesError", "BadImagesError"], errors
    assert "1 of 12 training images (8.33%)" in errors[1]["message"] and damaged in errors[1]["message"]
    assert errors[0]["message"].startswith("Training stopped by the end of epoch 1"), errors[0]
    assert "(worker 1: 1 of 12 (8.33%))" in errors[0]["message"], errors[0]


@pytest.mark.workers
@pytest.mark.long  # make test-long (CI)
def test_a_worker_sent_sigterm_stops_and_the_other_says_it_lost_it(tmp_path, processes):
    """SIGTERM to the chief during a run of many epochs: it ends at once, as a run of one worker does (TensorFlow's
    multi-worker set-up had taken SIGTERM over, and both trained on), its last checkpoint whole; worker 1 ends within
    seconds with one error naming worker 0 and how to resume."""
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False, epochs=100)
               for i, d in enumerate((data0, data1))]
    state = tmp_path / "ckpt" / STATE_FILE
    deadline = time.time() + 120
    while not state.exists() and time.time() < deadline and all(w.poll() is None for w in workers):
        time.sleep(0.2)
    logs = lambda: [(tmp_path / f"log-{i}-long.txt").read_text()[-3000:] for i in range(2)]  # noqa: E731
    assert state.exists(), logs()
    workers[0].send_signal(signal.SIGTERM)
    sent = time.time()
    codes = [processes.wait(w, 30) for w in workers]
    assert time.time() - sent < 30
    assert codes == [-signal.SIGTERM, 1], logs()
    error = json.loads((tmp_path / "result-1.json").read_text())["error"]
    assert error["type"] == "WorkerLostError", error
    assert error["message"].startswith("Worker 1 of 2 cannot go on: worker 0 of 2 stopped answering"), error
    assert f"with `checkpoint_dir` = '{tmp_path / 'ckpt'}': it resumes" in error["message"]
    # what a rerun resumes from: the checkpoint the index names, every file of it there
    done = json.loads(state.read_text())["epochs_done"]
    latest = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    assert done >= 1 and latest is not None
    assert {"epoch", "step"} <= {name.split("/")[0] for name, _ in tf.train.list_variables(latest)}


@pytest.mark.workers
@pytest.mark.long
def test_a_worker_paused_longer_than_tensorflows_heartbeat_timeout_is_waited_for(tmp_path, processes):
    """A worker silent for 25 s (stopped; a busy small machine can be late with its heartbeats too) would be
    declared lost by TensorFlow's default heartbeat timeout of 10 s, ending the run on both workers; with the
    heartbeat timeout of a minute both go on and end in step."""
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, paused=True)
               for i, d in enumerate((data0, data1))]
    marker = tmp_path / "paused.txt"
    try:
        deadline = time.time() + 240
        while not marker.exists() and time.time() < deadline and all(w.poll() is None for w in workers):
            time.sleep(0.5)
        assert marker.exists(), [(tmp_path / f"log-{i}-paused.txt").read_text()[-3000:] for i in range(2)]
        time.sleep(PAUSE)
    finally:
        workers[1].send_signal(signal.SIGCONT)
    codes = [processes.wait(w, 240) for w in workers]
    assert codes == [0, 0], [(tmp_path / f"log-{i}-paused.txt").read_text()[-3000:] for i in range(2)]
    histories = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert [len(h["metrics"]["loss"]) for h in histories] == [1, 1]


@pytest.mark.workers
@pytest.mark.long
def test_a_two_worker_run_holds_no_thread_per_collective(tmp_path, processes):
    """Under TensorFlow's collective timeout (1800 s by default) every collective started a thread that slept for
    the whole timeout: about 16 more threads a training step, thousands per worker, until the machine could start no
    process. With the timeout kept by one watchdog thread, the threads stay as many from the first epoch to the
    last."""
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)
    extra = {"threads": str(tmp_path / "threads-{index}.txt"), "collective_timeout": 1800, "steps_per_epoch": 8}
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, image_size=[64, 64, 64], extra=extra)
               for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 400) for w in workers]
    assert codes == [0, 0], [(tmp_path / f"log-{i}-fresh.txt").read_text()[-3000:] for i in range(2)]
    for index in (0, 1):
        epochs = [[int(n) for n in line.split()] for line in (tmp_path / f"threads-{index}.txt").read_text()
                  .splitlines()]
        assert [len(counts) for counts in epochs] == [8, 8, 8]
        first, last = epochs[0][-1], epochs[-1][-1]
        # 16 steps after the first epoch's end: at 16 sleeping threads a step, 250 more
        assert last - first < 20, epochs


@pytest.mark.workers
@pytest.mark.long
def test_a_worker_alive_but_not_coming_is_given_up_after_the_collective_timeout(tmp_path, processes):
    """Worker 1 asleep before a step, its heartbeats going on: worker 0, waiting in the step's collectives, gives up
    after `collective_timeout` (the watchdog's, no longer TensorFlow's) and says so in one error."""
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)
    marker = tmp_path / "stalled.txt"
    extra = {"stall": {"marker": str(marker), "seconds": 40}, "collective_timeout": 8}
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, extra=extra)
               for i, d in enumerate((data0, data1))]
    code = processes.wait(workers[0], 300)
    ended = time.time()
    log = (tmp_path / "log-0-stall.txt").read_text()
    assert code == 1 and marker.exists(), log[-3000:]
    stalled = float(marker.read_text())
    failed = json.loads((tmp_path / "result-0.json").read_text())["error"]
    assert failed["type"] == "WorkerLostError", failed
    said = (r"a training step waited more than [\d.]+ s for the other workers \(`collective_timeout` = 8 s, and "
            r"[\d.]+ s for its own computation\)")  # twice the step's computation as measured before training
    assert re.search(f"Worker 0 of 2 cannot go on: {said}, so the run stopped on every worker", failed["message"]), \
        failed
    assert re.search(said, log)
    assert 8 <= ended - stalled < 8 + 15, (ended - stalled, log[-3000:])
    processes.wait(workers[1], 120)


# the levers of a synchronous run at once: packs of 16-bit gradients and micro-batches accumulated in variables of
# the dense layers' size (local SGD is left out: its last average would make the workers' weights equal again)
SYNCHRONOUS_LEVERS = {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "accumulate_steps": 2}


@pytest.mark.workers
@pytest.mark.long
@pytest.mark.parametrize("levers", [{}, SYNCHRONOUS_LEVERS], ids=["plain", "levers"])
def test_a_full_size_alexnet_with_momentum_and_weight_decay_ends_with_equal_weights(tmp_path, processes, levers):
    """AlexNet's largest kernel (9216 x 4096), updated with momentum and weight decay: written as separate reads
    and assignments of the kernel and its momentum, that update left the two workers' kernels a few units in the
    last place apart within these 20 steps (in each of 6 runs, though timing-dependent; never with momentum or
    decay alone), while the small models of the tests above stayed equal. One kernel per update keeps them equal
    bit for bit, with 16-bit packs and micro-batches too."""
    rows = make_tree(tmp_path / "images", classes=4, per_class=8 * FULL_SIZE_STEPS, val_per_class=0, seed=0,
                     min_side=48, max_side=72)

    def share(labels: set[int]) -> dict:
        keep = [i for i, y in enumerate(rows["label"]) if y in labels]
        return {"image": [rows["image"][i] for i in keep], "label": [rows["label"][i] for i in keep],
                "category": [rows["category"][i] for i in keep], "num_classes": 4,
                "categories": [c for i, c in enumerate(rows["categories"]) if i in labels]}

    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, share(labels), kill=False, fresh=True, full_size=True,
                      levers=levers)
               for i, labels in enumerate(({0, 1}, {2, 3}))]
    codes = [processes.wait(w, 300) for w in workers]
    assert codes == [0, 0], [(tmp_path / f"log-{i}-full.txt").read_text()[-3000:] for i in range(2)]
    histories = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    for history in histories:
        params = history["params"]
        assert params["dense_units"] == 4096 and params["steps"] == FULL_SIZE_STEPS and params["workers"] == 2
        assert params["momentum"] > 0 and params["weight_decay"] > 0
        assert {name: params[name] for name in levers} == levers
    assert histories[0]["weights_sha256"] == histories[1]["weights_sha256"]
    assert [h["weights_agree"] for h in histories] == [True, True]


@pytest.mark.workers
@pytest.mark.long
def test_workers_that_end_with_different_weights_say_so(tmp_path, processes):
    """Worker 1 changes its weights once training is over: both workers compare them and find them apart, both
    histories say so (weights_agree), and both logs name worker 1 against the chief's digest."""
    data0, data1 = _tree(tmp_path / "images")
    base = free_base_port(2)
    workers = [_start(processes, tmp_path, i, base, d, kill=False, fresh=True, nudge=True)
               for i, d in enumerate((data0, data1))]
    codes = [processes.wait(w, 240) for w in workers]
    logs = [(tmp_path / f"log-{i}-nudge.txt").read_text() for i in range(2)]
    assert codes == [0, 0], [log[-3000:] for log in logs]
    histories = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    assert histories[0]["weights_sha256"] != histories[1]["weights_sha256"]
    assert [h["weights_agree"] for h in histories] == [False, False]
    chief = histories[0]["weights_sha256"][:12]
    for log in logs:
        assert "The workers ended with different weights: worker 1 holds weights other than the chief's" in log
    assert f"the one saved and published (weights_sha256 {chief}...)." in logs[0], logs[0][-3000:]


# ---------------------------------------------------------------------------------------------------------
# the worker process


class _Die(keras.callbacks.Callback):
    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == KILL_EPOCH and batch == KILL_STEP:
            Path(self.marker).write_text(repr(time.time()))
            os._exit(17)


class _Pause(keras.callbacks.Callback):
    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            Path(self.marker).write_text(repr(time.time()))
            os.kill(os.getpid(), signal.SIGSTOP)


class _Threads(keras.callbacks.Callback):
    """Writes this process's thread count after every step, one line of numbers per epoch."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path, self.counts = Path(path), []

    def on_train_batch_end(self, batch, logs=None):
        self.counts.append(len(os.listdir("/proc/self/task")))

    def on_epoch_end(self, epoch, logs=None):
        with open(self.path, "a") as f:
            f.write(" ".join(map(str, self.counts)) + "\n")
        self.counts = []


class _Stall(keras.callbacks.Callback):
    """Worker 1 alive but not coming: asleep for ``seconds`` before its third step (its heartbeats go on)."""

    def __init__(self, marker: str, seconds: float) -> None:
        super().__init__()
        self.marker, self.seconds = marker, seconds

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 2 and not Path(self.marker).exists():
            Path(self.marker).write_text(repr(time.time()))
            time.sleep(self.seconds)


class _Nudge(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        bias = self.model.trainable_weights[-1]
        bias.assign(bias.numpy() + NUDGE)


def _worker(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    index = config["index"]
    os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], index, config["base_port"])
    callbacks = [_Die(config["died"])] if config["died"] and index == 1 else []
    if config.get("paused") and index == 1:
        callbacks.append(_Pause(config["paused"]))
    if config.get("nudge") and index == 1:
        callbacks.append(_Nudge())
    if config.get("threads"):
        callbacks.append(_Threads(config["threads"].format(index=index)))
    if config.get("stall") and index == 1:
        callbacks.append(_Stall(config["stall"]["marker"], config["stall"]["seconds"]))
    if config.get("epoch_weights"):
        callbacks.append(keep_epoch_weights(Path(config["epoch_weights"])))
    if config.get("fake_rates"):
        from alexnet.train import measure
        from alexnet.train import precision as precisions

        os.environ[measure.CACHE_ENV] = "off"
        precisions.cpu_flags = lambda: frozenset({"avx2", "avx512_bf16"})
        measure.model_timer = lambda *args, **kwargs: dict(config["fake_rates"]).__getitem__
    if config.get("fake_wire"):
        from alexnet.train import advice, probe

        advice.faster_wire = lambda *args: config["fake_wire"]
        probe.packed_step_timed = lambda topology: True  # as GPU workers: the probe times a step with packs
    batches = _record_batches() if config.get("epoch_weights") else None
    out = Path(config["out"])
    try:
        history = training.alexnet_train(
            config.get("batch_size", 4),
            config["epochs"],
            config["data"],
            "multi_worker",
            image_size=config.get("image_size", 64),
            dense_units=config.get("dense_units", 32),
            steps_per_epoch=config.get("steps_per_epoch"),
            validation=config.get("validation", True),
            learning_rate=config.get("learning_rate", 0.005),
            lr_scaling=config.get("lr_scaling", "linear"),
            checkpoint_dir=config["checkpoint_dir"],
            collective_timeout=config["collective_timeout"],
            seed=index,
            verbose=0,
            callbacks=callbacks,
            model_pin="alexnet" if config["model_board"] else None,
            model_board=config["model_board"],
            log_dir=config["log_dir"],
            log_every=1,
            **config["levers"],
        )
    except Exception as error:  # the survivor of the kill: report what stopped it
        out.write_text(json.dumps({"error": {"type": type(error).__name__, "message": str(error)[:2000]}}))
        sys.stderr.write(f"worker {index} failed: {type(error).__name__}: {error}\n")
        sys.stderr.flush()
        os._exit(1)
    out.write_text(json.dumps({**history, "pipeline_batches": batches}))
    sys.stdout.flush()
    os._exit(0)


def _record_batches() -> dict[str, list[int]]:
    """The batch size each input pipeline of this worker is built with, by kind (``train``, ``validation``)."""
    from alexnet.input import pipeline

    batches: dict[str, list[int]] = {"train": [], "validation": []}
    for kind in batches:
        made = getattr(pipeline, f"{kind}_dataset")

        def recording(files, labels, batch_size, *args, _made=made, _kind=kind, **kwargs):
            batches[_kind].append(int(batch_size))
            return _made(files, labels, batch_size, *args, **kwargs)

        setattr(pipeline, f"{kind}_dataset", recording)
    return batches


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO)
    _worker(sys.argv[1])
