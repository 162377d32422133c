"""The schema, defined once: the tables as the code queries them, the numbered migrations that create and
change them, and the move of a single-process data dir onto a shared database.

Tables. `metadata` is the one definition of the current schema: the code queries these tables, and
they are created and changed only by the migrations below, so a change here needs a new migration.
tests/test_schema_agrees.py migrates an empty SQLite and an empty PostgreSQL database and compares
what they hold with `metadata`, column by column.

Migrations. Numbered schema migrations with a version table (`schema_version`, one row per applied step).

Why not Alembic: the schema is small and owned by this app alone; migrations must run by
themselves at every replica's start (no separate command, no alembic.ini / env.py to ship), in
one transaction, and adopt the pre-versioning SQLite files as version 1. A list of frozen steps
(DDL text, or a function where rows must be rewritten) does that in ~100 lines; a step is never
edited once released, a change is a new step.

Two replicas starting at once: on PostgreSQL the whole upgrade runs under a transaction-level
advisory lock (DDL is transactional there); on SQLite under BEGIN IMMEDIATE. The loser waits,
then finds nothing left to do.


Legacy data dirs. Moving a single-process data dir onto a shared database (first start with DATABASE_URL set).

The data dir's sessions.sqlite3 (any schema version: it is upgraded in place first) is copied
row by row, ids kept, into the server database in one transaction, only while that database
holds no user yet; the file is then renamed to sessions.sqlite3.migrated (kept: nothing is
lost, and it is never copied twice). JSON graph files are moved by SqlGraphStore.

"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from . import db

# --- schema ------------------------------------------------------

metadata = sa.MetaData()

users = sa.Table(
    "users",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("prefs", sa.Text, nullable=False, server_default="{}"),
    sa.Column("api_client", sa.Integer, nullable=False, server_default="0"),  # migration 7: issued by /new_user
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("date", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False, server_default="chat"),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("closed_at", sa.Float),
    sa.Column("close_error", sa.Text),
    sa.Column("report", sa.Text),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("speaker", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="ok"),
    sa.Column("error", sa.Text),
    sa.Column("strategy", sa.Text),
    sa.Column("reply_to", sa.Integer),
    sa.Column("trace", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("source_turn_id", sa.Text),  # migration 4: the turn's id in an imported history
    sa.Column("turn_no", sa.Integer),  # migration 8: the message's number in its session (its turn id)
)

compares = sa.Table(
    "compares",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("results", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# THEANINE graph (migration 2), keyed like the data dir and Chroma: by a hash of the user id.
graph_memories = sa.Table(
    "graph_memories",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("memory_id", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("time", sa.Text, nullable=False),
    sa.Column("ts", sa.Text, nullable=False),
    sa.Column("turns", sa.Text, nullable=False),  # JSON list of turn ids
    sa.Column("speaker", sa.Text, nullable=False),
    sa.Column("built_by", sa.Text, nullable=False, server_default=""),  # migration 4: how it was made
    sa.Column("excerpt", sa.Text, nullable=False, server_default=""),  # migration 4: source dialogue
)

graph_edges = sa.Table(
    "graph_edges",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("src", sa.Text, primary_key=True),
    sa.Column("dst", sa.Text, primary_key=True),
    sa.Column("relation", sa.Text, nullable=False),
    sa.Column("owner", sa.Text, nullable=False),  # the session whose close made the edge
)

graph_sessions = sa.Table(
    "graph_sessions",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, primary_key=True),
    sa.Column("built_at", sa.Float, nullable=False),
)

graph_versions = sa.Table(
    "graph_versions",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

memory_versions = sa.Table(
    "memory_versions",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

# Damaged stored values (migration 5; sessions/damage.py): one row per bad JSON value, keyed by
# the user's hash; `raw` keeps the stored text as it was.
quarantine = sa.Table(
    "quarantine",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("tbl", sa.Text, primary_key=True),
    sa.Column("row_key", sa.Text, primary_key=True),
    sa.Column("col", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False, server_default=""),
    sa.Column("raw", sa.Text),
    sa.Column("found_at", sa.Float, nullable=False),
)

# Agent keys (migration 7; sessions/agent_keys.py): a person's keys for MCP clients and scripts, stored as a
# hash of the key; `prefix` is the key's first characters, not secret, to tell keys apart in a list.
agent_keys = sa.Table(
    "agent_keys",
    metadata,
    sa.Column("key_hash", sa.Text, primary_key=True),
    sa.Column("user_key", sa.Text, nullable=False),
    sa.Column("prefix", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
    sa.Column("revoked_at", sa.Float),
)


# --- migrations --------------------------------------------------

log = logging.getLogger(__name__)

MIGRATION_LOCK = 7301  # advisory lock namespace of the schema upgrade


def _types(conn: Connection) -> dict:
    if conn.dialect.name == "postgresql":
        return {"id": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "float": "DOUBLE PRECISION"}
    return {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL"}


# Version 1 is the schema the app shipped before versioning (sessions/store.py's CREATE TABLE IF NOT
# EXISTS), so an existing sessions.sqlite3 is adopted as version 1 unchanged.
V1 = """
CREATE TABLE users (
    user_id    TEXT PRIMARY KEY,
    created_at {float} NOT NULL,
    prefs      TEXT NOT NULL DEFAULT '{{}}'
);
CREATE TABLE sessions (
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    date        TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('open', 'closing', 'closed')),
    source      TEXT NOT NULL DEFAULT 'chat',
    created_at  {float} NOT NULL,
    closed_at   {float},
    close_error TEXT,
    report      TEXT,
    PRIMARY KEY (user_id, session_id)
);
CREATE UNIQUE INDEX one_open_session ON sessions (user_id) WHERE status = 'open';
CREATE TABLE messages (
    id         {id},
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    speaker    TEXT NOT NULL,
    text       TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'error')),
    error      TEXT,
    strategy   TEXT,
    reply_to   INTEGER,
    trace      TEXT,
    created_at {float} NOT NULL
);
CREATE INDEX messages_by_session ON messages (user_id, session_id, id);
CREATE TABLE compares (
    id         {id},
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message    TEXT NOT NULL,
    results    TEXT NOT NULL,
    created_at {float} NOT NULL
)
"""

# Version 2: the THEANINE graph (was one JSON file per built session under users/*/theanine_graph).
V2 = """
CREATE TABLE graph_memories (
    user_key   TEXT NOT NULL,
    memory_id  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    event      TEXT NOT NULL,
    time       TEXT NOT NULL,
    ts         TEXT NOT NULL,
    turns      TEXT NOT NULL,
    speaker    TEXT NOT NULL,
    PRIMARY KEY (user_key, memory_id)
);
CREATE INDEX graph_memories_by_session ON graph_memories (user_key, session_id);
CREATE TABLE graph_edges (
    user_key TEXT NOT NULL,
    src      TEXT NOT NULL,
    dst      TEXT NOT NULL,
    relation TEXT NOT NULL,
    owner    TEXT NOT NULL,
    PRIMARY KEY (user_key, src, dst)
);
CREATE INDEX graph_edges_by_owner ON graph_edges (user_key, owner);
CREATE TABLE graph_sessions (
    user_key   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    built_at   {float} NOT NULL,
    PRIMARY KEY (user_key, session_id)
);
CREATE TABLE graph_versions (
    user_key TEXT PRIMARY KEY,
    version  INTEGER NOT NULL
)
"""

# Version 3: a change counter per user and memory kind, so replicas know when to rebuild derived caches
# (SeCom's BM25 index over the segments in Chroma).
V3 = """
CREATE TABLE memory_versions (
    user_key TEXT NOT NULL,
    kind     TEXT NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (user_key, kind)
)
"""

# Version 4: imported turns keep their source's id (LoCoMo "D3:7"), which memory provenance names;
# a memory records how it was made (LLM summary or extracted sentence) and its source dialogue excerpt.
V4 = """
ALTER TABLE messages ADD COLUMN source_turn_id TEXT;
ALTER TABLE graph_memories ADD COLUMN built_by TEXT NOT NULL DEFAULT '';
ALTER TABLE graph_memories ADD COLUMN excerpt TEXT NOT NULL DEFAULT ''
"""

# Version 5: quarantine of damaged stored JSON values (sessions/damage.py).
V5 = """
CREATE TABLE quarantine (
    user_key   TEXT NOT NULL,
    tbl        TEXT NOT NULL,
    row_key    TEXT NOT NULL,
    col        TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    raw        TEXT,
    found_at   {float} NOT NULL,
    PRIMARY KEY (user_key, tbl, row_key, col)
)
"""


def _v6_store_keys_not_ids(conn: Connection) -> None:
    """Version 6: the user tables hold each id's key (memory.userspace.user_key, frozen: sha256, 40 hex
    digits), as the memory stores already did, not the id itself, which is the browser's credential."""
    from memory.userspace import user_key

    tables = ("users", "sessions", "messages", "compares")
    ids: set[str] = set()
    for t in tables:
        ids.update(r[0] for r in conn.exec_driver_sql(f"SELECT DISTINCT user_id FROM {t}"))
    for uid in sorted(ids):
        key = user_key(uid)
        if key != uid:
            for t in tables:
                conn.execute(sa.text(f"UPDATE {t} SET user_id = :k WHERE user_id = :u"), {"k": key, "u": uid})


# Version 7: agent keys (sessions/agent_keys.py); which users were issued to an API client (/new_user) rather
# than to a page: only those ids are served alone by the API and MCP (a page's id needs an agent key).
V7 = """
CREATE TABLE agent_keys (
    key_hash     TEXT PRIMARY KEY,
    user_key     TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    name         TEXT NOT NULL,
    created_at   {float} NOT NULL,
    last_used_at {float},
    revoked_at   {float}
);
CREATE INDEX agent_keys_by_user ON agent_keys (user_key);
ALTER TABLE users ADD COLUMN api_client INTEGER NOT NULL DEFAULT 0
"""

# Version 8: a message's turn id numbers it within its session ("s3:4"), not by the server-wide message
# counter; stored rows keep the number they had (their id), so memory already built still names them.
V8 = """
ALTER TABLE messages ADD COLUMN turn_no INTEGER;
UPDATE messages SET turn_no = id
"""


MIGRATIONS: list[tuple[int, str, str | Callable[[Connection], None]]] = [
    (1, "sessions, messages, traces, preferences, compare runs", V1),
    (2, "THEANINE graph: memories, edges, built sessions, per-user version", V2),
    (3, "per-user change counters of derived memory caches", V3),
    (4, "source turn ids; how a memory was made and its excerpt", V4),
    (5, "quarantine of damaged stored values", V5),
    (6, "users stored by key, not by id", _v6_store_keys_not_ids),
    (7, "agent keys; users issued to an API client", V7),
    (8, "turn numbers per session", V8),
]
LATEST = MIGRATIONS[-1][0]


def _applied(conn: Connection) -> set[int]:
    insp = sa.inspect(conn)
    if not insp.has_table("schema_version"):
        conn.exec_driver_sql(
            f"CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            f"applied_at {_types(conn)['float']} NOT NULL)"
        )
        if insp.has_table("sessions") and insp.has_table("messages"):
            # A data dir from before versioning: its tables are version 1 exactly.
            _record(conn, 1, MIGRATIONS[0][1] + " (adopted)")
            log.info("adopted an existing pre-versioning database as schema version 1")
    return {r[0] for r in conn.exec_driver_sql("SELECT version FROM schema_version")}


def _record(conn: Connection, version: int, name: str) -> None:
    conn.execute(
        sa.text("INSERT INTO schema_version (version, name, applied_at) VALUES (:v, :n, :t)"),
        {"v": version, "n": name, "t": time.time()},
    )


def upgrade(engine: Engine) -> list[int]:
    """Apply every migration not yet applied, in order, in one transaction. Returns the versions applied."""
    with db.write(engine) as conn:
        if db.is_postgres(engine):
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:a, 0)"), {"a": MIGRATION_LOCK})
        done = _applied(conn)
        new = []
        for version, name, ddl in MIGRATIONS:
            if version in done:
                continue
            if callable(ddl):
                ddl(conn)
            else:
                for stmt in ddl.format(**_types(conn)).split(";"):
                    if stmt.strip():
                        conn.exec_driver_sql(stmt)
            _record(conn, version, name)
            new.append(version)
    if new:
        db.purge_deleted(engine)  # rewritten rows (version 6: the ids) leave no old copy in the log
        log.info("database schema upgraded: applied %s", new)
    return new


def version(engine: Engine) -> int:
    with db.read(engine) as conn:
        return int(conn.exec_driver_sql("SELECT COALESCE(MAX(version), 0) FROM schema_version").scalar_one())


# --- legacy ------------------------------------------------------


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
            if out.execute(sa.select(sa.func.count()).select_from(users)).scalar():
                log.warning("%s not copied: the database already has users", sqlite_path)
                return None
            with db.read(src.engine) as inp:
                for table in metadata.sorted_tables:
                    rows = [dict(r._mapping) for r in inp.execute(sa.select(table))]
                    if rows:
                        out.execute(table.insert(), rows)
                    counts[table.name] = len(rows)
            if target.postgres:  # ids were copied: move the identity sequences past them
                for table in (messages, compares):
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
