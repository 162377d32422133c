"""Phase I: turn a session into memories and link each to the graph.

I-1: for each new memory, the top-j associative memories by embedding
similarity, from earlier sessions only. I-2: a relation for each (candidate,
new) pair, from the LLM (generated, or scored by log-probabilities) or, without
one, from the offline rule (SameTopic above a similarity threshold). Which of
these steps use the LLM at a close is the close's plan (memory.steps_policy).
Then, as the paper says, in every connected component that holds a related
candidate, the new memory is linked to that component's most recent related
candidate.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..dates import iso_key, order_key
from ..errors import LLMError
from ..llm import LLMSession
from ..llm.window import calls_that_fit
from ..records import SessionRecord
from . import prompts
from .changes import ChangeRule
from .extract import extract_memories, is_assistant, is_promise
from .graph import Memory, MemoryGraph

# Offline rule: SameTopic when the cosine similarity (MiniLM) is at least this. Chosen on LoCoMo conv-26
# (`python -m bench locomo`): at 0.5 nearly every memory falls into one giant component (182 of 184),
# so timelines wander across topics; at 0.7 the graph splits into ~50 topical components and timelines
# stay on one subject (evidence recall of timelines vs top-k: docs/benchmarks.md).
OFFLINE_SAMETOPIC_THRESHOLD = 0.7


@dataclass
class Candidate:
    new_id: str
    old_id: str
    similarity: float


# A longer session is summarised in parts of at most this many dialogue tokens, unless the backend asks
# for smaller parts (LLMConfig.summary_part_tokens: the embedded models do).
PART_TOKENS = 2500
ANSWER_TOKENS_PER_TURN = 48  # answer budget: room for about one memory per turn, whatever the session's size
# Source dialogue kept with each memory (the relation prompt shows it): whole turns up to this many
# characters; the relation calls are split so that each fits the model's window (relate_pairs).
EXCERPT_CHARS = 1200
RELATION_ANSWER_PER_PAIR = 24  # answer tokens per pair asked
EXPLANATION_TOKENS = 48  # and per pair for its explanation (Options.explain_relations)


def _for_step(llm: LLMSession | None, step: str) -> LLMSession | None:
    """The LLM for one of THEANINE's close steps ("summary" or "relations"): None where the close's plan
    (LLMSession.plan, memory.steps_policy.StepPlan) keeps that step offline."""
    plan = getattr(llm, "plan", None)
    if llm is None or plan is None:
        return llm
    return llm if (plan.summary if step == "summary" else bool(plan.relations)) else None


def _relation_mode(llm: LLMSession) -> str:
    """The relation step's way: "score" when the close's plan asks for scored labels and the backend
    can score them, else "llm" (generated labels)."""
    plan = getattr(llm, "plan", None)
    return "score" if plan is not None and plan.relations == "score" and llm.can_score else "llm"


def _summary_answer(n_turns: int) -> int:
    return ANSWER_TOKENS_PER_TURN * n_turns + 64


def _parts(numbered: list[str], llm: LLMSession, base: int) -> list[tuple[int, int]]:
    """[start, end) ranges of turns, each at most the part size long (the backend's, else PART_TOKENS),
    and each fitting the context window with its answer (`base`: the prompt's tokens without turns). A
    turn too long for any part is a part alone (its call falls back on the extracted statements)."""
    costs = [llm.count(line) + 1 for line in numbered]
    cap = llm.summary_part_tokens or PART_TOKENS
    groups = calls_that_fit(costs, base, lambda n: llm.room(_summary_answer(n)), cap=cap)
    return [(g[0], g[-1] + 1) for g in groups]


def _excerpt(turns, idx: list[int]) -> str:
    """The memory's source turns, whole: a turn that would pass EXCERPT_CHARS is left out (only a
    first turn longer than that is cut)."""
    parts: list[str] = []
    for i in idx:
        part = f"{turns[i].speaker}: {' '.join(turns[i].text.split())}"
        if parts and sum(len(p) + 3 for p in parts) + len(part) > EXCERPT_CHARS:
            break
        parts.append(part)
    return " / ".join(parts)[:EXCERPT_CHARS]


def summarise(session: SessionRecord, llm: LLMSession | None) -> list[Memory]:
    """One LLM call per session (per part of a long one). Without an LLM the statements of the
    session are the memories (memory.theanine.extract); they are also the fallback for an unusable
    answer. With an LLM nothing is capped: every memory of every part is kept."""
    turns = session.turns
    numbered = [f"[{i}] {t.speaker}: {' '.join(t.text.split())[:600]}" for i, t in enumerate(turns)]

    def extracted(lo: int = 0, hi: int | None = None, built_by: str = "extracted") -> list[dict]:
        return [
            dict(it, turns=[lo + i for i in it["turns"]], built_by=built_by) for it in extract_memories(turns[lo:hi])
        ]

    llm = _for_step(llm, "summary")
    if llm is None:
        items = extracted()
    else:
        speakers = list(dict.fromkeys(t.speaker for t in turns if t.speaker))
        base = llm.prompt_tokens(prompts.summarise_messages(session.date, [], speakers, (99, 99)))
        parts = _parts(numbered, llm, base)
        turn_speakers = [t.speaker for t in turns]
        items = []
        for pi, (lo, hi) in enumerate(parts):
            items += llm.json(
                "summarise",
                prompts.summarise_messages(session.date, numbered[lo:hi], speakers, (pi + 1, len(parts))),
                prompts.SUMMARISE_SCHEMA,
                functools.partial(
                    prompts.validate_memories,
                    n_turns=hi,
                    lo=lo,
                    turn_speakers=turn_speakers,
                    turn_texts=[t.text for t in turns],
                ),
                functools.partial(extracted, lo, hi, "extracted-fallback"),
                max_tokens=_summary_answer(hi - lo),
            )
    # The assistant's own words are not memories of the user, whatever the summary says (extract.py).
    items = [
        it
        for it in items
        if is_promise(it["event"])
        or not (
            is_assistant(it["speaker"]) or (it["turns"] and all(is_assistant(turns[t].speaker) for t in it["turns"]))
        )
    ]
    ts = iso_key(session.date)
    return [
        Memory(
            id=f"{session.session_id}:m{i}",
            event=it["event"],
            time=session.date,
            session_id=session.session_id,
            ts=ts,
            turns=[turns[t].turn_id for t in it["turns"]],
            speaker=it["speaker"],
            built_by=it.get("built_by", "llm"),
            excerpt=_excerpt(turns, it["turns"]),
        )
        for i, it in enumerate(items)
    ]


def _in_time_order(old: Memory, new: Memory) -> bool:
    """True when `old` is earlier than (or as early as) `new`: the pair is asked as (old, new).

    Undated memories come after dated ones (memory.dates), as in `Memory.order` and `MemoryGraph.link`."""
    return order_key(old.ts) <= order_key(new.ts)


def _side(m: Memory) -> dict:
    return {"time": m.time, "event": m.event, "speaker": m.speaker, "excerpt": m.excerpt}


def _relation_answer(n_pairs: int, explain: bool = False) -> int:
    return (RELATION_ANSWER_PER_PAIR + EXPLANATION_TOKENS * explain) * n_pairs + 32


def _batches(llm: LLMSession, pairs: list[tuple[dict, dict]], ask: list[int], explain: bool) -> list[list[int]]:
    """The pairs `ask` in as many calls as the context window needs: each call's prompt and answer fit."""
    base = llm.prompt_tokens(prompts.relation_messages([], explain))
    costs = [llm.count(prompts.pair_block(pairs[i][0], pairs[i][1])) + 1 for i in ask]
    room = lambda n: llm.room(_relation_answer(n, explain))  # noqa: E731
    return [[ask[j] for j in g] for g in calls_that_fit(costs, base, room)]


def classify(
    graph: MemoryGraph,
    cands: list[Candidate],
    new: dict[str, Memory],
    llm: LLMSession | None,
    changed: ChangeRule | None = None,
    explain: bool = False,
) -> dict[tuple[str, str], str]:
    """Relation label for each (old, new) pair: batched LLM calls (as few as the context window
    allows), the pairs they left out asked once more, and any still missing labelled by the offline
    rule (the trace says which). When the close's plan asks for scored labels (StepPlan.relations
    "score") and the backend can score, each pair's label is read from the model's log-probabilities
    instead (`score_pairs`, no generation). With `explain` the LLM explains each pair before its label. Each
    pair is shown in true time order (a new memory dated before its candidate is A, not B). Offline,
    `changed` (memory.theanine.changes) labels the pairs where a later statement replaces an earlier one."""
    if not cands:
        return {}
    flags: list[bool] = []

    def offline(i: int) -> str:
        if changed is not None and not flags:
            flags.extend(changed.changed([(graph.memory(c.old_id), new[c.new_id]) for c in cands]))
        if flags and flags[i]:
            return "Changed"
        return "SameTopic" if cands[i].similarity >= OFFLINE_SAMETOPIC_THRESHOLD else "None"

    llm = _for_step(llm, "relations")
    if llm is None:
        return {(c.old_id, c.new_id): offline(i) for i, c in enumerate(cands)}
    llm.trace.count("relation_pairs", len(cands))  # the candidate pairs labelled (in batched calls)
    pairs = []
    for i, c in enumerate(cands):
        old, nm = graph.memory(c.old_id), new[c.new_id]
        a, b = (old, nm) if _in_time_order(old, nm) else (nm, old)
        pairs.append(({**_side(a), "pair": i}, {**_side(b), "pair": i}))
    labels: dict[int, str] = {}
    scored = _relation_mode(llm) == "score"
    if scored:
        labels = score_pairs(llm, pairs)
    for purpose in () if scored else ("relation", "relation_missing"):
        for batch in _batches(llm, pairs, [i for i in range(len(cands)) if i not in labels], explain):
            got = llm.json(
                purpose,
                prompts.relation_messages([pairs[i] for i in batch], explain),
                prompts.relation_schema(explain),
                functools.partial(prompts.validate_relations, n_pairs=len(cands), asked=set(batch)),
                dict,
                max_tokens=_relation_answer(len(batch), explain),
            )
            labels.update(got)
    missing = [i for i in range(len(cands)) if i not in labels]
    if missing:
        names = ", ".join(f"{cands[i].old_id}->{cands[i].new_id}" for i in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        how = "scored" if scored else "labelled by the LLM (asked twice)"
        llm.trace.notice(
            f"relations: {len(missing)} of {len(cands)} pairs were not {how} and were labelled by the "
            f"offline rule: {names}{more}"
        )
        for i in missing:
            labels[i] = offline(i)
    return {(c.old_id, c.new_id): labels[i] for i, c in enumerate(cands)}


def score_pairs(llm: LLMSession, pairs: list[tuple[dict, dict]]) -> dict[int, str]:
    """Each pair's label by the model's log-probabilities (LLMSession.label_probabilities): one prompt
    per pair, the relation guide first so that its KV cache serves every pair, the most probable label
    taken. A pair whose call fails is left out (classify labels it by the offline rule)."""
    out: dict[int, str] = {}
    for i, (a, b) in enumerate(pairs):
        try:
            probs = llm.label_probabilities(
                "relation_score", prompts.relation_score_messages(a, b), list(prompts.RELATION_LABELS)
            )
        except LLMError:
            continue
        out[i] = prompts.RELATION_LABELS[max(range(len(probs)), key=probs.__getitem__)]
    return out


def link(
    graph: MemoryGraph, m_new: Memory, related: list[tuple[str, str]], components: dict[str, str] | None = None
) -> list[tuple[str, str, str]]:
    """Link m_new to the most recent related memory of each component (paper, Phase I-2).

    `related` holds (old_id, relation) with relation != None. `components` maps each
    candidate to its component in G_t, the graph before this session was linked (the paper's
    rule); without it the components are read now. A Changed pair is linked even when another
    memory of its component is more recent: the change edge marks the very memory it supersedes.
    """
    best: dict[str, tuple[str, str]] = {}
    keep = [(o, r) for o, r in related if r == "Changed"]
    for old_id, rel in related:
        comp = components[old_id] if components and old_id in components else graph.component_of(old_id)
        if comp not in best or graph.memory(best[comp][0]).order < graph.memory(old_id).order:
            best[comp] = (old_id, rel)
    edges = []
    for old_id, rel in dict.fromkeys([*best.values(), *keep]):
        graph.link(old_id, m_new.id, rel, owner=m_new.session_id)
        edges.append((old_id, m_new.id, rel))
    return edges
