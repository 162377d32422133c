"""The front door the page, the API and MCP call: `open_service` builds it (the I/O of starting: the database
and its migrations, the graph's old JSON folders, the secret registered for redaction, the agent wired to the
shared graph), and `SessionService` holds its typed rooms, each taking a user as the `UserKey` the edge of
the event resolved once: users (ids and settings), chat (replies, Compare), sessions (sessions, their
messages, ending them and building their memory), memory (what it holds, deleting a memory) and data
(export, import, Forget me, damaged values). The service's own methods are the flat names of before, one
line each onto a room, each checking its id first: for scripts and tests.
"""

from __future__ import annotations

from collections.abc import Iterator

from memory.errors import InvalidOptions, MemoryLibError
from memory.locks import UserLocks
from memory.protocols import Agent
from memory.records import Progress
from memory.settings import LLMConfig, Options, Settings
from memory.text import clean_text, register_secret
from memory.url_guard import check_url

from .agent_keys import AgentKeys
from .chat_room import ChatRoom
from .data_room import DataRoom, forgotten, one_date_format
from .db import DATABASE_DOWN, NOT_STORED, MemoryVersions, UserError, database_down, outage_as
from .graph_store import SqlGraphStore
from .lifecycle import Chat, ChatUpdate, EndResult, Lifecycle
from .memory_room import MemoryRoom, forget_message
from .rooms import PageData, Rooms
from .session_room import SessionRoom
from .settings import IdentityConfig, Limits
from .store import MessageRow, SessionRow, Store, open_store
from .user_room import UserRoom
from .users import Identity, UserKey
from .work import BuildPool, ImportRate, UserWork, Work

__all__ = [
    "ChatUpdate",
    "EndResult",
    "Rooms",
    "SessionService",
    "UserError",
    "forget_message",
    "forgotten",
    "one_date_format",
    "open_service",
    "user_message",
]


def open_service(
    settings: Settings,
    agent: Agent,
    store: Store | None = None,
    limits: Limits | None = None,
    url_check=check_url,
    identity: IdentityConfig | None = None,
    allow_llm_change: bool = True,
    database_url: str = "",
    locks: UserLocks | None = None,
) -> SessionService:
    """The service on the data dir's database (or `database_url`'s, or `store`): `settings` are the memory's;
    the app's own (limits, identity, whether visitors may choose the LLM, the database) come from
    sessions.settings.AppSettings as the arguments after them. app.py, `python -m sessions`, bench/ and the
    tests start it here."""
    register_secret(settings.llm.api_key)  # never stored or shown (memory.text)
    store = store or open_store(settings.data_dir, database_url)
    # The graph lives next to the sessions, shared by replicas.
    graphs = SqlGraphStore(store.engine)
    graphs.import_json_folders(settings.data_dir)  # a data dir from before: JSON graph files
    agent.use_graph_store(graphs, MemoryVersions(store.engine))
    return SessionService(settings, agent, store, limits, url_check, identity, allow_llm_change, locks)


class SessionService:
    def __init__(
        self,
        settings: Settings,
        agent: Agent,
        store: Store,
        limits: Limits | None = None,
        url_check=check_url,
        identity: IdentityConfig | None = None,
        allow_llm_change: bool = True,
        locks: UserLocks | None = None,
    ):
        """Only assigns: `open_service` opens what this holds."""
        self.settings, self.agent, self.store = settings, agent, store
        self.limits = limits or Limits()
        self.identity = Identity(store, identity)  # which ids are served (sessions/users.py)
        self.agent_keys = AgentKeys(store.engine)  # what agents hold instead of an id (Settings → Agent keys)
        # What each user runs, one piece of work per lane, on the owner of every per-user lock (app.py gives
        # the agent's, so one object holds every level).
        if locks is not None and locks is not agent.locks:
            raise ValueError("one owner of per-user locks: pass the agent's (agent.locks), or none")
        self.work = UserWork(agent.locks)
        self.builds = BuildPool(self.limits.build_workers, self.limits.build_nice)
        self.import_rate = ImportRate(self.limits.imports_per_hour)
        users = UserRoom(settings, store, self.identity, allow_llm_change, url_check)
        self.lifecycle = Lifecycle(store, agent, users.options, users.llm, build_runner=self.builds.run)
        sessions = SessionRoom(store, self.lifecycle, agent, self.work, self.limits)
        chat = ChatRoom(users, store, Chat(store, agent, self.lifecycle), self.work)
        memory = MemoryRoom(users, sessions, store, self.lifecycle, agent, self.work)
        data = DataRoom(users, sessions, store, self.lifecycle, agent, self.work, self.import_rate)
        self.rooms = Rooms(users, chat, sessions, memory, data)

    @property
    def allow_llm_change(self) -> bool:
        """May visitors choose the LLM backend, model and URL (sessions.settings.llm_change_allowed)?"""
        return self.rooms.users.allow_llm_change

    def page(self, user_id: str, last_trace: bool = False) -> PageData:
        """What the page shows of the user, in one call (sessions.rooms.Rooms.page)."""
        return self.rooms.page(self.user(user_id), last_trace)

    @property
    def url_check(self):
        return self.rooms.users.url_check

    # --- the flat names: the id checked (once), then the room ------------------------------------------------
    def user(self, user_id: object) -> UserKey:
        return self.rooms.users.user(user_id)

    def new_user(self, request=None) -> str:
        return self.rooms.users.new_user(request)

    def sign_in(self, account_id: str) -> str:
        return self.rooms.users.sign_in(account_id)

    def is_known(self, user_id: object) -> bool:
        return self.rooms.users.is_known(user_id)

    def prefs(self, user_id: str) -> dict:
        return self.rooms.users.prefs(self.user(user_id))

    def options(self, user_id: str, strategy: str | None = None) -> Options:
        return self.rooms.users.options(self.user(user_id), strategy)

    def llm(self, user_id: str) -> LLMConfig | None:
        return self.rooms.users.llm(self.user(user_id))

    def llm_public(self, user_id: str) -> dict:
        return self.rooms.users.llm_public(self.user(user_id))

    def save_settings(self, user_id: str, options: dict, llm: dict | None = None) -> Options:
        return self.rooms.users.save_settings(self.user(user_id), options, llm)

    def set_strategy(self, user_id: str, strategy: str) -> Options:
        return self.rooms.users.set_strategy(self.user(user_id), strategy)

    def current_session(self, user_id: str) -> SessionRow:
        return self.rooms.sessions.current(self.user(user_id))

    def messages(self, user_id: str, session_id: str | None = None) -> list[MessageRow]:
        return self.rooms.sessions.messages(self.user(user_id), session_id)

    def message(self, user_id: str, message_id: int) -> MessageRow | None:
        return self.rooms.sessions.message(self.user(user_id), message_id)

    def send(self, user_id: str, message: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        with outage_as(NOT_STORED):  # nothing was stored: the sender keeps the text
            key = self.user(user_id)
        return self.rooms.chat.send(key, message, strategy)

    def retry(self, user_id: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        return self.rooms.chat.retry(self.user(user_id), strategy)

    def stop_reply(self, user_id: str) -> None:
        self.rooms.chat.stop(self.user(user_id))

    def compare(self, user_id: str, message: str) -> Iterator[dict]:
        return self.rooms.chat.compare(self.user(user_id), message)

    def last_compare(self, user_id: str) -> dict | None:
        return self.rooms.chat.last_compare(self.user(user_id))

    def reply_for(self, user_id: str, message_id: int) -> MessageRow | None:
        return self.rooms.chat.reply_for(self.user(user_id), message_id)

    def last_reply(self, user_id: str) -> MessageRow | None:
        return self.rooms.chat.last_reply(self.user(user_id))

    def chat_running(self, user_id: str) -> bool:
        return self.work.running(user_id, "chat") is not None  # this process's state: no id to check

    def memory_work_running(self, user_id: str) -> Work | None:
        return self.rooms.sessions.memory_work_running(user_id)

    def memory_work_finished(self, user_id: str) -> Work | None:
        return self.rooms.sessions.memory_work_finished(user_id)

    def take_memory_work_finished(self, user_id: str) -> Work | None:
        return self.rooms.sessions.take_memory_work_finished(user_id)

    def end_session(
        self, user_id: str, next_date: str | None = None, progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        return self.rooms.sessions.end(self.user(user_id), next_date, progress, build)

    def new_session(self, user_id: str, date: str, progress: Progress | None = None, build: bool = True) -> EndResult:
        return self.rooms.sessions.new(self.user(user_id), date, progress, build)

    def build_pending(self, user_id: str, progress: Progress | None = None) -> EndResult:
        return self.rooms.sessions.build_pending(self.user(user_id), progress)

    def start_build(self, user_id: str, kind: str = "close") -> Work:
        return self.rooms.sessions.start_build(self.user(user_id), kind)

    def default_next_date(self, user_id: str) -> str:
        return self.rooms.sessions.default_next_date(self.user(user_id))

    def sessions(self, user_id: str) -> list[SessionRow]:
        return self.rooms.sessions.in_order(self.user(user_id))

    def recover_pending_closes(self) -> int:
        return self.rooms.sessions.recover_pending_closes()

    def latest_new_memories(self, user_id: str) -> list[str]:
        return self.rooms.sessions.latest_new_memories(self.user(user_id))

    def set_session_date(
        self, user_id: str, session_id: str, date: str, progress: Progress | None = None, build: bool = True
    ) -> str:
        return self.rooms.sessions.set_date(self.user(user_id), session_id, date, progress, build)

    def graph(self, user_id: str) -> dict:
        return self.rooms.memory.graph(self.user(user_id))

    def segments(self, user_id: str) -> list[dict]:
        return self.rooms.memory.segments(self.user(user_id))

    def turn_texts(self, user_id: str, turn_ids) -> dict[str, tuple[str, str]]:
        return self.rooms.memory.turn_texts(self.user(user_id), turn_ids)

    def delete_memory(self, user_id: str, memory_id: str, redact: bool = False) -> dict | None:
        return self.rooms.memory.delete(self.user(user_id), memory_id, redact)

    def export(self, user_id: str) -> dict:
        return self.rooms.data.export(self.user(user_id))

    def import_history(
        self, user_id: str, data: bytes | str, sample_id: str = "", progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        return self.rooms.data.import_history(self.user(user_id), data, sample_id, progress, build)

    def forget(self, user_id: str) -> dict[str, int]:
        return self.rooms.data.forget(self.user(user_id))

    def damage(self, user_id: str) -> list[dict]:
        return self.rooms.data.damage(self.user(user_id))

    def repair(self, user_id: str, item: str, action: str, progress: Progress | None = None, build: bool = True) -> str:
        return self.rooms.data.repair(self.user(user_id), item, action, progress, build)


def user_message(exc: BaseException) -> str:
    """What to show for an exception: its own text when written for people, else a generic line."""
    if isinstance(exc, (UserError, InvalidOptions)):
        return clean_text(str(exc))
    if database_down(exc):
        return DATABASE_DOWN
    if isinstance(exc, MemoryLibError):
        return clean_text(f"The memory store had a problem: {exc}. Please try again.")
    return "Something went wrong. Please try again."
