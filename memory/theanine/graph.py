"""The per-user memory graph: nodes are memories (event, time), edges carry a relation.

Edges always point forward in time (older -> newer), so the graph is a DAG and
every timeline is a forward path. Connected components are kept in a
union-find (networkx's UnionFind) so linking one memory does not rescan the graph.

The graph is saved per session: the session's memories and the edges its close
created, through a `memory.protocols.GraphStore` (injected; memory/ does not know where it lives).
A session is built exactly when its part is stored. `JsonGraphStore` keeps one
JSON file per session, written atomically (one process, benchmarks and tests);
the app stores parts in its relational database (sessions/graph_store.py), shared
by every replica.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import networkx as nx
from networkx.utils import UnionFind

from ..dates import order_key
from ..files import atomic_write_text

RELATIONS = ("Changed", "Cause", "Reason", "HinderedBy", "React", "Want", "SameTopic")


@dataclass
class Memory:
    id: str
    event: str
    time: str  # the session's date as shown to people
    session_id: str
    ts: str = ""  # sortable ISO time, memory.dates.iso_key ("" when the date could not be parsed)
    seq: int = 0  # insertion order: breaks ties and orders undated memories
    turns: list[str] = field(default_factory=list)  # provenance: turn ids
    speaker: str = ""
    built_by: str = ""  # how it was made: "llm" | "extracted" | "extracted-fallback" (BUILT_BY in extract)
    excerpt: str = ""  # its session's whole dialogue, "speaker: text" lines (the relation prompt shows it)

    @property
    def order(self) -> tuple[bool, str, int]:
        """Time order (memory.dates: dated by time, then undated), ties by insertion."""
        return (*order_key(self.ts), self.seq)


class MemoryGraph:
    def __init__(self):
        self.g = nx.DiGraph()
        self.built_sessions: set[str] = set()
        self._comp = UnionFind()  # weakly connected components
        self._next_seq = 1  # 0 means "not assigned yet"
        self._by_session: dict[str, list[str]] = defaultdict(list)
        self._edges_by_owner: dict[str, set[tuple[str, str]]] = defaultdict(set)

    # --- nodes and edges -----------------------------------------------------
    def memory(self, mid: str) -> Memory:
        return self.g.nodes[mid]["m"]

    def memories(self) -> list[Memory]:
        return [d["m"] for _, d in self.g.nodes(data=True)]

    def __len__(self) -> int:
        return self.g.number_of_nodes()

    def __contains__(self, mid: str) -> bool:
        return mid in self.g

    def add_memory(self, m: Memory) -> None:
        if m.seq == 0:
            m.seq = self._next_seq
        self._next_seq = max(self._next_seq, m.seq) + 1
        same = self._by_session.get(m.session_id)
        if same and (first := self.memory(same[0])).excerpt == m.excerpt:
            m.excerpt = first.excerpt  # a session's memories share its dialogue: one copy in memory
        if m.id not in self.g:
            self._by_session[m.session_id].append(m.id)
        self.g.add_node(m.id, m=m)
        self._comp[m.id]  # a UnionFind adds an unseen item when it is looked up

    def link(self, a: str, b: str, relation: str, owner: str | None = None) -> None:
        """Add an edge between two memories, pointing forward in time.

        `owner` is the session whose close made the edge (its file stores it); default: b's session.
        """
        if relation not in RELATIONS:
            raise ValueError(f"unknown relation {relation!r}")
        owner = owner or self.memory(b).session_id
        if self.memory(b).order < self.memory(a).order:
            a, b = b, a
        self.g.add_edge(a, b, relation=relation, owner=owner)
        self._edges_by_owner[owner].add((a, b))
        self._comp.union(a, b)

    def component_of(self, mid: str) -> str:
        if mid not in self.g:
            raise KeyError(mid)
        return self._comp[mid]

    def remove_memory(self, mid: str) -> set[str]:
        """Delete one memory (a user's explicit request); components are rebuilt.

        Returns the sessions whose files changed (the memory's and those owning its edges).
        """
        m = self.memory(mid)
        touched = {m.session_id}
        for a, b, owner in list(self.g.in_edges(mid, data="owner")) + list(self.g.out_edges(mid, data="owner")):
            self._edges_by_owner[owner].discard((a, b))
            touched.add(owner)
        self._by_session[m.session_id].remove(mid)
        self.g.remove_node(mid)
        self._rebuild_components()
        return touched

    def _rebuild_components(self) -> None:
        self._comp = UnionFind(self.g.nodes)
        for a, b in self.g.edges:
            self._comp.union(a, b)

    # --- changed facts: a memory with a later Changed successor is superseded (never deleted) ---
    def superseded_by(self, mid: str) -> str | None:
        """The most recent memory that replaced `mid` (a Changed edge out of it), or None: current."""
        succ = [b for b in self.g.successors(mid) if self.g.edges[mid, b]["relation"] == "Changed"]
        return max(succ, key=lambda b: self.memory(b).order) if succ else None

    def current(self, mid: str) -> str:
        """The memory that holds `mid`'s fact now: follow Changed edges forward to the end."""
        seen = {mid}
        while (nxt := self.superseded_by(mid)) is not None and nxt not in seen:
            seen.add(nxt)
            mid = nxt
        return mid

    def replaced(self, mid: str) -> list[str]:
        """The memories `mid` superseded, directly or through earlier changes, newest first."""
        out: list[str] = []
        todo = [mid]
        while todo:
            v = todo.pop()
            for a in self.g.predecessors(v):
                if self.g.edges[a, v]["relation"] == "Changed" and a not in out and a != mid:
                    out.append(a)
                    todo.append(a)
        return sorted(out, key=lambda x: self.memory(x).order, reverse=True)

    def found_by(self, a: str, b: str) -> str:
        """Who labelled edge a -> b: "rule" when the newer memory was built offline (the offline rules
        label every relation then), else "llm"."""
        return "rule" if self.memory(b).built_by == "extracted" else "llm"

    def as_of(self, sessions: set[str]) -> MemoryGraph:
        """The graph as it stood when only `sessions` were built: their memories and the edges between
        them (an edge belongs to its newer memory's session, as in time travel)."""
        return MemoryGraph.from_sessions([self.session_dict(s) for s in sorted(sessions & self.built_sessions)])

    def sessions_until(self, iso: str) -> set[str]:
        """The built sessions dated on or before `iso` (memory.dates.iso_key; undated ones are left out)."""
        out = set()
        for sid, mids in self._by_session.items():
            ts = self.memory(mids[0]).ts if mids else ""
            if ts and ts <= iso and sid in self.built_sessions:
                out.add(sid)
        return out

    def sessions_through(self, session_id: str) -> set[str]:
        """`session_id` and the built sessions before it in time order (a session with no memory
        cannot be placed in time and is left out unless it is `session_id`)."""

        def first(sid: str):
            mids = self._by_session.get(sid) or []
            return min(self.memory(m).order for m in mids) if mids else None

        mine = first(session_id)
        out = {session_id}
        for sid in self.built_sessions:
            o = first(sid)
            if mine is not None and o is not None and o <= mine:
                out.add(sid)
        return out

    def relation_counts(self) -> dict[str, int]:
        counts = Counter(r for _, _, r in self.g.edges(data="relation"))
        return {r: counts[r] for r in RELATIONS}

    # --- persistence ---------------------------------------------------------
    def session_dict(self, session_id: str) -> dict:
        return {
            "version": 2,
            "session_id": session_id,
            "memories": [dict(vars(self.memory(mid))) for mid in self._by_session.get(session_id, [])],
            "edges": [
                [a, b, self.g.edges[a, b]["relation"]] for a, b in sorted(self._edges_by_owner.get(session_id, ()))
            ],
        }

    def to_dict(self) -> dict:
        """The whole graph (for export)."""
        return {
            "version": 2,
            "built_sessions": sorted(self.built_sessions),
            "memories": [asdict(m) for m in sorted(self.memories(), key=lambda m: m.seq)],
            "edges": [[a, b, r] for a, b, r in self.g.edges(data="relation")],
        }

    @classmethod
    def from_sessions(cls, parts: list[dict]) -> MemoryGraph:
        g = cls()
        mems = sorted((md for p in parts for md in p.get("memories", [])), key=lambda md: md.get("seq", 0))
        for md in mems:
            g.add_memory(Memory(**md))
        for p in parts:
            for a, b, r in p.get("edges", []):
                if a in g and b in g and r in RELATIONS:
                    g.link(a, b, r, owner=p["session_id"])
            g.built_sessions.add(p["session_id"])
        return g

    def save_session(self, folder: Path, session_id: str) -> None:
        atomic_write_text(
            session_file(folder, session_id), json.dumps(self.session_dict(session_id), ensure_ascii=False)
        )

    @classmethod
    def load(cls, folder: Path) -> MemoryGraph:
        return cls.from_sessions(load_parts(folder))


def session_file(folder: Path, session_id: str) -> Path:
    return Path(folder) / f"{hashlib.sha256(session_id.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.json"


class JsonGraphStore:
    """One JSON file per built session under data_dir/users/<hash>/theanine_graph.

    Versions are counted in this process only: for one process (benchmarks, tests), not replicas.
    """

    def __init__(self, data_dir: Path | str):
        self.data_dir = Path(data_dir)
        self._versions: dict[str, int] = defaultdict(int)

    def folder(self, user_id: str) -> Path:
        from ..userspace import user_dir

        return user_dir(self.data_dir, user_id) / "theanine_graph"

    def version(self, user_id: str) -> int:
        return self._versions[user_id]

    def load(self, user_id: str) -> tuple[list[dict], int]:
        return load_parts(self.folder(user_id)), self._versions[user_id]

    def save(self, user_id: str, parts: list[dict], new_session: str | None = None) -> int | None:
        folder = self.folder(user_id)
        if new_session is not None and session_file(folder, new_session).exists():
            return None
        for part in parts:
            atomic_write_text(session_file(folder, part["session_id"]), json.dumps(part, ensure_ascii=False))
        self._versions[user_id] += 1
        return self._versions[user_id]

    def drop(self, user_id: str) -> None:
        import shutil

        shutil.rmtree(self.folder(user_id), ignore_errors=True)
        self._versions[user_id] += 1


def load_parts(folder: Path) -> list[dict]:
    """The parts stored as JSON files in `folder` (a missing folder: none)."""
    parts = []
    for p in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        with open(p, encoding="utf-8") as f:
            parts.append(json.load(f))
    return parts
