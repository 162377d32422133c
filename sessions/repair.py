"""What can be done with a damaged stored value (sessions/quarantine.py): rebuild or drop it.

* a memory of the THEANINE graph (`graph_memories.turns`): rebuild = the session's memory is
  marked unbuilt and the session "closing", so the next End session or app start builds it again
  from its stored turns; drop = that memory row and its edges are deleted.
* a close report (`sessions.report`): rebuild = the close runs again (memory already built is
  kept, the report is written anew); drop = the report is cleared.
* a reply's trace, saved settings, a compare run: nothing to rebuild them from; both actions drop
  the value (the reply text stays; settings return to the defaults; the compare run is deleted).

Each step is one transaction and clears the row's flag. Used by the app (SessionService.repair)
and by `python -m sessions.check --repair`.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from . import db, quarantine
from .graph_store import SqlGraphStore
from .quarantine import Damage
from .schema import compares as C
from .schema import messages as M
from .schema import sessions as S
from .schema import users as U

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


def repair(engine: Engine, user_id: str, key: str, d: Damage, action: str) -> str:
    """Rebuild or drop one damaged value of user `user_id` (hash `key`); returns what was done."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}")
    with db.write(engine) as c:
        done = _repair(c, user_id, key, d, action)
        quarantine.clear(c, key, d.table, d.row_key)
    return done


def _repair(c: Connection, user_id: str, key: str, d: Damage, action: str) -> str:
    if d.table == "graph_memories":
        graphs = SqlGraphStore(c.engine)
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
    return next((d for d in quarantine.items(engine, key) if d.item == item), None)


def session_numbers(engine: Engine, user_id: str) -> dict[str, int]:
    with db.read(engine) as c:
        return dict(c.execute(sa.select(S.c.session_id, S.c.seq).where(S.c.user_id == user_id)).all())
