"""Fixtures shared by the test modules: the local stand-ins for Google Cloud Storage and S3, and the processes a
test starts."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # before gcsfs is imported

import pytest
from helpers_processes import Processes
from servers import gcs_emulator, moto_s3_server, point_at_local_clouds

import alexnet  # noqa: F401  (its environment for TensorFlow, before a test module imports TensorFlow itself)

# The session's temporary files, its own and its child processes' (TMPDIR), go into a folder removed when it ends:
# TensorFlow's autograph writes a file for each function it converts and leaves it (about 900 a run of the suite).
# pytest's own folders (tmp_path) stay where they were, kept for a look after a failure.
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
_SESSION_FOLDER = tempfile.mkdtemp(prefix="alexnet-tests-")
atexit.register(shutil.rmtree, _SESSION_FOLDER, True)
os.environ["TMPDIR"] = tempfile.tempdir = _SESSION_FOLDER
# precision measurements of the tests' small models are remembered for the session only, not in the user's cache
os.environ.setdefault("ALEXNET_PRECISION_CACHE", os.path.join(_SESSION_FOLDER, "precision.json"))

#: Buckets made on both servers: the storage tests' and the training outputs'.
BUCKETS = ("alexnet-test", "alexnet-outputs")


@pytest.fixture(scope="session")
def servers():
    """The GCS emulator and moto's S3 server, started once for the session, each with :data:`BUCKETS`."""
    with gcs_emulator(BUCKETS) as gcs, moto_s3_server(BUCKETS) as s3:
        yield {"gs": gcs, "s3": s3}


@pytest.fixture
def cloud_env(servers, monkeypatch):
    """gcsfs and s3fs pointed at :func:`servers` for one test."""
    point_at_local_clouds(monkeypatch, servers["gs"], servers["s3"])


@pytest.fixture
def processes():
    """The processes one test starts (:class:`helpers_processes.Processes`): those still running when it ends,
    passed or failed, are killed."""
    with Processes() as started:
        yield started
