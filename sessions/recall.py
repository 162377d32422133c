"""Memory as of a time: what a reply would read for a query (now or as of a session or date), and how the
memory grew, one ended session at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory.dates import date_positions, human_date
from memory.errors import InvalidOptions
from memory.trace import Trace

from .memory_room import MemoryRoom
from .users import UserKey, own_key

# --- recall ------------------------------------------------------
# `recall` is what the /recall API endpoint returns: each line of memory with the turns it came
# from and its retrieval score, and which retrieved memories a later one superseded. `as_of` takes
# a session id (the memory after that session ended, as time travel's step for it) or a date.
# Everything is read from the one user's memory.

MAX_QUERY_CHARS = 4000


def as_of_sessions(room: MemoryRoom, key: UserKey, as_of: str) -> set[str] | None:
    """A session id of the user: that session and the ended ones before it (time travel's steps)."""
    every = room.sessions.in_order(key)
    ids = [s.session_id for s in every if s.status != "open"]
    if as_of not in ids:
        if any(s.session_id == as_of for s in every):
            raise InvalidOptions("as_of names the open session: its memory is built when it ends")
        return None
    return set(ids[: ids.index(as_of) + 1])


def _scores(trace: Trace) -> list[float | None]:
    """One score per memory line: the best hit behind the line (THEANINE) or the segment's (SeCom)."""
    if trace.segments:
        return [s.get("score") for s in trace.segments]
    best: dict[str, float] = {}
    for m in trace.memories:
        key = (m.get("superseded_by") or {}).get("id") or m["id"]
        best[key] = max(best.get(key, float("-inf")), float(m.get("score") or 0.0))
    return [best.get(t.get("anchor", "")) for t in trace.timelines_raw]


def recall(room: MemoryRoom, key: UserKey, query: str, strategy: str = "", as_of: str = "") -> dict:
    key = own_key(key)
    query = (query or "").strip()[:MAX_QUERY_CHARS]
    if not query:
        raise InvalidOptions("query is empty")
    opts = room.users.options(key, strategy or None)
    when: str | set[str] | None = None
    if as_of.strip():
        when = as_of_sessions(room, key, as_of.strip()) or as_of.strip()
    trace = Trace(opts.strategy)
    agent: Any = room.agent  # memory.agent.MemoryAgent: recall reads below the Agent protocol the tests' fakes keep
    ctx = agent.memory_context(key, [], query, opts, trace, None, as_of=when)
    turns = room.turn_texts(key, [t for c in ctx.covers for t in c])
    scores = _scores(trace)
    lines = []
    for i, text in enumerate(ctx.lines):
        covers = ctx.covers[i] if i < len(ctx.covers) else ()
        lines.append(
            {
                "text": text,
                "score": scores[i] if i < len(scores) else None,
                # dict.fromkeys: a timeline that says its current fact first carries its turns twice
                "turns": [
                    {"id": t, "speaker": turns[t][0], "text": turns[t][1]} for t in dict.fromkeys(covers) if t in turns
                ],
            }
        )
    superseded = [
        {"id": m["id"], "event": m["event"], "time": m["time"], "superseded_by": m["superseded_by"]}
        for m in trace.memories
        if m.get("superseded_by")
    ]
    return {"strategy": opts.strategy, "as_of": as_of.strip(), "lines": lines, "superseded": superseded}


# --- timetravel --------------------------------------------------
# Time travel: how a user's memory grew, one ended session at a time.
#
# Step 0 is before the first session; step k is after the k-th ended session in time order. Every
# THEANINE memory gets the step of its session, every edge the step of its newer end (a close links
# its new memories to earlier ones: the edge is made by the newer memory's session), and every
# SeCom segment the step of the session it was cut from. The UI sends all of it once and moves
# between steps without asking the server for the graph again.
#
# Read through the memory's room (sessions, graph, segments); nothing here writes, and everything is
# the one user's data.

# The order the "what changed" list shows a close's links in: change and cause first, topic last.
RELATION_ORDER = ("Changed", "Cause", "Reason", "HinderedBy", "React", "Want", "SameTopic")


@dataclass
class Link:
    earlier: dict  # the older memory (id, event, time)
    relation: str
    new: dict  # the memory the close added


@dataclass
class Step:
    """What one ended session added."""

    step: int  # 1..N
    session_id: str
    seq: int
    date: str
    label: str  # "Session 3 · Mon 8 May 2023"
    position: float  # 0..1 by date (the graph's colour scale)
    status: str  # closed | closing | (an ended session whose memory failed keeps "closing")
    memory_path: str  # "offline" | "llm" | "" (unknown)
    memories: list[dict] = field(default_factory=list)  # id, event, time, built_by
    links: list[Link] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)  # id, key, summary, compressed, start, end


@dataclass
class MemoryHistory:
    steps: list[Step]
    view: dict  # the graph view the steps were taken from (nodes oldest first, edges)
    step_of: dict[str, int]  # memory id -> step

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def memories_after(self, k: int) -> int:
        """How many memories existed after session k (0: none)."""
        return sum(1 for s in self.step_of.values() if s <= k)

    def edge_step(self, source: str, target: str) -> int:
        return max(self.step_of.get(source, self.n_steps), self.step_of.get(target, self.n_steps))


def _relation_rank(relation: str) -> int:
    return RELATION_ORDER.index(relation) if relation in RELATION_ORDER else len(RELATION_ORDER)


def memory_history(room: MemoryRoom, key: UserKey) -> MemoryHistory:
    """The user's memory, session by session (see the module's docstring)."""
    key = own_key(key)
    rows = [s for s in room.sessions.in_order(key) if s.status != "open"]
    positions = date_positions([s.date for s in rows])
    steps = [
        Step(
            step=i + 1,
            session_id=s.session_id,
            seq=s.number or s.seq,
            date=s.date,
            label=f"Session {s.label} · {human_date(s.date)}",
            position=round(positions[i], 4),
            status=s.status,
            memory_path=str(((s.report or {}).get("trace") or {}).get("memory_path") or ""),
        )
        for i, s in enumerate(rows)
    ]
    by_session = {s.session_id: s for s in steps}
    view = room.graph(key)
    nodes = view.get("nodes") or []
    step_of: dict[str, int] = {}
    memories: dict[str, dict] = {}
    for n in nodes:
        nid = str(n["id"])
        owner = by_session.get(str(n.get("session_id", "")))
        # A memory of a session the list does not know (should not happen) is shown from the last step.
        step_of[nid] = owner.step if owner else len(steps)
        memories[nid] = {
            "id": nid,
            "event": str(n.get("event") or ""),
            "time": str(n.get("time") or ""),
            "built_by": str(n.get("built_by") or ""),
        }
        if owner:
            owner.memories.append(memories[nid])
    history = MemoryHistory(steps, view, step_of)
    links: list[tuple[int, int, Link]] = []
    order = {nid: i for i, nid in enumerate(memories)}
    for e in view.get("edges") or []:
        a, b = str(e.get("source")), str(e.get("target"))
        if a not in memories or b not in memories:
            continue
        k = history.edge_step(a, b)
        if 1 <= k <= len(steps):
            rel = str(e.get("relation") or "")
            links.append((k, order[b], Link(memories[a], rel, memories[b])))
    links.sort(key=lambda x: (x[0], _relation_rank(x[2].relation), x[1]))
    for k, _, link in links:
        steps[k - 1].links.append(link)
    for seg in room.segments(key):
        owner = by_session.get(str(seg.get("session_id", "")))
        if owner is None:
            continue
        owner.segments.append(
            {
                "id": str(seg.get("id", "")),
                "key": str(seg.get("key") or ""),
                "summary": str(seg.get("summary") or ""),
                "compressed": bool(seg.get("compressed", True)),
                "start": int(seg.get("start") or 0),
                "end": int(seg.get("end") or 0),
            }
        )
    for s in steps:
        s.segments.sort(key=lambda d: (d["start"], d["id"]))
    return history
