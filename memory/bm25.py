"""Okapi BM25 over an inverted index, built once over a fixed list of documents.

Shared by SeCom (ranking compressed segment keys, one index per user, rebuilt from
the store after a change) and the benchmarks (turn and session retrieval). The
build is vectorised (the postings of every term sorted in one `np.unique`) and
stores each posting's length-normalised term weight, so a query costs
O(postings of its terms), not O(documents). A changed corpus is a new index: there
is no incremental add (`python -m bench bm25` measured why: docs/benchmarks.md, section 6).

    idx = BM25Index(["I adopted a cat", "We went hiking"])
    scores = idx.score("my cat")          # np.ndarray, one score per document
    best = idx.top(query, n=5)            # [(doc_index, score)], best first
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

# A plain English stop-word list (articles, pronouns, auxiliaries, prepositions,
# conjunctions). Kept here so no corpus download is needed.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "couldn",
        "did",
        "didn",
        "do",
        "does",
        "doesn",
        "doing",
        "don",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn",
        "has",
        "hasn",
        "have",
        "haven",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "isn",
        "it",
        "its",
        "itself",
        "just",
        "ll",
        "me",
        "more",
        "most",
        "mustn",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "re",
        "s",
        "same",
        "shan",
        "she",
        "should",
        "shouldn",
        "so",
        "some",
        "such",
        "t",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "ve",
        "very",
        "was",
        "wasn",
        "we",
        "were",
        "weren",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "won",
        "would",
        "wouldn",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "d",
        "m",
        "o",
        "y",
        "also",
        "oh",
        "yeah",
        "yes",
        "ok",
        "okay",
    ]
)

_WORD = re.compile(r"\w+", re.UNICODE)


@functools.lru_cache(maxsize=1)
def _stemmer():
    try:
        from nltk.stem.porter import PorterStemmer
    except ImportError:  # nltk is in requirements.txt; without it we simply do not stem
        return None
    return PorterStemmer()


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    s = _stemmer()
    return s.stem(word) if s is not None else word


def tokenize(text: str, stem: bool = True) -> list[str]:
    """Lowercase word tokens without English stop words (Porter-stemmed by default)."""
    words = [w for w in _WORD.findall((text or "").lower()) if w not in STOPWORDS and w != "_"]
    return [_stem(w) for w in words] if stem else words


class BM25Index:
    """Okapi BM25 (k1, b) with Lucene's non-negative idf: log(1 + (N - df + 0.5) / (df + 0.5)).

    Built over `documents` (tokenised here) or over `tokens` (documents already tokenised,
    the same way queries will be); a document's index is its position. `score` returns a
    float32 array over all documents. Immutable once built, so any thread may query it.
    """

    def __init__(
        self,
        documents: Iterable[str] = (),
        k1: float = 1.2,
        b: float = 0.75,
        stem: bool = True,
        *,
        tokens: Iterable[Sequence[str]] | None = None,
    ):
        self.k1, self.b, self.stem = float(k1), float(b), stem
        docs = [tokenize(d, stem) for d in documents] if tokens is None else list(tokens)
        n = self._n = len(docs)
        m = max(n, 1)
        lens = np.fromiter(map(len, docs), dtype=np.int64, count=n)
        self._vocab: dict[str, int] = {t: i for i, t in enumerate(dict.fromkeys(chain.from_iterable(docs)))}
        key = np.fromiter(
            map(self._vocab.__getitem__, chain.from_iterable(docs)), dtype=np.int64, count=int(lens.sum())
        )
        key *= m
        key += np.repeat(np.arange(n, dtype=np.int64), lens)  # term * n + document, per token
        # One sort gives every term's postings: (term, document) pairs in order, with their counts.
        pairs, tf = np.unique(key, return_counts=True)
        del key
        df = np.bincount(pairs // m, minlength=len(self._vocab))
        self._start = np.concatenate(([0], np.cumsum(df)))  # term t's postings: [_start[t], _start[t + 1])
        self._doc = (pairs % m).astype(np.int32)
        norm = self.k1 * (1.0 - self.b + self.b * lens / max(float(lens.sum()) / m, 1e-9))
        tf = tf.astype(np.float32)
        self._weight = (tf * (self.k1 + 1.0) / (tf + norm[self._doc])).astype(np.float32)
        self._idf = np.log1p((n - df + 0.5) / (df + 0.5))

    def __len__(self) -> int:
        return self._n

    def idf(self, term: str) -> float:
        tid = self._vocab.get(term)
        return float(self._idf[tid]) if tid is not None else math.log(1.0 + (self._n + 0.5) / 0.5)

    def score(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (zeros when nothing matches)."""
        return self.score_tokens(tokenize(query, self.stem))

    def score_tokens(self, query_tokens: list[str]) -> np.ndarray:
        docs, weights = [], []
        for t, qc in Counter(query_tokens).items():  # a repeated query term counts that often
            tid = self._vocab.get(t)
            if tid is not None:
                lo, hi = self._start[tid], self._start[tid + 1]
                docs.append(self._doc[lo:hi])
                weights.append(np.float32(self._idf[tid] * qc) * self._weight[lo:hi])
        if not docs:
            return np.zeros(self._n, dtype=np.float32)
        return np.bincount(np.concatenate(docs), np.concatenate(weights), minlength=self._n).astype(np.float32)

    def top(self, query: str, n: int = 10) -> list[tuple[int, float]]:
        """The `n` best documents with a positive score, best first (ties: earlier document first)."""
        s = self.score(query)
        if n <= 0 or s.size == 0:
            return []
        n = min(n, s.size)
        cand = np.argpartition(-s, n - 1)[:n] if n < s.size else np.arange(s.size)
        cand = cand[np.lexsort((cand, -s[cand]))]
        return [(int(i), float(s[i])) for i in cand if s[i] > 0]
