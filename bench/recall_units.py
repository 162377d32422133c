"""The packer-only path of the LoCoMo evidence-recall command (`bench locomo --path units`).

For every question (category 5 and questions without evidence skipped; evidence
ids cleaned) and every (method, retriever), the method's memory units are
ranked against the question and packed into a context of each budget
(tiktoken cl100k_base): units in rank order while they fit, the first that
does not fit cut to what fits, then stop. Evidence recall is the fraction of
the question's evidence turns carried whole by the context: for dialogue units
(turn, session, SeCom segments) a turn counts when its whole line is inside; for
THEANINE memories (LoCoMo `observation` facts) a turn counts when a fact in the
context carries its dia_id.

Methods and the code they run:
* turn / session: baselines, one unit per turn / per session.
* secom / secom-raw: `SecomMemory.build` per session (the configured segmenter,
  offline by default) and the engine's own ranking of segments; `secom` ranks
  on the compressed keys (when a compressor is available), `secom-raw` on the
  segments' original text.
* theanine-topk / theanine-timeline: the observation facts are linked into a
  graph by `TheanineMemory.add_memories` (configured LLM, or the offline linking
  rule); topk packs the ranked facts, timeline packs whole timelines
  (`timelines.sample_timelines`, in `timelines.render`'s format) through the
  ranked facts, most relevant anchor first. Dense ranking goes through the
  store; BM25 ranks the same events with the engine's BM25Index.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memory import locomo_format as lf
from memory.bm25 import BM25Index
from memory.dates import iso_key
from memory.embeddings import make_embedder
from memory.evaluation.baselines import DialogueUnits, turn_line
from memory.evaluation.conversations import Conversation
from memory.evaluation.machine import machine
from memory.evaluation.ranking import fuse, order_by
from memory.evaluation.scoring import Replayable, evidence_recall, mean, recall_fields
from memory.llm import LLMSession, make_llm
from memory.locks import UserLocks
from memory.packing import Piece, Unit, pack
from memory.secom.compression import load_compressor
from memory.secom.segmentation import segmenter_for
from memory.secom.strategy import KIND as SECOM_KIND
from memory.secom.strategy import SecomMemory
from memory.settings import Options, Settings
from memory.store import ChromaStore
from memory.theanine import linking
from memory.theanine import timelines as tl
from memory.theanine.graph import Memory
from memory.theanine.strategy import KIND as THEANINE_KIND
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace

from .common import llm_configured, progress

METHODS = ("turn", "session", "secom", "secom-raw", "theanine-topk", "theanine-timeline")
DEFAULT_TIMELINE_LEN = 3  # tuned on conv-26 (2, 3, 5, 12 tried; see docs/benchmarks.md)


class TheanineUnits:
    """The observation facts as THEANINE memories, linked by the engine into a graph."""

    def __init__(
        self,
        conv: Conversation,
        store,
        embedder,
        data_dir: Path,
        llm_session,
        options: Options,
        dates: bool,
        max_len: int,
        seed: int,
    ):
        self.kind, self.options, self.dates, self.max_len, self.seed = THEANINE_KIND, options, dates, max_len, seed
        self.user = f"locomo-{conv.sample_id}"
        self.store = store
        self.tm = TheanineMemory(store, embedder, data_dir, UserLocks())
        by_session: dict[str, list] = defaultdict(list)
        for o in conv.observations:
            by_session[o.session].append(o)
        trace = Trace("close")
        t0, calls0 = time.perf_counter(), _calls_of(llm_session)
        for s in conv.sessions:
            obs = by_session.get(s.session_id, [])
            mems = [
                Memory(
                    id=f"{s.session_id}:o{i}",
                    event=o.text,
                    time=o.date,
                    session_id=s.session_id,
                    ts=iso_key(o.date),
                    turns=list(o.dia_ids),
                    speaker=o.speaker,
                )
                for i, o in enumerate(obs)
            ]
            if mems:
                self.tm.add_memories(self.user, s.session_id, mems, llm_session, options, trace)
        self.build_seconds = time.perf_counter() - t0
        self.graph = self.tm.graph(self.user)
        self.llm_calls = len(trace.llm_calls) + _calls_of(llm_session) - calls0
        self.mids = [m.id for m in sorted(self.graph.memories(), key=lambda m: m.seq)]
        self.bm25 = BM25Index([self.graph.memory(m).event for m in self.mids])
        self._pos = {m: i for i, m in enumerate(self.mids)}

    def stats(self) -> dict:
        g = self.graph.g
        comps = Counter(self.graph.component_of(m) for m in self.mids)
        return {
            "memories": len(self.mids),
            "edges": g.number_of_edges(),
            "components": len(comps),
            "largest_component": max(comps.values()) if comps else 0,
            "relations": {k: v for k, v in self.graph.relation_counts().items() if v},
            "link_seconds": round(self.build_seconds, 2),
            "link_llm_calls": self.llm_calls,
        }

    def _dense(self, qvec: np.ndarray) -> np.ndarray:
        # The engine's store: every memory of the user, by cosine similarity.
        hits = self.store.query(self.user, self.kind, qvec, len(self.mids))
        s = np.full(len(self.mids), -2.0)
        for h in hits:
            if h.id in self._pos:
                s[self._pos[h.id]] = h.score
        return s

    def rank(self, retriever: str, q: lf.Question, qvec: np.ndarray) -> list[str]:
        if retriever == "bm25":
            s = self.bm25.score(q.question)
        elif retriever == "dense":
            s = self._dense(qvec)
        else:
            s = fuse(self.bm25.score(q.question), self._dense(qvec))
        return [self.mids[i] for i in order_by(s)]

    def _node_text(self, mid: str) -> str:
        m = self.graph.memory(mid)
        # The same format as timelines.render, so top-k and timelines pay the same per memory.
        return f"[{m.time}: {m.event}]" if (m.time and self.dates) else f"[{m.event}]"

    def topk(self, retriever: str, q: lf.Question, qvec: np.ndarray) -> Iterator[Unit]:
        for mid in self.rank(retriever, q, qvec):
            yield Unit(mid, [Piece(self._node_text(mid), tuple(self.graph.memory(mid).turns))])

    def timeline_unit(self, path: list[str], anchor: str) -> Unit:
        pieces = []
        for i, mid in enumerate(path):
            rel = f"-({self.graph.g.edges[path[i - 1], mid]['relation']})- " if i else ""
            pieces.append(Piece(rel + self._node_text(mid), tuple(self.graph.memory(mid).turns)))
        return Unit(f"timeline:{anchor}", pieces, sep=" ", anchor=path.index(anchor), meta={"nodes": path})

    def timelines(self, retriever: str, q: lf.Question, qvec: np.ndarray) -> Iterator[Unit]:
        """Timelines through the ranked memories, most relevant anchor first (`timelines.sample_timelines`,
        seeded). An anchor shown inside an earlier timeline is skipped; a timeline is kept whole, unless
        all its memories are in the context already."""
        rng = random.Random(self.seed)
        shown: set[str] = set()
        for mid in self.rank(retriever, q, qvec):
            if mid in shown:
                continue
            for path in tl.sample_timelines(self.graph, mid, self.options.n, rng, max_len=self.max_len):
                if tl.adds_memory(path, shown):
                    shown.update(path)
                    yield self.timeline_unit(path, mid)


class SecomUnits:
    """SeCom segments built by the engine (`SecomMemory.build` per session) and ranked by the engine
    (`SecomMemory.rank`: BM25 over the keys, dense over the keys, or their fusion)."""

    def __init__(self, conv: Conversation, secom, llm_session, options: Options, dates: bool, tag: str):
        self.secom, self.options, self.dates = secom, options, dates
        self.user = f"locomo-{conv.sample_id}-{tag}"
        self.turns = {t.turn_id: t for s in conv.sessions for t in s.turns}
        trace = Trace("close")
        t0, calls0 = time.perf_counter(), _calls_of(llm_session)
        for s in conv.sessions:
            secom.build(self.user, s, llm_session, options, trace)
        self.build_seconds = time.perf_counter() - t0
        self.llm_calls = len(trace.llm_calls) + _calls_of(llm_session) - calls0
        self.notices = list(trace.notices)
        hits = secom.store.get(self.user, SECOM_KIND)
        self._units = {h.id: self._unit(h) for h in hits}
        self._keys = {h.id: h.document for h in hits}

    def _unit(self, h) -> Unit:
        m = h.metadata or {}
        head = [Piece(f"({m['date']})")] if self.dates and m.get("date") else []
        tids = [x for x in str(m.get("turn_ids", "")).split(",") if x]
        # The segment's own lines (speaker: text, one per turn) as the reply reads them.
        return Unit(h.id, head + [Piece(turn_line(self.turns[t]), (t,)) for t in tids])

    def stats(self) -> dict:
        sizes = [len(u.pieces) - (1 if self.dates else 0) for u in self._units.values()]
        ratio = [len(self._keys[i]) / max(1, len(self._units[i].text)) for i in self._units]
        return {
            "segments": len(self._units),
            "mean_turns": round(float(np.mean(sizes)), 2) if sizes else 0,
            "key_chars_over_text_chars": round(float(np.mean(ratio)), 3) if ratio else None,
            "build_seconds": round(self.build_seconds, 2),
            "build_llm_calls": self.llm_calls,
            "notices": self.notices,
        }

    def ranked(self, retriever: str, q: lf.Question, qvec: np.ndarray) -> Iterator[Unit]:
        for h, _ in self.secom.rank(self.user, q.question, retriever):
            yield self._units[h.id]


@dataclass
class _UnitsRun:
    """The packer-only path's shared parts: what each method is built from, and the scores so far."""

    embedder: object
    store: object
    data_dir: Path
    llm_session: object
    secom: dict | None
    options: Options
    dates: bool
    max_len: int
    seed: int
    per_q: dict = field(default_factory=lambda: defaultdict(list))  # (method, retriever, budget) -> rows
    built: dict = field(default_factory=lambda: defaultdict(dict))  # conversation -> built units
    timing: dict = field(default_factory=lambda: defaultdict(float))


def _method_units(run: _UnitsRun, conv: Conversation, method: str):
    """The ranking function of `method` on `conv` (units built once per conversation), or None."""
    if method in ("turn", "session"):
        obj = DialogueUnits(conv, run.embedder, method, run.dates)
        return obj.ranked
    mine = run.built[conv.sample_id]
    if method in ("secom", "secom-raw"):
        if not run.secom:
            return None
        key = f"{method}-units"
        if key not in mine:
            mine[key] = SecomUnits(conv, run.secom[method], run.llm_session, run.options, run.dates, method)
        return mine[key].ranked
    if "theanine-units" not in mine:
        mine["theanine-units"] = TheanineUnits(
            conv, run.store, run.embedder, run.data_dir, run.llm_session, run.options, run.dates, run.max_len, run.seed
        )
    tu = mine["theanine-units"]
    return tu.topk if method == "theanine-topk" else tu.timelines


def _score_method(run: _UnitsRun, conv: Conversation, method: str, make, retrievers, budgets) -> None:
    for retriever in retrievers:
        for q, qvec in zip(conv.questions, conv.qvecs, strict=False):
            ranked = Replayable(make(retriever, q, qvec))
            for b in budgets:
                packed = pack(ranked, b)
                run.per_q[(method, retriever, b)].append(
                    (conv.sample_id, q.category, evidence_recall(q.evidence, packed.covered))
                )


def _log_best(run: _UnitsRun, conv: Conversation, method: str, retrievers, budgets, t0: float) -> None:
    at = 1000 if 1000 in budgets else budgets[-1]
    best = max(
        (mean([x[2] for x in run.per_q[(method, r, at)] if x[0] == conv.sample_id]) or 0.0, r) for r in retrievers
    )
    progress(f"  {method:18s} recall@{at} best {best[0]:.3f} ({best[1]})  [{time.perf_counter() - t0:.1f}s]")


def _units_results(per_q: dict, methods, retrievers, budgets) -> list[dict]:
    results = []
    for method in methods:
        for retriever in retrievers:
            for b in budgets:
                rows = per_q.get((method, retriever, b))
                if not rows:
                    continue
                results.append({"method": method, "retriever": retriever, "budget": b, **recall_fields(rows)})
    return results


def _observation_ceiling(convs: list[Conversation]) -> float | None:
    """What memories built from observation facts can reach at best: evidence turns some fact carries."""
    ceiling = []
    for conv in convs:
        carried = {d for o in conv.observations for d in o.dia_ids}
        ceiling += [evidence_recall(q.evidence, carried) for q in conv.questions]
    return mean(ceiling)


def evaluate(
    convs: list[Conversation],
    methods: list[str],
    retrievers: list[str],
    budgets: list[int],
    *,
    embedder,
    store,
    data_dir: Path,
    llm_session=None,
    secom=None,
    options: Options | None = None,
    dates: bool = True,
    max_len: int = DEFAULT_TIMELINE_LEN,
    seed: int = 0,
) -> dict:
    """The packer-only path (`--path units`): every method's units ranked and packed per question."""
    run = _UnitsRun(embedder, store, data_dir, llm_session, secom, options or Options(), dates, max_len, seed)
    for ci, conv in enumerate(convs):
        progress(
            f"{conv.sample_id} ({ci + 1}/{len(convs)}): {len(conv.sessions)} sessions, "
            f"{sum(len(s.turns) for s in conv.sessions)} turns, {len(conv.questions)} questions, "
            f"{len(conv.observations)} observations"
        )
        conv.qvecs = embedder.embed([q.question for q in conv.questions])
        for method in methods:
            t0 = time.perf_counter()
            make = _method_units(run, conv, method)
            if make is None:
                continue
            run.timing[f"build:{method}"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            _score_method(run, conv, method, make, retrievers, budgets)
            run.timing[f"rank+pack:{method}"] += time.perf_counter() - t0
            _log_best(run, conv, method, retrievers, budgets, t0)
    stats = {cid: {k.replace("-units", ""): v.stats() for k, v in d.items()} for cid, d in run.built.items()}
    return {
        "results": _units_results(run.per_q, methods, retrievers, budgets),
        "built": stats,
        "timing_seconds": {k: round(v, 2) for k, v in run.timing.items()},
        "observation_ceiling": _observation_ceiling(convs),
    }


def _secom_memories(store, embedder, settings, use_llm: bool, segment_max_len: int | None = None):
    """The engine's SecomMemory twice: with the configured compressor (`secom`) and without (`secom-raw`),
    and a note on compression."""
    overrides = {"max_len": segment_max_len} if segment_max_len else {}
    segmenter = segmenter_for(settings, embedder, settings.segmenter if use_llm else "embedding", **overrides)
    compressor, note = load_compressor(settings.compressor_model)
    note = note or f"compressed keys: {getattr(compressor, 'name', 'compressor')}"
    return {
        "secom": SecomMemory(store, embedder, compressor, note, segmenter),
        "secom-raw": SecomMemory(store, embedder, None, "secom-raw: keys are the original text", segmenter),
    }, f"{note}; segmenter: {segmenter.name}"


def _calls_of(llm_session) -> int:
    """LLM calls recorded so far by the linking session (its own trace, not the build's)."""
    return len(llm_session.trace.llm_calls) if llm_session is not None else 0


def _units_setup(args):
    """The packer-only path's providers: settings, options, embedder, and the LLM session for linking."""
    settings = Settings.from_env()
    options = settings.options.with_(seed=args.seed)
    embedder_kind = args.embedder or settings.embedder
    embedder = make_embedder(
        embedder_kind, api_key=settings.llm.api_key, base_url=settings.llm.base_url, model=settings.embed_model
    )
    use_llm = args.linking == "llm" or (args.linking == "auto" and llm_configured())
    llm_session = None
    if use_llm:
        llm_session = LLMSession(make_llm(settings.llm), Trace("close"), options.temperature, settings.llm.max_retries)
    return settings, options, embedder, embedder_kind, use_llm, llm_session


def run(args, convs: list[Conversation]) -> dict:
    """The `--path units` command on loaded conversations: the JSON it writes."""
    settings, options, embedder, embedder_kind, use_llm, llm_session = _units_setup(args)
    with tempfile.TemporaryDirectory(prefix="bench-locomo-") as tmp:
        store = ChromaStore(path=Path(tmp) / "chroma")
        secom, secom_note, seg_params = {}, "not requested", None
        if {"secom", "secom-raw"} & set(args.methods):
            secom, secom_note = _secom_memories(store, embedder, settings, use_llm, args.segment_max_len)
            progress(secom_note)
            seg_params = secom["secom"].segmenter.params.to_dict() if secom else None
        t0 = time.perf_counter()
        out = evaluate(
            convs,
            args.methods,
            args.retrievers,
            args.budgets,
            embedder=embedder,
            store=store,
            data_dir=Path(tmp),
            llm_session=llm_session,
            secom=secom,
            options=options,
            dates=not args.no_dates,
            max_len=args.max_len,
            seed=args.seed,
        )
    out["config"] = _units_config(args, convs, settings, options, use_llm, embedder, embedder_kind)
    out["config"].update(secom=secom_note, segmenter_params=seg_params, seconds=round(time.perf_counter() - t0, 1))
    out["config"]["machine"] = machine()
    return out


def _units_config(args, convs, settings, options, use_llm: bool, embedder, embedder_kind: str) -> dict:
    return {
        "data": str(args.data),
        "conversations": [c.sample_id for c in convs],
        "n_questions": sum(len(c.questions) for c in convs),
        "budgets": args.budgets,
        "methods": args.methods,
        "retrievers": args.retrievers,
        "seed": args.seed,
        "tokenizer": "tiktoken cl100k_base",
        "embedder": getattr(embedder, "name", embedder_kind),
        "linking": ("llm: " + settings.llm.describe())
        if use_llm
        else f"offline rule (SameTopic if cosine >= {linking.OFFLINE_SAMETOPIC_THRESHOLD})",
        "j": options.j,
        "n": options.n,
        "timeline_max_len": args.max_len,
        "dates": not args.no_dates,
        "segmenter": settings.segmenter if use_llm else "embedding",
        "segment_max_len": args.segment_max_len,
        "packing": "units in rank order while they fit; the first that does not fit is cut to the pieces "
        "around its anchor that fit; then stop",
    }
