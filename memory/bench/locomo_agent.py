"""LoCoMo evidence recall through the app's own path (`memory.bench locomo --path agent`).

Each conversation's sessions are closed into memory by `MemoryAgent.close_session`
(the LLM injected through `llm_factory`, never a subclass), and for every
question and budget the benchmark asks `MemoryAgent.memory_context` for exactly
the memory text `MemoryAgent.reply` would put in its prompt. A turn counts as
recalled when a line of that text carries it whole (a SeCom segment's turn
line; a THEANINE memory summarised from that turn).

Summarisers (`--summariser`, comma-separated for several):
* offline: no LLM step runs (`close_session(llm_steps=False)`); memory comes
  from the engine's offline paths.
* reference: `ReferenceLLM`, a scripted stand-in, not a model. It answers the
  summary prompt with the session's LoCoMo observation facts (what a capable
  summariser would write), which go through the engine's own validation, and
  the refinement prompt with the raw timelines unchanged. It gives no relation
  labels, so the engine re-asks and then labels by its offline rule (the close
  trace says so); SeCom's segmenter is the configured one.
* llm: the configured endpoint, for every step.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

from ..llm import Completion, LLMSession
from ..trace import Trace
from . import common
from .common import progress

SUMMARISERS = ("offline", "reference", "llm")
AGENT_METHODS = ("turn", "session", "secom", "theanine-topk", "theanine-timeline")
BENCH_K = 20  # the most Options allows: memories / segments retrieved, so that the budget decides


def _norm(text: str) -> str:
    return " ".join(str(text).split())[:200]


class ReferenceLLM:
    """A scripted LLM for one LoCoMo conversation (see the module docstring). Not a model."""

    name = "reference (LoCoMo observation facts; scripted)"
    json_attempts = 1

    def __init__(self, conv):
        self.dia_by_text = {(_norm(t.speaker), _norm(t.text)): t.turn_id for s in conv.sessions for t in s.turns}
        self.obs = defaultdict(list)
        for o in conv.observations:
            self.obs[o.session].append(o)
        self.calls: Counter[str] = Counter()

    def _memories(self, prompt: str) -> str:
        index: dict[str, int] = {}  # dia_id -> the number the prompt gives that turn
        for i, sp, body in re.findall(r"^\[(\d+)\] ([^:\n]+): (.*)$", prompt, re.M):
            d = self.dia_by_text.get((_norm(sp), _norm(body)))
            if d:
                index[d] = int(i)
        sessions = {d.split(":")[0] for d in index}
        mems = []
        for s in sorted(sessions):
            for o in self.obs.get(s, []):
                # A fact belongs to the part of a long session that holds its first evidence turn.
                if o.dia_ids and o.dia_ids[0] in index:
                    mems.append(
                        {"speaker": o.speaker, "event": o.text, "turns": [index[d] for d in o.dia_ids if d in index]}
                    )
        return json.dumps({"memories": mems})

    def _answer(self, purpose: str, messages: list[dict]) -> str:
        prompt = str(messages[-1].get("content", ""))
        if purpose == "summarise":
            self.calls["summarise"] += 1
            return self._memories(prompt)
        if purpose == "refine":
            self.calls["refine"] += 1
            return json.dumps({"timelines": re.findall(r"^Timeline \d+: (.*)$", prompt, re.M)})
        self.calls["other"] += 1
        return "{}"  # relations, segmentation: the engine falls back

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose="") -> Completion:
        return Completion(self._answer(purpose, messages))

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose="") -> Iterator[str]:
        yield ""


class CachedEmbedder:
    """The agent's embedder with its vectors remembered by text: the same question is asked at every
    budget, and on a busy CPU one MiniLM call costs far more than the retrieval around it."""

    def __init__(self, inner):
        self.inner, self.name = inner, getattr(inner, "name", "embedder")
        self._memo: dict[str, object] = {}

    def embed(self, texts):
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            for t, v in zip(todo, self.inner.embed(todo), strict=False):
                self._memo[t] = v
        return np.stack([self._memo[t] for t in texts]) if texts else self.inner.embed(texts)


@dataclasses.dataclass
class Built:
    agent: object
    user: str
    summariser: str
    llm: object | None
    close: dict


def build(conv, summariser: str, settings, data_dir: Path, options, segment_max_len: int | None = None) -> Built:
    """A MemoryAgent on the app's providers (settings) with the conversation's sessions closed."""
    from ..agent import MemoryAgent
    from ..llm import make_llm

    llm = ReferenceLLM(conv) if summariser == "reference" else (make_llm(settings.llm) if summariser == "llm" else None)
    s = dataclasses.replace(settings, data_dir=Path(data_dir))
    agent = MemoryAgent.from_settings(s, llm_factory=(lambda cfg: llm) if llm is not None else None)
    cached = CachedEmbedder(agent.embedder)
    agent.embedder = agent.theanine.embedder = agent.secom.embedder = cached
    if segment_max_len:  # the offline segmenter with its longest segment capped
        from ..secom.segmentation import segmenter_for

        agent.secom.segmenter = segmenter_for(s, cached, max_len=segment_max_len)
    user = f"locomo-{conv.sample_id}-{summariser}"
    t0 = time.perf_counter()
    calls, fallbacks, memories, segments, notices = 0, Counter[str](), 0, 0, []
    for sess in conv.sessions:
        rep = agent.close_session(user, sess, options, llm_steps=llm is not None)
        calls += len(rep.trace.llm_calls)
        fallbacks.update(c.purpose for c in rep.trace.llm_calls if c.status == "fallback")
        memories += len(rep.new_memories)
        segments += len(rep.new_segments)
        notices += [n for n in rep.trace.notices if n not in notices]
    close = {
        "sessions": len(conv.sessions),
        "memories": memories,
        "segments": segments,
        "llm_calls": calls,
        "fallbacks": dict(fallbacks),
        "notices": notices[:10],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    g = agent.theanine.graph(user)
    close["graph"] = {
        "memories": len(g.g),
        "edges": g.g.number_of_edges(),
        "relations": {k: v for k, v in g.relation_counts().items() if v},
    }
    return Built(agent, user, summariser, llm, close)


def recall_rows(b: Built, conv, method: str, retriever: str, budgets: list[int], options) -> list[tuple]:
    """(sample_id, category, budget, recall) per question and budget, from the agent's memory text."""
    out = []
    strategy = "secom" if method == "secom" else "theanine"
    session = LLMSession(b.llm, Trace("bench"), 0.0, 0) if b.llm is not None else None
    for q in conv.questions:
        for budget in budgets:
            opts = options.with_(strategy=strategy, budget=budget, k=BENCH_K, retriever=retriever)
            ctx = b.agent.memory_context(
                b.user, [], q.question, opts, Trace(strategy), session, timelines=method != "theanine-topk"
            )
            covered = {t for c in ctx.covers for t in c}
            out.append((conv.sample_id, q.category, budget, common.evidence_recall(q.evidence, covered)))
    return out


def evaluate(
    convs,
    methods: list[str],
    retrievers: list[str],
    budgets: list[int],
    summarisers: list[str],
    *,
    settings,
    embedder,
    options,
    dates: bool = True,
    segment_max_len: int | None = None,
) -> dict:
    from .locomo import CATEGORIES, DialogueUnits, _Cached, _mean

    per: dict[tuple, list] = defaultdict(list)
    closes: dict = defaultdict(dict)
    with tempfile.TemporaryDirectory(prefix="bench-locomo-agent-") as tmp:
        for ci, conv in enumerate(convs):
            progress(
                f"{conv.sample_id} ({ci + 1}/{len(convs)}): {len(conv.sessions)} sessions, "
                f"{len(conv.questions)} questions"
            )
            conv.qvecs = embedder.embed([q.question for q in conv.questions])
            for method in [m for m in methods if m in ("turn", "session")]:
                units = DialogueUnits(conv, embedder, method, dates)
                for r in retrievers:
                    for q, v in zip(conv.questions, conv.qvecs, strict=False):
                        ranked = _Cached(units.ranked(r, q, v))
                        for bud in budgets:
                            rec = common.evidence_recall(q.evidence, common.pack(ranked, bud).covered)
                            per[("-", method, r, bud)].append((conv.sample_id, q.category, rec))
            for summ in summarisers:
                t0 = time.perf_counter()
                b = build(conv, summ, settings, Path(tmp) / f"{conv.sample_id}-{summ}", options, segment_max_len)
                closes[summ][conv.sample_id] = b.close
                progress(
                    f"  {summ}: closed {len(conv.sessions)} sessions in {time.perf_counter() - t0:.1f}s "
                    f"({b.close['memories']} memories, {b.close['segments']} segments, "
                    f"{b.close['llm_calls']} LLM calls)"
                )
                for method in [m for m in methods if m not in ("turn", "session")]:
                    # THEANINE retrieves by dense similarity (the app's way); SeCom by the options' retriever.
                    for r in retrievers if method == "secom" else ["dense"]:
                        t0 = time.perf_counter()
                        for sid, cat, bud, rec in recall_rows(b, conv, method, r, budgets, options):
                            per[(summ, method, r, bud)].append((sid, cat, rec))
                        at = 1000 if 1000 in budgets else budgets[-1]
                        mine = [x[2] for x in per[(summ, method, r, at)] if x[0] == conv.sample_id]
                        progress(
                            f"    {method:18s} {r:6s} recall@{at} {_mean(mine)}  [{time.perf_counter() - t0:.1f}s]"
                        )
    results = []
    for (summ, method, r, bud), rows in per.items():
        results.append(
            {
                "summariser": summ,
                "method": method,
                "retriever": r,
                "budget": bud,
                "recall": _mean([x[2] for x in rows]),
                "by_category": {c: _mean([x[2] for x in rows if str(x[1]) == c]) for c in CATEGORIES},
                "n_questions": len(rows),
                "by_conversation": {
                    cid: _mean([x[2] for x in rows if x[0] == cid]) for cid in dict.fromkeys(x[0] for x in rows)
                },
            }
        )
    return {"results": results, "close": dict(closes)}


def method_label(row: dict) -> str:
    return row["method"] if row.get("summariser", "-") == "-" else f"{row['method']} [{row['summariser']}]"
