"""Phase I: turn a session into memories and link each to the graph.

I-1: for each new memory, the top-j associative memories by embedding
similarity, from earlier sessions only. I-2: a relation for each (candidate,
new) pair, from the LLM or, without one, from the offline rule (SameTopic above
a similarity threshold). Then, as the paper says, in every connected component
that holds a related candidate, the new memory is linked to that component's
most recent related candidate.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..llm import LLMSession
from ..records import SessionRecord, sortable_time
from . import prompts
from .extract import extract_memories
from .graph import Memory, MemoryGraph

# Offline rule: SameTopic when the cosine similarity (MiniLM) is at least this. Chosen on LoCoMo conv-26
# (`python -m memory.bench locomo`): at 0.5 nearly every memory falls into one giant component (182 of 184),
# so timelines wander across topics; at 0.7 the graph splits into ~50 topical components and timelines
# stay on one subject (evidence recall of timelines vs top-k: docs/benchmarks.md).
OFFLINE_SAMETOPIC_THRESHOLD = 0.7


@dataclass
class Candidate:
    new_id: str
    old_id: str
    similarity: float


def summarise(session: SessionRecord, llm: LLMSession | None) -> list[Memory]:
    """One LLM call per session; without an LLM the statements of the session are the memories
    (memory.theanine.extract), and they are also the fallback for an unusable answer."""
    turns = session.turns
    numbered = [f"[{i}] {t.speaker}: {' '.join(t.text.split())[:600]}" for i, t in enumerate(turns)]

    def fallback() -> list[dict]:
        return [dict(it, built_by="extracted-fallback") for it in extract_memories(turns)]

    if llm is None:
        items = [dict(it, built_by="extracted") for it in extract_memories(turns)]
    else:
        items = llm.json("summarise", prompts.summarise_messages(session.date, numbered), prompts.SUMMARISE_SCHEMA,
                         lambda raw: prompts.validate_memories(raw, len(turns)), fallback, max_tokens=400)
    ts = sortable_time(session.date)
    return [Memory(id=f"{session.session_id}:m{i}", event=it["event"], time=session.date, session_id=session.session_id,
                   ts=ts, turns=[turns[t].turn_id for t in it["turns"]], speaker=it["speaker"],
                   built_by=it.get("built_by", "llm"))
            for i, it in enumerate(items)]


def classify(graph: MemoryGraph, cands: list[Candidate], new: dict[str, Memory], llm: LLMSession | None,
             ) -> dict[tuple[str, str], str]:
    """Relation label for each (old, new) pair: one batched LLM call, or the offline rule."""
    if not cands:
        return {}

    def offline() -> dict[int, str]:
        return {i: ("SameTopic" if c.similarity >= OFFLINE_SAMETOPIC_THRESHOLD else "None") for i, c in enumerate(cands)}

    if llm is None:
        labels = offline()
    else:
        pairs = [({"time": graph.memory(c.old_id).time, "event": graph.memory(c.old_id).event},
                  {"time": new[c.new_id].time, "event": new[c.new_id].event}) for c in cands]
        labels = llm.json("relation", prompts.relation_messages(pairs), prompts.RELATION_SCHEMA,
                          lambda raw: prompts.validate_relations(raw, len(pairs)), offline,
                          max_tokens=24 * len(pairs) + 32)
    return {(c.old_id, c.new_id): labels.get(i, "None") for i, c in enumerate(cands)}


def link(graph: MemoryGraph, m_new: Memory, related: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Link m_new to the most recent related memory of each component (paper, Phase I-2).

    `related` holds (old_id, relation) with relation != None. Components are
    taken before m_new joins any of them.
    """
    best: dict[str, tuple[str, str]] = {}
    for old_id, rel in related:
        comp = graph.component_of(old_id)
        if comp not in best or graph.memory(best[comp][0]).order < graph.memory(old_id).order:
            best[comp] = (old_id, rel)
    edges = []
    for old_id, rel in best.values():
        graph.link(old_id, m_new.id, rel, owner=m_new.session_id)
        edges.append((old_id, m_new.id, rel))
    return edges
