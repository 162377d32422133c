"""How THEANINE's retrieved memories become what the reply reads: current facts first, newest
timelines first, and the memory as it stood at a past date or session."""

from __future__ import annotations

from ..dates import iso_key, order_key
from ..errors import InvalidOptions
from ..trace_types import Timeline
from .graph import MemoryGraph

AsOf = str | set[str] | frozenset[str] | None  # a date, or the ids of the sessions built by then


def node_text(graph: MemoryGraph, mid: str) -> str:
    """A memory as the reply reads it: "[time: event]"; a superseded one "[time until then: event]"."""
    m = graph.memory(mid)
    nxt = graph.superseded_by(mid)
    when = f"{m.time} until {graph.memory(nxt).time}" if nxt is not None else m.time
    return f"[{when}: {m.event}]" if when else f"[{m.event}]"


def newest_first(graph: MemoryGraph, timelines: list[Timeline]) -> list[Timeline]:
    """The packed timelines by the time of their latest memory, newest first; timelines of the same
    session keep their rank. Packing chose them by rank; the reply then meets a newer statement of a
    fact before an older one even where no Changed edge links them (a 0.5B model answers with the
    first value it reads: docs/knowledge_update.md)."""

    def latest(t: Timeline) -> tuple:
        return max(order_key(graph.memory(m).ts) for m in t["nodes"])

    return sorted(timelines, key=latest, reverse=True)


def current_first(graph: MemoryGraph, path: list[str], anchor: str, shown: set[str]) -> tuple[list[str], list[str]]:
    """The timeline `path` through `anchor` as the reply reads it, current fact first: the memories
    `anchor` superseded (Changed, directly or through earlier changes) come right after it as its
    history, newest first, whether they lay on the path or not (shown ones excepted), and a path that
    reached the current fact through them starts at the anchor. Returns (path, history)."""
    replaced = graph.replaced(anchor)
    on_path = [x for x in path[: path.index(anchor)] if x in replaced]
    if on_path:
        path = path[path.index(anchor) :]  # what led to the old value is the old value's own timeline
    history = [x for x in replaced if x not in path and x not in shown]
    return path, history


def as_of_sessions(graph: MemoryGraph, as_of: AsOf) -> set[str] | None:
    """The sessions that make up the memory as of `as_of` (None: all of it, now)."""
    if as_of is None or as_of == "":
        return None
    if isinstance(as_of, str):
        iso = iso_key(as_of)
        if not iso:
            raise InvalidOptions(f"as_of must be a date (e.g. 2023-05-02) or a built session's id, not {as_of!r}")
        # A date without a time of day means the whole day.
        return graph.sessions_until(iso if ":" in as_of else iso[:10] + "T23:59:59.999999")
    return set(as_of)
