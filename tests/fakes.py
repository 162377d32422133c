"""Hand-written fakes for the tests (no mock patching): deterministic stand-ins with the real parts' API.

The scripted OpenAI-compatible HTTP server is tests/llm_server.py; fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import json
import re
import threading

import numpy as np

from memory.agent import CloseReport, ReplyEvent
from memory.errors import LLMError
from memory.llm import Completion
from memory.store import Hit
from memory.trace import LLMCall, Trace

WAIT = 60  # generous: waits on a gate end by events, never by elapsed time


class ScriptedLLM:
    """Answers from a script: a list of strings, exceptions, or callables(messages) -> str, in turn.

    When the script runs out it repeats its last entry. Records every prompt.
    """

    def __init__(self, *script):
        self.script = list(script) or ["ok"]
        self.prompts: list[list[dict]] = []

    def _next(self, messages):
        self.prompts.append(messages)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(messages)
        return item if isinstance(item, str) else json.dumps(item)

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose=""):
        return Completion(self._next(messages), 10, 5)

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose=""):
        text = self._next(messages)
        for i in range(0, len(text), 4):
            yield text[i : i + 4]


class HashEmbedder:
    """Bag-of-words hashed into 256 dims: texts sharing words are similar. Fast and deterministic."""

    name = "hash-256"

    def embed(self, texts):
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]{3,}", t.lower()):
                out[i, hash_word(w) % 256] += 1.0
        out += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def hash_word(w: str) -> int:
    h = 2166136261
    for ch in w.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


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


class GatedAgent(ScriptedAgent):
    """ScriptedAgent whose replies and closes block until the test opens their gate."""

    def __init__(self):
        super().__init__()
        self.reply_gate, self.close_gate = threading.Event(), threading.Event()
        self.in_reply, self.in_close = threading.Event(), threading.Event()

    def reply(self, *a, **kw):
        self.in_reply.set()
        assert self.reply_gate.wait(WAIT)
        yield from super().reply(*a, **kw)

    def close_session(self, *a, **kw):
        self.in_close.set()
        assert self.close_gate.wait(WAIT)
        return super().close_session(*a, **kw)


class MemoryStore:
    """In-memory stand-in for memory.store.VectorStore (same interface, cosine scores)."""

    def __init__(self):
        self.data: dict[tuple, dict[str, tuple]] = {}
        self.lock = threading.Lock()

    def _col(self, user_id, kind):
        return self.data.setdefault((user_id, kind), {})

    @staticmethod
    def _match(meta, where):
        return all(meta.get(k) == v for k, v in (where or {}).items())

    def add(self, user_id, kind, ids, documents, embeddings, metadatas):
        with self.lock:
            col = self._col(user_id, kind)
            vecs = [None] * len(ids) if embeddings is None else np.asarray(embeddings)
            for i, d, e, m in zip(ids, documents, vecs, metadatas, strict=False):
                assert all(isinstance(v, (str, int, float, bool)) for v in m.values())
                col[i] = (d, e, dict(m))

    def query(self, user_id, kind, embedding, n, where=None):
        col = self._col(user_id, kind)
        hits = [Hit(i, float(e @ embedding), d, m) for i, (d, e, m) in col.items() if self._match(m, where)]
        return sorted(hits, key=lambda h: -h.score)[:n]

    def get(self, user_id, kind, ids=None, where=None):
        col = self._col(user_id, kind)
        return [
            Hit(i, 0.0, d, m) for i, (d, e, m) in col.items() if (ids is None or i in ids) and self._match(m, where)
        ]

    def delete(self, user_id, kind, ids=None, where=None):
        with self.lock:
            col = self._col(user_id, kind)
            for i in [i for i, (d, e, m) in col.items() if (ids is None or i in ids) and self._match(m, where)]:
                del col[i]

    def count(self, user_id, kind):
        return len(self._col(user_id, kind))

    def rows(self, user_id, kind) -> dict[str, tuple]:
        """{id: (document, metadata)} of one collection, in insertion order."""
        return {i: (d, m) for i, (d, e, m) in self._col(user_id, kind).items()}


class UpperCompressor:
    """Deterministic stand-in: keeps every word except the short ones."""

    name = "drop-short-words"

    def __init__(self):
        self.calls = 0

    def compress(self, texts, rate):
        self.calls += 1
        return ["\n".join(" ".join(w for w in ln.split() if len(w) > 3) for ln in t.split("\n")) for t in texts]
