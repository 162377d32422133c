"""THEANINE memory of each user: build at session close, retrieve timelines at reply time."""
from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path

import numpy as np

from ..embeddings import Embedder
from ..llm import LLMSession
from ..records import SessionRecord
from ..settings import Options
from ..store import VectorStore
from ..trace import Trace
from ..userspace import user_dir
from . import linking, prompts, timelines
from .graph import Memory, MemoryGraph

KIND = "theanine_memories"


class TheanineMemory:
    def __init__(self, store: VectorStore, embedder: Embedder, data_dir: Path):
        self.store, self.embedder, self.data_dir = store, embedder, Path(data_dir)
        self._graphs: dict[str, MemoryGraph] = {}
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    # --- per-user graph, cached, one writer at a time ------------------------
    def lock(self, user_id: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(user_id, threading.RLock())

    def _dir(self, user_id: str) -> Path:
        return user_dir(self.data_dir, user_id) / "theanine_graph"

    def graph(self, user_id: str) -> MemoryGraph:
        with self.lock(user_id):
            if user_id not in self._graphs:
                self._graphs[user_id] = MemoryGraph.load(self._dir(user_id))
            return self._graphs[user_id]

    # --- Phase I --------------------------------------------------------------
    def build(self, user_id: str, session: SessionRecord, llm: LLMSession | None, options: Options,
              trace: Trace) -> list[str] | None:
        """Summarise and link one session. Returns the new memory ids, or None if already built."""
        with self.lock(user_id):
            if session.session_id in self.graph(user_id).built_sessions:
                return None
        # The summary (an LLM call) runs outside the graph lock, so replies keep retrieving meanwhile;
        # closes of one user are serialised by the agent, so no other build can add this session.
        with trace.timed("theanine_summarise"):
            mems = linking.summarise(session, llm)
        with self.lock(user_id):
            if session.session_id in self.graph(user_id).built_sessions:
                return None
            return self.add_memories(user_id, session.session_id, mems, llm, options, trace)

    def add_memories(self, user_id: str, session_id: str, mems: list[Memory], llm: LLMSession | None,
                     options: Options, trace: Trace) -> list[str]:
        """Link memories of one session into the graph and index them; the graph file is written last,
        so a crash before it leaves the session unbuilt and a rerun rebuilds it once."""
        with self.lock(user_id):
            try:
                return self._add_memories(user_id, session_id, mems, llm, options, trace)
            except BaseException:
                self._graphs.pop(user_id, None)  # drop a half-updated cache; the file on disk is intact
                raise

    def _add_memories(self, user_id, session_id, mems, llm, options, trace) -> list[str]:
        graph = self.graph(user_id)
        with trace.timed("theanine_link"):
            self.store.delete(user_id, KIND, where={"session_id": session_id})  # leftovers of a crashed run
            vecs = self.embedder.embed([m.event for m in mems]) if mems else np.zeros((0, 1))
            cands = self._candidates(user_id, session_id, mems, vecs, options.j)
        with trace.timed("theanine_relations"):
            labels = linking.classify(graph, cands, {m.id: m for m in mems}, llm)
        for m in mems:
            graph.add_memory(m)
        for m in mems:
            related = [(c.old_id, labels[(c.old_id, c.new_id)]) for c in cands
                       if c.new_id == m.id and labels[(c.old_id, c.new_id)] != "None"]
            linking.link(graph, m, related)
        if mems:
            self.store.add(user_id, KIND, [m.id for m in mems], [m.event for m in mems], vecs,
                           [{"session_id": m.session_id, "time": m.time} for m in mems])
        graph.built_sessions.add(session_id)
        graph.save_session(self._dir(user_id), session_id)
        return [m.id for m in mems]

    def _candidates(self, user_id: str, session_id: str, mems: list[Memory], vecs: np.ndarray,
                    j: int) -> list[linking.Candidate]:
        graph = self.graph(user_id)
        out = []
        for m, v in zip(mems, vecs):
            # No `where` filter: Chroma evaluates it over the whole collection (slow at 100k), and this
            # session's own memories are not in the store yet (leftovers were deleted above).
            for h in self.store.query(user_id, KIND, v, j):
                if h.id in graph and graph.memory(h.id).session_id != session_id:
                    out.append(linking.Candidate(m.id, h.id, h.score))
        return out

    # --- Phase II ---------------------------------------------------------------
    def retrieve(self, user_id: str, context: str, options: Options, trace: Trace) -> list[dict]:
        """Top-k memories for the dialogue context, and n sampled timelines through each.

        Returns the raw timelines ({"anchor", "nodes", "text"}) and fills trace.memories.
        """
        with trace.timed("theanine_retrieve"):
            vec = self.embedder.embed([context])[0]
            hits = self.store.query(user_id, KIND, vec, options.k)
        with trace.timed("theanine_untangle"), self.lock(user_id):
            graph = self.graph(user_id)
            rng = random.Random(options.seed)
            out, seen = [], set()
            for h in hits:
                if h.id not in graph:
                    continue
                m = graph.memory(h.id)
                trace.memories.append({"id": m.id, "event": m.event, "time": m.time, "session_id": m.session_id,
                                       "score": round(h.score, 4)})
                for path in timelines.sample_timelines(graph, h.id, options.n, rng):
                    if tuple(path) in seen:
                        continue
                    seen.add(tuple(path))
                    out.append({"anchor": h.id, "nodes": path, "text": timelines.render(graph, path)})
        trace.timelines_raw = out
        return out

    def refine(self, llm: LLMSession, dialogue: str, raw: list[dict], trace: Trace) -> list[str]:
        """Phase II-2 in one batched call; a timeline the LLM did not rewrite keeps its raw text."""
        if not raw:
            return []
        texts = [t["text"] for t in raw]
        with trace.timed("theanine_refine"):
            refined = llm.json("refine", prompts.refine_messages(dialogue, texts), prompts.REFINE_SCHEMA,
                               lambda r: prompts.validate_refined(r, len(texts)), lambda: list(texts),
                               max_tokens=120 * len(texts) + 32)
        refined = [r or texts[i] for i, r in enumerate(refined)] + texts[len(refined):]
        trace.timelines_refined = refined
        return refined

    # --- management ---------------------------------------------------------------
    def delete_memory(self, user_id: str, memory_id: str) -> bool:
        with self.lock(user_id):
            graph = self.graph(user_id)
            if memory_id not in graph:
                return False
            touched = graph.remove_memory(memory_id)
            self.store.delete(user_id, KIND, ids=[memory_id])
            for session_id in touched:
                graph.save_session(self._dir(user_id), session_id)
            return True

    def forget(self, user_id: str) -> None:
        with self.lock(user_id):
            self.store.drop_user(user_id, (KIND,))
            self._graphs.pop(user_id, None)
            shutil.rmtree(self._dir(user_id), ignore_errors=True)

    def view(self, user_id: str) -> dict:
        with self.lock(user_id):
            graph = self.graph(user_id)
            return {"nodes": [{"id": m.id, "event": m.event, "time": m.time, "session_id": m.session_id}
                              for m in sorted(graph.memories(), key=lambda m: m.order)],
                    "edges": [{"source": a, "target": b, "relation": r} for a, b, r in graph.g.edges(data="relation")]}
