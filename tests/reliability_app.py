"""Helpers for the reliability tests: the real service stack in-process, the UI handlers without a
browser, and app.py in a subprocess that can be killed with SIGKILL.

In-process, everything is real except the LLM server (tests/llm_server.py): the real
MemoryAgent with MiniLM and embedded Chroma, the real `openai` client, the real SQLite store.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memory.agent import MemoryAgent
from memory.settings import Settings
from sessions import SessionService, open_service
from tests.flat_service import FlatService
from tests.llm_server import LLMServer, app_llm_env

if TYPE_CHECKING:
    from ui.components import Page
    from ui.handlers import Handlers

T = TypeVar("T")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")


def stand_ins(cls: type[T], name: str = "{}") -> T:
    """A components dataclass (ui.components.Page, ui.timetravel.TimePanel) of stand-ins for the Gradio
    components: handlers only use them as dict keys. Each field holds its own name (formatted by `name`),
    so a handler's output reads {"status": ..., "chatbot": ...}."""
    c = cls()
    for f in fields(cast(Any, cls)):
        setattr(c, f.name, name.format(f.name))
    return c


def components(name: str = "{}") -> Page:
    """The page's components as stand-ins (see stand_ins)."""
    from ui.components import Page

    return stand_ins(Page, name)


def make_service(data_dir: Path, server: LLMServer, **env) -> FlatService:
    e = {"MEMORY_DATA_DIR": str(data_dir), **app_llm_env(server, **env)}
    settings = Settings.from_env(e)
    return FlatService(open_service(settings, MemoryAgent.from_settings(settings)))


def handlers(service: SessionService) -> Handlers:
    from ui.handlers import Handlers

    return Handlers(service, components())


def drain(gen) -> list[dict]:
    return list(gen)


def last_done(updates):
    done = [u for u in updates if u.kind == "done"]
    assert len(done) == 1, updates
    return done[0]


def visible(update) -> bool:
    return bool(update.get("visible")) if isinstance(update, dict) else bool(update)


# --- checks on the files an app left behind -------------------------------------------------


def sqlite_ok(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def graph_dirs(data_dir: Path) -> list[Path]:
    return sorted(Path(data_dir).glob("users/*/theanine_graph"))


def graphs_ok(data_dir: Path) -> list[dict]:
    """Every user's graph as stored in the data dir's database (one part per built session);
    no JSON graph folder or temporary file is left behind."""
    import sqlalchemy as sa

    from memory.theanine.graph import MemoryGraph
    from sessions.graph_store import SqlGraphStore

    engine = sa.create_engine(f"sqlite:///{Path(data_dir) / 'sessions.sqlite3'}")
    try:
        gs = SqlGraphStore(engine)
        out = [MemoryGraph.from_sessions(gs.load_key(k)[0]).to_dict() for k in gs.user_keys()]
    finally:
        engine.dispose()
    assert not graph_dirs(data_dir), "graph JSON files next to the database"
    assert not list(Path(data_dir).glob("users/*/theanine_graph/*.tmp")), "a half-written graph file was left"
    return out
