"""Moving a single-process data dir onto a shared database (first start with DATABASE_URL set).

The data dir's sessions.sqlite3 (any schema version: it is upgraded in place first) is copied
row by row, ids kept, into the server database in one transaction, only while that database
holds no user yet; the file is then renamed to sessions.sqlite3.migrated (kept: nothing is
lost, and it is never copied twice). JSON graph files are moved by SqlGraphStore.
"""

from __future__ import annotations

import logging
from pathlib import Path

import sqlalchemy as sa

from . import db, schema

log = logging.getLogger(__name__)

COPY_LOCK = 7303
MIGRATED_SUFFIX = ".migrated"


def copy_sqlite_into(src, target) -> dict[str, int] | None:
    """Copy every table of `src` (the Store of a data dir's SQLite file: opening it upgraded the file to
    the current schema) into `target` (a Store on another database); `src` is closed after.

    Returns {table: rows} when copied, None when skipped (the target already has users).
    """
    sqlite_path = Path(src.path)
    counts: dict[str, int] = {}
    try:
        with db.write(target.engine) as out:
            if target.postgres:
                out.execute(sa.text("SELECT pg_advisory_xact_lock(:a, 0)"), {"a": COPY_LOCK})
            if out.execute(sa.select(sa.func.count()).select_from(schema.users)).scalar():
                log.warning("%s not copied: the database already has users", sqlite_path)
                return None
            with db.read(src.engine) as inp:
                for table in schema.metadata.sorted_tables:
                    rows = [dict(r._mapping) for r in inp.execute(sa.select(table))]
                    if rows:
                        out.execute(table.insert(), rows)
                    counts[table.name] = len(rows)
            if target.postgres:  # ids were copied: move the identity sequences past them
                for table in (schema.messages, schema.compares):
                    out.execute(
                        sa.text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                            f"GREATEST((SELECT MAX(id) FROM {table.name}), 1))"
                        )
                    )
    finally:
        src.engine.dispose()
    sqlite_path.rename(sqlite_path.with_name(sqlite_path.name + MIGRATED_SUFFIX))
    log.info("copied %s into the database: %s", sqlite_path, counts)
    return counts
