"""SeCom's evidence recall with its present rule on and off (`memory/secom/present.py`), one build.

    python -m bench secompresent --data ../shared/data/locomo/locomo_dev.json [--segment-max-len 3]

Each conversation's sessions are built by `SecomMemory.build` (offline, as `close_session` builds
them) and every question, alone, is read by `SecomMemory.retrieve` at the installed options: once as
installed, once with no question taken as one about the present (BM25 alone, chronological order).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections import defaultdict
from pathlib import Path

import memory.secom.strategy as secom_strategy
from memory.agent import MemoryAgent
from memory.evaluation.agent_run import CachedEmbedder
from memory.evaluation.scoring import evidence_recall, mean
from memory.files import atomic_write_json
from memory.secom.segmentation import segmenter_for
from memory.settings import Settings
from memory.trace import Trace

from . import common
from .common import progress
from .locomo_recall import load


def main(argv: list[str]) -> int:
    p = common.parser("secompresent", __doc__.split("\n\n")[0], "bench_out/secom_present.json")
    p.add_argument("--data", required=True, help="a file in LoCoMo's format")
    p.add_argument("--budgets", type=common.int_list, default=[1000, 200])
    p.add_argument("--segment-max-len", type=int, default=None, help="cap segments at this many exchanges")
    args = p.parse_args(argv)
    settings = Settings.from_env()
    opts = settings.options.with_(strategy="secom")
    rule = secom_strategy.asks_present
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
            try:
                for variant, present in (("installed", rule), ("present rule off", lambda _q: False)):
                    secom_strategy.asks_present = present
                    for q in conv.questions:
                        for bud in args.budgets:
                            segs = secom.retrieve("u", q.question, opts.with_(budget=bud), Trace("secom"))
                            covered = {t for d in segs for t in d["covers"]}
                            recall[(variant, bud)].append(evidence_recall(q.evidence, covered))
            finally:
                secom_strategy.asks_present = rule
    rows = [{"variant": v, "budget": b, "recall": mean(xs), "n": len(xs)} for (v, b), xs in recall.items()]
    atomic_write_json(args.out, {"results": rows, "config": {"data": args.data, **vars(args)}})
    print("| SeCom | " + " | ".join(f"@{b}" for b in args.budgets) + " |")
    print("| --- | " + " | ".join("---:" for _ in args.budgets) + " |")
    for v in ("installed", "present rule off"):
        print(f"| {v} | " + " | ".join(f"{mean(recall[(v, b)]):.3f}" for b in args.budgets) + " |")
    return 0
