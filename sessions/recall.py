"""Recall as a service: the memory lines a reply would read for a query, now or as of a session or date.

`recall` is what the /recall API endpoint returns: each line of memory with the turns it came
from and its retrieval score, and which retrieved memories a later one superseded. `as_of` takes
a session id (the memory after that session ended, as time travel's step for it) or a date.
Everything is read from the one user's memory.
"""

from __future__ import annotations

from memory.errors import InvalidOptions
from memory.trace import Trace

MAX_QUERY_CHARS = 4000


def as_of_sessions(service, user_id: str, as_of: str) -> set[str] | None:
    """A session id of the user: that session and the ended ones before it (time travel's steps)."""
    rows = [s for s in service.sessions(user_id) if s.status != "open"]
    ids = [s.session_id for s in rows]
    if as_of not in ids:
        if any(s.session_id == as_of for s in service.sessions(user_id)):
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


def recall(service, user_id: str, query: str, strategy: str = "", as_of: str = "") -> dict:
    user_id = service.user(user_id)
    query = (query or "").strip()[:MAX_QUERY_CHARS]
    if not query:
        raise InvalidOptions("query is empty")
    opts = service.options(user_id, strategy or None)
    when: str | set[str] | None = None
    if as_of.strip():
        when = as_of_sessions(service, user_id, as_of.strip()) or as_of.strip()
    trace = Trace(opts.strategy)
    ctx = service.agent.memory_context(user_id, [], query, opts, trace, None, as_of=when)
    turns = service.turn_texts(user_id, [t for c in ctx.covers for t in c])
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
