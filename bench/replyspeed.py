"""Reply speed through the running app: seconds to the first token and to the whole reply.

    python -m bench replyspeed [--conversation conv-26] [--questions 10] [--port P] [--out FILE]

Starts `python app.py` on a free port (or `--port`) with a temporary MEMORY_DATA_DIR and the app's
defaults otherwise, creates a user and imports one LoCoMo conversation through /import_history (the
call returns once its memory is built). Then `--questions` of the conversation's questions
(categories 1, 2 and 4, sampled with `--seed`) are asked one after another in the fresh session that
follows the import, through /send_message, so the dialogue grows as it does in a chat. Per reply:

* first token: seconds from the start of the reply on the server (retrieval included) to its first
  piece of text, from the trace (`timings["first_token"]`);
* complete: seconds the client waited for the whole reply (queue and HTTP included);
* prompt tokens of the reply call, and how many of them llama.cpp had already read (its KV cache of
  the previous call's prefix), from the trace;
* right: token F1 >= 0.5 against the gold answer, or the normalised gold answer inside the reply.

--data defaults to the shared dev file (../shared/data/locomo/locomo_dev.json) when it is there, else
to the excerpt the tests ship (tests/data/locomo_small.json), so a fresh clone runs it too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from memory.evaluation.conversations import load_samples
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.trace_types import LLMCallDict, TraceDict

from .answer_score import normalise, token_f1
from .common import parser, percentile, progress

ROOT = Path(__file__).resolve().parents[1]
SHARED_DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SHIPPED = ROOT / "tests" / "data" / "locomo_small.json"
CATEGORIES = ("1", "2", "4")
STARTUP_SECONDS = 600


def default_data() -> Path:
    return SHARED_DEV if SHARED_DEV.exists() else SHIPPED


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def is_right(reply: str, gold: str) -> bool:
    g = normalise(gold)
    return token_f1(reply, gold) >= 0.5 or (bool(g) and g in normalise(reply))


class App:
    """`python app.py` in a subprocess, its log in a file; stopped on exit."""

    def __init__(self, data_dir: Path, port: int, log: Path, env: dict[str, str] | None = None):
        self.url = f"http://127.0.0.1:{port}"
        e = {k: v for k, v in os.environ.items() if k not in ("MEMORY_DATA_DIR", "GRADIO_SERVER_PORT")}
        e |= {
            "MEMORY_DATA_DIR": str(data_dir),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(port),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py")], cwd=str(ROOT), env=e, stdout=self._log, stderr=subprocess.STDOUT
        )

    def wait(self, timeout: float = STARTUP_SECONDS) -> float:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"app.py exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=5) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                time.sleep(1)
        raise SystemExit(f"app.py did not answer within {timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def reply_call(trace: TraceDict) -> LLMCallDict:
    none: LLMCallDict = {}
    return next((c for c in reversed(trace.get("llm_calls") or []) if c.get("purpose") == "reply"), none)


def summarise(rows: list[dict]) -> dict:
    def stat(key: str) -> dict:
        xs = [r[key] for r in rows if r.get(key) is not None]
        return {"p50": round(percentile(xs, 50), 2), "max": round(max(xs), 2)} if xs else {"p50": None, "max": None}

    return {
        "n": len(rows),
        "first_token_s": stat("first_token_s"),
        "complete_s": stat("complete_s"),
        "prompt_tokens": stat("prompt_tokens"),
        "cached_tokens": stat("cached_tokens"),
        "right": sum(r["right"] for r in rows),
        "errors": sum(bool(r["error"]) for r in rows),
    }


def _cell(x) -> str:
    return "-" if x is None else (f"{x:.1f}" if isinstance(x, float) else str(x))


def table(rows: list[dict], s: dict) -> str:
    head = f"{'#':>2} {'first s':>8} {'done s':>7} {'prompt':>7} {'cached':>7} {'right':>5}  question"
    lines = [head]
    for i, r in enumerate(rows):
        lines.append(
            f"{i + 1:2} {_cell(r['first_token_s']):>8} {r['complete_s']:7.1f} {_cell(r['prompt_tokens']):>7}"
            f" {_cell(r['cached_tokens']):>7} {'yes' if r['right'] else 'no':>5}  {r['question'][:60]}"
        )
    ft, cp, pt = s["first_token_s"], s["complete_s"], s["prompt_tokens"]
    lines.append(
        f"first token p50 {_cell(ft['p50'])} s, max {_cell(ft['max'])} s; complete p50 {_cell(cp['p50'])} s,"
        f" max {_cell(cp['max'])} s; prompt tokens p50 {_cell(pt['p50'])}; right {s['right']}/{s['n']}"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from gradio_client import Client

    from .llm_eval import sample

    p = parser("replyspeed", __doc__.split("\n")[0], "bench_out/replyspeed.json")
    p.add_argument(
        "--data", default=str(default_data()), help="a LoCoMo file (default: the dev file, else the tests' excerpt)"
    )
    p.add_argument("--conversation", default="conv-26", help="the sample id to import (default conv-26)")
    p.add_argument("--questions", type=int, default=10, help="questions asked in one session (default 10)")
    p.add_argument("--strategy", default="", help="theanine, secom or none (default: the app's)")
    p.add_argument("--port", type=int, default=0, help="the app's port (default: a free one)")
    a = p.parse_args(argv)
    samples = json.loads(Path(a.data).read_text(encoding="utf-8"))
    sample_json = [
        s for s in (samples if isinstance(samples, list) else [samples]) if s.get("sample_id") == a.conversation
    ]
    if not sample_json:
        p.error(f"no conversation {a.conversation} in {a.data}")
    conv = load_samples(sample_json)[0]
    questions = sample([q for q in conv.questions if str(q.category) in CATEGORIES], a.questions, a.seed)

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-replyspeed-") as tmp:
        port = a.port or free_port()
        app = App(Path(tmp) / "data", port, Path(tmp) / "app.log")
        try:
            started = app.wait()
            progress(f"app.py answers on port {port} after {started:.0f} s")
            client = Client(app.url, verbose=False)
            uid = client.predict(api_name="/new_user")
            t0 = time.perf_counter()
            built = client.predict(uid, json.dumps(sample_json), a.conversation, api_name="/import_history")
            import_s = time.perf_counter() - t0
            progress(
                f"imported {a.conversation}: {len(built['closed'])} sessions, {built['memories']} memories, "
                f"{built['segments']} segments in {import_s:.0f} s"
            )
            for i, q in enumerate(questions):
                t1 = time.perf_counter()
                trace: TraceDict  # /send_message's second output: the reply's trace as JSON
                reply, trace = client.predict(uid, q.question, a.strategy, api_name="/send_message")
                complete = time.perf_counter() - t1
                call = reply_call(trace)
                counts = trace.get("counts") or {}
                timings = trace.get("timings") or {}
                rows.append(
                    {
                        "question": q.question,
                        "category": str(q.category),
                        "gold": str(q.answer),
                        "reply": reply,
                        "right": is_right(reply, str(q.answer)),
                        "f1": round(token_f1(reply, str(q.answer)), 3),
                        "first_token_s": round(timings["first_token"], 2) if "first_token" in timings else None,
                        "total_s": round(timings.get("total", 0.0), 2),
                        "complete_s": round(complete, 2),
                        "prompt_tokens": call.get("prompt_tokens"),
                        "cached_tokens": counts.get("prompt_tokens_cached"),
                        "completion_tokens": call.get("completion_tokens"),
                        "strategy": trace.get("strategy"),
                        "error": trace.get("error"),
                        "timings": {k: round(float(v), 3) for k, v in timings.items()},  # where the seconds went
                    }
                )
                r = rows[-1]
                progress(
                    f"{i + 1}/{len(questions)} first {_cell(r['first_token_s'])} s, done {complete:.1f} s, "
                    f"prompt {r['prompt_tokens']} ({_cell(r['cached_tokens'])} cached): {reply[:60]!r}"
                )
        finally:
            app.stop()
    summary = summarise(rows)
    out = {
        "config": vars(a) | {"import_seconds": round(import_s, 1), "app_start_seconds": round(started, 1)},
        "machine": machine(),
        "summary": summary,
        "rows": rows,
    }
    atomic_write_json(a.out, out)
    print(f"Reply speed: {a.conversation}, {len(rows)} questions in one session, the app's defaults")
    print(table(rows, summary))
    return 0
