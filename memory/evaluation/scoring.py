"""Evidence recall: the fraction of a question's evidence turns that a packed context carries whole,
and the results rows that average it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar

import numpy as np

CATEGORIES = ("1", "2", "3", "4")  # LoCoMo's question categories scored (5, adversarial, is skipped)
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}

T = TypeVar("T")


def evidence_recall(evidence: Sequence[str], covered: set[str]) -> float:
    return sum(1 for e in evidence if e in covered) / len(evidence) if evidence else 0.0


def mean(xs) -> float | None:
    """The mean rounded to 4 places, or None for no values (a category with no question)."""
    return round(float(np.mean(xs)), 4) if xs else None


def recall_fields(rows: list[tuple[str, object, float]]) -> dict:
    """Recall, per category and per conversation, of (conversation, category, recall) rows."""
    return {
        "recall": mean([r for _, _, r in rows]),
        "by_category": {c: mean([r for _, cat, r in rows if str(cat) == c]) for c in CATEGORIES},
        "n_questions": len(rows),
        "by_conversation": {
            cid: mean([r for c2, _, r in rows if c2 == cid]) for cid in dict.fromkeys(c for c, _, _ in rows)
        },
    }


class Replayable(Generic[T]):
    """Re-iterable view of a generator: pack() for several budgets shares one ranking."""

    def __init__(self, it: Iterable[T]):
        self._it, self._items = iter(it), list[T]()

    def __iter__(self) -> Iterator[T]:
        i = 0
        while True:
            if i < len(self._items):
                yield self._items[i]
            else:
                try:
                    item = next(self._it)
                except StopIteration:
                    return
                self._items.append(item)
                yield item
            i += 1
