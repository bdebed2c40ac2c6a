"""What the workers of a run agree on before training, and what they exchange to agree: the gathers of
:mod:`alexnet.train.agreement`.

The cheap checks run in this process; the two-worker run is this file started twice as a script (see the bottom).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from helpers_train import make_tree, run_two_workers  # noqa: E402

from alexnet.bench.cluster import free_base_port  # noqa: E402
from alexnet.errors import AlexnetError, KeptWarnings  # noqa: E402
from alexnet.train import agreement  # noqa: E402
from alexnet.train import strategy as strategies  # noqa: E402
from alexnet.train.levers import BETWEEN_REPLICAS, BETWEEN_WORKERS  # noqa: E402
from alexnet.train.settings import SHARED_BY_WORKERS  # noqa: E402
from alexnet.train.settings_check import check_settings  # noqa: E402

HERE = Path(__file__).resolve()


def test_the_steps_agreed_are_said_once_for_the_steps_the_run_trains_with(monkeypatch, caplog):
    """A run agrees on its steps again after a smaller batch or ``adapt_communication``: each agreement said its
    steps, and a two-worker run logged its training and validation steps twice."""
    from types import SimpleNamespace

    monkeypatch.setattr(agreement, "all_gather_ints",  # rows: images, validation images, worker, partition
                        lambda strategy, row: np.array([[640, 30, 0, -1], [640, 20, 1, -1]]))
    td = SimpleNamespace(files=["x"] * 640, val_files=["v"] * 30)
    two = strategies.Topology("multi_worker", 2, 2, 0, True, 1, False)
    caplog.set_level(logging.INFO, logger=agreement.logger.name)
    first, last = (agreement.agree_on_steps(tf.distribute.get_strategy(), two, {}, td, batch, None, True, None)
                   for batch in (64, 128))
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    agreement.say_steps(last)
    assert [r.getMessage() for r in caplog.records] == [
        "Worker 0 of 2: 5 training steps per epoch (fewest images on a worker: 640, 640 here).",
        "Worker 0 of 2: 1 validation steps per epoch over 50 validation images (30 of them here, 30 on the largest "
        "share)."]
    assert first.train == 10 and first == agreement.Steps(*(getattr(first, f) for f in (
        "train", "validate", "validation", "val_images", "val_share", "train_images", "fill"))), "notes compare equal"


def test_the_images_an_epoch_leaves_out_are_warned_of_once_for_the_steps_the_run_trains_with(monkeypatch, caplog):
    """Partitions of 700 and 800 images: every worker takes the steps the smaller fills, an epoch leaves out 100 of
    1,500 images; a run that agrees on its steps again (a smaller batch, ``adapt_communication``) warned at each
    agreement."""
    from types import SimpleNamespace

    monkeypatch.setattr(agreement, "all_gather_ints",  # rows: images, validation images, worker, partition
                        lambda strategy, row: np.array([[700, 0, 0, -1], [800, 0, 1, -1]]))
    td = SimpleNamespace(files=["x"] * 700, val_files=[])
    two = strategies.Topology("multi_worker", 2, 2, 0, True, 1, False)
    caplog.set_level(logging.INFO, logger=agreement.logger.name)
    agreed = [agreement.agree_on_steps(tf.distribute.get_strategy(), two, {}, td, batch, None, False, None)
              for batch in (100, 50)]
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    agreement.say_steps(agreed[-1])
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "trains on 1400 of the 1500 training images and leaves out 6.7%" in warned[0], warned


def test_gathers_of_rows_of_any_length_are_traced_once_and_tensorflow_warns_of_no_retracing(monkeypatch):
    # a run gathers rows of 1 to a dozen numbers a few times over: a function made anew at every call was traced
    # anew, and TensorFlow warned twice on every worker of "5 out of the last 5 calls ... triggered retracing"
    monkeypatch.setattr(agreement, "num_workers", lambda strategy: 2)  # gather on this process's one device
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    said = KeptWarnings()  # TensorFlow warns of retracing
    logging.getLogger("tensorflow").addHandler(said)
    try:
        rows = [[3, 1, 4], [1], [5, 9, 2, 6], [5, 3], [5, 8, 9], [7], [9, 3, 2, 3, 8, 4, 6], [2, 6, 4]] * 2
        for row in rows:
            assert agreement.all_gather_ints(strategy, row).tolist() == [row]
    finally:
        logging.getLogger("tensorflow").removeHandler(said)
    assert not [message for message in said.messages if "retracing" in message], said.messages


def _settings(**given: Any) -> dict[str, Any]:
    return check_settings({"epochs": 2, "image_size": 64, "dense_units": 32, **given}).shared_by_workers()


def _refusal(monkeypatch, *given: dict[str, Any]) -> str | None:
    """The error of :func:`agreement.agree_on_settings` on worker 0 when worker ``i`` is given ``given[i]`` (each
    worker one replica, its settings gathered as the real gather orders them), ``None`` when it raises none."""
    texts = [json.dumps({"worker": i, "settings": _settings(**settings)}) for i, settings in enumerate(given)]
    monkeypatch.setattr(agreement, "all_gather_texts", lambda strategy, text: texts)
    topology = strategies.Topology("multi_worker", len(given), len(given), 0, True, 1, False)
    try:
        agreement.agree_on_settings(None, topology, _settings(**given[0]))
    except AlexnetError as error:
        return str(error)
    return None


def test_workers_given_different_levers_are_all_told_each_setting_that_differs_and_every_workers_value(monkeypatch):
    # the user's two workers: another sync_every on worker 0 than on worker 1 failed with TensorFlow's "Shape mismatch
    # in the collective instance", and bfloat16 against float16 with "expected ... data_type 19 but got ... 14"
    message = _refusal(monkeypatch, {"sync_every": 4, "allreduce_precision": "bfloat16"},
                       {"allreduce_precision": "fp16"})
    assert message == (
        "The workers were given different settings: `allreduce_precision` is 'bfloat16' on worker 0, 'float16' on "
        "worker 1; `sync_every` is 4 on worker 0, 1 on worker 1. Each of these decides what the workers exchange or "
        "how every step updates the weights they share: give every worker the same settings.")
    # every lever, and what else the workers' collectives or updates depend on; workers holding one value together
    # are named together
    apart = {"allreduce_pack_mb": 25, "accumulate_steps": 2, "adapt_communication": True, "precision": "bfloat16",
             "dense_units": 64, "image_size": [64, 96], "epochs": 3, "learning_rate": 0.02, "batch_size": 16}
    message = _refusal(monkeypatch, {}, apart, {})
    for name in apart:
        assert f"`{name}` is " in message, name
    assert "`allreduce_pack_mb` is 0 on workers 0 and 2, 25 on worker 1" in message
    assert "`precision` is unset on workers 0 and 2, 'bfloat16' on worker 1" in message
    assert "`image_size` is [64] on workers 0 and 2, [64, 96] on worker 1" in message
    assert "`epochs` is 2 on workers 0 and 2, 3 on worker 1" in message
    # the same settings written otherwise, those that may differ, and those another setting leaves unused agree
    assert _refusal(monkeypatch, {"allreduce_precision": "bf16", "allreduce_pack_mb": 25.0, "seed": 0, "dropout": 0.1,
                                  "patience": 5, "lighting": 0.1},
                    {"allreduce_precision": "bfloat16", "allreduce_pack_mb": 25, "seed": 1, "patience": 2}) is None
    # with local SGD on both, the synchronous epochs before it count
    assert _refusal(monkeypatch, {"sync_every": 2, "local_sgd_after": 1}, {"sync_every": 2}) == (
        "The workers were given different settings: `local_sgd_after` is 1 on worker 0, 0 on worker 1. This setting "
        "decides what the workers exchange or how every step updates the weights they share: give every worker the "
        "same settings.")  # one setting: said in the singular, where "Each of these" followed it


def test_the_settings_every_worker_must_share_include_every_lever_and_no_setting_a_worker_may_hold_its_own():
    shared = set(SHARED_BY_WORKERS)
    levers = set(BETWEEN_REPLICAS) | set(BETWEEN_WORKERS)
    assert levers | {"accumulate_steps", "precision", "dense_units", "image_size"} <= shared
    assert not {"seed", "parallel", "checkpoint_dir", "model_dir", "log_dir", "verbose", "collective_timeout",
                "progress_file", "model_pin"} & shared
    # but those another setting leaves unused
    assert set(_settings()) == shared - {"lr_drop_epochs", "patience", "local_sgd_after"}
    assert {"patience", "local_sgd_after"} <= set(_settings(lr_schedule="plateau", sync_every=2))


def test_texts_are_gathered_whole_whatever_their_lengths(monkeypatch):
    # each replica's row: its length, then its bytes, padded to the longest
    monkeypatch.setattr(agreement, "num_workers", lambda strategy: 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    for text in ("", "{\"sync_every\": 4}", "é" * 40):
        assert agreement.all_gather_texts(strategy, text) == [text]


# ---------------------------------------------------------------------------------------------------------
# two workers: this file run as a script twice


#: The levers each worker of the run refused is given: another `sync_every` and another 16-bit wire format.
APART = ({"sync_every": 4, "allreduce_precision": "bfloat16"}, {"allreduce_precision": "float16"})
EPOCHS, STEPS = 2, 3


@pytest.mark.slow
@pytest.mark.workers
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_two_workers_refuse_different_levers_then_show_the_runs_metrics_at_every_step_without_retracing(tmp_path):
    codes = run_two_workers(HERE, tmp_path, free_base_port(2), timeout=300)
    assert codes == [0, 0], [(tmp_path / f"log-{i}.txt").read_text()[-3000:] for i in range(2)]
    results = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
    # both workers refused the levers apart, before any exchange of the training, in the product's words
    for result in results:
        assert result["refused"] == (
            "The workers were given different settings: `allreduce_precision` is 'bfloat16' on worker 0, 'float16' on "
            "worker 1; `sync_every` is 4 on worker 0, 1 on worker 1. Each of these decides what the workers exchange "
            "or how every step updates the weights they share: give every worker the same settings.")
    # the same strategy then trained: every step reported the run's metrics (what Keras's progress bar shows), never
    # their sum over the workers, and the last step of each epoch what the history records for it
    for result in results:
        steps, metrics = result["steps"], result["metrics"]
        assert len(steps) == EPOCHS * STEPS
        for logs in steps:
            assert 0.0 <= logs["accuracy"] <= 1.0 and 0.0 <= logs["top5_accuracy"] <= 1.0, steps
        for epoch in range(EPOCHS):
            last = steps[(epoch + 1) * STEPS - 1]
            for name in ("loss", "accuracy", "top5_accuracy"):
                assert last[name] == pytest.approx(metrics[name][epoch], rel=1e-6), (name, epoch, steps, metrics)
    assert results[0]["steps"] == results[1]["steps"]
    # and no worker was warned of retracing by the gathers of what they agree on
    for result in results:
        assert not [m for m in result["tensorflow"] if "retracing" in m], result["tensorflow"]


def _worker(folder: str, index: int, base: int) -> None:
    from alexnet.tfimport import keras
    from alexnet.train import api as training
    from alexnet.train.cluster import tf_config_json
    from alexnet.train.strategy import resolve_strategy

    said = KeptWarnings()  # TensorFlow warns of retracing
    logging.getLogger("tensorflow").addHandler(said)
    os.environ["TF_CONFIG"] = tf_config_json(["127.0.0.1:1", "127.0.0.1:2"], index, base)
    strategy = resolve_strategy("multi_worker", collective_timeout=60)
    root = Path(folder)
    data = make_tree(root / f"images-{index}", classes=4, per_class=8, val_per_class=2, seed=index, min_side=48,
                     max_side=72)
    settings = {"batch_size": 4, "epochs": EPOCHS, "steps_per_epoch": STEPS, "image_size": 64, "dense_units": 32,
                "seed": index, "precision": "float32", "verbose": 0, "parallel": 1, "learning_rate": 0.02}

    class Steps(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.logs: list[dict[str, float]] = []

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            self.logs.append({name: float(value) for name, value in (logs or {}).items()})

    try:
        training.alexnet_train(data=data, strategy=strategy, **settings, **APART[index])
        refused = None
    except AlexnetError as error:
        refused = str(error)
    steps = Steps()
    history = training.alexnet_train(data=data, strategy=strategy, callbacks=[steps], **settings)
    (root / f"result-{index}.json").write_text(json.dumps({
        "refused": refused, "steps": steps.logs, "metrics": history["metrics"], "tensorflow": said.messages}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))


@pytest.mark.parametrize(("sizes", "worker_batch", "said"), [
    ([1000, 1100, 1300], 100, "leaves out 11.8%"),  # 10 steps: 400 of 3,400 images left out
    ([1000, 1010], 100, None),  # 10 of 2,010: 0.5%
    ([1000, 1000, 1060], 100, None),  # 60 of 3,060: 1.96%, under 2%
    ([1000, 1000, 1070], 100, "leaves out 2.3%"),  # 70 of 3,070
    ([950, 1000], 100, "leaves out 7.7%"),  # 9 steps: 50 + 100 of 1,950, the smallest partition's last images too
])
def test_an_epoch_that_leaves_out_more_than_2_percent_of_the_images_says_it(sizes, worker_batch, said, caplog):
    steps = agreement.partition_steps({"partition_sizes": sizes}, worker_batch)
    text = agreement.left_out_text(sizes, steps, worker_batch)
    assert (text is not None) == (said is not None)
    if said:
        assert said in text and f"smallest partition ({min(sizes)} images)" in text
        assert "different images are left out each time" in text and "fewer workers" in text
