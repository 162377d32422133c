"""The baselines: one memory unit per turn, or per session, of the raw dialogue."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import locomo_format as lf
from ..packing import Piece, Unit
from .conversations import Conversation
from .ranking import Ranker


def dated(date: str, text: str, dates: bool) -> str:
    """`text` prefixed by its session date when `dates` (and the date is known)."""
    return f"({date}) {text}" if dates and date else text


def turn_line(t) -> str:
    """A turn as one line, `speaker: text`, whitespace collapsed."""
    return f"{t.speaker}: {' '.join(t.text.split())}"


class DialogueUnits:
    """Baselines: one unit per turn (`level="turn"`), or per session."""

    def __init__(self, conv: Conversation, embedder, level: str, dates: bool):
        self.units: list[Unit] = []
        keys: list[str] = []
        for s in conv.sessions:
            if level == "turn":
                for t in s.turns:
                    self.units.append(Unit(t.turn_id, [Piece(dated(s.date, turn_line(t), dates), (t.turn_id,))]))
                    keys.append(turn_line(t))
            else:
                head = [Piece(f"({s.date})")] if dates and s.date else []
                pieces = head + [Piece(turn_line(t), (t.turn_id,)) for t in s.turns]
                self.units.append(Unit(s.session_id, pieces))
                keys.append("\n".join(turn_line(t) for t in s.turns))
        self.ranker = Ranker(keys, embedder)

    def ranked(self, retriever: str, q: lf.Question, qvec: np.ndarray) -> Iterator[Unit]:
        for i in self.ranker.rank(retriever, q.question, qvec):
            yield self.units[i]
