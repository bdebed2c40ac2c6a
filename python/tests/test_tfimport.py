"""TensorFlow's CUDA probe messages are hidden on machines without GPUs, unless TensorFlow's logs are asked for."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from alexnet.tfimport import is_noise, quiet_wanted

SCRIPT = "from alexnet.tfimport import tf; print(len(tf.config.list_physical_devices('CPU')))"


def _stderr(**env: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", **env})
    assert int(done.stdout.strip()) >= 1
    return done.stderr.splitlines()


def test_noise_is_recognised():
    assert is_noise("E0000 00:00:17 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error")
    assert is_noise("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")
    assert not is_noise("ValueError: broken on purpose")


@pytest.mark.skipif(not quiet_wanted(), reason="this machine has a GPU, or ALEXNET_TF_LOGS asks for everything")
def test_the_cuda_probe_messages_are_hidden_unless_asked_for():
    noisy = _stderr(ALEXNET_TF_LOGS="1")
    if not any(is_noise(line) for line in noisy):
        pytest.skip("this TensorFlow prints no CUDA probe messages here")
    quiet = _stderr()
    assert not [line for line in quiet if is_noise(line)], quiet
