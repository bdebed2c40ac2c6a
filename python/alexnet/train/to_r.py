"""The training settings' declaration as R source: ``R/settings.R``, which R checks its arguments with.

R checks the arguments of ``alexnet_train()`` and ``alexnet_spark_train()`` before any call into Python (so that
a bad value is an R error even where Python is missing), so it needs the declaration as R code. This module writes
it from :class:`alexnet.train.settings.TrainSettings`: ``make setup`` runs ``python -m alexnet.train.to_r
R/settings.R`` whenever the declaration changed, and a test fails when the file in the repository is not what
the declaration gives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .settings import specs

HEADER = """\
# Generated from the training settings' declaration (python/alexnet/train/settings.py) by
# `python -m alexnet.train.to_r R/settings.R`, which `make setup` runs when the declaration changes: do not edit.

# Every training setting of alexnet_train() and alexnet_spark_train(), in the declaration's order: its argument
# kind (see R/arguments.R), its default, its values when it is a choice, and its help.
training_settings <- list(
"""


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


def r_source() -> str:
    """The text of ``R/settings.R``."""
    rows = []
    for name, spec in specs().items():
        choices = r_value(tuple(spec.choices)) if spec.choices else "NULL"
        rows.append(f"  {name} = list(\n    kind = {json.dumps(spec.r_kind)}, default = {r_value(spec.default)}, "
                    f"choices = {choices},\n    help = {json.dumps(spec.help)}\n  )")
    return HEADER + ",\n".join(rows) + "\n)\n"


def main(argv: list[str] | None = None) -> int:
    """Write :func:`r_source` to the file named by the one argument (``-``: standard output)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m alexnet.train.to_r R/settings.R\n")
        return 2
    if args[0] == "-":
        sys.stdout.write(r_source())
    else:
        Path(args[0]).write_text(r_source(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
