"""A scripted OpenAI-compatible server that knows which step of the app is calling it.

Each request is routed by its system prompt to a purpose: "reply", "summarise",
"relation", "segment", "refine" (or "other"). Every purpose has a queue of
scripted entries; when the queue is empty the purpose's well-behaved default
answers (memories from the user's turns, SameTopic relations, one segment over
the whole session, the timelines as they are, a short reply).

Entries:
  ("ok", text)       answer `text` (streamed when the request streams)
  ("status", code)   an error status (429, 500, ...); 401 echoes the request's key in its message
  ("hang", secs)     sleep `secs` (past the client's timeout), then answer "late"
  ("cut", text)      a stream that stops half-way with a torn chunk and no [DONE]
  ("empty", None)    a 200 with no choices
  ("hold", None)     block until `release()` (or 300 s), then answer the default;
                     `arrived[purpose]` is set as soon as the request comes in,
                     so a test can freeze the app at an exact step (e.g. to kill it)

The server lives in the test process; the app under test runs in a subprocess
and is pointed at it with OPENAI_BASE_URL=server.url.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PURPOSES = {
    "You are a friendly assistant": "reply",
    "You write long-term memories": "summarise",
    "You relate memories": "relation",
    "You segment conversations": "segment",
    "You prepare memories": "refine",
}


def purpose_of(body: dict) -> str:
    msgs = body.get("messages") or []
    system = msgs[0].get("content", "") if msgs and msgs[0].get("role") == "system" else ""
    for start, purpose in PURPOSES.items():
        if system.startswith(start):
            return purpose
    return "other"


def _user_prompt(body: dict) -> str:
    msgs = body.get("messages") or []
    return msgs[-1].get("content", "") if msgs else ""


def default_answer(purpose: str, body: dict) -> str:
    prompt = _user_prompt(body)
    if purpose == "summarise":
        mems = []
        for m in re.finditer(r"^\[(\d+)\] ([^:\n]+): (.*)$", prompt, re.M):
            i, speaker, text = int(m.group(1)), m.group(2), m.group(3)
            if speaker != "assistant":
                mems.append({"speaker": speaker, "event": f"The user mentioned that {text}", "turns": [i]})
        return json.dumps(
            {"memories": mems or [{"speaker": "user", "event": "The user said nothing much today", "turns": [0]}]}
        )
    if purpose == "relation":
        n = len(re.findall(r"^Pair \d+:", prompt, re.M))
        return json.dumps({"relations": [{"pair": i, "relation": "SameTopic"} for i in range(n)]})
    if purpose == "segment":
        n = len(re.findall(r"^\[Exchange \d+\]:", prompt, re.M))
        return json.dumps(
            {
                "segments": [
                    {
                        "segment_id": 0,
                        "start_exchange_number": 0,
                        "end_exchange_number": max(n - 1, 0),
                        "num_exchanges": n,
                        "summary": "the whole session",
                    }
                ]
            }
        )
    if purpose == "refine":
        return json.dumps({"timelines": re.findall(r"^Timeline \d+: (.*)$", prompt, re.M)})
    if purpose == "reply":
        return "Thanks, I will remember that."
    return "ok"


class LLMServer:
    def __init__(self):
        self.queues: dict[str, list] = defaultdict(list)
        self.requests: list[tuple[str, dict]] = []
        self.arrived: dict[str, threading.Event] = defaultdict(threading.Event)
        self._release = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # /v1/models, health checks
                self._json(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                purpose = purpose_of(body)
                with server._lock:
                    server.requests.append((purpose, body))
                    q = server.queues[purpose]
                    kind, arg = q.pop(0) if q else ("ok", None)
                server.arrived[purpose].set()
                if kind == "hold":
                    server._release.wait(300)
                    kind, arg = "ok", None
                if kind == "status":
                    msg = f"scripted {arg}"
                    if arg == 401:  # like a careless server: the key it got, echoed in the error
                        msg = f"Incorrect API key provided: {self.headers.get('Authorization', '')}"
                    return self._json(arg, {"error": {"message": msg, "type": "server_error"}})
                if kind == "hang":
                    time.sleep(arg)
                    kind, arg = "ok", "late"
                if kind == "empty":
                    return self._json(
                        200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
                    )
                text = default_answer(purpose, body) if arg is None else arg
                if body.get("stream"):
                    return self._stream(text, cut=(kind == "cut"))
                self._json(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                    },
                )

            def _json(self, code, obj):
                data = json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout): nothing to answer

            def _stream(self, text, cut):
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    pieces = [text[i : i + 5] for i in range(0, len(text), 5)] or [""]
                    if cut:
                        pieces = pieces[: max(1, len(pieces) // 2)]
                    for p in pieces:
                        chunk = {
                            "id": "x",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "m",
                            "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}],
                        }
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    if cut:
                        self.wfile.write(b'data: {"id": "x", "choi')  # torn JSON, then the connection drops
                        self.wfile.flush()
                    else:
                        end = {
                            "id": "x",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "m",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        }
                        self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                    self.close_connection = True
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # --- scripting -----------------------------------------------------------------------------
    def script(self, purpose: str, *entries) -> None:
        """Replace the queue of `purpose` with `entries` (then the default answers)."""
        with self._lock:
            self.queues[purpose] = list(entries)
            self.arrived[purpose].clear()

    def reset(self) -> None:
        with self._lock:
            self.queues.clear()
            self.requests.clear()
            for e in self.arrived.values():
                e.clear()
        self._release.clear()

    def release(self) -> None:
        self._release.set()

    def count(self, purpose: str) -> int:
        with self._lock:
            return sum(1 for p, _ in self.requests if p == purpose)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


def app_llm_env(server: LLMServer, **extra) -> dict:
    """Environment for app.py (or Settings.from_env) talking to `server`."""
    env = {
        "OPENAI_BASE_URL": server.url,
        "LLM_MODEL": "m",
        "OPENAI_API_KEY": SECRET_KEY,
        "EMBEDDER": "minilm",
        "LLM_TIMEOUT": "2",
        "LLM_MAX_RETRIES": "1",
        "COMPRESSOR_MODEL": "",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


# A recognisable fake key: the tests check it never shows up in logs, traces, exports, files or pages.
SECRET_KEY = "sk-test-RELIABILITY-5ecret-ab12cd34ef56"
