"""One scripted OpenAI-compatible server on 127.0.0.1 for every test that needs an LLM endpoint.

Requests are routed by the step that sends them: the `X-Memory-Purpose` header ("reply", "summarise",
"relation", "segment", "refine", "judge", ...), else the name of the `json_schema` response format,
else "other". Never by the prompt's wording.

Each request takes the next action of its purpose's queue, else of the global queue (`ANY`), else
the purpose's well-behaved default answer (memories from the user's turns, SameTopic relations, one
segment over the whole session, the timelines as they are, a judge that says "correct" and "does
not resist", a short reply). Actions:

  ok(text)                    answer `text` (streamed when the request streams); ok() is the default
  think(text, reasoning)      answer `text` with `reasoning` in the `reasoning_content` field (streamed
                              first as reasoning deltas), as servers of reasoning models do
  status(code, retry_after=, body=)  an error status, with a Retry-After header when given;
                              401 echoes the request's key in its message, like a careless server
  hang(secs)                  sleep `secs` (past the client's timeout), then answer "late"
  cut(text)                   a stream that stops half-way with a torn chunk and no [DONE]
  empty()                     a 200 with no choices
  hold()                      block until `release()` (or 300 s), then answer the default;
                              `arrived[purpose]` is set as soon as the request comes in
  refuse(code=500)            refuse a `json_schema` response format, as servers without structured
                              outputs do (500: llama-cpp-python's server; 400: OpenAI style; 422: validation)

`LLMServer(refuse_json_schema=500)` refuses every `json_schema` request that way (a server without
structured outputs). `max_prompt_tokens = N` makes it a model with an N-token context window: a request
whose prompt (cl100k tokens of its messages) plus its `max_tokens` exceeds N is refused with a 400
`context_length_exceeded`, as OpenAI does, and recorded in `over_window`. Every request is recorded
(`requests`: purpose, body, headers).

The server lives in the test process; an app under test in a subprocess is pointed at it with
`app_llm_env(server)` (OPENAI_BASE_URL=server.url).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

from memory.llm import PURPOSE_HEADER
from memory.tokens import count_tokens

ANY = "*"  # the global queue: taken by any purpose whose own queue is empty


class Action(NamedTuple):
    kind: str  # ok | status | hang | cut | empty | hold | refuse
    arg: Any = None
    retry_after: float | None = None
    body: Any = None


def ok(text: str | None = None) -> Action:
    return Action("ok", text)


def think(text: str | None, reasoning: str) -> Action:
    return Action("ok", text, body={"reasoning_content": reasoning})


def status(code: int, retry_after: float | None = None, body: Any = None) -> Action:
    return Action("status", code, retry_after, body)


def hang(secs: float) -> Action:
    return Action("hang", secs)


def cut(text: str) -> Action:
    return Action("cut", text)


def empty() -> Action:
    return Action("empty")


def hold() -> Action:
    return Action("hold")


def refuse(code: int = 500) -> Action:
    return Action("refuse", code)


def refusal_body(code: int) -> dict:
    """What servers without structured outputs answer to `response_format: json_schema`."""
    if code == 422:  # a request validator (FastAPI/pydantic)
        return {
            "detail": [
                {
                    "type": "literal_error",
                    "loc": ["body", "response_format", "type"],
                    "msg": "Input should be 'text' or 'json_object'",
                }
            ]
        }
    if code == 500:  # llama-cpp-python's server: the validation error becomes an internal error
        return {
            "error": {
                "message": "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
                "  Input should be 'text' or 'json_object' [input_value='json_schema']",
                "type": "internal_server_error",
                "param": None,
                "code": None,
            }
        }
    return {
        "error": {
            "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
            "type": "invalid_request_error",
            "param": "response_format",
        }
    }


class Request(NamedTuple):
    purpose: str
    body: dict
    headers: dict


def purpose_of(headers, body: dict) -> str:
    """`headers`: the request's (case-insensitive) headers."""
    if headers.get(PURPOSE_HEADER):
        return headers[PURPOSE_HEADER]
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("name") or "other"
    return "other"


def response_format(body: dict) -> str | None:
    return (body.get("response_format") or {}).get("type")


def _user_prompt(body: dict) -> str:
    msgs = body.get("messages") or []
    return msgs[-1].get("content", "") if msgs else ""


def default_answer(purpose: str, body: dict) -> str:
    """A valid answer for each step; the numbers it needs (turns, pairs, exchanges, timelines) are read
    from the prompt's numbered lines, which are the step's data."""
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
    if purpose == "relation":  # one pair per call
        return json.dumps({"relation": "SameTopic"})
    if purpose == "segment":
        n = len(re.findall(r"^\[Exchange \d+\]:", prompt, re.M))
        seg = {
            "segment_id": 0,
            "start_exchange_number": 0,
            "end_exchange_number": max(n - 1, 0),
            "num_exchanges": n,
            "summary": "the whole session",
        }
        return json.dumps({"segments": [seg]})
    if purpose == "refine":
        return json.dumps({"timelines": re.findall(r"^Timeline \d+: (.*)$", prompt, re.M)})
    if purpose == "judge":  # QA: correct; TeaFarm: does not resist, does not state the truth
        return json.dumps({"correct": True, "resists": False, "states_truth": False, "reason": "scripted"})
    if purpose == "counterfactual":  # TeaFarm's question writer
        n = int((re.search(r"Write (\d+) messages", prompt) or [0, 1])[1])
        q = {
            "question": "Why did you adopt a cat last week?",
            "false_premise": "a cat",
            "correct_answer": "It was a puppy.",
        }
        return json.dumps({"questions": [q] * n})
    if purpose == "dialogue":  # TeaFarm's step 4: the session before the question
        turns = [("user", "Hi! Long week."), ("assistant", "Hello! Tell me about it."), ("user", "Pets again.")]
        return json.dumps({"turns": [{"speaker": w, "text": t} for w, t in turns]})  # odd: the last is dropped
    if purpose == "reply":
        return "Thanks, I will remember that."
    return "ok"


def prompt_tokens(body: dict) -> int:
    return sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages") or [])


def _completion(text: str, body: dict, reasoning: str = "") -> dict:
    prompt_tokens_ = prompt_tokens(body)
    usage = {"prompt_tokens": prompt_tokens_, "completion_tokens": count_tokens(text)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "finish_reason": "stop", "message": _message(text, reasoning)}],
        "usage": usage,
    }


def _message(text: str, reasoning: str) -> dict:
    m = {"role": "assistant", "content": text}
    return {**m, "reasoning_content": reasoning} if reasoning else m


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    c = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(c)}\n\n".encode()


class LLMServer:
    def __init__(self, refuse_json_schema: int | None = None, max_prompt_tokens: int | None = None):
        self.refuse_json_schema = refuse_json_schema
        self.max_prompt_tokens = max_prompt_tokens
        self.over_window: list[tuple[str, int]] = []  # (purpose, prompt + max_tokens) of each refused request
        self.queues: dict[str, list[Action]] = defaultdict(list)
        self.requests: list[Request] = []
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
                action, purpose = server._take(self.headers, body)
                if (over := server._over_window(purpose, body)) is not None:
                    return self._json(400, over)
                kind, arg = action.kind, action.arg
                if kind == "hold":
                    server._release.wait(300)
                    kind, arg = "ok", None
                if kind == "refuse":
                    return self._json(arg, refusal_body(arg))
                if kind == "status":
                    return self._status(action)
                if kind == "hang":
                    time.sleep(arg)
                    kind, arg = "ok", "late"
                if kind == "empty":
                    return self._json(200, {**_completion("", body), "choices": []})
                text = default_answer(purpose, body) if arg is None else arg
                reasoning = (action.body or {}).get("reasoning_content", "") if kind == "ok" else ""
                if body.get("stream"):
                    return self._stream(text, cut=(kind == "cut"), reasoning=reasoning)
                self._json(200, _completion(text, body, reasoning))

            def _status(self, action: Action):
                code = action.arg
                if action.body is not None:
                    obj = action.body
                else:
                    msg = f"scripted {code}"
                    if code == 401:  # like a careless server: the key it got, echoed in the error
                        msg = f"Incorrect API key provided: {self.headers.get('Authorization', '')}"
                    obj = {"error": {"message": msg, "type": "server_error"}}
                extra = {} if action.retry_after is None else {"Retry-After": str(action.retry_after)}
                self._json(code, obj, extra)

            def _json(self, code, obj, headers=None):
                data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout): nothing to answer

            def _stream(self, text, cut, reasoning=""):
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for i in range(0, len(reasoning), 5):
                        self.wfile.write(_chunk({"reasoning_content": reasoning[i : i + 5]}))
                    pieces = [text[i : i + 5] for i in range(0, len(text), 5)] or [""]
                    if cut:
                        pieces = pieces[: max(1, len(pieces) // 2)]
                    for p in pieces:
                        self.wfile.write(_chunk({"content": p}))
                        self.wfile.flush()
                    if cut:
                        self.wfile.write(b'data: {"id": "x", "choi')  # torn JSON, then the connection drops
                        self.wfile.flush()
                    else:
                        self.wfile.write(_chunk({}, "stop") + b"data: [DONE]\n\n")
                    self.close_connection = True
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _take(self, headers, body: dict) -> tuple[Action, str]:
        purpose = purpose_of(headers, body)
        with self._lock:
            self.requests.append(Request(purpose, body, {k.lower(): v for k, v in headers.items()}))
            own, every = self.queues[purpose], self.queues[ANY]
            action = own.pop(0) if own else every.pop(0) if every else ok()
        self.arrived[purpose].set()
        asks_schema = response_format(body) == "json_schema"
        if action.kind == "ok" and self.refuse_json_schema and asks_schema:
            action = refuse(self.refuse_json_schema)
        elif action.kind == "refuse" and not asks_schema:
            action = ok()  # only a json_schema request is refused
        return action, purpose

    def _over_window(self, purpose: str, body: dict) -> dict | None:
        """The error a model with a `max_prompt_tokens` window answers to a request too long for it."""
        if self.max_prompt_tokens is None:
            return None
        need = prompt_tokens(body) + int(body.get("max_tokens") or 0)
        if need <= self.max_prompt_tokens:
            return None
        with self._lock:
            self.over_window.append((purpose, need))
        msg = f"This model's maximum context length is {self.max_prompt_tokens} tokens; the request needs {need}."
        return {"error": {"message": msg, "type": "invalid_request_error", "code": "context_length_exceeded"}}

    # --- scripting -----------------------------------------------------------------------------
    def script(self, purpose: str, *actions) -> None:
        """Replace the queue of `purpose` (or the global queue, ANY) with `actions` (then the defaults).
        An action is one of the helpers above or a tuple of its fields, e.g. ("status", 500)."""
        with self._lock:
            self.queues[purpose] = [a if isinstance(a, Action) else Action(*a) for a in actions]
            self.arrived[purpose].clear()

    def reset(self) -> None:
        with self._lock:
            self.queues.clear()
            self.requests.clear()
            self.over_window.clear()
            self.max_prompt_tokens = None
            for e in self.arrived.values():
                e.clear()
        self._release.clear()

    def release(self) -> None:
        self._release.set()

    def bodies(self, purpose: str | None = None) -> list[dict]:
        with self._lock:
            return [r.body for r in self.requests if purpose is None or r.purpose == purpose]

    def count(self, purpose: str) -> int:
        return len(self.bodies(purpose))

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
