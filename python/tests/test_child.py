"""Children run by run_child() leave nothing behind in the temporary folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from alexnet.child import run_child


def test_a_childs_temporary_files_go_with_its_scratch_folder():
    # tempfile.mkstemp, run in the child, makes a file there and returns (descriptor, path)
    _, path = run_child(tempfile.mkstemp, what="a child that makes a temporary file")
    made = Path(path)
    assert made.parent.name == "tmp" and made.parent.parent.name.startswith("alexnet-child-"), made
    assert made.parent.parent.parent == Path(tempfile.gettempdir())
    assert not made.exists() and not made.parent.parent.exists()


def test_a_temporary_folder_the_caller_gives_the_child_is_kept(tmp_path):
    _, path = run_child(tempfile.mkstemp, env={"TMPDIR": str(tmp_path)})
    assert Path(path).parent == tmp_path and os.path.exists(path)
