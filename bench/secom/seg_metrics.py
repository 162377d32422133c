"""Dialogue segmentation metrics and dataset loaders (DialSeg711, TIAGE).

A segmentation of n units is a 0/1 list of length n: position i is 1 when a new
segment starts at unit i (position 0 is always 0). Metrics, as in the SeCom
paper and the DialSTART/CSM line of work:

* Pk and WindowDiff from nltk with k = max(2, round(n / (2 * reference segments))),
  lower is better;
* boundary F1: exact boundary positions, precision and recall over predicted and
  reference boundaries (1.0 when neither has any);
* Score = 0.5 * F1 + 0.25 * (1 - Pk) + 0.25 * (1 - WD).

Corpus figures are means over dialogues.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LabelledDialogue:
    dial_id: str
    utterances: list[str]
    boundaries: list[int]  # 0/1 per utterance; 1 = a new segment starts here

    @property
    def n_segments(self) -> int:
        return 1 + sum(self.boundaries[1:])

    def segment_lengths(self) -> list[int]:
        return lengths_from_boundaries(self.boundaries)


# --- conversions --------------------------------------------------------------


def boundaries_from_lengths(lengths: Sequence[int]) -> list[int]:
    out: list[int] = []
    for length in lengths:
        if length <= 0:
            continue
        out.extend([1] + [0] * (int(length) - 1))
    if out:
        out[0] = 0
    return out


def boundaries_from_ranges(ranges: Sequence[tuple], n: int) -> list[int]:
    """From (start, end[, ...]) segments (inclusive, 0-based) to a 0/1 list of length n."""
    out = [0] * n
    for r in ranges:
        s = int(r[0])
        if 0 < s < n:
            out[s] = 1
    return out


def ranges_from_boundaries(boundaries: Sequence[int]) -> list[tuple[int, int]]:
    n = len(boundaries)
    starts = [0] + [i for i in range(1, n) if boundaries[i]]
    return [(s, (starts[j + 1] - 1) if j + 1 < len(starts) else n - 1) for j, s in enumerate(starts)] if n else []


def lengths_from_boundaries(boundaries: Sequence[int]) -> list[int]:
    return [e - s + 1 for s, e in ranges_from_boundaries(boundaries)]


# --- loaders ------------------------------------------------------------------


def load_dialseg711(path: str | Path) -> list[LabelledDialogue]:
    """DialSeg711 as a JSON list of {"dial_id", "utterances", "segments": [segment lengths]}."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out: list[LabelledDialogue] = []
    for d in data:
        utts = [str(u) for u in d["utterances"]]
        b = boundaries_from_lengths(d["segments"])
        if len(b) != len(utts):
            raise ValueError(
                f"dialogue {d.get('dial_id')}: segment lengths sum to {len(b)}, but there are {len(utts)} utterances"
            )
        out.append(LabelledDialogue(str(d.get("dial_id", len(out))), utts, b))
    return out


def load_tiage(path: str | Path) -> list[LabelledDialogue]:
    """TIAGE as {dialogue id: [[utterance, label], ...]}; label "1" = a new topic starts here."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    items = data.items() if isinstance(data, dict) else enumerate(data)
    out = []
    for key, turns in items:
        utts = [str(u) for u, _ in turns]
        b = [1 if str(lab).strip() == "1" else 0 for _, lab in turns]
        if b:
            b[0] = 0
        out.append(LabelledDialogue(str(key), utts, b))
    return out


LOADERS = {"dialseg711": load_dialseg711, "tiage": load_tiage}


def load(path: str | Path, fmt: str) -> list[LabelledDialogue]:
    if fmt not in LOADERS:
        raise ValueError(f"format must be one of {', '.join(LOADERS)}, not {fmt!r}")
    return LOADERS[fmt](path)


# --- metrics ------------------------------------------------------------------


def window_k(reference: Sequence[int]) -> int:
    n_segments = 1 + sum(reference[1:])
    return max(2, round(len(reference) / (2 * n_segments)))


def _as_str(seq: Sequence[int]) -> str:
    return "".join("1" if x else "0" for x in seq)


def pk(reference: Sequence[int], hypothesis: Sequence[int], k: int | None = None) -> float:
    from nltk.metrics.segmentation import pk as nltk_pk

    k = window_k(reference) if k is None else k
    k = min(k, len(reference))
    return float(nltk_pk(_as_str(reference), _as_str(hypothesis), k=k, boundary="1"))


def windowdiff(reference: Sequence[int], hypothesis: Sequence[int], k: int | None = None) -> float:
    from nltk.metrics.segmentation import windowdiff as nltk_wd

    k = window_k(reference) if k is None else k
    k = min(k, len(reference))
    return float(nltk_wd(_as_str(reference), _as_str(hypothesis), k, boundary="1"))


def boundary_prf(reference: Sequence[int], hypothesis: Sequence[int]) -> tuple[float, float, float]:
    ref = {i for i, x in enumerate(reference) if x and i > 0}
    hyp = {i for i, x in enumerate(hypothesis) if x and i > 0}
    if not ref and not hyp:
        return 1.0, 1.0, 1.0
    tp = len(ref & hyp)
    p = tp / len(hyp) if hyp else 0.0
    r = tp / len(ref) if ref else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def score_of(f1: float, pk_: float, wd: float) -> float:
    return 0.5 * f1 + 0.25 * (1 - pk_) + 0.25 * (1 - wd)


def evaluate_one(reference: Sequence[int], hypothesis: Sequence[int]) -> dict:
    if len(reference) != len(hypothesis):
        raise ValueError(f"reference has {len(reference)} units, hypothesis {len(hypothesis)}")
    if len(reference) < 2:
        return {"pk": 0.0, "windowdiff": 0.0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "score": 1.0}
    p_, r_, f_ = boundary_prf(reference, hypothesis)
    k = window_k(reference)
    a, w = pk(reference, hypothesis, k), windowdiff(reference, hypothesis, k)
    return {"pk": a, "windowdiff": w, "precision": p_, "recall": r_, "f1": f_, "score": score_of(f_, a, w)}


def evaluate(references: Sequence[Sequence[int]], hypotheses: Sequence[Sequence[int]]) -> dict:
    """Mean Pk, WindowDiff, precision, recall and F1 over dialogues; Score from the means."""
    if len(references) != len(hypotheses):
        raise ValueError("as many hypotheses as references are needed")
    rows = [evaluate_one(r, h) for r, h in zip(references, hypotheses, strict=False)]
    n = max(len(rows), 1)
    out = {m: sum(r[m] for r in rows) / n for m in ("pk", "windowdiff", "precision", "recall", "f1")}
    out["score"] = score_of(out["f1"], out["pk"], out["windowdiff"])
    out["n_dialogues"] = len(rows)
    out["predicted_boundaries_per_dialogue"] = sum(sum(h[1:]) for h in hypotheses) / n
    out["reference_boundaries_per_dialogue"] = sum(sum(r[1:]) for r in references) / n
    return out


# --- baselines ----------------------------------------------------------------


def baseline_no_boundary(n: int) -> list[int]:
    return [0] * n


def baseline_every_utterance(n: int) -> list[int]:
    return [0] + [1] * (n - 1) if n else []


def baseline_even(n: int, segment_length: float) -> list[int]:
    """Boundaries every `segment_length` units (rounded), e.g. the corpus's mean segment length."""
    out = [0] * n
    step = max(float(segment_length), 1.0)
    pos = step
    while round(pos) < n:
        out[round(pos)] = 1
        pos += step
    return out


def baselines(dialogues: Sequence[LabelledDialogue]) -> dict:
    refs = [d.boundaries for d in dialogues]
    total_units = sum(len(r) for r in refs)
    total_segments = sum(d.n_segments for d in dialogues)
    mean_len = total_units / max(total_segments, 1)
    return {
        "no_boundary": evaluate(refs, [baseline_no_boundary(len(r)) for r in refs]),
        "every_utterance": evaluate(refs, [baseline_every_utterance(len(r)) for r in refs]),
        "even": dict(evaluate(refs, [baseline_even(len(r), mean_len) for r in refs]), segment_length=mean_len),
    }
