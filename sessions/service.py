"""The one object the UI and the API talk to: every method takes a user id and checks it first.

It joins the store (what was said), the lifecycle (when memory is built), the
chat (replies) and the agent (what is remembered).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from memory.dates import iso_date
from memory.dates import parse as parse_date
from memory.errors import InvalidOptions, MemoryLibError
from memory.locks import UserLocks
from memory.protocols import Agent
from memory.records import Progress
from memory.settings import LLMConfig, Options, Settings
from memory.text import clean_text, plural, register_secret
from memory.url_guard import check_url

from . import upkeep
from . import users as _prefs
from .agent_keys import AgentKeys
from .db import DATABASE_DOWN, NOT_STORED, DatabaseUnavailable, MemoryVersions, UserError, database_down
from .graph_store import SqlGraphStore
from .lifecycle import Chat, ChatUpdate, EndResult, Lifecycle, check_date
from .settings import IdentityConfig, Limits
from .store import MessageRow, SessionRow, Store, open_store
from .transfer import MAX_FILE_BYTES, ImportFormatError, parse_history
from .upkeep import Upkeep
from .users import Identity, UserKey
from .work import BuildPool, Busy, ImportRate, LimitReached, UserWork, Work

EXPORT_FORMAT = "memory-chat-export/1"
REDACTED = "(removed at the user's request)"
MAX_MEMORY_ID_CHARS = 200
STOP_WAIT_S = 2.0  # Stop waits this long for the cancelled reply to record its interruption

__all__ = ["ChatUpdate", "EndResult", "SessionService", "UserError"]


class SessionService(Upkeep):
    def __init__(
        self,
        settings: Settings,
        agent: Agent,
        store: Store | None = None,
        limits: Limits | None = None,
        url_check=check_url,
        identity: IdentityConfig | None = None,
        allow_llm_change: bool = True,
        database_url: str = "",
        locks: UserLocks | None = None,
    ):
        """`settings` are the memory's; the app's own (limits, identity, whether visitors may choose the
        LLM, the database) come from sessions.settings.AppSettings as the arguments after them."""
        self.settings, self.agent = settings, agent
        register_secret(settings.llm.api_key)  # never stored or shown (memory.text)
        self.store = store or open_store(settings.data_dir, database_url)
        # The graph lives next to the sessions, shared by replicas.
        graphs = SqlGraphStore(self.store.engine)
        graphs.import_json_folders(settings.data_dir)  # a data dir from before: JSON graph files
        agent.use_graph_store(graphs, MemoryVersions(self.store.engine))
        self.identity = Identity(self.store, identity)  # which ids are served (sessions/users.py)
        self.agent_keys = AgentKeys(self.store.engine)  # what agents hold instead of an id (Settings → Agent keys)
        self.limits = limits or Limits()
        self._allow_llm_change = allow_llm_change
        self.url_check = url_check  # verdict on a user-supplied base URL (memory.url_guard)
        # What each user runs, one piece of work per lane, on the owner of every per-user lock (app.py gives
        # the agent's, so one object holds every level).
        if locks is not None and locks is not agent.locks:
            raise ValueError("one owner of per-user locks: pass the agent's (agent.locks), or none")
        self.work = UserWork(agent.locks)
        self.builds = BuildPool(self.limits.build_workers, self.limits.build_nice)
        self.import_rate = ImportRate(self.limits.imports_per_hour)
        self.lifecycle = Lifecycle(self.store, agent, self.options, self.llm, build_runner=self.builds.run)
        self.chat = Chat(self.store, agent, self.lifecycle)

    # --- identity ----------------------------------------------------------------------------
    def user(self, user_id: object) -> UserKey:
        """The key the user is stored and served under (sessions/users.py); InvalidUserId for an id that
        may not be used. Every method passes its user on as this key, never as the id."""
        return self.identity.check(user_id)

    def new_user(self, request=None) -> str:
        """Issue a new user id (a secret: whoever holds it reads that user's memory), rate-limited per client
        address (that of the Gradio `request`, or a plain address string)."""
        client = request if isinstance(request, str) else self.identity.client_of(request)
        uid = self.identity.issue(client)
        self.current_session(uid)
        return uid

    def sign_in(self, account_id: str) -> str:
        """A signed-in account's user id (sessions/users.py, derived on the server), registered on
        its first sign-in; not rate-limited: one account is one user."""
        uid = self.identity.register(account_id)
        self.current_session(uid)
        return uid

    def is_known(self, user_id: object) -> bool:
        return self.identity.known(user_id)

    # --- settings of a user ---------------------------------------------------------------
    def prefs(self, user_id: str) -> dict:
        return self.store.get_prefs(self.user(user_id))

    def options(self, user_id: str, strategy: str | None = None) -> Options:
        return _prefs.options_for(self.settings.options, self.prefs(user_id), strategy)

    @property
    def allow_llm_change(self) -> bool:
        """May visitors choose the LLM backend, model and URL (sessions.settings.llm_change_allowed)?"""
        return self._allow_llm_change

    def llm(self, user_id: str) -> LLMConfig | None:
        return _prefs.llm_for(self.settings.llm, self.prefs(user_id), self.allow_llm_change)

    def llm_public(self, user_id: str) -> dict:
        return _prefs.llm_public(self.settings.llm, self.prefs(user_id), self.allow_llm_change)

    def save_settings(self, user_id: str, options: dict, llm: dict | None = None) -> Options:
        """Validate and save; raises InvalidOptions (message for people) and keeps the old values."""
        user_id = self.user(user_id)
        p = self.prefs(user_id)
        new = dict(p, options=dict(p.get("options") or {}, **_prefs.validated_options(self.settings.options, options)))
        if llm is not None:
            chosen = _prefs.validated_llm(llm, self.settings.llm, self.allow_llm_change, self.url_check)
            if chosen is not None:
                new["llm"] = chosen
        self.store.set_prefs(user_id, new)
        return self.options(user_id)

    def set_strategy(self, user_id: str, strategy: str) -> Options:
        user_id = self.user(user_id)
        opts = self.options(user_id, strategy)  # raises InvalidOptions on an unknown strategy
        self.store.set_prefs(user_id, dict(self.prefs(user_id), strategy=strategy))
        return opts

    # --- chat -------------------------------------------------------------------------------
    def current_session(self, user_id: str) -> SessionRow:
        """The open session, with its number in time order (as the session list shows it)."""
        user_id = self.user(user_id)
        s = self.lifecycle.current(user_id)
        s.number = next((r.number for r in self.lifecycle.sessions(user_id) if r.session_id == s.session_id), 0)
        return s

    def messages(self, user_id: str, session_id: str | None = None) -> list[MessageRow]:
        user_id = self.user(user_id)
        sid = session_id or self.lifecycle.current(user_id).session_id
        return self.store.messages(user_id, sid)

    def send(self, user_id: str, message: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        try:
            user_id = self.user(user_id)
            opts, llm = self.options(user_id, strategy), self.llm(user_id)
        except Exception as e:
            if database_down(e):  # nothing was stored: the sender keeps the text
                raise DatabaseUnavailable(NOT_STORED) from None
            raise
        return self.work.stream(user_id, "reply", lambda: self.chat.send(user_id, message, opts, llm))

    def retry(self, user_id: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        user_id = self.user(user_id)
        opts, llm = self.options(user_id, strategy), self.llm(user_id)
        return self.work.stream(user_id, "reply", lambda: self.chat.retry(user_id, opts, llm))

    def stop_reply(self, user_id: str) -> None:
        """The user pressed Stop: once the cancelled reply has recorded its interruption (or after
        STOP_WAIT_S, when it is stuck in a slow call), the chat lane is free for Retry."""
        self.work.stop(self.user(user_id), "chat", STOP_WAIT_S)

    def compare(self, user_id: str, message: str) -> Iterator[dict]:
        user_id = self.user(user_id)
        opts, llm = self.options(user_id), self.llm(user_id)
        return self.work.stream(user_id, "compare", lambda: self.chat.compare(user_id, message, opts, llm))

    def last_compare(self, user_id: str) -> dict | None:
        """The user's latest comparison (message, results, session, time): the page shows it again after a reload."""
        rows = self.store.compares(self.user(user_id), last=1)
        return rows[0] if rows else None

    def reply_for(self, user_id: str, message_id: int) -> MessageRow | None:
        """The reply a chat message stands for: itself if it is a reply, else the reply to it."""
        user_id = self.user(user_id)
        m = self.store.message(user_id, int(message_id))
        if m is None or m.role == "assistant":
            return m
        return self.store.reply_to(user_id, m.id)

    def last_reply(self, user_id: str) -> MessageRow | None:
        return self.store.last_reply(self.user(user_id))

    def message(self, user_id: str, message_id: int) -> MessageRow | None:
        """One stored message of the user (the page shows a sent message as stored). For an id the caller
        has already passed through a service call: it reads the row without checking the id again."""
        return self.store.message(user_id, message_id)

    # --- the user's running work (sessions/work.py): reads of this process's state, not checked ---------
    def chat_running(self, user_id: str) -> bool:
        """A reply (or a comparison) of the user is running now."""
        return self.work.running(user_id, "chat") is not None

    def memory_work_running(self, user_id: str) -> Work | None:
        """The user's running memory work (a build, an import, deleting a memory, Forget me), or None."""
        return self.work.running(user_id, "memory")

    def memory_work_finished(self, user_id: str) -> Work | None:
        """The user's background memory work that ended and whose result was not shown yet."""
        return self.work.finished(user_id, "memory")

    def take_memory_work_finished(self, user_id: str) -> Work | None:
        """As memory_work_finished, and removed: its result is shown once."""
        return self.work.take_finished(user_id, "memory")

    # --- sessions -----------------------------------------------------------------------------
    def end_session(
        self, user_id: str, next_date: str | None = None, progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        """End the open session; the next one is dated `next_date` (not before this one). With
        build=False the memory is left for `build_pending` (the page runs it in the background)."""
        return self._end(self.user(user_id), next_date, progress, build)

    def new_session(self, user_id: str, date: str, progress: Progress | None = None, build: bool = True) -> EndResult:
        """Start a session on `date`; the open one is ended first if it has messages."""
        return self._end(self.user(user_id), check_date(date), progress, build)

    def _end(self, user_id: str, next_date: str | None, progress: Progress | None, build: bool) -> EndResult:
        self._check_room(user_id, new_sessions=1)
        if not build:  # only the session's status changes here; build_pending holds the build slot
            return self.lifecycle.end(user_id, next_date, progress, build=False)
        with self.work.hold(user_id, "close"):
            return self.lifecycle.end(user_id, next_date, progress)

    def build_pending(self, user_id: str, progress: Progress | None = None) -> EndResult:
        """Build the memory of every ended session still waiting for it (after build=False)."""
        user_id = self.user(user_id)
        with self.work.hold(user_id, "close"):
            return self._build_pending(user_id, progress)

    def start_build(self, user_id: str, kind: str = "close") -> Work:
        """`build_pending` in the background (the page), as work of `kind` ("close", or "import" after an
        import); its progress and result are on the Work (`memory_work_running` / `take_memory_work_finished`).
        Busy when a build runs."""
        user_id = self.user(user_id)
        return self.work.start(user_id, kind, lambda w: self._build_pending(user_id, w.progress))

    def _build_pending(self, user_id: str, progress: Progress | None) -> EndResult:
        result = EndResult(closed=self.lifecycle.close_pending(user_id, progress))
        result.session = self.lifecycle.current(user_id)
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

    def default_next_date(self, user_id: str) -> str:
        """The proposed date of the next session: the last session's date plus one day."""
        return self.lifecycle.default_next_date(self.user(user_id))

    def _check_room(self, user_id: str, new_sessions: int) -> None:
        """Per-user bounds on stored sessions and memories (Limits); LimitReached says what to do."""
        lim = self.limits
        if lim.sessions:
            n = len(self.store.sessions(user_id))
            if n + new_sessions > lim.sessions:
                raise LimitReached(
                    f"You have {n} stored sessions; this server keeps at most {lim.sessions} per "
                    "user. Export your memory and use Forget me to start again."
                )
        if lim.memories:
            n = len(self.agent.graph_view(user_id).get("nodes") or [])
            if n >= lim.memories:
                raise LimitReached(
                    f"Your memory holds {n} memories; this server keeps at most {lim.memories} per "
                    "user. Delete some memories, or export and use Forget me, to add more."
                )

    def sessions(self, user_id: str) -> list[SessionRow]:
        """The user's sessions in time order (by date, then number)."""
        return self.lifecycle.sessions(self.user(user_id))

    def recover_pending_closes(self) -> int:
        """At start: finish every close a crash or failure left undone. Returns how many were retried
        (a user already building is skipped: that build takes the pending sessions too)."""
        n = 0
        for key in self.store.users_with_pending_closes():
            user_id = UserKey(key)  # read from the database: the server acts for this user itself
            try:
                with self.work.hold(user_id, "close"):
                    n += len(self.lifecycle.close_pending(user_id))
            except Busy:
                continue
        return n

    def latest_new_memories(self, user_id: str) -> list[str]:
        """Memory ids added by the most recent completed close (marked "new" in the graph)."""
        user_id = self.user(user_id)
        for s in reversed(self.sessions(user_id)):
            if s.status == "closed" and s.report and not s.report.get("already_built"):
                return list(s.report.get("new_memories") or [])
        return []

    # --- memory views and management -------------------------------------------------------------
    def graph(self, user_id: str) -> dict:
        return self.agent.graph_view(self.user(user_id))

    def segments(self, user_id: str) -> list[dict]:
        """The user's SeCom segments (text, key, session)."""
        return list(self.agent.export_user(self.user(user_id)).get("secom_segments") or [])

    def turn_texts(self, user_id: str, turn_ids) -> dict[str, tuple[str, str]]:
        """{turn id: (speaker, text)} for the given turn ids (a memory's provenance), from the transcript."""
        user_id = self.user(user_id)
        wanted = {str(t) for t in turn_ids or ()}
        out: dict[str, tuple[str, str]] = {}
        if not wanted:
            return out
        for s in self.store.sessions(user_id):
            if s.status == "open":
                continue
            for t in self.lifecycle.record(user_id, s).turns:
                if t.turn_id in wanted:
                    out[t.turn_id] = (t.speaker, t.text)
            if len(out) == len(wanted):
                break
        return out

    def delete_memory(self, user_id: str, memory_id: str, redact: bool = False) -> dict | None:
        """Forget one memory everywhere: THEANINE (graph and Chroma) and SeCom (the segments built from
        its source turns, rebuilt without them). With `redact`, those turns are also blanked in the
        transcript. Returns what was removed and kept ("message" says it for people), or None when
        the memory does not exist."""
        user_id = self.user(user_id)
        if not isinstance(memory_id, str) or not memory_id.strip() or len(memory_id) > MAX_MEMORY_ID_CHARS:
            raise UserError("Choose a memory to delete.")
        records: dict[str, tuple] = {}

        def session_of(session_id: str):
            if session_id not in records:
                row = self.store.session(user_id, session_id)
                msgs = self.store.messages(user_id, session_id, include_errors=False) if row else []
                rec = self.lifecycle.record(user_id, row) if row else None
                records[session_id] = (rec, msgs)
            return records[session_id][0]

        # The memory lane and the claim: not while this process or a replica builds the user's memory.
        with self.work.hold(user_id, "delete"), self.store.close_claim(user_id):
            gone = self.agent.forget_memory(user_id, memory_id.strip(), session_of)
        if gone is None:
            return None
        rec = session_of(gone["session_id"])  # the transcript as it is before any redaction
        source = {t.turn_id: (t.speaker, t.text) for t in (rec.turns if rec else []) if t.turn_id in set(gone["turns"])}
        gone["copies_scrubbed"] = upkeep.database(
            self.store.engine, user_id, upkeep.Forgotten.of(gone["memory"], gone["event"], source)
        )
        redacted = 0
        if redact and gone["turns"]:
            session_of(gone["session_id"])
            rec, msgs = records.get(gone["session_id"], (None, []))
            # record() lists the session's ok messages in order, one turn each: map turn ids back to rows.
            ids = [
                m.id for t, m in zip(rec.turns if rec else [], msgs, strict=False) if t.turn_id in set(gone["turns"])
            ]
            redacted = self.store.redact_messages(user_id, ids, REDACTED)
        gone["redacted"] = redacted
        gone["message"] = forget_message(gone)
        self._purge_deleted()
        return gone

    def export(self, user_id: str) -> dict:
        """Everything kept about the user, as JSON: sessions (importable format) and both memories.

        The user id itself is left out: it is the browser's credential and a shared file must not leak it.
        """
        user_id = self.user(user_id)
        sessions = []
        for s in self.store.sessions(user_id):
            msgs = self.store.messages(user_id, s.session_id, include_errors=False)
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
                "memory": self.agent.export_user(user_id),
                "settings": self.prefs(user_id),
                "damaged": [{k: d[k] for k in ("item", "message")} for d in self.damage(user_id)],
            }
        )

    def import_history(
        self, user_id: str, data: bytes | str, sample_id: str = "", progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        """Store a history (see sessions.transfer) as closed sessions and build their memory at once
        (build=False: stored only; `build_pending` builds it, e.g. in the background)."""
        user_id = self.user(user_id)
        with self.work.hold(user_id, "import"):
            self.import_rate.take(user_id)
            try:
                parsed = self._parse_import(data, sample_id)
                self._check_room(user_id, new_sessions=len(parsed))
            except Exception:
                self.import_rate.give_back(user_id)  # refused before anything was stored: not counted
                raise
            return self._import(user_id, parsed, progress, build)

    @staticmethod
    def _parse_import(data: bytes | str, sample_id: str) -> list:
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
            parsed = parse_history(obj, clean_text(sample_id or "")[:200])
        except RecursionError:
            raise ImportFormatError("the file is nested too deeply to be a history") from None
        return parsed

    def _import(self, user_id: str, parsed: list, progress: Progress | None, build: bool) -> EndResult:
        self.store.add_imported_sessions(user_id, [(s.date, s.turns) for s in parsed])
        n_turns = sum(len(s.turns) for s in parsed)
        if not build:
            result = EndResult(session=self.lifecycle.current(user_id))
            result.message = (
                f"Imported {plural(len(parsed), 'session')} ({plural(n_turns, 'turn')}); building their memory."
            )
            return result
        result = EndResult(closed=self.lifecycle.close_pending(user_id, progress))
        result.session = self.lifecycle.current(user_id)
        built = [c for c in result.closed if c.report]
        result.message = (
            f"Imported {plural(len(parsed), 'session')} ({plural(n_turns, 'turn')}); memory built "
            f"for {len(built)} of {len(result.closed)}."
        )
        if result.errors:
            result.message += " " + result.errors[0]
        return result

    def forget(self, user_id: str) -> dict[str, int]:
        """Delete everything about the user: memory in every store first, then sessions and messages.
        Returns what was deleted, counted per kind (sessions, messages, memories, segments)."""
        user_id = self.user(user_id)
        # The claim: no replica is building this user's memory while it is deleted.
        with self.work.hold(user_id, "forget"), self.store.close_claim(user_id):
            rows = self.store.sessions(user_id)
            gone = {
                "sessions": sum(1 for r in rows if r.n_messages),  # not the empty one opened last
                "messages": sum(r.n_messages for r in rows),
                "memories": len(self.agent.graph_view(user_id)["nodes"]),
                "segments": len(self.agent.export_user(user_id).get("secom_segments") or []),
            }
            self.agent.forget_user(user_id)
            self.store.delete_user(user_id)
            self._purge_deleted()
        return gone


EXPORT_DATE_KEYS = ("date", "time")


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
    """What Forget me deleted, for people (`SessionService.forget`'s counts)."""
    what = [
        plural(gone.get("sessions", 0), "session"),
        plural(gone.get("messages", 0), "message"),
        plural(gone.get("memories", 0), "THEANINE memory", "THEANINE memories"),
        plural(gone.get("segments", 0), "SeCom segment"),
    ]
    return f"Deleted {', '.join(what[:-1])} and {what[-1]}: nothing of yours is kept. You continue as a new user."


def forget_message(gone: dict) -> str:
    """What a deletion removed and what it kept, for people."""
    n_turns, rebuilt, removed = len(gone["turns"]), len(gone["segments_rebuilt"]), len(gone["segments_removed"])
    parts = [f"Deleted the memory “{gone['event']}” from THEANINE (graph and vector store)."]
    if n_turns:
        parts.append(
            f"SeCom: its {plural(n_turns, 'source turn')} taken out of "
            f"{plural(rebuilt + removed, 'segment')} ({rebuilt} rebuilt without them, {removed} removed)."
        )
    else:
        parts.append("It has no recorded source turns, so SeCom's segments are unchanged.")
    if gone.get("redacted"):
        parts.append(f"Transcript: {plural(gone['redacted'], 'turn')} redacted.")
    else:
        parts.append("Kept: the session's transcript (tick “also redact” to blank those turns).")
    if gone.get("copies_scrubbed"):
        parts.append(
            f"Also taken out of {plural(gone['copies_scrubbed'], 'stored copy', 'stored copies')} (traces, excerpts)."
        )
    return " ".join(parts)


def user_message(exc: BaseException) -> str:
    """What to show for an exception: its own text when written for people, else a generic line."""
    if isinstance(exc, (UserError, InvalidOptions)):
        return clean_text(str(exc))
    if database_down(exc):
        return DATABASE_DOWN
    if isinstance(exc, MemoryLibError):
        return clean_text(f"The memory store had a problem: {exc}. Please try again.")
    return "Something went wrong. Please try again."
