"""Quarantine of damaged stored values (sessions/stored_json.py finds them).

A damaged row is kept where it is (and its raw text copied here, so no later rewrite of its
neighbours loses it), flagged by one row of the `quarantine` table, and left out of every view,
retrieval and export until the user (or `python -m sessions.check --repair`) rebuilds or drops
it. Rows are keyed by the hash of the user id, like the graph tables; Forget me deletes them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from . import db
from .schema import quarantine as Q

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Damage:
    table: str  # messages | sessions | users | compares | graph_memories
    row_key: str  # the row's id within the user: message id, session id, memory id, compare id, "prefs"
    column: str
    session_id: str = ""  # the session the row belongs to ("" for settings)
    raw: str | None = None  # the stored text as it was

    @property
    def item(self) -> str:
        """The id people and API clients name it by."""
        return f"{self.table}/{self.row_key}/{self.column}"


_seen: set[tuple[str, ...]] = set()  # (database, user, table, row, column) flagged by this process
_seen_lock = threading.Lock()


def flag(engine: Engine, key: str, found: list[Damage]) -> None:
    """Record damaged values of user `key` (idempotent). Called after the read that found them, never
    inside another transaction. A failure to record is logged: the read itself already succeeded."""
    where = str(engine.url)
    with _seen_lock:
        new = [d for d in found if (where, key, d.table, d.row_key, d.column) not in _seen]
    if not new:
        return
    try:
        with db.write(engine) as c:
            for d in new:
                db.insert_ignore(
                    c,
                    Q,
                    {
                        "user_key": key,
                        "tbl": d.table,
                        "row_key": d.row_key,
                        "col": d.column,
                        "session_id": d.session_id,
                        "raw": d.raw,
                        "found_at": time.time(),
                    },
                    ["user_key", "tbl", "row_key", "col"],
                )
    except Exception:
        log.exception("could not record a damaged row")
        return
    with _seen_lock:
        _seen.update((where, key, d.table, d.row_key, d.column) for d in new)
    for d in new:  # no stored text in the log: it is the user's data
        log.warning("damaged stored value quarantined: %s of user %s...", d.item, key[:8])


def items(engine: Engine, key: str) -> list[Damage]:
    with db.read(engine) as c:
        rows = c.execute(sa.select(Q).where(Q.c.user_key == key).order_by(Q.c.found_at, Q.c.tbl, Q.c.row_key))
        return [Damage(r.tbl, r.row_key, r.col, r.session_id, r.raw) for r in rows]


def all_keys(engine: Engine) -> list[str]:
    with db.read(engine) as c:
        return list(c.execute(sa.select(Q.c.user_key).distinct().order_by(Q.c.user_key)).scalars())


def clear(conn: Connection, key: str, table: str | None = None, row_key: str | None = None) -> None:
    """Forget flags of user `key` (all, one table's, or one row's), inside the caller's transaction."""
    q = Q.delete().where(Q.c.user_key == key)
    if table is not None:
        q = q.where(Q.c.tbl == table)
    if row_key is not None:
        q = q.where(Q.c.row_key == row_key)
    conn.execute(q)
    where = str(conn.engine.url)
    with _seen_lock:
        _seen.difference_update(
            {s for s in _seen if s[:2] == (where, key) and table in (None, s[2]) and row_key in (None, s[3])}
        )


def quarantined_memories(conn: Connection, key: str, session_id: str) -> list[str]:
    """Memory ids of a session's damaged graph rows (a rewrite of the session's part keeps them)."""
    q = sa.select(Q.c.row_key).where(Q.c.user_key == key, Q.c.tbl == "graph_memories", Q.c.session_id == session_id)
    return list(conn.execute(q).scalars())
