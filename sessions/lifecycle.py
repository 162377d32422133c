"""Session lifecycle: one open session per user; ending it builds memory, then a new one starts.

Ending is two steps. First, in one transaction, the open session becomes
"closing" and a new open session is created, so the user can keep chatting at
once. Then `MemoryAgent.close_session` builds both memories; only when it
returns is the session marked "closed". A crash or an LLM failure in between
leaves it "closing": the next End session, or the app's start, builds it again
(the agent's close is idempotent per session id).
"""
from __future__ import annotations

import datetime as _dt
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from memory.errors import LLMError, StoreUnavailable
from memory.records import SessionRecord, Turn, sortable_time

from .errors import UserError
from .store import SessionRow, Store
from .text import clean_obj, clean_text

log = logging.getLogger(__name__)

Progress = Callable[[float, str], None]
MAX_DATE_CHARS = 64


def today() -> str:
    return _dt.date.today().isoformat()


def check_date(date: str | None) -> str:
    """A session date people typed: ISO (2023-05-08) or another form the memory can order in time."""
    d = " ".join(clean_text(date).split())
    if not d:
        raise UserError("Give the session a date, e.g. 2023-05-08.")
    if len(d) > MAX_DATE_CHARS or not sortable_time(d):
        raise UserError(f"Cannot read the date {d[:MAX_DATE_CHARS]!r}; use the form 2023-05-08.")
    return d


def _later(a: str, b: str) -> str:
    return b if sortable_time(b) >= sortable_time(a) else a


@dataclass
class CloseOutcome:
    session_id: str
    report: dict | None = None        # CloseReport as JSON (with trace) when the build completed
    error: str | None = None          # a message for people when it did not


@dataclass
class EndResult:
    closed: list[CloseOutcome] = field(default_factory=list)
    session: SessionRow | None = None     # the open session after the call
    message: str = ""

    @property
    def errors(self) -> list[str]:
        return [c.error for c in self.closed if c.error]


def report_dict(report) -> dict:
    return {"session_id": report.session_id, "already_built": report.already_built,
            "new_memories": list(report.new_memories), "new_segments": list(report.new_segments),
            "trace": report.trace.to_dict()}


class Lifecycle:
    def __init__(self, store: Store, agent, options_of, llm_of):
        # options_of(user_id) -> Options and llm_of(user_id) -> LLMConfig | None: the user's saved settings
        self.store, self.agent = store, agent
        self.options_of, self.llm_of = options_of, llm_of
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, user_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(user_id, threading.Lock())

    def current(self, user_id: str) -> SessionRow:
        return self.store.open_session(user_id, today())

    def record(self, user_id: str, session: SessionRow) -> SessionRecord:
        """The session as the memory library sees it: stored turns, failed replies left out."""
        turns = [Turn(m.speaker, m.text, f"{session.session_id}:{m.id}")
                 for m in self.store.messages(user_id, session.session_id, include_errors=False)]
        return SessionRecord(session.session_id, session.date, turns)

    # --- ending and starting sessions -------------------------------------------------
    def end(self, user_id: str, next_date: str | None = None, progress: Progress | None = None) -> EndResult:
        """Close the open session (if it has turns), open the next one, and build pending memory."""
        next_date = check_date(next_date) if next_date else None
        cur = self.current(user_id)
        result, notes, ended = EndResult(), [], False
        if cur.n_messages == 0:
            if next_date and next_date != cur.date:
                self.store.set_session_date(user_id, cur.session_id, next_date)
                notes.append(f"The current session is now dated {next_date}.")
        elif self.store.end_open_session(user_id, cur.session_id, next_date or _later(cur.date, today())) is None:
            notes.append("This session was already ended (in another tab?).")
        else:
            ended = True
        result.closed = self.close_pending(user_id, progress)
        result.session = self.current(user_id)
        built = [c.report for c in result.closed if c.report]
        if built:
            n_mem = sum(len(r["new_memories"]) for r in built)
            n_seg = sum(len(r["new_segments"]) for r in built)
            what = "Session ended" if ended else f"Memory built for {len(built)} earlier session(s)"
            notes.append(f"{what}: {n_mem} new memories and {n_seg} new segments."
                         + (f" New session dated {result.session.date}." if ended else ""))
        notes += result.errors
        if not notes:
            notes.append("This session has no messages yet, so there is nothing to remember.")
        result.message = " ".join(notes)
        return result

    def close_pending(self, user_id: str, progress: Progress | None = None) -> list[CloseOutcome]:
        """Build the memory of every session of the user left "closing", oldest first."""
        step = progress or (lambda f, s: None)
        # The claim makes this process the only builder of the user's sessions, across replicas;
        # pending sessions are read after it, so one another process built meanwhile is skipped.
        with self.lock(user_id), self.store.close_claim(user_id):
            pending = self.store.sessions(user_id, status="closing")
            out = []
            for i, s in enumerate(pending):
                def sub(f: float, text: str, i=i, s=s) -> None:
                    step((i + max(0.0, min(1.0, f))) / len(pending), f"Session {s.seq} ({s.date}): {text}")
                out.append(self._close_one(user_id, s, sub))
            return out

    def _close_one(self, user_id: str, session: SessionRow, progress: Progress) -> CloseOutcome:
        try:
            report = self.agent.close_session(user_id, self.record(user_id, session), self.options_of(user_id),
                                              progress=progress, llm=self.llm_of(user_id))
        except (LLMError, StoreUnavailable) as e:
            error = (f"Building the memory of session {session.seq} failed: {e}. The session is saved; "
                     "its memory will be built again at the next End session or app start.")
        except Exception:  # noqa: BLE001 - the app must keep running; the session stays pending
            log.exception("close_session failed")
            error = (f"Building the memory of session {session.seq} failed. The session is saved; "
                     "its memory will be built again at the next End session or app start.")
        else:
            d = clean_obj(report_dict(report))
            self.store.mark_closed(user_id, session.session_id, d)
            return CloseOutcome(session.session_id, report=d)
        error = clean_text(error)
        self.store.mark_close_failed(user_id, session.session_id, error)
        return CloseOutcome(session.session_id, error=error)

    def recover_all(self) -> int:
        """At start: finish every close a crash or failure left undone. Returns how many were retried."""
        n = 0
        for user_id in self.store.users_with_pending_closes():
            n += len(self.close_pending(user_id))
        return n
