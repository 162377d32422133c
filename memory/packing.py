"""Packing ranked memory units into a token budget: the rules the app's reply and the
benchmarks share.

`pack`: units go in whole, in rank order, while they fit; the first one that
does not fit is cut to its pieces around its anchor (for a segment, its
best-matching exchange; for a timeline, its retrieved memory) and the context
ends there. So the best unit is always used, however long.

`pack_anchors_first`: every unit's anchor first, then the units grow around
their anchors (THEANINE's timelines: more retrieved memories, less history each).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .tokens import count_tokens


@dataclass
class Piece:
    """One line of a unit's context text and the evidence ids it carries whole.

    `link` joins the piece to the one before it when both are shown (a timeline's " -(Cause)- "); a
    piece shown without its predecessor goes without it, and costs no token for it.
    """

    text: str
    covers: tuple[str, ...] = ()
    tokens: int = -1
    key: str = ""  # what the piece shows (a memory id), so that `pack_anchors_first` shows it once; "" = its text
    link: str = ""
    link_tokens: int = -1

    def n_tokens(self) -> int:
        if self.tokens < 0:
            self.tokens = count_tokens(self.text)
        return self.tokens

    def n_link_tokens(self) -> int:
        if self.link_tokens < 0:
            self.link_tokens = count_tokens(self.link) if self.link else 0
        return self.link_tokens


@dataclass
class Unit:
    """A memory unit as the reply would read it: pieces joined by `sep` (and their links).

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
        return render(self, ([self.head] if self.head else []) + self.pieces)


def render(unit: Unit, chosen: Sequence[Piece]) -> str:
    """The text of a unit's chosen pieces (its head, then a run of its pieces): each piece after the
    first of the run with its link."""
    head = [unit.head.text] if chosen and chosen[0] is unit.head else []
    run = chosen[len(head) :]
    return unit.sep.join(head + [p.text if i == 0 else p.link + p.text for i, p in enumerate(run)])


def _cost(pieces: Sequence[Piece], sep_tokens: int) -> int:
    """Tokens of a run of pieces: their texts, the separators and the links inside the run."""
    return (
        sum(p.n_tokens() for p in pieces)
        + sep_tokens * max(0, len(pieces) - 1)
        + sum(p.n_link_tokens() for p in pieces[1:])
    )


def _grow_cost(ps: Sequence[Piece], j: int, lo: int, sep_tokens: int) -> int:
    """Tokens added by piece j next to the run lo..hi: its text, a separator and the link between them."""
    later = ps[j] if j > lo else ps[lo]
    return ps[j].n_tokens() + sep_tokens + later.n_link_tokens()


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
            if 0 <= j < len(ps) and used + _grow_cost(ps, j, lo, sep_tokens) <= room:
                used += _grow_cost(ps, j, lo, sep_tokens)
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
# pack_anchors_first: a retrieved memory next to an earlier timeline's run joins that run; one further
# away starts a run of its own (joining across a gap costs the memories between: docs/defaults.md)
MAX_STRETCH = 1


def _packed(kept: list[tuple[Unit, list[Piece]]], used: int) -> Packed:
    covered = {t for _, chosen in kept for p in chosen for t in p.covers}
    text = UNIT_SEP.join(render(u, chosen) for u, chosen in kept)
    return Packed([u.id for u, _ in kept], covered, used, text, kept)


def pack(ranked: Iterable[Unit], budget: int) -> Packed:
    """Fill a context up to `budget` tokens with units in rank order.

    Units go in whole while they fit; the first one that does not fit is cut to
    its pieces around its anchor that fit, and the context ends there. `ranked`
    may be a generator: it is consumed only as far as the budget goes.
    Token counts are per piece plus one per separator, an upper bound of the
    joined text's count (checked by the tests).
    """
    sep_tok, unit_sep_tok = count_tokens("\n"), count_tokens(UNIT_SEP)
    used = 0
    kept: list[tuple[Unit, list[Piece]]] = []
    for u in ranked:
        if not u.pieces:
            continue
        head = [u.head] if u.head is not None else []
        extra = (unit_sep_tok if kept else 0) + (_cost(head, 0) + sep_tok if head else 0)
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
        if stop:
            break
    return _packed(kept, used)


def pack_anchors_first(ranked: Iterable[Unit], budget: int, whole_first: int = 0) -> Packed:
    """Fill a context with the first `whole_first` units whole, then every other unit's anchor, then
    grow those units around their anchors.

    Pass 1 takes units in rank order while they fit: each of the first `whole_first` units taken is
    grown at once as far as it goes (a whole timeline: root, retrieved memory, leaf), every later
    one gets its head and anchor piece. An anchor that lies in a unit taken before (a retrieved
    memory on an earlier timeline) stretches that unit to reach it instead, and one shown already
    is skipped. Pass 2 grows the units taken, round after round, one piece per unit and round in
    rank order (alternately after and before the anchor, as `_cut` does), until nothing more fits.
    A unit stops growing on a side where the next piece is shown already (by another unit). So the
    best-ranked timelines are read whole, and the rest of the budget shows more retrieved memories,
    each with less history around it, and nothing twice.
    """
    sep_tok, unit_sep_tok = count_tokens("\n"), count_tokens(UNIT_SEP)
    state = {"used": 0}
    shown: set[str] = set()
    spans: list[list] = []  # [unit, lo, hi, grow after first, sides still open]
    on_taken: dict[str, tuple[list, int]] = {}  # key -> (span, index) of the pieces of the units taken

    def grow(span: list) -> bool:
        """Add one piece to `span` (the next side in turn that has room); False when none fits."""
        u, lo, hi, after_first, open_ = span
        for j in (hi + 1, lo - 1) if after_first else (lo - 1, hi + 1):
            if j not in open_:
                continue
            if not 0 <= j < len(u.pieces) or _key(u.pieces[j]) in shown:
                open_.discard(j)
                continue
            cost = _grow_cost(u.pieces, j, lo, sep_tok)
            if state["used"] + cost <= budget:
                state["used"] += cost
                shown.add(_key(u.pieces[j]))
                open_.discard(j)
                open_.add(j + 1 if j > hi else j - 1)
                span[1:4] = [min(lo, j), max(hi, j), not after_first]
                return True
        return False

    for u in ranked:
        if not u.pieces:
            continue
        a = min(max(u.anchor, 0), len(u.pieces) - 1)
        key = _key(u.pieces[a])
        if key in shown:
            continue
        if key in on_taken:
            span, j = on_taken[key]
            lo, hi = min(span[1], j), max(span[2], j)
            run = span[0].pieces[lo : hi + 1]
            cost = _cost(run, sep_tok) - _cost(span[0].pieces[span[1] : span[2] + 1], sep_tok)
            new = [_key(p) for p in span[0].pieces[lo : span[1]] + span[0].pieces[span[2] + 1 : hi + 1]]
            if len(new) <= MAX_STRETCH and state["used"] + cost <= budget and not shown.intersection(new):
                state["used"] += cost
                shown.update(new)
                span[1:3], span[4] = [lo, hi], {lo - 1, hi + 1}
                continue
        head = [u.head] if u.head is not None else []
        cost = (unit_sep_tok if spans else 0) + _cost(head, 0) + (sep_tok if head else 0) + u.pieces[a].n_tokens()
        if state["used"] + cost > budget:
            break
        state["used"] += cost
        shown.update(_key(p) for p in [*head, u.pieces[a]])
        spans.append([u, a, a, True, {a - 1, a + 1}])
        if len(spans) <= whole_first:
            while grow(spans[-1]):
                pass
        for i, p in enumerate(u.pieces):
            on_taken.setdefault(_key(p), (spans[-1], i))
    grew = True
    while grew:
        grew = False
        for span in spans:
            grew = grow(span) or grew
    kept = [(u, ([u.head] if u.head is not None else []) + list(u.pieces[lo : hi + 1])) for u, lo, hi, *_ in spans]
    return _packed(kept, state["used"])


def _key(piece: Piece) -> str:
    return piece.key or piece.text
