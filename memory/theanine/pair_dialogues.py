"""The conversations a relation pair is shown with (Phase I-2).

The official code shows each (candidate, new memory) pair with the whole dialogue of both memories'
sessions. Each memory keeps its session's dialogue (`session_dialogue`, stored as Memory.excerpt);
`fit` cuts the two only when they do not fit the model's window, keeping whole turns around the turn
that best matches the memory, and says what it cut so the trace can record it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .extract import content_words

Counter = Callable[[str], int]
MARK_TOKENS = 24  # room for the "(... turns left out ...)" lines of a cut conversation


def session_dialogue(turns) -> str:
    """A session's whole dialogue, one "speaker: text" line per turn (sessions/upkeep.py finds a
    forgotten turn in it by the same form)."""
    return "\n".join(f"{t.speaker}: {' '.join(t.text.split())}" for t in turns if t.text.strip())


@dataclass
class Fitted:
    text: str
    kept: int  # turns shown whole
    total: int  # turns of the conversation
    shortened: bool = False  # the one turn kept was itself cut

    @property
    def cut(self) -> bool:
        return self.kept < self.total or self.shortened

    def describe(self) -> str:
        if self.shortened:
            return f"one of {self.total} turns, shortened"
        return f"{self.kept} of {self.total} turns" if self.cut else "whole"


def _stems(text: str) -> set[str]:
    return {w[:5] for w in content_words(text)}


def _centre(lines: list[str], event: str) -> int:
    """The line sharing most content words with the memory: where its source turns most likely are."""
    want = _stems(event)
    scores = [len(want & _stems(line)) for line in lines]
    return max(range(len(lines)), key=lambda i: (scores[i], -i))


def _shorten(line: str, budget: int, count: Counter) -> str:
    cut = line
    while cut and count(cut) > budget:
        cut = cut[: int(len(cut) * 0.9)]
    return cut + " ..."


def _lines(dialogue: str) -> list[str]:
    return [ln for ln in dialogue.split("\n") if ln.strip()]


def size(dialogue: str, count: Counter) -> int:
    """Tokens of a conversation as `fit` counts them (each line and its line break)."""
    return sum(count(ln) + 1 for ln in _lines(dialogue))


def fit_one(dialogue: str, event: str, budget: int, count: Counter) -> Fitted:
    """`dialogue` whole if it takes at most `budget` tokens; else the longest run of whole turns around
    the one that best matches `event`, with a line saying how many turns were left out on each side."""
    lines = _lines(dialogue)
    if not lines:
        return Fitted("", 0, 0)
    costs = [count(ln) + 1 for ln in lines]
    if sum(costs) <= budget:
        return Fitted("\n".join(lines), len(lines), len(lines))
    room = max(budget - MARK_TOKENS, 1)
    c = _centre(lines, event)
    if costs[c] > room:
        text, kept, shortened = _shorten(lines[c], room, count), (c, c + 1), True
    else:
        lo, hi, used = c, c + 1, costs[c]
        grew = True
        while grew:  # one turn after, then one before, while they fit
            grew = False
            if hi < len(lines) and used + costs[hi] <= room:
                used, hi, grew = used + costs[hi], hi + 1, True
            if lo > 0 and used + costs[lo - 1] <= room:
                used, lo, grew = used + costs[lo - 1], lo - 1, True
        text, kept, shortened = "\n".join(lines[lo:hi]), (lo, hi), False
    before, after = kept[0], len(lines) - kept[1]
    head = f"(... {before} earlier turn{'s' * (before != 1)} left out to fit the window)\n" if before else ""
    tail = f"\n(... {after} later turn{'s' * (after != 1)} left out to fit the window)" if after else ""
    return Fitted(head + text + tail, kept[1] - kept[0] - shortened, len(lines), shortened)


def fit(dialogues: list[tuple[str, str]], budget: int, count: Counter) -> list[Fitted]:
    """Each (dialogue, event) of a pair, within `budget` tokens together: whole where they fit; else a
    conversation shorter than half the budget stays whole and the other gets the rest, or each gets half."""
    sizes = [size(d, count) for d, _ in dialogues]
    if sum(sizes) <= budget or not dialogues:
        return [fit_one(d, e, budget, count) for d, e in dialogues]
    if len(dialogues) == 1:
        return [fit_one(*dialogues[0], budget, count)]
    half = budget // 2
    small = min(range(2), key=sizes.__getitem__)
    shares = [half, half]
    if sizes[small] <= half:
        shares = [sizes[small], budget - sizes[small]] if small == 0 else [budget - sizes[small], sizes[small]]
    return [fit_one(d, e, share, count) for (d, e), share in zip(dialogues, shares, strict=True)]
