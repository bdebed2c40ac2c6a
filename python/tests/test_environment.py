"""glibc's malloc settings of ``ALEXNET_MALLOC`` (declared in ``tensorflow.env``): read, checked and set at
``import alexnet``, so that blocks too large for a thread's arena are kept for the next step, not mapped anew; and
every environment variable the package reads declared once, with README's table and the words of on and off."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from alexnet.child import run_child
from alexnet.environment import (
    INTEROP_VARIABLE,
    MALLOC_VARIABLE,
    ONE_CPU_INTEROP_THREADS,
    VARIABLES,
    _is_glibc,
    env_value,
    interop_threads,
    markdown_table,
    parse_malloc,
    set_interop_threads,
    tensorflow_environment,
)

# A thread takes and frees a 95 MB block (the size of a worker's half of AlexNet's first dense layer's gradient,
# as TensorFlow's gRPC receives it) a few times, after once to warm up: the page faults of each round.
FAULTS = """
import ctypes, json, resource, threading
import alexnet
from alexnet.environment import malloc_in_effect
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
size, rounds, counts = 95 << 20, 4, []
def work():
    for _ in range(rounds + 1):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        libc.free(ctypes.c_void_p(block))
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(json.dumps({"malloc": malloc_in_effect(), "faults": counts[1:]}))
"""


def _run(script: str, **env: str) -> tuple[dict, str]:
    base = {k: v for k, v in os.environ.items() if k not in (MALLOC_VARIABLE, "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
                          env={**base, **env})
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_declared_settings_parse():
    declared = tensorflow_environment()[MALLOC_VARIABLE]
    assert parse_malloc(declared) == {"arena_max": 1, "mmap_max": 0, "trim_threshold": 2**31 - 1}
    assert parse_malloc("default") == parse_malloc(" ") == {}
    assert parse_malloc("glibc.malloc.arena_max=2: top_pad = 0") == {"arena_max": 2, "top_pad": 0}


@pytest.mark.parametrize("value, says", [
    ("arena=1", "'arena=1' is not NAME=integer"),
    ("arena_max=one", "'arena_max=one' is not NAME=integer"),
    ("arena_max=1;mmap_max=0", "joined by ':'"),
    ("trim_threshold=4294967296", "trim_threshold must fit a C int"),
])
def test_a_bad_value_says_what_to_write(value, says):
    with pytest.raises(ValueError, match="ALEXNET_MALLOC=") as err:
        parse_malloc(value)
    assert says in str(err.value)
    assert "one of trim_threshold, top_pad, mmap_threshold, mmap_max, arena_max" in str(err.value) or \
        "C int" in str(err.value)


@pytest.mark.skipif(not _is_glibc(), reason="mallopt is glibc's")
def test_import_alexnet_keeps_large_blocks_of_threads_for_the_next_step():
    declared = tensorflow_environment()[MALLOC_VARIABLE]
    kept, _ = _run(FAULTS)
    assert kept["malloc"] == declared
    assert max(kept["faults"]) < 2000, kept  # the block's 24,320 pages are faulted in once, in the warm-up round
    mapped, _ = _run(FAULTS, ALEXNET_MALLOC="default")
    assert mapped["malloc"] == "default"
    assert min(mapped["faults"]) > 20000, mapped  # glibc's default: a mapping of its own each time, faulted in anew


@pytest.mark.skipif(not _is_glibc(), reason="mallopt is glibc's")
def test_the_user_s_choice_wins_and_a_bad_value_is_said_once():
    theirs, _ = _run(FAULTS, GLIBC_TUNABLES="glibc.malloc.arena_max=4")
    assert theirs["malloc"] == "GLIBC_TUNABLES"
    assert min(theirs["faults"]) > 20000, theirs  # the package set nothing: glibc's threshold of 32 MB holds
    own, _ = _run(FAULTS, ALEXNET_MALLOC="arena_max=1:mmap_max=0")
    assert own["malloc"] == "arena_max=1:mmap_max=0"
    bad, stderr = _run(FAULTS, ALEXNET_MALLOC="arena_max=1;mmap_max=0")
    assert bad["malloc"] == "default"
    warned = [line for line in stderr.splitlines() if MALLOC_VARIABLE in line]
    assert len(warned) == 1 and "malloc is left as it is" in warned[0], stderr


def test_a_process_held_to_one_cpu_gets_two_inter_op_threads_unless_the_user_says(monkeypatch):
    monkeypatch.setenv(INTEROP_VARIABLE, "")  # so that the variable is removed again after the test
    monkeypatch.delenv(INTEROP_VARIABLE)
    assert set_interop_threads(cpus=4) is None and INTEROP_VARIABLE not in os.environ  # TensorFlow's own: 1 per CPU
    assert set_interop_threads(cpus=1) == str(ONE_CPU_INTEROP_THREADS) == os.environ[INTEROP_VARIABLE]
    monkeypatch.setenv(INTEROP_VARIABLE, "3")
    assert set_interop_threads(cpus=1) == "3" and interop_threads() == 3
    # unset, or not a positive number: TensorFlow's default, a thread per CPU the process may run on
    for value in ("", "0", "two"):
        monkeypatch.setenv(INTEROP_VARIABLE, value)
        assert interop_threads() == len(os.sched_getaffinity(0))


def _inter_op_threads() -> int:
    """The threads of TensorFlow's inter-op pool in a fresh process after its first computation, by the name
    TensorFlow gives them on Linux."""
    from alexnet.tfimport import tf

    tf.constant(0.0) + 1.0
    names = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as f:
            names.append(f.read().strip())
    return names.count("tf_Compute")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU affinity and thread names are Linux's")
@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_child_pinned_to_one_cpu_computes_with_two_inter_op_threads():
    # what the scaling stage's workers are: each pinned to a core, where TensorFlow would run one inter-op thread and
    # the all-reduce of a pack would wait for the backward pass
    env = {"PYTHONPATH": os.path.dirname(__file__)}
    base = {k: v for k, v in os.environ.items() if k == INTEROP_VARIABLE}
    assert not base, "the tests run without TF_NUM_INTEROP_THREADS"
    assert run_child(_inter_op_threads, cpus=[0], env=env) == ONE_CPU_INTEROP_THREADS
    assert run_child(_inter_op_threads, cpus=[0], env={**env, INTEROP_VARIABLE: "1"}) == 1


# ---- the environment variables the package reads, declared once

ROOT = Path(__file__).resolve().parents[2]
#: A read of an environment variable: its name quoted, or the name of a constant that holds it.
READS = re.compile(r"(?:os\.environ\.get\(|os\.environ\[|os\.getenv\(|env_value\(|env_switch\(|Sys\.getenv\()\s*"
                   r"(\"[A-Za-z0-9_]+\"|[A-Z][A-Z0-9_]*)")


def _read_names() -> dict[str, str]:
    """Every environment variable read in python/alexnet and R/, found by grep: name -> the first file reading it."""
    files = sorted((ROOT / "python" / "alexnet").rglob("*.py")) + sorted((ROOT / "R").glob("*.R"))
    constants = {}
    for path in files:
        constants.update(re.findall(r"^([A-Z][A-Z0-9_]*) = \"([A-Z][A-Z0-9_]*)\"$", path.read_text(), re.M))
    names: dict[str, str] = {}
    for path in files:
        text = re.sub(r"Variable\(\"\w+\"", "", path.read_text())  # the declarations themselves are no read
        found = [constants.get(name, name).strip('"') for name in READS.findall(text)]
        found += re.findall(r"\"(ALEXNET_[A-Z0-9_]+)\"", text)  # set for a child, passed on: read somewhere
        for name in found:
            names.setdefault(name, str(path.relative_to(ROOT)))
    return names


def test_every_environment_variable_read_is_declared():
    names = _read_names()
    assert {"ALEXNET_BOARD", "ALEXNET_PYTHON", "ALEXNET_PRECISION_CACHE", "TF_NUM_INTEROP_THREADS",
            "ALEXNET_MALLOC", "TF_CONFIG", "WORKON_HOME"} <= set(names), "the grep finds the reads"
    missing = {name: where for name, where in names.items() if name not in {v.name for v in VARIABLES}}
    assert not missing, f"read but not declared in alexnet.environment.VARIABLES: {missing}"
    assert not {v.name for v in VARIABLES} - set(names), "declared, and read nowhere"


def test_readme_shows_the_declared_variables():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Environment variables\n"):]
    section = section[:section.index("\n## ", 1)]
    assert markdown_table() in section, "README's table differs: write alexnet.environment.markdown_table() there"
    assert len(VARIABLES) == len({v.name for v in VARIABLES})


@pytest.mark.parametrize("value, on", [("1", True), (" TRUE ", True), ("yes", True), ("On", True), ("0", False),
                                       ("false", False), ("NO", False), ("off", False), ("none", False)])
def test_every_switch_takes_the_same_words(monkeypatch, value, on):
    from alexnet.progress import progress_enabled
    from alexnet.tfimport import tf_logs_wanted
    from alexnet.train.measure import CACHE_ENV, cache_file

    for name in ("ALEXNET_PROGRESS", "ALEXNET_TF_LOGS", CACHE_ENV):
        monkeypatch.setenv(name, value)
    assert progress_enabled() is on and tf_logs_wanted() is on
    assert (cache_file() is not None) is on, "an off word remembers no measurement, an on word the default file"
    if on:
        assert cache_file().name == "precision.json"


def test_a_switch_of_another_word_keeps_its_default_and_says_so_once(monkeypatch, caplog):
    from alexnet.progress import progress_enabled
    from alexnet.tfimport import tf_logs_wanted

    monkeypatch.setenv("ALEXNET_PROGRESS", "quiet")
    monkeypatch.setenv("ALEXNET_TF_LOGS", "verbose")
    with caplog.at_level("WARNING", logger="alexnet.environment"):
        assert progress_enabled() and progress_enabled()
        assert not tf_logs_wanted()
    said = [r.getMessage() for r in caplog.records]
    assert said == ["ALEXNET_PROGRESS='quiet' is neither on (1, true, yes, on) nor off (0, false, no, off, none): it "
                    "stays on; set it to one of those words.",
                    "ALEXNET_TF_LOGS='verbose' is neither on (1, true, yes, on) nor off (0, false, no, off, none): it "
                    "stays off; set it to one of those words."]
    with pytest.raises(LookupError, match="ALEXNET_NOT_DECLARED is not declared"):
        env_value("ALEXNET_NOT_DECLARED")


def test_a_variable_set_for_a_block_is_given_back_as_it_was_also_after_an_error(monkeypatch):
    from alexnet.environment import env_set

    monkeypatch.delenv("ALEXNET_PROGRESS", raising=False)
    with env_set("ALEXNET_PROGRESS", "0"):
        assert os.environ["ALEXNET_PROGRESS"] == "0"
    assert "ALEXNET_PROGRESS" not in os.environ, "unset again, neither left at 0 nor set empty"
    with pytest.raises(RuntimeError, match="the block failed"), env_set("ALEXNET_PROGRESS", "0"):
        raise RuntimeError("the block failed")
    assert "ALEXNET_PROGRESS" not in os.environ
    monkeypatch.setenv("ALEXNET_PROGRESS", "1")
    with pytest.raises(RuntimeError, match="the block failed"), env_set("ALEXNET_PROGRESS", "0"):
        assert os.environ["ALEXNET_PROGRESS"] == "0"
        raise RuntimeError("the block failed")
    assert os.environ["ALEXNET_PROGRESS"] == "1"
    with env_set("ALEXNET_PROGRESS", None):
        assert "ALEXNET_PROGRESS" not in os.environ
    assert os.environ["ALEXNET_PROGRESS"] == "1"
    with pytest.raises(LookupError, match="ALEXNET_NOT_DECLARED is not declared"), \
            env_set("ALEXNET_NOT_DECLARED", "1"):
        pass
    assert "ALEXNET_NOT_DECLARED" not in os.environ


def test_the_modules_that_read_switches_stay_light():
    code = ("import sys, alexnet.progress, alexnet.tfimport, alexnet.environment; "
            "assert 'tensorflow' not in sys.modules and 'alexnet.storage' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
