"""Exchanges, the unit a session is segmented in: the turns of one user turn and its reply (or one
utterance), and their text as the segmenters and the reply read it."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Turn

Exchange = Sequence[Turn]  # the turns of one exchange (a user turn and the reply), or one utterance


def exchange_lines(ex: Exchange) -> str:
    """One line per turn, "Speaker: text" (a turn without a speaker is its text alone)."""
    return "\n".join(f"{t.speaker}: {t.text}" if t.speaker else t.text for t in ex)


def utterance_exchanges(utterances: Sequence[str]) -> list[list[Turn]]:
    """Utterances as one-turn exchanges without speakers (DialSeg711, TIAGE: the utterance is the unit)."""
    return [[Turn("", u)] for u in utterances]
