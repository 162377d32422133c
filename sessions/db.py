"""The relational database: one SQLAlchemy engine, embedded SQLite by default, PostgreSQL with DATABASE_URL.

Every app replica points at the same PostgreSQL server; without DATABASE_URL the
app keeps today's single-process layout (`sessions.sqlite3` in the data dir).

Transactions: `write()` is one write transaction. On SQLite it starts with
BEGIN IMMEDIATE, so a read-then-write step (the next session number) never
races another writer; on PostgreSQL the per-user steps lock the user's row
(`lock_user`), which serialises them across replicas. `read()` never blocks a
writer (WAL on SQLite, MVCC on PostgreSQL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

_WRITE = "memory_chat_write"  # execution option that marks a write transaction (SQLite: BEGIN IMMEDIATE)


def sqlite_url(path: Path | str) -> str:
    return f"sqlite:///{Path(path)}"


def normalise_url(url: str) -> str:
    """postgres://... and postgresql://... (what hosts hand out) use psycopg 3, the one driver we ship."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = sa.engine.make_url(url).database
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        _sqlite_transactions(engine)
        return engine
    # pre_ping: a replica survives a database restart (stale pooled connections are replaced).
    return sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


def _sqlite_transactions(engine: Engine) -> None:
    """pysqlite's own transaction handling is off; we emit BEGIN (reads) or BEGIN IMMEDIATE (writes)."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA secure_delete=ON")  # deleted text is overwritten, not left in free pages
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection):
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def purge_deleted(engine: Engine) -> None:
    """After deletions (a memory, Forget me): SQLite's write-ahead log, which still holds the old
    page versions, is checkpointed and emptied. PostgreSQL keeps dead row versions until VACUUM."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


@contextmanager
def write(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn


@contextmanager
def read(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        yield conn


def lock_key(namespace: int, text: str) -> tuple[int, int]:
    """Two int4 keys for pg_advisory_lock: a namespace and a hash of `text` (a collision only serialises more)."""
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:4], "big", signed=True)
    return namespace, h


def _insert(conn: Connection) -> Any:
    """The dialect's INSERT: both PostgreSQL's and SQLite's have ON CONFLICT."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def insert_ignore(conn: Connection, table: sa.Table, values: dict, keys: list[str]) -> None:
    """INSERT unless a row with the same `keys` exists (ON CONFLICT DO NOTHING)."""
    conn.execute(_insert(conn)(table).values(**values).on_conflict_do_nothing(index_elements=keys))


def bump_version(conn: Connection, table: sa.Table, keys: dict) -> int:
    """Add one to `version` in the row of `table` with `keys` (made at 1 if missing); the new version."""
    stmt = _insert(conn)(table).values(**keys, version=1)
    stmt = stmt.on_conflict_do_update(index_elements=list(keys), set_={"version": table.c.version + 1})
    return int(conn.execute(stmt.returning(table.c.version)).scalar_one())
