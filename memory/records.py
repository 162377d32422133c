"""Plain records shared by the whole library: dialogue turns and sessions, and what a reply streams and a
close reports (the agent makes them, the strategies and the protocols name them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .trace import Trace

Progress = Callable[[float, str], None]  # (fraction 0..1, what is happening)


@dataclass
class Turn:
    """One utterance. `turn_id` is unique within a user (e.g. "s3:4" or LoCoMo's "D3:4")."""

    speaker: str
    text: str
    turn_id: str = ""


@dataclass
class SessionRecord:
    """A closed (or closing) session: its id, its date (free text or ISO) and its turns."""

    session_id: str
    date: str
    turns: list[Turn] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> SessionRecord:
        return cls(d["session_id"], d.get("date", ""), [Turn(**t) for t in d.get("turns", [])])


def exchanges(turns: list[Turn]) -> list[list[Turn]]:
    """Group turns into exchanges (SeCom's unit): a user turn and the replies that follow it.

    A new exchange starts whenever the speaker returns to the one who opened the
    current exchange, so it works for user/assistant chats and for two named
    speakers (LoCoMo) alike.
    """
    out: list[list[Turn]] = []
    for t in turns:
        if not out or (t.speaker == out[-1][0].speaker and len(out[-1]) > 1):
            out.append([t])
        else:
            out[-1].append(t)
    return out


@dataclass
class ReplyEvent:
    kind: str  # "status" (text = what is happening) | "delta" (text = new reply text) | "done"
    text: str = ""
    trace: Trace | None = None  # set on "done"


@dataclass
class CloseReport:
    session_id: str
    already_built: bool = False  # idempotent: a second close changes nothing
    new_memories: list[str] = field(default_factory=list)  # THEANINE node ids added
    new_segments: list[str] = field(default_factory=list)  # SeCom segment ids added
    trace: Trace = field(default_factory=lambda: Trace(strategy="close"))
