"""Packing ranked memory units into a token budget: the one rule the app's reply and the
benchmarks share.

Units go in whole, in rank order, while they fit; the first one that does not
fit is cut to its pieces around its anchor (for a segment, its best-matching
exchange; for a timeline, its retrieved memory) and the context ends there. So
the best unit is always used, however long.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .tokens import count_tokens


@dataclass
class Piece:
    """One line of a unit's context text and the evidence ids it carries whole."""

    text: str
    covers: tuple[str, ...] = ()
    tokens: int = -1

    def n_tokens(self) -> int:
        if self.tokens < 0:
            self.tokens = count_tokens(self.text)
        return self.tokens


@dataclass
class Unit:
    """A memory unit as the reply would read it: pieces joined by `sep`.

    `anchor` is the piece to keep when the unit must be cut to fit (0 = keep a
    prefix; a timeline keeps the memories around its retrieved memory).
    """

    id: str
    pieces: list[Piece]
    sep: str = "\n"
    anchor: int = 0
    meta: dict = field(default_factory=dict)
    head: Piece | None = None  # kept with any part of the unit (a segment's date line); never cut

    @property
    def text(self) -> str:
        return self.sep.join(p.text for p in ([self.head] if self.head else []) + self.pieces)


def _cost(pieces: Sequence[Piece], sep_tokens: int) -> int:
    return sum(p.n_tokens() for p in pieces) + sep_tokens * max(0, len(pieces) - 1)


def _cut(unit: Unit, room: int, sep_tokens: int) -> list[Piece]:
    """The run of pieces around `unit.anchor` that fits in `room` tokens, grown one piece at a time,
    alternately after and before the anchor (empty when the anchor itself does not fit)."""
    ps = unit.pieces
    a = min(max(unit.anchor, 0), len(ps) - 1)
    if ps[a].n_tokens() > room:
        return []
    lo = hi = a
    used = ps[a].n_tokens()
    after_first = True
    while True:
        for j in (hi + 1, lo - 1) if after_first else (lo - 1, hi + 1):
            if 0 <= j < len(ps) and used + sep_tokens + ps[j].n_tokens() <= room:
                used += sep_tokens + ps[j].n_tokens()
                lo, hi = min(lo, j), max(hi, j)
                break
        else:
            break
        after_first = not after_first
    return list(ps[lo : hi + 1])


@dataclass
class Packed:
    units: list[str]  # ids of the units used (the last may be cut)
    covered: set[str]  # evidence ids carried whole by the context
    tokens: int  # token estimate of the context (sum of pieces + separators)
    text: str
    chosen: list = field(default_factory=list)  # (unit, pieces kept) per unit used, in rank order


UNIT_SEP = "\n\n"


def pack(ranked: Iterable[Unit], budget: int) -> Packed:
    """Fill a context up to `budget` tokens with units in rank order.

    Units go in whole while they fit; the first one that does not fit is cut to
    its pieces around its anchor that fit, and the context ends there. `ranked`
    may be a generator: it is consumed only as far as the budget goes.
    Token counts are per piece plus one per separator, an upper bound of the
    joined text's count (checked by the tests).
    """
    sep_tok, unit_sep_tok = count_tokens("\n"), count_tokens(UNIT_SEP)
    used, ids, kept = 0, [], []
    covered: set[str] = set()
    parts: list[str] = []
    for u in ranked:
        if not u.pieces:
            continue
        head = [u.head] if u.head is not None else []
        extra = (unit_sep_tok if parts else 0) + (_cost(head, 0) + sep_tok if head else 0)
        cost = _cost(u.pieces, sep_tok) + extra
        if used + cost <= budget:
            chosen = head + list(u.pieces)
            used += cost
            stop = False
        else:
            cut = _cut(u, budget - used - extra, sep_tok)
            chosen = head + cut if cut else []
            used += (_cost(cut, sep_tok) + extra) if cut else 0
            stop = True
        if chosen:
            kept.append((u, chosen))
            ids.append(u.id)
            parts.append(u.sep.join(p.text for p in chosen))
            for p in chosen:
                covered.update(p.covers)
        if stop:
            break
    return Packed(ids, covered, used, UNIT_SEP.join(parts), kept)
