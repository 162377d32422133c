"""`python -m bench bm25`: the engine's BM25 (memory/bm25.py) against bm25s, at N segments.

Corpus (made in memory, never written): LoCoMo's turns cut into SeCom-like segments of 2-6
consecutive turns ("Speaker: text" lines, the uncompressed keys SeCom ranks), then distractor
segments up to N: random turns of every sample with a quarter of their words swapped for words of
other turns (one in 20 of those a new word, so the vocabulary grows with N): text that reads like
the conversation but covers no evidence. Queries: LoCoMo questions with evidence (not
adversarial), drawn with --seed.

Both libraries index the same tokens (`memory.bm25.tokenize`: stop words dropped, Porter stems)
with k1=1.2, b=0.75 and Lucene's idf, so their rankings should agree; tokenising the corpus is
timed once, apart. Per library and size, medians over --runs (the libraries take turns run by
run): build time; adding one segment as SeCom does it (a rebuild over N+1, then the next query);
score-all and top-10 latency p50/p95 (query tokenising included); the traced peak while building
and the memory the index keeps (tracemalloc, one run: it does not vary); overlap@10 with the
engine's ranking and the largest score difference (bm25s scores times k1 + 1, the constant
Lucene's formula drops); LoCoMo turn recall@10 (evidence turns covered by the 10 best segments
with a positive score). Times are CPU time of the process, as the machine may be shared (the
build's wall time is in the JSON). bm25s is optional (requirements-dev.txt): without it only the
engine is measured.
"""

from __future__ import annotations

import gc
import json
import random
import re
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memory.bm25 import BM25Index, tokenize
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.locomo_format import load_sessions, questions

from .common import int_list, parser, percentile, progress

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"
K = 10
K1, B = 1.2, 0.75  # the engine's defaults, given to both
_WORDS = re.compile(r"\S+")


@dataclass
class Corpus:
    texts: list[str]
    turns: list[tuple[str, ...]]  # per segment: "sample:dia_id" of the LoCoMo turns it holds
    queries: list[tuple[str, list[str]]] = field(default_factory=list)  # (question, evidence turn ids)


def _vary(rng: random.Random, vocab: list[str]) -> str:
    """A word of the corpus; one in 20 a new one (two words spliced), so the vocabulary keeps growing with N."""
    w = rng.choice(vocab)
    if rng.random() < 0.05:
        v = rng.choice(vocab)
        w = w[: max(1, len(w) // 2)] + v[len(v) // 2 :]
    return w


def make_corpus(data, n: int, n_queries: int, seed: int) -> Corpus:
    """LoCoMo segments first (as many as fit in n), then distractors up to n."""
    rng = random.Random(seed)
    texts: list[str] = []
    turns: list[tuple[str, ...]] = []
    pool: list[tuple[str, list[str]]] = []  # (speaker, words) of every turn
    for sample_id, sessions in load_sessions(data):
        for s in sessions:
            ts = [t for t in s.turns if t.text.strip()]
            pool += [(t.speaker, _WORDS.findall(t.text)) for t in ts]
            i = 0
            while i < len(ts):
                seg = ts[i : i + rng.randint(2, 6)]
                texts.append("\n".join(f"{t.speaker}: {t.text}" for t in seg))
                turns.append(tuple(f"{sample_id}:{t.turn_id}" for t in seg))
                i += len(seg)
    texts, turns = texts[:n], turns[:n]
    vocab = [w for _, ws in pool for w in ws]
    while len(texts) < n:
        lines = []
        for _ in range(rng.randint(2, 6)):
            speaker, words = pool[rng.randrange(len(pool))]
            words = [_vary(rng, vocab) if rng.random() < 0.25 else w for w in words]
            lines.append(f"{speaker}: {' '.join(words)}")
        texts.append("\n".join(lines))
        turns.append(())
    covered = {t for ts in turns for t in ts}
    samples = data if isinstance(data, list) else [data]
    qs = [
        (q.question, [f"{s.get('sample_id', f'sample-{i}')}:{e}" for e in q.evidence])
        for i, s in enumerate(samples)
        for q in questions(s)
    ]
    qs = [q for q in qs if any(e in covered for e in q[1])]
    rng.shuffle(qs)
    return Corpus(texts, turns, qs[:n_queries])


class Engine:
    """One library behind the operations the benchmark times."""

    name = ""
    scale = 1.0  # its scores times this are the engine's (bm25s: Lucene drops the constant k1 + 1)

    def build(self, tokens: list[list[str]]) -> Any:
        raise NotImplementedError

    def score(self, index, query: str) -> np.ndarray:
        raise NotImplementedError

    def top(self, index, query: str, k: int) -> list[int]:
        raise NotImplementedError


class EngineOwn(Engine):
    name = "memory/bm25.py"

    def build(self, tokens):
        return BM25Index(k1=K1, b=B, tokens=tokens)

    def score(self, index, query):
        return index.score(query)

    def top(self, index, query, k):
        return [i for i, _ in index.top(query, k)]


class EngineBm25s(Engine):
    name = "bm25s"

    def __init__(self):
        import bm25s

        self.bm25s = bm25s
        self.name = f"bm25s {bm25s.__version__}"
        self.scale = K1 + 1.0

    def build(self, tokens):
        r = self.bm25s.BM25(k1=K1, b=B, method="lucene")
        r.index(tokens, show_progress=False)
        return r

    def _known(self, index, query: str) -> list[str]:
        return [t for t in tokenize(query) if t in index.vocab_dict]

    def score(self, index, query):
        q = self._known(index, query)
        return index.get_scores(q) if q else np.zeros(index.scores["num_docs"], dtype=np.float32)

    def top(self, index, query, k):
        q = self._known(index, query)
        if not q:
            return []
        ids, scores = index.retrieve([q], k=min(k, index.scores["num_docs"]), show_progress=False)
        return [int(i) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]


def engines() -> list[Engine]:
    out: list[Engine] = [EngineOwn()]
    try:
        out.append(EngineBm25s())
    except ImportError:
        progress("bm25s is not installed (pip install -r requirements-dev.txt): measuring memory/bm25.py only")
    return out


def _ms(xs: list[float]) -> tuple[float, float]:
    return round(percentile(xs, 50) * 1e3, 3), round(percentile(xs, 95) * 1e3, 3)


def memory_mb(engine: Engine, tokens: list[list[str]], queries: list[str]) -> tuple[float, float]:
    """(traced peak while building, traced memory the index keeps after answering the queries) in MB."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        index = engine.build(tokens)
        peak = tracemalloc.get_traced_memory()[1] - base
        for q in queries:
            engine.score(index, q)
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del index
    return round(peak / 2**20, 1), round(kept / 2**20, 1)


def recall_at_k(corpus: Corpus, ranked: list[list[int]]) -> float:
    rs = []
    for (_, evidence), top in zip(corpus.queries, ranked, strict=True):
        got = {t for i in top for t in corpus.turns[i]}
        rs.append(sum(e in got for e in evidence) / len(evidence))
    return round(float(np.mean(rs)), 4) if rs else float("nan")


_clock = time.process_time  # CPU seconds of this process: other jobs on a shared machine do not count


def _latencies(eng: Engine, index, queries: list[str]) -> tuple[list[float], list[float]]:
    """CPU seconds per query: score every document, and the top 10."""
    score, top = [], []
    for q in queries:
        t0 = _clock()
        eng.score(index, q)
        t1 = _clock()
        eng.top(index, q, K)
        score.append(t1 - t0)
        top.append(_clock() - t1)
    return score, top


def _one_run(eng: Engine, tokens: list[list[str]], extra: list[str], qs: list[str]) -> dict[str, float]:
    gc.collect()
    t0, w0 = _clock(), time.perf_counter()
    index = eng.build(tokens)
    out = {"build": _clock() - t0, "build_wall": time.perf_counter() - w0}
    sc, tp = _latencies(eng, index, qs)
    out["score_p50"], out["score_p95"] = _ms(sc)
    out["top_p50"], out["top_p95"] = _ms(tp)
    del index
    gc.collect()
    t0 = _clock()  # adding a segment, as SeCom does: rebuild, then answer the next query
    eng.top(eng.build([*tokens, extra]), qs[0] if qs else "", K)
    out["add"] = _clock() - t0
    return out


def _agreement(ref: tuple[list, list], tops: list[list[int]], scores: list[np.ndarray]) -> tuple[float, float]:
    """(mean overlap@10, largest score difference) of one library's answers with the reference's."""
    overlap = [len(set(a) & set(b)) / max(len(a), len(b), 1) for a, b in zip(ref[0], tops, strict=True)]
    diff = [float(np.abs(a - b).max()) for a, b in zip(ref[1], scores, strict=True) if a.size]
    return round(float(np.mean(overlap)), 4) if overlap else 1.0, max(diff, default=0.0)


def run_size(corpus: Corpus, engs: list[Engine], runs: int) -> dict:
    n = len(corpus.texts)
    t0 = _clock()
    tokens = [tokenize(t) for t in corpus.texts]
    tok_s = _clock() - t0
    extra = tokenize(corpus.texts[n // 2])  # the segment "added": a copy of a real one
    qs = [q for q, _ in corpus.queries]
    per_run: dict[str, list[dict[str, float]]] = {e.name: [] for e in engs}
    for r in range(runs):  # libraries take turns, so a busy spell of the machine hits them alike
        for eng in engs:
            progress(f"n={n:,} {eng.name}: run {r + 1}/{runs}")
            per_run[eng.name].append(_one_run(eng, tokens, extra, qs))
    rows: list[dict] = []
    ref: tuple[list, list] = ([], [])
    for eng in engs:
        index = eng.build(tokens)
        tops = [eng.top(index, q, K) for q in qs]
        scores = [np.asarray(eng.score(index, q), dtype=np.float64) * eng.scale for q in qs]
        del index
        ref = ref if rows else (tops, scores)
        overlap, diff = _agreement(ref, tops, scores)
        peak, kept = memory_mb(eng, tokens, qs)
        med = {k: statistics.median(x[k] for x in per_run[eng.name]) for k in per_run[eng.name][0]}
        rows.append(
            {
                "n": n,
                "library": eng.name,
                "tokenize_s": round(tok_s, 3),
                "build_s": round(med["build"], 3),
                "build_wall_s": round(med["build_wall"], 3),
                "add_one_s": round(med["add"], 3),
                "score_ms_p50": med["score_p50"],
                "score_ms_p95": med["score_p95"],
                "top10_ms_p50": med["top_p50"],
                "top10_ms_p95": med["top_p95"],
                "build_peak_mb": peak,
                "index_mb": kept,
                "overlap_at_10": overlap,
                "max_score_diff": diff,
                "recall_at_10": recall_at_k(corpus, tops),
            }
        )
    return {"n": n, "queries": len(qs), "rows": rows}


def table(sizes: list[dict]) -> str:
    out = [
        "| segments | library | build s | add one (rebuild + query) s | score-all p50 / p95 ms "
        "| top-10 p50 / p95 ms | build peak MB | index MB | overlap@10 | max score diff | recall@10 |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in sizes:
        for r in s["rows"]:
            out.append(
                f"| {r['n']:,} | {r['library']} | {r['build_s']:.2f} | {r['add_one_s']:.2f} "
                f"| {r['score_ms_p50']:.2f} / {r['score_ms_p95']:.2f} "
                f"| {r['top10_ms_p50']:.2f} / {r['top10_ms_p95']:.2f} "
                f"| {r['build_peak_mb']:.0f} | {r['index_mb']:.0f} | {r['overlap_at_10']:.3f} "
                f"| {r['max_score_diff']:.1e} | {r['recall_at_10']:.3f} |"
            )
    toks = ", ".join(f"{s['n']:,}: {s['rows'][0]['tokenize_s']:.1f} s" for s in sizes)
    out.append(f"\nCPU time. Tokenising the corpus (shared, not in build): {toks}.")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    p = parser("bm25", __doc__.splitlines()[0], "bench_out/bm25.json")
    p.add_argument("--data", default=str(DATA), help=f"a file in LoCoMo's format (default {DATA})")
    p.add_argument(
        "--sizes", type=int_list, default=[10_000, 100_000], help="segments per index (default 10000,100000)"
    )
    p.add_argument("--queries", type=int, default=200, help="LoCoMo questions asked (default 200)")
    p.add_argument("--runs", type=int, default=3, help="timed runs; medians are reported (default 3)")
    a = p.parse_args(argv)
    with open(a.data, encoding="utf-8") as f:
        data = json.load(f)
    engs = engines()
    sizes = []
    for n in a.sizes:
        corpus = make_corpus(data, n, a.queries, a.seed)
        progress(f"n={n:,}: {sum(1 for t in corpus.turns if t):,} LoCoMo segments, {len(corpus.queries)} questions")
        sizes.append(run_size(corpus, engs, max(1, a.runs)))
    result = {"command": "bm25", "args": vars(a), "machine": machine(), "sizes": sizes}
    atomic_write_json(a.out, result)
    print(table(sizes))
    return 0
