"""Deleting a memory from every copy of it (traces, reports, compare runs, excerpts), and purging deleted
text from the stores' files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memory.trace_types import AnswerSource, AnswerUse, MemoryRef, Segment, StaleValue, Timeline, TraceDict
from memory.userspace import user_key

from . import db
from .schema import compares as C
from .schema import graph_memories as GM
from .schema import graph_versions as GV
from .schema import messages as M
from .schema import quarantine as Q
from .schema import sessions as S

# --- scrub -------------------------------------------------------
# Delete means gone: take a deleted memory out of every copy of it.
#
# A memory (its event sentence and its source turns) is copied into other places as it is used:
# neighbouring memories' excerpts (the dialogue shown to the relation prompt), the traces of
# replies that retrieved it (raw and refined timelines, retrieved memories, SeCom segments), compare
# runs and close reports. `Forgotten` says what to take out; `trace` and `excerpt` take it out of
# one value. A refined timeline is an LLM rewrite that may paraphrase, so a timeline that held the
# memory (or one of its turns) is dropped whole, with its refinement; so is a SeCom segment that
# covered one of the turns. Text left elsewhere is replaced by REMOVED.

REMOVED = "(removed)"
MIN_TURN_CHARS = 12  # shorter turn texts ("ok") are only removed where their turn id says so


@dataclass
class Forgotten:
    memory_ids: set[str] = field(default_factory=set)
    turn_ids: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)  # event sentences and (long enough) turn texts
    turn_lines: list[tuple[str, str]] = field(default_factory=list)  # (speaker, text) of the source turns

    @classmethod
    def of(cls, memory_id: str, event: str, turns: dict[str, tuple[str, str]]) -> Forgotten:
        """What deleting memory `memory_id` (sentence `event`, source turns {id: (speaker, text)}) removes."""
        texts = [event.strip()] if event.strip() else []
        for _, text in turns.values():
            t = " ".join(text.split())
            if len(t) >= MIN_TURN_CHARS:
                texts.append(t)
        lines = [(s, " ".join(t.split())) for s, t in turns.values() if t.strip()]
        return cls({memory_id}, set(turns), sorted(set(texts), key=len, reverse=True), lines)

    def replace(self, text: str) -> str:
        flat = " ".join(text.split())
        out = flat if any(t in flat for t in self.texts) else text  # turn texts are matched on flat spaces
        for t in self.texts:
            out = out.replace(t, REMOVED)
        return out


def excerpt(text: str, f: Forgotten) -> str:
    """A memory's excerpt ("speaker: text / speaker: text") without the forgotten turns."""
    for speaker, line in f.turn_lines:
        text = text.replace(f"{speaker}: {line}", f"{speaker}: {REMOVED}")
    return f.replace(text)


def trace(t: TraceDict, f: Forgotten) -> TraceDict:
    """A reply trace without the forgotten memory; `t` is not changed."""
    out = t.copy()
    out["memories"] = [
        {**m, "event": f.replace(str(m.get("event", "")))}
        for m in t.get("memories") or []
        if str(m.get("id")) not in f.memory_ids
    ]
    raw, refined = list(t.get("timelines_raw") or []), list(t.get("timelines_refined") or [])
    keep = [
        i
        for i, r in enumerate(raw)
        if not (f.memory_ids & {str(n) for n in r.get("nodes") or []} or f.turn_ids & set(r.get("covers") or []))
    ]
    out["timelines_raw"] = [_timeline(raw[i], f) for i in keep]
    if refined:
        aligned = len(refined) == len(raw)
        out["timelines_refined"] = [f.replace(str(refined[i])) for i in keep] if aligned else []
    out["segments"] = [
        cast(  # the same keys, its texts scrubbed
            Segment,
            {
                k: f.replace(v) if isinstance(v, str) and k in ("text", "context", "key", "summary") else v
                for k, v in s.items()
            },
        )
        for s in t.get("segments") or []
        if not f.turn_ids & set(s.get("covers") or []) and not f.turn_ids & set(str(s.get("turn_ids", "")).split(","))
    ]
    if t.get("answer_use"):
        out["answer_use"] = _answer_use(t["answer_use"], f)
    return out


def _answer_use(u: AnswerUse, f: Forgotten) -> AnswerUse:
    """Whether the reply used its memory (memory.answer_use) without the forgotten memory: a source
    that is it or holds its turns, and a stale value it is part of, are left out."""

    def gone(d) -> bool:
        d = d if isinstance(d, dict) else {}
        return str(d.get("id")) in f.memory_ids or bool(f.turn_ids & set(d.get("covers") or []))

    def event(m: MemoryRef) -> MemoryRef:
        return {**m, "event": f.replace(str(m.get("event", "")))}

    sources: list[AnswerSource] = []
    for s in u.get("sources") or []:
        if not gone(s):
            s = {**s, "text": f.replace(str(s.get("text", "")))}
            by = s.pop("superseded_by", None)
            if isinstance(by, dict) and not gone(by):
                s["superseded_by"] = event(by)
            sources.append(s)
    stale: list[StaleValue] = [
        {**s, "old": event(s["old"]), "current": event(s["current"])}
        for s in u.get("stale") or []
        if isinstance(s.get("old"), dict)
        and isinstance(s.get("current"), dict)
        and not (gone(s["old"]) or gone(s["current"]))
    ]
    return {**u, "sources": sources, "stale": stale}


def _timeline(t: Timeline, f: Forgotten) -> Timeline:
    """A raw timeline without the forgotten memory: its text, and its chain (the whole timeline See
    why draws, memories that did not reach the reply included) without that memory."""
    out: Timeline = {**t, "text": f.replace(str(t.get("text", "")))}
    if "chain" in t:
        out["chain"] = [
            {**m, "event": f.replace(str(m.get("event", "")))}
            for m in t.get("chain") or []
            if str(m.get("id")) not in f.memory_ids
        ]
    return out


def value(v: Any, f: Forgotten) -> Any:
    """Any stored JSON value: traces found inside it (a compare run's per-strategy traces, a close
    report's trace) are scrubbed."""
    if isinstance(v, dict):
        if "timelines_raw" in v or "memories" in v or "segments" in v:
            return trace(cast(TraceDict, v), f)  # a stored value with a trace's keys is a trace
        return {
            k: [m for m in x if m not in f.memory_ids] if k == "new_memories" and isinstance(x, list) else value(x, f)
            for k, x in v.items()
        }
    if isinstance(v, list):
        return [value(x, f) for x in v]
    return v


# (table, JSON column, key column) of every stored value that can hold a copy of a memory.
_COPIES = ((M, "trace", "id"), (S, "report", "session_id"), (C, "results", "id"))


def database(engine: Engine, user_id: str, f: Forgotten) -> int:
    """Scrub every stored trace, report and compare run of the user, and the excerpts of their
    memories, in one transaction; returns how many values changed."""
    k, n = user_key(user_id), 0
    with db.write(engine) as c:
        for t, col, key in _COPIES:
            table = t.name
            rows = c.execute(sa.select(t.c[key], t.c[col]).where(t.c.user_id == user_id, t.c[col].is_not(None)))
            for r in rows.all():
                v, bad = db.read_json(table, col, r[1])
                new = f.replace(r[1]) if bad else json.dumps(value(v, f))  # a damaged value: its text only
                if new != r[1] and (bad or value(v, f) != v):
                    c.execute(t.update().where(t.c.user_id == user_id, t.c[key] == r[0]).values({col: new}))
                    n += 1
        for q in c.execute(sa.select(Q.c.tbl, Q.c.row_key, Q.c.col, Q.c.raw).where(Q.c.user_key == k)).all():
            if q.raw and f.replace(q.raw) != q.raw:  # the quarantined copy of a damaged value, too
                where = (Q.c.user_key == k, Q.c.tbl == q.tbl, Q.c.row_key == q.row_key, Q.c.col == q.col)
                c.execute(Q.update().where(*where).values(raw=f.replace(q.raw)))
        changed = 0
        for g in c.execute(sa.select(GM.c.memory_id, GM.c.event, GM.c.excerpt).where(GM.c.user_key == k)).all():
            ex, ev = excerpt(g.excerpt or "", f), f.replace(g.event)
            if (ex, ev) != (g.excerpt, g.event):
                c.execute(
                    GM.update().where(GM.c.user_key == k, GM.c.memory_id == g.memory_id).values(excerpt=ex, event=ev)
                )
                changed += 1
        if changed:  # every replica reloads the graph
            db.bump_version(c, GV, {"user_key": k})
        return n + changed


def purge_deleted(agent, engine: Engine) -> None:
    """After deletions (a memory, Forget me): no deleted text left in the files of the embedded stores
    (free pages, logs)."""
    purge = getattr(getattr(agent, "store", None), "purge_deleted", None)
    if purge is not None:
        purge()
    db.purge_deleted(engine)
