"""Hand-written fakes for the tests (no mock patching): deterministic stand-ins with the real parts' API.

The scripted OpenAI-compatible HTTP server is tests/llm_server.py; fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator

import numpy as np

from memory.agent import MemoryAgent
from memory.errors import LLMError
from memory.llm import Completion
from memory.locks import UserLocks
from memory.protocols import GraphStore, Versions
from memory.records import CloseReport, Progress, ReplyEvent, SessionRecord, Turn
from memory.settings import LLMConfig, Options
from memory.store import Hit
from memory.trace import LLMCall, Trace
from memory.userspace import user_key

WAIT = 60  # generous: waits on a gate end by events, never by elapsed time


class ScriptedLLM:
    """Answers from a script: a list of strings, exceptions, or callables(messages) -> str, in turn.

    When the script runs out it repeats its last entry. Records every prompt.
    """

    def __init__(self, *script: object):
        self.script = list(script) or ["ok"]
        self.prompts: list[list[dict]] = []

    def _next(self, messages: list[dict]) -> str:
        self.prompts.append(messages)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(messages)
        return item if isinstance(item, str) else json.dumps(item)

    # The script answers whatever the schema, seed or purpose of a call.
    def chat(self, messages: list[dict], *, temperature: float, max_tokens: int, **ignored: object) -> Completion:
        return Completion(self._next(messages), 10, 5)

    def stream(self, messages: list[dict], *, temperature: float, max_tokens: int, **ignored: object) -> Iterator[str]:
        text = self._next(messages)
        for i in range(0, len(text), 4):
            yield text[i : i + 4]


class HashEmbedder:
    """Bag-of-words hashed into 256 dims: texts sharing words are similar. Fast and deterministic."""

    name = "hash-256"

    def embed(self, texts: list[str]) -> np.ndarray:
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
    """memory.protocols.Agent over dicts. Every user turn of a closed session becomes one memory.

    fail_replies / fail_closes: how many of the next calls fail (as the real agent does:
    a reply ends with trace.error set; a close raises LLMError).
    """

    def __init__(self, fail_replies: int = 0, fail_closes: int = 0):
        self.fail_replies, self.fail_closes = fail_replies, fail_closes
        self.graphs: dict[str, dict] = {}  # user -> {"nodes": [...], "edges": [...], "built": set()}
        self.calls: list[tuple] = []
        self.graph_store: GraphStore | None = None  # given by the session service, as the real agent is
        self.locks = UserLocks()  # the one owner of per-user locks, as the real agent holds it

    def _g(self, user_id: str) -> dict:
        # by key, as the real stores: the service passes keys, recovery and tests may pass ids
        return self.graphs.setdefault(user_key(user_id), {"nodes": [], "edges": [], "built": set()})

    def use_graph_store(self, graphs: GraphStore, versions: Versions | None = None) -> None:
        self.graph_store = graphs  # the scripted graphs stay in this object; the store is only kept

    def reply(
        self, user_id: str, history: list[Turn], message: str, date: str, options: Options, llm: LLMConfig | None
    ) -> Iterator[ReplyEvent]:
        strategy = options.strategy
        self.calls.append(("reply", user_id, [t.text for t in history], message, strategy, options.theanine_mode))
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

    def close_session(
        self, user_id: str, session: SessionRecord, options: Options, progress: Progress, llm: LLMConfig | None
    ) -> CloseReport:
        self.calls.append(("close", user_id, session.session_id, [t.text for t in session.turns]))
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
            node = {"id": mid, "event": t.text, "time": session.date, "session_id": session.session_id}
            g["nodes"].append({**node, "turns": [t.turn_id] if t.turn_id else []})
            if prev:
                g["edges"].append({"source": prev, "target": mid, "relation": "SameTopic"})
            prev = mid
            report.new_memories.append(mid)
        report.new_segments.append(f"{session.session_id}:seg0")
        g["built"].add(session.session_id)
        progress(1.0, "done")
        return report

    def graph_view(self, user_id: str) -> dict:
        g = self._g(user_id)
        return {"nodes": [dict(n) for n in g["nodes"]], "edges": [dict(e) for e in g["edges"]]}

    def export_user(self, user_id: str) -> dict:
        return {"theanine_graph": self.graph_view(user_id), "secom_segments": []}

    def forget_memory(
        self, user_id: str, memory_id: str, session_of: Callable[[str], SessionRecord | None]
    ) -> dict | None:
        """As MemoryAgent.forget_memory: the node and its edges go; there are no segments to rebuild."""
        g = self._g(user_id)
        node = next((n for n in g["nodes"] if n["id"] == memory_id), None)
        if node is None:
            return None
        g["nodes"] = [n for n in g["nodes"] if n["id"] != memory_id]
        g["edges"] = [e for e in g["edges"] if memory_id not in (e["source"], e["target"])]
        gone = {k: node[k] for k in ("event", "session_id", "turns")}
        return {"memory": memory_id, **gone, "segments_rebuilt": [], "segments_removed": []}

    def forget_user(self, user_id: str) -> None:
        self.calls.append(("forget", user_id))
        self.graphs.pop(user_key(user_id), None)


class GatedAgent(ScriptedAgent):
    """ScriptedAgent whose replies and closes block until the test opens their gate."""

    def __init__(self):
        super().__init__()
        self.reply_gate, self.close_gate = threading.Event(), threading.Event()
        self.in_reply, self.in_close = threading.Event(), threading.Event()

    def reply(self, *a, **kw) -> Iterator[ReplyEvent]:
        self.in_reply.set()
        assert self.reply_gate.wait(WAIT)
        yield from super().reply(*a, **kw)

    def close_session(self, *a, **kw) -> CloseReport:
        self.in_close.set()
        assert self.close_gate.wait(WAIT)
        return super().close_session(*a, **kw)


class MemoryStore:
    """In memory, the contract of memory.protocols.VectorStore as the Chroma store keeps it
    (tests/test_store_contract.py runs the same calls against both)."""

    def __init__(self):
        self.data: dict[tuple[str, str], dict[str, tuple[str, np.ndarray, dict]]] = {}
        self.lock = threading.Lock()

    def _col(self, user_id: str, kind: str) -> dict[str, tuple[str, np.ndarray, dict]]:
        return self.data.setdefault((user_key(user_id), kind), {})

    @staticmethod
    def _match(meta: dict, where: dict | None) -> bool:
        if not where:
            return True
        if len(where) != 1:  # Chroma refuses a filter of several fields without $and
            raise ValueError(f"where takes one field, not {sorted(where)}")
        ((k, v),) = where.items()
        return meta.get(k) == v

    def _select(self, col: dict, ids: list[str] | None, where: dict | None) -> list[str]:
        return [i for i, (_d, _e, m) in col.items() if (ids is None or i in ids) and self._match(m, where)]

    def add(
        self, user_id: str, kind: str, ids: list[str], docs: list[str], vecs: np.ndarray, metas: list[dict]
    ) -> None:
        with self.lock:
            col = self._col(user_id, kind)
            for i, d, e, m in zip(ids, docs, np.asarray(vecs, dtype=np.float64), metas, strict=True):
                assert all(isinstance(v, (str, int, float, bool)) for v in m.values())
                col[i] = (d, e / max(float(np.linalg.norm(e)), 1e-12), dict(m))

    def query(self, user_id: str, kind: str, embedding: np.ndarray, n: int, where: dict | None = None) -> list[Hit]:
        col = self._col(user_id, kind)
        q = np.asarray(embedding, dtype=np.float64).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        hits = [Hit(i, float(col[i][1] @ q), col[i][0], dict(col[i][2])) for i in self._select(col, None, where)]
        return sorted(hits, key=lambda h: (-h.score, h.id))[:n]

    def get(self, user_id: str, kind: str, ids: list[str] | None = None, where: dict | None = None) -> list[Hit]:
        col = self._col(user_id, kind)
        return [Hit(i, 0.0, col[i][0], dict(col[i][2])) for i in self._select(col, ids, where)]

    def delete(self, user_id: str, kind: str, ids: list[str] | None = None, where: dict | None = None) -> None:
        if not ids and not where:  # as the real store: no selection deletes nothing
            return
        with self.lock:
            col = self._col(user_id, kind)
            for i in self._select(col, ids, where):
                del col[i]

    def count(self, user_id: str, kind: str) -> int:
        return len(self._col(user_id, kind))

    def drop_user(self, user_id: str, kinds: tuple[str, ...]) -> None:
        with self.lock:
            for kind in kinds:
                self.data.pop((user_key(user_id), kind), None)

    def rows(self, user_id: str, kind: str) -> dict[str, tuple]:
        """{id: (document, metadata)} of one collection, in insertion order."""
        return {i: (d, m) for i, (d, e, m) in self._col(user_id, kind).items()}


class UpperCompressor:
    """Deterministic stand-in: keeps every word except the short ones."""

    name = "drop-short-words"

    def __init__(self):
        self.calls = 0

    def compress(self, texts: list[str], rate: float) -> list[str]:
        self.calls += 1
        return ["\n".join(" ".join(w for w in ln.split() if len(w) > 3) for ln in t.split("\n")) for t in texts]


def exchanges(sid: str, date: str, *pairs: tuple[str, str]) -> SessionRecord:
    """A session of (user, assistant) exchanges, its turns numbered `sid:0`, `sid:1`, ..."""
    from memory.records import SessionRecord, Turn

    turns = []
    for i, (user, bot) in enumerate(pairs):
        turns += [Turn("user", user, f"{sid}:{2 * i}"), Turn("assistant", bot, f"{sid}:{2 * i + 1}")]
    return SessionRecord(sid, date, turns)


def offline_agent(tmp, embedder, llm, store=None) -> MemoryAgent:
    """A MemoryAgent on a Chroma store in `tmp` (or `store`) with `embedder`, SeCom's embedding segmenter
    and no compressor, replying with `llm`: memory built offline, as the bundled model builds it."""
    from pathlib import Path

    from memory.secom.embedding_segmenter import EmbeddingSegmenter
    from memory.secom.strategy import SecomMemory
    from memory.settings import Settings
    from memory.store import ChromaStore

    tmp = Path(tmp)
    store = store if store is not None else ChromaStore(path=tmp / "chroma")
    return MemoryAgent.from_parts(
        Settings(data_dir=tmp),
        store,
        embedder,
        llm_factory=lambda cfg: llm,
        secom=SecomMemory(store, embedder, None, "", EmbeddingSegmenter(embedder)),
    )
