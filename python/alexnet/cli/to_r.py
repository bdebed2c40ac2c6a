"""The core's declarations as R source: the tables R checks its arguments with, and builds its functions from.

R checks the arguments of its functions before any call into Python (so that a bad value is an R error even where
Python is missing), and takes the settings of ``alexnet_benchmark()``, the options of the Spark functions, of an
evaluation, a prediction, an export and the data stage as their formals, so it needs the declarations as R code.
This module writes one R file per declaration (:data:`TABLES`): ``make setup`` runs ``python -m alexnet.cli.to_r R``
whenever a declaration changed, and a test fails when a file in the repository is not what its declaration gives.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..declare.kinds import Spec

HEADER = ("Generated from {what} ({source}): do not edit.\n"
          "`make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.")
PURPOSE = ("{purpose}, in the declaration's order: each one's argument kind (see R/arguments.R), default, values when "
           "it is a choice, and help{more}.")


@dataclass(frozen=True)
class Table:
    """One R variable: a list of ``rows()`` (a declaration's specs, by name), described by ``purpose``;
    ``extra(name)`` adds fields to a row (``more`` says which)."""

    variable: str
    purpose: str
    rows: Callable[[], dict[str, Spec]]
    extra: Callable[[str], dict[str, Any]] | None = None
    more: str = ""


@dataclass(frozen=True)
class Names:
    """One R variable: a character vector of ``values()``, in order, described by ``purpose``."""

    variable: str
    purpose: str
    values: Callable[[], Sequence[str]]


@dataclass(frozen=True)
class RFile:
    """One generated R file: the ``tables`` of a declaration, described as ``what`` declared in ``source``, and
    its ``names`` (vectors of names that the declaration fixes the order of)."""

    what: str
    source: str
    tables: tuple[Table, ...]
    names: tuple[Names, ...] = ()


def _training() -> dict[str, Spec]:
    from ..train.settings import specs

    return specs()


def _positional() -> Sequence[str]:
    from ..train.api import POSITIONAL

    return POSITIONAL


def _benchmark() -> dict[str, Spec]:
    from ..bench.plan import specs

    return specs()


def _benchmark_stage(name: str) -> dict[str, Any]:
    from ..bench.plan import stage_of

    return {"stage": stage_of(name)}


def _launch() -> dict[str, Spec]:
    from ..launch.options import specs

    return specs()


def _training_job() -> dict[str, Spec]:
    from ..launch.options import training_job_specs

    return training_job_specs()


def _declared(module: str, name: str) -> Callable[[], dict[str, Spec]]:
    """The rows of declaration ``name`` of ``alexnet.<module>``, imported when the table is written."""
    def rows() -> dict[str, Spec]:
        from ..declare.declaration import specs

        return specs(getattr(importlib.import_module(f"alexnet.{module}"), name))

    return rows


#: Every generated file of ``R/``, by name.
TABLES: dict[str, RFile] = {
    "settings.R": RFile("the training settings' declaration", "python/alexnet/train/settings.py", (
        Table("training_settings", "Every training setting of alexnet_train() and alexnet_spark_train()", _training),),
        (Names("training_positional", "The arguments of alexnet_train() that may be given by position, in order (the "
               "original r-tensorflow/alexnet's): its first formals, training settings and others (`data`, "
               "`strategy`)", _positional),)),
    "bench-settings.R": RFile("the benchmark's declaration", "python/alexnet/bench/plan.py", (
        Table("benchmark_settings", "Every setting of alexnet_benchmark()", _benchmark, _benchmark_stage,
              "; and the stage it belongs to (\"\": every stage's)"),)),
    "launch-options.R": RFile("the declaration of a Spark job's options", "python/alexnet/launch/options.py", (
        Table("launch_options", "The options of every Spark job (alexnet_spark_train(), alexnet_spark_evaluate())",
              _launch),
        Table("training_job_options", "The options of a training job's own (alexnet_spark_train())",
              _training_job))),
    "model-options.R": RFile("the declarations of a model's options", "python/alexnet/model/options.py", (
        Table("evaluation_options", "The options of an evaluation (alexnet_evaluate(), alexnet_spark_evaluate())",
              _declared("model.options", "EvaluationOptions")),
        Table("board_images_options", "Which of a board's validation images alexnet_evaluate() scores, and how they "
              "are fetched", _declared("model.options", "BoardImagesOptions")),
        Table("predict_options", "The options of alexnet_predict()",
              _declared("model.options", "PredictOptions")),
        Table("features_options", "The options of alexnet_features()",
              _declared("model.options", "FeaturesOptions")),
        Table("export_options", "The options of alexnet_export()", _declared("model.options", "ExportOptions")),
        Table("model_pin_options", "Which model pin alexnet_model() reads and where it brings it",
              _declared("model.options", "ModelPinOptions")))),
    "data-options.R": RFile("the declarations of the data stage's options", "python/alexnet/data/options.py", (
        Table("synthetic_options", "The options of imagenet_synthetic()",
              _declared("data.options", "SyntheticOptions")),
        Table("upload_options", "The options of imagenet_upload()", _declared("data.options", "UploadOptions")),
        Table("partition_options", "Which partition imagenet_partition() fetches",
              _declared("data.options", "PartitionOptions")),
        Table("fetch_options", "The options of imagenet_partition()", _declared("data.options", "FetchOptions")),
        Table("validation_partition_options", "Which share of a board's validation images imagenet_validation() "
              "fetches", _declared("data.options", "ValidationPartitionOptions")),
        Table("validation_fetch_options", "The options of imagenet_validation()",
              _declared("data.options", "ValidationFetchOptions")))),
}


def _comments(text: str) -> str:
    return "\n".join(textwrap.fill(part, 118, initial_indent="# ", subsequent_indent="# ") if part else "#"
                     for part in text.split("\n"))


def r_value(value: Any) -> str:
    """``value`` (a default: None, a flag, a number, a string or a tuple of them) as R code."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "c(" + ", ".join(r_value(v) for v in value) + ")"


def r_table(table: Table) -> str:
    """One table as R: a comment, then the variable, one line per setting."""
    rows = []
    for name, spec in table.rows().items():
        fields = {"kind": json.dumps(spec.r_kind), "default": r_value(spec.default),
                  "choices": r_value(tuple(spec.choices)) if spec.choices else "NULL",
                  **{key: r_value(value) for key, value in (table.extra(name) if table.extra else {}).items()},
                  "help": json.dumps(spec.help)}
        rows.append(f"  {name} = list(" + ", ".join(f"{key} = {value}" for key, value in fields.items()) + ")")
    comment = _comments(PURPOSE.format(purpose=table.purpose, more=table.more))
    return comment + f"\n{table.variable} <- list(\n" + ",\n".join(rows) + "\n)\n"


def r_names(names: Names) -> str:
    """One vector of names as R: a comment, then the variable."""
    return _comments(names.purpose + ".") + f"\n{names.variable} <- {r_value(tuple(names.values()))}\n"


def r_source(file: str) -> str:
    """The text of ``R/<file>``, one of :data:`TABLES`."""
    generated = TABLES[file]
    return "\n".join([_comments(HEADER.format(what=generated.what, source=generated.source)) + "\n",
                      *(r_table(table) for table in generated.tables),
                      *(r_names(names) for names in generated.names)])


def main(argv: list[str] | None = None) -> int:
    """Write every file of :data:`TABLES` into the folder named by the one argument (``-``: standard output)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m alexnet.cli.to_r R\n")
        return 2
    for file in TABLES:
        if args[0] == "-":
            sys.stdout.write(r_source(file))
        else:
            Path(args[0], file).write_text(r_source(file), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
