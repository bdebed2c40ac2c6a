"""TensorFlow's start-up lines (and, without GPUs, its CUDA probe) are hidden unless TensorFlow's logs are asked for;
its tensors in the machine's memory come from its BFC allocator unless the user chose otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from alexnet.tfimport import has_gpu, is_noise, tf_logs_wanted

SCRIPT = "from alexnet.tfimport import tf; print(len(tf.config.list_physical_devices('CPU')))"


def _stderr(**env: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=300,
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
def test_the_start_up_lines_are_hidden_unless_asked_for():
    noisy = _stderr(ALEXNET_TF_LOGS="1")
    if not any(is_noise(line) for line in noisy):
        pytest.skip("this TensorFlow prints no start-up lines here")
    quiet = _stderr(ALEXNET_TF_LOGS="0")
    assert not [line for line in quiet if is_noise(line, cuda=not has_gpu())], quiet
    # everything else TensorFlow printed is still shown
    kept = [line for line in noisy if not is_noise(line, cuda=not has_gpu())]
    assert len(kept) == len(quiet), (kept, quiet)


ALLOCATOR = "import alexnet; from alexnet.tfimport import cpu_allocator; print(cpu_allocator())"


def _allocator(script: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300,
                          env={**base, **env})
    return done.stdout.strip().splitlines()[-1]


def test_tensors_come_from_tensorflow_s_bfc_allocator_unless_the_user_chose_otherwise():
    assert _allocator(ALLOCATOR) == "bfc"
    assert _allocator(ALLOCATOR, TF_CPU_ALLOCATOR_USE_BFC="false") == "default"
    # TensorFlow imported before the package takes its allocator when it first computes: the package's, set by then
    assert _allocator("import tensorflow; " + ALLOCATOR) == "bfc"
    # and one that computed before keeps the allocator it started with, as cpu_allocator() says
    assert _allocator("import tensorflow; tensorflow.ones(1); " + ALLOCATOR) == "default"


def test_import_alexnet_sets_tensorflow_env_where_nothing_is_set():
    from alexnet.environment import tensorflow_environment

    declared = tensorflow_environment()
    assert declared["TF_USE_LEGACY_KERAS"] == "1" and declared["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    script = f"import json, os, alexnet; print(json.dumps({{k: os.environ.get(k) for k in {sorted(declared)!r}}}))"
    base = {k: v for k, v in os.environ.items() if k not in declared}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
                          env={**base, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert json.loads(done.stdout) == {**declared, "TF_CPP_MIN_LOG_LEVEL": "0"}  # a variable set is left alone
