"""Running code in a fresh Python where ``import alexnet`` fails: what a user of an export without this package has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

#: Makes the named packages absent (``None`` in ``sys.modules``: every import of them fails, and
#: ``importlib.util.find_spec`` finds nothing, as for a package not installed), then proves ``import alexnet`` fails.
_BLOCKER = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
try:
    import alexnet
except ImportError:
    pass
else:
    raise SystemExit("alexnet could be imported")
"""


def run_without(code: str, *args: str, blocked: tuple[str, ...] = ("alexnet",)) -> Any:
    """Run ``code`` in a new isolated Python (``-I``: no ``PYTHONPATH``, no current folder) in which the packages
    ``blocked`` cannot be imported; ``args`` are its ``sys.argv[1:]``. The JSON its last line of output prints."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    script = _BLOCKER.format(blocked=tuple(blocked)) + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-I", "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])
