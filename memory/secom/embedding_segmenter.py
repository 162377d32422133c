"""The offline segmenter (the default, and the LLM segmenter's fallback).

TextTiling on sentence embeddings (MiniLM), mixed with lexical overlap, or a logistic model over gap
features ("learned", the default, fitted by `bench.secom.segmenter_fit.fit`); boundaries are the best-scoring
gaps above a threshold, with a minimum segment length.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from ..bm25 import tokenize
from .exchanges import Exchange
from .segment_answers import Segment


def extractive_summary(texts: Sequence[str], embeddings: np.ndarray | None = None, max_words: int = 16) -> str:
    """The unit closest to the segment's centroid (or the longest one), cut to `max_words` words."""
    texts = [" ".join((t or "").split()) for t in texts]
    if not texts:
        return ""
    if embeddings is not None and len(embeddings) == len(texts):
        c = embeddings.mean(axis=0)
        best = int(np.argmax(embeddings @ c))
    else:
        best = max(range(len(texts)), key=lambda i: len(tokenize(texts[i], stem=False)))
    words = texts[best].split(" ")
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


# Per-gap features (gap g lies between unit g-1 and unit g; a boundary at g means unit g starts a segment).
FEATURES = (
    "depth1",
    "depth2",
    "depth3",  # TextTiling depth of the window similarity, windows of 1, 2, 3 units
    "dist1",
    "dist2",
    "dist3",  # 1 - cosine(mean of the w units before, mean of the w units after)
    "fwd_back",  # cos(unit g, unit g+1) - cos(unit g-1, unit g): g opens what follows
    "ahead_behind",  # mean cos of unit g with the 2 after it minus with the 2 before it
    "lex_novelty",  # share of content words of units g, g+1 absent from the 3 units before
    "after_question",  # the previous unit's last line asks a question (an answer follows)
)

# Fitted on TIAGE train only (300 dialogues, utterances as units, all-MiniLM-L6-v2):
#   python -m bench learn embedding --data tiage_train.json --format tiage --out fit.json
# L2 strength, probability threshold and minimum segment length chosen by 5-fold cross-validated
# Score (0.5285), then the logistic weights (raw feature scale) refitted on all 300 dialogues.
DEFAULT_WEIGHTS: tuple[float, ...] = (
    -0.122518,
    0.539692,
    1.5217,
    0.556497,
    3.993735,
    -2.559368,
    2.107654,
    -0.176505,
    0.964162,
    -0.951242,
)
DEFAULT_BIAS = -3.898726
DEFAULT_THRESHOLD = 0.325
DEFAULT_L2 = 10.0


@dataclass(frozen=True)
class SegParams:
    """Parameters of `EmbeddingSegmenter`.

    method "learned" (default): a boundary where the logistic score of the gap
    features exceeds `threshold`, deepest first, keeping segments >= `min_len`
    units. method "texttiling": TextTiling depth scores of the `window`
    similarity (mixed with lexical overlap by `alpha`, smoothed by `smooth`),
    a boundary where depth > max(mean + c * std, min_depth). Both split
    segments longer than `max_len` (0 = no limit) at their best gap.
    """

    method: str = "learned"
    threshold: float = DEFAULT_THRESHOLD
    weights: tuple[float, ...] = DEFAULT_WEIGHTS
    bias: float = DEFAULT_BIAS
    l2: float = DEFAULT_L2
    min_len: int = 2
    max_len: int = 0
    window: int = 2
    alpha: float = 1.0
    smooth: int = 0
    c: float = 0.75
    min_depth: float = 0.0

    def __post_init__(self):
        if self.method not in ("learned", "texttiling"):
            raise ValueError(f"method must be learned or texttiling, not {self.method!r}")
        object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        if self.method == "learned" and len(self.weights) != len(FEATURES):
            raise ValueError(f"weights needs {len(FEATURES)} values ({', '.join(FEATURES)})")
        object.__setattr__(self, "min_len", max(1, int(self.min_len)))
        object.__setattr__(self, "max_len", max(0, int(self.max_len)))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["weights"] = list(self.weights)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SegParams:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown segmenter parameters: {', '.join(sorted(unknown))}")
        return cls(**d)


class EmbeddingSegmenter:
    """Offline topic segmentation on sentence embeddings (MiniLM). The default and the LLM fallback.

    `segment_texts(texts)` takes one string per unit (an utterance or an exchange); `segment_groups`
    groups of units that must not be split; both return (start, end, summary) segments covering every
    unit (group) once, in order.
    """

    name = "embedding"

    def __init__(self, embedder, params: SegParams | None = None, **overrides):
        self.embedder = embedder
        self.params = params or SegParams()
        if overrides:
            self.params = SegParams.from_dict({**self.params.to_dict(), **overrides})

    def fingerprint(self, llm=None) -> list:
        return ["embedding", self.params.to_dict()]

    def segment(self, exchanges: Sequence[Exchange], llm=None) -> list[Segment]:
        """Exchanges of several turns are segmented as groups of turns (the unit the parameters were fitted
        on); when every exchange is a single utterance (DialSeg711, TIAGE), the utterances are the units."""
        if all(len(ex) == 1 for ex in exchanges):
            return self.segment_texts([ex[0].text for ex in exchanges])
        return self.segment_groups([[t.text for t in ex] for ex in exchanges])

    def segment_texts(self, texts: list[str]) -> list[Segment]:
        """Segments of units given as one string each."""
        n = len(texts)
        if n == 0:
            return []
        emb = self.embedder.embed([t if (t or "").strip() else "." for t in texts])
        starts = boundaries_for(texts, emb, self.params) if n > 1 else []
        cuts = [0, *starts, n]
        return [(s, e - 1, extractive_summary(texts[s:e], emb[s:e])) for s, e in itertools.pairwise(cuts)]

    def segment_groups(self, groups: list[list[str]]) -> list[Segment]:
        """Segment groups of units (exchanges made of turns) without splitting a group.

        The gap scores are computed on the units (turns), the kind of unit the
        parameters were fitted on; a gap between groups takes the best score of
        the unit gaps it stands for (a topic opened inside an exchange starts a
        segment at the next exchange). `min_len` counts units (so roughly
        min_len / 2 exchanges), `max_len` counts groups.
        """
        m = len(groups)
        if m == 0:
            return []
        units, owner = [], []
        for gi, g in enumerate(groups):
            for u in g or [""]:
                units.append(u)
                owner.append(gi)
        emb = self.embedder.embed([u if (u or "").strip() else "." for u in units])
        starts: list[int] = []
        if m > 1:
            scores, thr = gap_scores(units, emb, self.params)
            gscore = np.full(m - 1, -np.inf)
            for t in range(1, len(units)):
                gi = owner[t] if owner[t] != owner[t - 1] else owner[t] + 1
                if 1 <= gi < m:
                    gscore[gi - 1] = max(gscore[gi - 1], scores[t - 1])
            gscore = np.where(np.isfinite(gscore), gscore, thr - 1.0)
            starts = select_boundaries(gscore, thr, m, max(1, round(self.params.min_len / 2)), self.params.max_len)
        cuts = [0, *starts, m]
        out = []
        for s, e in itertools.pairwise(cuts):
            # Titled by the words that open its exchanges (the user's), not by a reply of the agent's.
            idx = [i for i, o in enumerate(owner) if s <= o < e and (i == 0 or owner[i - 1] != o)]
            out.append((s, e - 1, extractive_summary([units[i] for i in idx], emb[idx])))
        return out


def _lexical_sets(texts: Sequence[str]) -> list[set[str]]:
    return [set(tokenize(t)) for t in texts]


def _window_cos(emb: np.ndarray, window: int) -> np.ndarray:
    """cos(mean of the `window` units before gap g, mean of the `window` units from g), g = 1..n-1."""
    n = len(emb)
    csum = np.vstack([np.zeros((1, emb.shape[1]), dtype=np.float64), np.cumsum(emb, axis=0, dtype=np.float64)])
    out = np.zeros(max(n - 1, 0))
    for g in range(1, n):
        lo, hi = max(0, g - window), min(n, g + window)
        left, right = csum[g] - csum[lo], csum[hi] - csum[g]
        out[g - 1] = left @ right / max(np.linalg.norm(left) * np.linalg.norm(right), 1e-9)
    return out


def gap_similarities(
    texts: Sequence[str], emb: np.ndarray, window: int, alpha: float, lex: list[set[str]] | None = None
) -> np.ndarray:
    """TextTiling similarity across each gap: alpha * window cosine + (1 - alpha) * lexical overlap."""
    sims = _window_cos(emb, window)
    if alpha >= 1.0:
        return sims
    n = len(texts)
    lex = lex if lex is not None else _lexical_sets(texts)
    for g in range(1, n):
        lo, hi = max(0, g - window), min(n, g + window)
        lw, rw = set().union(*lex[lo:g]), set().union(*lex[g:hi])
        overlap = len(lw & rw) / math.sqrt(max(len(lw), 1) * max(len(rw), 1))
        sims[g - 1] = alpha * sims[g - 1] + (1.0 - alpha) * overlap
    return sims


def depth_scores(sims: np.ndarray) -> np.ndarray:
    """TextTiling depth: how far each gap's similarity lies below the peaks on its left and right."""
    m = len(sims)
    depth = np.zeros(m)
    for i in range(m):
        lp = sims[i]
        for j in range(i - 1, -1, -1):
            if sims[j] < lp:
                break
            lp = sims[j]
        rp = sims[i]
        for j in range(i + 1, m):
            if sims[j] < rp:
                break
            rp = sims[j]
        depth[i] = (lp - sims[i]) + (rp - sims[i])
    return depth


def _smooth(x: np.ndarray, half: int) -> np.ndarray:
    if half <= 0 or len(x) < 3:
        return x
    return np.array([x[max(0, i - half) : i + half + 1].mean() for i in range(len(x))])


def _asks(text: str) -> bool:
    lines = [ln for ln in (text or "").split("\n") if ln.strip()]
    return bool(lines) and "?" in lines[-1]


def gap_features(texts: Sequence[str], emb: np.ndarray, lex: list[set[str]] | None = None) -> np.ndarray:
    """The FEATURES of every gap, shape (n - 1, len(FEATURES))."""
    n = len(texts)
    if n < 2:
        return np.zeros((0, len(FEATURES)))
    emb = np.asarray(emb, dtype=np.float64)
    sim = emb @ emb.T
    lex = lex if lex is not None else _lexical_sets(texts)
    cols = []
    wins = [_window_cos(emb, w) for w in (1, 2, 3)]
    cols += [depth_scores(s) for s in wins]
    cols += [1.0 - s for s in wins]
    fb, ab, nov, q = (np.zeros(n - 1) for _ in range(4))
    for g in range(1, n):
        nxt = sim[g, g + 1] if g + 1 < n else sim[g, g - 1]
        fb[g - 1] = nxt - sim[g - 1, g]
        ahead = sim[g, g + 1 : g + 3].mean() if g + 1 < n else sim[g, g - 1]
        ab[g - 1] = ahead - sim[g, max(0, g - 2) : g].mean()
        ctx = set().union(*lex[max(0, g - 3) : g])
        cur = lex[g] | (lex[g + 1] if g + 1 < n else set())
        nov[g - 1] = len(cur - ctx) / max(len(cur), 1)
        q[g - 1] = 1.0 if _asks(texts[g - 1]) else 0.0
    cols += [fb, ab, nov, q]
    return np.stack(cols, axis=1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


def gap_scores(
    texts: Sequence[str], emb: np.ndarray, p: SegParams, lex: list[set[str]] | None = None
) -> tuple[np.ndarray, float]:
    """Per-gap boundary scores and the threshold they must exceed."""
    if p.method == "texttiling":
        depth = depth_scores(_smooth(gap_similarities(texts, emb, p.window, p.alpha, lex), p.smooth))
        thr = max(float(depth.mean() + p.c * depth.std()), p.min_depth) if len(depth) else 0.0
        return depth, thr
    return _sigmoid(gap_features(texts, emb, lex) @ np.asarray(p.weights) + p.bias), p.threshold


def boundaries_for(texts: Sequence[str], emb: np.ndarray, p: SegParams, lex: list[set[str]] | None = None) -> list[int]:
    """Indices (1..n-1) where a new segment starts."""
    n = len(texts)
    if n < 2:
        return []
    scores, thr = gap_scores(texts, emb, p, lex)
    return select_boundaries(scores, thr, n, p.min_len, p.max_len)


def select_boundaries(scores: np.ndarray, threshold: float, n: int, min_len: int = 1, max_len: int = 0) -> list[int]:
    """Best gaps first while above `threshold`, keeping segments >= min_len; then split any > max_len."""
    chosen: list[int] = []
    for gi in np.argsort(-np.asarray(scores), kind="stable"):
        if scores[gi] <= threshold:
            break
        b = int(gi) + 1
        if _fits(b, chosen, n, min_len):
            chosen.append(b)
    if max_len > 0:
        chosen = _split_long(chosen, scores, n, min_len, max_len)
    return sorted(chosen)


def _fits(b: int, chosen: list[int], n: int, min_len: int) -> bool:
    if b < min_len or n - b < min_len:
        return False
    return all(abs(b - c) >= min_len for c in chosen)


def _split_long(chosen: list[int], scores: np.ndarray, n: int, min_len: int, max_len: int) -> list[int]:
    chosen = sorted(chosen)
    while True:
        cuts = [0, *chosen, n]
        long = [(s, e) for s, e in itertools.pairwise(cuts) if e - s > max_len]
        if not long:
            return chosen
        s, e = long[0]
        lo, hi = s + min(min_len, max_len), e - min(min_len, max_len)
        cands = list(range(lo, hi + 1)) or list(range(s + 1, e))
        b = max(cands, key=lambda x: (scores[x - 1], -x))
        chosen = sorted([*chosen, b])
