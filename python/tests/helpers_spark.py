"""The Spark home a test connects through sparklyr with, for the tests that drive R from Python.

The choice is the R test helpers' (``tests/testthat/helper-spark.R``): ``SPARK_HOME`` when set, else a Spark that
``sparklyr::spark_install()`` put in place, else the Spark bundled in this environment's pyspark, the first of
these that the installed sparklyr drives. This runs that helper with this Python as alexnet's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HELPER = Path(__file__).resolve().parents[2] / "tests" / "testthat" / "helper-spark.R"

_SCRIPT = """
source(commandArgs(TRUE)[[1]])
home <- sparklyr_spark_home(commandArgs(TRUE)[[2]])
cat(if (is.character(home)) paste0("home\\t", home) else paste0("none\\t", attr(home, "why")), "\\n", sep = "")
"""


def sparklyr_spark_home(rscript: str, env: dict[str, str]) -> str:
    """The Spark home for ``sparklyr::spark_connect(spark_home = ...)``; the test skips, saying why, without one."""
    done = subprocess.run([rscript, "-e", _SCRIPT, str(HELPER), env.get("ALEXNET_PYTHON", sys.executable)],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr[-2000:]
    kind, _, value = lines[-1].partition("\t")
    if kind != "home":
        pytest.skip(value)
    return value
