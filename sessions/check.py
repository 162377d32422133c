"""Check (and repair) the app's database: `python -m sessions.check [--repair | --drop] [--data-dir DIR]`.

Reads every stored JSON value (sessions/stored_json.py lists the columns) of every user and
reports the damaged ones; each is flagged in the quarantine table, so the app leaves it out and
tells its owner. With --repair, each is rebuilt where it can be (a memory: its session's memory is
built again from the stored turns at the app's next start; a close report: the close runs again)
and dropped otherwise; --drop drops everything damaged. SQLite files also get PRAGMA
integrity_check. The database is DATABASE_URL when set, else DATA_DIR/sessions.sqlite3.

Exit status: 0 when nothing is damaged (or all was repaired), 1 when damage remains.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from . import db, quarantine, repair, schema, stored_json
from .quarantine import Damage

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
        for (table, column), _ in stored_json.COLUMNS.items():
            t = schema.metadata.tables[table]
            key_col, owner_col, session_col = _ROWS[table]
            cols = [t.c[key_col], t.c[owner_col], t.c[column]] + ([t.c[session_col]] if session_col else [])
            n = 0
            for r in c.execute(sa.select(*cols)):
                n += 1
                _, bad = stored_json.read(table, column, r[2])
                if not bad:
                    continue
                k = str(r[1])
                row_key = "prefs" if table == "users" else str(r[0])
                d = Damage(table, row_key, column, str(r[3]) if session_col else "", r[2])
                rep.findings.append(Finding(k, k if k in users else "", d))
            rep.scanned[f"{table}.{column}"] = n
    for k in {f.key for f in rep.findings}:
        quarantine.flag(engine, k, [f.damage for f in rep.findings if f.key == k])
    return rep


def repair_all(engine: Engine, rep: Report, drop: bool = False) -> None:
    for f in rep.findings:
        action = "drop" if drop or f.damage.table not in ("graph_memories", "sessions") else "rebuild"
        if not f.user_id:  # no such user any more: nothing to rebuild for, the row is dropped
            action = "drop"
        f.done = repair.repair(engine, f.user_id, f.key, f.damage, action)


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sessions.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repair", action="store_true", help="rebuild (or drop) every damaged value")
    ap.add_argument("--drop", action="store_true", help="drop every damaged value instead of rebuilding")
    ap.add_argument("--data-dir", help="the app's data dir (default: the app's, from MEMORY_DATA_DIR)")
    args = ap.parse_args(argv)
    if args.data_dir is None:
        from memory.settings import Settings

        args.data_dir = Settings.from_env(dict(os.environ)).data_dir
    url = os.environ.get("DATABASE_URL", "").strip()
    from .store import Store

    store = Store.for_data_dir(Path(args.data_dir), url)  # applies migrations (the quarantine table)
    rep = scan(store.engine)
    if args.repair or args.drop:
        repair_all(store.engine, rep, drop=args.drop)
    print(render(rep))
    damaged_left = rep.findings and not (args.repair or args.drop)
    return 1 if damaged_left or rep.integrity not in ("", "ok") else 0


if __name__ == "__main__":
    sys.exit(main())
