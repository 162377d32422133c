"""The data's room of the front door: everything kept about a user taken out (export), brought in (import),
deleted (Forget me), and its damaged stored values listed and repaired (sessions/damage.py)."""

from __future__ import annotations

import json

from memory.dates import iso_date
from memory.dates import parse as parse_date
from memory.protocols import Agent
from memory.records import Progress
from memory.text import clean_text, plural
from memory.theanine.strategy import KIND as THEANINE_KIND
from memory.userspace import user_key

from . import damage, upkeep
from .db import UserError
from .graph_store import SqlGraphStore
from .lifecycle import EndResult, Lifecycle
from .session_room import SessionRoom
from .store import Store
from .transfer import MAX_FILE_BYTES, ImportFormatError, parse_history
from .user_room import UserRoom
from .users import UserKey, own_key
from .work import ImportRate, UserWork

EXPORT_FORMAT = "memory-chat-export/1"
EXPORT_DATE_KEYS = ("date", "time")


class DataRoom:
    def __init__(
        self,
        users: UserRoom,
        sessions: SessionRoom,
        store: Store,
        lifecycle: Lifecycle,
        agent: Agent,
        work: UserWork,
        import_rate: ImportRate,
    ):
        self.users, self.sessions, self.store, self.lifecycle = users, sessions, store, lifecycle
        self.agent, self.work, self.import_rate = agent, work, import_rate

    def export(self, key: UserKey) -> dict:
        """Everything kept about the user, as JSON: sessions (importable format) and both memories.

        The user id itself is left out: it is the browser's credential and a shared file must not leak it.
        """
        key = own_key(key)
        sessions = []
        for s in self.store.sessions(key):
            msgs = self.store.messages(key, s.session_id, include_errors=False)
            sessions.append(
                {
                    "date": s.date,
                    "status": s.status,
                    "source": s.source,
                    "turns": [{"speaker": m.role, "name": m.speaker, "text": m.text, "id": m.turn_id()} for m in msgs],
                }
            )
        return one_date_format(
            {
                "format": EXPORT_FORMAT,
                "sessions": [s for s in sessions if s["turns"]],
                "memory": self.agent.export_user(key),
                "settings": self.users.prefs(key),
                "damaged": [{k: d[k] for k in ("item", "message")} for d in self.damage(key)],
            }
        )

    def import_history(
        self, key: UserKey, data: bytes | str, sample_id: str = "", progress: Progress | None = None, build=True
    ) -> EndResult:
        """Store a history (see sessions.transfer) as closed sessions and build their memory at once
        (build=False: stored only; `build_pending` builds it, e.g. in the background)."""
        key = own_key(key)
        with self.work.hold(key, "import"):
            self.import_rate.take(key)
            try:
                parsed = parse_import(data, sample_id)
                self.sessions.check_room(key, new_sessions=len(parsed))
            except Exception:
                self.import_rate.give_back(key)  # refused before anything was stored: not counted
                raise
            return self._import(key, parsed, progress, build)

    def _import(self, key: UserKey, parsed: list, progress: Progress | None, build: bool) -> EndResult:
        self.store.add_imported_sessions(key, [(s.date, s.turns) for s in parsed])
        n_turns = sum(len(s.turns) for s in parsed)
        if not build:
            result = EndResult(session=self.lifecycle.current(key))
            result.message = (
                f"Imported {plural(len(parsed), 'session')} ({plural(n_turns, 'turn')}); building their memory."
            )
            return result
        result = EndResult(closed=self.lifecycle.close_pending(key, progress))
        result.session = self.lifecycle.current(key)
        built = [c for c in result.closed if c.report]
        result.message = (
            f"Imported {plural(len(parsed), 'session')} ({plural(n_turns, 'turn')}); memory built "
            f"for {len(built)} of {len(result.closed)}."
        )
        if result.errors:
            result.message += " " + result.errors[0]
        return result

    def forget(self, key: UserKey) -> dict[str, int]:
        """Delete everything about the user: memory in every store first, then sessions and messages.
        Returns what was deleted, counted per kind (sessions, messages, memories, segments)."""
        key = own_key(key)
        # The claim: no replica is building this user's memory while it is deleted.
        with self.work.hold(key, "forget"), self.store.close_claim(key):
            rows = self.store.sessions(key)
            gone = {
                "sessions": sum(1 for r in rows if r.n_messages),  # not the empty one opened last
                "messages": sum(r.n_messages for r in rows),
                "memories": len(self.agent.graph_view(key)["nodes"]),
                "segments": len(self.agent.export_user(key).get("secom_segments") or []),
            }
            self.agent.forget_user(key)
            self.store.delete_user(key)
            upkeep.purge_deleted(self.agent, self.store.engine)
        return gone

    # --- damaged stored values (sessions/damage.py) -------------------------------------------
    def damage(self, key: UserKey) -> list[dict]:
        """The user's damaged stored values found so far: {"item", "kind", "session_id", "message"}."""
        key = own_key(key)
        nums = damage.session_numbers(self.store.engine, key)
        return [
            {
                "item": d.item,
                "kind": d.table,
                "session_id": d.session_id,
                "message": damage.describe(d, nums.get(d.session_id)),
            }
            for d in damage.items(self.store.engine, user_key(key))
        ]

    def repair(self, key: UserKey, item: str, action: str, progress: Progress | None = None, build=True) -> str:
        """Rebuild or drop one damaged value (`item` as listed by `damage`); a rebuilt session's memory
        is built at once (build=False: left to `build_pending`). Returns what was done, for people."""
        key = own_key(key)
        if action not in damage.ACTIONS:
            raise UserError("Choose rebuild or drop.")
        d = damage.find(self.store.engine, user_key(key), str(item or ""))
        if d is None:
            raise UserError("Nothing damaged by that name (already repaired?).")
        with self.work.hold(key, "close"), self.store.close_claim(key):
            done = damage.repair(self.store.engine, SqlGraphStore(self.store.engine), key, user_key(key), d, action)
            theanine = getattr(self.agent, "theanine", None)
            if d.table == "graph_memories" and action == "drop" and theanine is not None:
                theanine.store.delete(key, THEANINE_KIND, ids=[d.row_key])  # its vector, too
        message = f"Repaired: {done}."
        if build and self.store.sessions(key, status="closing"):
            message += " " + self.sessions.build_pending(key, progress).message
        return message


def parse_import(data: bytes | str, sample_id: str) -> list:
    """The sessions of an uploaded history; ImportFormatError says what is wrong with the file."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise ImportFormatError(f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
    if not data.strip():
        raise ImportFormatError("the file is empty")
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImportFormatError(f"the file is not valid JSON ({e})") from None
    except RecursionError:
        raise ImportFormatError("the file is nested too deeply to be a history") from None
    try:
        return parse_history(obj, clean_text(sample_id or "")[:200])
    except RecursionError:
        raise ImportFormatError("the file is nested too deeply to be a history") from None


def one_date_format(obj):
    """Every readable date of an export ("date"/"time" fields) as the app stores dates: 2023-05-21, or
    2023-05-21 19:48 with a time of day; LoCoMo's "7:48 pm on 21 May, 2023" too. Unreadable ones stay."""
    if isinstance(obj, dict):
        return {
            k: (_stored_date(v) if k in EXPORT_DATE_KEYS and isinstance(v, str) else one_date_format(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [one_date_format(x) for x in obj]
    return obj


def _stored_date(value: str) -> str:
    d = parse_date(value)
    return iso_date(d) if d else value


def forgotten(gone: dict[str, int]) -> str:
    """What Forget me deleted, for people (`DataRoom.forget`'s counts)."""
    what = [
        plural(gone.get("sessions", 0), "session"),
        plural(gone.get("messages", 0), "message"),
        plural(gone.get("memories", 0), "THEANINE memory", "THEANINE memories"),
        plural(gone.get("segments", 0), "SeCom segment"),
    ]
    return f"Deleted {', '.join(what[:-1])} and {what[-1]}: nothing of yours is kept. You continue as a new user."
