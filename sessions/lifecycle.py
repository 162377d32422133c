"""Session lifecycle: one open session per user; ending it builds memory, then a new one starts.

Ending is two steps. First, in one transaction, the open session becomes
"closing" and a new open session is created, so the user can keep chatting at
once. Then `MemoryAgent.close_session` builds both memories; only when it
returns is the session marked "closed". A crash or an LLM failure in between
leaves it "closing": the next End session, or the app's start, builds it again
(the agent's close is idempotent per session id).

Callers hold the user's memory lane (sessions/work.py) around a build; the build itself takes the
close claim, the next lock of the order written there.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.dates import DateError, iso_key
from memory.dates import check as read_date
from memory.dates import parse as parse_date
from memory.errors import LLMError, StoreUnavailable
from memory.records import SessionRecord, Turn
from memory.text import clean_obj, clean_text

from .errors import UserError, database_down
from .store import SessionRow, Store

log = logging.getLogger(__name__)

Progress = Callable[[float, str], None]


def today() -> str:
    return _dt.date.today().isoformat()


def iso_date(d: _dt.datetime) -> str:
    """How dates are stored: 2023-05-08, or 2023-05-08 13:56 when a time of day was given."""
    return d.strftime("%Y-%m-%d %H:%M") if (d.hour, d.minute) != (0, 0) else d.strftime("%Y-%m-%d")


def date_positions(dates: list[str]) -> list[float]:
    """Each date's place between the earliest and the latest (0..1): the graph's colour scale by session.
    When the dates cannot be read (or are all the same), by order instead."""
    times = [parse_date(d) for d in dates]
    known = [t for t in times if t]
    lo, hi = (min(known), max(known)) if known else (None, None)
    out = []
    for i, t in enumerate(times):
        if t and lo and hi and hi > lo:
            out.append((t - lo).total_seconds() / (hi - lo).total_seconds())
        else:
            out.append(i / max(len(dates) - 1, 1))
    return out


def human_date(date: str) -> str:
    """A stored date as people say it ("Mon 8 May 2023"); unreadable ones as they are."""
    d = parse_date(date)
    if d is None:
        return date
    out = f"{d:%a} {d.day} {d:%b %Y}"
    return out + (f" {d:%H:%M}" if (d.hour, d.minute) != (0, 0) else "")


def check_date(date: str | None) -> str:
    """A session date people typed ("2023-05-08", "1 May 2023", "May 1, 2023"), normalised to ISO
    (memory.dates.check: the same rule as imported dates)."""
    try:
        parsed = read_date(clean_text(date))
    except DateError as e:
        raise UserError(f"{str(e)[0].upper()}{str(e)[1:]}.") from None
    return iso_date(parsed)


def _later(a: str, b: str) -> str:
    return b if iso_key(b) >= iso_key(a) else a


def in_time_order(rows: list[SessionRow]) -> list[SessionRow]:
    """Sessions by date (then creation), numbered 1.. in that order (`number`), whatever their source:
    imported 2023 sessions come before sessions typed in 2026. An unreadable date keeps the place of
    the session before it."""
    keyed, last = [], ""
    for s in sorted(rows, key=lambda r: r.seq):
        last = iso_key(s.date) or last
        keyed.append(((last, s.seq), s))
    out = [s for _, s in sorted(keyed, key=lambda x: x[0])]
    for i, s in enumerate(out):
        s.number = i + 1
    return out


def plural(n: int, word: str, many: str = "") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


@dataclass
class CloseOutcome:
    session_id: str
    report: dict | None = None  # CloseReport as JSON (with trace) when the build completed
    error: str | None = None  # a message for people when it did not


@dataclass
class EndResult:
    closed: list[CloseOutcome] = field(default_factory=list)
    session: SessionRow | None = None  # the open session after the call
    message: str = ""

    @property
    def errors(self) -> list[str]:
        return [c.error for c in self.closed if c.error]


def report_dict(report) -> dict:
    return {
        "session_id": report.session_id,
        "already_built": report.already_built,
        "new_memories": list(report.new_memories),
        "new_segments": list(report.new_segments),
        "trace": report.trace.to_dict(),
    }


class Lifecycle:
    def __init__(self, store: Store, agent, options_of, llm_of, build_runner=None):
        # options_of(user_id) -> Options and llm_of(user_id) -> LLMConfig | None: the user's saved settings;
        # build_runner(fn, progress) runs fn(progress) where memory builds run (sessions.jobs.BuildPool).
        self.store, self.agent = store, agent
        self.build_runner = build_runner or (lambda fn, progress: fn(progress))
        self.options_of, self.llm_of = options_of, llm_of

    def current(self, user_id: str) -> SessionRow:
        return self.store.open_session(user_id, today())

    def record(self, user_id: str, session: SessionRow) -> SessionRecord:
        """The session as the memory library sees it: stored turns, failed replies left out."""
        turns = [
            Turn(m.speaker, m.text, m.turn_id())
            for m in self.store.messages(user_id, session.session_id, include_errors=False)
        ]
        return SessionRecord(session.session_id, session.date, turns)

    # --- dates ---------------------------------------------------------------------------
    def sessions(self, user_id: str) -> list[SessionRow]:
        return in_time_order(self.store.sessions(user_id))

    def _latest(self, user_id: str, exclude: str | None = None) -> SessionRow | None:
        """The session with the latest date, leaving out `exclude` (the open one, when it is empty)."""
        rows = [s for s in self.sessions(user_id) if s.session_id != exclude]
        return rows[-1] if rows else None

    def default_next_date(self, user_id: str) -> str:
        """What "start the next session on" proposes: the last session's date plus one day. When the
        open session is still empty, it is that next session: its own date is kept if someone chose
        it (anything but today's automatic date) and it does not come earlier."""
        cur = self.current(user_id)
        last = cur if cur.n_messages else self._latest(user_id, exclude=cur.session_id)
        d = parse_date(last.date) if last else None
        if d is None:
            return cur.date if parse_date(cur.date) else today()
        proposed = iso_date(d + _dt.timedelta(days=1))
        if not cur.n_messages and cur.date != today() and iso_key(cur.date) >= iso_key(proposed):
            return cur.date
        return proposed

    def check_order(self, user_id: str, date: str, cur: SessionRow) -> None:
        """A chat session may not start before the session that comes before it (imports keep their own dates)."""
        prev = self._latest(user_id, exclude=None if cur.n_messages else cur.session_id)
        if prev is not None and iso_key(prev.date) and iso_key(date) < iso_key(prev.date):
            raise UserError(
                f"The next session cannot be dated {human_date(date)}: it would come before session "
                f"{prev.label} ({human_date(prev.date)}). Give a date on or after that one."
            )

    # --- ending and starting sessions -------------------------------------------------
    def end(
        self, user_id: str, next_date: str | None = None, progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        """Close the open session (if it has turns), open the next one, and build pending memory.

        `next_date` (any form check_date reads) dates the next session; it must not come before the
        session just ended. `build=False` leaves the build to the caller (`close_pending`, e.g. in a
        background thread), so the new session is open at once.
        """
        next_date = check_date(next_date) if next_date else None
        cur = self.current(user_id)
        if next_date:
            self.check_order(user_id, next_date, cur)
        result, notes, ended = EndResult(), [], False
        if cur.n_messages == 0:
            if next_date and next_date != cur.date:
                self.store.set_session_date(user_id, cur.session_id, next_date)
                notes.append(f"The current session is now dated {human_date(next_date)}.")
        elif self.store.end_open_session(user_id, cur.session_id, next_date or _later(cur.date, today())) is None:
            notes.append("This session was already ended (in another tab?).")
        else:
            ended = True
        result.closed = self.close_pending(user_id, progress) if build else []
        result.session = self.current(user_id)
        built = [c.report for c in result.closed if c.report]
        if built or (ended and not build):
            n_mem = sum(len(r["new_memories"]) for r in built)
            n_seg = sum(len(r["new_segments"]) for r in built)
            what = "Session ended" if ended else f"Memory built for {plural(len(built), 'earlier session')}"
            done = (
                f": {plural(n_mem, 'new memory', 'new memories')} and {plural(n_seg, 'new segment')}."
                if build
                else "; its memory is being built."
            )
            notes.append(f"{what}{done}" + (f" New session dated {human_date(result.session.date)}." if ended else ""))
        notes += result.errors
        if not notes:
            notes.append("This session has no messages yet, so there is nothing to remember.")
        result.message = " ".join(notes)
        return result

    def close_pending(self, user_id: str, progress: Progress | None = None) -> list[CloseOutcome]:
        """Build the memory of every session of the user left "closing", in date order."""
        if not self.store.sessions(user_id, status="closing"):
            return []
        return self.build_runner(lambda p: self._close_pending(user_id, p), progress)

    def _close_pending(self, user_id: str, progress: Progress | None = None) -> list[CloseOutcome]:
        step = progress or (lambda f, s: None)
        # The claim makes this process the only builder of the user's sessions, across replicas;
        # pending sessions are read after it, so one another process built meanwhile is skipped.
        with self.store.close_claim(user_id):
            # By date, as the list numbers them: THEANINE links a memory to the earlier ones, so a
            # history imported (or corrected) out of order is still built in time order.
            numbers = {r.session_id: r.number for r in self.sessions(user_id)}
            pending = self.store.sessions(user_id, status="closing")
            for s in pending:
                s.number = numbers.get(s.session_id, 0)
            pending.sort(key=lambda s: s.number)
            out = []
            for i, s in enumerate(pending):

                def sub(f: float, text: str, i=i, s=s) -> None:
                    step(
                        (i + max(0.0, min(1.0, f))) / len(pending),
                        f"{i + 1} of {len(pending)} sessions, session {s.label} ({human_date(s.date)}): {text}"
                        if len(pending) > 1
                        else f"Session {s.label} ({human_date(s.date)}): {text}",
                    )

                out.append(self._close_one(user_id, s, sub))
            return out

    def _close_one(self, user_id: str, session: SessionRow, progress: Progress) -> CloseOutcome:
        try:
            report = self.agent.close_session(
                user_id,
                self.record(user_id, session),
                self.options_of(user_id),
                progress=progress,
                llm=self.llm_of(user_id),
            )
        except (LLMError, StoreUnavailable) as e:
            error = (
                f"Building the memory of session {session.label} failed: {e}. The session is saved; "
                "its memory will be built again at the next End session or app start."
            )
        except Exception as e:
            down = database_down(e)
            if down:
                log.warning("close_session failed: the database cannot be reached")
            else:
                log.exception("close_session failed")
            error = (
                f"Building the memory of session {session.label} failed"
                + (": the database cannot be reached just now" if down else "")
                + ". The session is saved; its memory will be built again at the next End session or app start."
            )
        else:
            d = clean_obj(report_dict(report))
            self.store.mark_closed(user_id, session.session_id, d)
            return CloseOutcome(session.session_id, report=d)
        error = clean_text(error)
        try:
            self.store.mark_close_failed(user_id, session.session_id, error)
        except Exception as e:
            if not database_down(e):
                raise
            # The session stays "closing" (that is what a retry looks for); only the note is not stored.
        return CloseOutcome(session.session_id, error=error)
