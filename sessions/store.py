"""Persistence of users, sessions, messages, reply traces and compare runs (SQLAlchemy 2 Core).

Embedded SQLite under the data directory by default (WAL: readers never wait for
the writer); a PostgreSQL server when DATABASE_URL is set, shared by every app
replica. The schema comes from numbered migrations (sessions/migrations.py),
applied at start. Every query names the user id in its WHERE clause: no row of
one user can be read or changed through another user's id.

Text is stored as given: the service cleans what people type or import once on input
(lifecycle.check_message, transfer, dates) and LLMSession what a model writes once on output
(memory.text), so the store does not clean it again.

Session status: "open" (the user is chatting in it; at most one per user),
"closing" (ended, memory not yet built: a restart re-runs the build) and
"closed" (memory built; `report` holds the close report).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from memory.text import clean_obj, register_secret
from memory.trace_types import CloseReportDict, TraceDict
from memory.userspace import user_key

from . import damage, db, migrations, schema
from .db import CompareReply, Damage, MessageRow, R, SessionRow, chat_turn_id, row_of
from .schema import compares as C
from .schema import messages as M
from .schema import sessions as S
from .schema import users as U
from .users import check_user_id
from .work import close_claim

CHAT_TURN_ID = re.compile(r"s\d+:\d+")  # MessageRow.turn_id of a chat message

_N_OK = (
    sa.select(sa.func.count())
    .select_from(M)
    .where(M.c.user_id == S.c.user_id, M.c.session_id == S.c.session_id, M.c.status == "ok")
    .correlate(S)
    .scalar_subquery()
    .label("n_messages")
)


class Store:
    """`Store(path)`: SQLite file at `path` (as before); `Store(url=DATABASE_URL)`: any SQLAlchemy URL."""

    def __init__(self, path: Path | str | None = None, *, url: str | None = None, lock_dir: Path | str | None = None):
        if not (path or url):
            raise ValueError("Store needs a SQLite path or a database URL")
        self.path = Path(path) if path else None
        self.url = db.normalise_url(url) if url else db.sqlite_url(Path(path or ""))
        self.engine = db.make_engine(self.url)
        self.postgres = db.is_postgres(self.engine)
        # SQLite is one machine's file: a close is claimed with a file lock next to it (see claims.py).
        self.lock_dir = Path(lock_dir) if lock_dir else (self.path.parent / "locks" if self.path else None)
        migrations.upgrade(self.engine)

    @classmethod
    def for_data_dir(cls, data_dir: Path | str, database_url: str = "") -> Store:
        """The app's store: PostgreSQL (or any URL) when `database_url` is set, else data_dir/sessions.sqlite3."""
        if database_url:
            return cls(url=database_url, lock_dir=Path(data_dir) / "locks")
        return cls(Path(data_dir) / "sessions.sqlite3")

    def _read_rows(self, cls: type[R], user_id: str, q) -> list[R]:
        """Rows of query `q` (one user's) as `cls`; damaged JSON values are quarantined after the read."""
        damaged: list[Damage] = []
        with self._connect() as c:
            rows = [row_of(cls, r, damaged) for r in c.execute(q)]
        if damaged:
            damage.flag(self.engine, user_key(user_id), damaged)
        return rows

    def _read_row(self, cls: type[R], user_id: str, q) -> R | None:
        rows = self._read_rows(cls, user_id, q.limit(1))
        return rows[0] if rows else None

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with db.read(self.engine) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with db.write(self.engine) as conn:
            yield conn

    def _lock_user(self, conn: Connection, user_id: str) -> None:
        """Serialise one user's read-then-write steps across replicas (SQLite: BEGIN IMMEDIATE already does)."""
        if self.postgres:
            conn.execute(sa.select(U.c.user_id).where(U.c.user_id == user_key(user_id)).with_for_update())

    def close_claim(self, user_id: str):
        """Context manager: this process alone builds the user's pending sessions until it exits."""
        return close_claim(self, user_id)

    # --- users -----------------------------------------------------------------------
    def ensure_user(self, user_id: str) -> None:
        check_user_id(user_id)
        with self._write() as c:
            db.insert_ignore(
                c, U, {"user_id": user_key(user_id), "created_at": time.time(), "prefs": "{}"}, ["user_id"]
            )

    def user_exists(self, user_id: str) -> bool:
        with self._connect() as c:
            return c.execute(sa.select(U.c.user_id).where(U.c.user_id == user_key(user_id))).first() is not None

    def get_prefs(self, user_id: str) -> dict:
        with self._connect() as c:
            raw = c.execute(sa.select(U.c.prefs).where(U.c.user_id == user_key(user_id))).scalar()
        prefs, bad = db.read_json("users", "prefs", raw or "")
        if bad:  # the defaults apply until the user saves settings again
            damage.flag(self.engine, user_key(user_id), [Damage("users", "prefs", "prefs", "", raw)])
        return prefs

    def set_prefs(self, user_id: str, prefs: dict) -> None:
        self.ensure_user(user_id)
        with self._write() as c:
            c.execute(U.update().where(U.c.user_id == user_key(user_id)).values(prefs=json.dumps(clean_obj(prefs))))
            damage.clear(c, user_key(user_id), "users")  # settings saved again: the damaged ones are replaced

    def delete_user(self, user_id: str) -> None:
        check_user_id(user_id)
        with self._write() as c:
            for table in (M, C, S, U):
                c.execute(table.delete().where(table.c.user_id == user_key(user_id)))
            c.execute(schema.agent_keys.delete().where(schema.agent_keys.c.user_key == user_key(user_id)))
            damage.clear(c, user_key(user_id))

    # --- sessions ----------------------------------------------------------------------
    @staticmethod
    def _next_seq(c: Connection, user_id: str) -> int:
        return (
            int(
                c.execute(
                    sa.select(sa.func.coalesce(sa.func.max(S.c.seq), 0)).where(S.c.user_id == user_key(user_id))
                ).scalar_one()
            )
            + 1
        )

    @staticmethod
    def _insert_session(c: Connection, user_id: str, date: str, status: str, source: str) -> str:
        seq = Store._next_seq(c, user_id)
        sid = f"s{seq}"
        c.execute(
            S.insert().values(
                user_id=user_key(user_id),
                session_id=sid,
                seq=seq,
                date=date,
                status=status,
                source=source,
                created_at=time.time(),
            )
        )
        return sid

    def open_session(self, user_id: str, default_date: str) -> SessionRow:
        """The user's open session, created (with `default_date`) if there is none."""
        self.ensure_user(user_id)
        with self._write() as c:
            self._lock_user(c, user_id)
            sid = c.execute(
                sa.select(S.c.session_id).where(S.c.user_id == user_key(user_id), S.c.status == "open")
            ).scalar()
            sid = sid or self._insert_session(c, user_id, default_date, "open", "chat")
        row = self.session(user_id, sid)
        assert row is not None  # made above, in this transaction
        return row

    def open_row(self, user_id: str) -> SessionRow | None:
        """The user's open session, read (no write transaction); None when there is none yet."""
        return self._read_row(
            SessionRow, user_id, sa.select(S, _N_OK).where(S.c.user_id == user_key(user_id), S.c.status == "open")
        )

    def session(self, user_id: str, session_id: str) -> SessionRow | None:
        return self._read_row(
            SessionRow,
            user_id,
            sa.select(S, _N_OK).where(S.c.user_id == user_key(user_id), S.c.session_id == session_id),
        )

    def sessions(self, user_id: str, status: str | None = None) -> list[SessionRow]:
        q = sa.select(S, _N_OK).where(S.c.user_id == user_key(user_id))
        if status:
            q = q.where(S.c.status == status)
        return self._read_rows(SessionRow, user_id, q.order_by(S.c.seq))

    def set_session_date(self, user_id: str, session_id: str, date: str) -> None:
        with self._write() as c:
            c.execute(
                S.update()
                .where(S.c.user_id == user_key(user_id), S.c.session_id == session_id, S.c.status == "open")
                .values(date=date)
            )

    def correct_session_date(self, user_id: str, session_id: str, date: str) -> str | None:
        """Give any session a new date; a closed one goes back to "closing" so its memory is built again
        for that date (SeCom's segments carry it; the build skips what does not depend on it). Returns the
        session's status before, or None when there is no such session."""
        with self._write() as c:
            self._lock_user(c, user_id)
            status = c.execute(
                sa.select(S.c.status).where(S.c.user_id == user_key(user_id), S.c.session_id == session_id)
            ).scalar()
            if status is None:
                return None
            values: dict = {"date": date}
            if status == "closed":
                values.update(status="closing", close_error=None)
            c.execute(S.update().where(S.c.user_id == user_key(user_id), S.c.session_id == session_id).values(**values))
            return str(status)

    def end_open_session(self, user_id: str, session_id: str, next_date: str) -> str | None:
        """Mark the open session "closing" and open a new one, in one transaction.

        Returns the new session id, or None if `session_id` was no longer the open one
        (another tab, or another replica, ended it first).
        """
        with self._write() as c:
            self._lock_user(c, user_id)
            cur = c.execute(
                S.update()
                .where(S.c.user_id == user_key(user_id), S.c.session_id == session_id, S.c.status == "open")
                .values(status="closing", closed_at=time.time(), close_error=None)
            )
            if cur.rowcount != 1:
                return None
            return self._insert_session(c, user_id, next_date, "open", "chat")

    def mark_closed(self, user_id: str, session_id: str, report: CloseReportDict) -> None:
        with self._write() as c:
            c.execute(
                S.update()
                .where(S.c.user_id == user_key(user_id), S.c.session_id == session_id, S.c.status == "closing")
                .values(status="closed", close_error=None, report=json.dumps(report))
            )

    def mark_close_failed(self, user_id: str, session_id: str, error: str) -> None:
        with self._write() as c:
            c.execute(
                S.update()
                .where(S.c.user_id == user_key(user_id), S.c.session_id == session_id, S.c.status == "closing")
                .values(close_error=error)
            )

    def users_with_pending_closes(self) -> list[str]:
        """Across all users: who has sessions whose memory build did not complete (startup recovery)."""
        with self._connect() as c:
            return list(
                c.execute(
                    sa.select(S.c.user_id).where(S.c.status == "closing").distinct().order_by(S.c.user_id)
                ).scalars()
            )

    def add_imported_sessions(
        self, user_id: str, sessions: list[tuple[str, list[tuple[str, str, str, str | None]]]]
    ) -> list[str]:
        """Store whole sessions [(date, [(role, speaker, text, source_turn_id)])] as "closing", all or nothing.

        Imported sessions are earlier history: an open session without messages is moved after
        them, so sessions stay numbered in the order they happened. Source turn ids are kept; if
        the user already has one of them (the same file imported twice), this import's ids get a
        prefix "i{n}/" so that every turn id stays unique within the user.
        """
        self.ensure_user(user_id)
        ids = []
        now = time.time()
        sessions = [(date, [(*t, None)[:4] for t in turns]) for date, turns in sessions]  # turn id optional
        with self._write() as c:
            self._lock_user(c, user_id)
            taken = {
                r[0]
                for r in c.execute(
                    sa.select(M.c.source_turn_id).where(
                        M.c.user_id == user_key(user_id), M.c.source_turn_id.is_not(None)
                    )
                )
            }
            prefix = ""
            taken |= {  # and the user's chat turns (MessageRow.turn_id): a re-imported export names them
                chat_turn_id(r.session_id, r.turn_no, r.id)
                for r in c.execute(
                    sa.select(M.c.session_id, M.c.turn_no, M.c.id).where(
                        M.c.user_id == user_key(user_id), M.c.source_turn_id.is_(None)
                    )
                )
            }
            if taken.intersection(t[3] for _, turns in sessions for t in turns if t[3]):
                n = c.execute(
                    sa.select(sa.func.count())
                    .select_from(S)
                    .where(S.c.user_id == user_key(user_id), S.c.source == "import")
                ).scalar_one()
                prefix = f"i{n + 1}/"
            has_msgs = sa.exists().where(M.c.user_id == S.c.user_id, M.c.session_id == S.c.session_id)
            empty_open = c.execute(
                sa.select(S.c.session_id, S.c.date).where(
                    S.c.user_id == user_key(user_id), S.c.status == "open", ~has_msgs
                )
            ).first()
            if empty_open:
                c.execute(S.delete().where(S.c.user_id == user_key(user_id), S.c.session_id == empty_open.session_id))
            for date, turns in sessions:
                sid = self._insert_session(c, user_id, date, "closing", "import")
                if turns:
                    c.execute(
                        M.insert(),
                        [
                            {
                                "user_id": user_key(user_id),
                                "session_id": sid,
                                "role": r,
                                "speaker": s,
                                "text": t,
                                "status": "ok",
                                "created_at": now,
                                "source_turn_id": prefix + tid if tid else None,
                                "turn_no": n,
                            }
                            for n, (r, s, t, tid) in enumerate(turns, 1)
                        ],
                    )
                ids.append(sid)
            if empty_open:
                self._insert_session(c, user_id, empty_open.date, "open", "chat")
        return ids

    # --- messages ----------------------------------------------------------------------
    def add_user_message(self, user_id: str, session_id: str, text: str) -> int | None:
        """Store a user message in `session_id` if it is still the open session, else return None
        (another tab ended it a moment ago: the caller sends into the new one)."""
        with self._write() as c:
            self._lock_user(c, user_id)  # first, as end_open_session takes it: the same order, no deadlock
            # FOR UPDATE (PostgreSQL): an end_open_session of another replica waits for this insert, or wins first.
            is_open = c.execute(
                sa.select(S.c.session_id)
                .where(S.c.user_id == user_key(user_id), S.c.session_id == session_id, S.c.status == "open")
                .with_for_update(read=True)
            ).first()
            if is_open is None:
                return None
            return self._insert_message(c, user_id, session_id, "user", text)

    def _insert_message(self, c: Connection, user_id: str, session_id: str, role: str, text: str, **columns) -> int:
        """One chat message, stored as given; returns its id. Its text is clean already: what people type is
        cleaned once on input (lifecycle.check_message) and what a model writes once on output (LLMSession).
        It is numbered after the session's last message (its turn id, MessageRow.turn_id), under the user's
        lock: the number says nothing about other users."""
        self._lock_user(c, user_id)
        key = user_key(user_id)
        last = c.execute(
            sa.select(sa.func.max(M.c.turn_no)).where(M.c.user_id == key, M.c.session_id == session_id)
        ).scalar()
        # Past the imported turns that kept an id of this shape (an export of this app, imported): ids stay unique.
        shaped = c.execute(
            sa.select(M.c.source_turn_id).where(M.c.user_id == key, M.c.source_turn_id.like(f"{session_id}:%"))
        ).scalars()
        numbers = [int(t.rsplit(":", 1)[1]) for t in shaped if CHAT_TURN_ID.fullmatch(t)]
        values = {"user_id": key, "session_id": session_id, "role": role, "speaker": role, **columns}
        values["turn_no"] = max([int(last or 0), *numbers]) + 1
        stmt = M.insert().values(**values, text=text, created_at=time.time()).returning(M.c.id)
        return int(c.execute(stmt).scalar_one())

    def add_reply(
        self,
        user_id: str,
        session_id: str,
        reply_to: int,
        text: str,
        strategy: str,
        trace: TraceDict | None,
        error: str | None = None,
    ) -> int:
        """The assistant's reply to message `reply_to`, or (error set) the record of a failed one."""
        with self._write() as c:
            return self._insert_message(
                c,
                user_id,
                session_id,
                "assistant",
                text,
                status="error" if error else "ok",
                error=error or None,
                strategy=strategy,
                reply_to=reply_to,
                trace=json.dumps(trace) if trace is not None else None,  # cleaned where it left the agent
            )

    def messages(self, user_id: str, session_id: str, include_errors: bool = True) -> list[MessageRow]:
        q = sa.select(M).where(M.c.user_id == user_key(user_id), M.c.session_id == session_id)
        if not include_errors:
            q = q.where(M.c.status == "ok")
        return self._read_rows(MessageRow, user_id, q.order_by(M.c.id))

    def redact_messages(self, user_id: str, message_ids: list[int], text: str) -> int:
        """Replace the text of some messages (the user asked to forget them); returns how many changed."""
        with self._write() as c:
            return sum(
                c.execute(
                    M.update().where(M.c.user_id == user_key(user_id), M.c.id == int(i)).values(text=text)
                ).rowcount
                for i in message_ids
            )

    def message(self, user_id: str, message_id: int) -> MessageRow | None:
        return self._read_row(
            MessageRow, user_id, sa.select(M).where(M.c.user_id == user_key(user_id), M.c.id == message_id)
        )

    def reply_to(self, user_id: str, message_id: int) -> MessageRow | None:
        """The latest reply (ok or error) to a user message."""
        q = sa.select(M).where(M.c.user_id == user_key(user_id), M.c.reply_to == message_id).order_by(M.c.id.desc())
        return self._read_row(MessageRow, user_id, q)

    def last_reply(self, user_id: str) -> MessageRow | None:
        """The user's most recent assistant message with a trace, in any session."""
        q = (
            sa.select(M)
            .where(M.c.user_id == user_key(user_id), M.c.role == "assistant", M.c.trace.is_not(None))
            .order_by(M.c.id.desc())
        )
        return self._read_row(MessageRow, user_id, q)

    # --- compare runs --------------------------------------------------------------------
    def add_compare(self, user_id: str, session_id: str, message: str, results: Mapping[str, CompareReply]) -> int:
        with self._write() as c:
            return int(
                c.execute(
                    C.insert()
                    .values(
                        user_id=user_key(user_id),
                        session_id=session_id,
                        message=message,
                        results=json.dumps(results),  # each reply's trace cleaned where it left the agent
                        created_at=time.time(),
                    )
                    .returning(C.c.id)
                ).scalar_one()
            )

    def compares(self, user_id: str, last: int | None = None) -> list[dict]:
        """The user's compare runs, oldest first (`last`: only the latest n); a run whose stored results
        cannot be read is left out (quarantined)."""
        q = sa.select(C).where(C.c.user_id == user_key(user_id)).order_by(C.c.id.desc())
        if last is not None:
            q = q.limit(last)
        out, damaged = [], []
        with self._connect() as c:
            for r in c.execute(q):
                results, bad = db.read_json("compares", "results", r.results)
                if bad:
                    damaged.append(Damage("compares", str(r.id), "results", r.session_id, r.results))
                    continue
                out.append(
                    {
                        "id": r.id,
                        "session_id": r.session_id,
                        "message": r.message,
                        "results": results,
                        "created_at": r.created_at,
                    }
                )
        if damaged:
            damage.flag(self.engine, user_key(user_id), damaged)
        return out[::-1]


def open_store(data_dir: Path | str, database_url: str = "") -> Store:
    """The app's store: the database at `database_url` (DATABASE_URL, e.g. postgresql://user:pw@host/db) when
    set, else the data dir's SQLite."""
    url = database_url.strip()
    if url:
        register_secret(sa.engine.make_url(db.normalise_url(url)).password or "")  # never in logs or pages
    store = Store.for_data_dir(data_dir, url)
    old = Path(data_dir) / "sessions.sqlite3"
    if url and old.exists():  # first start of a single-process data dir on the shared database
        migrations.copy_sqlite_into(Store(old), store)
    return store
