"""Scoring a free-text answer against a gold answer, as LoCoMo reports QA: token F1 after normalising
(lower case, no punctuation, no articles, Porter stems), and whether every word of the gold answer
appears in the reply (a reply may be long and chatty: F1 punishes that, "all words" does not)."""

from __future__ import annotations

import functools
import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


@functools.lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def answer_tokens(text: str) -> list[str]:
    t = str(text).replace(",", "").lower().translate(_PUNCT)
    stem = _stemmer().stem
    return [stem(w) for w in _ARTICLES.sub(" ", t).split()]


def token_f1(reply: str, gold: str) -> float:
    pred, ref = answer_tokens(reply), answer_tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or not common:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def all_words_present(reply: str, gold: str) -> bool:
    """Every (normalised) word of the gold answer is somewhere in the reply."""
    ref = set(answer_tokens(gold))
    return bool(ref) and ref <= set(answer_tokens(reply))
