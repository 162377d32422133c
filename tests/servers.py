"""Start real local servers for tests (Chroma, llama.cpp's OpenAI-compatible server) and stop them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer in {timeout}s")


@contextmanager
def running(cmd: list[str], health_url: str, timeout: float = 120, log: Path | None = None):
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115  (kept open for the process's life)
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    )
    try:
        wait_http(health_url, timeout, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if not isinstance(out, int):
            out.close()


def chroma_cmd(path: Path, port: int) -> list[str]:
    exe = Path(sys.executable).parent / "chroma"
    return [str(exe), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]


def llama_server_cmd(model: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "1",
    ]
