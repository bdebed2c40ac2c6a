"""The declarations of the data stage's options (a synthetic ImageNet's, an upload's, a fetch's, a validation fetch's)
and of a model's (which of a board's images an evaluation scores, a prediction's, a features', an export's, the model
pin read) reach every front end: each option is in the signature and help of ``imagenet_synthetic`` /
``imagenet_upload`` / ``imagenet_partition`` / ``imagenet_validation`` / ``alexnet_evaluate`` / ``alexnet_predict`` /
``alexnet_features`` / ``alexnet_export`` / ``alexnet_model``, on the command line's ``synth`` / ``upload`` / ``fetch``
(and ``train`` and ``bench``, which fetch a partition) / ``evaluate`` / ``predict`` / ``features`` / ``export`` (and
``spark-evaluate``, which reads a model pin too) with its help and default, and a value given there reaches the core;
a bad value is refused with a message naming it before anything is written or read. The walk is over the
declarations, so an option added to one of them alone is covered.
(R's side: tests/testthat/test-declared-options.R; the generated R tables: tests/test_settings.py; an evaluation's
and a Spark job's options: tests/test_launch_options.py.)
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import pytest
from helpers_cli import help_as_said
from helpers_declared import bad_value, cli_words, other_value, refusal

import alexnet
from alexnet.cli import build_parser, common, main
from alexnet.cli.model import model_pin_dest
from alexnet.data.options import (
    FetchOptions,
    PartitionOptions,
    SyntheticOptions,
    UploadOptions,
    ValidationFetchOptions,
    ValidationPartitionOptions,
)
from alexnet.declare.declaration import specs
from alexnet.declare.kinds import option_name
from alexnet.errors import AlexnetError
from alexnet.model.options import (
    BoardImagesOptions,
    EvaluationOptions,
    ExportOptions,
    FeaturesOptions,
    ModelPinOptions,
    PredictOptions,
)

#: Which function and commands take each declaration's options.
TAKEN_BY: dict[type, tuple[str, tuple[str, ...]]] = {
    SyntheticOptions: ("imagenet_synthetic", ("synth",)),
    UploadOptions: ("imagenet_upload", ("upload",)),
    PartitionOptions: ("imagenet_partition", ("fetch", "train", "bench")),
    FetchOptions: ("imagenet_partition", ("fetch", "train", "bench")),
    ValidationPartitionOptions: ("imagenet_validation", ("validation",)),
    ValidationFetchOptions: ("imagenet_validation", ("validation",)),
    BoardImagesOptions: ("alexnet_evaluate", ("evaluate",)),
    PredictOptions: ("alexnet_predict", ("predict",)),
    FeaturesOptions: ("alexnet_features", ("features",)),
    ExportOptions: ("alexnet_export", ("export",)),
    ModelPinOptions: ("alexnet_model", ("evaluate", "predict", "features", "export", "spark-evaluate")),
}
CASES = [(declaration, name, spec) for declaration in TAKEN_BY for name, spec in specs(declaration).items()]
IDS = [f"{declaration.__name__}:{name}" for declaration, name, _ in CASES]
#: The options also given by position, after the function's own arguments.
POSITIONAL = {("alexnet_export", "format"), ("alexnet_predict", "top"), ("alexnet_features", "layer"),
              ("alexnet_model", "name"), ("alexnet_model", "version"),
              ("imagenet_partition", "partition"), ("imagenet_partition", "total"),
              ("imagenet_validation", "partition"), ("imagenet_validation", "total")}
#: Where a command keeps each declaration's options, by name (under their own names unless said here).
DESTS = {ModelPinOptions: model_pin_dest}
#: The words before the options of each command: what it needs besides them.
LEADING = {"synth": ["synth", "dest"], "upload": ["upload", "source"], "fetch": ["fetch"], "validation": ["validation"],
           "train": ["train"],
           "bench": ["bench", "--board", "board"],  # bench fetches a partition when given a board
           "evaluate": ["evaluate", "model", "--board", "board"],
           "predict": ["predict", "cat.jpg", "--model", "model"],
           "features": ["features", "cat.jpg", "--model", "model"],
           "export": ["export", "model", "--path", "out"]}
#: The words before a model pin's options: the commands without a model location, which read the pin instead.
PIN_LEADING = {"evaluate": ["evaluate", "--board", "board"], "predict": ["predict", "cat.jpg"],
               "features": ["features", "cat.jpg"],
               "export": ["export", "--path", "out"], "spark-evaluate": ["spark-evaluate", "--workers", "2"]}


def _parser(command: str):
    return build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]


@pytest.mark.parametrize(("declaration", "name", "spec"), CASES, ids=IDS)
def test_every_option_is_in_the_signature_help_and_commands_with_its_default(declaration, name, spec):
    function, commands = TAKEN_BY[declaration]
    core = getattr(alexnet, function)
    parameter = inspect.signature(core).parameters[name]
    assert parameter.default == spec.default
    # by keyword, or also by position where it was before (an export's `format`, a prediction's `top`)
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY or (function, name) in POSITIONAL
    assert f"``{name}`` (default ``{spec.default!r}``)" in core.__doc__
    flag = option_name(name, spec)
    if flag is None:
        return
    for command in commands:
        action = next(a for a in _parser(command)._actions if flag in a.option_strings)
        assert action.dest == DESTS.get(declaration, str)(name), command
        assert help_as_said(command, common.declared_help(spec)) in action.help, command
        if spec.default is not None:
            assert f"(default: {spec.shown_default()})" in action.help


@pytest.mark.parametrize(("declaration", "name", "spec"), CASES, ids=IDS)
def test_a_value_on_the_command_line_reaches_the_core(declaration, name, spec, monkeypatch, tmp_path):
    function, commands = TAKEN_BY[declaration]
    flag = option_name(name, spec)
    if flag is None or not commands:
        pytest.skip(f"{name} is not on the command line" if commands else f"{function}() has no command")
    value = str(tmp_path / name) if spec.kind == "location" else other_value(name, spec)
    calls: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        raise AlexnetError("recorded")  # the command stops here, before any work

    record.__signature__ = inspect.signature(getattr(alexnet, function))  # type: ignore[attr-defined]  # help's defaults
    monkeypatch.setattr(alexnet, function, record)
    words = [flag if value else "--no-" + flag[2:]] if spec.kind == "flag" else [flag, *cli_words(value)]
    leading = PIN_LEADING if declaration is ModelPinOptions else LEADING
    for command in commands:
        assert main([*leading[command], *words]) == 2, command
        assert spec.convert(calls[-1][name], name) == spec.convert(value, name), command
    assert len(calls) == len(commands)


@pytest.mark.parametrize(("declaration", "name", "spec"), CASES, ids=IDS)
def test_a_bad_value_is_refused_before_anything_is_written_or_read(declaration, name, spec, tmp_path):
    dest, board = tmp_path / "synthetic", tmp_path / "board"
    calls = {
        SyntheticOptions: lambda values: alexnet.imagenet_synthetic(dest, **values),
        UploadOptions: lambda values: alexnet.imagenet_upload(tmp_path / "no-source", board=board, **values),
        PartitionOptions: lambda values: alexnet.imagenet_partition(board=board, **values),
        FetchOptions: lambda values: alexnet.imagenet_partition(0, 2, board=board, **values),
        ValidationPartitionOptions: lambda values: alexnet.imagenet_validation(board, **values),
        ValidationFetchOptions: lambda values: alexnet.imagenet_validation(board, **values),
        BoardImagesOptions: lambda values: alexnet.alexnet_evaluate(str(dest), board=board, **values),
        PredictOptions: lambda values: alexnet.alexnet_predict(str(dest), [str(tmp_path / "cat.jpg")], **values),
        FeaturesOptions: lambda values: alexnet.alexnet_features(str(dest), [str(tmp_path / "cat.jpg")], **values),
        ExportOptions: lambda values: alexnet.alexnet_export(str(board), str(dest), **values),
        ModelPinOptions: lambda values: alexnet.alexnet_model(board, **{"cache_dir": str(dest), **values}),
    }
    refusal(calls[declaration], name, spec)
    assert not dest.exists() and not board.exists()


#: Every whole-number option of the functions of a trained model, by its declaration.
WHOLE_NUMBERS = [(declaration, name) for declaration in (EvaluationOptions, BoardImagesOptions, PredictOptions,
                                                         FeaturesOptions, ExportOptions)
                 for name, spec in specs(declaration).items() if spec.kind == "count"]


@pytest.mark.parametrize(("declaration", "name"), WHOLE_NUMBERS,
                         ids=[f"{declaration.__name__}:{name}" for declaration, name in WHOLE_NUMBERS])
def test_a_whole_number_option_of_a_model_s_functions_is_a_number_not_a_string_of_digits(declaration, name, tmp_path):
    """``crops="10"`` is refused as ``top="3"`` is, by the one check of whole numbers; R's double is taken."""
    spec = specs(declaration)[name]
    value = other_value(name, spec)
    model, image = str(tmp_path / "model"), str(tmp_path / "cat.jpg")
    calls = {
        EvaluationOptions: lambda values: alexnet.alexnet_evaluate(model, board=tmp_path / "board", **values),
        BoardImagesOptions: lambda values: alexnet.alexnet_evaluate(model, board=tmp_path / "board", **values),
        PredictOptions: lambda values: alexnet.alexnet_predict(model, [image], **values),
        FeaturesOptions: lambda values: alexnet.alexnet_features(model, [image], **values),
        ExportOptions: lambda values: alexnet.alexnet_export(model, str(tmp_path / "out"), **values),
    }
    with pytest.raises(AlexnetError, match=rf"^`{name}` must be .*, not '{value}'\.$"):
        calls[declaration]({name: str(value)})
    converted = spec.convert(float(value), name)
    assert converted == value and type(converted) is int
    assert not (tmp_path / "board").exists() and not (tmp_path / "out").exists()


def test_options_not_taken_are_named_with_the_closest(tmp_path):
    with pytest.raises(AlexnetError, match=r"imagenet_partition\(\) does not take `worker` \(did you mean `workers`"):
        alexnet.imagenet_partition(0, 2, board=tmp_path, worker=2)
    with pytest.raises(AlexnetError, match=r"imagenet_upload\(\) does not take `min_image` \(did you mean"):
        alexnet.imagenet_upload(tmp_path, board=tmp_path / "board", min_image=2)
    with pytest.raises(AlexnetError, match=r"imagenet_synthetic\(\) does not take `class` \(did you mean `classes`"):
        alexnet.imagenet_synthetic(tmp_path / "x", **{"class": 2})
    with pytest.raises(AlexnetError, match=r"imagenet_validation\(\) does not take `worker` \(did you mean `workers`"):
        alexnet.imagenet_validation(tmp_path / "board", worker=2)
    with pytest.raises(AlexnetError, match=r"alexnet_evaluate\(\) does not take `fetch_worker` \(did you mean "
                       r"`fetch_workers`"):
        alexnet.alexnet_evaluate(str(tmp_path / "model"), board=tmp_path / "board", fetch_worker=2)
    with pytest.raises(AlexnetError, match=r"alexnet_export\(\) does not take `formats` \(did you mean `format`"):
        alexnet.alexnet_export(str(tmp_path / "model"), str(tmp_path / "out"), formats="tflite")
    with pytest.raises(AlexnetError, match=r"alexnet_model\(\) does not take `cache` \(did you mean `cache_dir`"):
        alexnet.alexnet_model(tmp_path / "board", cache=str(tmp_path / "x"))
    assert not (tmp_path / "board").exists() and not (tmp_path / "x").exists() and not (tmp_path / "out").exists()


def test_an_evaluation_refuses_a_share_past_its_total_before_any_work(tmp_path):
    # checked with the options, before the model (missing here) or the board is looked at
    with pytest.raises(AlexnetError, match=r"`partition` must be in 0\.\.1 \(0-based, with total = 2\), not 2"):
        alexnet.alexnet_evaluate(str(tmp_path / "no-model"), board=tmp_path / "board", partition=2, total=2)
    assert not (tmp_path / "board").exists()


def test_a_spark_worker_fetches_with_the_options_of_a_fetch():
    # a Spark job's cache_dir and fetch_workers are the fetch's own options, said for a worker
    from alexnet.launch.options import specs as launch_specs

    launch, fetch = launch_specs(), specs(FetchOptions)
    for job, own in (("cache_dir", "cache_dir"), ("fetch_workers", "workers")):
        assert (launch[job].kind, launch[job].default, launch[job].minimum, launch[job].optional) == \
            (fetch[own].kind, fetch[own].default, fetch[own].minimum, fetch[own].optional)


def test_a_command_without_a_model_location_reads_the_model_pin_as_alexnet_model_does(monkeypatch, tmp_path, capsys):
    calls: list[tuple[Any, ...]] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        raise AlexnetError("recorded")

    monkeypatch.setattr(alexnet, "alexnet_model", record)
    board = str(tmp_path / "board")
    # neither a location nor --model-pin: the pin alexnet_model() reads by default, from --board
    assert main(["predict", "cat.jpg", "--board", board]) == 2
    assert calls[-1] == ((board,), {})
    assert main(["evaluate", "--board", board, "--model-pin", "served", "--pin-version", "20261128T101500Z-1a2b3"]) == 2
    assert calls[-1] == ((board,), {"name": "served", "version": "20261128T101500Z-1a2b3"})
    # both a location and a pin: refused, naming the pin's options given, before the pin is read
    capsys.readouterr()
    assert main(["predict", "cat.jpg", "--model", "m", "--model-cache", str(tmp_path / "c")]) == 2
    assert "or as a model pin on --board (--model-cache), not both" in capsys.readouterr().err
    assert len(calls) == 2


def test_a_training_from_a_model_pin_brings_its_file_into_the_initial_cache_as_alexnet_model_does(tmp_path,
                                                                                                 monkeypatch):
    # the other commands' --model-cache, for --initial-pin: a training's --model-... options are the model it makes
    from helpers_model import pinned_bytes

    from alexnet.cli.train import training_args
    from alexnet.model.pin import fetch_again

    board, chosen = pinned_bytes(tmp_path), tmp_path / "chosen"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    spec = specs(ModelPinOptions)["cache_dir"]
    for command in ("train", "spark-train"):
        action = next(a for a in _parser(command)._actions if "--initial-cache" in a.option_strings)
        assert common.declared_help(spec) in action.help and action.metavar == spec.metavar

    def given(*words: str) -> dict[str, Any]:
        return training_args(build_parser().parse_args(["train", *words]))

    pin = ["--initial-pin", "alexnet", "--initial-board", board]
    reference = given(*pin, "--initial-cache", str(chosen))["initial_model"]
    assert reference["cache_dir"] == str(chosen) and reference["path"] is None and not chosen.exists()
    fetched = fetch_again(reference)  # what the run that starts from it does, here or on a worker
    assert fetched["path"].startswith(str(chosen) + os.sep) and os.path.isfile(fetched["path"])
    assert given(*pin)["initial_model"]["cache_dir"] is None  # unset: each machine's user cache
    assert not (tmp_path / "user-cache").exists()
    with pytest.raises(AlexnetError, match=r"^`--initial-cache` must be one string \(a path or URL\), not ''\.$"):
        given(*pin, "--initial-cache", "")
    with pytest.raises(AlexnetError, match=r"^--initial-cache is where the file of --initial-pin is brought: give "
                                           r"--initial-pin NAME too\.$"):
        given("--initial-cache", str(chosen))


def test_a_missing_default_model_pin_says_how_to_name_the_model_unless_a_pin_was_meant(monkeypatch, capsys):
    def missing(board: Any, name: str = "alexnet", version: str | None = None, **kwargs: Any) -> Any:
        raise AlexnetError(f"pin {name!r} has no version {version!r}" if version else f"no pin {name!r}")

    monkeypatch.setattr(alexnet, "alexnet_model", missing)
    assert main(["evaluate", "--board", "b"]) == 2
    err = capsys.readouterr().err
    assert "give the model as MODEL (a model_dir or alexnet.keras location) or as --model-pin NAME" in err
    assert err.rstrip().endswith("the model pin 'alexnet' was read, and no pin 'alexnet'")
    # a version (or a name) given: the pin was meant, and what is wrong with it is the whole message
    for words in (["--pin-version", "v1"], ["--model-pin", "m"]):
        assert main(["spark-evaluate", "--workers", "2", "--board", "b", *words]) == 2
        err = capsys.readouterr().err
        assert "give the model as" not in err and ("no version 'v1'" in err or "no pin 'm'" in err)


def test_the_commands_that_take_the_model_first_take_it_as_model_too(monkeypatch, tmp_path, capsys):
    seen: list[Any] = []
    monkeypatch.setattr(alexnet, "alexnet_filters", lambda model, **kwargs: seen.append(model) or {
        "layer": "conv1", "filters": 96, "size": (11, 11), "path": kwargs["path"]})
    monkeypatch.setattr(alexnet, "alexnet_model", lambda *a, **k: pytest.fail("no model pin is read"))
    png = str(tmp_path / "f.png")
    # --model, as predict, features and spark-evaluate spell it, or MODEL first: the same model
    assert main(["filters", "--model", "saved", "--path", png]) == 0
    assert main(["filters", "saved", "--path", png]) == 0
    assert main(["filters", "saved", "--model", "saved", "--path", png]) == 0
    assert seen == ["saved"] * 3
    capsys.readouterr()
    assert main(["filters", "saved", "--model", "other", "--path", png]) == 2
    assert "give the model once, as MODEL or as --model, not both ('saved', 'other')" in capsys.readouterr().err
    assert main(["evaluate", "--model", "saved", "--model-pin", "p"]) == 2
    assert "give the model either as MODEL" in capsys.readouterr().err
    assert len(seen) == 3


def _command_tables() -> dict[str, list[tuple[list[str], dict[str, Any]]]]:
    """Every command's declared options, table by table (two may have a setting of the same name, one of them not on
    the command line), each with the words before its options: what the command needs besides them (a model pin's
    options come without a model location: the commands then read the pin)."""
    from alexnet.bench.plan import specs as plan_specs
    from alexnet.launch.options import specs as launch_specs
    from alexnet.launch.options import training_job_specs
    from alexnet.model.options import specs as evaluation_specs
    from alexnet.train.settings import specs as training_specs

    pin = specs(ModelPinOptions)
    spark_train = ["spark-train", "--workers", "2", "--board", "board"]
    spark_evaluate = ["spark-evaluate", "--workers", "2", "--model", "model"]
    return {
        "synth": [(LEADING["synth"], specs(SyntheticOptions))],
        "upload": [(LEADING["upload"], specs(UploadOptions))],
        "fetch": [(LEADING["fetch"], specs(PartitionOptions)), (LEADING["fetch"], specs(FetchOptions))],
        "train": [(LEADING["train"], training_specs()), (LEADING["train"], specs(PartitionOptions)),
                  (LEADING["train"], specs(FetchOptions))],
        "bench": [(LEADING["bench"], plan_specs()), (LEADING["bench"], specs(PartitionOptions)),
                  (LEADING["bench"], specs(FetchOptions))],
        "evaluate": [(LEADING["evaluate"], evaluation_specs()), (LEADING["evaluate"], specs(BoardImagesOptions)),
                     (PIN_LEADING["evaluate"], pin)],
        "predict": [(LEADING["predict"], specs(PredictOptions)), (PIN_LEADING["predict"], pin)],
        "features": [(LEADING["features"], specs(FeaturesOptions)), (PIN_LEADING["features"], pin)],
        "export": [(LEADING["export"], specs(ExportOptions)), (PIN_LEADING["export"], pin)],
        "spark-train": [(spark_train, training_specs()), (spark_train, training_job_specs()),
                        (spark_train, launch_specs())],
        "spark-evaluate": [(spark_evaluate, evaluation_specs()), (spark_evaluate, launch_specs()),
                           (PIN_LEADING["spark-evaluate"], pin)],
    }


#: The options the commands write by hand, not from a declaration.
OWN_OPTIONS = {"-h", "--help", "--json", "--board", "--workers", "--master", "--model",
               "--path", "--pin", "--pin-board", "--data", "--strategy", "--initial-pin", "--initial-board",
               "--initial-cache", "--validation", "-v", "--verbose", "-q", "--quiet", "--model-board"}


@pytest.mark.parametrize("command", sorted(_command_tables()))
def test_a_command_refuses_a_bad_value_naming_the_option_typed(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the relative board, model and folders of the leading words are made up here
    tables = _command_tables()[command]
    declared = {option_name(name, spec) for _, table in tables for name, spec in table.items()}
    flags = {flag for action in _parser(command)._actions for flag in action.option_strings
             if not flag.startswith("--no-")}
    assert flags - declared <= OWN_OPTIONS, f"neither declared nor the command's own: {flags - declared - OWN_OPTIONS}"
    tried = 0
    for leading, table in tables:
        for name, spec in table.items():
            flag, bad = option_name(name, spec), bad_value(name, spec)
            if flag is None or bad is None or spec.kind == "flag":
                continue
            assert main([*leading, flag, *cli_words(bad)]) == 2, (command, flag)
            message = capsys.readouterr().err
            # said as typed (`--model-pin`, `--min-images`), not as the core's name (`name`, `min_images`)
            assert f"`{flag}`" in message and f"`{name}`" not in message, (command, flag, message)
            tried += 1
    assert tried and list(tmp_path.iterdir()) == [], "refused before anything is written"


def test_a_misspelt_argument_of_a_function_is_offered_its_own_arguments_too(tmp_path):
    """`bord` was refused with a list of the options alone, neither offering `board` nor listing it."""
    with pytest.raises(AlexnetError, match=r"^imagenet_partition\(\) does not take `bord` \(did you mean `board`\?\): "
                                           r"fix the name, or leave it out\. Its arguments are: partition, total, "
                                           r"board, cache_dir, "):
        alexnet.imagenet_partition(0, 2, bord=str(tmp_path))
    with pytest.raises(AlexnetError, match=r"does not take `partiton` \(did you mean `partition`\?\)"):
        alexnet.imagenet_validation(str(tmp_path), partiton=1)
