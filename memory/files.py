"""Files that are never seen half-written (the one atomic-write helper), and scratch folders gone at exit."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Iterable
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically: a temporary file in the same folder, fsync, then os.replace
    (and fsync the folder so the rename itself survives a crash). Readers see the old file or the new
    one, never a part. The folder is created when missing; the file gets the usual permissions (umask)."""
    return atomic_write_chunks(path, (data,))


def atomic_write_chunks(path: str | Path, chunks: Iterable[bytes]) -> Path:
    """`atomic_write_bytes` for data too large to hold in memory (e.g. a model assembled from parts).
    An exception raised by `chunks` (a failed check) leaves no file behind and the old one in place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every platform can open a folder
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """`atomic_write_bytes` for text."""
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | Path, obj) -> Path:
    """`obj` as indented UTF-8 JSON, written atomically (benchmark and evaluation results)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def scratch_dir(prefix: str) -> Path:
    """A private temporary folder that is removed when the process exits (a long-lived server, or the
    test suite's hundreds of app instances, would otherwise leave one behind per start)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    _scratch.append(d)
    return d


_scratch: list[Path] = []


@atexit.register
def remove_scratch_dirs() -> None:
    """Remove every folder scratch_dir made (at a normal exit, and on SIGTERM: see below)."""
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)


def remove_scratch_dirs_on_sigterm() -> None:
    """SIGTERM (systemd, docker stop, a supervisor) ends Python without atexit: remove the scratch
    folders first, then die of the signal as before (no graceful shutdown that could wait on a memory
    build). Call from the main thread."""

    def on_term(signum: int, frame: object) -> None:
        remove_scratch_dirs()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
