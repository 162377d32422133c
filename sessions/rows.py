"""The rows the store returns (sessions, messages) and how a database row becomes one: plain
columns by name, the JSON column through the checked reader (sessions/stored_json.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from . import stored_json
from .quarantine import Damage


@dataclass
class SessionRow:
    session_id: str
    seq: int
    date: str
    status: str
    source: str
    created_at: float
    closed_at: float | None
    close_error: str | None
    report: dict | None
    n_messages: int = 0
    number: int = 0  # the session's place in time order, 1.. (set by Lifecycle.sessions; 0 = not computed)
    damaged: str = ""  # the JSON column that could not be read (quarantined), else ""

    @property
    def label(self) -> str:
        """The number people see: by date, whatever the source (a stored row not yet placed falls back to seq)."""
        return str(self.number or self.seq)


@dataclass
class MessageRow:
    id: int
    session_id: str
    role: str  # user | assistant
    speaker: str  # "user"/"assistant" in chats; the person's name in imported LoCoMo sessions
    text: str
    status: str  # ok | error
    error: str | None
    strategy: str | None
    reply_to: int | None
    trace: dict | None
    created_at: float
    source_turn_id: str | None = None  # the turn's id in an imported history (LoCoMo "D3:7")
    damaged: str = ""  # "trace" when the stored trace could not be read (quarantined; trace is None)

    def turn_id(self) -> str:
        """The id memory provenance uses: the source's id for imported turns, else session:message."""
        return self.source_turn_id or f"{self.session_id}:{self.id}"


R = TypeVar("R", "SessionRow", "MessageRow")
# The JSON columns of each row type: (column, table, the row's key column), read by sessions.stored_json.
_JSON_COLUMNS = {"SessionRow": ("report", "sessions", "session_id"), "MessageRow": ("trace", "messages", "id")}


def row_of(cls: type[R], r, damaged: list[Damage]) -> R:
    """A database row as `cls` (SessionRow or MessageRow): its fields by column name; its JSON column
    read through the checked reader (a damaged value becomes None, `damaged` names the column, and
    the row is added to `damaged` for quarantine); a field the query did not select keeps its default."""
    m = r._mapping
    values = {f.name: m[f.name] for f in dataclasses.fields(cls) if f.name in m and f.name != "damaged"}
    col, table, key = _JSON_COLUMNS[cls.__name__]
    if col in values:
        values[col], bad = stored_json.read(table, col, values[col])
        if bad:
            values["damaged"] = col
            damaged.append(Damage(table, str(m[key]), col, m["session_id"], m[col]))
    if "n_messages" in values:
        values["n_messages"] = values["n_messages"] or 0
    return cls(**values)
