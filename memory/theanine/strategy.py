"""THEANINE memory of each user: build at session close, retrieve timelines at reply time."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np

from ..bm25 import BM25Index
from ..design import Forgetting, MemoryClients, Recall, Recalled, RecallRequest, SessionOf
from ..embeddings import Embedder
from ..fusion import rrf
from ..llm import LLMSession
from ..locks import UserLocks
from ..packing import Piece, Unit, pack, pack_anchors_first, render
from ..protocols import GraphStore, VectorStore
from ..records import ReplyEvent, SessionRecord
from ..reply_prompts import dialogue_text
from ..settings import Options, Settings
from ..steps_policy import StepPlan
from ..trace import Trace
from ..trace_types import ChainMemory, RetrievedMemory, Timeline
from . import linking, refining
from . import timelines as timelines_mod
from .changes import ChangeRule
from .extract import BUILT_BY
from .graph import JsonGraphStore, Memory, MemoryGraph
from .untangle import AsOf, as_of_sessions, current_first, newest_first, node_text

KIND = "theanine_memories"
# hybrid retrieval: memories taken from each ranking before fusing them, whatever k (so a larger k adds
# memories below the same ranking; fusing 100 deep ranked worse: 0.770 against 0.797, docs/defaults.md)
FUSION_CANDIDATES = 50

OFFLINE_REPLY = (
    "Timelines are shown as retrieved, not refined: on the bundled model one refinement call reads about "
    "700 prompt tokens, which adds 6 s or more before the reply's first word on 2 cores, and its answers "
    "were unusable (docs/defaults.md). Connect an LLM (or set MEMORY_LLM_STEPS=on) to refine every "
    "timeline, or choose the paper's THEANINE setting in Settings."
)


class _AlreadyBuilt(Exception):
    """Another process stored this session's part first."""


class TheanineMemory:
    """The THEANINE design (memory.design.MemoryDesign). `locks`: the owner's (the agent's), whose data
    lock (level 4) guards the user's graph; `graphs`: where the graph is persisted (default: JSON files
    under data_dir, for one process)."""

    export_key = "theanine_graph"

    def __init__(
        self, store: VectorStore, embedder: Embedder, data_dir: Path, locks: UserLocks, graphs: GraphStore | None = None
    ):
        self.store, self.embedder, self.data_dir = store, embedder, Path(data_dir)
        self.graphs: GraphStore = graphs or JsonGraphStore(self.data_dir)
        self._graphs: dict[str, tuple[MemoryGraph, int]] = {}  # user -> (graph, the store's version of it)
        # user -> (graph key, BM25 over the events, memory ids, their sessions)
        self._lexical: dict[str, tuple[tuple, BM25Index, list[str], list[str]]] = {}
        self._locks = locks
        self._guard = threading.Lock()

    @classmethod
    def from_clients(cls, settings: Settings, clients: MemoryClients) -> TheanineMemory:
        return cls(clients.store, clients.embedder, settings.data_dir, clients.locks, clients.graphs)

    def use_clients(self, clients: MemoryClients) -> None:
        if clients.graphs is not self.graphs:
            self.use_graph_store(clients.graphs)

    # --- per-user graph, cached, one writer at a time ------------------------
    def lock(self, user_id: str) -> threading.RLock:
        """The user's (reentrant) lock: one writer of the user's graph at a time. A short data lock, never
        held across an LLM call (the last level of the lock order in sessions/work.py)."""
        return self._locks.data(user_id)

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
    def build_step(self, plan: StepPlan) -> tuple[bool, str]:
        if not plan.any:
            return False, "THEANINE: taking the session's statements as memories and linking them (no LLM)"
        what = "summarising the session into memories" if plan.summary else "taking the session's statements"
        how = {"": "by the offline rule", "llm": "by the LLM", "score": "by the LLM's label scores"}
        return plan.theanine, f"THEANINE: {what} and linking them {how[plan.relations]}"

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
        try:
            return self._add_session(user_id, session.session_id, mems, llm, options, trace)
        except _AlreadyBuilt:
            return None

    def add_memories(
        self, user_id: str, session_id: str, mems: list[Memory], llm: LLMSession | None, options: Options, trace: Trace
    ) -> list[str]:
        """Link memories of one session into the graph and index them; the graph part is stored last,
        in one transaction, so a crash before it leaves the session unbuilt and a rerun rebuilds it once."""
        try:
            return self._add_session(user_id, session_id, mems, llm, options, trace)
        except _AlreadyBuilt:
            return []

    def _add_session(self, user_id, session_id, mems, llm, options, trace) -> list[str]:
        # The candidates and their relation labels (batched LLM calls: minutes on a slow endpoint) are
        # found outside the graph lock, so the user's replies keep retrieving meanwhile. They only read
        # the graph: its writers (builds, deletions) are serialised by the agent's writer lock (level 3
        # of the order in sessions/work.py). The graph changes below are made under the lock, whole.
        with self.lock(user_id):
            graph = self.graph(user_id)
            if session_id in graph.built_sessions:
                raise _AlreadyBuilt(session_id)
        with trace.timed("theanine_link"):
            self.store.delete(user_id, KIND, where={"session_id": session_id})  # leftovers of a crashed run
            vecs = self.embedder.embed([m.event for m in mems]) if mems else np.zeros((0, 1))
            cands = self._candidates(graph, user_id, session_id, mems, vecs, options.j)
            cands += linking.stated_change_candidates(graph, mems, cands, llm)  # offline: every earlier fact
        with trace.timed("theanine_relations"):
            # Offline, Changed is labelled by the text rule of memory.theanine.changes.
            labels = linking.classify(
                graph, cands, {m.id: m for m in mems}, llm, ChangeRule(), options.explain_relations
            )
        with self.lock(user_id):
            try:
                return self._add_memories(user_id, session_id, mems, vecs, cands, labels)
            except BaseException:
                self._graphs.pop(user_id, None)  # drop a half-updated cache; the stored graph is intact
                raise

    def _add_memories(self, user_id, session_id, mems, vecs, cands, labels) -> list[str]:
        graph = self.graph(user_id)  # the cached graph, or the stored one if another process wrote meanwhile
        if session_id in graph.built_sessions:
            raise _AlreadyBuilt(session_id)
        cands = [c for c in cands if c.old_id in graph]
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
        self, graph: MemoryGraph, user_id: str, session_id: str, mems: list[Memory], vecs: np.ndarray, j: int
    ) -> list[linking.Candidate]:
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
        self, user_id: str, context: str, options: Options, trace: Trace, timelines: bool = True, sessions: AsOf = None
    ) -> list[Timeline]:
        """Top-k memories for the dialogue context, n sampled timelines through each, packed into
        `options.budget` tokens by a shared rule of memory.packing (`options.timeline_packing`):
        "anchors", every retrieved memory first and then the timelines grown around them, a memory
        shown once; "whole", whole timelines in anchor order (one whose memories were all shown
        already is left out), the first that does not fit cut to the memories around its anchor.
        `timelines` False packs the top-k memories alone (ablation).

        Current first, history kept: a retrieved memory that a later one superseded (a Changed edge)
        is replaced by the current one, with the superseded ones after it as its history
        ("[2023-01-05 until 2023-04-03: lived in Porto]"). `sessions` retrieves over the memory as it
        stood then: a date, or the sessions built by then (`as_of_sessions`).

        Returns the raw timelines ({"anchor", "nodes", "text", "covers"}) and fills trace.memories.
        """
        with trace.timed("theanine_untangle"), self.lock(user_id):
            graph = self.graph(user_id)
            built = as_of_sessions(graph, sessions)
            if built is not None:
                graph = graph.as_of(built)
        with trace.timed("theanine_retrieve"):
            hits = self._rank(user_id, context, options.theanine_retriever, options.k, built)
        with trace.timed("theanine_untangle"):
            rng = random.Random(options.seed)
            units: list[Unit] = []
            shown: set[str] = set()  # whole: every memory of the timelines so far; anchors: the anchors
            whole = options.timeline_packing == "whole"
            for hid, score in hits:
                if hid not in graph:
                    continue
                trace.memories.append(self._hit(graph, hid, score))
                anchor = graph.current(hid)
                if anchor in shown:
                    continue
                paths = (
                    timelines_mod.sample_timelines(graph, anchor, options.n, rng, max_len=options.timeline_len)
                    if timelines
                    else [[anchor]]
                )
                for path in paths:
                    if timelines_mod.adds_memory(path, shown):
                        path, history = current_first(graph, path, anchor, shown)
                        shown.update(path + history if whole else [anchor])
                        units.append(
                            self._unit(graph, path, anchor, history, history_first=options.timeline_order == "oldest")
                        )
            if whole:
                packed = pack(units, options.budget)
            else:
                packed = pack_anchors_first(units, options.budget, whole_first=options.whole_timelines)
            out: list[Timeline] = []
            for unit, pieces in packed.chosen:
                out.append(
                    {
                        "anchor": unit.meta["anchor"],
                        "nodes": list(dict.fromkeys(p.key for p in pieces)),
                        "text": render(unit, pieces),
                        "covers": [t for p in pieces for t in p.covers],
                        "chain": self._chain(graph, unit, pieces),
                        "whole": len(pieces) == len(unit.pieces),
                    }
                )
            if options.timeline_order == "recent":
                out = newest_first(graph, out)
            elif options.timeline_order == "oldest":
                out = newest_first(graph, out)[::-1]
        trace.timelines_raw = out
        return out

    def _rank(
        self, user_id: str, query: str, retriever: str, k: int, sessions: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """The k memories nearest `query`: by embedding similarity (the paper's way), by BM25 over the
        memories' events, or by the reciprocal-rank fusion of both (`retriever`); `sessions`, when
        given, limits them to the memories of those sessions (recall as of a past session)."""
        dense: list[tuple[str, float]] = []
        if retriever != "bm25":
            vec = self.embedder.embed([query])[0]
            n = k if retriever == "dense" else FUSION_CANDIDATES
            where = None if sessions is None else {"session_id": {"$in": sorted(sessions) or [""]}}
            dense = [(h.id, float(h.score)) for h in self.store.query(user_id, KIND, vec, n, where=where)]
            if retriever == "dense":
                return dense
        index, ids, session_of = self._lexical_index(user_id)
        n = k if retriever == "bm25" else FUSION_CANDIDATES
        ranked = index.top(query, n if sessions is None else len(ids)) if ids else []
        lexical = [(ids[i], s) for i, s in ranked if sessions is None or session_of[i] in sessions][:n]
        if retriever == "bm25":
            return lexical
        return rrf([[i for i, _ in dense], [i for i, _ in lexical]])[:k]

    def _lexical_index(self, user_id: str) -> tuple[BM25Index, list[str], list[str]]:
        """BM25 over the user's memories (with their ids and sessions), rebuilt when the stored graph
        changed (its version)."""
        with self.lock(user_id):
            graph = self.graph(user_id)
            key = (id(graph), self._graphs.get(user_id, (None, None))[1])
            cached = self._lexical.get(user_id)
            if cached is None or cached[0] != key:
                ids = sorted(graph.g.nodes)
                mems = [graph.memory(i) for i in ids]
                index = BM25Index([m.event for m in mems])
                cached = self._lexical[user_id] = (key, index, ids, [m.session_id for m in mems])
            return cached[1], cached[2], cached[3]

    @staticmethod
    def _hit(graph: MemoryGraph, mid: str, score: float) -> RetrievedMemory:
        """What See why lists for a retrieved memory, with the memory that superseded it, if any."""
        m = graph.memory(mid)
        d: RetrievedMemory = {
            "id": m.id,
            "event": m.event,
            "time": m.time,
            "session_id": m.session_id,
            "score": round(score, 4),
            "built_by": BUILT_BY.get(m.built_by, ""),
        }
        cur = graph.current(mid)
        if cur != mid:
            c = graph.memory(cur)
            d["superseded_by"] = {"id": c.id, "event": c.event, "time": c.time}
        return d

    @staticmethod
    def _unit(
        graph: MemoryGraph,
        path: list[str],
        anchor: str,
        history: tuple[str, ...] | list[str] = (),
        history_first: bool = False,
    ) -> Unit:
        """A timeline as packing pieces: one memory each, in `timelines.render`'s format; a superseded
        memory says until when it held, and `history` (superseded memories off the path, newest first)
        follows the anchor, or with `history_first` opens the timeline oldest first, so that the current
        fact is read after what it replaced. An anchor that replaced earlier memories reads "now: ...",
        in its place: the chain shows each memory once."""
        replaced = bool(graph.replaced(anchor))
        pieces: list[Piece] = []
        for i, mid in enumerate(path):
            rel = f"-({graph.g.edges[path[i - 1], mid]['relation']})- " if i else ""
            text = ("now: " if mid == anchor and replaced else "") + node_text(graph, mid)
            pieces.append(Piece(text, tuple(graph.memory(mid).turns), key=mid, link=rel))
        at = path.index(anchor)
        before = list(history)[::-1] if history_first else list(history)
        for j, mid in enumerate(before):
            text = ("before: " if j == 0 else "") + node_text(graph, mid)
            pieces.insert(j if history_first else at + 1 + j, Piece(text, tuple(graph.memory(mid).turns), key=mid))
        if history_first:
            at += len(before)
        meta = {"anchor": anchor, "history": list(history)}
        return Unit(f"timeline:{anchor}", pieces, sep=" ", anchor=at, meta=meta)

    @staticmethod
    def _chain(graph: MemoryGraph, unit: Unit, chosen: list[Piece]) -> list[ChainMemory]:
        """The whole timeline as See why draws it: each memory once, in order, with the relation of the
        arrow into it, whether it reached the reply, and which memory was retrieved."""
        used = {p.key for p in chosen}
        history = set(unit.meta.get("history") or ())
        out: list[ChainMemory] = []
        for p in unit.pieces:
            m = graph.memory(p.key)
            relation = "Changed" if p.key in history else p.link.strip(" -()")
            out.append(
                {
                    "id": m.id,
                    "event": m.event,
                    "time": m.time,
                    "session_id": m.session_id,
                    "relation": relation,
                    "used": p.key in used,
                    "anchor": p.key == unit.meta["anchor"],
                    "history": p.key in history,
                }
            )
        return out

    def recall(self, user_id: str, options: Options, trace: Trace, ask: RecallRequest) -> Recall:
        """Timelines for one reply, refined for the dialogue when `ask.llm` is given (`ask.refine` says how)."""
        opts = options.for_theanine()
        yield ReplyEvent("status", "Retrieving memory timelines...")
        raw = self.retrieve(user_id, ask.query(opts), opts, trace, timelines=ask.timelines, sessions=ask.sessions)
        texts = [t["text"] for t in raw]
        if raw and ask.llm is not None and ask.timelines:
            yield ReplyEvent("status", "Refining timelines for this conversation...")
            plan = ask.refine
            texts = self.refine(
                ask.llm,
                dialogue_text(ask.history, ask.message, last=len(ask.history) if plan.turns is None else plan.turns),
                raw,
                trace,
                each=opts.refine_each,
                workers=plan.workers,
                first=plan.first,
                per_timeline=plan.per_timeline,
            )
        note = OFFLINE_REPLY if texts and not trace.timelines_refined else ""
        return Recalled(list(texts), [tuple(t.get("covers", ())) for t in raw], note)

    def refine(
        self,
        llm: LLMSession,
        dialogue: str,
        raw: list[Timeline],
        trace: Trace,
        each: bool = True,
        workers: int = 1,
        first: int | None = None,
        per_timeline: int = refining.ANSWER_PER_TIMELINE,
    ) -> list[str]:
        """Phase II-2 (memory.theanine.refining): every timeline that reached the reply is rewritten for
        the dialogue, a lone memory too (the official code refines every chosen timeline); `each`: one
        call per timeline, `workers` at a time (an endpoint), else batched calls sized to the window.
        `first` refines only the first timelines (the bundled model: the rest go to the reply raw,
        and trace.timelines_refined holds "" for them). A timeline the LLM did not rewrite keeps its
        raw text."""
        if not raw:
            return []
        texts = [t["text"] for t in raw]
        todo = list(range(len(raw) if first is None else min(first, len(raw))))
        with trace.timed("theanine_refine"):
            got = refining.refine(
                llm, dialogue, [texts[i] for i in todo], each=each, workers=workers, per_timeline=per_timeline
            )
        refined = [""] * len(raw)
        for i, text in zip(todo, got, strict=True):
            refined[i] = texts[i] = text
        trace.timelines_refined = refined
        return texts

    def sessions_as_of(self, user_id: str, as_of: str) -> set[str]:
        """The sessions whose memory existed as of `as_of`: a built session's id (it and every session
        before it in time order, as time travel counts steps) or a date (sessions dated on or before it)."""
        with self.lock(user_id):
            graph = self.graph(user_id)
            if as_of in graph.built_sessions:
                return graph.sessions_through(as_of)
            out = as_of_sessions(graph, as_of)
            return out if out is not None else set(graph.built_sessions)

    # --- management ---------------------------------------------------------------
    def forget(
        self, user_id: str, memory: Forgetting, session_of: SessionOf | None = None, options: Options | None = None
    ) -> dict:
        """The memory `memory.memory_id` goes from the graph (its edges too) and the store; memories made
        from the same turns stay. {"removed": [the id]}, or {"removed": []} when there is no such memory."""
        with self.lock(user_id):
            graph = self.graph(user_id)
            if memory.memory_id not in graph:
                return {"removed": []}
            touched = graph.remove_memory(memory.memory_id)
            self.store.delete(user_id, KIND, ids=[memory.memory_id])
            self._save(user_id, graph, touched)
            return {"removed": [memory.memory_id]}

    def drop_user(self, user_id: str) -> None:
        with self.lock(user_id):
            self.store.drop_user(user_id, (KIND,))
            self._graphs.pop(user_id, None)
            self._lexical.pop(user_id, None)
            self.graphs.drop(user_id)

    def export(self, user_id: str) -> dict:
        return self.graph(user_id).to_dict()

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
                        "superseded_by": graph.superseded_by(m.id),  # None: current
                    }
                    for m in sorted(graph.memories(), key=lambda m: m.order)
                ],
                "edges": [
                    {"source": a, "target": b, "relation": r}
                    | ({"found_by": graph.found_by(a, b)} if r == "Changed" else {})
                    for a, b, r in graph.g.edges(data="relation")
                ],
            }
