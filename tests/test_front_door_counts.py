"""What one chat message costs the database (issue 45, item 1): user-id checks and write transactions.

A chat message is counted twice: through the service alone (the id checked, then the chat room's `send`,
its stream read to the end) and as the page's whole event (ui.handlers.Handlers.send: the chat shown
before, the stream, the views drawn after). Every statement on the app's database (sessions.sqlite3:
sessions, messages and the graph) is seen through SQLAlchemy's cursor events:

* a user-id check: a statement that reads or registers a row of `users` by its key (the id checked
  against the issued ones, or an ensure-user insert);
* a write transaction: one opened with BEGIN IMMEDIATE; an idle one changed no row (a read that
  held the writer's lock for nothing).

The page's load is counted too, with how often the graph view is built. The bounds are the figures
after the front door's rework. Before it (commit 8896a44) the page's send event cost 23 user-id checks
and 14 write transactions (12 of them idle), 67 statements, and built the graph view twice; the
service's `send` (then a flat name) alone 2 checks and 4 write transactions (2 idle), 16 statements; a
page load 26 checks and 10 write transactions (all idle), 61 statements, the graph view built twice.
Run with -s to print them: `python -m pytest -q -s tests/test_front_door_counts.py`.

The front door's own methods are listed too, with each room's: `SessionService` holds the rooms, the
user's check (`user`), the page's snapshot and two settings; the flat names of before (45 public methods,
41 of them one line onto a room) are the tests' shorthand now (tests/flat_service.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pytest
import sqlalchemy as sa

from memory.settings import Settings
from sessions.service import SessionService, open_service
from sessions.settings import IdentityConfig
from tests.fakes import HashEmbedder, ScriptedLLM, offline_agent
from tests.flat_service import FlatService


@dataclass
class Counts:
    user_checks: int = 0
    writes: int = 0
    idle_writes: int = 0
    statements: int = 0
    _open: dict[int, int] = field(default_factory=dict)  # connection -> SQLite's changed rows at its BEGIN IMMEDIATE

    def line(self) -> str:
        return (
            f"{self.user_checks} user-id checks, {self.writes} write transactions "
            f"({self.idle_writes} that changed nothing), {self.statements} statements"
        )


class Counter:
    """Counts on `engine` between start() and stop()."""

    def __init__(self, engine: sa.Engine):
        self.engine, self.counts, self.on = engine, Counts(), False
        sa.event.listen(engine, "before_cursor_execute", self._before)
        sa.event.listen(engine, "commit", self._end)
        sa.event.listen(engine, "rollback", self._end)

    def start(self) -> Counts:
        self.counts, self.on = Counts(), True
        return self.counts

    def stop(self) -> Counts:
        self.on = False
        return self.counts

    def _before(self, conn, cursor, statement, parameters, context, executemany):
        if not self.on:
            return
        c, s = self.counts, " ".join(statement.split()).upper()
        if s.startswith("BEGIN IMMEDIATE"):
            c.writes += 1
            c._open[id(conn)] = cursor.connection.total_changes  # SQLite's count of changed rows
            return
        if s.startswith("BEGIN"):
            return
        c.statements += 1
        if s.startswith("SELECT USERS.USER_ID FROM USERS") or s.startswith("INSERT INTO USERS"):
            c.user_checks += 1

    def _end(self, conn):
        if not (self.on and id(conn) in self.counts._open):
            return
        if self.counts._open.pop(id(conn)) == conn.connection.dbapi_connection.total_changes:
            self.counts.idle_writes += 1


class Fields:
    """Stands in for ui.components.Page: every component the handlers key their updates by."""

    def __getattr__(self, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        return name


@pytest.fixture
def service(tmp_path):
    agent = offline_agent(tmp_path, HashEmbedder(), ScriptedLLM("Rex is your dog."))
    # The app's identity: only ids this server issued are served (each checked against the database).
    return FlatService(open_service(Settings(data_dir=tmp_path), agent, identity=IdentityConfig(issued_only=True)))


@pytest.fixture
def user(service):
    uid = service.new_user("127.0.0.1")
    list(service.send(uid, "I adopted a dog named Rex last week."))
    service.end_session(uid)  # one session in memory: the reply reads it
    return uid


def test_one_message_through_the_service(service, user):
    counter = Counter(service.store.engine)
    counts = counter.start()
    updates = list(service.rooms.chat.send(service.user(user), "What is my dog called?"))  # the id checked once
    counter.stop()
    print("\nthe chat room's send, the id checked first:", counts.line())
    assert updates[-1].kind == "done" and updates[-1].error is None
    assert counts.user_checks <= 1, counts.line()
    assert counts.idle_writes == 0, counts.line()
    assert counts.writes <= 2, counts.line()  # the message, then its reply


def graph_views(service) -> list[int]:
    """A counter of the graph views the agent builds from now on."""
    built, view = [0], service.agent.graph_view

    def counted(user_id: str) -> dict:
        built[0] += 1
        return view(user_id)

    service.agent.graph_view = counted
    return built


def test_one_message_as_the_page_sends_it(service, user):
    from ui.handlers import Handlers

    h = Handlers(service, Fields())  # type: ignore[arg-type]  # the handlers key their updates by component
    h.load(user)
    counter, built = Counter(service.store.engine), graph_views(service)
    counts = counter.start()
    out = list(h.send(user, "What is my dog called?", None))
    counter.stop()
    print("\nthe page's send event:", counts.line(), f"graph views built {built[0]}")
    assert out and out[-1].get("status") == "", out[-1].get("status")  # the reply came, no error shown
    assert counts.user_checks <= 1, counts.line()
    assert counts.idle_writes == 0, counts.line()
    assert counts.writes <= 2, counts.line()
    assert built[0] == 1


def test_a_page_load_reads_without_writing(service, user):
    from ui.handlers import Handlers

    h = Handlers(service, Fields())  # type: ignore[arg-type]
    counter, built = Counter(service.store.engine), graph_views(service)
    counts = counter.start()
    out = h.load(user)
    counter.stop()
    print("\na page load:", counts.line(), f"graph views built {built[0]}")
    assert out["uid"] == user and "Rex" in str(out["memory"])  # the same user, its memory listed
    assert counts.user_checks <= 1, counts.line()
    assert counts.writes == 0, counts.line()
    assert built[0] == 1


FRONT_DOOR = {"user", "page", "allow_llm_change", "url_check"}


def public_methods(cls: type) -> list[str]:
    """The names a caller may use on an instance of `cls` beyond its attributes: methods and properties."""
    return sorted(n for n in vars(cls) if not n.startswith("_"))


def test_the_front_door_holds_the_rooms(service):
    rooms = service.service.rooms  # the app's service, not the tests' shorthand around it
    print(f"\nSessionService: {len(public_methods(SessionService))}: {', '.join(public_methods(SessionService))}")
    for f in fields(rooms):
        names = public_methods(type(getattr(rooms, f.name)))
        print(f"rooms.{f.name}: {len(names)}: {', '.join(names)}")
    assert set(public_methods(SessionService)) == FRONT_DOOR
    assert public_methods(type(rooms)) == ["page"]
