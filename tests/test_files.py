"""memory.files: the one atomic-write helper, and scratch folders gone at exit."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memory.files import atomic_write_bytes, atomic_write_text


def test_writes_replaces_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "new" / "folder" / "part.json"
    assert atomic_write_text(path, "héllo") == path
    assert path.read_text(encoding="utf-8") == "héllo"
    atomic_write_bytes(path, b"\x00second")
    assert path.read_bytes() == b"\x00second"
    assert os.listdir(path.parent) == ["part.json"]
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "part.json"
    atomic_write_text(path, "old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "new \udcff", encoding="utf-8")
    with pytest.raises(IsADirectoryError):
        atomic_write_text(tmp_path, "not a file")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["part.json"]


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_scratch_folders_are_gone_when_the_process_exits(tmp_path):
    # The graph page's folder and a scratch folder with a file in it, made by a process that then exits.
    code = (
        "from memory.files import scratch_dir\n"
        "from ui.graph_view import static_dir\n"
        "d = scratch_dir('memory-test-')\n"
        "(d / 'x.json').write_text('{}')\n"
        "print(d)\n"
        "print(static_dir())\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    made = [Path(line) for line in out.stdout.split()]
    assert len(made) == 2 and all(p.parent == tmp_path for p in made)
    assert not any(p.exists() for p in made)


def test_scratch_folders_are_gone_when_the_process_is_stopped_by_sigterm(tmp_path):
    # As app.py's main() sets it up; SIGTERM alone would end Python without running atexit.
    code = (
        "import sys, time\n"
        "from memory.files import scratch_dir, remove_scratch_dirs_on_sigterm\n"
        "remove_scratch_dirs_on_sigterm()\n"
        "d = scratch_dir('memory-test-')\n"
        "(d / 'x.json').write_text('{}')\n"
        "print(d, flush=True)\n"
        "time.sleep(120)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    made = Path(proc.stdout.readline().strip())
    assert made.parent == tmp_path and made.exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == -signal.SIGTERM  # it still dies of the signal, at once
    assert not made.exists()
