"""Reciprocal-rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): one ranking from several."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

RRF_K = 60  # the paper's constant: damps the weight of the very first ranks


def rrf(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Items of every ranking (best first), each scored sum(1 / (k + rank)), best first; ties by item."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for r, item in enumerate(ranking):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + r + 1)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
