"""Damaged stored values: how they are flagged and kept aside (quarantine), what can be done with them
(rebuild or drop), and the whole-database check behind `python -m sessions check`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from . import db, schema
from .db import Damage
from .schema import compares as C
from .schema import messages as M
from .schema import quarantine as Q
from .schema import sessions as S
from .schema import users as U

# --- quarantine --------------------------------------------------
# Quarantine of damaged stored values (sessions/db.py finds them).
#
# A damaged row is kept where it is (and its raw text copied here, so no later rewrite of its
# neighbours loses it), flagged by one row of the `quarantine` table, and left out of every view,
# retrieval and export until the user (or `python -m sessions check --repair`) rebuilds or drops
# it. Rows are keyed by the hash of the user id, like the graph tables; Forget me deletes them.

log = logging.getLogger(__name__)


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


# --- repair ------------------------------------------------------
# What can be done with a damaged stored value: rebuild or drop it.
#
# * a memory of the THEANINE graph (`graph_memories.turns`): rebuild = the session's memory is
#   marked unbuilt and the session "closing", so the next End session or app start builds it again
#   from its stored turns; drop = that memory row and its edges are deleted.
# * a close report (`sessions.report`): rebuild = the close runs again (memory already built is
#   kept, the report is written anew); drop = the report is cleared.
# * a reply's trace, saved settings, a compare run: nothing to rebuild them from; both actions drop
#   the value (the reply text stays; settings return to the defaults; the compare run is deleted).
#
# Each step is one transaction and clears the row's flag. Used by the app (the data room's `repair`)
# and by `python -m sessions check --repair`.

ACTIONS = ("rebuild", "drop")


def describe(d: Damage, seq: int | None = None) -> str:
    """The damaged item and what can be done, for people."""
    where = f"session {seq}" if seq is not None else f"session {d.session_id}"
    if d.table == "graph_memories":
        return (
            f"Memory {d.row_key} of {where} could not be read; it is left out of your THEANINE memory (the "
            f"rest works). Rebuild {where}'s memory from its stored turns, or drop the damaged memory."
        )
    if d.table == "sessions":
        return (
            f"The memory report of {where} could not be read (your memory is not affected). Rebuild it, "
            "or drop the report."
        )
    if d.table == "messages":
        return (
            f"The trace of a reply in {where} could not be read; the reply is kept, without its "
            "“why this reply” details. Drop the damaged trace to clear this note."
        )
    if d.table == "compares":
        return f"A compare run in {where} could not be read and is left out. Drop it to clear this note."
    return "Your saved settings could not be read; the defaults are in use. Save your settings again (or drop them)."


class GraphRepair(Protocol):
    """What a repair needs of the graph store it rebuilds with (sessions.graph_store.SqlGraphStore, which
    imports this module: so it is passed in)."""

    def unbuild(self, c: Connection, k: str, session_id: str) -> None: ...

    def drop_memory_row(self, c: Connection, k: str, memory_id: str) -> None: ...


def repair(engine: Engine, graphs: GraphRepair, user_id: str, key: str, d: Damage, action: str) -> str:
    """Rebuild or drop one damaged value of user `user_id` (hash `key`); a damaged memory is dropped or
    unbuilt in `graphs`, the graph store on `engine`. Returns what was done."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}")
    with db.write(engine) as c:
        done = _repair(c, graphs, user_id, key, d, action)
        clear(c, key, d.table, d.row_key)
    return done


def _repair(c: Connection, graphs: GraphRepair, user_id: str, key: str, d: Damage, action: str) -> str:
    if d.table == "graph_memories":
        if action == "drop":
            graphs.drop_memory_row(c, key, d.row_key)
            return "memory dropped"
        graphs.unbuild(c, key, d.session_id)
        _reopen(c, user_id, d.session_id)
        return "session memory will be rebuilt"
    if d.table == "sessions":
        q = S.update().where(S.c.user_id == user_id, S.c.session_id == d.row_key)
        if action == "rebuild" and _reopen(c, user_id, d.row_key):
            return "session close will run again"
        c.execute(q.values(report=None))
        return "report dropped"
    if d.table == "messages":
        c.execute(M.update().where(M.c.user_id == user_id, M.c.id == int(d.row_key)).values(trace=None))
        return "trace dropped"
    if d.table == "compares":
        c.execute(C.delete().where(C.c.user_id == user_id, C.c.id == int(d.row_key)))
        return "compare run dropped"
    c.execute(U.update().where(U.c.user_id == user_id).values(prefs="{}"))
    return "settings reset to the defaults"


def _reopen(c: Connection, user_id: str, session_id: str) -> bool:
    """A closed session goes back to "closing" (its memory is built again); False if it is not closed."""
    cur = c.execute(
        S.update()
        .where(S.c.user_id == user_id, S.c.session_id == session_id, S.c.status == "closed")
        .values(status="closing", report=None, close_error=None)
    )
    return cur.rowcount == 1


def find(engine: Engine, key: str, item: str) -> Damage | None:
    """The flagged value named `item` ("table/row/column", Damage.item) of user `key`."""
    return next((d for d in items(engine, key) if d.item == item), None)


def session_numbers(engine: Engine, user_id: str) -> dict[str, int]:
    with db.read(engine) as c:
        return dict(c.execute(sa.select(S.c.session_id, S.c.seq).where(S.c.user_id == user_id)).all())


# --- check -------------------------------------------------------
# Check (and repair) the app's database: `python -m sessions check [--repair | --drop] [--data-dir DIR]`.
#
# Reads every stored JSON value (sessions/db.py lists the columns) of every user and
# reports the damaged ones; each is flagged in the quarantine table, so the app leaves it out and
# tells its owner. With --repair, each is rebuilt where it can be (a memory: its session's memory is
# built again from the stored turns at the app's next start; a close report: the close runs again)
# and dropped otherwise; --drop drops everything damaged. SQLite files also get PRAGMA
# integrity_check. The database is DATABASE_URL when set, else DATA_DIR/sessions.sqlite3.
#
# Exit status: 0 when nothing is damaged (or all was repaired), 1 when damage remains.

# How each JSON table names a row and its owner: (key column, owner column, session column).
_ROWS = {
    "users": ("user_id", "user_id", None),
    "sessions": ("session_id", "user_id", "session_id"),
    "messages": ("id", "user_id", "session_id"),
    "compares": ("id", "user_id", "session_id"),
    "graph_memories": ("memory_id", "user_key", "session_id"),
}


@dataclass
class Finding:
    key: str  # the owner's key (every owner column holds keys: migration 6)
    user_id: str  # the same key, or "" when it has no user row (an orphan graph row)
    damage: Damage
    done: str = ""


@dataclass
class Report:
    scanned: dict[str, int] = field(default_factory=dict)  # "table.column" -> rows read
    findings: list[Finding] = field(default_factory=list)
    integrity: str = ""  # SQLite's PRAGMA integrity_check ("ok"), "" elsewhere


def scan(engine: Engine) -> Report:
    """Every JSON value read through the checked reader; damaged ones flagged for their owners."""
    rep = Report()
    with db.read(engine) as c:
        if engine.dialect.name == "sqlite":
            rep.integrity = str(c.exec_driver_sql("PRAGMA integrity_check").scalar())
        users = set(c.execute(sa.select(schema.users.c.user_id)).scalars())  # keys, as every owner column
        for (table, column), _ in db.COLUMNS.items():
            t = schema.metadata.tables[table]
            key_col, owner_col, session_col = _ROWS[table]
            cols = [t.c[key_col], t.c[owner_col], t.c[column]] + ([t.c[session_col]] if session_col else [])
            n = 0
            for r in c.execute(sa.select(*cols)):
                n += 1
                _, bad = db.read_json(table, column, r[2])
                if not bad:
                    continue
                k = str(r[1])
                row_key = "prefs" if table == "users" else str(r[0])
                d = Damage(table, row_key, column, str(r[3]) if session_col else "", r[2])
                rep.findings.append(Finding(k, k if k in users else "", d))
            rep.scanned[f"{table}.{column}"] = n
    for k in {f.key for f in rep.findings}:
        flag(engine, k, [f.damage for f in rep.findings if f.key == k])
    return rep


def repair_all(engine: Engine, graphs: GraphRepair, rep: Report, drop: bool = False) -> None:
    for f in rep.findings:
        action = "drop" if drop or f.damage.table not in ("graph_memories", "sessions") else "rebuild"
        if not f.user_id:  # no such user any more: nothing to rebuild for, the row is dropped
            action = "drop"
        f.done = repair(engine, graphs, f.user_id, f.key, f.damage, action)


def render(rep: Report) -> str:
    lines = [f"SQLite integrity_check: {rep.integrity}"] if rep.integrity else []
    lines += [f"{name}: {n} rows read" for name, n in rep.scanned.items()]
    if not rep.findings:
        lines.append("No damaged stored values.")
    for f in rep.findings:
        d = f.damage
        where = f" (session {d.session_id})" if d.session_id else ""
        lines.append(
            f"DAMAGED {d.table}.{d.column} row {d.row_key}{where}, user {f.key[:8]}...: {f.done or 'quarantined'}"
        )
    return "\n".join(lines)
