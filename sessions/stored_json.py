"""The one reader of JSON kept in the database: every JSON column is decoded and shape-checked here.

A stored value that does not decode, or decodes to the wrong shape, is *damaged*: the reader
returns the column's empty value and says so, and the caller quarantines the row
(sessions/quarantine.py) instead of failing the whole request. One bad row then costs one
trace, one report or one memory, never the user's history.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


@dataclass(frozen=True)
class JsonColumn:
    table: str
    column: str
    shape: Callable[[Any], bool]  # what a good value looks like
    nullable: bool  # SQL NULL (or "") is a normal value, not damage
    empty: Any  # what the reader gives for NULL and for a damaged value


# Every column that holds JSON (sessions/schema.py). sessions.check scans exactly these.
COLUMNS: dict[tuple[str, str], JsonColumn] = {
    (c.table, c.column): c
    for c in (
        JsonColumn("users", "prefs", _is_dict, False, {}),
        JsonColumn("sessions", "report", _is_dict, True, None),
        JsonColumn("messages", "trace", _is_dict, True, None),
        JsonColumn("compares", "results", _is_dict, False, None),
        JsonColumn("graph_memories", "turns", _is_str_list, False, []),
    )
}


def read(table: str, column: str, text: str | None) -> tuple[Any, bool]:
    """(value, damaged): the decoded value of `table.column`, or (its empty value, True) when the
    stored text is not JSON of the column's shape. NULL is damage only where the column forbids it."""
    col = COLUMNS[(table, column)]
    if text is None or text == "":
        return _copy(col.empty), not col.nullable and text is None
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return _copy(col.empty), True
    if not col.shape(value):
        return _copy(col.empty), True
    return value, False


def _copy(v: Any) -> Any:
    return type(v)() if isinstance(v, (dict, list)) else v
