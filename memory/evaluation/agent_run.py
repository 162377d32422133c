"""LoCoMo evidence recall through the app's own path (`bench locomo --path agent`).

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
import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..agent import MemoryAgent
from ..embeddings import make_embedder
from ..llm import LLM, LLMSession, make_llm
from ..packing import pack
from ..records import Progress, Turn
from ..secom.segmentation import segmenter_for
from ..settings import Settings
from ..trace import Trace
from .baselines import DialogueUnits
from .machine import machine
from .neutral_chat import NEUTRAL_CHAT
from .reference_llm import ReferenceLLM
from .scoring import Replayable, evidence_recall, mean, recall_fields
from .spec import RunSpec

BENCH_K = 100  # the most Options allows: memories / segments retrieved, so that the budget decides
Log = Callable[[str], None]


class CachedEmbedder:
    """The agent's embedder with its vectors remembered by text: the same question is asked at every
    budget, and on a busy CPU one MiniLM call costs far more than the retrieval around it."""

    def __init__(self, inner):
        self.inner, self.name = inner, getattr(inner, "name", "embedder")
        self._memo: dict[str, Any] = {}

    def embed(self, texts):
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            for t, v in zip(todo, self.inner.embed(todo), strict=False):
                self._memo[t] = v
        return np.stack([self._memo[t] for t in texts]) if texts else self.inner.embed(texts)


@dataclasses.dataclass
class Built:
    agent: MemoryAgent
    user: str
    summariser: str
    llm: LLM | None
    close: dict


def build(
    conv,
    summariser: str,
    settings,
    data_dir: Path,
    options,
    segment_max_len: int | None = None,
    on_session: Callable[[], None] | None = None,
) -> Built:
    """A MemoryAgent on the app's providers (settings) with the conversation's sessions closed."""
    llm = ReferenceLLM(conv) if summariser == "reference" else (make_llm(settings.llm) if summariser == "llm" else None)
    # Always a scratch store of its own: never a configured Chroma server (other users' data).
    s = dataclasses.replace(settings, data_dir=Path(data_dir), chroma_host="")
    agent = MemoryAgent.from_settings(s, llm_factory=(lambda cfg: llm) if llm is not None else None)
    cached = CachedEmbedder(agent.embedder)
    agent.clients = dataclasses.replace(agent.clients, embedder=cached)
    agent.theanine.embedder = agent.secom.embedder = cached
    if segment_max_len:  # the offline segmenter with its longest segment capped
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
        if on_session:
            on_session()
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


# --- one run: the CLI (`bench locomo --path agent`) and the app's evaluation tab call `run` ---


def strategy_label(summariser: str, method: str, retriever: str) -> str:
    """How a strategy is named in the per-question rows and the app: `secom [offline] (bm25)`."""
    return f"{method} ({retriever})" if summariser == "-" else f"{method} [{summariser}] ({retriever})"


# What one step of a run costs, relative to the others, so that the fraction done is a fraction of the time
# (the app's estimate of the time left is the measured pace of this fraction). Profiled twice on the page's
# defaults (every strategy, 3 retrievers, 4 budgets, offline memory) over the first 6 sessions and 33
# questions of LoCoMo conv-30 on a loaded 2-core machine (`agent_run.run` with a `report` that records each
# step's time): a baseline question 0.06-0.14 s (all budgets), a session closed offline 8.4-12.8 s, an agent
# question 0.02-0.2 s per strategy row, THEANINE's paper mode 1.4-2.6 s (it refines whole timelines). The
# weights below are the ones that kept the estimate within a factor of 1.4 of the time then left, from the
# first minute on, in both profiles. Units: a baseline question at one budget. An LLM close is a guess.
STEP_COST = {"baseline": 0.25, "agent": 0.5, "theanine-paper": 10.0}
CLOSE_COST = {"offline": 230.0, "reference": 230.0, "llm": 2000.0}


def agent_step_cost(method: str) -> float:
    """One question at one budget for a strategy row (its relative cost, STEP_COST)."""
    return STEP_COST.get(method, STEP_COST["agent"])


class _Steps:
    """Progress of a run as a fraction of its cost (closed sessions, scored questions, each weighted by
    STEP_COST); each line to `log` (the CLI's stderr), and every step to `report` (the app's progress bar)."""

    def __init__(self, total: float, report: Progress | None, log: Log | None):
        self.total, self.done, self.report, self.log, self.text = max(1e-9, total), 0.0, report, log, ""

    def say(self, text: str) -> None:
        self.text = text
        if self.log:
            self.log(text)
        if self.report:
            self.report(self.done / self.total, text)

    def step(self, cost: float = 1.0) -> None:
        self.done += cost
        if self.report:
            self.report(min(1.0, self.done / self.total), self.text)


def _total_cost(convs, spec: RunSpec) -> float:
    """The run's cost in STEP_COST units: every session closed, every question scored."""
    base = [m for m in spec.methods if m in ("turn", "session")]
    rows = [row for m in spec.methods if m not in base for row, _ in _agent_rows(m, spec, None)]
    per_question = len(spec.budgets) * (
        STEP_COST["baseline"] * len(base) * len(spec.retrievers)
        + len(spec.summarisers) * sum(agent_step_cost(r) for r in rows)
    )
    closes = sum(CLOSE_COST.get(s, CLOSE_COST["llm"]) for s in spec.summarisers)
    return sum(len(c.sessions) * closes + len(c.questions) * per_question for c in convs)


def _held(q, covered: set[str]) -> list[str]:
    return [e for e in q.evidence if e in covered]


def _lines(pairs, evidence: list[str]) -> list[list]:
    """A packed context as [line, [evidence turns that line carries whole]] (the `--contexts` form)."""
    ev = set(evidence)
    return [[text, [t for t in covers if t in ev]] for text, covers in pairs]


class _Rows:
    """Per-question rows as they are scored: recall and the evidence each strategy's context held."""

    def __init__(self, contexts: bool):
        self.contexts = contexts
        self.questions: list[dict] = []
        self._index: dict[tuple[str, int], dict] = {}
        self.per: dict[tuple, list] = defaultdict(list)  # (summariser, method, retriever, budget) -> rows
        self.multi: dict[tuple, list[bool]] = defaultdict(list)  # same key -> a multi-memory timeline per context
        self.whole: dict[tuple, list[bool]] = defaultdict(list)  # same key -> such a timeline whole, per context

    def question(self, conv, i: int) -> dict:
        key = (conv.sample_id, i)
        if key not in self._index:
            q = conv.questions[i]
            row = {
                "conversation": conv.sample_id,
                "question": q.question,
                "answer": q.answer,
                "category": q.category,
                "evidence": list(q.evidence),
                "strategies": {},
            }
            self._index[key] = row
            self.questions.append(row)
        return self._index[key]

    def add(
        self, conv, i: int, key: tuple, covered: set[str], pairs=None, multi: bool | None = None, whole: bool = False
    ) -> None:
        """`multi`: whether a THEANINE context held a timeline of two memories or more; `whole`: one
        that reached the reply whole (root to leaf)."""
        summ, method, retriever, budget = key
        q = conv.questions[i]
        rec = evidence_recall(q.evidence, covered)
        self.per[key].append((conv.sample_id, q.category, rec))
        if multi is not None:
            self.multi[key].append(multi)
            self.whole[key].append(whole)
        cell = {"recall": round(rec, 4), "held": _held(q, covered)}
        if self.contexts and pairs is not None:
            cell["context"] = _lines(pairs, q.evidence)
        label = strategy_label(summ, method, retriever)
        self.question(conv, i)["strategies"].setdefault(label, {})[str(budget)] = cell


def _score_baselines(conv, spec: RunSpec, embedder, rows: _Rows, steps: _Steps) -> None:
    for method in [m for m in spec.methods if m in ("turn", "session")]:
        units = DialogueUnits(conv, embedder, method, spec.dates)
        for r in spec.retrievers:
            for i, (q, v) in enumerate(zip(conv.questions, conv.qvecs, strict=False)):
                ranked = Replayable(units.ranked(r, q, v))
                for bud in spec.budgets:
                    packed = pack(ranked, bud)
                    pairs = [(p.text, p.covers) for _, kept in packed.chosen for p in kept]
                    rows.add(conv, i, ("-", method, r, bud), packed.covered, pairs)
                steps.step(STEP_COST["baseline"] * len(spec.budgets))


def chat_before(convs, conv, i: int, n: int, seed: int = 0) -> list[Turn]:
    """`n` consecutive real turns of ANOTHER conversation of the loaded file (`convs`), as the
    user/assistant history of a chat that was about something else (the speaker of the last turn is
    the user, who asks the question next). Never turns of `conv`: its sessions are all closed into the
    memory being searched, and a query that reads the dialogue would find those very turns. With one
    conversation only, turns of a short neutral chat (NEUTRAL_CHAT). Turn ids name their conversation
    ("conv-30/D4:7"; "neutral:3"), so that they are never taken for turns of `conv`."""
    if n <= 0:
        return []
    rng = random.Random(f"{seed}:{conv.sample_id}:{i}")
    others = [c for c in convs if c.sample_id != conv.sample_id and any(len(s.turns) >= n for s in c.sessions)]
    if not others:
        ends = [e for e, (who, _) in enumerate(NEUTRAL_CHAT) if who == "user" and e >= n - 1]
        end = rng.choice(ends) if ends else len(NEUTRAL_CHAT) - 2  # the user, who asks next, spoke last
        start = max(0, end - n + 1)
        return [Turn(w, text, f"neutral:{j}") for j, (w, text) in enumerate(NEUTRAL_CHAT) if start <= j <= end]
    other = rng.choice(others)
    sess = rng.choice([s for s in other.sessions if len(s.turns) >= n])
    at = rng.randrange(n, len(sess.turns) + 1)
    turns = sess.turns[at - n : at]
    me = turns[-1].speaker
    return [Turn("user" if t.speaker == me else "assistant", t.text, f"{other.sample_id}/{t.turn_id}") for t in turns]


def _score_agent(
    b: Built, convs, conv, method: str, retriever: str, spec: RunSpec, options, rows: _Rows, steps
) -> None:
    """Every question at every budget, scored on the memory text `MemoryAgent.reply` would put in its prompt.

    `method` "app-defaults:secom" / "app-defaults:theanine" keeps the installed options (k, retrievers,
    query form); the other methods retrieve BENCH_K items with `retriever`, so that the budget decides.
    """
    as_installed = method.startswith("app-defaults:") or method == "theanine-paper"
    strategy = "secom" if method.endswith("secom") else "theanine"
    session = LLMSession(b.llm, Trace("bench"), 0.0, 0) if b.llm is not None else None
    for i, q in enumerate(conv.questions):
        history = chat_before(convs, conv, i, spec.after_turns, spec.seed)
        for budget in spec.budgets:
            opts = options.with_(strategy=strategy, budget=budget)
            if not as_installed:
                opts = opts.with_(k=BENCH_K, retriever=retriever, theanine_retriever=retriever)
            if method == "theanine-paper":
                opts = opts.with_(theanine_mode="paper")
            trace = Trace(strategy)
            ctx = b.agent.memory_context(
                b.user, history, q.question, opts, trace, session, timelines=method != "theanine-topk"
            )
            covered = {t for c in ctx.covers for t in c}
            pairs = list(zip(ctx.lines, ctx.covers, strict=False))
            multi = any(len(t.get("nodes") or ()) >= 2 for t in trace.timelines_raw) if strategy == "theanine" else None
            whole = any(len(t.get("nodes") or ()) >= 2 and t.get("whole") for t in trace.timelines_raw)
            rows.add(conv, i, (b.summariser, method, retriever, budget), covered, pairs, multi, whole)
        steps.step(agent_step_cost(method) * len(spec.budgets))


def _agent_rows(method: str, spec: RunSpec, options) -> list[tuple[str, str]]:
    """(method, retriever) rows scored for one requested method."""
    if method == "app-defaults":
        return [
            ("app-defaults:secom", options.retriever if options else ""),
            ("app-defaults:theanine", options.theanine_retriever if options else ""),
        ]
    if method == "theanine-paper":  # the paper's ranking (dense), whatever the run's retrievers
        return [(method, "dense")]
    return [(method, r) for r in spec.retrievers]


def _score_summariser(convs, conv, summ: str, spec: RunSpec, settings, options, tmp: Path, rows: _Rows, steps) -> dict:
    """Close the conversation's sessions into memory with one summariser, then score its strategies."""
    t0 = time.perf_counter()
    steps.say(f"  {summ}: closing {len(conv.sessions)} sessions into memory")
    close_cost = CLOSE_COST.get(summ, CLOSE_COST["llm"])
    b = build(
        conv,
        summ,
        settings,
        tmp / f"{conv.sample_id}-{summ}",
        options,
        spec.segment_max_len,
        lambda: steps.step(close_cost),
    )
    steps.say(
        f"  {summ}: closed {len(conv.sessions)} sessions in {time.perf_counter() - t0:.1f}s "
        f"({b.close['memories']} memories, {b.close['segments']} segments, {b.close['llm_calls']} LLM calls)"
    )
    at = 1000 if 1000 in spec.budgets else spec.budgets[-1]
    for requested in [m for m in spec.methods if m not in ("turn", "session")]:
        for method, r in _agent_rows(requested, spec, options):
            t0 = time.perf_counter()
            _score_agent(b, convs, conv, method, r, spec, options, rows, steps)
            mine = [x[2] for x in rows.per[(summ, method, r, at)] if x[0] == conv.sample_id]
            steps.say(f"    {method:18s} {r:6s} recall@{at} {mean(mine)}  [{time.perf_counter() - t0:.1f}s]")
    return b.close


def _summary(
    per: dict[tuple, list], multi: dict[tuple, list[bool]] | None = None, whole: dict[tuple, list[bool]] | None = None
) -> list[dict]:
    """One results row per (summariser, method, retriever, budget): mean recall, per category and
    conversation, and for THEANINE the share of contexts that held a timeline of two memories or more
    (and one such timeline whole)."""
    multi, whole = multi or {}, whole or {}
    return [
        {
            "summariser": summ,
            "method": method,
            "retriever": r,
            "budget": bud,
            "strategy": strategy_label(summ, method, r),
            **recall_fields(rows),
            **({"multi_timeline_share": mean([float(x) for x in multi[key]])} if multi.get(key) else {}),
            **({"whole_timeline_share": mean([float(x) for x in whole[key]])} if whole.get(key) else {}),
        }
        for key, rows in per.items()
        for summ, method, r, bud in [key]
    ]


def evaluate(
    convs, spec: RunSpec, *, settings, embedder, options, report: Progress | None = None, log: Log | None = None
) -> dict:
    """Results rows, the close reports and the per-question rows of one run (see `run`)."""
    rows = _Rows(spec.contexts)
    steps = _Steps(_total_cost(convs, spec), report, log)
    closes: dict = defaultdict(dict)
    with tempfile.TemporaryDirectory(prefix="bench-locomo-agent-") as tmp:
        for ci, conv in enumerate(convs):
            steps.say(
                f"{conv.sample_id} ({ci + 1}/{len(convs)}): {len(conv.sessions)} sessions, "
                f"{len(conv.questions)} questions"
            )
            conv.qvecs = embedder.embed([q.question for q in conv.questions])
            for i in range(len(conv.questions)):
                rows.question(conv, i)  # in the file's order, whatever is scored first
            _score_baselines(conv, spec, embedder, rows, steps)
            for summ in spec.summarisers:
                closes[summ][conv.sample_id] = _score_summariser(
                    convs, conv, summ, spec, settings, options, Path(tmp), rows, steps
                )
    return {"results": _summary(rows.per, rows.multi, rows.whole), "close": dict(closes), "questions": rows.questions}


def run(
    convs, spec: RunSpec, *, settings: Settings, data: str = "", report: Progress | None = None, log: Log | None = None
) -> dict:
    """The agent-path evaluation on loaded conversations: the JSON `bench locomo` writes.

    `report(fraction, text)` follows the run (the app's progress bar); `log(line)` takes its progress
    lines (the CLI prints them).
    """
    problems = spec.problems(has_llm=not settings.llm.is_bundled)
    if problems:
        raise ValueError("; ".join(problems))
    if spec.embedder:
        settings = dataclasses.replace(settings, embedder=spec.embedder)
    options = settings.options.with_(seed=spec.seed)
    embedder = make_embedder(
        settings.embedder, api_key=settings.llm.api_key, base_url=settings.llm.base_url, model=settings.embed_model
    )
    t0 = time.perf_counter()
    out = evaluate(convs, spec, settings=settings, embedder=embedder, options=options, report=report, log=log)
    out["config"] = config(convs, spec, settings, options, data, time.perf_counter() - t0)
    if report:
        report(1.0, f"done: {len(out['questions'])} questions in {out['config']['seconds']} s")
    return out


def config(convs, spec: RunSpec, settings, options, data: str, seconds: float) -> dict:
    return {
        "path": "agent",
        "summarisers": spec.summarisers,
        "data": data,
        "conversations": [c.sample_id for c in convs],
        "n_questions": sum(len(c.questions) for c in convs),
        "budgets": spec.budgets,
        "methods": spec.methods,
        "retrievers": spec.retrievers,
        "seed": spec.seed,
        "tokenizer": "tiktoken cl100k_base",
        "embedder": settings.embedder,
        "k": BENCH_K,
        "after_turns": spec.after_turns,
        "app_defaults": {
            "k": options.k,
            "retriever": options.retriever,
            "theanine_retriever": options.theanine_retriever,
            "query_turns": options.query_turns,
            "timeline_len": options.timeline_len,
        },
        "j": options.j,
        "n": options.n,
        "segmenter": settings.segmenter,
        "segmenter_params": settings.segmenter_params or None,
        "segment_max_len": spec.segment_max_len,
        "compressor": settings.compressor_model,
        "llm": settings.llm.describe() if "llm" in spec.summarisers else None,
        "theanine_retriever": "each of the retrievers (app-defaults: the installed one)",
        "packing": "memory.packing.pack (shared by reply and benchmark)",
        "contexts": spec.contexts,
        "seconds": round(seconds, 1),
        "machine": machine(),
    }


def method_label(row: dict) -> str:
    return row["method"] if row.get("summariser", "-") == "-" else f"{row['method']} [{row['summariser']}]"
