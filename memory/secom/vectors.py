"""A segment's dense vectors, made from the whole segment.

MiniLM (the offline embedder) reads at most 256 word pieces, so one embedding of a long segment
is an embedding of its start. A segment is instead embedded in *parts*: one per exchange (a turn
and the replies to it, found from the "Speaker: " lines of the key as `records.exchanges` groups
turns), an exchange longer than `PART_TOKENS` cut into consecutive windows of at most that many
tokens, each read whole. The segment's own vector is the normalised mean of its parts' vectors, and
a dense search scores a segment by `mixed_score`: half its best part's cosine (a specific exchange
that matches), half its mean vector's (the segment's topic as a whole). The vectors depend on the
key alone, so a segment stored before them (metadata without `"vector": SCHEME`) is re-embedded from
its stored key (`SecomMemory` does it on its first dense search of the user).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..tokens import count_tokens

SCHEME = "exchange-mean"  # recorded in each segment's metadata ("vector")
# MiniLM reads 256 word pieces ([CLS] and [SEP] included); cl100k tokens of English run a little below
# word pieces, so parts of at most 200 tokens are read whole.
PART_TOKENS = 200
_SPEAKER = re.compile(r"^([^:\n]{1,40}):\s")


def _exchanges(lines: list[str]) -> list[list[str]]:
    """Lines grouped as `records.exchanges` groups turns: a new exchange starts when the speaker who
    opened the current one speaks again after a reply. A line without a "Speaker: " prefix continues
    the current turn; where no line names a speaker (utterances of a dataset without speakers), each
    line is an exchange of its own."""
    out: list[list[str]] = []
    opener: str | None = None
    for line in lines:
        m = _SPEAKER.match(line)
        who = m.group(1).strip() if m else None
        if who is None:
            if out and opener is not None:
                out[-1].append(line)  # a turn of several lines
            else:
                out.append([line])
            continue
        if not out or opener is None or (who == opener and len(out[-1]) > 1):
            out.append([line])
            opener = who
        else:
            out[-1].append(line)
    return out


def _windows(text: str, max_tokens: int) -> list[str]:
    """`text` as consecutive runs of whole words of at most `max_tokens` tokens each (a longer word alone)."""
    if count_tokens(text) <= max_tokens:
        return [text]
    out: list[str] = []
    cur: list[str] = []
    used = 0
    for word in text.split():
        n = count_tokens(" " + word)
        if cur and used + n > max_tokens:
            out.append(" ".join(cur))
            cur, used = [], 0
        cur.append(word)
        used += n
    if cur:
        out.append(" ".join(cur))
    return out


def key_parts(key: str, max_tokens: int = PART_TOKENS) -> list[str]:
    """The parts a segment's key is embedded in: one per exchange, each cut to at most `max_tokens` tokens."""
    lines = [ln for ln in (key or "").split("\n") if ln.strip()]
    parts = [w for ex in _exchanges(lines) for w in _windows("\n".join(ex), max_tokens)]
    return parts or [key or ""]


@dataclass
class Embedded:
    """The dense vectors of some segments' keys."""

    vectors: np.ndarray  # one per key: the normalised mean of its parts' vectors
    parts: list[list[str]]  # per key, its parts (key_parts)
    part_vectors: list[np.ndarray]  # per key, one normalised vector per part


def embed_segments(embedder, keys: list[str]) -> Embedded:
    """Every key's parts embedded in one call, and each key's mean vector."""
    parts = [key_parts(k) for k in keys]
    flat = [p for ps in parts for p in ps]
    if not flat:
        return Embedded(np.zeros((0, 0), dtype=np.float32), [], [])
    vecs = np.asarray(embedder.embed(flat), dtype=np.float32)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    means, per, i = [], [], 0
    for ps in parts:
        pv = vecs[i : i + len(ps)]
        i += len(ps)
        v = pv.mean(axis=0)
        means.append(v / max(float(np.linalg.norm(v)), 1e-12))
        per.append(pv)
    return Embedded(np.stack(means).astype(np.float32), parts, per)


def segment_vectors(embedder, keys: list[str]) -> np.ndarray:
    """One vector per key: the normalised mean of its parts' vectors."""
    return embed_segments(embedder, keys).vectors


BEST_PART_WEIGHT = 0.5  # not tuned: the best part and the whole count the same


def mixed_score(best_part: float, mean: float) -> float:
    """A segment's dense score from its best part's cosine and its mean vector's cosine."""
    return BEST_PART_WEIGHT * best_part + (1.0 - BEST_PART_WEIGHT) * mean
