"""Scale: latency and memory of the engine's own operations for synthetic users of growing size.

    python -m bench scale --sizes 1000,10000,100000 --out bench_out/scale.json

Each size runs in a fresh child process (so its peak memory is its own). A
synthetic user gets N random-but-structured memories: sessions of 10 memories,
topics of uneven size with their own words, embeddings drawn around a unit
centroid per topic (synthetic unit vectors: no embedding model time), linked
session by session with the engine's linking rule (`linking.link`: the most
recent related memory per component, a few cross-topic links so components
merge as they do on real data). The same sessions become SeCom segments.
Filling is bulk; the timed operations run the real code:

* link: `TheanineMemory.add_memories` for a new one-memory session
  (store query for the j candidates, offline relation rule, graph update, store
  add, graph file write). LLM time excluded: the relation pairs an LLM would
  label are counted (`link_llm_pairs`), one batched call per session.
* timeline: `TheanineMemory.retrieve` (store query for k anchors + untangling
  n timelines each through the graph).
* secom: `SecomMemory.retrieve` with the configured retriever (hybrid: BM25 over
  the compressed keys + dense store query). The first call, which loads the
  user's BM25 index from the store, is reported apart (`secom_first_ms`).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.locks import UserLocks

from . import common
from .common import progress

DIM = 384
SESSION_SIZE = 10


# --- synthetic users ----------------------------------------------------------------

_SYL = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "zu", "fi", "go", "ha", "ju", "be"]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 4)))


class SyntheticUser:
    """N memories in sessions of 10, on topics with their own vocabulary and embedding centroid."""

    def __init__(self, n: int, seed: int = 0, dim: int = DIM, noise: float = 0.8):
        self.n, self.dim = n, dim
        rng = random.Random(seed)
        nrng = np.random.default_rng(seed)
        self.n_topics = max(8, n // 40)
        self.centroids = nrng.standard_normal((self.n_topics, dim)).astype(np.float32)
        self.centroids /= np.linalg.norm(self.centroids, axis=1, keepdims=True)
        self.topic_words = [[_word(rng) for _ in range(6)] for _ in range(self.n_topics)]
        self.common_words = [_word(rng) for _ in range(3000)]
        weights = [1.0 / (i + 1) ** 0.8 for i in range(self.n_topics)]  # uneven topic sizes
        self.topics = rng.choices(range(self.n_topics), weights=weights, k=n)
        self.texts = [self._text(rng, t) for t in self.topics]
        self.noise = noise
        self.vectors = self.topic_vectors(nrng, self.topics)
        self.rng = rng

    def _text(self, rng: random.Random, topic: int) -> str:
        words = rng.sample(self.topic_words[topic], 3) + rng.sample(self.common_words, 8)
        rng.shuffle(words)
        return "The user " + " ".join(words) + "."

    def topic_vectors(self, nrng, topics) -> np.ndarray:
        v = self.centroids[np.asarray(topics)] + nrng.standard_normal((len(topics), self.dim)).astype(np.float32) * (
            self.noise / math.sqrt(self.dim)
        )
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def session_of(self, i: int) -> str:
        return f"s{i // SESSION_SIZE:06d}"

    def date_of(self, i: int) -> str:
        d = i // SESSION_SIZE
        return f"{2000 + d // 336:04d}-{1 + (d // 28) % 12:02d}-{1 + d % 28:02d}"

    def query(self, rng: random.Random) -> tuple[str, int]:
        t = self.topics[rng.randrange(self.n)]
        return "What about " + " ".join(rng.sample(self.topic_words[t], 2) + rng.sample(self.common_words, 3)) + "?", t


class SyntheticEmbedder:
    """Maps known texts to their synthetic vectors, and any other text to a vector near the topic
    its topic words name (queries), so retrieval is meaningful and embedding costs nothing."""

    name = "synthetic-unit-vectors"

    def __init__(self, user: SyntheticUser):
        self.user = user
        self.known: dict[str, np.ndarray] = {}
        self.word_topic = {w: t for t, ws in enumerate(user.topic_words) for w in ws}
        self._rng = np.random.default_rng(12345)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.user.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = self.known.get(t)
            if v is None:
                topics = [
                    self.word_topic[w] for w in t.replace("?", " ").replace(".", " ").split() if w in self.word_topic
                ]
                base = self.user.centroids[topics[0]] if topics else np.zeros(self.user.dim, dtype=np.float32)
                v = base + self._rng.standard_normal(self.user.dim).astype(np.float32) * (
                    0.8 / math.sqrt(self.user.dim)
                )
                v = v / np.linalg.norm(v)
            out[i] = v
        return out


# --- one size, in this process ----------------------------------------------------------


def fill_theanine(tm, user_id: str, u: SyntheticUser, cross_link: float = 0.08) -> dict:
    """Bulk-fill the user's graph and store: memories linked with the engine's rule per component."""
    from memory.theanine import linking
    from memory.theanine.graph import Memory
    from memory.theanine.strategy import KIND

    graph = tm.graph(user_id)
    last_by_topic: dict[int, str] = {}
    pending: dict[int, str] = {}
    rng = random.Random(7)
    ids = []
    for i in range(u.n):
        sid = u.session_of(i)
        if i % SESSION_SIZE == 0:  # a new session: memories of earlier sessions become candidates
            last_by_topic.update(pending)
            pending = {}
        m = Memory(
            id=f"{sid}:m{i % SESSION_SIZE}",
            event=u.texts[i],
            time=u.date_of(i),
            session_id=sid,
            ts=u.date_of(i),
            seq=i + 1,
        )
        graph.add_memory(m)
        related = []
        t = u.topics[i]
        if t in last_by_topic:
            related.append((last_by_topic[t], "SameTopic"))
        if last_by_topic and rng.random() < cross_link:
            other = rng.choice(list(last_by_topic.values()))
            related.append((other, rng.choice(["Cause", "Reason", "React", "Changed"])))
        linking.link(graph, m, related)
        pending[t] = m.id
        ids.append(m.id)
    for a in range(0, u.n, 5000):
        b = min(u.n, a + 5000)
        tm.store.add(
            user_id,
            KIND,
            ids[a:b],
            u.texts[a:b],
            u.vectors[a:b],
            [{"session_id": u.session_of(i), "time": u.date_of(i)} for i in range(a, b)],
        )
    graph.built_sessions.update(u.session_of(i) for i in range(u.n))  # the first timed close writes the file
    return {"edges": graph.g.number_of_edges()}


def run_one(n: int, seed: int, reps: int, secom_retriever: str) -> dict:
    """Fill THEANINE and SeCom for one synthetic user of `n` memories, then time retrieval and linking."""
    from memory.settings import Options
    from memory.store import ChromaStore
    from memory.theanine.strategy import TheanineMemory

    out: dict = {"n": n}
    u = SyntheticUser(n, seed)
    emb = SyntheticEmbedder(u)
    for text, v in zip(u.texts, u.vectors, strict=True):
        emb.known[text] = v
    opts = Options(seed=seed, retriever=secom_retriever)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        store = ChromaStore(path=Path(tmp) / "chroma")
        tm = TheanineMemory(store, emb, Path(tmp), UserLocks())
        user = f"scale-{n}"
        t0 = time.perf_counter()
        info = fill_theanine(tm, user, u)
        out["fill_theanine_s"] = round(time.perf_counter() - t0, 1)
        out["edges"] = info["edges"]
        progress(f"n={n}: THEANINE filled in {out['fill_theanine_s']}s ({info['edges']} edges)")

        secom = _secom(store, emb)
        if secom is not None:
            t0 = time.perf_counter()
            out["segments"] = fill_secom(secom, user, u, seed)
            out["fill_secom_s"] = round(time.perf_counter() - t0, 1)
            progress(f"n={n}: SeCom filled in {out['fill_secom_s']}s")

        rng = random.Random(seed)
        out.update(_time_timelines(tm, user, u, opts, rng, reps))
        out.update(_time_secom(secom, user, u, opts, rng, reps))
        out.update(_time_linking(tm, user, u, emb, opts, rng, reps, seed))
    out["peak_mb"] = common.peak_rss_mb()
    return out


def _time_timelines(tm, user: str, u: SyntheticUser, opts, rng: random.Random, reps: int) -> dict:
    """THEANINE's timeline retrieval (retrieve + untangle), after a few warm-up calls."""
    from memory.trace import Trace

    tl, tl_retrieve, tl_untangle, n_tl = [], [], [], []
    for r in range(reps + 5):
        q, _ = u.query(rng)
        trace = Trace("theanine")
        t0 = time.perf_counter()
        raw = tm.retrieve(user, q, opts, trace)
        dt = time.perf_counter() - t0
        if r >= 5:
            tl.append(dt * 1000)
            tl_retrieve.append(trace.timings.get("theanine_retrieve", 0) * 1000)
            tl_untangle.append(trace.timings.get("theanine_untangle", 0) * 1000)
            n_tl.append(len(raw))
    out = _pcts("timeline", tl)
    out["timeline_store_ms_p50"] = round(common.percentile(tl_retrieve, 50), 2)
    out["timeline_untangle_ms_p50"] = round(common.percentile(tl_untangle, 50), 2)
    out["timeline_untangle_ms_p95"] = round(common.percentile(tl_untangle, 95), 2)
    out["timelines_per_retrieve"] = round(float(np.mean(n_tl)), 2)
    progress(f"n={u.n}: timeline p50 {out['timeline_ms_p50']} ms, p95 {out['timeline_ms_p95']} ms")
    return out


def _time_secom(secom, user: str, u: SyntheticUser, opts, rng: random.Random, reps: int) -> dict:
    """SeCom's retrieval; the first query (which loads the user's BM25 index) is reported apart."""
    from memory.trace import Trace

    if secom is None:
        return {"secom_ms_p50": None, "secom_ms_p95": None}
    out: dict = {}
    sc, n_seg = [], []
    try:
        for r in range(reps + 5):
            q, _ = u.query(rng)
            t0 = time.perf_counter()
            got = secom.retrieve(user, q, opts, Trace("secom"))
            if r == 0:
                out["secom_first_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            if r >= 5:
                sc.append((time.perf_counter() - t0) * 1000)
                n_seg.append(len(got))
    except Exception as e:
        error = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        progress(f"n={u.n}: SeCom retrieval FAILED: {error}")
        return {"secom_ms_p50": None, "secom_ms_p95": None, "secom_error": error}
    out.update(_pcts("secom", sc))
    out["segments_per_retrieve"] = round(float(np.mean(n_seg)), 2)
    progress(f"n={u.n}: secom p50 {out['secom_ms_p50']} ms, p95 {out['secom_ms_p95']} ms")
    return out


def _time_linking(tm, user: str, u: SyntheticUser, emb, opts, rng: random.Random, reps: int, seed: int) -> dict:
    """Linking one new memory (a one-memory session), LLM excluded; the graph store's write is timed apart
    (instrumented, not replaced: the real write runs)."""
    from memory.theanine.graph import Memory
    from memory.trace import Trace

    lk, pairs, lk_cand, lk_save = [], [], [], []
    saves: list[float] = []
    real_save = tm.graphs.save

    def timed_save(*a, **kw):
        t_s = time.perf_counter()
        result = real_save(*a, **kw)
        saves.append((time.perf_counter() - t_s) * 1000)
        return result

    tm.graphs.save = timed_save
    base_day = u.n // SESSION_SIZE + 1
    try:
        for r in range(max(10, reps // 2) + 3):
            topic = u.topics[rng.randrange(u.n)]
            text = f"New {r}: " + " ".join(rng.sample(u.topic_words[topic], 3) + rng.sample(u.common_words, 6))
            emb.known[text] = u.topic_vectors(np.random.default_rng(seed + r), [topic])[0]
            sid = f"n{r:05d}"
            day = f"{1 + r % 28:02d}"
            m = Memory(
                id=f"{sid}:m0",
                event=text,
                time=f"2100-01-{day}",
                session_id=sid,
                ts=f"2100-{1 + (base_day + r) // 28 % 12:02d}-{day}",
            )
            trace = Trace("close")
            t0 = time.perf_counter()
            tm.add_memories(user, sid, [m], None, opts, trace)
            dt = (time.perf_counter() - t0) * 1000
            if r >= 3:
                lk.append(dt)
                pairs.append(opts.j)
                lk_cand.append(trace.timings.get("theanine_link", 0) * 1000)
                lk_save.append(saves[-1])
    finally:
        del tm.graphs.save  # back to the class's method
    out = _pcts("link", lk)
    without_save = [a - b for a, b in zip(lk, lk_save, strict=True)]
    out["link_candidates_ms_p50"] = round(common.percentile(lk_cand, 50), 2)
    out["link_graph_save_ms_p50"] = round(common.percentile(lk_save, 50), 2)
    out["link_without_save_ms_p50"] = round(common.percentile(without_save, 50), 2)
    out["link_without_save_ms_p95"] = round(common.percentile(without_save, 95), 2)
    out["link_llm_pairs"] = int(np.mean(pairs))
    out["link_llm_calls"] = 1
    progress(f"n={u.n}: link p50 {out['link_ms_p50']} ms, p95 {out['link_ms_p95']} ms")
    return out


def _pcts(name: str, xs: list[float]) -> dict:
    return {
        f"{name}_ms_p50": round(common.percentile(xs, 50), 2),
        f"{name}_ms_p95": round(common.percentile(xs, 95), 2),
    }


def _secom(store, embedder):
    try:
        from memory.secom.segmentation import make_segmenter
        from memory.secom.strategy import SecomMemory
    except ImportError as e:
        progress(f"SeCom unavailable: {e}")
        return None
    return SecomMemory(store, embedder, None, "compression off (synthetic keys)", make_segmenter("embedding", embedder))


def fill_secom(secom, user_id: str, u: SyntheticUser, seed: int = 0) -> int:
    """Bulk-fill the same sessions as SeCom segments of 2-4 memories, stored as `SecomMemory.build` stores
    them (key = text without compression, the original text and provenance in the metadata)."""
    from memory.dates import timestamp
    from memory.secom.strategy import KIND

    rng = random.Random(seed)
    ids: list[str] = []
    docs: list[str] = []
    vecs: list = []
    metas: list[dict] = []
    n_seg = 0

    def flush():
        if ids:
            secom.store.add(user_id, KIND, ids, docs, np.asarray(vecs, dtype=np.float32), metas)
            for part in (ids, docs, vecs, metas):
                part.clear()

    for s0 in range(0, u.n, SESSION_SIZE):
        sid, date = u.session_of(s0), u.date_of(s0)
        i, k = s0, 0
        end_session = min(u.n, s0 + SESSION_SIZE)
        while i < end_session:
            j = min(end_session, i + rng.randint(2, 4))
            text = "\n".join(f"user: {u.texts[x]}" for x in range(i, j))
            v = u.vectors[i:j].mean(axis=0)
            ids.append(f"{sid}:seg{k}")
            docs.append(text)
            vecs.append(v / np.linalg.norm(v))
            metas.append(
                {
                    "session_id": sid,
                    "date": date,
                    "date_ts": timestamp(date),
                    "start": i - s0,
                    "end": j - 1 - s0,
                    "text": text,
                    "summary": "",
                    "turn_ids": ",".join(f"{sid}:{x - s0}" for x in range(i, j)),
                    "compression_rate": 1.0,
                }
            )
            i, k, n_seg = j, k + 1, n_seg + 1
        if len(ids) >= 5000:
            flush()
    flush()
    return n_seg


# --- command --------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    p = common.parser("scale", __doc__.split("\n\n")[0], "bench_out/scale.json")
    p.add_argument(
        "--sizes",
        type=common.int_list,
        default=[1000, 10000, 100000],
        help="memories per synthetic user (default 1000,10000,100000)",
    )
    p.add_argument("--reps", type=int, default=200, help="timed calls per operation and size (default 200)")
    p.add_argument(
        "--retriever",
        choices=("bm25", "dense", "hybrid"),
        default="hybrid",
        help="SeCom retriever timed (default hybrid)",
    )
    p.add_argument("--one", type=int, default=None, help=argparse_hidden())
    args = p.parse_args(argv)
    if args.one is not None:  # child mode: one size, JSON on stdout
        print(json.dumps(run_one(args.one, args.seed, args.reps, args.retriever)))
        return 0
    sizes = []
    for n in args.sizes:
        progress(f"size {n}: starting a child process")
        t0 = time.perf_counter()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench",
                "scale",
                "--one",
                str(n),
                "--seed",
                str(args.seed),
                "--reps",
                str(args.reps),
                "--retriever",
                args.retriever,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        if r.returncode != 0:
            progress(f"size {n} failed (exit {r.returncode})")
            return r.returncode
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row["seconds"] = round(time.perf_counter() - t0, 1)
        sizes.append(row)
        progress(f"size {n}: " + ", ".join(f"{k}={v}" for k, v in row.items() if k.endswith(("p50", "p95", "_mb"))))
    out = {
        "sizes": sizes,
        "config": {
            "sizes": args.sizes,
            "reps": args.reps,
            "seed": args.seed,
            "secom_retriever": args.retriever,
            "embeddings": f"synthetic unit vectors, {DIM} dims",
            "session_size": SESSION_SIZE,
            "machine": machine(),
        },
    }
    atomic_write_json(args.out, out)
    from .plots import plot_scale

    png = plot_scale(sizes, common.plot_path(args.out, "scale"))
    print(scale_table(sizes))
    progress(f"wrote {args.out} and {png}")
    return 0


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


# What every size reports: the table's columns (and what the tests check each row has).
TIMED = (
    "n",
    "link_ms_p50",
    "link_ms_p95",
    "timeline_ms_p50",
    "timeline_ms_p95",
    "secom_ms_p50",
    "secom_ms_p95",
    "peak_mb",
)


def scale_table(sizes: list[dict]) -> str:
    cols = list(TIMED)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    for s in sizes:
        lines.append("| " + " | ".join("-" if s.get(c) is None else str(s.get(c)) for c in cols) + " |")
    return "\n".join(lines)
