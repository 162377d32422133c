"""Topic segmentation of a session into runs of exchanges.

* `parse_and_repair` validates an LLM answer (SeCom's JSON lines inside
  `<segmentation>` tags, or `{"segments": [...]}`) and repairs it so that the
  segments cover every exchange exactly once, in order.
* `LLMSegmenter`: SeCom's zero-shot LLM segmentation, through
  `LLMSession.json`; a bad answer is repaired, retried, or falls back to the
  embedding segmenter (recorded in the trace).
* `EmbeddingSegmenter`: the offline default and the fallback. TextTiling on
  sentence embeddings (MiniLM), mixed with lexical overlap; boundaries are the
  deepest similarity valleys above a threshold relative to the dialogue's own
  depth scores, with a minimum segment length. `fit` grid-searches its
  parameters on labelled dialogues.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from ..bm25 import tokenize
from ..llm import Completion, LLMSession
from .prompts import SEGMENTATION_SCHEMA, segmentation_messages

Segment = tuple[int, int, str]  # (start, end) inclusive, 0-based; summary


# --- parsing and repair -------------------------------------------------------

_FENCE = re.compile(r"```(?:jsonl?|json lines)?\s*(.*?)```", re.S)
_START_KEYS = ("start_exchange_number", "start_exchange", "start", "from")
_END_KEYS = ("end_exchange_number", "end_exchange", "end", "to")


_OPEN_TAG = re.compile(r"<\s*segmentation\s*>", re.I)
_CLOSE_TAG = re.compile(r"<\s*/\s*segmentation\s*>", re.I)
_NEXT = re.compile(r"[\[{]|<\s*/\s*segmentation\s*>", re.I)


def _json_objects(text: str, stop_at_close_tag: bool = False) -> list[Any]:
    """Every top-level JSON value in `text` (JSON lines, a list, an object, or prose around them).

    With `stop_at_close_tag`, scanning ends at a `</segmentation>` that lies
    outside any JSON value (a tag inside a JSON string does not end the block).
    """
    dec = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while True:
        m = _NEXT.search(text, i)
        if m is None:
            break
        j = m.start()
        if text[j] == "<":
            if stop_at_close_tag:
                break
            i = m.end()
            continue
        try:
            val, end = dec.raw_decode(text, j)
        except json.JSONDecodeError:
            i = j + 1
            continue
        out.append(val)
        i = end
    return out


def _items(answer: Any) -> list[Any]:
    """The list of segment-like items in an answer of any accepted shape."""
    if answer is None:
        return []
    if isinstance(answer, (bytes, bytearray)):
        answer = answer.decode("utf-8", "replace")
    if isinstance(answer, str):
        text, in_block = answer, False
        m = _OPEN_TAG.search(text)
        if m:
            text, in_block = text[m.end() :], True
        else:
            f = _FENCE.search(text)
            if f:
                text = f.group(1)
        values = _json_objects(text, stop_at_close_tag=in_block)
        items: list[Any] = []
        for v in values:
            items.extend(_items(v) if isinstance(v, (list, dict)) and not _looks_like_segment(v) else [v])
        return items
    if isinstance(answer, dict):
        if _looks_like_segment(answer):
            return [answer]
        for key in ("segments", "segmentation", "result", "output"):
            if key in answer:
                return _items(answer[key])
        lists = [v for v in answer.values() if isinstance(v, list)]
        return _items(lists[0]) if len(lists) == 1 else []
    if isinstance(answer, (list, tuple)):
        out: list[Any] = []
        for v in answer:
            if isinstance(v, (list, tuple)) and len(v) >= 2 and all(not isinstance(x, (dict, list)) for x in v):
                out.append(v)  # [start, end(, summary)]
            elif isinstance(v, dict):
                out.append(v)
            elif isinstance(v, str):
                out.extend(_items(v))
        return out
    return []


def _looks_like_segment(v: Any) -> bool:
    return isinstance(v, dict) and any(k in v for k in _START_KEYS + _END_KEYS)


def _as_int(v: Any) -> int | None:
    """An integer from 3, 3.0, "3", " 3 " or "Exchange 3"; None for anything else (3.5, "three", True)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and v == int(v) else None
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(?:\[?\s*exchange\s*)?(-?\d+)\s*\]?\s*", v, re.I)
        return int(m.group(1)) if m else None
    return None


def _get(d: dict, keys: Sequence[str]) -> Any:
    for k in keys:
        if k in d:
            return d[k]
    return None


def _summary_of(v: Any) -> str:
    if isinstance(v, dict):
        s = v.get("summary", v.get("topic", ""))
    elif isinstance(v, (list, tuple)) and len(v) >= 3:
        s = v[2]
    else:
        s = ""
    s = " ".join(str(s if s is not None else "").split())
    return s[:300]


def repair_segments(answer: Any, n_exchanges: int) -> tuple[list[Segment], bool]:
    """Like `parse_and_repair`, keeping each segment's summary."""
    if n_exchanges <= 0:
        return [], False
    repaired = False
    raw: list[tuple[int, int, str]] = []
    for it in _items(answer):
        if isinstance(it, dict):
            s, e = _as_int(_get(it, _START_KEYS)), _as_int(_get(it, _END_KEYS))
            if e is None and s is not None:
                cnt = _as_int(it.get("num_exchanges"))
                if cnt is not None and cnt > 0:
                    e, repaired = s + cnt - 1, True
        elif isinstance(it, (list, tuple)):
            s, e = _as_int(it[0]), _as_int(it[1])
        else:
            continue
        if s is None or e is None:
            repaired = True  # non-integer or missing numbers: dropped
            continue
        raw.append((s, e, _summary_of(it)))
    if not raw:
        raise ValueError("no segments in the answer")

    # 1-based answers: nothing starts at 0 and something ends at n.
    if min(min(s, e) for s, e, _ in raw) >= 1 and max(max(s, e) for s, e, _ in raw) == n_exchanges:
        raw = [(s - 1, e - 1, t) for s, e, t in raw]
        repaired = True

    clean: list[tuple[int, int, str]] = []
    for s, e, t in raw:
        if s > e:
            s, e, repaired = e, s, True  # reversed
        if e < 0 or s > n_exchanges - 1:
            repaired = True  # entirely out of range: dropped
            continue
        if s < 0 or e > n_exchanges - 1:
            s, e, repaired = max(s, 0), min(e, n_exchanges - 1), True
        clean.append((s, e, t))
    if not clean:
        raise ValueError("every segment in the answer is out of range")
    order = sorted(range(len(clean)), key=lambda i: (clean[i][0], clean[i][1]))
    if order != list(range(len(clean))):
        repaired = True

    out: list[list] = []
    nxt = 0  # first exchange not yet covered
    for i in order:
        s, e, t = clean[i]
        if e < nxt:  # wholly inside earlier segments: drop
            if out and t and not out[-1][2]:
                out[-1][2] = t
            repaired = True
            continue
        if s < nxt:  # overlap: trim the start
            s, repaired = nxt, True
        elif s > nxt:  # gap: the previous segment absorbs it (or this one starts at 0)
            repaired = True
            if out:
                out[-1][1] = s - 1
            else:
                s = 0
        out.append([s, e, t])
        nxt = e + 1
    if nxt < n_exchanges:  # trailing exchanges: the last segment absorbs them
        out[-1][1] = n_exchanges - 1
        repaired = True
    return [(s, e, t) for s, e, t in out], repaired


def parse_and_repair(answer: Any, n_exchanges: int) -> tuple[list[tuple[int, int]], bool]:
    """Validate a segmentation answer and repair it into a cover of 0..n_exchanges-1.

    Accepts SeCom's JSON lines (inside `<segmentation>` tags or not), a JSON list,
    `{"segments": [...]}`, or already-parsed Python values. Returns the
    (start, end) ranges, inclusive and in order, and whether anything had to be
    repaired (gaps filled, overlaps trimmed, out-of-range numbers clipped,
    reversed or non-integer numbers fixed or dropped). Raises ValueError when
    nothing usable is left (e.g. an empty answer), so `LLMSession.json` retries
    or falls back.
    """
    segs, repaired = repair_segments(answer, n_exchanges)
    return [(s, e) for s, e, _ in segs], repaired


def is_valid_cover(ranges: Sequence[tuple], n: int) -> bool:
    nxt = 0
    for r in ranges:
        s, e = int(r[0]), int(r[1])
        if s != nxt or e < s or e > n - 1:
            return False
        nxt = e + 1
    return (nxt == n and n > 0) or (n == 0 and not ranges)


# --- LLM segmenter ----------------------------------------------------------


class _SegmentationAnswers:
    """Wraps an LLM so a SeCom-style answer (JSON lines in tags) reaches LLMSession as one JSON object.

    `LLMSession.json` expects a single JSON value; SeCom's format is several
    lines. Answers that already are one JSON value pass through unchanged.
    """

    def __init__(self, llm):
        self.llm = llm

    def chat(self, messages, *, temperature, max_tokens, json_schema=None) -> Completion:
        c = self.llm.chat(messages, temperature=temperature, max_tokens=max_tokens, json_schema=json_schema)
        text = c.text or ""
        try:
            json.loads(text)
            return c
        except (json.JSONDecodeError, TypeError):
            pass
        items = _items(text)
        if items:
            text = json.dumps({"segments": items})
        return Completion(text, c.prompt_tokens, c.completion_tokens)

    def stream(self, messages, *, temperature, max_tokens):
        return self.llm.stream(messages, temperature=temperature, max_tokens=max_tokens)


class LLMSegmenter:
    """SeCom's zero-shot segmentation by an LLM, validated and repaired; falls back to embeddings.

    `rubric` is optional plain-text guidance inserted as quoted data.
    `fallback` segments when the LLM is unavailable or answers badly twice
    (default: an `EmbeddingSegmenter` on the default embedder, made on first use).
    """

    name = "llm"

    def __init__(self, rubric: str = "", fallback: EmbeddingSegmenter | None = None, max_tokens_each: int = 200):
        self.rubric = rubric or ""
        self._fallback = fallback
        self.max_tokens_each = max_tokens_each

    @property
    def fallback(self) -> EmbeddingSegmenter:
        if self._fallback is None:
            from ..embeddings import make_embedder

            self._fallback = EmbeddingSegmenter(make_embedder())
        return self._fallback

    def segment(
        self, llm_session: LLMSession, exchange_texts: list[str], fallback_texts: list | None = None
    ) -> list[Segment]:
        """Segments of `exchange_texts` as (start, end, summary), always a valid cover.

        `fallback_texts` (same length) is what the embedding fallback reads, if
        different: one string per exchange, or one list of turn texts per
        exchange (then `EmbeddingSegmenter.segment_groups` is used).
        """
        n = len(exchange_texts)
        if n == 0:
            return []
        if n == 1:
            return [(0, 0, _extractive_summary(exchange_texts))]
        repaired_flag: dict[str, bool] = {}

        def validate(raw: Any) -> list[Segment]:
            segs, repaired = repair_segments(raw, n)
            repaired_flag["repaired"] = repaired
            for j, (s, e, t) in enumerate(segs):
                if not t:
                    segs[j] = (s, e, _extractive_summary(exchange_texts[s : e + 1]))
            return segs

        def fallback() -> list[Segment]:
            repaired_flag["fallback"] = True
            texts = fallback_texts if fallback_texts is not None else exchange_texts
            if texts and isinstance(texts[0], (list, tuple)) and hasattr(self.fallback, "segment_groups"):
                return self.fallback.segment_groups([list(g) for g in texts])
            return self.fallback.segment(list(texts))

        session = LLMSession(
            _SegmentationAnswers(llm_session.llm),
            llm_session.trace,
            temperature=min(llm_session.temperature, 0.3),
            max_retries=llm_session.max_retries,
            backoff=llm_session.backoff,
            sleep=llm_session.sleep,
        )
        segs = session.json(
            "segment",
            segmentation_messages(exchange_texts, self.rubric, self.max_tokens_each),
            SEGMENTATION_SCHEMA,
            validate,
            fallback,
            max_tokens=min(4096, 200 + 60 * n),
        )
        call = llm_session.trace.llm_calls[-1] if llm_session.trace.llm_calls else None
        if call is not None and call.purpose == "segment":
            if repaired_flag.get("fallback"):
                call.detail = (call.detail + "; " if call.detail else "") + "used the embedding segmenter"
            elif repaired_flag.get("repaired") and call.status == "ok":
                call.status = "repaired"
        return segs


# --- embedding segmenter ------------------------------------------------------


def _extractive_summary(texts: Sequence[str], embeddings: np.ndarray | None = None, max_words: int = 16) -> str:
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
#   python -m memory.bench segmentation --fit --data tiage_train.json --format tiage --out fit.json
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

    `segment(texts)` takes one string per unit (an utterance or an exchange;
    lines of an exchange separated by "\\n") and returns (start, end, summary)
    segments covering every unit once, in order.
    """

    name = "embedding"

    def __init__(self, embedder, params: SegParams | None = None, **overrides):
        self.embedder = embedder
        self.params = params or SegParams()
        if overrides:
            self.params = SegParams.from_dict({**self.params.to_dict(), **overrides})

    def segment(self, texts: list[str]) -> list[Segment]:
        n = len(texts)
        if n == 0:
            return []
        emb = self.embedder.embed([t if (t or "").strip() else "." for t in texts])
        starts = boundaries_for(texts, emb, self.params) if n > 1 else []
        cuts = [0, *starts, n]
        return [(s, e - 1, _extractive_summary(texts[s:e], emb[s:e])) for s, e in itertools.pairwise(cuts)]

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
            idx = [i for i, o in enumerate(owner) if s <= o < e]
            out.append((s, e - 1, _extractive_summary([units[i] for i in idx], emb[idx])))
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


# --- fitting ------------------------------------------------------------------


def _logistic(X: np.ndarray, y: np.ndarray, l2: float, iters: int = 50) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method on standardised features.

    Returns weights and bias on the *raw* feature scale.
    """
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd < 1e-9, 1.0, sd)
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    w = np.zeros(Z.shape[1])
    reg = np.full(Z.shape[1], float(l2))
    reg[-1] = 0.0  # the bias is not penalised
    for _ in range(iters):
        pr = _sigmoid(Z @ w)
        grad = Z.T @ (pr - y) + reg * w
        hess = (Z * (pr * (1 - pr))[:, None]).T @ Z + np.diag(reg) + 1e-9 * np.eye(Z.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    wr = w[:-1] / sd
    return wr, float(w[-1] - (w[:-1] * mu / sd).sum())


DEFAULT_GRID: dict[str, list] = {
    # learned
    "l2": [0.1, 1.0, 10.0],
    "threshold": [round(0.1 + 0.025 * i, 3) for i in range(21)],  # 0.10 .. 0.60
    "min_len": [1, 2, 3],
    # texttiling
    "window": [1, 2, 3],
    "alpha": [1.0, 0.8],
    "smooth": [0, 1],
    "c": [-0.25, 0.0, 0.25, 0.5, 0.75, 1.0],
    "min_depth": [0.0, 0.05, 0.1],
}


def _hyps(dials, scores_thr, min_len: int, max_len: int = 0) -> list[list[int]]:
    out = []
    for d, (sc, thr) in zip(dials, scores_thr, strict=False):
        n = len(d.utterances)
        h = [0] * n
        for b in select_boundaries(sc, thr, n, min_len, max_len):
            h[b] = 1
        out.append(h)
    return out


def fit(
    labelled_dialogues,
    embedder=None,
    method: str = "learned",
    grid: dict[str, list] | None = None,
    folds: int = 5,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> tuple[SegParams, dict]:
    """Fit `SegParams` on labelled dialogues (objects with `.utterances` and 0/1 `.boundaries`).

    learned: for each L2 strength, logistic weights are fitted on all but one
    fold and the held-out fold is segmented at each (threshold, min_len); the
    combination with the best cross-validated Score wins and the weights are
    refitted on every dialogue. texttiling: a grid search of the TextTiling
    parameters on all dialogues. Returns the parameters and the evaluation
    (cross-validated for learned) at those parameters.
    """
    from .seg_metrics import evaluate

    if embedder is None:
        from ..embeddings import make_embedder

        embedder = make_embedder()
    grid = {**DEFAULT_GRID, **(grid or {})}
    say = progress or (lambda m: None)
    dials = [d for d in labelled_dialogues if len(d.utterances) >= 2]
    if not dials:
        raise ValueError("no labelled dialogue with two or more units")
    flat = [u if (u or "").strip() else "." for d in dials for u in d.utterances]
    all_emb = embedder.embed(flat)
    embs, lexs, pos = [], [], 0
    for d in dials:
        embs.append(all_emb[pos : pos + len(d.utterances)])
        lexs.append(_lexical_sets(d.utterances))
        pos += len(d.utterances)
    refs = [list(d.boundaries) for d in dials]
    best: tuple[float, SegParams | None, dict] = (-1.0, None, {})

    if method == "texttiling":
        for window, alpha, smooth in itertools.product(grid["window"], grid["alpha"], grid["smooth"]):
            base = SegParams(method="texttiling", window=window, alpha=alpha, smooth=smooth)
            depths = [
                depth_scores(_smooth(gap_similarities(d.utterances, e, window, alpha, lx), smooth))
                for d, e, lx in zip(dials, embs, lexs, strict=False)
            ]
            for c, md, ml in itertools.product(grid["c"], grid["min_depth"], grid["min_len"]):
                st = [(dep, max(float(dep.mean() + c * dep.std()), md)) for dep in depths]
                res = evaluate(refs, _hyps(dials, st, ml))
                if res["score"] > best[0]:
                    p = SegParams(**{**base.to_dict(), "c": c, "min_depth": md, "min_len": ml})
                    best = (res["score"], p, res)
                    say(
                        f"score {res['score']:.4f} with window={window} alpha={alpha} smooth={smooth} "
                        f"c={c} min_depth={md} min_len={ml}"
                    )
        assert best[1] is not None
        return best[1], best[2]

    if method != "learned":
        raise ValueError(f"method must be learned or texttiling, not {method!r}")
    feats = [gap_features(d.utterances, e, lx) for d, e, lx in zip(dials, embs, lexs, strict=False)]
    labels = [np.asarray(r[1:], dtype=np.float64) for r in refs]
    order = np.random.default_rng(seed).permutation(len(dials))
    fold_of = np.empty(len(dials), dtype=int)
    fold_of[order] = np.arange(len(dials)) % max(2, folds)
    for l2 in grid["l2"]:
        probs: list[np.ndarray] = [np.zeros(0)] * len(dials)
        for f in range(max(2, folds)):
            train = [i for i in range(len(dials)) if fold_of[i] != f]
            w, b = _logistic(np.vstack([feats[i] for i in train]), np.concatenate([labels[i] for i in train]), l2)
            for i in range(len(dials)):
                if fold_of[i] == f:
                    probs[i] = _sigmoid(feats[i] @ w + b)
        for thr, ml in itertools.product(grid["threshold"], grid["min_len"]):
            res = evaluate(refs, _hyps(dials, [(p, thr) for p in probs], ml))
            if res["score"] > best[0]:
                best = (res["score"], SegParams(l2=l2, threshold=thr, min_len=ml), res)
                say(f"cross-validated score {res['score']:.4f} with l2={l2} threshold={thr} min_len={ml}")
    p = best[1]
    assert p is not None
    w, b = _logistic(np.vstack(feats), np.concatenate(labels), p.l2)
    params = SegParams(
        weights=tuple(round(float(x), 6) for x in w),
        bias=round(b, 6),
        l2=p.l2,
        threshold=p.threshold,
        min_len=p.min_len,
    )
    return params, dict(best[2], evaluation=f"{max(2, folds)}-fold cross-validation on the fitting dialogues")
