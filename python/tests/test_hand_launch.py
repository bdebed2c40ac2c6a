"""Workers launched by hand, each with its own TF_CONFIG: what a run is told when TF_CONFIG names a cluster but its
strategy trains alone, and what `alexnet train`'s summary says of workers that ended with the same weights."""

from __future__ import annotations

import json
import logging

import pytest
from helpers_cli import fake_core

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
    assert lines[2:] == said, lines
    if agree:  # the sentence of spark-train's summary of workers whose digests are one
        rows = [{"worker": i, "chief": i == 0, "categories": ["n1"], "train_images": 4,
                 "history": {"weights_sha256": "ab"}} for i in range(2)]
        assert said[0] in cluster._train_summary(rows).splitlines()
