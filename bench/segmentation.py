"""Dialogue segmentation: Pk, WindowDiff, boundary F1 and Score of a SeCom segmenter.

    python -m bench segmentation --data dialseg711_dev.json --format dialseg711 --out results/seg.json
        [--segmenter embedding|llm] [--params fitted.json] [--limit N] [--seed S]

Each dialogue's utterances are the units (as in DialSeg711 and TIAGE). Metrics
(`bench.secom.seg_metrics`): nltk's pk and windowdiff with
k = max(2, round(n / (2 * reference segments))), exact boundary F1, and
Score = 0.5 F1 + 0.25 (1 - Pk) + 0.25 (1 - WD), means over dialogues. Baselines:
no boundary, a boundary before every utterance, and boundaries every m
utterances (m = the file's mean segment length). `--params` evaluates with
parameters fitted by `python -m bench learn embedding` (on a *training* file).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.secom.exchanges import utterance_exchanges

from . import common
from .common import progress
from .secom import seg_metrics as M


def _segmenter(kind: str, params_path: str, rubric_path: str):
    from memory.embeddings import make_embedder
    from memory.secom.embedding_segmenter import SegParams
    from memory.secom.segmentation import make_segmenter

    params = SegParams.from_dict(json.loads(Path(params_path).read_text())["params"]) if params_path else None
    rubric = Path(rubric_path).read_text(encoding="utf-8") if rubric_path else ""
    segmenter = make_segmenter(kind, make_embedder(), params, rubric)
    if kind == "embedding":
        return segmenter, None
    from memory.llm import LLMSession, make_llm
    from memory.settings import Settings
    from memory.trace import Trace

    settings = Settings.from_env()
    trace = Trace("segmentation")
    return segmenter, (
        LLMSession(make_llm(settings.llm), trace, 0.0, settings.llm.max_retries),
        settings.llm.describe(),
    )


def main(argv: list[str]) -> int:
    p = common.parser("segmentation", __doc__.split("\n\n")[0], "results/segmentation.json")
    p.add_argument("--data", required=True, help="DialSeg711 or TIAGE file (JSON)")
    p.add_argument("--format", required=True, choices=sorted(M.LOADERS), help="dataset format")
    p.add_argument(
        "--segmenter",
        default="embedding",
        choices=("embedding", "llm"),
        help="embedding (offline, default) or llm (the configured LLM; falls back to embedding)",
    )
    p.add_argument(
        "--params",
        default="",
        help="JSON written by `python -m bench learn embedding` (default: the built-in fitted params)",
    )
    p.add_argument("--rubric", default="", help="plain-text rubric for the LLM segmenter")
    p.add_argument("--limit", type=int, default=0, help="use only N dialogues (sampled with --seed)")
    args = p.parse_args(argv)

    dials = M.load(args.data, args.format)
    if args.limit and args.limit < len(dials):
        dials = random.Random(args.seed).sample(dials, args.limit)
    progress(f"{len(dials)} dialogues from {args.data}")

    segmenter, llm = _segmenter(args.segmenter, args.params, args.rubric)
    refs, hyps = [], []
    t0 = time.perf_counter()
    for i, d in enumerate(dials):
        segs = segmenter.segment(utterance_exchanges(d.utterances), llm[0] if llm else None)
        refs.append(d.boundaries)
        hyps.append(M.boundaries_from_ranges(segs, len(d.utterances)))
        if (i + 1) % (20 if llm is None else 1) == 0 or i + 1 == len(dials):
            part = M.evaluate(refs, hyps)
            progress(f"{i + 1}/{len(dials)} dialogues, running Score {part['score']:.4f}")
            if llm is not None and i + 1 < len(dials):  # an LLM run is slow: what it scored so far survives a stop
                atomic_write_json(args.out, _result(args, segmenter, llm, dials[: i + 1], refs, hyps, t0))
    out = _result(args, segmenter, llm, dials, refs, hyps, t0)
    atomic_write_json(args.out, out)
    png = _plot(out, common.plot_path(args.out, "scores"), Path(args.data).stem)
    progress(
        f"Score {out['score']:.4f}  Pk {out['pk']:.4f}  WD {out['windowdiff']:.4f}  F1 {out['f1']:.4f}; "
        f"wrote {args.out} and {png}"
    )
    return 0


def _result(args, segmenter, llm, dials, refs, hyps, t0) -> dict:
    """The scores of the dialogues segmented so far (`dials`, their references and hypotheses)."""
    seconds = time.perf_counter() - t0
    res = M.evaluate(refs, hyps)
    base = M.baselines(dials)
    out = {
        "segmenter": args.segmenter if llm is None else f"llm ({llm[1]})",
        "params": segmenter.params.to_dict(),
        "data": str(args.data),
        "format": args.format,
        "pk": res["pk"],
        "windowdiff": res["windowdiff"],
        "f1": res["f1"],
        "score": res["score"],
        "precision": res["precision"],
        "recall": res["recall"],
        "predicted_boundaries_per_dialogue": res["predicted_boundaries_per_dialogue"],
        "reference_boundaries_per_dialogue": res["reference_boundaries_per_dialogue"],
        "n_dialogues": res["n_dialogues"],
        "seconds": round(seconds, 2),
        "baselines": base,
        "machine": machine(),
        "metric": "means over dialogues; nltk pk/windowdiff, k = max(2, round(n / (2 * reference segments))); "
        "Score = 0.5 F1 + 0.25 (1 - Pk) + 0.25 (1 - WD)",
    }
    if llm is not None:
        calls = llm[0].trace.llm_calls
        out["llm_calls"] = len(calls)
        out["llm_fallbacks"] = sum(c.status == "fallback" for c in calls)
        out["llm_repaired"] = sum(c.status == "repaired" for c in calls)
    return out


def _plot(out: dict, path: Path, title: str) -> Path:
    from .plots import plot_bars

    names = [out["segmenter"].split(" ")[0], *list(out["baselines"])]
    rows = [out] + [out["baselines"][b] for b in out["baselines"]]
    series = {m: [round(float(r[m]), 3) for r in rows] for m in ("score", "f1", "pk", "windowdiff")}
    return plot_bars(names, series, path, f"Segmentation on {title} (Score, F1 higher; Pk, WD lower)", "value")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
