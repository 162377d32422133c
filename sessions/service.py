"""The front door the page, the API and MCP call: `open_service` builds it (the I/O of starting: the database
and its migrations, the graph's old JSON folders, the secret registered for redaction, the agent wired to the
shared graph), and `SessionService` holds its typed rooms (`service.rooms`), each taking a user as the
`UserKey` the edge of the event resolved once (`service.user(user_id)`): users (ids and settings), chat
(replies, Compare), sessions (sessions, their messages, ending them and building their memory), memory (what
it holds, deleting a memory) and data (export, import, Forget me, damaged values). Callers, scripts included,
call the rooms: `service.rooms.chat.send(service.user(user_id), text)`.
"""

from __future__ import annotations

from memory.errors import InvalidOptions, MemoryLibError
from memory.locks import UserLocks
from memory.protocols import Agent
from memory.settings import Settings
from memory.text import clean_text, register_secret
from memory.url_guard import check_url

from .agent_keys import AgentKeys
from .chat_room import ChatRoom
from .data_room import DataRoom, forgotten, one_date_format
from .db import DATABASE_DOWN, MemoryVersions, UserError, database_down
from .graph_store import SqlGraphStore
from .lifecycle import Chat, ChatUpdate, EndResult, Lifecycle
from .memory_room import MemoryRoom, forget_message
from .rooms import PageData, Rooms
from .session_room import SessionRoom
from .settings import IdentityConfig, Limits
from .store import Store, open_store
from .user_room import UserRoom
from .users import Identity, UserKey
from .work import BuildPool, ImportRate, UserWork

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

    def user(self, user_id: object) -> UserKey:
        """The key of `user_id`, checked once (sessions.user_room.UserRoom.user): what the rooms take."""
        return self.rooms.users.user(user_id)

    def page(self, user_id: str, last_trace: bool = False) -> PageData:
        """What the page shows of the user, in one call (sessions.rooms.Rooms.page)."""
        return self.rooms.page(self.user(user_id), last_trace)

    @property
    def allow_llm_change(self) -> bool:
        """May visitors choose the LLM backend, model and URL (sessions.settings.llm_change_allowed)?"""
        return self.rooms.users.allow_llm_change

    @property
    def url_check(self):
        """The verdict on a user-supplied base URL (memory.url_guard.check_url, or the one given)."""
        return self.rooms.users.url_check


def user_message(exc: BaseException) -> str:
    """What to show for an exception: its own text when written for people, else a generic line."""
    if isinstance(exc, (UserError, InvalidOptions)):
        return clean_text(str(exc))
    if database_down(exc):
        return DATABASE_DOWN
    if isinstance(exc, MemoryLibError):
        return clean_text(f"The memory store had a problem: {exc}. Please try again.")
    return "Something went wrong. Please try again."
