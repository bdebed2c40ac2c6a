"""Workers launched by hand, each with its own TF_CONFIG: what a run is told when TF_CONFIG names a cluster but its
strategy trains alone, what the chief says before the model is built on several workers, and what `alexnet train`'s
summary says of workers that ended with the same weights."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import pytest
from helpers_cli import fake_core
from helpers_join import met_in_threads

from alexnet.cli import main

TWO_WORKERS = json.dumps({"cluster": {"worker": ["10.0.0.1:8000", "10.0.0.2:8001"]},
                          "task": {"type": "worker", "index": 0}})
CHIEF_AND_WORKER = json.dumps({"cluster": {"chief": ["10.0.0.1:8000"], "worker": ["10.0.0.2:8001"]},
                               "task": {"type": "chief", "index": 0}})
ONE_WORKER = json.dumps({"cluster": {"worker": "10.0.0.1:8000"}, "task": {"type": "worker", "index": 0}})


def _left_out(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "TF_CONFIG names" in
            r.getMessage()]


@pytest.mark.parametrize("strategy", [None, "default", "mirrored"])
@pytest.mark.parametrize(("tf_config", "workers"), [(TWO_WORKERS, 2), (CHIEF_AND_WORKER, 2), (ONE_WORKER, 0),
                                                     (None, 0)], ids=["two", "chief-and-worker", "one", "unset"])
def test_a_cluster_that_tf_config_names_and_the_strategy_leaves_out_is_warned_of(monkeypatch, caplog, strategy,
                                                                                 tf_config, workers):
    """Two workers launched by hand without strategy = 'multi_worker' each trained a model of their own, without a
    word; a run of one machine (TF_CONFIG unset, or naming this worker alone) is told nothing."""
    pytest.importorskip("tensorflow")
    from alexnet.train.strategy import resolve_strategy

    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        resolved = resolve_strategy(strategy)
    said = _left_out(caplog)
    if not workers:
        assert said == []
        return
    name = "mirrored" if strategy == "mirrored" else "default"
    assert said == [f"TF_CONFIG names 2 workers, but this run's strategy ({name}) trains on this worker alone: each "
                    "worker launched so trains a model of its own. Give strategy = 'multi_worker' to train them as "
                    "one, or unset TF_CONFIG for a run of one machine."]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        resolve_strategy(resolved)  # the same strategy object, given again
    assert len(_left_out(caplog)) == 1, "an object that trains alone is told the same"


def test_alexnet_train_says_the_cluster_left_out_as_its_option(monkeypatch, caplog, capsys):
    """`alexnet train` under TF_CONFIG of two workers and without --strategy: the warning names --strategy, once,
    before training; with --strategy multi_worker it is not said."""
    pytest.importorskip("tensorflow")
    from alexnet.train import api
    from alexnet.train.strategy import resolve_strategy

    trained = []

    def train(settings, data, strategy=None):
        if strategy != "multi_worker":  # no cluster to join here: the strategy a command line without it resolves
            resolve_strategy(strategy)
        trained.append(strategy)
        return {"metrics": {"loss": [1.0]}, "params": {}, "model_path": None, "model_pin": None}

    fake_core(monkeypatch, lambda command: lambda **k: {"image": [], "board": "/b", "total": 2, "partition": 0})
    monkeypatch.setattr(api, "train", train)
    monkeypatch.setenv("TF_CONFIG", TWO_WORKERS)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        assert main(["train", "--board", "/b", "--partition", "0", "--total", "2"]) == 0
    assert _left_out(caplog) == [
        "TF_CONFIG names 2 workers, but this run's strategy (default) trains on this worker alone: each worker "
        "launched so trains a model of its own. Give --strategy 'multi_worker' to train them as one, or unset "
        "TF_CONFIG for a run of one machine."]
    caplog.clear()
    monkeypatch.setattr("alexnet.train.cluster.check_port_free", lambda config: None)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        assert main(["train", "--board", "/b", "--partition", "0", "--total", "2", "--strategy", "multi_worker"]) == 0
    assert _left_out(caplog) == [] and trained == [None, "multi_worker"]


HISTORY = {"params": {"strategy": "multi_worker", "replicas": 2, "workers": 2}, "metrics": {"loss": [1.0]},
           "weights_sha256": "ab", "model_path": None, "model_pin": None}


@pytest.mark.parametrize(("agree", "said"), [
    (True, ["Every worker holds the same weights"]),
    (False, ["The workers ended with different weights: the chief's model is the one saved and published (its log "
             "names the workers apart)."]),
    (None, []),  # one worker: nothing to compare
])
def test_alexnet_train_says_when_the_workers_ended_with_the_same_weights(monkeypatch, capsys, agree, said):
    """`alexnet spark-train` said so and `alexnet train` of several workers said nothing unless they differed: now
    the chief's summary says it in the same words."""
    from alexnet.cli import cluster
    from alexnet.train import api

    history = {**HISTORY, "weights_agree": agree}
    fake_core(monkeypatch, lambda command: lambda **k: {"image": [], "board": "/b"})
    monkeypatch.setattr(api, "train", lambda settings, data, strategy=None: history)
    assert main(["train", "--board", "/b", "--total", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == [*said, "Weights: sha256 ab"], lines  # the digest of the weights follows
    if agree:  # the sentence of spark-train's summary of workers whose digests are one
        rows = [{"worker": i, "chief": i == 0, "categories": ["n1"], "train_images": 4,
                 "history": {"weights_sha256": "ab"}} for i in range(2)]
        assert said[0] in cluster._train_summary(rows).splitlines()


def _settings(**given):
    """Checked settings, ``train_from`` put in afterwards (it is checked against an initial model)."""
    import dataclasses

    from alexnet.train.settings_check import check_settings

    train_from = given.pop("train_from", "conv1")
    return dataclasses.replace(check_settings(given), train_from=train_from)


@pytest.mark.parametrize(("workers", "chief", "said"), [(2, True, "the other worker"), (3, True, "the other 2 workers"),
                                                       (2, False, None), (1, True, None)])
def test_the_chief_says_what_building_the_model_on_several_workers_sends(caplog, workers, chief, said):
    """A run of two workers over 100 Mbit/s logged nothing for 41 s while the chief sent its initial weights and
    momentum to the other worker: the chief now says so before the model is built, with the bytes that building
    sends, those of the model and optimizer built (one worker's strategy standing in for the cluster)."""
    tf = pytest.importorskip("tensorflow")
    from alexnet.train import run
    from alexnet.train.precision import Precision
    from alexnet.train.strategy import Topology

    topology = Topology("multi_worker", workers, workers, 0 if chief else 1, chief, 1, False)
    settings = _settings(dense_units=32, train_from="conv3", jit_compile=False)
    with caplog.at_level(logging.INFO, logger="alexnet.train"):
        net, optimizer = run._build(tf.distribute.get_strategy(), 7, settings, topology, Precision("float32", "asked"))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Building the model")]
    if said is None:
        assert lines == []
        return
    momentum = [v for v in optimizer.variables() if v.dtype == tf.float32]
    sent = 4 * (sum(w.shape.num_elements() for w in net.weights) + sum(v.shape.num_elements() for v in momentum))
    assert len(momentum) == len(net.trainable_weights) < len(net.weights), "the frozen layers keep no momentum"
    assert lines == [f"Building the model on {workers} workers: the chief sends its initial weights and momentum "
                     f"({sent / 1e6:.1f} MB) to {said}."]
    messages = [r.getMessage() for r in caplog.records]
    assert messages.index(lines[0]) < next(i for i, m in enumerate(messages) if m.startswith("Precision ")), \
        "said before the model is built"


@pytest.mark.parametrize(("classes", "grouped", "parameters"), [(1000, False, 62_378_344), (1000, True, 60_965_224)])
def test_alexnets_parameters_are_known_before_it_is_built(classes, grouped, parameters):
    """The counts the chief's line adds up: the paper's model's, and those of the model built, layer by layer."""
    pytest.importorskip("tensorflow")
    from alexnet.model.network import build_alexnet, layer_parameters

    assert sum(layer_parameters(classes, grouped=grouped).values()) == parameters
    net = build_alexnet(5, dense_units=16, grouped=grouped)
    built = {layer.name: layer.count_params() for layer in net.layers if layer.count_params()}
    assert built == layer_parameters(5, dense_units=16, grouped=grouped)


def test_workers_given_different_clusters_each_say_both_before_tensorflow_starts():
    """Three workers launched by hand, worker 2's TF_CONFIG naming worker 1 at another port: worker 2 gave up waiting
    at that port, the chief was ended by its watchdog blaming worker 1, which had joined, and worker 1 ended in a
    traceback; none said the clusters differed. The workers tell each other their clusters as they meet, and each that
    meets the odd one names both lists, as a settings error (the command line's exit status 2)."""
    import re

    from alexnet.bench.cluster import free_base_port
    from alexnet.errors import AlexnetError

    base = free_base_port(6)
    right = [f"127.0.0.1:{base + i}" for i in range(3)]
    odd = [right[0], f"127.0.0.1:{base + 5}", right[2]]
    said = met_in_threads([right, right, odd], 20, every=60)
    assert sorted(said) == [0, 1, 2], said
    assert all(type(e) is AlexnetError and not e.while_running for e in said.values()), said
    listed = {i: json.dumps({"worker": odd if i == 2 else right}) for i in range(3)}
    for index, error in said.items():
        found = re.fullmatch(rf"The workers were given different TF_CONFIG clusters: this process, worker {index} "
                             rf"\({right[index]}\), was given (.+); worker (\d) \(127\.0\.0\.1:\d+\) was given (.+), "
                             r"where worker 1 is (\S+), not (\S+)\. Give every worker the same TF_CONFIG cluster "
                             r"\(each with its own `task\.index`\), then start them again\.", str(error))
        assert found, str(error)
        other = int(found[2])
        assert (index == 2) != (other == 2), "the odd worker and one of the others, each naming the other"
        assert (found[1], found[3]) == (listed[index], listed[other])
        assert (found[4], found[5]) == ((odd[1], right[1]) if index != 2 else (right[1], odd[1]))


def test_a_worker_whose_knocks_reach_nobody_learns_of_a_differing_cluster_from_the_odd_worker():
    """Workers 0 and 1 given one cluster, worker 2 another that puts itself at another port: worker 2 stopped knocking
    at the first worker that told it the clusters differ, so worker 1, whose knocks on worker 2's address reached
    nobody, was never told and gave up after the whole bound, blaming worker 2 ("start the same training on that
    worker too"). The odd worker now knocks on every worker once, and each of the three says the clusters differ,
    well before the bound."""
    import time

    from alexnet.bench.cluster import free_base_port
    from alexnet.errors import AlexnetError

    base = free_base_port(6)
    right = [f"127.0.0.1:{base + i}" for i in range(3)]
    odd = [right[0], right[1], f"127.0.0.1:{base + 5}"]
    start = time.monotonic()
    said = met_in_threads([right, right, odd], 10, every=60)
    assert sorted(said) == [0, 1, 2] and time.monotonic() - start < 8, said
    for index, error in said.items():
        assert type(error) is AlexnetError and not error.while_running, (index, error)
        assert str(error).startswith("The workers were given different TF_CONFIG clusters: this process, "
                                     f"worker {index} ({(odd if index == 2 else right)[index]}), was given "), error
        assert f"where worker 2 is {right[2] if index == 2 else odd[2]}, not " in str(error), error


#: A worker launched by hand, in a process of its own: argv its index, the cluster's workers (JSON), "quit" (it stops
#: once the others met it, before TensorFlow's wait) or "stay", and its `collective_timeout`.
HAND_WORKER = """
import json, logging, os, socket, sys, time
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
from alexnet.errors import AlexnetError
from alexnet.train import joining, strategy

index, workers, mode, bound = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], float(sys.argv[4])
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
if mode == "quit":  # its server listens a while, as TensorFlow's would, so that the others meet it; then it stops
    def quitting(*args, **kwargs):
        with socket.create_server(("", int(workers[index].rpartition(":")[2]))):
            time.sleep(5)
        raise SystemExit("stopped after meeting the others")
    joining.waiting_for_workers = quitting
try:
    strategy.resolve_strategy("multi_worker", collective_timeout=bound)
    print("built", flush=True)
except AlexnetError as error:
    print("error", int(error.while_running), error, flush=True)
"""


def _hand_launched(clusters: list[list[str]], modes: list[str], bounds: list[float]
                   ) -> list[subprocess.CompletedProcess]:
    """Workers started at once, each with its cluster, mode and bound (see :data:`HAND_WORKER`), each ended."""
    import os
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    started = [subprocess.Popen([sys.executable, "-c", HAND_WORKER, str(i), json.dumps(cluster), mode, str(bound)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for i, (cluster, mode, bound) in enumerate(zip(clusters, modes, bounds, strict=True))]
    try:
        said = [p.communicate(timeout=240) for p in started]
        return [subprocess.CompletedProcess(p.args, p.returncode, *out) for p, out in zip(started, said, strict=True)]
    finally:
        for process in started:
            process.kill()
            process.wait()


@pytest.mark.workers
@pytest.mark.long  # three TensorFlows started on 2 cores, and a wait of the collective timeout: over 30 s
def test_three_workers_launched_by_hand_say_a_differing_cluster_and_a_partner_stopped_while_joining():
    """What three workers launched by hand said when worker 2's TF_CONFIG named worker 1 at another port: worker 1
    ended in TensorFlow's traceback ("UnavailableError: Socket closed"), the chief's watchdog blamed worker 1, which
    had joined, and none said the clusters differed. Now each says the clusters differ before TensorFlow starts; and
    when a worker stops once the others met it (worker 2 here), the chief's watchdog names that one alone, and a worker
    whose chief was ended meanwhile says so."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from alexnet.bench.cluster import free_base_port

    base = free_base_port(6)
    right = [f"127.0.0.1:{base + i}" for i in range(3)]
    odd = [right[0], f"127.0.0.1:{base + 5}", right[2]]
    done = _hand_launched([right, right, odd], ["stay"] * 3, [20] * 3)
    for process in done:
        assert process.returncode == 0, process.stderr[-3000:]
        assert process.stdout.startswith("error 0 The workers were given different TF_CONFIG clusters: "), \
            process.stdout + process.stderr[-3000:]
        assert "Traceback" not in process.stderr, process.stderr[-3000:]
    # the chief's watchdog ends it first: worker 1 loses the chief, which leads the joining
    chief, worker, stopped = _hand_launched([right] * 3, ["stay", "stay", "quit"], [10, 60, 10])
    assert stopped.returncode == 1 and "stopped after meeting the others" in stopped.stderr, stopped
    assert chief.returncode == -9, chief
    assert (f"Worker 0 of 3 gave up after 10 s (`collective_timeout`) waiting for worker 2 ({right[2]}, which "
            "answered but answers no more: see its own error) to join") in chief.stderr, chief.stderr[-3000:]
    assert worker.returncode == 0 and worker.stdout.startswith(
        f"error 1 Worker 1 of 3 could not join the others: worker 0 (the chief, {right[0]}) stopped while the workers "
        "were joining: see its own error (TensorFlow: UnavailableError: "), worker.stdout + worker.stderr[-3000:]


def test_a_worker_that_lost_the_joining_never_names_itself_as_the_one_that_stopped():
    """TensorFlow's UnavailableError naming no remote task was blamed on the leader of the joining (the chief, else
    worker 0), also on the leader itself: "Worker 0 of 2 could not join the others: worker 0 (the chief, ...)
    stopped". The leader now says another worker stopped; the others still name the leader."""
    import tensorflow as tf

    from alexnet.train.greeting import partner_stopped

    error = tf.errors.UnavailableError(None, None, "Socket closed")
    workers = ["127.0.0.1:2000", "127.0.0.1:2001"]
    for task, said in ([{"type": "worker", "index": 0}, "Worker 0 of 2 could not join the others: another worker "],
                       [{"type": "worker", "index": 1}, "Worker 1 of 2 could not join the others: worker 0 (the chief, "
                                                        "127.0.0.1:2000) "]):
        assert partner_stopped({"cluster": {"worker": workers}, "task": task}, error) == (
            f"{said}stopped while the workers were joining: see its own error (TensorFlow: UnavailableError: Socket "
            "closed).")
    chief = {"cluster": {"chief": ["h0:1"], "worker": ["h1:1"]}, "task": {"type": "chief", "index": 0}}
    assert partner_stopped(chief, error).startswith("The chief of 2 could not join the others: another worker stopped")


def test_the_join_watchdog_spares_a_worker_whose_wait_ended_while_it_knocked():
    """The watchdog reached its bound, then knocked on the others (eight silent ports, as TensorFlow's servers: 0.3 s
    each) and killed the worker without looking again at its standard input, closed meanwhile as the worker's strategy
    was built: a run going on was ended. It now looks right before the kill."""
    import socket
    import sys
    import time

    from alexnet.train import greeting

    with socket.create_server(("127.0.0.1", 0), backlog=64) as server:  # takes connections, says nothing
        others = [[f"worker {i}", f"127.0.0.1:{server.getsockname()[1]}"] for i in range(1, 9)]
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        watchdog = subprocess.Popen([sys.executable, "-c", greeting.WATCHDOG, str(worker.pid), "2", "60", "note",
                                     "gave up {missing}", "gave up {missing}", json.dumps(others), greeting.GREETING,
                                     greeting.STILL_WAITS, greeting.ANSWERS_NO_MORE], stdin=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        try:
            time.sleep(2.1)  # past the bound, while the watchdog knocks
            assert watchdog.stdin is not None
            watchdog.stdin.close()
            watchdog.wait(timeout=30)
            time.sleep(0.2)
            assert worker.poll() is None, "the worker whose wait had ended was killed"
        finally:
            for process in (worker, watchdog):
                process.kill()
                process.wait()
