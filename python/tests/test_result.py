"""What the public functions return: a dict that prints short, and reaches R as a plain dict."""

from __future__ import annotations

import importlib
import inspect
import json
import pickle

import alexnet
from alexnet.errors import r_call
from alexnet.result import LONGEST, SHOWN, Result, as_plain, returns_result, shortened

#: The public functions that return a dict, each wrapped by returns_result().
DICT_FUNCTIONS = ["imagenet_synthetic", "imagenet_upload", "imagenet_partition", "imagenet_validation", "alexnet_train",
                  "alexnet_benchmark", "alexnet_evaluate", "alexnet_spark_evaluate", "alexnet_model", "alexnet_export",
                  "alexnet_features", "alexnet_filters", "alexnet_history"]


def test_a_long_list_is_printed_as_its_first_items_and_the_count_of_the_others() -> None:
    result = Result(image=[f"/cache/train/n0/{i}.JPEG" for i in range(80_000)], num_classes=1000,
                    nested={"label": list(range(20)), "pair": (1, 2)}, few=[1, 2])
    text = repr(result)
    assert text == ("{'image': ['/cache/train/n0/0.JPEG', '/cache/train/n0/1.JPEG', '/cache/train/n0/2.JPEG', "
                    "... 79,997 more], 'num_classes': 1000, 'nested': {'label': [0, 1, 2, ... 17 more], "
                    "'pair': (1, 2)}, 'few': [1, 2]}")
    assert str(result) == text
    assert len(result["image"]) == 80_000  # the value itself is whole


def test_lists_up_to_the_limit_print_whole_and_a_short_repr_equals_the_dicts() -> None:
    plain = {"a": list(range(LONGEST)), "b": (7,), "c": "x" * 50, "d": None, "e": [[1, 2], []]}
    assert repr(Result(plain)) == repr(plain)
    assert shortened(list(range(LONGEST + 1))).endswith(f"... {LONGEST + 1 - SHOWN:,} more]")


def test_a_result_is_a_dict_for_equality_json_and_pickle() -> None:
    result = Result(a=[1, 2, 3] * 10, b={"c": 1})
    plain = {"a": [1, 2, 3] * 10, "b": {"c": 1}}
    assert result == plain
    assert json.loads(json.dumps(result)) == plain
    again = pickle.loads(pickle.dumps(result))
    assert isinstance(again, Result) and again == plain


def test_ipython_shows_the_short_form() -> None:
    shown: list[str] = []

    class Printer:
        def text(self, value: str) -> None:
            shown.append(value)

    result = Result(a=list(range(100)))
    result._repr_pretty_(Printer(), False)
    assert shown == [repr(result)] and "97 more" in shown[0]


def test_r_receives_plain_dicts() -> None:
    value = r_call(lambda: Result(a=list(range(10))))
    assert type(value) is dict and value == {"a": list(range(10))}
    listed = as_plain([Result(a=1), 2])
    assert [type(item) for item in listed] == [dict, int]
    assert as_plain("text") == "text"


def test_returns_result_keeps_other_values_and_the_signature() -> None:
    @returns_result
    def make(n: int, *, flag: bool = False) -> object:
        """Help."""
        return {"n": n} if not flag else [n]

    assert type(make(1)) is Result and make(1) == {"n": 1}
    assert make(1, flag=True) == [1]
    assert str(inspect.signature(make)) == "(n: 'int', *, flag: 'bool' = False) -> 'object'"
    assert make.__doc__ == "Help."


def test_every_public_function_returning_a_dict_returns_a_result() -> None:
    returning_dicts = {name for name in alexnet.__all__ if callable(getattr(alexnet, name))
                       and str(inspect.signature(getattr(alexnet, name)).return_annotation).startswith("dict")}
    # tf_config() is TF_CONFIG's dict, a few entries long, which TensorFlow reads
    assert returning_dicts - {"tf_config"} == set(DICT_FUNCTIONS)
    for name in DICT_FUNCTIONS:
        assert getattr(getattr(alexnet, name), "__wrapped__", None) is not None, f"{name} lacks returns_result()"


def test_a_partition_prints_short(tmp_path) -> None:
    synthetic = alexnet.imagenet_synthetic(tmp_path / "src", classes=2, images_per_class=12, val_per_class=2,
                                           max_side=48)
    assert type(synthetic) is Result
    alexnet.imagenet_upload(tmp_path / "src", tmp_path / "board")
    data = alexnet.imagenet_partition(0, 1, board=tmp_path / "board", cache_dir=str(tmp_path / "cache"))
    assert type(data) is Result and len(data["image"]) == 24
    assert "... 21 more]" in repr(data) and len(repr(data)) < len(repr(dict(data))) / 2


def test_a_list_of_records_prints_short_and_stays_a_list() -> None:
    """A prediction of 50,000 images' top-5 printed 38 MB, a board's 1,000 categories 402 KB."""
    from alexnet.result import Results, as_plain, returns_result

    @returns_result
    def records(n: int) -> list:
        return [{"image": f"/photos/{i}.jpg", "rank": 1} for i in range(n)]

    many = records(1000)
    assert type(many) is Results and many == records(1000) and isinstance(many, list)
    assert repr(many).endswith("... 997 more]") and len(repr(many)) < 200
    assert json.loads(json.dumps(many)) == list(many)
    assert type(as_plain(many)) is list and as_plain(many) == list(many)
    for name in ("alexnet_predict", "imagenet_categories"):  # the public functions that return records
        assert getattr(getattr(alexnet, name), "__wrapped__", None) is not None, name


def test_the_kinds_of_error_are_importable_from_the_package_as_r_has_a_class_for_each() -> None:
    """The docstrings named LayoutError, BoardError, ... which only alexnet.errors (and three other modules) held."""
    import re
    from pathlib import Path

    kinds = [name for name in alexnet.__all__ if name.endswith("Error")]
    assert {name for name in kinds if issubclass(getattr(alexnet, name), alexnet.AlexnetError)} == set(kinds)
    table = (Path(__file__).parents[2] / "R" / "errors.R").read_text()
    r_classes = set(re.findall(r"\| `alexnet_(\w+)_error` \|", table))
    said = {re.sub(r"(?<!^)([A-Z])", r"_\1", name[:-len("Error")]).lower() for name in kinds if name != "AlexnetError"}
    assert said <= r_classes, said - r_classes
    assert {"board", "layout", "integrity", "bad_images", "child", "worker", "worker_lost"} == said


def test_type_checkers_see_every_export_from_the_module_that_defines_it_or_typed() -> None:
    """``alexnet``'s exports are imported lazily (``__getattr__``), which a type checker takes for ``Any``: the
    imports it reads instead (under ``TYPE_CHECKING``) are every export of ``_EXPORTS``, each from its module, but
    those that take declared settings through ``**`` keywords, which come typed from the generated ``_typed``."""
    import ast
    from pathlib import Path

    from alexnet.cli import to_typed

    tree = ast.parse(Path(alexnet.__file__).read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    imported = {alias.name: (node.module or "") for node in block.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    typed = set(to_typed.covered())
    assert {name for name, module in imported.items() if module == "_typed"} == typed
    assert {name: module for name, module in imported.items() if name not in typed} == \
        {name: module for name, module in alexnet._EXPORTS.items() if name not in typed}
    assert all(getattr(alexnet, name) is getattr(importlib.import_module(f"alexnet.{module}"), name)
               for name, module in alexnet._EXPORTS.items())


def test_r_is_told_what_to_install_for_a_module_this_python_lacks() -> None:
    def lacking() -> None:
        raise ModuleNotFoundError("No module named 'tensorflow'", name="tensorflow")

    failure = r_call(lacking)
    assert failure.classes[:3] == ["MissingModuleError", "AlexnetError", "ModuleNotFoundError"]
    assert "has no module `tensorflow`, one of the core's own dependencies" in failure.message
    assert "from R, alexnet::install_alexnet()." in failure.message
