"""Sessions and replies: one open session per user, ending it builds memory; a reply stores the user's
message first, then streams and stores the agent's answer.
"""

from __future__ import annotations

import datetime as _dt
import logging
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from memory.dates import DateError, human_date, iso_date, iso_key, today
from memory.dates import check as read_date
from memory.dates import parse as parse_date
from memory.errors import LLMError, StoreUnavailable
from memory.protocols import ReadsAhead
from memory.records import CloseReport, Progress, SessionRecord, Turn
from memory.settings import COMPARE_COLUMNS, LLMConfig, Options
from memory.text import clean_obj, clean_text, plural
from memory.trace_types import CloseReportDict, TraceDict

from .db import NOT_STORED, CompareReply, UserError, database_down, outage_as
from .store import MessageRow, SessionRow, Store

# --- lifecycle ---------------------------------------------------
# Session lifecycle: one open session per user; ending it builds memory, then a new one starts.
#
# Ending is two steps. First, in one transaction, the open session becomes
# "closing" and a new open session is created, so the user can keep chatting at
# once. Then `MemoryAgent.close_session` builds both memories; only when it
# returns is the session marked "closed". A crash or an LLM failure in between
# leaves it "closing": the next End session, or the app's start, builds it again
# (the agent's close is idempotent per session id).
#
# Callers hold the user's memory lane (sessions/work.py) around a build; the build itself takes the
# close claim, the next lock of the order written there.

log = logging.getLogger(__name__)


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


@dataclass
class CloseOutcome:
    session_id: str
    report: CloseReportDict | None = None  # CloseReport as JSON (with trace) when the build completed
    error: str | None = None  # a message for people when it did not


@dataclass
class EndResult:
    closed: list[CloseOutcome] = field(default_factory=list)
    session: SessionRow | None = None  # the open session after the call
    message: str = ""

    @property
    def errors(self) -> list[str]:
        return [c.error for c in self.closed if c.error]


def report_dict(report: CloseReport) -> CloseReportDict:
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
        # build_runner(fn, progress) runs fn(progress) where memory builds run (sessions.work.BuildPool).
        self.store, self.agent = store, agent
        self.build_runner = build_runner or (lambda fn, progress: fn(progress))
        self.options_of, self.llm_of = options_of, llm_of

    def current(self, user_id: str) -> SessionRow:
        """The open session: read; made (a write) only where the user has none yet, where one is born."""
        return self.store.open_row(user_id) or self.store.open_session(user_id, today())

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
        """What "start the next session on" proposes: the last session's date plus one day. The open
        session counts once it holds a message or carries a date someone chose (anything but today's
        automatic date, e.g. the date typed at End session): the box never proposes the open session's
        own date, which would start nothing new."""
        cur = self.current(user_id)
        chosen = bool(cur.n_messages) or (cur.date != today() and parse_date(cur.date) is not None)
        last = cur if chosen else self._latest(user_id, exclude=cur.session_id)
        d = parse_date(last.date) if last else None
        if d is None:
            return cur.date if parse_date(cur.date) else today()
        return iso_date(d + _dt.timedelta(days=1))

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


# --- chat --------------------------------------------------------
# Replies: store the user's message first, stream the agent's reply, store it (or its error).
#
# The user message is committed before the LLM is called, so a failing or
# interrupted model loses nothing: Retry answers the last stored message again.


MAX_MESSAGE_CHARS = 200_000  # stored whole; the agent cuts what the LLM reads (with a notice)
INTERRUPTED = "The reply was interrupted before it finished. Your message is saved; press Retry."
EMPTY_REPLY = "The language model gave an empty answer. Your message is saved; press Retry."
REPLY_NOT_STORED = (
    "The database cannot be reached just now: your message is saved, but its reply could not be stored. "
    "Press Retry in a moment."
)


@dataclass
class ChatUpdate:
    kind: str  # "stored" | "status" | "delta" | "done"
    text: str = ""  # the reply so far ("done": the whole reply)
    status: str = ""  # what the agent is doing
    message_id: int | None = None  # the stored user message
    reply_id: int | None = None  # the stored reply ("done")
    trace: TraceDict | None = None  # the reply's trace ("done")
    error: str | None = None  # a message for people ("done" when the reply failed)


def check_message(text: str | None) -> str:
    """The message as stored: unencodable and control characters cleaned (memory.text), trimmed."""
    if text is not None and not isinstance(text, str):
        raise UserError("A message must be text.")
    text = clean_text(text).strip()
    if not text:
        raise UserError("Type a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise UserError(f"The message is longer than {MAX_MESSAGE_CHARS} characters; shorten it.")
    return text


def _follow(r: CompareReply, events: Iterator, lock: threading.Lock) -> Iterator[None]:
    """Consume one strategy's reply events into its result `r` (under `lock`), yielding after each change."""
    try:
        for ev in events:
            with lock:
                if ev.kind == "status":
                    r["status"] = ev.text
                elif ev.kind == "delta":
                    r["text"] += ev.text
                    r["status"] = "answering"
                elif ev.kind == "done":
                    r["text"] = ev.text or r["text"]
                    r["trace"] = clean_obj(ev.trace.to_dict()) if ev.trace is not None else None
                    r["error"] = (r["trace"] or {}).get("error")
            yield
    except Exception:
        log.exception("compare reply failed")
        r["error"] = "Something went wrong while replying with this strategy."
    with lock:
        r["done"], r["status"] = True, ("failed" if r["error"] else "done")
    yield


def _in_parallel(results: dict[str, CompareReply], runs: dict[str, Iterator]) -> Iterator[dict[str, CompareReply]]:
    """Every run in its own thread; yields a copy of `results` whenever some changed (changes that came
    together are shown together). Closing this generator stops the runs at their next event."""
    lock, stop = threading.Lock(), threading.Event()
    changed: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def work(s: str) -> None:
        try:
            for _ in _follow(results[s], runs[s], lock):
                changed.put(s)
                if stop.is_set():
                    if close := getattr(runs[s], "close", None):  # the agent's reply generator
                        close()
                    break
        finally:
            changed.put(None)

    for s in runs:
        threading.Thread(target=work, args=(s,), name=f"compare-{s}", daemon=True).start()
    running = len(runs)
    try:
        while running:
            item = changed.get()
            items = [item]
            while not changed.empty():
                items.append(changed.get())
            running -= items.count(None)
            with lock:
                snapshot = {s: r.copy() for s, r in results.items()}
            yield snapshot
    finally:
        stop.set()


def history_before(msgs: list[MessageRow], session: SessionRow, before_id: int | None = None) -> list[Turn]:
    return [
        Turn(m.speaker, m.text, m.turn_id())
        for m in msgs
        if m.status == "ok" and (before_id is None or m.id < before_id)
    ]


class Chat:
    def __init__(self, store: Store, agent, lifecycle: Lifecycle):
        self.store, self.agent, self.lifecycle = store, agent, lifecycle

    def send(self, user_id: str, message: str, options: Options, llm: LLMConfig | None) -> Iterator[ChatUpdate]:
        message = check_message(message)
        with outage_as(NOT_STORED):  # said before anything is shown as sent: the sender keeps the text
            for _ in range(3):
                session = self.lifecycle.current(user_id)
                history = history_before(self.store.messages(user_id, session.session_id), session)
                msg_id = self.store.add_user_message(user_id, session.session_id, message)
                if msg_id is not None:
                    break
            else:
                raise UserError("The session changed while sending (ended in another tab?); send again.")
        yield ChatUpdate("stored", message_id=msg_id)
        yield from self._reply(user_id, session, history, message, msg_id, options, llm)

    def prepare(self, user_id: str, draft: str, options: Options, llm: LLMConfig | None) -> int:
        """Read ahead for a message being typed in the open session (MemoryAgent.prepare): reads only, and
        nothing where the user has no open session yet."""
        if not isinstance(self.agent, ReadsAhead):
            return 0
        session = self.store.open_row(user_id)
        if session is None or not draft.strip():
            return 0
        history = history_before(self.store.messages(user_id, session.session_id), session)
        return self.agent.prepare(user_id, history, draft, session.date, options, llm)

    def retry(self, user_id: str, options: Options, llm: LLMConfig | None) -> Iterator[ChatUpdate]:
        """Answer again the last user message of the open session if it has no good reply."""
        session = self.lifecycle.current(user_id)
        msgs = self.store.messages(user_id, session.session_id)
        users = [m for m in msgs if m.role == "user"]
        if not users:
            raise UserError("There is no message to retry in this session.")
        last = users[-1]
        if any(m.reply_to == last.id and m.status == "ok" for m in msgs):
            raise UserError("The last message already has a reply; nothing to retry.")
        yield ChatUpdate("stored", message_id=last.id)
        yield from self._reply(
            user_id, session, history_before(msgs, session, last.id), last.text, last.id, options, llm
        )

    def _reply(
        self,
        user_id: str,
        session: SessionRow,
        history: list[Turn],
        message: str,
        msg_id: int,
        options: Options,
        llm: LLMConfig | None,
    ) -> Iterator[ChatUpdate]:
        text, error = "", None
        trace: TraceDict | None = None
        try:
            for ev in self.agent.reply(user_id, history, message, session.date, options, llm):
                # The model's text arrives cleaned (LLMSession cleans what a model writes, once). The trace is
                # cleaned here, once, where it leaves the agent: it also holds error texts, which may
                # echo a key (memory.text redacts it).
                if ev.kind == "status":
                    yield ChatUpdate("status", text, status=ev.text, message_id=msg_id)
                elif ev.kind == "delta":
                    text += ev.text
                    yield ChatUpdate("delta", text, message_id=msg_id)
                elif ev.kind == "done":
                    text = ev.text or text
                    trace = clean_obj(ev.trace.to_dict()) if ev.trace is not None else None
                    error = (trace or {}).get("error")
            if trace is None and error is None:
                error = "The agent gave no answer. Your message is saved; press Retry."
            elif trace is not None and error is None and not text.strip():
                error = EMPTY_REPLY
                trace["error"] = error
            if error and "Retry" not in error:  # e.g. "the vector store ... cannot be reached"
                error = f"{error.rstrip('. ')}. Your message is saved; press Retry."
                if trace is not None:
                    trace["error"] = error
        except GeneratorExit:
            # The browser went away mid-stream: record it so the chat shows Retry next time.
            self.store.add_reply(user_id, session.session_id, msg_id, text, options.strategy, trace, INTERRUPTED)
            raise
        except Exception as e:
            if database_down(e):
                log.warning("reply failed: the database cannot be reached")
                error = REPLY_NOT_STORED
            else:
                log.exception("reply failed")
                error = "Something went wrong while replying. Your message is saved; press Retry."
        with outage_as(REPLY_NOT_STORED):  # the message is stored and has no reply: Retry answers it
            reply_id = self.store.add_reply(user_id, session.session_id, msg_id, text, options.strategy, trace, error)
        yield ChatUpdate("done", text, message_id=msg_id, reply_id=reply_id, trace=trace, error=error)

    def compare(
        self,
        user_id: str,
        message: str,
        options: Options,
        llm: LLMConfig | None,
        strategies: tuple[str, ...] = COMPARE_COLUMNS,
    ) -> Iterator[dict[str, CompareReply]]:
        """The same message answered by every strategy on the same history (and THEANINE at the paper's
        setting: `Options.for_column`): at once on an endpoint, one
        after the other on the embedded model (it answers one call at a time; each card is shown as
        soon as its reply is done).

        Yields {strategy: {"text", "status", "trace", "error", "done"}} as the replies stream. A
        comparison is an experiment beside the chat: it is saved, but it does not enter the session.
        """
        message = check_message(message)
        session = self.lifecycle.current(user_id)
        history = history_before(self.store.messages(user_id, session.session_id), session)
        results: dict[str, CompareReply] = {
            s: {"text": "", "status": "waiting", "trace": None, "error": None, "done": False} for s in strategies
        }
        yield results
        runs = {
            s: self.agent.reply(user_id, history, message, session.date, options.for_column(s), llm) for s in strategies
        }
        cfg = llm or getattr(getattr(self.agent, "settings", None), "llm", None)
        if cfg is not None and getattr(cfg, "backend", "embedded") != "embedded" and len(runs) > 1:
            yield from _in_parallel(results, runs)
        else:
            for s, run in runs.items():
                for _ in _follow(results[s], run, threading.Lock()):
                    yield results
        self.store.add_compare(user_id, session.session_id, message, results)
