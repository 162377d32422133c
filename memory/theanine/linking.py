"""Phase I: turn a session into memories and link each to the graph.

I-1: for each new memory, the top-j associative memories by embedding
similarity, from earlier sessions only. I-2: a relation for each (candidate,
new) pair, from the LLM (one call per pair showing both sessions' conversations:
generated, or scored by log-probabilities) or, without one, from the offline
rule (Changed where a later statement replaces an earlier one, else SameTopic
above a similarity threshold). Which of
these steps use the LLM at a close is the close's plan (memory.steps_policy).
Then, as the paper says, in every connected component that holds a related
candidate, the new memory is linked to that component's most recent related
candidate.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..dates import iso_key, order_key
from ..errors import LLMError
from ..llm import LLMSession
from ..llm.window import calls_that_fit
from ..records import SessionRecord
from ..trace import Trace
from . import changes, prompts
from .changes import ChangeRule
from .extract import extract_memories, is_assistant, is_promise
from .graph import Memory, MemoryGraph
from .pair_dialogues import fit, session_dialogue

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
RELATION_ANSWER_TOKENS = 24  # answer tokens of one pair's label
EXPLANATION_TOKENS = 48  # and of its explanation (Options.explain_relations)
SCORE_ANSWER_TOKENS = 8  # a scored pair generates nothing (LLMSession.label_probabilities keeps this free)


def _for_step(llm: LLMSession | None, step: str) -> LLMSession | None:
    """The LLM for one of THEANINE's close steps ("summary" or "relations"): None where the close's plan
    (LLMSession.plan, memory.steps_policy.StepPlan) keeps that step offline."""
    plan = getattr(llm, "plan", None)
    if llm is None or plan is None:
        return llm
    return llm if (plan.summary if step == "summary" else bool(plan.relations)) else None


def stated_change_candidates(
    graph: MemoryGraph, new: list[Memory], cands: list[Candidate], llm: LLMSession | None
) -> list[Candidate]:
    """Offline only: a memory that states a change ("I quit my job", "we moved to Lyon") paired with every
    earlier memory of another session whose fact it changes, not only with its j nearest. A person says
    "I left my old company" in other words than "My job at Brightwave keeps me busy", so the old fact is
    often not among the nearest; the rule (memory.theanine.changes) is precise enough to read them all
    (docs/knowledge_update.md). With an LLM labelling relations, the candidates stay the paper's j nearest."""
    if _for_step(llm, "relations") is not None:
        return []
    have = {(c.new_id, c.old_id) for c in cands}
    out = []
    for m in new:
        earlier = (o for o in graph.memories() if o.session_id != m.session_id and _in_time_order(o, m))
        out += [Candidate(m.id, o.id, 0.0) for o in changes.changed_facts(m, earlier) if (m.id, o.id) not in have]
    return out


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


def summarise(session: SessionRecord, llm: LLMSession | None) -> list[Memory]:
    """One LLM call per session (per part of a long one). Without an LLM the statements of the
    session are the memories (memory.theanine.extract); they are also the fallback for an unusable
    answer. With an LLM nothing is capped: every memory of every part is kept."""
    turns = session.turns
    dialogue = session_dialogue(turns)  # every memory of the session keeps it: the relation prompt shows it
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
            excerpt=dialogue,
        )
        for i, it in enumerate(items)
    ]


def _in_time_order(old: Memory, new: Memory) -> bool:
    """True when `old` is earlier than (or as early as) `new`: the pair is asked as (old, new).

    Undated memories come after dated ones (memory.dates), as in `Memory.order` and `MemoryGraph.link`."""
    return order_key(old.ts) <= order_key(new.ts)


def _side(m: Memory) -> dict:
    return {"time": m.time, "event": m.event, "speaker": m.speaker}


def _relation_answer(explain: bool = False) -> int:
    return RELATION_ANSWER_TOKENS + EXPLANATION_TOKENS * explain + 32


@dataclass
class Pair:
    """One (earlier A, later B) pair as asked: its two memories and the conversations they come from."""

    a: Memory
    b: Memory
    lead: str  # the session whose conversation is shown first

    def conversations(self) -> list[tuple[str, Memory | None, str]]:
        """(which, memory, dialogue): the lead session's first, so consecutive pairs of one close
        share a prompt prefix (llama.cpp reuses its KV cache); one entry when A and B share a session."""
        if self.a.session_id == self.b.session_id:
            return [("A and B", None, self.a.excerpt)]
        sides = [("A", self.a), ("B", self.b)]
        if self.b.session_id == self.lead:
            sides.reverse()
        return [(which, m, m.excerpt) for which, m in sides]


def _pairs(graph: MemoryGraph, cands: list[Candidate], new: dict[str, Memory]) -> list[Pair]:
    """Each candidate pair in true time order (a new memory dated before its candidate is A, not B),
    led by the session most of the pairs share (the new session at a close)."""
    out = []
    for c in cands:
        old, nm = graph.memory(c.old_id), new[c.new_id]
        a, b = (old, nm) if _in_time_order(old, nm) else (nm, old)
        out.append(Pair(a, b, ""))
    shared = Counter(s for p in out for s in {p.a.session_id, p.b.session_id})
    for p in out:
        p.lead = max((p.b.session_id, p.a.session_id), key=lambda s: shared[s])
    return out


def pair_prompt(
    llm: LLMSession, pair: Pair, answer: int, build: Callable[[dict, dict, list], list[dict]]
) -> tuple[list[dict], str]:
    """The pair's prompt (`build(a, b, dialogues)`) with both conversations whole, or cut to what the
    window leaves once the prompt's other parts and an answer of `answer` tokens fit; and a note of
    the cut ("" when nothing was cut)."""
    convs = pair.conversations()
    heads = [prompts.dialogue_heading((m or pair.a).time, which) for which, m, _ in convs]
    bare = build(_side(pair.a), _side(pair.b), [(h, "") for h in heads])
    budget = llm.room(answer) - llm.prompt_tokens(bare)
    events = [m.event if m is not None else f"{pair.a.event} {pair.b.event}" for _, m, _ in convs]
    fitted = fit([(d, e) for (_, _, d), e in zip(convs, events, strict=True)], max(budget, 1), llm.count)
    messages = build(_side(pair.a), _side(pair.b), [(h, f.text) for h, f in zip(heads, fitted, strict=True)])
    if not any(f.cut for f in fitted):
        return messages, ""
    parts = ", ".join(f"{which}'s conversation {f.describe()}" for (which, _, _), f in zip(convs, fitted, strict=True))
    return messages, f"dialogue cut to fit the {llm.window}-token window: {parts}"


def classify(
    graph: MemoryGraph,
    cands: list[Candidate],
    new: dict[str, Memory],
    llm: LLMSession | None,
    changed: ChangeRule | None = None,
    explain: bool = False,
) -> dict[tuple[str, str], str]:
    """Relation label for each (old, new) pair: one LLM call per pair, as the official code makes,
    showing the whole conversation of both memories' sessions (cut to the window only where they do
    not fit; the call's detail and a notice say so), and a pair the LLM did not label labelled by the
    offline rule (the trace says which). When the close's plan asks for scored labels (StepPlan.relations
    "score") and the backend can score, each pair's label is read from the model's log-probabilities
    instead (`score_pairs`, no generation). With `explain` the LLM explains each pair before its label.
    Each pair is shown in true time order. Offline, `changed` (memory.theanine.changes) labels the pairs
    where a later statement replaces an earlier one."""
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
    llm.trace.count("relation_pairs", len(cands))  # the candidate pairs labelled (one call each)
    pairs = _pairs(graph, cands, new)
    scored = _relation_mode(llm) == "score"
    cuts: list[str] = []
    if scored:
        labels = score_pairs(llm, pairs, cuts)
    else:
        labels = {}
        build = functools.partial(_explained, explain)
        for i, pair in enumerate(pairs):
            messages, cut = pair_prompt(llm, pair, _relation_answer(explain), build)
            got = llm.json(
                "relation",
                messages,
                prompts.relation_schema(explain),
                prompts.validate_relation,
                lambda: None,
                max_tokens=_relation_answer(explain),
            )
            if cut:
                call = llm.trace.llm_calls[-1]
                call.detail = "; ".join(x for x in (call.detail, cut) if x)
                cuts.append(f"{pair.a.id}->{pair.b.id} ({cut.split(': ', 1)[1]})")
            if got is not None:
                labels[i] = got
    _note_cuts(llm.trace, cuts, len(cands), llm.window)
    missing = [i for i in range(len(cands)) if i not in labels]
    if missing:
        names = ", ".join(f"{cands[i].old_id}->{cands[i].new_id}" for i in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        how = "scored" if scored else "labelled by the LLM"
        llm.trace.notice(
            f"relations: {len(missing)} of {len(cands)} pairs were not {how} and were labelled by the "
            f"offline rule: {names}{more}"
        )
        for i in missing:
            labels[i] = offline(i)
    return {(c.old_id, c.new_id): labels[i] for i, c in enumerate(cands)}


def _explained(explain: bool, a: dict, b: dict, dialogues: list) -> list[dict]:
    return prompts.relation_messages(a, b, dialogues, explain)


def _note_cuts(trace: Trace, cuts: list[str], n: int, window: int) -> None:
    if not cuts:
        return
    trace.count("relation_pairs_cut", len(cuts))
    shown = "; ".join(cuts[:4]) + (f"; and {len(cuts) - 4} more" if len(cuts) > 4 else "")
    trace.notice(
        f"relations: the conversations of {len(cuts)} of {n} pairs were cut to fit the {window}-token window: {shown}"
    )


def score_pairs(llm: LLMSession, pairs: list[Pair], cuts: list[str] | None = None) -> dict[int, str]:
    """Each pair's label by the model's log-probabilities (LLMSession.label_probabilities): one prompt
    per pair, the relation guide first so that its KV cache serves every pair, the most probable label
    taken. A pair whose call fails is left out (classify labels it by the offline rule); a cut
    conversation is added to `cuts`."""
    out: dict[int, str] = {}
    for i, pair in enumerate(pairs):
        messages, cut = pair_prompt(llm, pair, SCORE_ANSWER_TOKENS, prompts.relation_score_messages)
        if cut and cuts is not None:
            cuts.append(f"{pair.a.id}->{pair.b.id} ({cut.split(': ', 1)[1]})")
        try:
            probs = llm.label_probabilities("relation_score", messages, list(prompts.RELATION_LABELS))
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
