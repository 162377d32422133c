"""Changed without an LLM: a later statement by the same speaker that replaces an earlier one.

With an LLM the relation step labels Changed itself (the paper's relation). Offline, a candidate
pair (the older memory is among the newer one's top-j neighbours, from an earlier session) is
labelled Changed by this rule:

1. the same speaker said both, each in the first person and not about someone else
   ("my cousin ...", "my aunt's dog ...");
2. the newer one says something is different now (a cue word: "now", "moved", "new", "instead",
   "lately", ...);
3. each names a value the other lacks: a figure or a capitalised word inside the sentence (a
   name, a place), or, when neither names one, a few content words the other lacks (jazz ->
   techno) while they share a subject word;
4. with those values masked, the two sentences are still alike: the cosine of their embeddings
   (the app's embedder) is at least MASKED_MIN. Masking takes the values out of the comparison,
   so what is compared is what the sentences say about the value ("I live in <v>").

A restatement (the same value again) is not a change. Precision and recall on the knowledge-update
probe, and the false changes on LoCoMo: docs/knowledge_update.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..embeddings import Embedder
from .extract import content_words
from .graph import Memory

# Masked cosine (MiniLM) that makes a pair a change, chosen on the probe's candidate pairs
# (docs/knowledge_update.md): 0.30 made 27 false changes instead of 6 for 2 more true ones; 0.40 lost a third.
MASKED_MIN = 0.35
MAX_PLAIN_VALUES = 3  # without names or figures: at most this many differing content words per side
MASK = "something"

# Words by which people say that something is different now.
CUES = frozenset(
    [
        "now",
        "new",
        "moved",
        "relocated",
        "instead",
        "anymore",
        "longer",
        "lately",
        "changed",
        "switched",
        "joined",
        "started",
        "left",
        "adopted",
        "cancelled",
        "days",
    ]
)
_FIRST_PERSON = frozenset(["i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "our", "us"])
# "my <one of these>": the sentence is about someone else.
_OTHERS = frozenset(
    [
        "cousin",
        "aunt",
        "uncle",
        "friend",
        "friends",
        "brother",
        "sister",
        "neighbour",
        "neighbor",
        "colleague",
        "colleagues",
        "parents",
        "mother",
        "father",
        "mom",
        "dad",
        "mum",
        "roommate",
        "manager",
        "boss",
        "niece",
        "nephew",
        "grandmother",
        "grandfather",
        "son",
        "daughter",
    ]
)
_TOKEN = re.compile(r"[^\W_][\w'’-]*|\d+(?:[.,]\d+)?")


@dataclass(frozen=True)
class Masked:
    """One side of a pair: its sentence with its values replaced by MASK, and the values."""

    text: str
    values: tuple[str, ...]


def _body(m: Memory) -> str:
    """The sentence without its "Speaker: " prefix (offline memories carry one)."""
    prefix = f"{m.speaker}:"
    return m.event[len(prefix) :].strip() if m.speaker and m.event.startswith(prefix) else m.event


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _is_value(tok: str, first: bool) -> bool:
    """A figure, or a capitalised word inside the sentence (every sentence's first word is capitalised:
    in LoCoMo, openers such as "Seven" or "Pottery's" made most false changes)."""
    if tok[0].isdigit():
        return True
    return not first and tok[0].isupper() and bool(content_words(tok))  # a stop word ("I") is no value


def _content(tok: str) -> bool:
    return bool(content_words(tok)) and tok.lower() not in CUES


def _about_someone_else(toks: list[str]) -> bool:
    return any(
        toks[i].lower() in ("my", "our") and toks[i + 1].lower().removesuffix("'s") in _OTHERS
        for i in range(len(toks) - 1)
    )


def mask_pair(old: Memory, new: Memory) -> tuple[Masked, Masked] | None:
    """The two sides masked, or None when the pair cannot be a change by steps 1-3 of the rule."""
    if not old.speaker or old.speaker != new.speaker:
        return None
    a, b = _tokens(_body(old)), _tokens(_body(new))
    la, lb = {t.lower() for t in a}, {t.lower() for t in b}
    if not CUES & lb or not (_FIRST_PERSON & la and _FIRST_PERSON & lb):
        return None  # no sign of a change, or not both about the speaker
    if _about_someone_else(a) or _about_someone_else(b):
        return None
    va = [t for i, t in enumerate(a) if _is_value(t, i == 0) and t.lower() not in lb]
    vb = [t for i, t in enumerate(b) if _is_value(t, i == 0) and t.lower() not in la]
    if not va and not vb and not any(_is_value(t, i == 0) for toks in (a, b) for i, t in enumerate(toks)):
        va = [t for t in a if _content(t) and t.lower() not in lb]
        vb = [t for t in b if _content(t) and t.lower() not in la]
        shared = {t.lower() for t in a if _content(t)} & {t.lower() for t in b if _content(t)}
        if len(va) > MAX_PLAIN_VALUES or len(vb) > MAX_PLAIN_VALUES or not shared:  # no common subject word
            return None
    if not va or not vb:
        return None

    def side(toks: list[str], values: list[str]) -> Masked:
        return Masked(" ".join(MASK if t in values else t for t in toks), tuple(values))

    return side(a, va), side(b, vb)


class ChangeRule:
    """The rule with its embedder (the app's: the masked sentences are compared by it)."""

    def __init__(self, embedder: Embedder, threshold: float = MASKED_MIN):
        self.embedder, self.threshold = embedder, threshold

    def scores(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[float | None]:
        """Masked cosine per (old, new) pair; None where steps 1-3 already rule a change out."""
        masked = [mask_pair(o, n) for o, n in pairs]
        todo = [m for m in masked if m is not None]
        if not todo:
            return [None] * len(pairs)
        va = self.embedder.embed([m[0].text for m in todo])
        vb = self.embedder.embed([m[1].text for m in todo])
        cos = iter(_cosines(np.asarray(va), np.asarray(vb)))
        return [None if m is None else round(float(next(cos)), 4) for m in masked]

    def changed(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[bool]:
        return [s is not None and s >= self.threshold for s in self.scores(pairs)]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.where(na == 0, 1.0, na)
