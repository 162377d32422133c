"""What one chat message costs the database (issue 45, item 1): user-id checks and write transactions.

A chat message is counted twice: through the service alone (`send`, its stream read to the end) and
as the page's whole event (ui.handlers.Handlers.send: the chat shown before, the stream, the views
drawn after). Every statement on the app's database (sessions.sqlite3: sessions, messages and the
graph) is seen through SQLAlchemy's cursor events:

* a user-id check: a statement that reads or registers a row of `users` by its key (the id checked
  against the issued ones, or an ensure-user insert);
* a write transaction: one opened with BEGIN IMMEDIATE; an idle one changed no row (a read that
  held the writer's lock for nothing).

The page's load is counted too, with how often the graph view is built. The bounds are the figures
after the front door's rework. Before it (commit 8896a44) the page's send event cost 23 user-id checks
and 14 write transactions (12 of them idle), 67 statements, and built the graph view twice; the
service's `send` alone 2 checks and 4 write transactions (2 idle), 16 statements; a page load 26
checks and 10 write transactions (all idle), 61 statements, the graph view built twice. Run with -s to
print them: `python -m pytest -q -s tests/test_front_door_counts.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa

from memory.settings import Settings
from sessions.settings import IdentityConfig
from tests.fakes import HashEmbedder, ScriptedLLM, offline_agent


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
    from sessions.service import open_service

    agent = offline_agent(tmp_path, HashEmbedder(), ScriptedLLM("Rex is your dog."))
    # The app's identity: only ids this server issued are served (each checked against the database).
    return open_service(Settings(data_dir=tmp_path), agent, identity=IdentityConfig(issued_only=True))


@pytest.fixture
def user(service):
    uid = service.new_user("127.0.0.1")
    list(service.send(uid, "I adopted a dog named Rex last week."))
    service.end_session(uid)  # one session in memory: the reply reads it
    return uid


def test_one_message_through_the_service(service, user):
    counter = Counter(service.store.engine)
    counts = counter.start()
    updates = list(service.send(user, "What is my dog called?"))
    counter.stop()
    print("\nservice.send:", counts.line())
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
