"""Answer scores that need no judge model: LoCoMo's token F1, and whether a reply holds every content
word of the gold answer.

LoCoMo (Maharana et al., 2024) scores QA by token F1 after its normalisation: lower case, punctuation
and the articles a/an/the removed, white space collapsed. "All words" is stricter about recall and
blind to extra text: every word of the normalised gold answer that is not a stop word appears in the
normalised reply (a chat reply is longer than a gold answer, which F1 penalises).
"""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”")
_STOP_WORDS = """
and or but of in on at to for with by from as is are was were be been it its this that these those he she they
them his her their i me my we our you your
"""
_STOP = frozenset(_STOP_WORDS.split())


def normalise(text: str) -> str:
    text = str(text or "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(reply: str, gold: str) -> float:
    pred, ref = normalise(reply).split(), normalise(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or not common:
        return 0.0
    p, r = common / len(pred), common / len(ref)
    return 2 * p * r / (p + r)


def content_words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if w not in _STOP}


def has_all_words(reply: str, gold: str) -> bool:
    """Every content word of the gold answer is in the reply (False for an empty gold answer)."""
    need = content_words(gold)
    return bool(need) and need <= set(normalise(reply).split())
