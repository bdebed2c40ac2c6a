"""The measurement a multi-worker run takes before its first step (:func:`alexnet.train.levers.probe_communication`):
what the chief's line says of it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace

import pytest

tf = pytest.importorskip("tensorflow")

from alexnet.train.communication import Communication  # noqa: E402
from alexnet.train.strategy import Topology  # noqa: E402

CHIEF = Topology("multi_worker", 2, 2, 0, True, 1, False)


@pytest.mark.parametrize(("wire", "seconds", "said"), [
    # float32 asked, 16 bits timed faster: the step with packs travels in 16 bits, and its hidden seconds are of them
    ("float32", {"float32": 2.0, "bfloat16": 1.2},
     r"in float32, 2\.000 s alone \(bfloat16: 1\.200 s alone\); compute \d+\.\d{3} s a step; packs hide "
     r"(\d+\.\d{3}) s of the bfloat16 exchange\."),
    # 16 bits timed no faster: the step with packs stays in float32
    ("float32", {"float32": 1.0, "bfloat16": 1.0},
     r"in float32, 1\.000 s alone \(bfloat16: 1\.000 s alone\); compute \d+\.\d{3} s a step; packs hide "
     r"(\d+\.\d{3}) s of the float32 exchange\."),
    # 16 bits asked: nothing else timed
    ("bfloat16", {"bfloat16": 1.2},
     r"in bfloat16, 1\.200 s alone; compute \d+\.\d{3} s a step; packs hide (\d+\.\d{3}) s of the bfloat16 "
     r"exchange\."),
])
def test_the_chiefs_line_names_the_wire_format_of_each_figure_it_timed(wire, seconds, said, monkeypatch, caplog):
    """The chief's line of what the probe timed (one worker's strategy standing in for two: each exchange is
    said to take ``seconds``, by format)."""
    from alexnet.model.network import build_alexnet
    from alexnet.train import communication, levers

    monkeypatch.setattr(communication, "time_all_reduce", lambda strategy, shapes, sent, options, repeats=3:
                        seconds[sent])
    monkeypatch.setattr(levers, "overlaps", lambda topology: True)  # packs overlap: the step with them is timed
    caplog.set_level(logging.INFO, logger="alexnet.train.levers")
    net = build_alexnet(4, dense_units=32)
    asked = replace(Communication(workers=2), wire=wire)
    timing = levers.probe_communication(tf.distribute.get_strategy(), net, asked, CHIEF, batch=1, image_size=64)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Communication: ")]
    assert len(lines) == 1, lines
    found = re.fullmatch(r"Communication: (\d+\.\d) MB a step " + said, lines[0])
    assert found, lines[0]
    assert float(found.group(1)) == pytest.approx(timing["bytes_per_step"] / 1e6, abs=0.05)
    assert float(found.group(2)) == pytest.approx(timing["hidden_seconds"], abs=5e-4)
