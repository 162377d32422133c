"""`python -m bench graph`: the THEANINE graph built from LoCoMo's observation facts.

Each observation is a memory (event, session date, its dia_ids as provenance);
memories are linked session by session with the engine's own Phase I (the
configured LLM, or the offline linking rule when none is configured). Then each
question retrieves top-k memories and untangles timelines (Phase II-1). Prints
graph size, edges per relation, timelines per query, and the median and p95
time to retrieve and to untangle per query.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import networkx as nx

from memory.dates import iso_key
from memory.embeddings import make_embedder
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.llm import LLMSession, make_llm
from memory.locks import UserLocks
from memory.locomo_format import observations, questions
from memory.settings import Options, Settings
from memory.store import ChromaStore
from memory.theanine.graph import Memory
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace

from .common import llm_configured, parser, percentile, progress


def build_from_observations(tm: TheanineMemory, user: str, sample: dict, opts: Options, use_llm: bool) -> Trace:
    by_session: dict[str, list] = defaultdict(list)
    for o in observations(sample):
        by_session[o.session].append(o)
    trace = Trace("close")
    llm = LLMSession(make_llm(Settings.from_env().llm), trace, opts.temperature) if use_llm else None
    for sid, obs in sorted(by_session.items(), key=lambda kv: int(kv[0][1:])):
        mems = [
            Memory(
                id=f"{sid}:o{i}",
                event=o.text,
                time=o.date,
                session_id=sid,
                ts=iso_key(o.date),
                turns=o.dia_ids,
                speaker=o.speaker,
            )
            for i, o in enumerate(obs)
        ]
        tm.add_memories(user, sid, mems, llm, opts, trace)
    return trace


def main(argv: list[str]) -> int:
    p = parser("graph", __doc__.splitlines()[0], "bench_out/graph.json")
    p.add_argument("--data", required=True, help="a file in LoCoMo's format")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--n", type=int, default=1)
    p.add_argument("--j", type=int, default=3)
    a = p.parse_args(argv)
    with open(a.data, encoding="utf-8") as f:
        data = json.load(f)
    samples = data if isinstance(data, list) else [data]
    opts = Options(j=a.j, k=a.k, n=a.n, seed=a.seed)
    use_llm = llm_configured()
    embedder = make_embedder("minilm")
    rows, retrieve_ms, untangle_ms, per_query = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tm = TheanineMemory(ChromaStore(path=f"{tmp}/chroma"), embedder, Path(tmp), UserLocks())
        for s in samples:
            user = str(s.get("sample_id", "sample"))
            progress(f"{user}: linking observations ({'LLM' if use_llm else 'offline rule'})")
            build_from_observations(tm, user, s, opts, use_llm)
            g = tm.graph(user)
            comps = list(nx.weakly_connected_components(g.g))
            qs = questions(s)
            progress(f"{user}: {len(g)} memories, {g.g.number_of_edges()} edges; {len(qs)} questions")
            for q in qs:
                t = Trace("theanine")
                raw = tm.retrieve(user, q.question, opts, t)
                retrieve_ms.append(t.timings["theanine_retrieve"] * 1000)
                untangle_ms.append(t.timings["theanine_untangle"] * 1000)
                per_query.append(len(raw))
            rows.append(
                {
                    "sample": user,
                    "memories": len(g),
                    "edges": g.g.number_of_edges(),
                    "components": len(comps),
                    "largest_component": max((len(c) for c in comps), default=0),
                    "edges_per_relation": g.relation_counts(),
                    "questions": len(qs),
                }
            )
    result: dict[str, Any] = {
        "samples": rows,
        "timelines_per_query": {
            "mean": sum(per_query) / max(1, len(per_query)),
            "min": min(per_query, default=0),
            "max": max(per_query, default=0),
        },
        "retrieve_ms": {"p50": percentile(retrieve_ms, 50), "p95": percentile(retrieve_ms, 95)},
        "untangle_ms": {"p50": percentile(untangle_ms, 50), "p95": percentile(untangle_ms, 95)},
        "config": {
            "data": a.data,
            "j": a.j,
            "k": a.k,
            "n": a.n,
            "seed": a.seed,
            "linking": "llm" if use_llm else "offline rule",
            "embedder": embedder.name,
            "machine": machine(),
        },
    }
    atomic_write_json(a.out, result)
    for r in rows:
        rel = ", ".join(f"{k} {v}" for k, v in r["edges_per_relation"].items() if v)
        print(
            f"{r['sample']}: {r['memories']} memories, {r['edges']} edges ({rel}), {r['components']} components "
            f"(largest {r['largest_component']})"
        )
    print(f"timelines per query: mean {result['timelines_per_query']['mean']:.2f}")
    rt = result["retrieve_ms"]
    print(f"retrieve (embed + Chroma top-k) ms: p50 {rt['p50']:.1f}, p95 {rt['p95']:.1f}")
    print(f"untangle ms: p50 {result['untangle_ms']['p50']:.2f}, p95 {result['untangle_ms']['p95']:.2f}")
    return 0
