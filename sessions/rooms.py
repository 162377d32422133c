"""The typed rooms of the front door, held together, and the one snapshot of a user's data the page draws
(`Rooms.page`): every room takes a user as the UserKey its event resolved once."""

from __future__ import annotations

from dataclasses import dataclass

from memory.trace_types import TraceDict

from .chat_room import ChatRoom
from .data_room import DataRoom
from .memory_room import MemoryRoom
from .session_room import SessionRoom
from .store import MessageRow, SessionRow
from .user_room import UserRoom
from .users import UserKey, own_key
from .work import Work


@dataclass
class PageData:
    """What the page shows of one user, read once per event."""

    sessions: list[SessionRow]  # in time order, numbered
    current: SessionRow  # the open session
    messages: list[MessageRow]  # the open session's
    strategy: str  # the user's saved strategy
    next_date: str  # what "start the next session on" proposes
    building: Work | None  # the user's running memory work: the graph is not read meanwhile
    graph: dict  # the THEANINE graph view ({} while building, or when it could not be read)
    graph_error: Exception | None  # why the graph could not be read: the rest of the page is still drawn
    new_memories: list[str]  # added by the latest completed close
    last_trace: TraceDict | None  # the latest reply's trace (asked for on page load)


@dataclass(frozen=True)
class Rooms:
    users: UserRoom
    chat: ChatRoom
    sessions: SessionRoom
    memory: MemoryRoom
    data: DataRoom

    def page(self, key: UserKey, last_trace: bool = False) -> PageData:
        key = own_key(key)
        rows = self.sessions.in_order(key)
        current = next((s for s in rows if s.status == "open"), None) or self.sessions.current(key)
        building = self.sessions.memory_work_running(key)
        last = self.chat.last_reply(key) if last_trace else None
        graph: dict = {}
        error: Exception | None = None
        if building is None:
            try:
                graph = self.memory.graph(key)
            except Exception as e:  # shown where the graph goes (ui/views.py), the chat still drawn
                error = e
        return PageData(
            sessions=rows,
            current=current,
            messages=self.sessions.messages(key, current.session_id),
            strategy=self.users.options(key).strategy,
            next_date=self.sessions.default_next_date(key),
            building=building,
            graph=graph,
            graph_error=error,
            new_memories=self.sessions.latest_new_memories(key, rows),
            last_trace=last.trace if last else None,
        )
