"""A local path that starts with ``~`` starts in the home folder, as in a shell, whatever setting or argument takes it
(``cache_dir = "~/models"`` from R, ``--model-cache '~/m'`` quoted on the command line): never a folder named ``~``
made in the working folder. A ``~`` further in a path, and a URL, are taken as written. The walk is over every
declaration of the package, so a location setting added to one of them is covered.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers_model import pinned_bytes

from alexnet.declare import declaration
from alexnet.declare.kinds import Spec
from alexnet.errors import AlexnetError
from alexnet.storage.location import home_expanded, resolve_location

PACKAGE = Path(__file__).resolve().parents[1] / "alexnet"


def _declarations() -> list[type]:
    """Every declaration of the package: the dataclasses of setting fields of each module that declares settings."""
    found = []
    for file in sorted(PACKAGE.rglob("*.py")):
        if not re.search(r"= (setting|like)\(", file.read_text(encoding="utf-8")):
            continue
        name = ".".join(("alexnet", *file.relative_to(PACKAGE).with_suffix("").parts))
        module = importlib.import_module(name)
        found += [item for item in vars(module).values()
                  if isinstance(item, type) and dataclasses.is_dataclass(item) and item.__module__ == name
                  and any("spec" in f.metadata for f in dataclasses.fields(item))]
    return found


LOCATIONS = [(group, name, spec) for group in _declarations() for name, spec in declaration.specs(group).items()
             if spec.kind == "location"]
IDS = [f"{group.__name__}:{name}" for group, name, _ in LOCATIONS]


def _training(values: dict[str, Any]) -> Any:
    from alexnet.train.settings_check import check_settings

    return check_settings(values)


def _launch(values: dict[str, Any]) -> Any:
    from alexnet.launch.options import check_launch

    return check_launch(values, 2)


#: How the core checks the values of a declaration where it does more than convert them (the others:
#: :func:`alexnet.declare.declaration.check`, which every check starts with).
CHECKED: dict[str, Callable[[dict[str, Any]], Any]] = {"TrainSettings": _training, "LaunchOptions": _launch}
#: What a setting needs beside it to be used at all.
GIVEN_WITH = {"model_board": {"model_pin": "alexnet"}}


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """HOME a folder of ``tmp_path`` (the working folder another one beside it), and no user cache set elsewhere."""
    folder, work = tmp_path / "home", tmp_path / "work"
    folder.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for variable in ("XDG_CACHE_HOME", "ALEXNET_BOARD"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(work)
    return folder


def _no_tilde_made(tmp_path: Path) -> None:
    made = [str(p) for p in tmp_path.rglob("*") if "~" in p.name]
    assert not made, f"made with `~` in its name: {made}"


def test_the_walk_finds_the_declarations_and_their_locations():
    names = {group.__name__ for group, _, _ in LOCATIONS}
    assert {"TrainSettings", "ModelPinOptions", "FetchOptions", "LaunchOptions", "UploadOptions",
            "BenchSettings"} <= names
    assert {f"{group}:{name}" for group, name in (("TrainSettings", "checkpoint_dir"),
                                                   ("TrainSettings", "progress_file"),
                                                   ("ModelPinOptions", "cache_dir"))} <= set(IDS)


@pytest.mark.parametrize(("group", "name", "spec"), LOCATIONS, ids=IDS)
def test_a_location_setting_given_from_the_home_folder_reaches_the_core_under_it(group, name, spec: Spec, home,
                                                                                tmp_path):
    check = CHECKED.get(group.__name__, lambda values: declaration.check(group, values, "the test"))
    checked = getattr(check({**GIVEN_WITH.get(name, {}), name: f"~/{name}"}), name)
    assert checked == str(home / name), (group.__name__, name)
    # as R sends it (a vector of one) and as a path object
    for given in ([f"~/{name}"], Path(f"~/{name}")):
        assert spec.convert(given, name) == str(home / name)
    # a `~` further in the path, a ~ of no user known and a URL (where the setting takes one) are as written
    urls = () if spec.check is not None else ("gs://bucket/~/x", "s3://bucket/~x")  # scratch: a local folder
    for kept in ("models/~/x", "~no-such-user-here/x", *urls):
        assert spec.convert(kept, name) == kept
    _no_tilde_made(tmp_path)


def test_a_model_read_with_a_cache_dir_from_the_home_folder_is_brought_there(home, tmp_path):
    import alexnet

    board = pinned_bytes(tmp_path)
    pin = alexnet.alexnet_model(board, "alexnet", cache_dir="~/models")
    assert pin["cache_dir"] == str(home / "models")
    assert pin["path"].startswith(str(home / "models") + os.sep) and os.path.isfile(pin["path"])
    _no_tilde_made(tmp_path)


def test_the_command_line_brings_a_model_into_a_quoted_model_cache_under_the_home_folder(home, tmp_path, monkeypatch):
    import alexnet
    from alexnet.cli import main

    board = pinned_bytes(tmp_path)
    read: list[dict[str, Any]] = []
    model = alexnet.alexnet_model

    def read_then_stop(*args: Any, **kwargs: Any) -> Any:
        read.append(model(*args, **kwargs))
        raise AlexnetError("read")  # the command stops once the pin was read, before any model is loaded

    monkeypatch.setattr(alexnet, "alexnet_model", read_then_stop)
    assert main(["predict", "cat.jpg", "--board", board, "--model-cache", "~/m"]) == 2
    assert read and read[0]["path"].startswith(str(home / "m") + os.sep) and os.path.isfile(read[0]["path"])
    _no_tilde_made(tmp_path)


def test_a_training_from_a_model_pin_brings_it_into_a_quoted_initial_cache_under_the_home_folder(home, tmp_path):
    from alexnet.cli import build_parser
    from alexnet.cli.train import training_args
    from alexnet.model.pin import fetch_again

    board = pinned_bytes(tmp_path)
    args = build_parser().parse_args(["train", "--initial-pin", "alexnet", "--initial-board", board,
                                      "--initial-cache", "~/initial"])
    reference = training_args(args)["initial_model"]
    assert reference["cache_dir"] == str(home / "initial")
    assert fetch_again(reference)["path"].startswith(str(home / "initial") + os.sep)
    _no_tilde_made(tmp_path)


def test_a_spark_job_hands_its_workers_a_cache_dir_under_the_home_folder(home, tmp_path):
    from alexnet.launch.options import check_launch

    assert check_launch({"cache_dir": "~/cache"}, 2).cache_dir == str(home / "cache")
    _no_tilde_made(tmp_path)


def test_a_board_and_the_arguments_that_are_locations_start_in_the_home_folder(home, tmp_path):
    assert resolve_location("~/board") == str(home / "board")
    assert resolve_location("~") == str(home)
    # not leading: a folder of the working folder; URLs as written
    assert resolve_location("a/~/b") == os.path.join(os.getcwd(), "a", "~", "b")
    assert resolve_location("gs://bucket/~/x") == "gs://bucket/~/x"
    assert home_expanded("https://host/~user/x") == "https://host/~user/x"
    assert home_expanded("file://~/x") == "file://~/x"
    _no_tilde_made(tmp_path)

