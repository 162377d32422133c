"""bm25 / dense / hybrid ranking of a fixed list of retrieval keys, deterministic on ties."""

from __future__ import annotations

import numpy as np

from ..bm25 import BM25Index
from ..fusion import RRF_K


def rrf(*scores: np.ndarray, k: float = 60.0) -> np.ndarray:
    """Reciprocal-rank fusion of several score vectors over the same items."""
    out = np.zeros(len(scores[0]), dtype=np.float64)
    for s in scores:
        order = np.argsort(-np.asarray(s, dtype=np.float64), kind="stable")
        ranks = np.empty(len(order), dtype=np.float64)
        ranks[order] = np.arange(1, len(order) + 1)
        out += 1.0 / (k + ranks)
    return out


def fuse(bm25: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """Hybrid score: reciprocal-rank fusion with SeCom's constant, as `SecomMemory.rank` fuses."""
    return rrf(bm25, dense, k=RRF_K)


def order_by(scores: np.ndarray) -> list[int]:
    """Indices best first; ties keep the earlier unit first (deterministic)."""
    s = np.asarray(scores, dtype=np.float64)
    return [int(i) for i in np.lexsort((np.arange(len(s)), -s))]


class Ranker:
    """bm25 / dense / hybrid ranking of a fixed list of retrieval keys (the baselines' units)."""

    def __init__(self, keys: list[str], embedder, vectors: np.ndarray | None = None):
        self.bm25 = BM25Index(keys)
        self.vectors = vectors if vectors is not None else embedder.embed(keys)

    def scores(self, retriever: str, question: str, qvec: np.ndarray) -> np.ndarray:
        if retriever == "bm25":
            return self.bm25.score(question)
        dense = self.vectors @ qvec
        if retriever == "dense":
            return dense
        return fuse(self.bm25.score(question), dense)

    def rank(self, retriever: str, question: str, qvec: np.ndarray) -> list[int]:
        return order_by(self.scores(retriever, question, qvec))
