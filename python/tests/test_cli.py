import argparse
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_cli import fake_core, interrupted

from alexnet import __version__
from alexnet.cli import build_parser, main
from alexnet.errors import AlexnetError


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("module", ["alexnet", "alexnet.cli"])
def test_python_dash_m_runs_the_command_line(module):
    shown = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout.strip() == f"alexnet {__version__}", shown.stderr


def test_help_lists_only_the_commands_that_exist(capsys):
    """``alexnet --help`` lists exactly the parser's commands, each of which has a handler and its own help."""
    shown = subprocess.run([sys.executable, "-m", "alexnet.cli", "--help"], capture_output=True, text=True,
                           timeout=60, check=True, env={**os.environ, "COLUMNS": "100"}).stdout
    # the list under COMMAND: a command at four spaces, its help after it or on lines indented further
    section = shown.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    listed = [match[1] for match in re.finditer(r"^    (\S+)", section, re.M)]
    commands = _subcommands(build_parser())
    assert sorted(listed) == sorted(commands), "alexnet --help lists other commands than the parser has"
    assert len(listed) == len(set(listed))
    assert {"synth", "upload", "categories", "fetch", "validation", "train", "spark-train", "spark-evaluate",
            "evaluate", "predict", "features", "filters", "export", "bench"} <= set(listed)
    for command, sub in commands.items():
        run = sub.get_default("run")
        assert callable(run) and run.__module__.startswith("alexnet.cli."), f"alexnet {command} has no handler"
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0, command
        assert capsys.readouterr().out.startswith(f"usage: alexnet {command} "), command


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


def test_bad_arguments_exit_with_a_usage_error(capsys, tmp_path):
    # a value of the wrong kind is the parser's to refuse; one out of range, the declaration's check of the setting,
    # naming the option typed
    with pytest.raises(SystemExit) as exit_info:
        main(["synth", str(tmp_path / "x"), "--classes", "two"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid int value: 'two'" in err
    assert len(err.strip().splitlines()) == 1 and err.rstrip().endswith("(see alexnet synth --help)")  # no usage
    with pytest.raises(SystemExit):
        main(["spark-train", "--workers", "two"])
    assert "alexnet spark-train: error: argument --workers: must be a whole number >= 1, not 'two'" in \
        capsys.readouterr().err
    assert main(["synth", str(tmp_path / "x"), "--classes", "0"]) == 2
    assert "alexnet synth: error: `--classes` must be a whole number >= 1, not 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # refused before anything is written
    # which partition is declared (alexnet.data.options.PartitionOptions): refused as every declared option is
    for command in ("fetch", "train"):
        assert main([command, "--board", str(tmp_path / "board"), "--total", "0"]) == 2
        assert f"alexnet {command}: error: `--total` must be a whole number >= 1, not 0" in capsys.readouterr().err
    assert not (tmp_path / "board").exists()


def test_errors_of_the_core_are_one_line_without_traceback(tmp_path):
    missing = tmp_path / "no-such-imagenet"
    proc = subprocess.run([sys.executable, "-m", "alexnet.cli", "upload", str(missing), "--board", str(tmp_path / "b")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "alexnet upload: error:" in proc.stderr
    assert str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ctrl_c_ends_a_command_with_one_line_and_exit_code_130(tmp_path):
    dest = tmp_path / "imagenet"
    code, err = interrupted(["synth", str(dest), "--classes", "1000", "--images-per-class", "50"],
                            lambda: (dest / "ILSVRC").exists())
    assert code == 130
    assert "alexnet synth: interrupted\n" in err and "Traceback" not in err  # a rerun starts over: nothing more


def test_upload_takes_a_scratch_folder(tmp_path):
    src, scratch = tmp_path / "src", tmp_path / "scratch"
    _cli("synth", str(src), "--classes", "2", "--images-per-class", "2", "--val-per-class", "1", "--max-side", "32")
    done = _cli("upload", str(src), "--board", str(tmp_path / "board"), "--scratch", str(scratch))
    assert "2 categories (2 uploaded, 0 already there)" in done.stdout
    assert scratch.is_dir() and list(scratch.iterdir()) == []
    proc = subprocess.run([sys.executable, "-m", "alexnet.cli", "upload", str(src), "--board", str(tmp_path / "b"),
                           "--scratch", "s3://bucket/tmp"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    # named as the option typed, not as the core's `scratch`
    assert "`--scratch` 's3://bucket/tmp' is not a local folder" in proc.stderr


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "alexnet"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("alexnet ")


def test_upload_then_categories_summaries(tmp_path, capsys, caplog):
    dest = tmp_path / "imagenet"
    assert main(["synth", str(dest), "--classes", "2", "--images-per-class", "3", "--val-per-class", "1",
                 "--max-side", "32", "--quirks"]) == 0
    board = tmp_path / "board"
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        assert main(["upload", str(dest), "--board", str(board), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    # 3 images a category and the odd files: 2 of them (the empty and the truncated one) left out
    assert "2 categories (2 uploaded, 0 already there), 9 training images and 2 validation images" in out
    assert "2 bad images left out:" in out
    assert not [r for r in caplog.records if r.levelno == logging.WARNING and "bad image" in r.getMessage()], \
        "the summary lists them: the warning that names them too is left out"
    written = re.search(r"^Wrote (\d+\.\d) kB in ", out, re.MULTILINE)
    assert written and float(written.group(1)) > 1, out
    assert main(["upload", str(dest), "--board", str(board)]) == 0
    again = capsys.readouterr().out
    assert "2 categories (0 uploaded, 2 already there), 9 training images and 2 validation images" in again
    assert re.search(r"^Wrote 0 bytes in ", again, re.MULTILINE), again  # nothing transferred the second time
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="alexnet.data.upload"):
        assert main(["upload", str(dest), "--board", str(tmp_path / "listed"), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["bad_images"]) == 2
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.levelno == logging.WARNING] == [
        "2 bad images left out (all in the result's bad_images and the board's bad_images pin)"], \
        "with --json no summary lists them: the warning does"
    assert main(["categories", "--board", str(board), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["index"] for r in rows] == [0, 1]
    assert main(["fetch", "--partition", "1", "--total", "2", "--board", str(board),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    assert re.search(r"Partition 1 of 2 \(0-based\): 1 category of 2, \d+ training images and 1 validation image\n"
                     r"From board .*, cache .*\n",
                     capsys.readouterr().out)
    # imagenet_partition(validation = FALSE): the training images alone
    assert main(["fetch", "--total", "2", "--board", str(board), "--cache-dir", str(tmp_path / "cache"),
                 "--no-validation", "--json"]) == 0
    fetched = json.loads(capsys.readouterr().out)
    assert fetched["image"] and fetched["val_image"] == []
    # the validation images alone (imagenet_validation()): all of them, or a share, into the same cache
    assert main(["validation", "--board", str(board), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert capsys.readouterr().out == (f"All the board's validation images: 2 images of 2 categories (of 2)\n"
                                       f"From board {board}, cache {tmp_path / 'cache'}\n")
    assert main(["validation", "--partition", "1", "--total", "2", "--board", str(board), "--cache-dir",
                 str(tmp_path / "cache"), "--workers", "1", "--json"]) == 0
    share = json.loads(capsys.readouterr().out)
    assert (share["partition"], share["total"], len(share["val_image"]), "image" in share) == (1, 2, 1, False)
    assert all(Path(path).is_file() and str(tmp_path / "cache") in path for path in share["val_image"])


def test_the_upload_summary_says_validation_images_added_and_categories_left_out(tmp_path, capsys):
    import io
    import tarfile

    from alexnet.data.ilsvrc import DEVKIT, VAL_TAR

    dest = tmp_path / "archives"
    assert main(["synth", str(dest), "--classes", "3", "--images-per-class", "3", "--val-per-class", "1",
                 "--max-side", "32", "--layout", "archives"]) == 0
    aside = tmp_path / "aside"
    aside.mkdir()
    for name in (VAL_TAR, DEVKIT):
        (dest / name).rename(aside / name)
    board = tmp_path / "board"
    assert main(["upload", str(dest), "--board", str(board)]) == 0
    capsys.readouterr()
    for name in (VAL_TAR, DEVKIT):  # the validation files come later: added to the categories already there
        (aside / name).rename(dest / name)
    assert main(["upload", str(dest), "--board", str(board)]) == 0
    assert "3 categories (0 uploaded, 3 already there, validation images of 3 added), 9 training images and 3 " \
           "validation images" in capsys.readouterr().out
    assert main(["upload", str(dest), "--board", str(tmp_path / "small"), "--min-images", "4"]) == 2
    assert "no category of" in capsys.readouterr().err
    with tarfile.open(dest / "ILSVRC2012_img_train.tar") as tar:  # one category of 2 images: left out under 3
        members = {m.name: tar.extractfile(m).read() for m in tar}
    name = sorted(members)[0]
    with tarfile.open(fileobj=io.BytesIO(members[name])) as inner:
        images = [(m, inner.extractfile(m).read()) for m in inner][:2]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as inner:
        for m, data in images:
            inner.addfile(m, io.BytesIO(data))
    members[name] = out.getvalue()
    with tarfile.open(dest / "ILSVRC2012_img_train.tar", "w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert main(["upload", str(dest), "--board", str(tmp_path / "kept"), "--min-images", "3"]) == 0
    out = capsys.readouterr().out
    assert "2 categories (2 uploaded, 0 already there)" in out
    assert f"1 category left out under `--min-images`: {name[:-4]} (2)" in out


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
    # an on/off option's default in the words of every other switch's
    said = " ".join(help_of("fetch", capsys).split())
    assert "also fetch the partition's validation images (default: yes)" in said and "True" not in said


def test_quiet_draws_no_progress_bars_and_gives_the_setting_back(monkeypatch):
    from alexnet.progress import progress_enabled

    seen = []
    fake_core(monkeypatch, lambda command: lambda *a, **k: seen.append(progress_enabled()) or {
        "partition": 0, "total": 16, "image": [], "val_image": [], "categories": [], "cache_dir": ""})
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    assert main(["-q", "fetch", "--board", "/b"]) == 0
    assert main(["fetch", "--board", "/b"]) == 0
    assert seen == [False, True] and os.environ["ALEXNET_PROGRESS"] == "1"
    monkeypatch.delenv("ALEXNET_PROGRESS")
    assert main(["--quiet", "fetch", "--board", "/b"]) == 0
    assert seen[-1] is False and "ALEXNET_PROGRESS" not in os.environ


@pytest.mark.parametrize("before", [None, "1", ""], ids=["unset", "set", "empty"])
def test_quiet_gives_the_progress_setting_back_however_the_command_ends(monkeypatch, capsys, before):
    from alexnet.progress import progress_enabled

    ends = [AlexnetError("`board` /b holds nothing"), KeyboardInterrupt(), RuntimeError("a bug")]
    seen = []

    def fail(*args, **kwargs):
        seen.append(progress_enabled())
        raise ends[len(seen) - 1]

    fake_core(monkeypatch, lambda command: fail)
    if before is None:
        monkeypatch.delenv("ALEXNET_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("ALEXNET_PROGRESS", before)
    assert main(["-q", "fetch", "--board", "/b"]) == 2
    assert os.environ.get("ALEXNET_PROGRESS") == before, "after an error"
    assert main(["-q", "fetch", "--board", "/b"]) == 130
    assert os.environ.get("ALEXNET_PROGRESS") == before, "after Ctrl-C"
    with pytest.raises(RuntimeError, match="a bug"):
        main(["-q", "fetch", "--board", "/b"])
    assert os.environ.get("ALEXNET_PROGRESS") == before, "after an error the command does not catch"
    assert seen == [False, False, False], "no bars while it ran"


def test_quiet_and_verbose_may_follow_the_command(monkeypatch):
    from alexnet.progress import progress_enabled

    seen = []
    fake_core(monkeypatch, lambda command: lambda *a, **k: seen.append(
        (progress_enabled(), logging.getLogger("alexnet").level)) or {
        "partition": 0, "total": 16, "image": [], "val_image": [], "categories": [], "cache_dir": ""})
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    assert main(["fetch", "--board", "/b", "-q"]) == 0
    assert main(["fetch", "--board", "/b", "--verbose"]) == 0
    assert main(["fetch", "--board", "/b"]) == 0
    assert seen == [(False, logging.WARNING), (True, logging.DEBUG), (True, logging.INFO)]


def test_quiet_and_verbose_together_are_refused_by_argparse_on_every_command(monkeypatch, capsys):
    seen = []
    fake_core(monkeypatch, lambda command: lambda *a, **k: seen.append(command))
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command, sub in commands.items():
        needed = [word for action in sub._actions if action.required for word in [*action.option_strings[:1], "1"]]
        for words in ([command, "-q", "-v"], ["-q", "-v", command], ["-q", command, *needed, "--verbose"],
                      ["-vv", command, *needed, "-q"]):
            with pytest.raises(SystemExit) as stopped:
                main(words)
            assert stopped.value.code == 2, words
            later, earlier = ("-q/--quiet", "-v/--verbose") if words[-1] == "-q" else ("-v/--verbose", "-q/--quiet")
            prog = "alexnet" if words[2] == command else f"alexnet {command}"
            assert capsys.readouterr().err == (f"{prog}: error: argument {later}: not allowed with argument "
                                               f"{earlier} (see {prog} --help)\n"), words
    assert seen == []
    # either alone, on either side, is the program's choice; typed after the command, it is the one taken
    parser = build_parser()
    for words, verbose, quiet in ((["-q", "fetch"], 0, True), (["fetch", "-q"], 0, True), (["fetch", "-vv"], 2, False),
                                  (["-vv", "fetch", "-v"], 1, False), (["-q", "fetch", "-q"], 0, True)):
        args = parser.parse_args(words)
        assert (args.verbose, args.quiet) == (verbose, quiet), words
        assert not {"command_verbose", "command_quiet"} & set(vars(args)), words


def test_an_option_no_command_takes_is_refused_by_that_command_with_the_nearest(capsys):
    for words, said in (
        (["train", "--board", "/b", "--epocs", "2"],
         "alexnet train: error: unrecognized arguments: --epocs 2 (--epocs: did you mean --epochs?) "
         "(see alexnet train --help)"),
        (["categories", "--boar", "/b"], "alexnet categories: error: unrecognized arguments: --boar /b (--boar: did "
                                         "you mean --board?) (see alexnet categories --help)"),
        (["fetch", "--board", "/b", "stray"], "alexnet fetch: error: unrecognized arguments: stray (see alexnet "
                                              "fetch --help)"),
        # no abbreviation is taken for the option it begins: `--epoch` is not `--epochs`
        (["train", "--board", "/b", "--epoch", "2"], "alexnet train: error: unrecognized arguments: --epoch 2 "
                                                     "(--epoch: did you mean --epochs?)"),
        # an option a longer one begins with, too far from it for a misspelling
        (["synth", "/d", "--images", "6"], "alexnet synth: error: unrecognized arguments: --images 6 (--images: did "
                                           "you mean --images-per-class?)"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(words)
        assert exit_info.value.code == 2
        assert said in capsys.readouterr().err


def test_options_left_out_are_not_passed_so_the_core_defaults_apply(monkeypatch):

    seen = {}
    fake_core(monkeypatch, lambda command: lambda *a, **k: seen.update(k) or {
        "partition": 0, "total": 16, "image": [], "val_image": [], "categories": [], "cache_dir": ""})
    assert main(["fetch", "--board", "/b"]) == 0
    assert seen == {"board": "/b"}, "only what was given reaches the core"
    assert main(["fetch", "--board", "/b", "--no-validation"]) == 0
    assert seen == {"board": "/b", "validation": False}


def test_train_passes_the_model_pin_and_logging_flags_and_prints_no_missing_model(monkeypatch, capsys):
    history = {"metrics": {"loss": [1.5, 1.2]}, "model_path": None, "model_pin": None}
    seen = _recording_core(monkeypatch, history)
    assert main(["train", "--model-pin", "alexnet", "--model-board", "/m", "--model-format", "keras+savedmodel",
                 "--log-dir", "/l", "--log-every", "5", "--profile-steps", "2", "4"]) == 0
    names = ("model_pin", "model_board", "model_format", "log_dir", "log_every", "profile_steps")
    assert {k: seen[k] for k in names} == {"model_pin": "alexnet", "model_board": "/m",
                                           "model_format": "keras+savedmodel", "log_dir": "/l", "log_every": 5,
                                           "profile_steps": [2, 4]}
    out = capsys.readouterr().out
    assert "Final epoch: loss = 1.2" in out and "Model" not in out
    history.update(model_path="/m/alexnet.keras", model_pin={"board": "/m", "name": "alexnet", "version": "v1"})
    assert main(["train"]) == 0
    out = capsys.readouterr().out
    assert "Model: /m/alexnet.keras" in out and "Model pin: alexnet version v1 on /m" in out
    with pytest.raises(SystemExit):
        main(["train", "--profile-steps", "2"])


def test_train_on_one_machine_says_when_the_default_total_leaves_most_categories_out(monkeypatch, caplog):
    from alexnet.train import api

    fetched: dict = {}
    partition = {"partition": 0, "total": 16, "categories": ["n1", "n2"], "num_classes": 17, "image": ["a"] * 32}
    fake_core(monkeypatch, lambda command: lambda **k: fetched.update(k) or {**partition, "total": k.get("total", 16)})
    monkeypatch.setattr(api, "train", lambda settings, data, strategy=None: {"metrics": {}, "model_path": None,
                                                                             "model_pin": None})
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        assert main(["train", "--board", "/b"]) == 0
    said = ("alexnet train trains on partition 0 of 16 (the default --total): 2 of the board's 17 categories, "
            "32 training images; give --total 1 to train on every category on this machine.")
    assert said in caplog.text
    for words, env in ((["--total", "16"], None), (["--total", "1"], None), ([], '{"cluster": {}}')):
        caplog.clear()
        if env:
            monkeypatch.setenv("TF_CONFIG", env)
        with caplog.at_level(logging.WARNING, logger="alexnet"):
            assert main(["train", "--board", "/b", *words]) == 0
        assert "the default --total" not in caplog.text, words


class MultiWorkerMirroredStrategy:
    """Stands in for a multi-worker strategy built before TF_CONFIG was set: one worker, as TensorFlow records it."""

    extended = SimpleNamespace(_num_workers=1)


@pytest.mark.parametrize(("tf_config", "workers"), [
    (" \n", 0),
    (json.dumps({"cluster": {"worker": "127.0.0.1:8001"}, "task": {"type": "worker", "index": 0}}), 1),
    ("\n " + json.dumps({"cluster": {"worker": ["10.0.0.1:8000", "10.0.0.2:8001"]},
                         "task": {"type": "worker", "index": 0}}) + " \n", 2),
], ids=["blank", "one-worker-written-bare", "spaces-around"])
def test_every_reader_of_tf_config_sees_the_same_cluster(monkeypatch, caplog, tf_config, workers):
    """A blank TF_CONFIG was a cluster to `alexnet train` (no word of the default --total) and none to training, and
    one worker written bare (R's jsonlite) counted as many workers as its address has characters in the check of a
    strategy object; every reader now takes what read_tf_config() does."""
    from alexnet.train import api, strategy
    from alexnet.train.cluster import read_tf_config

    monkeypatch.setenv("TF_CONFIG", tf_config)
    if workers > 1:
        with pytest.raises(AlexnetError, match=f"sees no cluster, but TF_CONFIG names {workers} workers"):
            strategy.check_strategy_object(MultiWorkerMirroredStrategy())
    else:
        strategy.check_strategy_object(MultiWorkerMirroredStrategy())
    monkeypatch.setenv("TF_CONFIG", tf_config)
    partition = {"partition": 0, "total": 16, "categories": ["n1", "n2"], "num_classes": 17, "image": ["a"] * 32}
    fake_core(monkeypatch, lambda command: lambda **k: partition)
    monkeypatch.setattr(api, "train", lambda settings, data, strategy=None: {"metrics": {}, "model_path": None,
                                                                             "model_pin": None})
    with caplog.at_level(logging.WARNING, logger="alexnet"):
        assert main(["train", "--board", "/b"]) == 0
    assert ("the default --total" in caplog.text) is (workers == 0), "a cluster trains on its share, one machine not"
    monkeypatch.setenv("TF_CONFIG", tf_config)
    if workers:
        assert len(read_tf_config()["cluster"]["worker"]) == workers
    else:
        with pytest.raises(AlexnetError, match="needs the TF_CONFIG environment variable"):
            read_tf_config()


def test_a_multi_worker_train_says_a_port_taken_before_it_fetches(monkeypatch, capsys):
    import socket

    from alexnet.bench.cluster import free_base_port
    from alexnet.train.cluster import tf_config_json

    seen = _recording_core(monkeypatch)
    base = free_base_port(2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("", base))
        other.listen()
        monkeypatch.setenv("TF_CONFIG", tf_config_json(["127.0.0.1", "127.0.0.1"], 0, base))
        assert main(["train", "--board", "/b", "--strategy", "multi_worker"]) == 2
    assert f"Port {base} on this host" in capsys.readouterr().err
    assert seen["fetched"] == 0, "refused before the partition was fetched"


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
    assert "3 categories (0 uploaded, 3 already there)" in again.stdout
    verbose = _cli("-v", "upload", str(src), "--board", board)
    assert "INFO pins." in verbose.stderr


def test_sizes_are_said_in_powers_of_1000_as_r_says_them():
    from alexnet.cli.common import size_text

    assert [size_text(n) for n in (0, 999, 1000, 15_972, 4_700_000, 2.5e9, 3e15)] == [
        "0 bytes", "999 bytes", "1.0 kB", "16.0 kB", "4.7 MB", "2.5 GB", "3000.0 TB"]


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


def test_verbose_lines_say_their_time_and_the_default_ones_do_not(tmp_path):
    """With -v each log line starts with its time (where a command's seconds go); without, as before."""
    env = {**os.environ, "ALEXNET_PROGRESS": "0"}
    lines = {}
    for flags in ([], ["-v"]):
        done = subprocess.run([sys.executable, "-m", "alexnet", *flags, "synth", "--classes", "1", "--images-per-class",
                               "2", "--val-per-class", "0", "--max-side", "64", str(tmp_path / f"s{len(flags)}")],
                              capture_output=True, text=True, timeout=120, check=True, env=env)
        lines[len(flags)] = [line for line in done.stderr.splitlines() if "alexnet.data.synthetic:" in line]
    assert lines[0] and lines[0][0].startswith("INFO alexnet.data.synthetic: synthetic ImageNet"), lines
    assert ": 1 category, 2 training" in lines[0][0]
    assert lines[1] and re.match(r"\d\d:\d\d:\d\d\.\d{3} DEBUG|\d\d:\d\d:\d\d\.\d{3} INFO", lines[1][0]), lines


def _recording_core(monkeypatch, history: dict | None = None) -> dict:
    """The core replaced: fetch returns an empty partition, training records the checked settings it was given and
    the strategy (``seen``) and returns ``history``."""
    from alexnet.train import api

    seen: dict = {"fetched": 0}
    result = history or {"metrics": {"loss": [1.0]}, "params": {}, "model_path": None, "model_pin": None}

    def core(command):
        if command == "fetch":
            return lambda **k: seen.update(fetched=seen["fetched"] + 1) or {"image": [], "board": "/b"}
        return lambda *a, **k: seen.update(k) or result

    def train(settings, data, strategy=None):
        seen.update(settings.to_dict(), strategy=strategy, trained=True)
        return result

    fake_core(monkeypatch, core)
    monkeypatch.setattr(api, "train", train)
    return seen


@pytest.mark.parametrize(("words", "sizes"), [
    (["--image-size", "128", "160", "224"], [128, 160, 224]),
    (["--image-size", "128,160,224"], [128, 160, 224]),
    (["--image-size", "128,160", "224"], [128, 160, 224]),
    (["--image-size", "96"], [96]),
])
def test_train_takes_one_image_size_or_several_in_order(monkeypatch, words, sizes):
    seen = _recording_core(monkeypatch)
    assert main(["train", "--epochs", "3", *words]) == 0
    assert seen["image_size"] == sizes
    assert seen["image_size_epochs"] is None, "left out: the default (split evenly)"


@pytest.mark.parametrize("typed", ["mirrored", "Mirrored", "MIRRORED"])
def test_train_takes_a_strategy_written_as_the_core_takes_it(monkeypatch, typed):
    """The command line refused the spellings the core takes (any case, - for _)."""
    seen = _recording_core(monkeypatch)
    assert main(["train", "--strategy", typed]) == 0
    assert seen["strategy"] == "mirrored"
    seen = _recording_core(monkeypatch)
    assert main(["train", "--strategy", "Multi-Worker"]) == 0
    assert seen["strategy"] == "multi_worker"


def test_train_refuses_a_strategy_it_does_not_know_among_its_choices(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["train", "--strategy", "parameter_server"])
    assert stopped.value.code == 2
    assert "argument --strategy: invalid choice: 'parameter_server' (choose from 'default', 'mirrored', " \
           "'multi_worker')" in capsys.readouterr().err


def test_train_passes_the_schedule_precision_and_rate_options(monkeypatch):
    seen = _recording_core(monkeypatch)
    assert main(["train", "--epochs", "5", "--image-size", "64", "96", "--image-size-epochs", "2,3",
                 "--precision", "bfloat16", "--lr-scaling", "none", "--learning-rate", "0.02"]) == 0
    assert {k: seen[k] for k in ("image_size", "image_size_epochs", "precision", "lr_scaling", "learning_rate")} == {
        "image_size": [64, 96], "image_size_epochs": [2, 3], "precision": "bfloat16", "lr_scaling": "none",
        "learning_rate": 0.02}
    assert seen["warmup_epochs"] is None
    seen = _recording_core(monkeypatch)
    assert main(["train", "--warmup-epochs", "0", "--precision", "auto", "--lr-scaling", "linear"]) == 0
    assert seen["warmup_epochs"] == 0 and seen["lr_scaling"] == "linear"
    assert seen["precision"] is None, "auto is the core's default (None)"


def test_spark_train_parses_the_same_options():
    from alexnet.cli.train import training_args

    args = build_parser().parse_args(["spark-train", "--workers", "2", "--image-size", "64,80", "96",
                                      "--image-size-epochs", "1", "1", "2", "--precision", "float16",
                                      "--warmup-epochs", "2", "--lr-scaling", "linear", "--learning-rate", "0.05"])
    assert training_args(args) == {"image_size": [64, 80, 96], "image_size_epochs": [1, 1, 2],
                                     "precision": "float16", "warmup_epochs": 2, "lr_scaling": "linear",
                                     "learning_rate": 0.05}


@pytest.mark.parametrize(("words", "message"), [
    (["--image-size", "32"], "`--image-size` must be whole numbers >= 63, not 32 in [32]"),
    (["--image-size", "128,48"], "`--image-size` must be whole numbers >= 63, not 48 in [128, 48]"),
    (["--image-size-epochs", "0"], "`--image-size-epochs` must be whole numbers >= 1, not 0 in [0]"),
    (["--precision", "float64"],
     "`--precision` must be one of 'float32', 'bfloat16', 'float16' or 'auto', not 'float64'"),
    (["--lr-scaling", "cubic"], "`--lr-scaling` must be one of 'linear', 'none', not 'cubic'"),
    (["--warmup-epochs", "-1"], "`--warmup-epochs` must be a whole number >= 0, not -1"),
])
def test_bad_training_values_are_refused_naming_the_option_before_any_fetch(monkeypatch, capsys, words, message):
    seen = _recording_core(monkeypatch)
    assert main(["train", *words]) == 2
    assert f"alexnet train: error: {message}" in capsys.readouterr().err
    assert seen["fetched"] == 0 and "trained" not in seen


@pytest.mark.parametrize(("words", "message"), [
    (["--image-size", "128,,224"], "must be whole numbers separated by spaces or commas"),
    (["--learning-rate", "fast"], "--learning-rate: invalid float value"),
])
def test_words_that_are_not_values_are_usage_errors(monkeypatch, capsys, words, message):
    seen = _recording_core(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *words])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert seen["fetched"] == 0


@pytest.mark.parametrize(("command", "words", "message"), [
    ("train", ["--epochs", "3", "--image-size", "64", "96", "--image-size-epochs", "1", "1"],
     "`--image-size-epochs` [1, 1] does not fit"),
    ("train", ["--epochs", "1", "--image-size", "64,96"], "`--image-size` has 2 sizes but `--epochs` is 1"),
    ("train", ["--image-size-epochs", "1", "1"], "per size of `--image-size` (1) adding up to `--epochs` (2)"),
    ("spark-train", ["--workers", "1", "--image-size", "64", "80", "96"],
     "`--image-size` has 3 sizes but `--epochs` is 2"),
])
def test_a_size_schedule_that_does_not_fit_the_epochs_fails_before_any_fetch_or_job(monkeypatch, capsys, command,
                                                                                    words, message):
    seen = _recording_core(monkeypatch)
    if command == "spark-train":
        pytest.importorskip("pyspark")
        from alexnet.launch import session as spark

        def no_session(*args, **kwargs):
            raise AssertionError("a Spark session was started")

        monkeypatch.setattr(spark, "spark_session", no_session)
    assert main([command, *words]) == 2
    err = capsys.readouterr().err
    assert f"alexnet {command}: error: " in err and message in err, err
    assert seen["fetched"] == 0 and "trained" not in seen


def test_the_fit_verbosity_setting_is_not_the_logging_option(monkeypatch):
    from alexnet.cli.train import training_args

    args = build_parser().parse_args(["-v", "train", "--verbose-fit", "2"])
    assert args.verbose == 1 and training_args(args) == {"verbose": 2}
    seen = _recording_core(monkeypatch)
    assert main(["-q", "train", "--verbose-fit", "0"]) == 0
    assert seen["verbose"] == 0
    seen.pop("verbose")
    assert main(["-q", "train"]) == 0
    assert seen["verbose"] == 0, "-q: no Keras bar nor its lines of each epoch"
    assert main(["-q", "train", "--verbose-fit=2"]) == 0
    assert seen["verbose"] == 2, "unless asked for"
    assert main(["-vv", "train"]) == 0
    assert seen["verbose"] == 1, "-vv is logging, not Keras' verbosity (its default stays)"


def test_train_summary_shows_the_schedule_apart_from_the_metrics(monkeypatch, capsys):
    from alexnet.train.schedule import describe

    schedule = {"epoch": [0, 1, 2, 3, 4], "image_size": [64, 64, 96, 96, 96],
                "learning_rate": [0.01, 0.02, 0.03, 0.04, 0.004]}
    schedule["summary"] = describe(schedule, "float32", "auto: CPU without bfloat16 instructions")
    history = {"metrics": {"loss": [1.5, 1.2, 1.1, 1.0, 0.9]}, "schedule": schedule,
               "params": {"precision": "float32", "precision_reason": "auto: CPU without bfloat16 instructions"},
               "model_path": None, "model_pin": None}
    _recording_core(monkeypatch, history)
    assert main(["train"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "AlexNet training history: 5 epochs"
    assert lines[2] == "Final epoch: loss = 0.9", "the schedule is not among the metrics"
    assert lines[1] == ("Schedule: image size 64 -> 96, learning rate 0.01 -> 0.04 -> 0.004, precision float32 "
                        "(auto: CPU without bfloat16 instructions)")
    assert len(lines) == 3, "one worker: nothing said of communication"
    # several workers: what the exchange costs against the computation, and the settings that would send less
    advice = "One exchange alone takes 0.87 s a step against 0.68 s."
    history["params"]["communication_advice"] = advice
    _recording_core(monkeypatch, history)
    assert main(["train"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [f"Communication: {advice}", "Final epoch: loss = 0.9"]
    # its settings said as the options of the command run
    history["params"]["communication_advice"] = ("Settings that send less: allreduce_precision = 'bfloat16' (half the "
                                                 "bytes). Micro-batches stop at 1024 (`largest_global_batch`).")
    _recording_core(monkeypatch, history)
    assert main(["train"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "Communication: Settings that send less: --allreduce-precision 'bfloat16' (half the bytes). Micro-batches stop "
        "at 1024 (`--largest-global-batch`).")
    # and in the JSON, with the benchmark it names as its command
    history["params"]["communication_advice"] += (' Measure it: alexnet_benchmark(stages = "time_to_accuracy", '
                                                  'accuracy_levers = "sync_every=4").')
    _recording_core(monkeypatch, history)
    assert main(["train", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)["params"]["communication_advice"]
    assert said.startswith("Settings that send less: --allreduce-precision 'bfloat16'") and "alexnet_" not in said
    assert '`alexnet bench --stages "time_to_accuracy" --accuracy-levers "sync_every=4"`' in said, said


def test_settings_refused_together_are_named_as_the_options_typed(capsys, tmp_path):
    # the core's checks of several settings at once; each named as its option, an on/off one as the switch
    board = str(tmp_path / "no-board")
    assert main(["train", "--board", board, "--warmup-epochs", "2", "--lr-scaling", "none"]) == 2
    err = capsys.readouterr().err
    assert "`--warmup-epochs` warms up" in err and "use --lr-scaling 'linear', or leave out `--warmup-epochs`" in err
    assert "lr_scaling" not in err and "warmup_epochs" not in err
    assert main(["train", "--board", board, "--keep-best", "--no-validation"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("alexnet train: error: --keep-best decides") and "set --validation (" in err
    assert main(["fetch", "--board", board, "--partition", "3", "--total", "2"]) == 2
    assert "`--partition` must be in 0..1 (0-based, with --total 2), not 3" in capsys.readouterr().err
    assert not (tmp_path / "no-board").exists()


def test_a_call_of_the_core_is_said_as_the_command_that_runs_it():
    from alexnet.cli.common import COMMAND_CALLS, as_typed

    calls = build_parser().get_default(COMMAND_CALLS)
    said = as_typed("upload with imagenet_upload(..., board = '/tmp/b') first; export a model pin (alexnet_model()) or "
                    "a model_dir that alexnet_train() saved, sizes in order (c(128, 160, 224)); imagenet_classes() "
                    "lists them, data$c(1)", {"board": ("--board", False)}, calls)
    assert said == ("upload with `alexnet upload ... --board '/tmp/b'` first; export a model pin (`--model-pin NAME`) "
                    "or a model_dir that `alexnet train` saved, sizes in order (128 160 224); imagenet_classes() "
                    "lists them, data$c(1)")
    # a training reads a model pin only to start from it; a board's messages name the command that writes it
    assert as_typed("a model pin (alexnet_model()) or a model_dir", {"initial_model": ("--initial-model", False)},
                    calls) == "a model pin (`--initial-pin NAME`) or a model_dir"
    assert as_typed("no categories pin: run imagenet_upload() to this board", {}, calls) == \
        "no categories pin: run `alexnet upload` to this board"
    assert as_typed("train with alexnet_train(model_pin = 'm') to publish one", {}, calls) == \
        "train with `alexnet train --model-pin 'm'` to publish one"
    assert as_typed("as imagenet_upload(resize = ) stores them", {}, calls) == \
        "as `alexnet upload --resize` stores them", "an argument named without its value is the option alone"
    assert set(calls) == {"imagenet_synthetic", "imagenet_upload", "imagenet_categories", "imagenet_partition",
                          "imagenet_validation", "alexnet_train", "alexnet_spark_train", "alexnet_benchmark",
                          "alexnet_evaluate", "alexnet_predict", "alexnet_features", "alexnet_filters",
                          "alexnet_export", "alexnet_spark_evaluate", "alexnet_history"}


def test_a_missing_board_is_said_with_the_command_that_makes_it(capsys, tmp_path):
    board = str(tmp_path / "no-board")
    assert main(["train", "--board", board]) == 2
    err = capsys.readouterr().err
    assert f"upload with `alexnet upload ... --board {board!r}` first" in err and "imagenet_upload" not in err
    assert not (tmp_path / "no-board").exists()


def test_every_command_s_help_names_its_own_options_and_commands():
    from alexnet.cli.common import CORE, OPTION_NAMES

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    core_calls = re.compile(r"\b(?:" + "|".join(CORE.values()) + r")\(")
    checked = 0
    for command, parser in commands.items():
        text = " ".join(parser.format_help().split())
        for name, option in (parser.get_default(OPTION_NAMES) or {}).items():
            if option is not None:
                checked += 1
                assert f"`{name}`" not in text and not re.search(rf"(?<![\w-]){name} = ", text), (command, name)
        assert not core_calls.search(text), (command, core_calls.search(text))
        assert not re.search(r"`alexnet [^`]*\b[a-z_]+ =", text), (command, "a command shown with R's `name =`")
        assert not re.search(r"\bc\(", text), command
    assert checked > 100
    train = " ".join(commands["train"].format_help().split())
    assert "epochs at each size of `--image-size`, adding up to `--epochs`" in train
    assert 'with --lr-schedule "step"' in train and "also its `alexnet export` beside it" in train


def test_a_core_message_is_said_with_the_options_only_where_they_are_meant():
    from alexnet.cli.common import OPTION_NAMES, as_typed

    options = {"image_size": ("--image-size", False), "image_size_epochs": ("--image-size-epochs", False),
               "keep_best": ("--keep-best", True), "validation": ("--validation", True), "board": ("--board", False),
               "name": None}
    said = as_typed("`image_size_epochs` = [1] needs a size of `image_size` each; keep_best = TRUE needs "
                    "validation = FALSE turned on (data$image_size, x.board, f(..., board = 'b')), `name` = 'x'",
                    options)
    assert said == ("`--image-size-epochs` [1] needs a size of `--image-size` each; --keep-best needs --no-validation "
                    "turned on (data$image_size, x.board, f(..., board = 'b')), `name` = 'x'")
    # export's core names are alexnet_export()'s: `board` and `name` are the pin it publishes, not the model's own
    export = build_parser()._subparsers._group_actions[0].choices["export"]  # type: ignore[union-attr]
    known = export.get_default(OPTION_NAMES)
    assert known["name"] == ("--pin", False) and known["board"] == ("--pin-board", False)
    assert known["path"] == ("--path", False) and known["top"] == ("--top", False)
    # the model pin a command reads names its options apart, said so while it is read: evaluate's `cache_dir` is
    # --cache-dir, the pin's --model-cache
    from alexnet.cli.common import PIN_OPTION_NAMES

    evaluate = build_parser()._subparsers._group_actions[0].choices["evaluate"]  # type: ignore[union-attr]
    assert evaluate.get_default(OPTION_NAMES)["cache_dir"] == ("--cache-dir", False)
    assert evaluate.get_default(PIN_OPTION_NAMES)["cache_dir"] == ("--model-cache", False)
    # what workers say, who read the pin too (spark-evaluate), names neither: `cache_dir` is left as it is
    from alexnet.cli.common import said_as

    spark = build_parser().parse_args(["spark-evaluate", "--workers", "2"])
    assert said_as(spark)["options"]["cache_dir"] == ("--cache-dir", False)
    assert said_as(spark, workers=True)["options"]["cache_dir"] is None
    assert said_as(spark, workers=True)["options"]["fetch_workers"] == said_as(spark)["options"]["fetch_workers"]


def test_a_workers_error_names_no_option_that_could_be_the_pins_or_the_commands(monkeypatch, capsys, tmp_path):
    import alexnet
    from alexnet.child import ChildError

    def failed(*args, **kwargs):
        raise ChildError("worker 1 of 2", "AlexnetError: `cache_dir` = /m cannot hold the model", [])

    monkeypatch.setattr(alexnet, "alexnet_evaluate", failed)
    # a worker's error, found as the work ran: exit status 1
    assert main(["evaluate", str(tmp_path / "model"), "--board", str(tmp_path), "--batch-size", "4"]) == 1
    err = capsys.readouterr().err
    assert "AlexnetError: `cache_dir` = /m cannot hold the model" in err and "--cache-dir" not in err


def test_the_model_pin_read_says_its_own_options_where_the_command_has_others_of_the_same_names(
        monkeypatch, capsys, caplog, tmp_path):
    import alexnet

    def pin_read(board, **options):
        logging.getLogger("alexnet.model.pin").warning("`cache_dir` = %s is slow", options["cache_dir"])
        raise AlexnetError(f"`cache_dir` = {options['cache_dir']} cannot hold the model")

    monkeypatch.setattr(alexnet, "alexnet_model", pin_read)
    with caplog.at_level("WARNING", logger="alexnet"):
        assert main(["evaluate", "--model-pin", "m", "--board", str(tmp_path), "--model-cache", "/m",
                     "--cache-dir", "/v"]) == 2
    assert "`--model-cache` /m cannot hold the model" in capsys.readouterr().err
    assert "`--model-cache` /m is slow" in caplog.text
    from alexnet.cli import common

    assert common._READING == {}, "said so only while the pin is read"
    evaluate = build_parser()._subparsers._group_actions[0].choices["evaluate"]  # type: ignore[union-attr]
    assert common.as_typed("`cache_dir` = /v", evaluate.get_default(common.OPTION_NAMES)) == "`--cache-dir` /v"


def test_warnings_name_the_options_as_typed_as_errors_do(tmp_path, caplog, capsys):
    board = str(tmp_path / "no-board")
    with caplog.at_level("WARNING", logger="alexnet"):
        assert main(["train", "--board", board, "--patience", "3"]) == 2
    assert "`--patience` is only used with --lr-schedule 'plateau': the rate is not dropped" in caplog.text
    assert "`patience`" not in caplog.text
    assert f"upload with `alexnet upload ... --board {board!r}` first" in capsys.readouterr().err
    # and a call of the core that is no command's keeps its words
    logging.getLogger("alexnet.test").warning("`patience` is a setting")
    assert "`patience` is a setting" in caplog.text


def test_notes_name_the_options_as_typed_too():
    # a finished run's note ("give a larger `epochs`") is read on the command line as --epochs
    from alexnet.cli import _AsTyped
    from alexnet.cli.common import typed

    filter_ = _AsTyped(typed(build_parser().parse_args(["train", "--board", "b"])))
    record = logging.LogRecord("alexnet.train.run", logging.INFO, __file__, 1,
                               "%s: give a larger `epochs` to train further.", ("ckpt",), None)
    assert filter_.filter(record)
    assert record.getMessage() == "ckpt: give a larger `--epochs` to train further."
    other = logging.LogRecord("tensorflow", logging.INFO, __file__, 1, "`epochs`", (), None)
    assert filter_.filter(other) and other.getMessage() == "`epochs`"


def test_the_debug_log_is_said_as_the_commands_verbose_option():
    from alexnet.cli import _AsTyped
    from alexnet.cli.common import typed

    said = _AsTyped(typed(argparse.Namespace())).said("(Spark's whole message is logged at DEBUG level: "
                                 "logging.getLogger('alexnet').setLevel('DEBUG')).")
    assert said == "(Spark's whole message is logged at DEBUG level: run the command again with -v)."


@pytest.mark.long  # make test-long (CI)
def test_train_json_prints_the_json_alone_on_stdout_and_ctrl_c_says_a_rerun_resumes(tmp_path):
    """Keras writes its progress to stdout: with --json it goes to stderr, so that stdout is the JSON alone; Ctrl-C
    during a run with checkpoints says that the same command resumes it."""
    src, board = tmp_path / "src", str(tmp_path / "board")
    _cli("synth", str(src), "--classes", "2", "--images-per-class", "4", "--val-per-class", "1", "--max-side", "48")
    _cli("upload", str(src), "--board", board)
    tiny = ["train", "--board", board, "--cache-dir", str(tmp_path / "cache"), "--total", "1", "--epochs", "1",
            "--image-size", "64", "--dense-units", "16", "--batch-size", "4", "--json"]
    for verbosity in ("1", "2"):
        done = _cli(*tiny, "--verbose-fit", verbosity, progress="0")
        history = json.loads(done.stdout)
        assert len(history["metrics"]["loss"]) == 1, done.stdout
        assert "loss:" in done.stderr, (verbosity, done.stderr[-2000:])  # Keras' lines, on stderr
    ckpt = tmp_path / "ckpt"
    code, err = interrupted([*tiny[:-1], "--epochs", "500", "--checkpoint-dir", str(ckpt)],
                            lambda: any(ckpt.glob("*.index")), wait=120, env={"ALEXNET_PROGRESS": "0"})
    assert code == 130, err[-2000:]
    assert (f"alexnet train: interrupted; the same command run again resumes from the last checkpoint in {ckpt}"
            in err), err[-2000:]


@pytest.mark.parametrize(("words", "said"), [
    (["train"], None),  # no checkpoints: a rerun starts over
    (["upload", "/src", "--board", "/b"], "the same command run again skips the categories already uploaded"),
    (["fetch", "--board", "/b"], "the same command run again fetches only the zips not in its cache yet"),
    (["synth", "/x"], None),
])
def test_ctrl_c_says_what_the_same_command_run_again_does_where_it_carries_on(words, said):
    from alexnet.cli import rerun_note

    assert rerun_note(build_parser().parse_args(words)) == said


@pytest.mark.parametrize("command", [["train"], ["spark-train", "--workers", "2"]])
def test_ctrl_c_says_a_training_resumes_from_its_checkpoint_folder_only_once_it_holds_one(command, tmp_path):
    from alexnet.cli import rerun_note

    folder = tmp_path / "ck"
    note = lambda: rerun_note(build_parser().parse_args([*command, "--checkpoint-dir", str(folder)]))  # noqa: E731
    starts_over = f"no checkpoint was written to {folder} yet: the same command run again starts the training over"
    assert note() == starts_over, "no folder yet"
    folder.mkdir()
    (folder / "ckpt-1.index").write_bytes(b"")
    assert note() == starts_over, "a checkpoint whose data is not there yet is none"
    (folder / "ckpt-1.data-00000-of-00001").write_bytes(b"")
    assert note() == f"the same command run again resumes from the last checkpoint in {folder}"


def test_history_prints_a_run_read_back_from_its_checkpoint_folder(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "alexnet-history.json").write_text(json.dumps({
        "format": 1, "epochs_done": 2, "position": [2, 0],
        "settings": {"epochs": 2, "steps": 3, "num_classes": 4, "learnt_with": {"learning_rate": 0.01}},
        "metrics": {"loss": [1.4, 1.2], "accuracy": [0.25, 0.5], "val_loss": [1.3, 1.1], "val_accuracy": [0.3, 0.6]},
        "schedule": {"image_size": [64, 64], "learning_rate": [0.005, 0.0]}}))
    assert main(["history", str(run)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("AlexNet training history: 2 epochs\nsteps: 3, num_classes: 4\n")
    assert "Schedule: image size 64, learning rate 0.005 -> 0" in printed and "val_accuracy = 0.6" in printed
    assert "Weights" not in printed, "no model saved: no digest recorded"
    assert main(["history", "--json", str(run)]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["checkpoint_dir"] == str(run)
    assert main(["history", str(tmp_path)]) == 2
    assert "holds no alexnet-history.json" in capsys.readouterr().err
    assert main(["history", str(tmp_path / "no-such-run")]) == 2
    assert f"{tmp_path / 'no-such-run'} does not exist: give" in capsys.readouterr().err, "not a folder holding nothing"
    (tmp_path / "a-file").write_text("")
    assert main(["history", str(tmp_path / "a-file")]) == 2
    assert f"{tmp_path / 'a-file'} is a file, not a folder: give" in capsys.readouterr().err


def test_history_says_the_lines_of_the_runs_own_summary_in_the_words_of_alexnet_train(tmp_path, capsys):
    """A run of two workers, resumed: its history file keeps the params its history had (``settings``' ``params``),
    and ``alexnet history`` says its `Resumed from ...` and `Communication: ...` lines as ``alexnet train`` said them,
    the settings named as its options, in the summary and in the JSON."""
    advice = ("One exchange alone takes 2.92 s a step against 0.4 s of computation (bfloat16 on the wire). Settings "
              "that send less: accumulate_steps = 4. Micro-batches stop at 1024 (`largest_global_batch`).")
    params = {"batch_size": 8, "epochs": 2, "steps": 3, "global_batch_size": 32, "num_classes": 4,
              "strategy": "multi_worker", "replicas": 2, "workers": 2, "allreduce_precision": "bfloat16",
              "allreduce_pack_mb": 25, "accumulate_steps": 2, "sync_every": 4, "initial_epoch": 1, "initial_step": 0,
              "allreduce_seconds": 2.92, "communication_advice": advice, "adapted_settings": {}}
    run = tmp_path / "run"
    run.mkdir()
    (run / "alexnet-history.json").write_text(json.dumps({
        "format": 1, "epochs_done": 2, "position": [2, 0],
        "settings": {"epochs": 2, "steps": 3, "num_classes": 4, "learnt_with": {"sync_every": 4}, "params": params},
        "metrics": {"loss": [1.4, 1.2]}, "schedule": {"image_size": [64, 64], "learning_rate": [0.005, 0.0]},
        # the model the run saved at its end: the digest of its weights, which both workers ended with
        "saved_model": {"weights_sha256": "3f" * 32, "weights_agree": True, "position": [2, 0]}}))
    assert main(["history", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[6:] == ["Every worker holds the same weights", f"Weights: sha256 {'3f' * 32}"], \
        "as alexnet train said them"
    assert lines[:3] == ["AlexNet training history: 2 epochs, multi_worker strategy, 2 replicas",
                         "batch_size: 8, global_batch_size: 32, steps: 3, num_classes: 4",
                         f"Resumed from {run} at epoch 2, step 0."]
    assert lines[4] == ("Communication: One exchange alone takes 2.92 s a step against 0.4 s of computation "
                        "(bfloat16 on the wire). Settings that send less: --accumulate-steps 4. Micro-batches stop at "
                        "1024 (`--largest-global-batch`).")
    assert main(["history", "--json", str(run)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["weights_sha256"], printed["weights_agree"]) == ("3f" * 32, True)
    said = printed["params"]
    assert {name: said[name] for name in params if name != "communication_advice"} == \
        {name: value for name, value in params.items() if name != "communication_advice"}
    assert said["communication_advice"] == lines[4].removeprefix("Communication: ")


def test_spark_train_has_its_workers_warnings_said_with_its_options(monkeypatch, tmp_path):
    """The driver's monitor shows the workers' warnings as they come: with the options the command was typed with,
    while it runs, and as the core says them once it has ended (a Python session's job after it)."""
    import contextlib

    from alexnet.cli import cluster
    from alexnet.launch import monitor

    seen = {}

    def spark_train(session, workers, board, **kwargs):
        seen["said_as"] = monitor.SAID_AS
        return []

    monkeypatch.setattr(cluster, "_spark", lambda args, name: contextlib.nullcontext())
    fake_core(monkeypatch, lambda command: spark_train)
    assert main(["-q", "spark-train", "--workers", "2", "--board", str(tmp_path), "--batch-size", "8"]) == 0
    options = seen["said_as"]["options"]
    assert tuple(options["batch_size"]) == ("--batch-size", False) and tuple(options["keep_best"])[1] is True
    assert monitor.SAID_AS is None


FORCED_CTRL_C = """
import os, signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal
from alexnet import progress
drawn = progress._Bar.display
fired = []

def display(self, *args, **kwargs):
    frame, recording = sys._getframe(1), False
    while frame is not None:
        recording, frame = recording or frame.f_code.co_name == "_record", frame.f_back
    if recording and not fired and threading.current_thread().name != "alexnet-upload_0":
        fired.append(threading.current_thread().name)
        sys.stderr.write(f"Ctrl-C while {fired[0]} draws the bar\\n")
        os.kill(os.getpid(), signal.SIGINT)  # handled at the main thread's next bytecode: inside the drawing below
    return drawn(self, *args, **kwargs)

made = progress._Bar.__init__

def __init__(self, *args, **kwargs):  # every move drawn: an upload of small categories ends in a second
    made(self, *args, **{**kwargs, "mininterval": 0, "miniters": 1})

progress._Bar.__init__ = __init__
progress._Bar.display = display
from alexnet.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_the_bar_is_drawn_ends_the_upload(tmp_path):
    """Ctrl-C landing while the main thread drew the bar (it recorded the categories it skipped) left tqdm's lock held:
    the packing threads waited for it to draw the bar, the pool's end waited for them, and the upload hung for ever.
    The main thread now only waits for the thread that reads the source."""
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    src, board = tmp_path / "src", tmp_path / "board"
    imagenet_synthetic(src, classes=12, images_per_class=40, val_per_class=0, max_side=160, seed=4)
    imagenet_upload(src, board)
    for category in sorted(board.glob("n*"))[::2]:  # every other category to upload again, the others skipped
        category.rename(tmp_path / category.name)
    script = tmp_path / "forced.py"
    script.write_text(FORCED_CTRL_C)
    proc = subprocess.Popen([sys.executable, str(script), "upload", str(src), "--board", str(board), "--workers", "2"],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "ALEXNET_PROGRESS": "1"})
    try:
        _, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the upload hung after its Ctrl-C: {err[-1500:]}")
    assert "Ctrl-C while " in err and proc.returncode == 130, err[-2000:]
    assert "Ctrl-C while MainThread draws" not in err, "the main thread draws no bar"
    assert err.rstrip().endswith("alexnet upload: interrupted; the same command run again skips the categories "
                                 "already uploaded"), err[-2000:]


def test_ctrl_c_during_an_upload_says_it_finishes_the_categories_under_way(tmp_path):
    """After Ctrl-C the upload waited, silent, for the categories being packed (12 s in a review) before its line."""
    from alexnet.data.synthetic import imagenet_synthetic

    src, board = tmp_path / "src", tmp_path / "board"
    imagenet_synthetic(src, classes=30, images_per_class=30, val_per_class=1, max_side=300, seed=2)
    code, err = interrupted(["upload", str(src), "--board", str(board), "--workers", "2"],
                            lambda: any(board.glob("n*/*/*.zip")))
    assert code == 130, err[-2000:]
    assert "Interrupted: finishing the categories under way, which the next upload skips (Ctrl-C again stops at " \
           "once)." in err
    assert err.rstrip().endswith("alexnet upload: interrupted; the same command run again skips the categories "
                                 "already uploaded"), err[-2000:]


@pytest.mark.parametrize("command", ["evaluate", "spark-evaluate"])
def test_an_evaluation_reads_its_model_pin_from_model_board(command, monkeypatch, capsys, tmp_path):
    """--board was both the validation images' board and the model pin's: a model published on another board (a
    training's --model-board) could not be evaluated from the command line."""
    import contextlib

    from alexnet.cli import cluster

    seen: dict = {}

    def core(name):
        if name == "model":
            return lambda board=None, **pin: seen.update(pin_board=board, pin=pin) or "the model"
        return lambda *args, **kwargs: seen.update(evaluated=args, kwargs=kwargs) or {"images": 0}

    fake_core(monkeypatch, core)
    monkeypatch.setattr(cluster, "_spark", lambda args, name: contextlib.nullcontext())
    workers = ["--workers", "2"] if command == "spark-evaluate" else []
    assert main([command, *workers, "--model-pin", "mine", "--model-board", str(tmp_path / "models"), "--board",
                 str(tmp_path / "images"), "--json"]) == 0
    assert seen["pin_board"] == str(tmp_path / "models") and seen["pin"] == {"name": "mine"}
    assert "the model" in seen["evaluated"] and str(tmp_path / "images") in [*seen["evaluated"],
                                                                               seen["kwargs"].get("board")]
    seen.clear()
    assert main([command, *workers, "--model-pin", "mine", "--board", str(tmp_path / "images"), "--json"]) == 0
    assert seen["pin_board"] == str(tmp_path / "images"), "unset: --board"
    model = ["--model", "m"] if command == "spark-evaluate" else ["m"]
    assert main([command, *workers, *model, "--model-board", str(tmp_path / "models")]) == 2
    assert "--model-board is the board of a model pin: give it with --model-pin" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["predict", "features"])
def test_a_model_given_first_among_the_images_is_named_as_such(command, monkeypatch, capsys, tmp_path):
    """`predict M image.jpg` (as `evaluate M` takes its model) read M as an image and sought the model pin alexnet
    on the default board, whose error never said M was read as an image."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "alexnet.keras").write_bytes(b"a model")
    seen = _recording_core(monkeypatch)
    for given in (str(model), str(model / "alexnet.keras")):
        assert main([command, given, "image.jpg"]) == 2
        assert f"{given} is a model, given where the images go: give it as --model {given}" in capsys.readouterr().err
    assert "trained" not in seen
    named = build_parser().parse_args([command, "--model", str(model), str(model)])
    from alexnet.cli.model import _no_model_among_images

    assert _no_model_among_images(named) is None, "a model named: what follows is the images"


def test_checkpoints_the_run_would_refuse_are_said_before_its_partition_is_fetched(monkeypatch, capsys, tmp_path):
    """A resume with other dense units fetched the whole partition and checked its images, then was refused."""
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    src = imagenet_synthetic(tmp_path / "src", classes=3, images_per_class=2, val_per_class=0, max_side=32)["path"]
    imagenet_upload(src, tmp_path / "board")
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    (checkpoints / "alexnet-history.json").write_text(json.dumps({
        "format": 1, "epochs_done": 1, "position": [1, 0], "settings": {"num_classes": 3, "dense_units": 16}}))
    seen = _recording_core(monkeypatch)
    assert main(["train", "--board", str(tmp_path / "board"), "--total", "1", "--checkpoint-dir", str(checkpoints),
                 "--dense-units", "32"]) == 2
    assert "were written for another model (`--dense-units`: 16 then, 32 now)" in capsys.readouterr().err
    assert seen["fetched"] == 0 and "trained" not in seen
    assert main(["train", "--board", str(tmp_path / "board"), "--total", "1", "--checkpoint-dir", str(checkpoints),
                 "--dense-units", "16"]) == 0, "the same model: fetched and trained"
    assert seen["fetched"] == 1 and seen["trained"]


def test_the_lowest_classes_of_an_evaluation_are_those_below_100_percent():
    """With few classes, the lowest top-1 listed classes all right (100.0%), which are not low at all."""
    from alexnet.cli.model import evaluation_summary

    def row(index: int, name: str, right: int) -> dict[str, object]:
        return {"index": index, "id": f"n0{index}", "name": name, "images": 4, "top1_correct": right,
                "top5_correct": 4, "top1_accuracy": right / 4, "top5_accuracy": 1.0}

    evaluation = {"images": 12, "top1_correct": 7, "top5_correct": 12, "top1_accuracy": 7 / 12, "top5_accuracy": 1.0,
                  "num_classes": 3, "per_class": [row(0, "tench, Tinca tinca", 1), row(1, "goldfish", 4),
                                                  row(2, "ostrich", 2)]}
    lines = evaluation_summary(evaluation).splitlines()
    assert lines[2] == "Lowest top-1: tench 25.0% (1 of 4), ostrich 50.0% (2 of 4)", lines
    evaluation["per_class"] = [row(0, "tench", 4), row(1, "goldfish", 4)]
    assert "Lowest" not in evaluation_summary(evaluation), "every class all right: none is low"


def test_a_spark_evaluation_names_its_model_and_attempt_and_says_the_workers_rate():
    """spark-evaluate's summary named no model and no attempt, and gave the images over the whole stage's seconds
    (Spark's start, the fetch and the model's load among them): 1.8 images/s from workers that scored 45 and 26."""
    from alexnet.cli.model import evaluation_summary
    from alexnet.launch.evaluation import combine_shares, empty_share, evaluate_row

    def share(worker: int, images: int, seconds: float) -> dict[str, object]:
        return evaluate_row({**empty_share(1), "worker": worker, "workers": 2, "images": images,
                             "top1_correct": images // 2, "top5_correct": images, "top_k": 5, "image_size": 224,
                             "num_classes": 10, "seconds": seconds, "model": "m2@v7"})

    combined = combine_shares([share(0, 450, 10.0), share(1, 260, 10.0)], 400.0)
    assert combined["seconds"] == 400.0, "the stage's"
    assert combined["images_per_second"] == 71.0, "the images over the slowest worker's seconds"
    lines = evaluation_summary({**combined, "attempt": 2}).splitlines()
    assert lines[0] == ("Evaluation of the model on every validation image of the board (m2@v7), on 2 Spark workers "
                        "(attempt 2):")
    assert lines[1].startswith("Top-1 accuracy 50.0% (355 of 710 images)")
    assert lines[2] == "centre crop; 224 pixels; 10 classes; 71.0 images/s over the slowest worker's 10.0 s; 2 workers"
    # a training's evaluation, said after the training's own lines: no attempt of its own; no images scored: no rate
    idle = combine_shares([share(0, 0, 0.0), share(1, 0, 0.0)], 3.0)
    assert evaluation_summary(idle).splitlines()[1] == "centre crop; 224 pixels; 10 classes; 2 workers"


@pytest.mark.parametrize(("module", "extra"),
                         [("pyspark", "spark"), ("tensorflow", None), ("tensorboard.x", "tensorboard")])
def test_a_module_this_python_lacks_is_said_in_one_line_with_what_to_install(monkeypatch, capsys, module, extra):
    """A Python without pyspark (or TensorFlow) printed a traceback ending in ModuleNotFoundError."""
    def lacking(*args, **kwargs):
        raise ModuleNotFoundError(f"No module named '{module}'", name=module)

    fake_core(monkeypatch, lambda command: lacking)
    assert main(["categories", "--board", "/b"]) == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith(f"alexnet categories: error: This Python ({sys.executable}) has "
                                                     f"no module `{module.split('.')[0]}`, ")
    assert f"pip install -c python/constraints.txt '{f'./python[{extra}]' if extra else './python'}'" in said
    assert "alexnet::install_alexnet(" in said


def test_a_module_of_alexnet_its_own_missing_is_a_fault_said_as_it_is(monkeypatch):
    def broken(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'alexnet.nothing'", name="alexnet.nothing")

    fake_core(monkeypatch, lambda command: broken)
    with pytest.raises(ModuleNotFoundError, match=r"alexnet\.nothing"):
        main(["categories", "--board", "/b"])


def test_the_extras_said_for_a_missing_module_are_the_core_package_extras():
    import tomllib

    from alexnet.errors import EXTRA_MODULES

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, extra in EXTRA_MODULES.items():
        assert any(re.match(rf"{module}\b", requirement) for requirement in extras[extra]), (module, extra)


def test_the_dependency_modules_are_the_core_package_dependencies():
    """R's alexnet_available() looks for these modules: one for each of pyproject's dependencies."""
    import tomllib

    from alexnet.errors import DEPENDENCY_MODULES

    renamed = {"pillow": "PIL", "pyyaml": "yaml", "tf-keras": "tf_keras"}
    requirements = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() for requirement in requirements]
    assert sorted(DEPENDENCY_MODULES) == sorted(renamed.get(name, name) for name in names)


def test_missing_dependencies_names_a_dependency_this_python_cannot_import(monkeypatch):
    from alexnet.errors import missing_dependencies

    assert missing_dependencies() == []
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # what a Python without TensorFlow finds
    monkeypatch.setitem(sys.modules, "scipy", None)
    assert missing_dependencies() == ["tensorflow", "scipy"]
