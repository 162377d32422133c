"""SQLite persistence of users, sessions, messages, reply traces and compare runs.

One database file under the data directory, in WAL mode so readers never wait
for the writer. A new connection per operation keeps it safe across Gradio's
worker threads. Every query names the user id in its WHERE clause: no row of
one user can be read or changed through another user's id.

Session status: "open" (the user is chatting in it; at most one per user),
"closing" (ended, memory not yet built: a restart re-runs the build) and
"closed" (memory built; `report` holds the close report).
"""
from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .ids import check_user_id
from .text import clean_obj, clean_text

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    user_id    TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    prefs      TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS sessions (
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    date        TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('open', 'closing', 'closed')),
    source      TEXT NOT NULL DEFAULT 'chat',
    created_at  REAL NOT NULL,
    closed_at   REAL,
    close_error TEXT,
    report      TEXT,
    PRIMARY KEY (user_id, session_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS one_open_session ON sessions (user_id) WHERE status = 'open';
CREATE TABLE IF NOT EXISTS messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
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
    created_at REAL NOT NULL,
    source_turn_id TEXT
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages (user_id, session_id, id);
CREATE TABLE IF NOT EXISTS compares (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message    TEXT NOT NULL,
    results    TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


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


@dataclass
class MessageRow:
    id: int
    session_id: str
    role: str          # user | assistant
    speaker: str       # "user"/"assistant" in chats; the person's name in imported LoCoMo sessions
    text: str
    status: str        # ok | error
    error: str | None
    strategy: str | None
    reply_to: int | None
    trace: dict | None
    created_at: float
    source_turn_id: str | None = None   # the turn's id in an imported history (LoCoMo "D3:7")

    def turn_id(self) -> str:
        """The id memory provenance uses: the source's id for imported turns, else session:message."""
        return self.source_turn_id or f"{self.session_id}:{self.id}"


def _loads(s: str | None):
    return json.loads(s) if s else None


class Store:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            cols = {r["name"] for r in db.execute("PRAGMA table_info(messages)")}
            if "source_turn_id" not in cols:          # databases made before imports kept turn ids
                db.execute("ALTER TABLE messages ADD COLUMN source_turn_id TEXT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA synchronous=NORMAL")
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE so read-then-write steps (seq numbers) never race."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # --- users -----------------------------------------------------------------------
    def ensure_user(self, user_id: str) -> None:
        check_user_id(user_id)
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO users (user_id, created_at) VALUES (?, ?)", (user_id, time.time()))

    def user_exists(self, user_id: str) -> bool:
        with self._connect() as db:
            return db.execute("SELECT 1 FROM users WHERE user_id = ?", (user_id,)).fetchone() is not None

    def get_prefs(self, user_id: str) -> dict:
        with self._connect() as db:
            row = db.execute("SELECT prefs FROM users WHERE user_id = ?", (user_id,)).fetchone()
        return json.loads(row["prefs"]) if row else {}

    def set_prefs(self, user_id: str, prefs: dict) -> None:
        self.ensure_user(user_id)
        with self._write() as db:
            db.execute("UPDATE users SET prefs = ? WHERE user_id = ?", (json.dumps(clean_obj(prefs)), user_id))

    def delete_user(self, user_id: str) -> None:
        check_user_id(user_id)
        with self._write() as db:
            for table in ("messages", "compares", "sessions", "users"):
                db.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))

    # --- sessions ----------------------------------------------------------------------
    @staticmethod
    def _next_seq(db: sqlite3.Connection, user_id: str) -> int:
        row = db.execute("SELECT COALESCE(MAX(seq), 0) AS m FROM sessions WHERE user_id = ?", (user_id,)).fetchone()
        return int(row["m"]) + 1

    @staticmethod
    def _insert_session(db, user_id: str, date: str, status: str, source: str) -> str:
        seq = Store._next_seq(db, user_id)
        sid = f"s{seq}"
        db.execute("INSERT INTO sessions (user_id, session_id, seq, date, status, source, created_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)", (user_id, sid, seq, clean_text(date), status, source, time.time()))
        return sid

    def _session_row(self, row: sqlite3.Row) -> SessionRow:
        return SessionRow(row["session_id"], row["seq"], row["date"], row["status"], row["source"],
                          row["created_at"], row["closed_at"], row["close_error"], _loads(row["report"]),
                          row["n_messages"] if "n_messages" in row.keys() else 0)

    def open_session(self, user_id: str, default_date: str) -> SessionRow:
        """The user's open session, created (with `default_date`) if there is none."""
        self.ensure_user(user_id)
        with self._write() as db:
            row = db.execute("SELECT session_id FROM sessions WHERE user_id = ? AND status = 'open'",
                             (user_id,)).fetchone()
            sid = row["session_id"] if row else self._insert_session(db, user_id, default_date, "open", "chat")
        return self.session(user_id, sid)

    def session(self, user_id: str, session_id: str) -> SessionRow | None:
        with self._connect() as db:
            row = db.execute(
                "SELECT s.*, (SELECT COUNT(*) FROM messages m WHERE m.user_id = s.user_id "
                "AND m.session_id = s.session_id AND m.status = 'ok') AS n_messages "
                "FROM sessions s WHERE s.user_id = ? AND s.session_id = ?", (user_id, session_id)).fetchone()
        return self._session_row(row) if row else None

    def sessions(self, user_id: str, status: str | None = None) -> list[SessionRow]:
        q = ("SELECT s.*, (SELECT COUNT(*) FROM messages m WHERE m.user_id = s.user_id "
             "AND m.session_id = s.session_id AND m.status = 'ok') AS n_messages FROM sessions s WHERE s.user_id = ?")
        args: tuple = (user_id,)
        if status:
            q += " AND s.status = ?"
            args += (status,)
        with self._connect() as db:
            return [self._session_row(r) for r in db.execute(q + " ORDER BY s.seq", args)]

    def set_session_date(self, user_id: str, session_id: str, date: str) -> None:
        with self._write() as db:
            db.execute("UPDATE sessions SET date = ? WHERE user_id = ? AND session_id = ? AND status = 'open'",
                       (clean_text(date), user_id, session_id))

    def end_open_session(self, user_id: str, session_id: str, next_date: str) -> str | None:
        """Mark the open session "closing" and open a new one, in one transaction.

        Returns the new session id, or None if `session_id` was no longer the open one
        (another tab ended it first).
        """
        with self._write() as db:
            cur = db.execute("UPDATE sessions SET status = 'closing', closed_at = ?, close_error = NULL "
                             "WHERE user_id = ? AND session_id = ? AND status = 'open'",
                             (time.time(), user_id, session_id))
            if cur.rowcount != 1:
                return None
            return self._insert_session(db, user_id, next_date, "open", "chat")

    def mark_closed(self, user_id: str, session_id: str, report: dict) -> None:
        with self._write() as db:
            db.execute("UPDATE sessions SET status = 'closed', close_error = NULL, report = ? "
                       "WHERE user_id = ? AND session_id = ? AND status = 'closing'",
                       (json.dumps(clean_obj(report)), user_id, session_id))

    def mark_close_failed(self, user_id: str, session_id: str, error: str) -> None:
        with self._write() as db:
            db.execute("UPDATE sessions SET close_error = ? WHERE user_id = ? AND session_id = ? AND status = 'closing'",
                       (clean_text(error), user_id, session_id))

    def users_with_pending_closes(self) -> list[str]:
        """Across all users: who has sessions whose memory build did not complete (startup recovery)."""
        with self._connect() as db:
            return [r["user_id"] for r in db.execute(
                "SELECT DISTINCT user_id FROM sessions WHERE status = 'closing' ORDER BY user_id")]

    def add_imported_sessions(self, user_id: str,
                              sessions: list[tuple[str, list[tuple[str, str, str, str | None]]]]) -> list[str]:
        """Store whole sessions [(date, [(role, speaker, text, source_turn_id)])] as "closing", all or nothing.

        Imported sessions are earlier history: an open session without messages is moved after
        them, so sessions stay numbered in the order they happened. Source turn ids are kept; if
        the user already has one of them (the same file imported twice), this import's ids get a
        prefix "i{n}/" so that every turn id stays unique within the user.
        """
        self.ensure_user(user_id)
        ids = []
        now = time.time()
        wanted = {tid for _, turns in sessions for *_, tid in turns if tid}
        with self._write() as db:
            taken = {r[0] for r in db.execute(
                "SELECT source_turn_id FROM messages WHERE user_id = ? AND source_turn_id IS NOT NULL", (user_id,))}
            prefix = ""
            if wanted & taken:
                n = db.execute("SELECT COUNT(*) FROM sessions WHERE user_id = ? AND source = 'import'",
                               (user_id,)).fetchone()[0]
                prefix = f"i{n + 1}/"
            empty_open = db.execute(
                "SELECT s.session_id, s.date FROM sessions s WHERE s.user_id = ? AND s.status = 'open' AND NOT EXISTS "
                "(SELECT 1 FROM messages m WHERE m.user_id = s.user_id AND m.session_id = s.session_id)",
                (user_id,)).fetchone()
            if empty_open:
                db.execute("DELETE FROM sessions WHERE user_id = ? AND session_id = ?",
                           (user_id, empty_open["session_id"]))
            for date, turns in sessions:
                sid = self._insert_session(db, user_id, date, "closing", "import")
                db.executemany(
                    "INSERT INTO messages (user_id, session_id, role, speaker, text, status, created_at, source_turn_id) "
                    "VALUES (?, ?, ?, ?, ?, 'ok', ?, ?)",
                    [(user_id, sid, r, clean_text(s), clean_text(t), now, prefix + tid if tid else None)
                     for r, s, t, tid in turns])
                ids.append(sid)
            if empty_open:
                self._insert_session(db, user_id, empty_open["date"], "open", "chat")
        return ids

    # --- messages ----------------------------------------------------------------------
    def _message_row(self, row: sqlite3.Row) -> MessageRow:
        return MessageRow(row["id"], row["session_id"], row["role"], row["speaker"], row["text"], row["status"],
                          row["error"], row["strategy"], row["reply_to"], _loads(row["trace"]), row["created_at"],
                          row["source_turn_id"])

    def add_user_message(self, user_id: str, session_id: str, text: str) -> int | None:
        """Store a user message in `session_id` if it is still the open session, else return None
        (another tab ended it a moment ago: the caller sends into the new one)."""
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO messages (user_id, session_id, role, speaker, text, created_at) "
                "SELECT ?, ?, 'user', 'user', ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE user_id = ? "
                "AND session_id = ? AND status = 'open')",
                (user_id, session_id, clean_text(text), time.time(), user_id, session_id))
            return int(cur.lastrowid) if cur.rowcount == 1 else None

    def add_reply(self, user_id: str, session_id: str, reply_to: int, text: str, strategy: str,
                  trace: dict | None, error: str | None = None) -> int:
        """The assistant's reply to message `reply_to`, or (error set) the record of a failed one."""
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO messages (user_id, session_id, role, speaker, text, status, error, strategy, reply_to, "
                "trace, created_at) VALUES (?, ?, 'assistant', 'assistant', ?, ?, ?, ?, ?, ?, ?)",
                (user_id, session_id, clean_text(text), "error" if error else "ok",
                 clean_text(error) if error else None, strategy, reply_to,
                 json.dumps(clean_obj(trace)) if trace is not None else None, time.time()))
            return int(cur.lastrowid)

    def messages(self, user_id: str, session_id: str, include_errors: bool = True) -> list[MessageRow]:
        q = "SELECT * FROM messages WHERE user_id = ? AND session_id = ?"
        if not include_errors:
            q += " AND status = 'ok'"
        with self._connect() as db:
            return [self._message_row(r) for r in db.execute(q + " ORDER BY id", (user_id, session_id))]

    def redact_messages(self, user_id: str, message_ids: list[int], text: str) -> int:
        """Replace the text of some messages (the user asked to forget them); returns how many changed."""
        with self._write() as db:
            return sum(db.execute("UPDATE messages SET text = ? WHERE user_id = ? AND id = ?",
                                  (clean_text(text), user_id, int(i))).rowcount for i in message_ids)

    def message(self, user_id: str, message_id: int) -> MessageRow | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM messages WHERE user_id = ? AND id = ?", (user_id, message_id)).fetchone()
        return self._message_row(row) if row else None

    def reply_to(self, user_id: str, message_id: int) -> MessageRow | None:
        """The latest reply (ok or error) to a user message."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM messages WHERE user_id = ? AND reply_to = ? ORDER BY id DESC LIMIT 1",
                             (user_id, message_id)).fetchone()
        return self._message_row(row) if row else None

    def last_reply(self, user_id: str) -> MessageRow | None:
        """The user's most recent assistant message with a trace, in any session."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM messages WHERE user_id = ? AND role = 'assistant' AND trace IS NOT NULL "
                             "ORDER BY id DESC LIMIT 1", (user_id,)).fetchone()
        return self._message_row(row) if row else None

    # --- compare runs --------------------------------------------------------------------
    def add_compare(self, user_id: str, session_id: str, message: str, results: dict) -> int:
        with self._write() as db:
            cur = db.execute("INSERT INTO compares (user_id, session_id, message, results, created_at) "
                             "VALUES (?, ?, ?, ?, ?)", (user_id, session_id, clean_text(message), json.dumps(clean_obj(results)),
                                                        time.time()))
            return int(cur.lastrowid)

    def compares(self, user_id: str) -> list[dict]:
        with self._connect() as db:
            return [{"id": r["id"], "session_id": r["session_id"], "message": r["message"],
                     "results": json.loads(r["results"]), "created_at": r["created_at"]}
                    for r in db.execute("SELECT * FROM compares WHERE user_id = ? ORDER BY id", (user_id,))]

    # --- activity (sessions.idle) ----------------------------------------------------------
    def last_activity(self) -> list[tuple[str, float]]:
        """Every user with the time of their latest account, session, message or compare row, oldest first."""
        with self._connect() as db:
            return [(r["user_id"], r["last"]) for r in db.execute(
                "SELECT u.user_id, MAX(u.created_at, "
                "COALESCE((SELECT MAX(created_at) FROM sessions s WHERE s.user_id = u.user_id), 0), "
                "COALESCE((SELECT MAX(created_at) FROM messages m WHERE m.user_id = u.user_id), 0), "
                "COALESCE((SELECT MAX(created_at) FROM compares c WHERE c.user_id = u.user_id), 0)) AS last "
                "FROM users u ORDER BY last, u.user_id")]
