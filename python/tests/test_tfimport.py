"""TensorFlow's start-up lines (and, without GPUs, its CUDA probe) are hidden unless TensorFlow's logs are asked for;
its tensors in the machine's memory come from a BFC allocator unless the user chose otherwise."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from alexnet import tfimport
from alexnet.tfimport import has_gpu, is_noise, tf_logs_wanted

SCRIPT = "from alexnet.tfimport import tf; print(len(tf.config.list_physical_devices('CPU')))"


#: TensorFlow imported by the user's own code, before the package's first use, as R's reticulate::import() does once
#: the R package has called filter_tensorflow_import() as Python started.
OWN_IMPORT = ("from alexnet.tfimport import filter_tensorflow_import; filter_tensorflow_import(); "
              "import tensorflow; print(len(tensorflow.config.list_physical_devices('CPU')))")


def _stderr(script: str = SCRIPT, **env: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", **env})
    assert int(done.stdout.strip()) >= 1
    return done.stderr.splitlines()


def test_noise_is_recognised():
    assert is_noise("E0000 00:00:17 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error")
    assert is_noise("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")
    onednn = "I0000 00:00:17 7365 port.cc:153] oneDNN custom operations are on. You may see slightly different"
    assert is_noise(onednn) and is_noise(onednn, cuda=False)
    assert not is_noise("I0000 cudart_stub.cc:31] Could not find cuda drivers on your machine", cuda=False)
    assert not is_noise("ValueError: broken on purpose")


def test_tf_logs_wanted_reads_the_variable(monkeypatch):
    for value, wanted in (("1", True), ("true", True), ("0", False), ("", False)):
        monkeypatch.setenv("ALEXNET_TF_LOGS", value)
        assert tf_logs_wanted() is wanted


@pytest.mark.skipif(tf_logs_wanted(), reason="ALEXNET_TF_LOGS asks for everything")
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_the_start_up_lines_are_hidden_unless_asked_for():
    noisy = _stderr(ALEXNET_TF_LOGS="1")
    if not any(is_noise(line) for line in noisy):
        pytest.skip("this TensorFlow prints no start-up lines here")
    quiet = _stderr(ALEXNET_TF_LOGS="0")
    assert not [line for line in quiet if is_noise(line, cuda=not has_gpu())], quiet
    # everything else TensorFlow printed is still shown
    kept = [line for line in noisy if not is_noise(line, cuda=not has_gpu())]
    assert len(kept) == len(quiet), (kept, quiet)
    # and as the user's own import of TensorFlow prints them, once the finder is in place
    assert any(is_noise(line) for line in _stderr(OWN_IMPORT, ALEXNET_TF_LOGS="1"))
    own = _stderr(OWN_IMPORT, ALEXNET_TF_LOGS="0")
    assert not [line for line in own if is_noise(line, cuda=not has_gpu())], own


def test_a_machine_with_an_nvidia_gpu_that_tensorflow_does_not_list_is_told_once_why_and_what_to_install(
        monkeypatch, caplog):
    """TensorFlow without its CUDA libraries lists no GPU and trains on the CPU, saying why only in a line
    TF_CPP_MIN_LOG_LEVEL=2 hides: the core warns once, naming the likely cause and the fix."""
    from types import SimpleNamespace

    listed: list[str] = []
    fake = SimpleNamespace(__version__="2.21.0",
                           config=SimpleNamespace(list_physical_devices=lambda kind=None: list(listed)))
    monkeypatch.setattr(tfimport, "_told_of_unused_gpu", False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(tfimport, "nvidia_devices", lambda: [])
    assert tfimport.unused_gpu_warning(fake) is None  # no NVIDIA device: nothing to say
    monkeypatch.setattr(tfimport, "nvidia_devices", lambda: ["/dev/nvidia0", "/dev/nvidia1"])
    said = tfimport.unused_gpu_warning(fake)
    assert said.startswith("This machine has an NVIDIA GPU (/dev/nvidia0, /dev/nvidia1), but TensorFlow 2.21.0 found "
                           "none it can use: everything runs on the CPU."), said
    assert "install_alexnet(gpu = TRUE)" in said and "pip install 'tensorflow[and-cuda]==2.21.0'" in said
    caplog.set_level(logging.WARNING, logger="alexnet.tfimport")
    tfimport.warn_of_unused_gpu(fake)
    tfimport.warn_of_unused_gpu(fake)
    assert [r.getMessage() for r in caplog.records] == [said]
    # the GPUs hidden on purpose, or listed: nothing to say
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert tfimport.unused_gpu_warning(fake) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert tfimport.unused_gpu_warning(fake) == said
    listed.append("/physical_device:GPU:0")
    assert tfimport.unused_gpu_warning(fake) is None


def test_the_import_warns_of_an_unused_gpu(monkeypatch):
    """Both ways of importing TensorFlow (its start-up lines filtered, or everything shown) end with the check."""
    checked = []
    monkeypatch.setattr(tfimport, "warn_of_unused_gpu", lambda tensorflow: checked.append(tensorflow.__name__))
    for logs in ("0", "1"):
        monkeypatch.setenv("ALEXNET_TF_LOGS", logs)
        tfimport._import()
    assert checked == ["tensorflow", "tensorflow"]


ALLOCATOR = ("import alexnet; from alexnet.tfimport import cpu_allocator; "
             "from tensorflow.python.util import _pywrap_util_port; "
             "print(cpu_allocator(), _pywrap_util_port.IsMklEnabled())")


def _allocator(script: str, onednn: str | None, **env: str) -> tuple[str, bool]:
    """The allocator a fresh Python reports after ``script``, and whether oneDNN is on there: turned off (``onednn``
    "0", TF_ENABLE_ONEDNN_OPTS) or as TensorFlow chooses for the CPU (None)."""
    base = {k: v for k, v in os.environ.items() if k not in ("TF_CPU_ALLOCATOR_USE_BFC", "TF_ENABLE_ONEDNN_OPTS")}
    if onednn is not None:
        base["TF_ENABLE_ONEDNN_OPTS"] = onednn
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300,
                          env={**base, **env})
    allocator, mkl = done.stdout.strip().splitlines()[-1].split()
    return allocator, mkl == "True"


@pytest.mark.parametrize("onednn", ["0", None], ids=["without-onednn", "as-tensorflow-chooses"])
@pytest.mark.long  # make test-long (CI)
def test_tensors_come_from_a_bfc_allocator_unless_the_user_chose_otherwise(onednn):
    def default(mkl: bool) -> str:
        # TensorFlow's default allocator: its pool over malloc, or where oneDNN is on, oneDNN's, which keeps every
        # tensor of 4 KB or more in a BFC allocator of its own
        assert not (mkl and onednn == "0"), "oneDNN is on where TF_ENABLE_ONEDNN_OPTS=0"
        return "bfc" if mkl else "default"

    assert _allocator(ALLOCATOR, onednn)[0] == "bfc"
    name, mkl = _allocator(ALLOCATOR, onednn, TF_CPU_ALLOCATOR_USE_BFC="false")
    assert name == default(mkl)
    # TensorFlow imported before the package takes its allocator when it first computes: the package's, set by then
    assert _allocator("import tensorflow; " + ALLOCATOR, onednn)[0] == "bfc"
    # and one that computed before keeps the allocator it started with, as cpu_allocator() says
    name, mkl = _allocator("import tensorflow; tensorflow.ones(1); " + ALLOCATOR, onednn)
    assert name == default(mkl)


def test_import_alexnet_sets_tensorflow_env_where_nothing_is_set():
    from alexnet.environment import tensorflow_environment

    declared = tensorflow_environment()
    assert declared["TF_USE_LEGACY_KERAS"] == "1" and declared["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    assert declared["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"  # the precision's child measurement needs GPU memory
    script = f"import json, os, alexnet; print(json.dumps({{k: os.environ.get(k) for k in {sorted(declared)!r}}}))"
    base = {k: v for k, v in os.environ.items() if k not in declared}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
                          env={**base, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_USE_LEGACY_KERAS": ""})
    # a variable set is left alone; one set empty is taken for unset, as R's library(alexnet) takes it
    assert json.loads(done.stdout) == {**declared, "TF_CPP_MIN_LOG_LEVEL": "0"}


AUTOGRAPH_SCRIPT = """
import glob, json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
from alexnet.tfimport import AUTOGRAPH_PREFIX, remove_autograph_files, tf
from converted import absolute

before = absolute(tf.constant(-3)).numpy()
written = glob.glob(os.path.join(tempfile.gettempdir(), AUTOGRAPH_PREFIX + "*.py"))
removed = remove_autograph_files()
left = glob.glob(os.path.join(tempfile.gettempdir(), AUTOGRAPH_PREFIX + "*.py"))
again = absolute(tf.constant(-4)).numpy()  # the converted function still runs without its file
print(json.dumps({"written": len(written), "removed": removed, "left": len(left),
                  "results": [int(before), int(again)]}))
sys.stdout.flush()
os._exit(0)  # as Python embedded in R ends: without its exit handlers, which would have removed them too
"""


def test_the_files_autograph_writes_are_removed_when_asked(tmp_path):
    """Autograph writes each function it converts to the temporary folder and removes the files only at Python's
    normal end, which Python embedded in R never reaches; remove_autograph_files() (which R calls as it exits)
    removes this process's files, and the converted functions still run."""
    (tmp_path / "converted.py").write_text(
        "import tensorflow as tf\n\n\n@tf.function\ndef absolute(x):\n    if x < 0:\n        return -x\n    return x\n")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    stranger = temporary / "__autograph_generated_file_of_another_process.py"
    stranger.write_text("")
    done = subprocess.run([sys.executable, "-c", AUTOGRAPH_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          check=True, timeout=300, env={**os.environ, "TMPDIR": str(temporary)})
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["results"] == [3, 4]
    assert result["written"] >= 2  # this process's file or files, and the other process's
    assert result["removed"] == result["written"] - 1 and result["left"] == 1
    assert [p.name for p in temporary.iterdir()] == [stranger.name]  # another process's file is left alone


def test_a_python_without_tensorflow_is_told_what_to_install_where_tensorflow_is_first_needed():
    """From Python, `alexnet_train()` in a Python without TensorFlow ended in a bare ModuleNotFoundError."""
    script = ("import json, sys\nsys.modules['tensorflow'] = None  # as in a Python without it\n"
              "from alexnet.tfimport import tf\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("alexnet.errors.MissingModuleError: This Python ("), last
    assert ") has no module `tensorflow`, one of the core's own dependencies" in last
    from alexnet.errors import AlexnetError, MissingModuleError

    assert issubclass(MissingModuleError, AlexnetError) and issubclass(MissingModuleError, ModuleNotFoundError)
