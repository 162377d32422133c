"""Learn SeCom's segmentation rubric from labelled dialogues (paper, section 4.2), or fit the
offline embedding segmenter's parameters, from a file in DialSeg711 or TIAGE format.

    python -m bench learn rubric --data tiage_train.json --format tiage --out rubric.txt
    python -m bench learn embedding --data tiage_train.json --format tiage --out segmenter.json

Rubric learning: run the LLM segmenter with the current rubric on the training
split, take the dialogues with the highest WindowDiff, show the LLM its
segmentation beside the reference, ask it to reflect and rewrite the rubric,
score the new rubric on the held-out split; repeat. The best rubric is kept.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memory.embeddings import make_embedder
from memory.llm import LLMSession, make_llm
from memory.secom import rubric_prompts
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.exchanges import utterance_exchanges
from memory.secom.llm_segmenter import LLMSegmenter
from memory.settings import Settings
from memory.trace import Trace

from . import seg_metrics
from .segmenter_fit import fit


@dataclass
class Round:
    round: int
    rubric: str
    heldout_score: float
    train_windowdiff: float
    hard: list[str] = field(default_factory=list)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def segment_all(segmenter: LLMSegmenter, llm: LLMSession, dialogues) -> list[list[int]]:
    """Hypothesis boundaries (0/1 per utterance) for each dialogue; each utterance is one unit."""
    out = []
    for d in dialogues:
        segs = segmenter.segment(utterance_exchanges(d.utterances), llm)
        out.append(seg_metrics.boundaries_from_ranges([(s, e) for s, e, _ in segs], len(d.utterances)))
    return out


def learn_rubric(
    llm: LLMSession,
    train,
    heldout,
    fallback: EmbeddingSegmenter,
    rounds: int = 3,
    hard: int = 5,
    initial: str = "",
    progress: Callable[[str], None] = _say,
) -> tuple[str, list[Round]]:
    """Returns the best rubric (by held-out Score) and the log of every round (round 0 = the start)."""

    def score(rubric: str, dialogues) -> tuple[float, list[list[int]]]:
        hyps = segment_all(LLMSegmenter(fallback, rubric), llm, dialogues)
        return seg_metrics.evaluate([d.boundaries for d in dialogues], hyps)["score"], hyps

    rubric = initial
    best_score, _ = score(rubric, heldout)
    best = rubric
    log = [Round(0, rubric, best_score, float("nan"))]
    progress(f"round 0 (start): held-out Score {best_score:.4f}")
    for r in range(1, rounds + 1):
        hyps = segment_all(LLMSegmenter(fallback, rubric), llm, train)
        wds = [seg_metrics.evaluate_one(d.boundaries, h)["windowdiff"] for d, h in zip(train, hyps, strict=False)]
        order = sorted(range(len(train)), key=lambda i: -wds[i])[:hard]
        examples = [
            {
                "texts": train[i].utterances,
                "predicted": seg_metrics.ranges_from_boundaries(hyps[i]),
                "reference": seg_metrics.ranges_from_boundaries(train[i].boundaries),
            }
            for i in order
        ]
        new = llm.json(
            "reflect",
            rubric_prompts.reflect_messages(rubric, examples),
            rubric_prompts.REFLECT_SCHEMA,
            rubric_prompts.validate_rubric,
            functools.partial(str, rubric),
            max_tokens=600,
        )
        s, _ = score(new, heldout)
        log.append(Round(r, new, s, sum(wds) / max(len(wds), 1), [train[i].dial_id for i in order]))
        progress(
            f"round {r}: train WindowDiff {log[-1].train_windowdiff:.4f}, held-out Score {s:.4f}"
            f"{' (best so far)' if s > best_score else ''}\n--- rubric ---\n{new}\n--------------"
        )
        if s > best_score:
            best, best_score = new, s
        rubric = new
    return best, log


def split(dialogues, heldout: float, seed: int, limit: int = 0):
    items = list(dialogues)
    random.Random(seed).shuffle(items)
    if limit:
        items = items[:limit]
    cut = max(1, round(len(items) * heldout))
    return items[cut:], items[:cut]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench learn", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("rubric", "embedding"), help="learn an LLM rubric, or fit the embedding segmenter")
    p.add_argument("--data", required=True)
    p.add_argument("--format", required=True, choices=("dialseg711", "tiage"))
    p.add_argument("--out", required=True, help="rubric: a .txt file; embedding: a .json file of parameters")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hard", type=int, default=5, help="hard examples shown to the LLM per round")
    p.add_argument("--heldout", type=float, default=0.3, help="fraction of dialogues held out for scoring")
    p.add_argument("--limit", type=int, default=0, help="use at most this many dialogues (0 = all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--method",
        default="learned",
        choices=("learned", "texttiling"),
        help="embedding: a logistic model over gap features (default) or TextTiling",
    )
    a = p.parse_args(argv)
    if not (0 < a.heldout < 1) or a.rounds < 0 or a.hard < 1:
        p.error("--heldout must be in (0, 1), --rounds >= 0, --hard >= 1")
    dialogues = seg_metrics.load(a.data, a.format)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.what == "embedding":
        train = dialogues[: a.limit] if a.limit else dialogues
        _say(f"fitting the embedding segmenter ({a.method}) on {len(train)} dialogues")
        params, res = fit(train, make_embedder(), method=a.method, seed=a.seed, progress=_say)
        out.write_text(
            json.dumps(
                {
                    "fitted_on": a.data,
                    "format": a.format,
                    "n_dialogues": len(train),
                    "method": a.method,
                    "params": params.to_dict(),
                    "train": res,
                },
                indent=2,
            )
        )
        _say(
            f"Score {res['score']:.4f} ({res.get('evaluation', 'on the fitting data')}); parameters written to "
            f"{out} (use with SECOM_SEGMENTER_PARAMS={out})"
        )
        return 0
    settings = Settings.from_env()
    if settings.llm.is_bundled:
        _say(
            f"No LLM endpoint is configured: running on the bundled {settings.llm.describe()}. This checks the "
            "plumbing only; set OPENAI_API_KEY or OPENAI_BASE_URL for a rubric worth using."
        )
    train, heldout = split(dialogues, a.heldout, a.seed, a.limit)
    _say(f"{len(train)} training and {len(heldout)} held-out dialogues; {a.rounds} rounds, {a.hard} hard examples each")
    trace = Trace("learn")
    llm = LLMSession(make_llm(settings.llm), trace, temperature=0.3, max_retries=settings.llm.max_retries)
    fallback = EmbeddingSegmenter(make_embedder())
    best, log = learn_rubric(llm, train, heldout, fallback, a.rounds, a.hard)
    out.write_text(best + "\n", encoding="utf-8")
    out.with_suffix(".log.json").write_text(json.dumps([r.__dict__ for r in log], indent=2, ensure_ascii=False))
    _say(
        f"best held-out Score {max(r.heldout_score for r in log):.4f}; rubric written to {out} "
        f"(round log: {out.with_suffix('.log.json')})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
