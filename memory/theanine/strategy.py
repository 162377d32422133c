"""THEANINE memory of each user: build at session close, retrieve timelines at reply time."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..bm25 import BM25Index
from ..embeddings import Embedder
from ..fusion import rrf
from ..llm import LLMSession
from ..locks import KeyedLocks
from ..packing import Piece, Unit, pack
from ..protocols import GraphStore, VectorStore
from ..records import SessionRecord
from ..settings import Options
from ..trace import Trace
from . import linking, refining
from . import timelines as timelines_mod
from .extract import BUILT_BY
from .graph import JsonGraphStore, Memory, MemoryGraph

KIND = "theanine_memories"
FUSION_CANDIDATES = 50  # hybrid retrieval: memories taken from each ranking before fusing them
TIMELINE_MAX_LEN = 12  # memories per timeline (the paper retrieves whole timelines; longer ones keep
# the memories nearest the retrieved one)


@dataclass
class NodePiece(Piece):
    meta: str = ""  # the memory id this piece renders


class _AlreadyBuilt(Exception):
    """Another process stored this session's part first."""


class TheanineMemory:
    """`graphs`: where the graph is persisted (default: JSON files under data_dir, for one process)."""

    def __init__(self, store: VectorStore, embedder: Embedder, data_dir: Path, graphs: GraphStore | None = None):
        self.store, self.embedder, self.data_dir = store, embedder, Path(data_dir)
        self.graphs: GraphStore = graphs or JsonGraphStore(self.data_dir)
        self.max_len = TIMELINE_MAX_LEN
        self._graphs: dict[str, tuple[MemoryGraph, int]] = {}  # user -> (graph, the store's version of it)
        self._lexical: dict[str, tuple[tuple, BM25Index, list[str]]] = {}  # user -> (graph key, BM25, ids)
        self._locks = KeyedLocks(reentrant=True)
        self._guard = threading.Lock()

    # --- per-user graph, cached, one writer at a time ------------------------
    def lock(self, user_id: str) -> threading.RLock:
        """The user's (reentrant) lock: one writer of the user's graph at a time. A short data lock, never
        held across an LLM call (the last level of the lock order in sessions/work.py)."""
        return self._locks[user_id]

    def use_graph_store(self, graphs: GraphStore) -> None:
        """Persist graphs in `graphs` from now on (the app's shared database); cached graphs are dropped."""
        with self._guard:
            self.graphs = graphs
            self._graphs.clear()

    def graph(self, user_id: str) -> MemoryGraph:
        """The user's graph, reloaded when the store says it changed (another replica wrote to it)."""
        with self.lock(user_id):
            cached = self._graphs.get(user_id)
            if cached is None or cached[1] != self.graphs.version(user_id):
                parts, version = self.graphs.load(user_id)
                cached = self._graphs[user_id] = (MemoryGraph.from_sessions(parts), version)
            return cached[0]

    def _save(self, user_id: str, graph: MemoryGraph, session_ids, new_session: str | None = None) -> None:
        """Store the parts of `session_ids` in one transaction and keep the cache in step with the store."""
        before = self._graphs.get(user_id, (None, None))[1]
        try:
            version = self.graphs.save(user_id, [graph.session_dict(s) for s in sorted(session_ids)], new_session)
        except BaseException:
            self._graphs.pop(user_id, None)  # the cached graph was changed in place; the stored one was not
            raise
        if version is None:
            self._graphs.pop(user_id, None)
            raise _AlreadyBuilt(new_session)
        if before is not None and version == before + 1:
            self._graphs[user_id] = (graph, version)
        else:  # someone else wrote in between: reload on next use
            self._graphs.pop(user_id, None)

    # --- Phase I --------------------------------------------------------------
    def build(
        self, user_id: str, session: SessionRecord, llm: LLMSession | None, options: Options, trace: Trace
    ) -> list[str] | None:
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
            try:
                return self._locked_add(user_id, session.session_id, mems, llm, options, trace)
            except _AlreadyBuilt:
                return None

    def add_memories(
        self, user_id: str, session_id: str, mems: list[Memory], llm: LLMSession | None, options: Options, trace: Trace
    ) -> list[str]:
        """Link memories of one session into the graph and index them; the graph part is stored last,
        in one transaction, so a crash before it leaves the session unbuilt and a rerun rebuilds it once."""
        try:
            return self._locked_add(user_id, session_id, mems, llm, options, trace)
        except _AlreadyBuilt:
            return []

    def _locked_add(self, user_id, session_id, mems, llm, options, trace) -> list[str]:
        with self.lock(user_id):
            try:
                return self._add_memories(user_id, session_id, mems, llm, options, trace)
            except BaseException:
                self._graphs.pop(user_id, None)  # drop a half-updated cache; the stored graph is intact
                raise

    def _add_memories(self, user_id, session_id, mems, llm, options, trace) -> list[str]:
        graph = self.graph(user_id)
        with trace.timed("theanine_link"):
            self.store.delete(user_id, KIND, where={"session_id": session_id})  # leftovers of a crashed run
            vecs = self.embedder.embed([m.event for m in mems]) if mems else np.zeros((0, 1))
            cands = self._candidates(user_id, session_id, mems, vecs, options.j)
        with trace.timed("theanine_relations"):
            labels = linking.classify(graph, cands, {m.id: m for m in mems}, llm)
        g_t = {c.old_id: graph.component_of(c.old_id) for c in cands}  # components before this session
        for m in mems:
            graph.add_memory(m)
        for m in mems:
            related = [
                (c.old_id, labels[(c.old_id, c.new_id)])
                for c in cands
                if c.new_id == m.id and labels[(c.old_id, c.new_id)] != "None"
            ]
            linking.link(graph, m, related, g_t)
        if mems:
            self.store.add(
                user_id,
                KIND,
                [m.id for m in mems],
                [m.event for m in mems],
                vecs,
                [{"session_id": m.session_id, "time": m.time} for m in mems],
            )
        graph.built_sessions.add(session_id)
        self._save(user_id, graph, [session_id], new_session=session_id)
        return [m.id for m in mems]

    def _candidates(
        self, user_id: str, session_id: str, mems: list[Memory], vecs: np.ndarray, j: int
    ) -> list[linking.Candidate]:
        graph = self.graph(user_id)
        out = []
        for m, v in zip(mems, vecs, strict=False):
            # No `where` filter: Chroma evaluates it over the whole collection (slow at 100k), and this
            # session's own memories are not in the store yet (leftovers were deleted above).
            for h in self.store.query(user_id, KIND, v, j):
                if h.id in graph and graph.memory(h.id).session_id != session_id:
                    out.append(linking.Candidate(m.id, h.id, h.score))
        return out

    # --- Phase II ---------------------------------------------------------------
    def retrieve(
        self, user_id: str, context: str, options: Options, trace: Trace, timelines: bool = True
    ) -> list[dict]:
        """Top-k memories for the dialogue context, n sampled timelines through each, packed into
        `options.budget` tokens by the shared rule (memory.packing: whole timelines in anchor order,
        the first that does not fit cut to the memories around its anchor). A timeline whose
        memories were all shown already is left out; the others are kept whole. `timelines` False
        packs the top-k memories alone (ablation).

        Returns the raw timelines ({"anchor", "nodes", "text", "covers"}) and fills trace.memories.
        """
        with trace.timed("theanine_retrieve"):
            hits = self._rank(user_id, context, options.theanine_retriever, options.k)
        with trace.timed("theanine_untangle"), self.lock(user_id):
            graph = self.graph(user_id)
            rng = random.Random(options.seed)
            units: list[Unit] = []
            shown: set[str] = set()
            for hid, score in hits:
                if hid not in graph:
                    continue
                m = graph.memory(hid)
                trace.memories.append(
                    {
                        "id": m.id,
                        "event": m.event,
                        "time": m.time,
                        "session_id": m.session_id,
                        "score": round(score, 4),
                        "built_by": BUILT_BY.get(m.built_by, ""),
                    }
                )
                if hid in shown:
                    continue
                paths = (
                    timelines_mod.sample_timelines(graph, hid, options.n, rng, max_len=self.max_len)
                    if timelines
                    else [[hid]]
                )
                for path in paths:
                    if timelines_mod.adds_memory(path, shown):
                        shown.update(path)
                        units.append(self._unit(graph, path, hid))
            packed = pack(units, options.budget)
            out = []
            for unit, pieces in packed.chosen:
                nodes = [p.meta for p in pieces]
                out.append(
                    {
                        "anchor": unit.meta["anchor"],
                        "nodes": nodes,
                        "text": timelines_mod.render(graph, nodes),
                        "covers": [t for p in pieces for t in p.covers],
                    }
                )
        trace.timelines_raw = out
        return out

    def _rank(self, user_id: str, query: str, retriever: str, k: int) -> list[tuple[str, float]]:
        """The k memories nearest `query`: by embedding similarity (the paper's way), by BM25 over the
        memories' events, or by the reciprocal-rank fusion of both (`retriever`)."""
        dense: list[tuple[str, float]] = []
        if retriever != "bm25":
            vec = self.embedder.embed([query])[0]
            n = k if retriever == "dense" else max(k, FUSION_CANDIDATES)
            dense = [(h.id, float(h.score)) for h in self.store.query(user_id, KIND, vec, n)]
            if retriever == "dense":
                return dense
        index, ids = self._lexical_index(user_id)
        n = k if retriever == "bm25" else max(k, FUSION_CANDIDATES)
        lexical = [(ids[i], s) for i, s in index.top(query, n)] if ids else []
        if retriever == "bm25":
            return lexical
        return rrf([[i for i, _ in dense], [i for i, _ in lexical]])[:k]

    def _lexical_index(self, user_id: str) -> tuple[BM25Index, list[str]]:
        """BM25 over the user's memories, rebuilt when the stored graph changed (its version)."""
        with self.lock(user_id):
            graph = self.graph(user_id)
            key = (id(graph), self._graphs.get(user_id, (None, None))[1])
            cached = self._lexical.get(user_id)
            if cached is None or cached[0] != key:
                ids = sorted(graph.g.nodes)
                cached = self._lexical[user_id] = (key, BM25Index([graph.memory(i).event for i in ids]), ids)
            return cached[1], cached[2]

    @staticmethod
    def _unit(graph: MemoryGraph, path: list[str], anchor: str) -> Unit:
        """A timeline as packing pieces: one memory each, in `timelines.render`'s format."""
        pieces: list[Piece] = []
        for i, mid in enumerate(path):
            m = graph.memory(mid)
            rel = f"-({graph.g.edges[path[i - 1], mid]['relation']})- " if i else ""
            node = f"[{m.time}: {m.event}]" if m.time else f"[{m.event}]"
            pieces.append(NodePiece(rel + node, tuple(m.turns), meta=mid))
        return Unit(f"timeline:{anchor}", pieces, sep=" ", anchor=path.index(anchor), meta={"anchor": anchor})

    def refine(self, llm: LLMSession, dialogue: str, raw: list[dict], trace: Trace, each: bool = False) -> list[str]:
        """Phase II-2 (memory.theanine.refining): batched calls sized to the context window, or with
        `each` one call per timeline (the official code's way); a timeline the LLM did not rewrite
        keeps its raw text."""
        if not raw:
            return []
        with trace.timed("theanine_refine"):
            refined = refining.refine(llm, dialogue, [t["text"] for t in raw], each=each)
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
            self._save(user_id, graph, touched)
            return True

    def forget(self, user_id: str) -> None:
        with self.lock(user_id):
            self.store.drop_user(user_id, (KIND,))
            self._graphs.pop(user_id, None)
            self._lexical.pop(user_id, None)
            self.graphs.drop(user_id)

    def view(self, user_id: str) -> dict:
        with self.lock(user_id):
            graph = self.graph(user_id)
            return {
                "nodes": [
                    {
                        "id": m.id,
                        "event": m.event,
                        "time": m.time,
                        "session_id": m.session_id,
                        "turns": list(m.turns),
                        "built_by": BUILT_BY.get(m.built_by, ""),
                    }
                    for m in sorted(graph.memories(), key=lambda m: m.order)
                ],
                "edges": [{"source": a, "target": b, "relation": r} for a, b, r in graph.g.edges(data="relation")],
            }
