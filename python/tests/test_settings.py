"""The training settings' declaration reaches every front end: each setting is in ``alexnet_train``'s signature
and help, on the command line, in R's table and in the typed settings a Spark worker receives, with the same
default, and a bad value of it is refused with the same message by the call, the command line and the driver of a
Spark job, before any data is fetched or job launched. The walk is over the declaration itself, so a setting added
there alone is covered.

(R's side of the walk is tests/testthat/test-settings.R.)
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from helpers_cli import help_as_said
from helpers_declared import cli_words, option_refusal, other_value, refusal

import alexnet
from alexnet.cli import build_parser, common, main, to_r
from alexnet.declare import declaration
from alexnet.declare.kinds import option_name
from alexnet.errors import AlexnetError
from alexnet.launch.job import plan_job
from alexnet.launch.task import Task
from alexnet.launch.work import worker_function
from alexnet.train.settings import TrainSettings, defaults, specs
from alexnet.train.settings_check import check_settings

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = {"image": ["/nowhere/a.JPEG"], "category": ["n00000001"], "categories": ["n00000001"]}
SETTINGS = list(specs().items())
IDS = [name for name, _ in SETTINGS]


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_every_setting_is_in_the_signature_and_the_help_with_its_default(name, spec):
    parameter = inspect.signature(alexnet.alexnet_train).parameters[name]
    assert parameter.default == spec.default
    assert f"``{name}`` (default ``{spec.default!r}``)" in alexnet.alexnet_train.__doc__


def test_the_signature_has_the_settings_and_nothing_else_but_what_training_is_on():
    parameters = list(inspect.signature(alexnet.alexnet_train).parameters)
    assert parameters[:5] == ["batch_size", "epochs", "data", "strategy", "parallel"]
    assert sorted(set(parameters) - set(specs())) == ["callbacks", "data", "strategy"]


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_every_setting_on_the_command_line_has_its_default_in_the_help(name, spec):
    from alexnet.cli.train import setting_dest

    flag = option_name(name, spec)
    if flag is None:
        pytest.skip(f"{name} is not on the command line (the declaration says so)")
    for command in ("train", "spark-train"):
        sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        action = next(a for a in sub._actions if flag in a.option_strings)
        assert action.dest == setting_dest(name) and help_as_said(command, common.declared_help(spec)) in action.help
        if spec.default is not None:
            assert f"(default: {spec.shown_default()})" in action.help


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_a_value_given_on_the_command_line_reaches_the_settings(name, spec):
    from alexnet.cli.train import training_args

    flag = option_name(name, spec)
    if flag is None:
        pytest.skip(f"{name} is not on the command line (the declaration says so)")
    value = other_value(name, spec)
    if spec.kind == "flag":
        words = [flag if value else "--no-" + flag[2:]]
    else:
        words = [flag, *cli_words(list(value) if isinstance(value, tuple) else value)]
    args = build_parser().parse_args(["train", *words])
    assert spec.convert(training_args(args)[name], name) == spec.convert(
        list(value) if isinstance(value, tuple) else value, name)


BOUNDED = [(name, spec) for name, spec in SETTINGS if spec.maximum is not None or spec.below is not None]


@pytest.mark.parametrize(("name", "spec"), BOUNDED, ids=[name for name, _ in BOUNDED])
def test_a_value_past_a_settings_upper_bound_is_refused_before_training(name, spec):
    past = spec.below if spec.below is not None else spec.maximum + 1
    with pytest.raises(AlexnetError, match=rf"^`{name}` must be .*, not {past:g}\.$"):
        check_settings({name: past})


def test_a_number_is_said_as_written_and_a_string_is_not_one():
    # R's -1 arrives as -1.0: said as the user wrote it
    with pytest.raises(AlexnetError, match=r"^`learning_rate` must be a number > 0, not -1\.$"):
        check_settings({"learning_rate": -1.0})
    with pytest.raises(AlexnetError, match=r"^`momentum` must be a number between 0 and 1, not '0\.9'\.$"):
        check_settings({"momentum": "0.9"})
    for number in ("25", True):  # as whole numbers are refused as strings, so are numbers
        with pytest.raises(AlexnetError, match=r"^`allreduce_pack_mb` must be a number >= 0, not "):
            check_settings({"allreduce_pack_mb": number})


NUMBERS = [(name, spec) for name, spec in SETTINGS if spec.kind == "number"]


@pytest.mark.parametrize(("name", "spec"), NUMBERS, ids=[name for name, _ in NUMBERS])
def test_an_infinite_number_is_refused_as_nan_is_by_the_call_and_the_command_line(name, spec, tmp_path, capsys):
    # no setting takes an infinity: a pack of infinite megabytes overflowed when its bytes were counted
    for value, said in ((float("inf"), "inf"), (float("-inf"), "-inf"), (float("nan"), "nan")):
        with pytest.raises(AlexnetError, match=rf"^`{name}` must be a number[^,]*, not {said}\.$"):
            check_settings({name: value})
        with pytest.raises(AlexnetError, match=rf"^`{name}` must be a number[^,]*, not {said}\.$"):
            alexnet.alexnet_train(data=NOWHERE, **{name: value})
    flag = option_name(name, spec)
    if flag is not None:
        assert main(["train", "--board", str(tmp_path / "no-board"), flag, "inf"]) == 2
        assert f"`{flag}` must be a number" in capsys.readouterr().err


def test_a_dropout_of_one_is_refused_before_keras_fails_at_the_first_step():
    with pytest.raises(AlexnetError, match=r"^`dropout` must be a number >= 0 and < 1, not 1\.$"):
        check_settings({"dropout": 1})


@pytest.mark.parametrize(("name", "spec"), SETTINGS, ids=IDS)
def test_a_bad_value_is_refused_alike_by_the_call_the_command_line_and_the_spark_driver(name, spec, tmp_path,
                                                                                       capsys):
    bad, message = refusal(check_settings, name, spec)
    with pytest.raises(AlexnetError) as called:
        alexnet.alexnet_train(data=NOWHERE, **{name: bad})
    assert str(called.value) == message
    with pytest.raises(AlexnetError) as planned:
        plan_job(1, tmp_path / "no-board", 1, **{name: bad})  # refused before the board is opened
    assert str(planned.value) == message
    flag = option_name(name, spec)
    if flag is not None:
        assert main(["train", "--board", str(tmp_path / "no-board"), flag, *cli_words(bad)]) == 2
        assert f"alexnet train: error: {option_refusal(name, spec, bad)}" in capsys.readouterr().err


def test_a_worker_receives_every_setting_typed_as_the_driver_checked_it():
    # every setting at a value other than its default, through the task as R carries it (plain values)
    changed = dataclasses.replace(check_settings({}), **{name: other_value(name, spec) for name, spec in SETTINGS})
    task = Task(kind="train", board="/boards/b", workers=2, settings=changed)
    again = Task.from_dict(task.to_dict())
    assert again.settings == changed
    assert worker_function(again).keywords["task"].settings == changed
    assert TrainSettings.from_dict(defaults()) == check_settings({})


def test_r_reads_every_declaration_as_it_is():
    for file in to_r.TABLES:
        assert (ROOT / "R" / file).read_text() == to_r.r_source(file), (
            f"R/{file} is not what its declaration gives: run `make docs` (make setup writes it too)")


def test_xla_is_on_gpus_unless_jit_compile_says_otherwise():
    unset = check_settings({})
    assert (unset.xla(gpu=True), unset.xla(gpu=False)) == (True, False)
    for asked in (True, False):
        assert {check_settings({"jit_compile": asked}).xla(gpu) for gpu in (True, False)} == {asked}


def test_xla_is_off_by_default_where_the_gradients_are_all_reduced_between_devices():
    """Unset, XLA is on for one GPU only: XLA-compiled steps that all-reduce have failed under
    MultiWorkerMirroredStrategy and over several GPUs; asked for, it is on everywhere; the history records which and
    why."""
    from alexnet.train.run import _xla
    from alexnet.train.strategy import Topology

    unset, asked = check_settings({}), check_settings({"jit_compile": True})
    assert unset.xla_choice(True) == (True, "unset: on one GPU")
    assert unset.xla_choice(False, strategy="mirrored", replicas=2) == (False, "unset: off on a CPU")
    for strategy, replicas, where in (("multi_worker", 1, "under multi_worker"),
                                      ("multi_worker", 16, "under multi_worker"),
                                      ("mirrored", 8, "with 8 replicas"), ("MyStrategy", 2, "with 2 replicas")):
        on, why = unset.xla_choice(True, strategy=strategy, replicas=replicas)
        assert not on and why.startswith(f"unset: off {where}, where XLA-compiled steps that all-reduce"), why
        assert "tensorflow/tensorflow#58961" in why and "set `jit_compile`" in why
        assert asked.xla_choice(True, strategy=strategy, replicas=replicas) == (True, "asked for (`jit_compile`)")
        assert not unset.xla(True, strategy=strategy, replicas=replicas)
    # a run's topology decides it: eight GPUs of one machine, and one
    assert _xla(unset, Topology("mirrored", 8, 1, 0, True, 8, True))[0] is False
    assert _xla(unset, Topology("default", 1, 1, 0, True, 1, True)) == (True, "unset: on one GPU")
    assert "off on CPUs, under multi_worker and with several replicas" in specs()["jit_compile"].help


def test_what_puts_a_setting_to_use_is_a_setting_of_its_own_declaration():
    # a setting copied into another declaration (`like`) keeps what uses it: that must be declared there too
    import alexnet.bench.accuracy
    import alexnet.bench.plan
    import alexnet.bench.scaling
    import alexnet.data.options
    import alexnet.launch.options
    import alexnet.model.options
    import alexnet.train.settings
    from alexnet.declare import declaration

    modules = (alexnet.train.settings, alexnet.bench.plan, alexnet.bench.accuracy, alexnet.bench.scaling,
               alexnet.data.options, alexnet.launch.options, alexnet.model.options)
    used = {}
    for module in modules:
        for item in vars(module).values():
            if isinstance(item, type) and dataclasses.is_dataclass(item) and item.__module__ == module.__name__ \
                    and any("spec" in f.metadata for f in dataclasses.fields(item)):
                table = declaration.specs(item)
                for name, spec in table.items():
                    if spec.used_with is not None:
                        used[f"{item.__name__}.{name}"] = spec.used_with.used(declaration.defaults(item))
    assert len(used) >= 11 and used["TrainSettings.patience"] is False and used["UploadOptions.quality"] is False
    assert used["TrainingJobOptions.crops"] is False and used["BenchSettings.quality"] is False


@pytest.mark.parametrize(("name", "value", "without", "needed", "what"), [
    ("model_board", "models", {}, {"model_pin": "alexnet"}, "`model_pin`"),
    ("model_format", "keras+savedmodel", {}, {"model_pin": "alexnet"}, "`model_pin`"),
    ("log_every", 5, {}, {"log_dir": "logs"}, "`log_dir`"),
    ("profile_steps", [2, 3], {}, {"log_dir": "logs"}, "`log_dir`"),
    ("local_sgd_after", 1, {"adapt_communication": True}, {"sync_every": 4}, "`sync_every` above 1"),
    ("lr_drop_epochs", [1], {}, {"lr_schedule": "step"}, "lr_schedule = 'step'"),
    ("patience", 5, {}, {"lr_schedule": "plateau"}, "lr_schedule = 'plateau'"),
    ("validation_steps", 2, {"validation": False}, {}, "`validation`"),
])
def test_a_setting_given_without_the_one_that_uses_it_gets_a_warning(name, value, without, needed, what, tmp_path,
                                                                     caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("WARNING", logger="alexnet.train.settings"):
        check_settings({name: value, **without})
    assert f"`{name}` is only used with {what}: " in caplog.text
    caplog.clear()
    default = specs()[name].default
    with caplog.at_level("WARNING", logger="alexnet.train.settings"):
        check_settings({name: value, **needed}, data_board=str(tmp_path / "board"))
        check_settings({name: default, **without})  # the default is not "given", whatever its type
        check_settings({name: list(default) if isinstance(default, tuple) else default, **without})
    assert "is only used with" not in caplog.text


def test_local_sgd_that_would_never_start_gets_a_warning(caplog):
    with caplog.at_level("WARNING", logger="alexnet.train.settings"):
        check_settings({"sync_every": 4, "local_sgd_after": 2, "epochs": 2})
    assert "`local_sgd_after` = 2 is not below `epochs` (2): every epoch trains synchronously, and `sync_every` is " \
           "not used; give `local_sgd_after` below 2." in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.train.settings"):
        check_settings({"sync_every": 4, "local_sgd_after": 1, "epochs": 2})
    assert not caplog.text


def test_a_collective_timeout_of_never_is_given_on_the_command_line_as_its_word():
    from alexnet.cli.train import training_args

    def given(*words: str) -> dict:
        return training_args(build_parser().parse_args(["train", *words]))

    assert given("--collective-timeout", "never")["collective_timeout"] is None
    assert given("--collective-timeout", "90")["collective_timeout"] == 90
    with pytest.raises(AlexnetError, match=r"^`--collective-timeout` must be a positive number of seconds or "
                                           r"'never', not 0\.0\.$"):
        given("--collective-timeout", "0")


def test_a_path_given_to_a_cluster_is_said_once_for_each_folder(tmp_path, caplog):
    """On a cluster (``shared``) every local path among the outputs is said, each folder once: ``model_dir``, which is
    ``checkpoint_dir`` when not given, is not said again."""
    run, logs = tmp_path / "run", tmp_path / "logs"
    with caplog.at_level("WARNING", logger="alexnet"):
        settings = check_settings({"checkpoint_dir": str(run), "log_dir": str(logs)}, shared=True)
    said = [r.getMessage() for r in caplog.records if r.name == "alexnet.train.settings" and "is a path" in
            r.getMessage()]
    assert settings.model_dir == str(run)
    assert [line.split(" is a path")[0] for line in said] == [f"`checkpoint_dir` = {run}", f"`log_dir` = {logs}"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet"):
        check_settings({"checkpoint_dir": str(run)})
    assert not [r for r in caplog.records if "is a path" in r.getMessage()], "one machine: nothing to say"


def test_durations_in_help_texts_are_said_from_their_constants():
    from alexnet.checks import seconds_words
    from alexnet.train.cluster import HEARTBEAT_TIMEOUT, TRACE_GRACE
    from alexnet.train.formats import RUN_LOCK_PATIENCE
    assert [seconds_words(s) for s in (60, 120, 600, 30, 90, 660)] == [
        "a minute", "two minutes", "ten minutes", "30 s", "90 s", "660 s"]
    helps = {name: spec.help for name, spec in specs().items()}
    assert f"{seconds_words(TRACE_GRACE)} more for the first" in helps["collective_timeout"]
    assert f"or for {seconds_words(HEARTBEAT_TIMEOUT)} if less" in helps["collective_timeout"]
    assert f"waits up to {seconds_words(RUN_LOCK_PATIENCE)} for it" in helps["checkpoint_dir"]


def test_every_function_whose_own_signature_hides_declared_settings_records_them():
    """A public function written with ``**`` keywords (or ``*`` ones) records the declared settings its signature
    takes, and those its ``**`` keywords take besides: a Spark training's settings, with the default its workers
    train with, which its signature at run time lists after its own."""
    hiding = {}
    for name in alexnet.__all__:
        function = getattr(alexnet, name)
        code = None if isinstance(function, type) else inspect.unwrap(function).__code__
        if code is not None and code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            hiding[name] = declaration.declared_by(function)
    assert len(hiding) == 13 and None not in hiding.values()
    for name, declared in hiding.items():
        parameters = inspect.signature(getattr(alexnet, name)).parameters
        assert set(declared.named) <= set(parameters), name
        assert list(parameters)[len(parameters) - len(declared.keywords):] == list(declared.keywords), name
    assert set(hiding["alexnet_spark_train"].keywords) == set(specs())
    assert hiding["alexnet_spark_train"].keywords["verbose"].default == 2
    assert set(hiding["alexnet_train"].named) == set(specs())


def test_every_setting_says_what_a_python_caller_may_give_it():
    """Each kind's annotation of a Python caller's value (what its conversion takes), a choice's as a ``Literal`` of
    its values and aliases, and ``None`` where the setting takes it."""
    from alexnet.declare.kinds import KINDS
    from alexnet.launch.options import LaunchOptions
    from alexnet.model.options import EvaluationOptions

    assert all(kind.accepts != "Any" for kind in KINDS.values())
    settings = specs()
    assert settings["lr_schedule"].accepts == 'Literal["linear", "cosine", "step", "plateau"]'
    assert settings["precision"].accepts == ('Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", '
                                             '"half", "mixed_bfloat16", "mixed_float16"] | None')
    assert settings["checkpoint_dir"].accepts == "str | os.PathLike[str] | None"
    assert settings["image_size"].accepts == "int | Sequence[int]"
    assert settings["lr_drop_epochs"].accepts == "int | Sequence[int] | None"  # None: no drops, as R's NULL
    assert settings["initial_model"].accepts == "str | os.PathLike[str] | Mapping[str, Any] | None"
    assert (settings["epochs"].accepts, settings["seed"].accepts, settings["jit_compile"].accepts) == \
        ("int", "int | None", "bool | None")
    assert declaration.specs(EvaluationOptions)["crops"].accepts == "Literal[1, 10]"
    assert declaration.specs(LaunchOptions)["env"].accepts == "Mapping[str, str] | None"
