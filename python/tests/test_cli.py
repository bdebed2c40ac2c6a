import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from alexnet.cli import build_parser, main


def test_help_lists_only_the_commands_that_exist():
    help_text = build_parser().format_help()
    for command in ("synth", "upload", "categories", "fetch", "train"):
        assert command in help_text


def test_synth_writes_the_kaggle_layout_and_reports_json(tmp_path, capsys):
    dest = tmp_path / "imagenet"
    code = main(["synth", str(dest), "--classes", "2", "--images-per-class", "3", "--val-per-class", "1",
                 "--max-side", "32", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["images"] == 6
    assert result["val_images"] == 2
    train = dest / "ILSVRC" / "Data" / "CLS-LOC" / "train"
    assert sorted(p.name for p in train.iterdir()) == sorted(result["categories"])
    assert (dest / "LOC_val_solution.csv").exists()


def test_bad_arguments_exit_with_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["synth", "/tmp/x", "--classes", "0"])
    assert exit_info.value.code == 2
    assert "must be a whole number >= 1" in capsys.readouterr().err


def test_errors_of_the_core_are_one_line_without_traceback(tmp_path):
    missing = tmp_path / "no-such-imagenet"
    proc = subprocess.run([sys.executable, "-m", "alexnet.cli", "upload", str(missing), "--board", str(tmp_path / "b")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "alexnet upload: error:" in proc.stderr
    assert str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "alexnet"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("alexnet ")


def test_upload_then_categories_summaries(tmp_path, capsys):
    dest = tmp_path / "imagenet"
    assert main(["synth", str(dest), "--classes", "2", "--images-per-class", "3", "--val-per-class", "1",
                 "--max-side", "32", "--quirks"]) == 0
    board = tmp_path / "board"
    capsys.readouterr()
    assert main(["upload", str(dest), "--board", str(board), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 categories uploaded, 0 already there" in out
    assert "2 image(s) left out" in out
    assert main(["upload", str(dest), "--board", str(board)]) == 0
    assert "0 categories uploaded, 2 already there" in capsys.readouterr().out
    assert main(["categories", "--board", str(board), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["index"] for r in rows] == [0, 1]
    assert main(["fetch", "--partition", "1", "--total", "2", "--board", str(board),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "Partition 1 of 2:" in capsys.readouterr().out


def help_of(command: str, capsys) -> str:
    """What ``alexnet <command> --help`` prints."""
    with pytest.raises(SystemExit) as exit:
        main([command, "--help"])
    assert exit.value.code == 0
    return capsys.readouterr().out


def test_help_shows_the_core_defaults(capsys):
    import inspect

    import alexnet

    assert f"(default: {inspect.signature(alexnet.imagenet_partition).parameters['total'].default})" in help_of(
        "fetch", capsys)
    assert f"(default: {inspect.signature(alexnet.alexnet_train).parameters['verbose'].default})" in help_of(
        "train", capsys)


def test_options_left_out_are_not_passed_so_the_core_defaults_apply(monkeypatch):
    from alexnet import cli

    seen = {}
    monkeypatch.setattr(cli, "core", lambda command: lambda *a, **k: seen.update(k) or {
        "partition": 0, "total": 16, "image": [], "categories": [], "cache_dir": ""})
    assert main(["fetch", "--board", "/b"]) == 0
    assert seen == {"board": "/b"}, "only what was given reaches the core"


def test_train_passes_the_model_pin_and_logging_flags_and_prints_no_missing_model(monkeypatch, capsys):
    from alexnet import cli

    seen: dict = {}
    history = {"metrics": {"loss": [1.5, 1.2]}, "model_path": None, "model_pin": None}

    def core(command):
        if command == "fetch":
            return lambda **k: {"image": [], "board": "/b"}
        return lambda **k: seen.update(k) or history

    monkeypatch.setattr(cli, "core", core)
    assert main(["train", "--model-pin", "alexnet", "--model-board", "/m", "--log-dir", "/l", "--log-every", "5",
                 "--profile-steps", "2", "4"]) == 0
    assert {k: seen[k] for k in ("model_pin", "model_board", "log_dir", "log_every", "profile_steps")} == {
        "model_pin": "alexnet", "model_board": "/m", "log_dir": "/l", "log_every": 5, "profile_steps": [2, 4]}
    out = capsys.readouterr().out
    assert "Trained 2 epoch(s)" in out and "Model" not in out
    history.update(model_path="/m/alexnet.keras", model_pin={"board": "/m", "name": "alexnet", "version": "v1"})
    assert main(["train"]) == 0
    out = capsys.readouterr().out
    assert "Model: /m/alexnet.keras" in out and "Model pin: alexnet version v1 on /m" in out
    with pytest.raises(SystemExit):
        main(["train", "--profile-steps", "2"])


def _cli(*args: str, progress: str = "1") -> subprocess.CompletedProcess:
    import os
    env = {**os.environ, "ALEXNET_PROGRESS": progress}
    return subprocess.run([sys.executable, "-m", "alexnet.cli", *args], capture_output=True, text=True, check=True,
                          env=env)


def test_upload_shows_no_library_logs_by_default_and_no_bar_when_nothing_transfers(tmp_path):
    src, board = tmp_path / "src", str(tmp_path / "board")
    _cli("synth", str(src), "--classes", "3", "--images-per-class", "2", "--val-per-class", "1", "--max-side", "32")
    first = _cli("upload", str(src), "--board", board)
    assert "pins" not in first.stderr and "Version(" not in first.stderr, first.stderr
    assert "INFO alexnet" in first.stderr  # alexnet's own lines stay
    bar = re.compile(r"^upload: +\d+%", re.MULTILINE)
    assert bar.search(first.stderr.replace("\r", "\n"))  # the bar, while zips are written
    again = _cli("upload", str(src), "--board", board)
    assert not bar.search(again.stderr.replace("\r", "\n")), again.stderr
    assert "0 categories uploaded, 3 already there" in again.stdout
    verbose = _cli("-v", "upload", str(src), "--board", board)
    assert "INFO pins." in verbose.stderr


def test_configure_logging_levels():
    import logging

    from alexnet.cli import configure_logging

    root, own = logging.getLogger(), logging.getLogger("alexnet")
    before = root.level, own.level
    try:
        configure_logging()
        assert (root.level, own.level) == (logging.WARNING, logging.INFO)
        configure_logging(verbose=1)
        assert (root.level, own.level) == (logging.INFO, logging.DEBUG)
        configure_logging(verbose=2)
        assert root.level == logging.DEBUG
        configure_logging(quiet=True)
        assert (root.level, own.level) == (logging.WARNING, logging.WARNING)
    finally:
        root.setLevel(before[0])
        own.setLevel(before[1])
