"""The declarations of a Spark job's options (launch options, a training job's own) and of an evaluation's reach
every front end: each option is in the signatures and help of ``alexnet_spark_train`` / ``alexnet_spark_evaluate``
(and ``alexnet_evaluate`` for an evaluation's), on the command line's ``spark-train`` / ``spark-evaluate``
(``evaluate``) with its help and default, and, typed, in the task every worker is handed; a bad value is refused
with a message naming it before the board is read. The walk is over the declarations, so an option added to one
of them alone is covered. (R's side: tests/testthat/test-spark.R; the generated R tables: tests/test_settings.py.)
"""

from __future__ import annotations

import inspect
import json

import pytest
from helpers_cli import help_as_said
from helpers_declared import cli_words, other_value, refusal

import alexnet
from alexnet.cli import build_parser, common
from alexnet.cli.cluster import launch_dest
from alexnet.cli.common import declared_args
from alexnet.cli.model import evaluation_args, evaluation_dest
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload
from alexnet.declare.kinds import option_name
from alexnet.launch.job import plan_job
from alexnet.launch.options import specs as launch_specs
from alexnet.launch.options import training_job_specs
from alexnet.launch.task import Task
from alexnet.model.card import CARD_FILE, ModelCard
from alexnet.model.options import specs as evaluation_specs
from alexnet.train.resumed import check_resume

LAUNCH = list(launch_specs().items())
TRAINING_JOB = list(training_job_specs().items())
EVALUATION = list(evaluation_specs().items())
#: Which functions and commands take each group of options.
TAKEN_BY = {
    "launch": (("alexnet_spark_train", "spark-train"), ("alexnet_spark_evaluate", "spark-evaluate")),
    "training job": (("alexnet_spark_train", "spark-train"),),
    "evaluation": (("alexnet_spark_evaluate", "spark-evaluate"), ("alexnet_evaluate", "evaluate")),
}
CASES = [("launch", name, spec) for name, spec in LAUNCH] + \
    [("training job", name, spec) for name, spec in TRAINING_JOB] + \
    [("evaluation", name, spec) for name, spec in EVALUATION]
IDS = [f"{group}:{name}" for group, name, _ in CASES]
CLASSES = 3


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A board of three categories with validation images, and a model of three outputs for it (its card is all a
    plan reads of it)."""
    root = tmp_path_factory.mktemp("options")
    src = imagenet_synthetic(root / "src", classes=CLASSES, images_per_class=1, val_per_class=1, max_side=48)
    imagenet_upload(src["path"], board=root / "board", workers=2)
    model = root / "model"
    model.mkdir()
    (model / "alexnet.keras").write_bytes(b"not read by a plan")
    ids = list(src["categories"])  # the board's classes, as a model trained on it names them
    (model / CARD_FILE).write_text(ModelCard(image_size=64, num_classes=CLASSES, class_ids=ids,
                                             class_names=ids).to_json())
    return {"board": str(root / "board"), "model": str(model)}


def _parser(command: str):
    return build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]


def _dest(group: str):
    return evaluation_dest if group == "evaluation" else launch_dest


def _planned(plan, group: str, name: str):
    """Where the task a worker is handed keeps option ``name`` of ``group``."""
    if group == "launch":
        return getattr(plan.task.options, name)
    if group == "evaluation":
        return getattr(plan.task.evaluation.options, name)
    return plan.task.evaluation is not None if name == "evaluate" else plan.task.evaluation.options.crops


@pytest.mark.parametrize(("group", "name", "spec"), CASES, ids=IDS)
def test_every_option_is_in_the_signatures_help_and_commands_with_its_default(group, name, spec):
    for function, command in TAKEN_BY[group]:
        core = getattr(alexnet, function)
        parameter = inspect.signature(core).parameters[name]
        assert parameter.default == spec.default and parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert f"``{name}`` (default ``{spec.default!r}``)" in core.__doc__, function
        flag = option_name(name, spec)
        if flag is None:
            continue
        action = next(a for a in _parser(command)._actions if flag in a.option_strings)
        assert action.dest == _dest(group)(name), command
        assert help_as_said(command, common.declared_help(spec)) in action.help, command
        if spec.default is not None:
            assert f"(default: {spec.shown_default()})" in action.help


@pytest.mark.parametrize(("group", "name", "spec"), CASES, ids=IDS)
def test_a_value_on_the_command_line_reaches_the_task_of_every_worker(group, name, spec, job, tmp_path):
    value = {"base_port": 9100, "evaluate": True}.get(name, other_value(name, spec))
    if spec.kind == "location":
        value = str(tmp_path / name)
    for function, command in TAKEN_BY[group]:
        if function == "alexnet_evaluate":
            continue  # one machine: no task (tests/test_evaluate.py scores with these options)
        kind = "train" if command == "spark-train" else "evaluate"
        given = {"evaluate": True} if name == "crops" and kind == "train" else {}
        flag = option_name(name, spec)
        if flag is not None:
            words = [flag if value else "--no-" + flag[2:]] if spec.kind == "flag" else [flag, *cli_words(value)]
            args = build_parser().parse_args([command, "--workers", "2", *words])
            parsed = {**declared_args(args, {**training_job_specs(), **launch_specs()}, launch_dest),
                      **evaluation_args(args)}
            assert parsed[name] == value or spec.convert(parsed[name], name) == spec.convert(value, name)
        extra = {"model": job["model"]} if kind == "evaluate" else {"epochs": 1}
        plan = plan_job(2, job["board"], 2, kind=kind, **{**extra, **given, name: value})
        assert _planned(plan, group, name) == spec.convert(value, name)
        again = Task.from_dict(json.loads(json.dumps(plan.task.to_dict())))  # as R and JSON carry it
        assert again == plan.task


@pytest.mark.parametrize(("group", "name", "spec"), CASES, ids=IDS)
def test_a_bad_value_is_refused_before_the_board_is_read(group, name, spec, tmp_path):
    nowhere = str(tmp_path / "no-board")
    for function, _ in TAKEN_BY[group]:
        if function == "alexnet_evaluate":
            check = lambda values: alexnet.alexnet_evaluate(str(tmp_path / "no-model"), board=nowhere, **values)  # noqa: E731
        else:
            kind = "train" if function == "alexnet_spark_train" else "evaluate"
            extra = {"model": str(tmp_path / "no-model")} if kind == "evaluate" else {}
            check = lambda values, kind=kind, extra=extra: plan_job(2, nowhere, 2, kind=kind, **extra, **values)  # noqa: E731
        refusal(check, name, spec)


def test_options_not_taken_are_named_with_the_closest(job):
    from alexnet.errors import AlexnetError

    with pytest.raises(AlexnetError, match=r"does not take `retry` \(did you mean `retries`\?\)"):
        plan_job(2, job["board"], 2, kind="evaluate", model=job["model"], retry=1)
    with pytest.raises(AlexnetError, match=r"does not take `crop` \(did you mean `crops`\?\)"):
        alexnet.alexnet_evaluate(job["model"], board=job["board"], crop=10)


def test_crops_without_evaluate_gets_a_warning_that_nothing_is_evaluated(tmp_path, caplog):
    from alexnet.launch.training import check_training

    with caplog.at_level("WARNING", logger="alexnet.launch.training"):
        planned = check_training(2, str(tmp_path / "board"), crops=10)
    assert planned["evaluation"] is None
    assert "`crops` is only used with `evaluate`: the model is not evaluated as the training ends." in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.launch.training"):
        planned = check_training(2, str(tmp_path / "board"), crops=10, evaluate=True)
        check_training(2, str(tmp_path / "board"), crops=1)
    assert planned["evaluation"].options.crops == 10 and "only used with" not in caplog.text


def test_checkpoints_of_another_model_are_refused_on_the_driver_before_any_launch(job, tmp_path):
    from alexnet.errors import AlexnetError
    from alexnet.train.checkpoint import STATE_FILE

    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    written = {"num_classes": CLASSES, "dense_units": 4096, "grouped": False, "train_from": "conv1",
               "initial_model": None, "global_batch_size": 64, "steps": 10}
    (checkpoints / STATE_FILE).write_text(json.dumps({"settings": written}))
    # the same model: planned (the workers resume)
    plan_job(2, job["board"], 2, checkpoint_dir=str(checkpoints))
    # another: refused once, on the driver, rather than by every worker of every launch
    with pytest.raises(AlexnetError, match=r"The checkpoints in .*checkpoints were written for another model "
                                           r"\(`dense_units`: 4096 then, 128 now\)"):
        plan_job(2, job["board"], 2, checkpoint_dir=str(checkpoints), dense_units=128, retries=2)
    # a switch is said on or off, as R's TRUE, Python's True and an option given all read it; unset, none
    with pytest.raises(AlexnetError, match=r"\(`grouped`: off then, on now; `initial_model`: none then, m now\)"):
        check_resume(written, {"grouped": True, "initial_model": "m", "dense_units": 4096}, "ck")


class _NoSpark:
    """A SparkContext of two task slots that fails any job submitted to it."""

    master = "local[2]"
    defaultParallelism = 2

    def __init__(self) -> None:
        self.jobs = 0

    def getConf(self):
        return {}

    def parallelize(self, *args, **kwargs):
        self.jobs += 1
        raise AssertionError("a Spark job was submitted")


def test_checkpoints_on_other_classes_are_refused_on_the_driver_with_the_workers_words(job, tmp_path):
    """Every worker of a run resuming checkpoints trained on other classes would refuse them once launched: the driver
    refuses them first, in the words of the run (the chief's check, CheckpointStore.check_classes), from the history
    file and the card beside the checkpoints (the checkpoint itself is not read: here it is not one)."""
    from alexnet.errors import AlexnetError
    from alexnet.launch import api
    from alexnet.launch.r import r_job
    from alexnet.storage.board import open_board
    from alexnet.storage.layout import read_categories
    from alexnet.train.checkpoint import STATE_FILE, CheckpointStore

    ids = [str(row["id"]) for row in read_categories(open_board(job["board"]))]
    other = [ids[0], "n09999999", ids[2]]
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    written = {"num_classes": CLASSES, "dense_units": 4096, "grouped": False, "train_from": "conv1",
               "initial_model": None, "data": {"class_ids": other}}
    (checkpoints / STATE_FILE).write_text(json.dumps({"format": 1, "settings": written}))
    # without a checkpoint there is nothing the workers would resume, so nothing they would refuse
    plan_job(2, job["board"], 2, checkpoint_dir=str(checkpoints))
    for name in ("ckpt-3.index", "ckpt-3.data-00000-of-00001"):
        (checkpoints / name).write_bytes(b"not a checkpoint: not read on the driver")
    store = CheckpointStore(str(checkpoints), chief=False)
    try:
        with pytest.raises(AlexnetError) as worker:
            store.check_classes(written, ids)  # what the chief says, once launched
    finally:
        store.close()
    said = str(worker.value)
    assert said.startswith(f"The checkpoints in {checkpoints} were trained on other classes than this data's: 1 of "
                           f"their 3 outputs would stand for another class (label 1: n09999999 then, {ids[1]} now).")
    with pytest.raises(AlexnetError) as driver:
        plan_job(2, job["board"], 2, checkpoint_dir=str(checkpoints), retries=2)
    assert str(driver.value) == said
    # from Python and from R, refused before any Spark job (the executors' probe, the barrier stage)
    spark = _NoSpark()
    with pytest.raises(AlexnetError) as python:
        api.alexnet_spark_train(spark, 2, job["board"], checkpoint_dir=str(checkpoints))
    assert str(python.value) == said and spark.jobs == 0

    def no_job(*args):
        raise AssertionError("a Spark job was submitted")

    with pytest.raises(AlexnetError) as r:
        r_job("train", 2, job["board"], 2, 1, False, None, no_job, no_job, checkpoint_dir=str(checkpoints))
    assert str(r.value) == said
    # an older history, which does not record the classes: the card of the model saved beside the checkpoints tells
    (checkpoints / STATE_FILE).write_text(json.dumps({"settings": {k: v for k, v in written.items() if k != "data"}}))
    (checkpoints / CARD_FILE).write_text(ModelCard(image_size=64, num_classes=CLASSES, class_ids=other,
                                                   class_names=other).to_json())
    with pytest.raises(AlexnetError, match=r"1 of their 3 outputs would stand for another class \(label 1: "
                                           r"n09999999 then, .* give `initial_model` = the `model_dir` their run "
                                           r"saved its model to and a new `checkpoint_dir`"):
        plan_job(2, job["board"], 2, checkpoint_dir=str(checkpoints))
    # checkpoints trained on the board's classes: planned (the workers resume them)
    (checkpoints / CARD_FILE).write_text(ModelCard(image_size=64, num_classes=CLASSES, class_ids=ids,
                                                   class_names=ids).to_json())
    plan_job(2, job["board"], 2, checkpoint_dir=str(checkpoints))


def test_a_resume_at_another_global_batch_gets_a_warning(caplog):
    from alexnet.train.resumed import warn_of_changes

    with caplog.at_level("WARNING", logger="alexnet.train.checkpoint"):
        changed = warn_of_changes({"global_batch_size": 16, "steps": 5}, {"global_batch_size": 8, "steps": 10}, "ck")
        assert warn_of_changes({"global_batch_size": 16, "steps": 5}, {"global_batch_size": 16, "steps": 5},
                               "ck") == {}
    assert changed == {"global_batch_size": [16, 8], "steps": [5, 10]}
    assert caplog.text.count("a global batch of 16 images then, 8 now") == 1
    assert "5 steps an epoch then, 10 now" in caplog.text
    assert "resume with the same to continue the run as it began" in caplog.text


def test_a_resume_on_other_images_or_learning_otherwise_gets_one_warning_naming_each_change(caplog):
    from alexnet.train.resumed import warn_of_changes
    from alexnet.train.settings import LEARNT_WITH, TrainSettings, specs

    assert set(LEARNT_WITH) <= set(specs()), "every name a setting"
    then = TrainSettings.from_dict({})
    now = TrainSettings.from_dict({"learning_rate": 0.05, "lr_schedule": "cosine", "momentum": 0.5, "patience": 5})
    data = {"board": "/b", "partition": 0, "total": 1, "class_ids": "aa", "train_images": 180, "val_images": 30}
    saved = {"learnt_with": then.learnt_with(), "data": data, "epochs": 3}
    current = {"learnt_with": now.learnt_with(), "data": dict(data, partition=1, total=2, train_images=90,
                                                               val_images=15), "epochs": 3}
    with caplog.at_level("WARNING", logger="alexnet.train.checkpoint"):
        changed = warn_of_changes(saved, current, "ck")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, "one line"
    assert changed["data"] == {"partition": [0, 1], "total": [1, 2], "train_images": [180, 90],
                               "val_images": [30, 15]}
    assert {k: v for k, v in changed.items() if k != "data"} == {
        "learning_rate": [0.01, 0.05], "lr_schedule": ["linear", "cosine"], "momentum": [0.9, 0.5]}, \
        "patience, which the linear and cosine schedules leave unused, is not compared"
    assert lines[0].startswith("The checkpoints in ck were written by a run that trained otherwise: other images "
                               "(partition 0 then, 1 now, `total` 1 then, 2 now, training images 180 then, 90 now, "
                               "validation images 30 then, 15 now); `learning_rate`: 0.01 then, 0.05 now; "
                               "`lr_schedule`: 'linear' then, 'cosine' now; `momentum`: 0.9 then, 0.5 now.")
    # another board (other classes are refused before: check_classes); an older history file, which recorded none
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.train.checkpoint"):
        other = warn_of_changes(saved, dict(saved, data=dict(data, board="/c")), "ck")
        assert warn_of_changes({"epochs": 3}, current, "ck") == {}
    assert other == {"data": {"board": ["/b", "/c"]}}
    assert caplog.text.count("other images (board /b then, /c now)") == 1
    # other epochs alone: said, and recorded, only with what they do to the rate
    caplog.clear()
    with caplog.at_level("WARNING", logger="alexnet.train.checkpoint"):
        assert warn_of_changes(saved, dict(saved, epochs=5), "ck") == {}
        assert warn_of_changes(saved, dict(saved, epochs=5), "ck", relaid="laid out again") == {"epochs": [3, 5]}
    assert caplog.text.count("trained otherwise") == 1 and "`epochs`: 3 then, 5 now (laid out again)." in caplog.text
    assert "resume with the same" not in caplog.text


def test_a_resume_with_other_workers_each_on_its_own_partition_says_the_workers(caplog):
    """Runs whose every worker trained on its own partition of as many as there were workers (a Spark job's, whose
    caller gave `workers`) differ in their workers, not in a partition or `total` their caller never gave; a run of
    one worker on one partition of two still says its partition and `total`."""
    from alexnet.train.resumed import warn_of_changes

    two = {"board": "/b", "partition": None, "total": 2, "workers": 2, "train_images": 160, "val_images": 8}
    one = dict(two, partition=0, total=1, workers=1, train_images=320, val_images=16)
    with caplog.at_level("WARNING", logger="alexnet.train.checkpoint"):
        changed = warn_of_changes({"data": two}, {"data": one}, "ck")
        halved = warn_of_changes({"data": one}, {"data": dict(one, partition=1, total=2, train_images=160)}, "ck")
    assert changed == {"data": {"workers": [2, 1], "train_images": [160, 320], "val_images": [8, 16]}}
    assert ("other images (2 workers then, 1 now, training images 160 then, 320 now, validation images 8 then, 16 "
            "now)") in caplog.records[0].getMessage()
    assert halved == {"data": {"partition": [0, 1], "total": [1, 2], "train_images": [320, 160]}}
    assert "other images (partition 0 then, 1 now, `total` 1 then, 2 now, " in caplog.records[1].getMessage()
    # what a run records of its data: its workers, with the partition of one worker only
    from types import SimpleNamespace

    from alexnet.train.resumed import trained_on

    recorded = trained_on({"board": "/b", "partition": 1, "total": 2}, SimpleNamespace(class_ids=["n0"]),
                          SimpleNamespace(train_images=3, val_images=1), SimpleNamespace(workers=2))
    assert (recorded["partition"], recorded["total"], recorded["workers"]) == (None, 2, 2)


def test_a_finished_run_asked_to_train_otherwise_names_each_setting_it_leaves_unused(caplog):
    """Nothing is left to train: a setting other than the finished run's changes nothing, and is named as such (more
    or fewer epochs are the finished run's own words: a larger `epochs` trains further)."""
    from alexnet.train.checkpoint import Resume
    from alexnet.train.resumed import say_finished
    from alexnet.train.settings import TrainSettings

    then = TrainSettings.from_dict({"checkpoint_dir": "/ck"})
    now = TrainSettings.from_dict({"checkpoint_dir": "/ck", "learning_rate": 0.05, "epochs": 2})
    data = {"board": "/b", "partition": 0, "total": 1, "train_images": 180, "val_images": 30}
    start = Resume(epoch=3, settings={"learnt_with": then.learnt_with(), "data": data, "epochs": 3}, restored=True)
    for current, unused in (({"learnt_with": now.learnt_with(), "data": dict(data, board="/c"), "epochs": 2},
                             "other images (board /b then, /c now); `learning_rate`: 0.01 then, 0.05 now"),
                            ({"learnt_with": then.learnt_with(), "data": data, "epochs": 2}, None)):
        caplog.clear()
        with caplog.at_level("INFO", logger="alexnet.train.checkpoint"):
            say_finished(now, start, "laid out again", current)
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert "/ck holds a finished run: it trained 3, more than the 2 epochs asked for" in caplog.text
        if unused is None:
            assert warned == [], "the same settings, fewer epochs: nothing more to say"
            continue
        assert warned == [f"/ck holds a finished run, which trained otherwise than asked now: {unused}. Nothing is "
                          "trained with these, and the model is the one that run ended with; to train with them, "
                          "give a new `checkpoint_dir` (and `initial_model` = that run's model to start from it), or "
                          "a larger `epochs` to train further so."]


def test_the_base_port_s_help_says_the_ephemeral_ports_the_code_assumes():
    import subprocess
    import sys

    assert "below the hosts' ephemeral ports, 32768 on Linux" in launch_specs()["base_port"].help
    code = ("import alexnet.train.cluster as c\nc.EPHEMERAL_PORTS = (49152, 65535)\n"
            "from alexnet.launch.options import specs\nprint(specs()['base_port'].help)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "below the hosts' ephemeral ports, 49152 on Linux" in out
