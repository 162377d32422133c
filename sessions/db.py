"""The relational database: its engine and transactions, the rows it returns, the one reader of the JSON it
keeps, per-user change counters, and the errors people see when it is down.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from memory.trace_types import CloseReportDict, TraceDict
from memory.userspace import user_key

from . import schema

# --- errors ------------------------------------------------------
# Errors whose message is written for the person using the app (shown as is, never a stack trace).


class UserError(ValueError):
    """Something the user can fix or retry; the message says what."""


DATABASE_DOWN = "The database cannot be reached just now; everything saved before is kept. Try again in a moment."

NOT_STORED = "The database cannot be reached just now: your message was not saved. Send it again in a moment."


class DatabaseUnavailable(UserError):
    """The relational database is down or restarting (a PostgreSQL restart, a lost connection)."""

    def __init__(self, message: str = DATABASE_DOWN):
        super().__init__(message)


@contextmanager
def outage_as(message: str) -> Iterator[None]:
    """Inside, the database being down is said to people as `message` (what the step kept or lost: "not
    saved", "saved but no reply"); every other error passes as it is."""
    try:
        yield
    except Exception as e:
        if database_down(e):
            raise DatabaseUnavailable(message) from None
        raise


def database_down(exc: BaseException) -> bool:
    """Whether `exc` is the database being unreachable (not a bad statement or a broken row): the
    driver's operational errors, and any error on a connection the server dropped."""
    if isinstance(exc, DatabaseUnavailable):
        return True
    if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and bool(exc.connection_invalidated)


# --- db ----------------------------------------------------------
# The relational database: one SQLAlchemy engine, embedded SQLite by default, PostgreSQL with DATABASE_URL.
#
# Every app replica points at the same PostgreSQL server; without DATABASE_URL the
# app keeps today's single-process layout (`sessions.sqlite3` in the data dir).
#
# Transactions: `write()` is one write transaction. On SQLite it starts with
# BEGIN IMMEDIATE, so a read-then-write step (the next session number) never
# races another writer; on PostgreSQL the per-user steps lock the user's row
# (`lock_user`), which serialises them across replicas. `read()` never blocks a
# writer (WAL on SQLite, MVCC on PostgreSQL).

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


# --- stored_json -------------------------------------------------
# The one reader of JSON kept in the database: every JSON column is decoded and shape-checked here.
#
# A stored value that does not decode, or decodes to the wrong shape, is *damaged*: the reader
# returns the column's empty value and says so, and the caller quarantines the row
# (sessions/damage.py) instead of failing the whole request. One bad row then costs one
# trace, one report or one memory, never the user's history.


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


# Every column that holds JSON (sessions/schema.py). sessions.damage scans exactly these.
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


def read_json(table: str, column: str, text: str | None) -> tuple[Any, bool]:
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


# --- rows --------------------------------------------------------
# The rows the store returns (sessions, messages) and how a database row becomes one: plain
# columns by name, the JSON column through the checked reader (above).


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
    report: CloseReportDict | None
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
    trace: TraceDict | None
    created_at: float
    source_turn_id: str | None = None  # the turn's id in an imported history (LoCoMo "D3:7")
    turn_no: int | None = None  # its number in the session (rows stored before numbering: their id)
    damaged: str = ""  # "trace" when the stored trace could not be read (quarantined; trace is None)

    def turn_id(self) -> str:
        """The id memory provenance uses: the source's id for imported turns, else session:number (per session,
        so a turn id tells nothing of other users' messages)."""
        return self.source_turn_id or chat_turn_id(self.session_id, self.turn_no, self.id)


def chat_turn_id(session_id: str, turn_no: int | None, message_id: int) -> str:
    """A chat message's turn id: "s3:4", the 4th message of session 3 (a row stored before the numbering: its id)."""
    return f"{session_id}:{turn_no or message_id}"


class CompareReply(TypedDict, total=False):
    """One strategy's answer in a comparison (sessions.lifecycle's `Chat.compare`), as the page draws it and
    the database stores it (total=False: a stored run of an earlier version may lack a key)."""

    text: str  # the reply so far
    status: str  # waiting | what the agent is doing | answering | done | failed
    trace: TraceDict | None  # the reply's trace, once done
    error: str | None  # a message for people
    done: bool


R = TypeVar("R", "SessionRow", "MessageRow")
# The JSON columns of each row type: (column, table, the row's key column), read by sessions.db.
_JSON_COLUMNS = {"SessionRow": ("report", "sessions", "session_id"), "MessageRow": ("trace", "messages", "id")}


def row_of(cls: type[R], r, damaged: list[Damage]) -> R:
    """A database row as `cls` (SessionRow or MessageRow): its fields by column name; its JSON column
    read through the checked reader (a damaged value becomes None, `damaged` names the column, and
    the row is added to `damaged` for quarantine); a field the query did not select keeps its default."""
    m = r._mapping
    values = {f.name: m[f.name] for f in dataclasses.fields(cls) if f.name in m and f.name != "damaged"}
    col, table, key = _JSON_COLUMNS[cls.__name__]
    if col in values:
        values[col], bad = read_json(table, col, values[col])
        if bad:
            values["damaged"] = col
            damaged.append(Damage(table, str(m[key]), col, m["session_id"], m[col]))
    if "n_messages" in values:
        values["n_messages"] = values["n_messages"] or 0
    return cls(**values)


# --- versions ----------------------------------------------------
# Per-user change counters in the shared database (memory_versions): a process that changed a
# user's memory of some kind bumps it; every replica compares it with the one its cache was built at.


class MemoryVersions:
    def __init__(self, engine):
        self.engine = engine

    def version(self, user_id: str, kind: str) -> int:
        with read(self.engine) as c:
            return int(
                c.execute(
                    sa.select(schema.memory_versions.c.version).where(
                        schema.memory_versions.c.user_key == user_key(user_id), schema.memory_versions.c.kind == kind
                    )
                ).scalar()
                or 0
            )

    def bump(self, user_id: str, kind: str) -> int:
        with write(self.engine) as c:
            return bump_version(c, schema.memory_versions, {"user_key": user_key(user_id), "kind": kind})
