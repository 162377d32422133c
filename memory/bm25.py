"""Okapi BM25 over an inverted index, with incremental adds.

Shared by SeCom (ranking compressed segment keys) and the benchmarks (turn and
session retrieval). Scoring is vectorised: for each query term the postings
(document ids and term frequencies, kept as numpy arrays) are weighted and
summed with `np.bincount`, so a query costs O(postings of its terms), not
O(documents).

    idx = BM25Index()
    idx.add(["I adopted a cat", "We went hiking"])
    scores = idx.score("my cat")          # np.ndarray, one score per document
    best = idx.top(query, n=5)            # [(doc_index, score)], best first
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable

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

    `add` appends documents (their index = insertion order); `score` returns a
    float32 array over all documents. Thread-safe: adds and queries may run in
    different threads.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75, stem: bool = True):
        self.k1, self.b, self.stem = float(k1), float(b), stem
        self._lock = threading.RLock()
        self._vocab: dict[str, int] = {}
        self._post_ids: list[list[int]] = []  # per term: document ids (pending, python lists)
        self._post_tf: list[list[int]] = []
        self._arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per term: frozen numpy postings
        self._dirty: set[int] = set()
        self._doclen: list[int] = []
        self._doclen_arr = np.zeros(0, dtype=np.float32)
        self._total_len = 0

    def __len__(self) -> int:
        return len(self._doclen)

    def add(self, documents: Iterable[str]) -> None:
        with self._lock:
            for doc in documents:
                self._add_tokens(tokenize(doc, self.stem))
            self._doclen_arr = np.asarray(self._doclen, dtype=np.float32)

    def add_tokens(self, token_lists: Iterable[list[str]]) -> None:
        """Add documents that are already tokenised (e.g. to share tokenisation between indexes)."""
        with self._lock:
            for toks in token_lists:
                self._add_tokens(list(toks))
            self._doclen_arr = np.asarray(self._doclen, dtype=np.float32)

    def _add_tokens(self, toks: list[str]) -> None:
        doc_id = len(self._doclen)
        self._doclen.append(len(toks))
        self._total_len += len(toks)
        for t, c in Counter(toks).items():
            tid = self._vocab.get(t)
            if tid is None:
                tid = self._vocab[t] = len(self._post_ids)
                self._post_ids.append([])
                self._post_tf.append([])
            self._post_ids[tid].append(doc_id)
            self._post_tf[tid].append(c)
            self._dirty.add(tid)

    def _postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        if tid in self._dirty or tid not in self._arrays:
            self._arrays[tid] = (
                np.asarray(self._post_ids[tid], dtype=np.int64),
                np.asarray(self._post_tf[tid], dtype=np.float32),
            )
            self._dirty.discard(tid)
        return self._arrays[tid]

    def idf(self, term: str) -> float:
        tid = self._vocab.get(term)
        df = len(self._post_ids[tid]) if tid is not None else 0
        n = len(self._doclen)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def score(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (zeros when nothing matches)."""
        return self.score_tokens(tokenize(query, self.stem))

    def score_tokens(self, query_tokens: list[str]) -> np.ndarray:
        with self._lock:
            n = len(self._doclen)
            out = np.zeros(n, dtype=np.float32)
            if n == 0:
                return out
            avgdl = max(self._total_len / n, 1e-9)
            norm = self.k1 * (1.0 - self.b + self.b * self._doclen_arr / avgdl)  # per document
            for t, qc in Counter(query_tokens).items():
                tid = self._vocab.get(t)
                if tid is None:
                    continue
                ids, tf = self._postings(tid)
                w = self.idf(t) * qc * tf * (self.k1 + 1.0) / (tf + norm[ids])
                out += np.bincount(ids, weights=w, minlength=n).astype(np.float32)
            return out

    def top(self, query: str, n: int = 10) -> list[tuple[int, float]]:
        """The `n` best documents with a positive score, best first (ties: earlier document first)."""
        s = self.score(query)
        if n <= 0 or s.size == 0:
            return []
        n = min(n, s.size)
        cand = np.argpartition(-s, n - 1)[:n] if n < s.size else np.arange(s.size)
        cand = cand[np.lexsort((cand, -s[cand]))]
        return [(int(i), float(s[i])) for i in cand if s[i] > 0]
