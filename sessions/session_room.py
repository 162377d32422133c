"""The sessions' room of the front door: the sessions and their messages, ending and starting one, building
the memory of the ended ones (at once or in the background) and correcting a session's date."""

from __future__ import annotations

from memory.dates import human_date, iso_key
from memory.protocols import Agent
from memory.records import Progress
from memory.text import plural

from .db import UserError
from .graph_store import SqlGraphStore
from .lifecycle import EndResult, Lifecycle, check_date
from .settings import Limits
from .store import MessageRow, SessionRow, Store
from .users import UserKey, own_key
from .work import Busy, LimitReached, UserWork, Work


class SessionRoom:
    def __init__(self, store: Store, lifecycle: Lifecycle, agent: Agent, work: UserWork, limits: Limits):
        self.store, self.lifecycle, self.agent, self.work, self.limits = store, lifecycle, agent, work, limits

    # --- reading ---------------------------------------------------------------------------------------
    def current(self, key: UserKey) -> SessionRow:
        """The open session, with its number in time order (as the session list shows it)."""
        key = own_key(key)
        s = self.lifecycle.current(key)
        s.number = next((r.number for r in self.lifecycle.sessions(key) if r.session_id == s.session_id), 0)
        return s

    def in_order(self, key: UserKey) -> list[SessionRow]:
        """The user's sessions in time order (by date, then number)."""
        key = own_key(key)
        return self.lifecycle.sessions(key)

    def messages(self, key: UserKey, session_id: str | None = None) -> list[MessageRow]:
        """The messages of a session (the open one by default)."""
        key = own_key(key)
        return self.store.messages(key, session_id or self.lifecycle.current(key).session_id)

    def message(self, key: UserKey, message_id: int) -> MessageRow | None:
        """One stored message of the user (the page shows a sent message as stored)."""
        key = own_key(key)
        return self.store.message(key, message_id)

    def default_next_date(self, key: UserKey) -> str:
        """The proposed date of the next session: the last session's date plus one day."""
        key = own_key(key)
        return self.lifecycle.default_next_date(key)

    def latest_new_memories(self, key: UserKey, rows: list[SessionRow] | None = None) -> list[str]:
        """Memory ids added by the most recent completed close (marked "new" in the graph); `rows` the
        sessions when the caller has read them already."""
        key = own_key(key)
        for s in reversed(self.in_order(key) if rows is None else rows):
            if s.status == "closed" and s.report and not s.report.get("already_built"):
                return list(s.report.get("new_memories") or [])
        return []

    # --- the user's running memory work (sessions/work.py): this process's state, no database read ------
    def memory_work_running(self, key: str) -> Work | None:
        """The user's running memory work (a build, an import, deleting a memory, Forget me), or None."""
        return self.work.running(key, "memory")

    def memory_work_finished(self, key: str) -> Work | None:
        """The user's background memory work that ended and whose result was not shown yet."""
        return self.work.finished(key, "memory")

    def take_memory_work_finished(self, key: str) -> Work | None:
        """As memory_work_finished, and removed: its result is shown once."""
        return self.work.take_finished(key, "memory")

    # --- ending and starting -----------------------------------------------------------------------------
    def end(
        self, key: UserKey, next_date: str | None = None, progress: Progress | None = None, build=True
    ) -> EndResult:
        """End the open session; the next one is dated `next_date` (not before this one). With
        build=False the memory is left for `build_pending` (the page runs it in the background)."""
        key = own_key(key)
        return self._end(key, next_date, progress, build)

    def new(self, key: UserKey, date: str, progress: Progress | None = None, build: bool = True) -> EndResult:
        """Start a session on `date`; the open one is ended first if it has messages."""
        key = own_key(key)
        return self._end(key, check_date(date), progress, build)

    def _end(self, key: UserKey, next_date: str | None, progress: Progress | None, build: bool) -> EndResult:
        self.check_room(key, new_sessions=1)
        if not build:  # only the session's status changes here; build_pending holds the build slot
            return self.lifecycle.end(key, next_date, progress, build=False)
        with self.work.hold(key, "close"):
            return self.lifecycle.end(key, next_date, progress)

    def build_pending(self, key: UserKey, progress: Progress | None = None) -> EndResult:
        """Build the memory of every ended session still waiting for it (after build=False)."""
        key = own_key(key)
        with self.work.hold(key, "close"):
            return self._build_pending(key, progress)

    def start_build(self, key: UserKey, kind: str = "close") -> Work:
        """`build_pending` in the background (the page), as work of `kind` ("close", or "import" after an
        import); its progress and result are on the Work (`memory_work_running` / `take_memory_work_finished`).
        Busy when a build runs."""
        key = own_key(key)
        return self.work.start(key, kind, lambda w: self._build_pending(key, w.progress))

    def _build_pending(self, key: UserKey, progress: Progress | None) -> EndResult:
        result = EndResult(closed=self.lifecycle.close_pending(key, progress))
        result.session = self.lifecycle.current(key)
        built = [c.report for c in result.closed if c.report]
        n_mem = sum(len(r["new_memories"]) for r in built)
        n_seg = sum(len(r["new_segments"]) for r in built)
        result.message = (
            f"Memory built for {plural(len(built), 'session')} of {len(result.closed)}: "
            f"{plural(n_mem, 'new memory', 'new memories')} and {plural(n_seg, 'new segment')}."
            if result.closed
            else "No session was waiting for its memory."
        )
        if result.errors:
            result.message += " " + result.errors[0]
        return result

    def check_room(self, key: UserKey, new_sessions: int) -> None:
        """Per-user bounds on stored sessions and memories (Limits); LimitReached says what to do."""
        key = own_key(key)
        lim = self.limits
        if lim.sessions:
            n = len(self.store.sessions(key))
            if n + new_sessions > lim.sessions:
                raise LimitReached(
                    f"You have {n} stored sessions; this server keeps at most {lim.sessions} per "
                    "user. Export your memory and use Forget me to start again."
                )
        if lim.memories:
            n = len(self.agent.graph_view(key).get("nodes") or [])
            if n >= lim.memories:
                raise LimitReached(
                    f"Your memory holds {n} memories; this server keeps at most {lim.memories} per "
                    "user. Delete some memories, or export and use Forget me, to add more."
                )

    def recover_pending_closes(self) -> int:
        """At start: finish every close a crash or failure left undone. Returns how many were retried
        (a user already building is skipped: that build takes the pending sessions too)."""
        n = 0
        for stored in self.store.users_with_pending_closes():
            key = UserKey(stored)  # read from the database: the server acts for this user itself
            try:
                with self.work.hold(key, "close"):
                    n += len(self.lifecycle.close_pending(key))
            except Busy:
                continue
        return n

    def set_date(self, key: UserKey, session_id: str, date: str, progress: Progress | None = None, build=True) -> str:
        """Correct the date of a session (memory.dates' rule, as for new sessions). The open session keeps
        the order rule; an ended one's memories take the new date (THEANINE at once, SeCom by a rebuild;
        build=False leaves that to `build_pending`)."""
        key = own_key(key)
        new = check_date(date)
        row = self.store.session(key, str(session_id or ""))
        if row is None:
            raise UserError("Choose a session whose date to correct.")
        if row.status == "open":
            self.lifecycle.check_order(key, new, row)
            self.store.set_session_date(key, row.session_id, new)
            return f"Session {row.seq} is now dated {human_date(new)}."
        with self.work.hold(key, "close"), self.store.close_claim(key):
            self.store.correct_session_date(key, row.session_id, new)
            graphs = getattr(getattr(self.agent, "theanine", None), "graphs", None)
            if isinstance(graphs, SqlGraphStore):
                graphs.set_session_time(key, row.session_id, new, iso_key(new))
        done = f"Session {row.seq} is now dated {human_date(new)}."
        return f"{done} {self.build_pending(key, progress).message}" if build else done
