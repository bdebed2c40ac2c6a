"""The benchmark's declaration reaches every front end: each setting is in ``alexnet_benchmark``'s signature and help,
on the command line's ``alexnet bench`` with its help and default, in R's table (tests/test_settings.py checks the
generated files) and, typed, in the plan its stage reads; a bad value of it is refused with the same message by the
call and the command line, before any work. The walk is over the declaration's groups, so a setting added to a group,
or a stage's group added to :data:`alexnet.bench.plan.STAGE_SETTINGS`, is covered.

(R's side of the walk is in tests/testthat/test-benchmark.R.)
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from helpers_cli import help_as_said
from helpers_declared import cli_words, option_refusal, other_value, refusal

import alexnet
from alexnet.bench.plan import GROUPS, STAGE_SETTINGS, BenchSettings, check_plan, specs, stage_of
from alexnet.cli import build_parser, common, main
from alexnet.cli.bench import bench_args, bench_dest
from alexnet.declare import declaration
from alexnet.declare.kinds import option_name
from alexnet.errors import AlexnetError

SETTINGS = list(specs().items())
IDS = [name for name, _ in SETTINGS]
#: The options of ``alexnet bench`` that give the ``fetch`` stage's settings without an option of their own.
PARTITION_OPTIONS = {"board": "--board", "fetch_partition": "--partition", "fetch_total": "--total"}


def _bench_parser():
    return build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]


def _planned(plan, name):
    """The value of setting ``name`` in ``plan``: in its stage's group, or among the settings every stage shares."""
    stage = stage_of(name)
    return getattr(plan.stage[stage] if stage else plan.common, name)


def _arguments(name, value):
    """``{name: value}``, with what lets any value of it pass the checks between settings: only the decode stage (no
    model, so any image size), one core."""
    arguments = {"stages": ["decode"], name: value}
    if name == "cores":
        arguments["cores"] = 1
    return arguments


def test_the_declaration_is_in_groups_the_shared_first_then_one_per_stage():
    assert list(GROUPS) == ["", *STAGE_SETTINGS] and GROUPS[""] is BenchSettings
    names = [name for group in GROUPS.values() for name in declaration.specs(group)]
    assert names == IDS and len(set(names)) == len(names), "a setting's name is unique across the groups"
    assert set(STAGE_SETTINGS) <= set(declaration.specs(BenchSettings)["stages"].choices)


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_every_setting_is_in_the_signature_and_the_help_with_its_default(name, spec):
    parameter = inspect.signature(alexnet.alexnet_benchmark).parameters[name]
    assert parameter.default == spec.default and parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert f"``{name}`` (default ``{spec.default!r}``)" in alexnet.alexnet_benchmark.__doc__


def test_the_signature_has_the_settings_and_nothing_else_but_the_data():
    assert list(inspect.signature(alexnet.alexnet_benchmark).parameters) == ["data", *IDS]


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_a_value_on_the_command_line_reaches_the_stages_plan(name, spec, tmp_path):
    flag = option_name(name, spec) or PARTITION_OPTIONS[name]
    action = next(a for a in _bench_parser()._actions if flag in a.option_strings)
    if option_name(name, spec) is not None:
        assert action.dest == bench_dest(name) and help_as_said("bench", common.declared_help(spec)) in action.help
        if spec.default is not None:
            assert f"(default: {spec.shown_default()})" in action.help
    # an output folder is proven writable when planned: one that can be
    value = 1 if name == "cores" else str(tmp_path / "out") if name == "output_dir" else other_value(name, spec)
    words = [flag if value else "--no-" + flag[2:]] if spec.kind == "flag" else [flag, *cli_words(value)]
    given = bench_args(build_parser().parse_args(["bench", *words, *(["--stages", "decode"] * (name != "stages"))]))
    plan = check_plan(given)
    assert _planned(plan, name) == spec.convert(list(value) if isinstance(value, tuple) else value, name)
    assert _planned(check_plan(_arguments(name, value)), name) == _planned(plan, name), "the call plans it alike"


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_a_bad_value_is_refused_alike_by_the_call_and_the_command_line(name, spec, tmp_path, capsys):
    bad, message = refusal(check_plan, name, spec)
    with pytest.raises(AlexnetError) as called:
        alexnet.alexnet_benchmark(**{"output_dir": str(tmp_path / "out"), name: bad})
    assert str(called.value) == message
    assert not (tmp_path / "out").exists(), "refused before any work"
    flag = option_name(name, spec)
    if flag is None:
        return  # given by the options of a partition (--board, --partition, --total), which check their own
    assert main(["bench", flag, *cli_words(bad)]) == 2
    assert f"alexnet bench: error: {option_refusal(name, spec, bad)}" in capsys.readouterr().err


def test_the_stored_copies_are_refused_as_the_upload_refuses_them(tmp_path, capsys):
    # `resize` and `quality` are the upload's (alexnet.data.options.UploadOptions), as imagenet_upload() stores images
    for name, bad, said in (("resize", 10, "`resize` = 10 would store images too small for AlexNet"),
                            ("quality", 101, r"`quality` must be in 1\.\.100, not 101")):
        with pytest.raises(AlexnetError, match=said) as benchmarked:
            check_plan({name: bad})
        with pytest.raises(AlexnetError) as uploaded:
            alexnet.imagenet_upload(tmp_path / "no-source", board=tmp_path / "board", **{name: bad})
        assert str(benchmarked.value) == str(uploaded.value)
    assert main(["bench", "--resize", "10"]) == 2
    assert "alexnet bench: error: `--resize` 10 would store images too small for AlexNet" in capsys.readouterr().err
    assert not (tmp_path / "board").exists()


def test_stored_copies_smaller_than_the_crop_are_refused_before_any_work(tmp_path, capsys):
    """`resize` is the short side the io and train stages read the images at, `image_size` the side they crop: a
    stored side below the crop was taken, and every crop enlarged from fewer pixels than it is."""
    said = (r"^`resize` = 128 is below `image_size` = 224: the io and train stages would enlarge every crop of the "
            r"stored images to 224 pixels; use `resize` of at least 224 \(the paper cropped 224 out of a short side of "
            r"256\), or "
            r"an `image_size` of at most 128\.$")
    for stages in ("io", "train", "decode,io"):
        with pytest.raises(AlexnetError, match=said):
            check_plan({"stages": stages, "resize": 128, "image_size": 224})
    # the short side at the crop or above it, or no stage that reads the stored copies: as before
    assert check_plan({"stages": "io", "resize": 224, "image_size": 224}).common.resize == 224
    assert check_plan({"stages": "io", "resize": 256}).common.resize == 256
    assert check_plan({"stages": "decode,naive", "resize": 128}).common.resize == 128
    output = tmp_path / "out"
    assert main(["bench", "--stages", "io", "--resize", "128", "--output-dir", str(output)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "alexnet bench: error: `--resize` 128 is below `--image-size` 224: the io and train stages would enlarge every "
        "crop of the stored images to 224 pixels; use `--resize` of at least 224 (the paper cropped 224 out of a short "
        "side of 256), or an `--image-size` of at most 128."]
    assert not output.exists()


def test_the_fetch_stage_takes_a_partition_and_downloads_as_a_fetch_does():
    from alexnet.data.options import FetchOptions, PartitionOptions

    stage, partition, fetch = specs(), declaration.specs(PartitionOptions), declaration.specs(FetchOptions)
    for own, declared in (("fetch_partition", partition["partition"]), ("fetch_total", partition["total"]),
                          ("fetch_workers", fetch["workers"])):
        assert (stage[own].kind, stage[own].default) == (declared.kind, declared.default), own
    assert (stage["fetch_partition"].minimum, stage["fetch_total"].minimum) == (0, 1)
    # measured against one download at a time, so at least two
    assert stage["fetch_workers"].minimum == 2


def test_settings_are_checked_against_each_other_and_recorded_by_stage():
    with pytest.raises(AlexnetError, match="`image_size` = 32 is too small for AlexNet"):
        check_plan({"image_size": 32, "stages": ["io", "train"]})
    assert check_plan({"image_size": 32, "stages": ["io"]}).common.image_size == 32
    with pytest.raises(AlexnetError, match="The `fetch` stage needs `board`"):
        check_plan({"stages": "fetch"})
    with pytest.raises(AlexnetError, match="`cores` = 100000 but this process may use only"):
        check_plan({"cores": 100_000})
    with pytest.raises(AlexnetError, match=r"does not take `repeat` \(did you mean `repeats`\?\)"):
        alexnet.alexnet_benchmark(repeat=2)
    plan = check_plan({"stages": "time_to_accuracy, io", "resize": 256, "precision": "bf16"})
    assert plan.common.stages == ("time_to_accuracy", "io") and plan.common.isolation in ("process", "threads")
    accuracy = STAGE_SETTINGS["time_to_accuracy"]
    assert plan.accuracy == accuracy(**declaration.defaults(accuracy))
    record = plan.record()
    assert record["fetch"] is None and record["quality"] == 90 and record["precision"] == "bfloat16"
    assert record["time_to_accuracy"] == {**declaration.to_dict(plan.accuracy), "precision": "bfloat16", "seed": 0,
                                          "learning_rate": 0.01}
    assert dataclasses.asdict(plan.common)["cores"] == len(plan.cpus)


def test_a_quality_without_resize_is_said_unused_and_recorded_as_none(caplog):
    with caplog.at_level("WARNING", logger="alexnet.bench.plan"):
        record = check_plan({"quality": 50}).record()
    said = "`quality` is only used with `resize`: the stages read the images as they are, not re-encoded."
    assert said in caplog.text
    assert record["quality"] is None and record["resize"] is None
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.bench.plan"):
        record = check_plan({"quality": 50, "resize": 256}).record()
    assert "only used with" not in caplog.text and record["quality"] == 50


def test_a_stages_settings_given_when_it_does_not_run_get_a_warning(caplog):
    with caplog.at_level("WARNING", logger="alexnet.bench"):
        check_plan({"stages": "decode", "links": ["1gbit"], "accuracy_workers": 2})
    assert "`links`: the scaling stage's, which `stages` does not run: not used." in caplog.text
    assert "`accuracy_workers`: the time_to_accuracy stage's, which `stages` does not run: not used." in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.bench"):
        check_plan({"stages": "decode"})
    assert "not used" not in caplog.text


def test_the_boards_help_says_that_no_board_is_taken_by_default(monkeypatch, tmp_path):
    """bench's --board said "default: $ALEXNET_BOARD", as other commands', and took none: a synthetic ImageNet."""
    action = next(a for a in _bench_parser()._actions if "--board" in a.option_strings)
    assert "none by default, not $ALEXNET_BOARD: a synthetic ImageNet, unless --data" in action.help
    monkeypatch.setenv("ALEXNET_BOARD", str(tmp_path / "board"))
    assert "board" not in bench_args(build_parser().parse_args(["bench", "--stages", "decode"]))
