"""Test parts for the app layer: a scripted stand-in for MemoryAgent, and helpers to run app.py.

`ScriptedAgent` has MemoryAgent's API and deterministic behaviour, so the
sessions logic can be tested fast; the browser and API tests run the real
agent through app.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from memory.agent import CloseReport, ReplyEvent
from memory.errors import LLMError
from memory.trace import LLMCall, Trace

ROOT = Path(__file__).resolve().parent.parent


class ScriptedAgent:
    """MemoryAgent's API over dicts. Every user turn of a closed session becomes one memory.

    fail_replies / fail_closes: how many of the next calls fail (as the real agent does:
    a reply ends with trace.error set; a close raises LLMError).
    """

    def __init__(self, fail_replies: int = 0, fail_closes: int = 0):
        self.fail_replies, self.fail_closes = fail_replies, fail_closes
        self.graphs: dict[str, dict] = {}  # user -> {"nodes": [...], "edges": [...], "built": set()}
        self.calls: list[tuple] = []

    def _g(self, user_id):
        return self.graphs.setdefault(user_id, {"nodes": [], "edges": [], "built": set()})

    def reply(self, user_id, history, message, session_date="", options=None, llm=None):
        strategy = options.strategy if options else "theanine"
        self.calls.append(("reply", user_id, [t.text for t in history], message, strategy))
        trace = Trace(strategy=strategy)
        yield ReplyEvent("status", "Retrieving...")
        if self.fail_replies:
            self.fail_replies -= 1
            trace.error = "The language model failed: scripted outage. Your message is saved; press Retry."
            yield ReplyEvent("done", "", trace)
            return
        g = self._g(user_id)
        if strategy == "theanine" and g["nodes"]:
            m = g["nodes"][-1]
            trace.memories.append({**m, "score": 0.9})
            trace.timelines_raw.append({"anchor": m["id"], "nodes": [m["id"]], "text": f"[{m['event']}]"})
            trace.timelines_refined.append(f"refined: {m['event']}")
        if strategy == "secom" and g["nodes"]:
            m = g["nodes"][-1]
            trace.segments.append(
                {
                    "id": m["id"] + ":seg",
                    "session_id": m["session_id"],
                    "date": m["time"],
                    "text": m["event"],
                    "key": m["event"][:10],
                    "summary": "s",
                    "score": 0.5,
                }
            )
        text = f"[{strategy}] you said: {message}"
        for i in range(0, len(text), 5):
            yield ReplyEvent("delta", text[i : i + 5])
        trace.llm_calls.append(LLMCall("reply", 10, len(text) // 4, 0.01))
        yield ReplyEvent("done", text, trace)

    def close_session(self, user_id, session, options=None, progress=None, llm=None):
        self.calls.append(("close", user_id, session.session_id, [t.text for t in session.turns]))
        if progress:
            progress(0.1, "summarising")
        if self.fail_closes:
            self.fail_closes -= 1
            raise LLMError("scripted outage")
        g = self._g(user_id)
        report = CloseReport(session.session_id)
        if session.session_id in g["built"]:
            report.already_built = True
            return report
        prev = g["nodes"][-1]["id"] if g["nodes"] else None
        for i, t in enumerate(x for x in session.turns if x.speaker != "assistant"):
            mid = f"{session.session_id}:m{i}"
            g["nodes"].append({"id": mid, "event": t.text, "time": session.date, "session_id": session.session_id})
            if prev:
                g["edges"].append({"source": prev, "target": mid, "relation": "SameTopic"})
            prev = mid
            report.new_memories.append(mid)
        report.new_segments.append(f"{session.session_id}:seg0")
        g["built"].add(session.session_id)
        if progress:
            progress(1.0, "done")
        return report

    def graph_view(self, user_id):
        g = self._g(user_id)
        return {"nodes": [dict(n) for n in g["nodes"]], "edges": [dict(e) for e in g["edges"]]}

    def export_user(self, user_id):
        return {"theanine_graph": self.graph_view(user_id), "secom_segments": []}

    def delete_memory(self, user_id, memory_id):
        g = self._g(user_id)
        before = len(g["nodes"])
        g["nodes"] = [n for n in g["nodes"] if n["id"] != memory_id]
        g["edges"] = [e for e in g["edges"] if memory_id not in (e["source"], e["target"])]
        return len(g["nodes"]) < before

    def forget_user(self, user_id):
        self.calls.append(("forget", user_id))
        self.graphs.pop(user_id, None)


# --- a real browser: Debian's chromium through Playwright (never `playwright install`) ----------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
]


def chromium_browser():
    """A module fixture's body: one headless chromium for the tests of a module."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


# --- running app.py ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(data_dir: Path, port: int, **extra) -> dict:
    env = dict(os.environ)
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HF_TOKEN", "LLM_BACKEND"):
        env.pop(k, None)  # the tests run the embedded defaults whatever the developer's shell holds
    env.update(
        {
            "MEMORY_DATA_DIR": str(data_dir),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(port),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "MEMORY_DOTENV": "0",
        }
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


class RunningApp:
    """`python app.py` in a subprocess on a free port; waits until it answers HTTP."""

    def __init__(self, data_dir: Path, log_path: Path, timeout: float = 600, **env):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir, self.log_path, self.timeout, self.env = data_dir, log_path, timeout, env
        self.started_in = self.start()

    def start(self) -> float:
        """Start app.py; returns the seconds it took to answer."""
        t0 = time.time()
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py")],
            cwd=str(ROOT),
            env=app_env(self.data_dir, self.port, **self.env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        timeout = self.timeout
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app.py exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=5) as r:
                    if r.status == 200:
                        return time.time() - t0
            except OSError:
                time.sleep(1)
        self.stop()
        raise RuntimeError(f"app.py did not answer within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def restart(self) -> float:
        """Stop and start again on the same port and data dir (what a deploy or a crash does)."""
        self.stop()
        return self.start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


# Reply length for tests: the embedded model writes ~70 tokens/s on 2 cores.
TEST_REPLY_TOKENS = 40


@pytest.fixture(scope="session")
def live_app(tmp_path_factory):
    """One real app.py (embedded defaults: llama.cpp Gemma 3 270M, MiniLM, embedded Chroma) for the session."""
    data = tmp_path_factory.mktemp("app-data")
    app = RunningApp(data, data.parent / "app.log", LLM_MAX_REPLY_TOKENS=TEST_REPLY_TOKENS)
    yield app
    app.stop()
