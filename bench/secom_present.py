"""SeCom's evidence recall as installed and with one thing changed at a time, one build.

    python -m bench secompresent --data ../shared/data/locomo/locomo_dev.json [--segment-max-len 3]
    python -m bench secompresent --data ../shared/data/locomo/locomo_dev.json --variants all

Each conversation's sessions are built by `SecomMemory.build` (offline, as `close_session` builds
them) and every question, alone, is read by `SecomMemory.retrieve` at the installed options: as
installed, and once per variant (`VARIANTS`): the present rule off (BM25 for every question,
chronological order), other BM25 parameters, a segment ranked by its best exchange, other ways of
packing the ranked segments into the budget. The segment length needs a build of its own
(`--segment-max-len`).
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

import memory.secom.bm25_cache as secom_bm25_cache
import memory.secom.strategy as secom_strategy
from memory.agent import MemoryAgent
from memory.bm25 import BM25Index
from memory.evaluation.agent_run import CachedEmbedder
from memory.evaluation.scoring import evidence_recall, mean
from memory.files import atomic_write_json
from memory.fusion import rrf
from memory.packing import pack, pack_anchors_first
from memory.secom.segmentation import segmenter_for
from memory.settings import Settings
from memory.trace import Trace

from . import common
from .common import progress
from .locomo_recall import load

Undo = Callable[[], None]


def _patch(obj, name: str, value) -> Undo:
    old = getattr(obj, name)
    setattr(obj, name, value)
    return lambda: setattr(obj, name, old)


def _present_off(secom) -> Undo:
    return _patch(secom_strategy, "asks_present", lambda _q: False)


def _bm25(k1: float, b: float):
    def apply(secom) -> Undo:
        undo = _patch(secom_bm25_cache, "BM25Index", functools.partial(BM25Index, k1=k1, b=b))
        secom._bm25.invalidate("u")

        def both() -> None:
            undo()
            secom._bm25.invalidate("u")

        return both

    return apply


def _best_exchange(fuse: bool):
    """Rank a segment by the BM25 of its best exchange (one index over every segment's exchanges),
    or by that ranking fused (RRF) with the installed one over whole keys."""

    def apply(secom) -> Undo:
        hits = sorted(secom.store.get("u", secom_strategy.KIND), key=lambda h: h.id)
        owner, texts = [], []
        for i, h in enumerate(hits):
            for piece in secom_strategy.SecomMemory._unit(h, 0.0, {}).pieces:
                owner.append(i)
                texts.append(piece.text)
        idx, owner_ = BM25Index(texts), np.array(owner)
        whole = secom._rank_bm25

        def by_exchange(user_id: str, query: str):
            best = np.full(len(hits), -1.0)
            np.maximum.at(best, owner_, idx.score(query))
            order = np.argsort(-best, kind="stable")[: secom_strategy.CANDIDATES]
            ranked = [(hits[i], float(best[i])) for i in order if best[i] > 0]
            if not fuse:
                return ranked
            installed = whole(user_id, query)
            by_id = {h.id: h for h, _ in installed + ranked}
            fused = rrf([[h.id for h, _ in installed], [h.id for h, _ in ranked]])
            return [(by_id[i], s) for i, s in fused][: secom_strategy.CANDIDATES]

        return _patch(secom, "_rank_bm25", by_exchange)

    return apply


def _packing(fn):
    return lambda secom: _patch(secom_strategy, "pack", fn)


def _at_most(n: int):
    """Every segment cut to at most `n` exchanges around its best-matching one, then packed as installed."""

    def cut(u):
        if len(u.pieces) <= n:
            return u
        a = min(max(u.anchor, 0), len(u.pieces) - 1)
        lo = max(0, min(a - 1, len(u.pieces) - n))
        return dataclasses.replace(u, pieces=u.pieces[lo : lo + n], anchor=a - lo)

    return lambda ranked, budget: pack((cut(u) for u in ranked), budget)


VARIANTS: dict[str, Callable] = {
    "present rule off": _present_off,
    **{f"bm25 k1={k1} b={b}": _bm25(k1, b) for k1, b in [(1.2, 0.3), (1.2, 0.5), (1.2, 0.9), (0.8, 0.75), (1.6, 0.75)]},
    "ranked by the best exchange": _best_exchange(fuse=False),
    "whole key and best exchange fused": _best_exchange(fuse=True),
    "best segment whole, then every segment's best exchange": _packing(
        lambda ranked, budget: pack_anchors_first(ranked, budget, whole_first=1)
    ),
    "every segment's best exchange first": _packing(lambda ranked, budget: pack_anchors_first(ranked, budget)),
    "every segment at most 4 exchanges": _packing(_at_most(4)),
}


def main(argv: list[str]) -> int:
    p = common.parser("secompresent", __doc__.split("\n\n")[0], "bench_out/secom_present.json")
    p.add_argument("--data", required=True, help="a file in LoCoMo's format")
    p.add_argument("--budgets", type=common.int_list, default=[1000, 200])
    p.add_argument("--segment-max-len", type=int, default=None, help="cap segments at this many exchanges")
    p.add_argument(
        "--variants",
        default="present rule off",
        help="'all', or variants separated by ';' (default: 'present rule off'): " + "; ".join(VARIANTS),
    )
    args = p.parse_args(argv)
    names = list(VARIANTS) if args.variants == "all" else [v.strip() for v in args.variants.split(";") if v.strip()]
    if unknown := [v for v in names if v not in VARIANTS]:
        p.error(f"unknown variants {unknown}; choose from: {'; '.join(VARIANTS)}")
    settings = Settings.from_env()
    opts = settings.options.with_(strategy="secom")
    recall: dict[tuple, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-secompresent-") as tmp:
        for conv in load(args.data):
            s = dataclasses.replace(settings, data_dir=Path(tmp) / conv.sample_id, chroma_host="")
            agent = MemoryAgent.from_settings(s)
            secom = agent.secom
            secom.embedder = CachedEmbedder(agent.embedder)
            extra = {"max_len": args.segment_max_len} if args.segment_max_len else {}
            secom.segmenter = segmenter_for(s, secom.embedder, **extra)
            for sess in conv.sessions:
                secom.build("u", sess, None, opts, Trace("build"))
            progress(f"{conv.sample_id}: {secom.count('u')} segments")
            for variant in ["installed", *names]:
                undo = VARIANTS[variant](secom) if variant in VARIANTS else (lambda: None)
                try:
                    for q in conv.questions:
                        for bud in args.budgets:
                            segs = secom.retrieve("u", q.question, opts.with_(budget=bud), Trace("secom"))
                            covered = {t for d in segs for t in d["covers"]}
                            recall[(variant, bud)].append(evidence_recall(q.evidence, covered))
                finally:
                    undo()
    rows = [{"variant": v, "budget": b, "recall": mean(xs), "n": len(xs)} for (v, b), xs in recall.items()]
    atomic_write_json(args.out, {"results": rows, "config": {"data": args.data, **vars(args)}})
    print("| SeCom | " + " | ".join(f"@{b}" for b in args.budgets) + " |")
    print("| --- | " + " | ".join("---:" for _ in args.budgets) + " |")
    for v in ["installed", *names]:
        print(f"| {v} | " + " | ".join(f"{mean(recall[(v, b)]):.3f}" for b in args.budgets) + " |")
    return 0
