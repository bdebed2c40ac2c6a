"""Scratch folders of killed processes are removed by the next one of their kind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from alexnet import scratch


def _killed_owner(parent: Path, prefix: str) -> Path:
    """A scratch folder whose owner made it and was then killed with SIGKILL."""
    code = textwrap.dedent(f"""
        import os, signal
        from alexnet.scratch import make_scratch
        print(make_scratch({prefix!r}, {str(parent)!r}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    folder = Path(proc.stdout.strip())
    assert folder.is_dir() and folder.parent == parent
    return folder


def test_folders_of_killed_owners_are_swept_and_live_ones_kept(tmp_path):
    dead = _killed_owner(tmp_path, "alexnet-worker1-")
    (dead / "task.pkl").write_bytes(b"x" * 1000)
    live = Path(scratch.make_scratch("alexnet-worker0-", tmp_path))  # this process: alive
    elsewhere = tmp_path / "alexnet-worker2-other-host"
    elsewhere.mkdir()
    (elsewhere / scratch.OWNER_FILE).write_text("another-host\n1\n")
    foreign = tmp_path / "alexnet-worker3-no-owner-file"
    foreign.mkdir()
    unrelated = _killed_owner(tmp_path, "alexnet-upload-")

    newest = Path(scratch.make_scratch("alexnet-worker0-", tmp_path, family="alexnet-worker"))

    assert not dead.exists()
    assert live.is_dir() and newest.is_dir() and elsewhere.is_dir() and foreign.is_dir()
    assert unrelated.is_dir(), "only the family asked for is swept"
    assert (newest / scratch.OWNER_FILE).read_text().split("\n")[1] == str(os.getpid())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux's /proc")
def test_the_folder_of_a_killed_owner_nobody_has_waited_for_is_swept(tmp_path):
    """A zombie (killed, its exit not yet collected by its parent) owns nothing any more: its folder goes."""
    code = textwrap.dedent(f"""
        import time
        from alexnet.scratch import make_scratch
        print(make_scratch("alexnet-upload-", {str(tmp_path)!r}), flush=True)
        time.sleep(120)
        """)
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        folder = Path(owner.stdout.readline().strip())
        assert folder.is_dir()
        assert scratch.sweep_stale("alexnet-upload-", tmp_path) == [], "a running owner keeps its folder"
        owner.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{owner.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)  # killed, and not waited for (by this process, its parent): a zombie
        os.kill(owner.pid, 0)  # which the signal test alone takes for a live process
        assert scratch.sweep_stale("alexnet-upload-", tmp_path) == [str(folder)]
        assert not folder.exists()
    finally:
        owner.kill()
        owner.wait(timeout=30)
        owner.stdout.close()


def test_a_folder_of_another_pid_namespace_of_this_host_is_left_alone(tmp_path):
    # two containers of one host name (host networking) sharing a folder: one's process ids say nothing of the other's
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    here = scratch.pid_namespace()
    folders = {}
    for name, namespace in (("other", f"{here}1"), ("same", here), ("unrecorded", None)):
        folders[name] = tmp_path / f"alexnet-upload-{name}"
        folders[name].mkdir()
        record = f"{socket.gethostname()}\n{pid}\n" + ("" if namespace is None else f"{namespace}\n")
        (folders[name] / scratch.OWNER_FILE).write_text(record)
    assert here  # Linux's /proc/self/ns/pid
    removed = scratch.sweep_stale("alexnet-upload-", tmp_path)
    assert sorted(removed) == sorted(str(folders[n]) for n in ("same", "unrecorded"))
    assert folders["other"].is_dir() and scratch.owner(folders["other"]) == (socket.gethostname(), pid, f"{here}1")
    made = scratch.make_scratch("alexnet-upload-", tmp_path)
    assert scratch.owner(made) == (socket.gethostname(), os.getpid(), here)


def test_the_context_manager_removes_its_folder(tmp_path):
    with scratch.scratch_folder("alexnet-upload-", tmp_path) as folder:
        assert Path(folder).is_dir()
    assert not Path(folder).exists()
    assert scratch.sweep_stale("alexnet-upload-", tmp_path) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux's /proc")
def test_the_network_namespace_of_a_killed_owner_nobody_has_waited_for_is_removed(monkeypatch):
    """The benchmark's network namespaces are the scratch of their process too, told alive the same way."""
    from alexnet.bench import link

    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        owner.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{owner.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)  # a zombie, which the signal test alone takes for a live process
        names = [f"{link.PREFIX}{owner.pid}-a", f"{link.PREFIX}{os.getpid()}-b"]
        deleted = []
        monkeypatch.setattr(link, "namespaces", lambda: names)
        monkeypatch.setattr(link, "_run", lambda *command: deleted.append(command[-1]))
        assert link.sweep_stale() == names[:1]
        assert deleted == names[:1]
    finally:
        owner.kill()
        owner.wait(timeout=30)


def test_a_command_killed_after_autograph_converted_a_function_leaves_its_files_in_its_folder_for_the_next(
        tmp_path, monkeypatch):
    """A command of the command line keeps its temporary files in a folder of its own: killed with SIGKILL after
    TensorFlow's autograph wrote the source of a function it converted, it leaves nothing in the temporary folder
    itself, and the next command removes its folder (and gives the temporary folder back as it was)."""
    import tempfile

    from alexnet import cli
    from alexnet.tfimport import AUTOGRAPH_PREFIX

    code = textwrap.dedent("""
        import os, signal, sys, tempfile
        from alexnet import cli

        def convert(args):
            import tensorflow as tf

            @tf.function
            def absolute(x):
                if x > 0:  # a Python `if` on a tensor: autograph rewrites it, and writes the rewritten source
                    return x
                return -x

            absolute(tf.constant(-1))
            print(tempfile.gettempdir(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        parse = cli.parse
        cli.parse = lambda parser, argv: setattr(args := parse(parser, argv), "run", convert) or args
        cli.main(["categories", "--board", sys.argv[1]])
        """)
    env = {**os.environ, "TMPDIR": str(tmp_path), "ALEXNET_PROGRESS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    script = tmp_path / "command.py"  # a file: autograph reads the source of what it converts
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "board")], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    folder = Path(proc.stdout.strip())
    assert folder.parent == tmp_path and folder.name.startswith(scratch.COMMAND_PREFIX), proc.stdout
    assert list(folder.glob(f"{AUTOGRAPH_PREFIX}*.py")), sorted(p.name for p in folder.iterdir())
    assert not list(tmp_path.glob(f"{AUTOGRAPH_PREFIX}*")), "nothing of the killed command outside its folder"

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    during: list[str] = []
    parse = cli.parse
    monkeypatch.setattr(cli, "parse", lambda parser, argv: setattr(
        args := parse(parser, argv), "run", lambda args: during.append(tempfile.gettempdir())) or args)
    assert cli.main(["categories", "--board", str(tmp_path / "board")]) == 0
    assert not folder.exists(), "the next command removes the killed one's folder"
    assert len(during) == 1 and Path(during[0]).parent == tmp_path and Path(during[0]).name.startswith(
        scratch.COMMAND_PREFIX)
    assert not Path(during[0]).exists() and tempfile.gettempdir() == str(tmp_path)
    assert scratch.outer_temporary_folder() == str(tmp_path)
