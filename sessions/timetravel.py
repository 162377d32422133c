"""Time travel: how a user's memory grew, one ended session at a time.

Step 0 is before the first session; step k is after the k-th ended session in time order. Every
THEANINE memory gets the step of its session, every edge the step of its newer end (a close links
its new memories to earlier ones: the edge is made by the newer memory's session), and every
SeCom segment the step of the session it was cut from. The UI sends all of it once and moves
between steps without asking the server for the graph again.

Read through the service's public views (sessions, graph, the agent's export); nothing here
writes, and everything is the one user's data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ids import check_user_id
from .lifecycle import date_positions, human_date

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


def memory_history(service, user_id: str) -> MemoryHistory:
    """The user's memory, session by session (see the module's docstring)."""
    user_id = check_user_id(user_id)
    rows = [s for s in service.sessions(user_id) if s.status != "open"]
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
    view = service.graph(user_id)
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
    for seg in service.segments(user_id):
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
