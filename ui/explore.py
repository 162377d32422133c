"""Handlers for looking around: Compare (every strategy on one message, kept across a reload) and the
graph search over every memory. A part of ui.handlers.Handlers (on the shared views of ui.views.Views)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import gradio as gr

from memory.dates import human_date
from memory.settings import COMPARE_COLUMNS
from memory.text import plural
from sessions import SessionService, UserKey

from . import compare_view, html_text, panels, see_why
from .components import Page
from .graph_view import find_memories, short_text

if TYPE_CHECKING:
    from .views import Views  # made by ui.handlers.Handlers and passed in

log = logging.getLogger(__name__)


class ExploreHandlers:
    def __init__(self, service: SessionService, c: Page, views: Views) -> None:
        self.rooms, self.c, self.views = service.rooms, c, views

    # --- Compare ----------------------------------------------------------------------------------
    def compare(self, uid, message):
        c = self.c
        try:
            key = self.views.key(uid)
            rows = self.rooms.sessions.in_order(key)
            s = next((s for s in rows if s.status == "open"), None) or self.rooms.sessions.current(key)
            where, numbers = f"Session {s.label} · {human_date(s.date)}", html_text.session_numbers(rows)
            for results in self.rooms.chat.compare(key, message):
                yield {
                    c.compare_row: gr.update(visible=True),
                    c.compare_view: compare_view.compare_html(
                        message, results, COMPARE_COLUMNS, where=where, sessions=numbers, why=see_why.trace_html
                    ),
                    c.status: panels.status_html("Comparing: every strategy answers (below the chat)…", "busy"),
                }
            yield {
                c.status: panels.status_html(
                    "Compared (below the chat): the same message, every strategy, same history.", "ok"
                )
            }
        except Exception as e:
            yield self.views.fail(e, c.status)

    def last_compare(self, key: UserKey) -> dict:
        """The latest comparison, shown again after a reload (it is stored per user)."""
        c = self.c
        last = self.rooms.chat.last_compare(key)
        if not last:
            return {c.compare_row: gr.update(visible=False), c.compare_view: ""}
        html = compare_view.compare_html(
            last["message"],
            last["results"],
            COMPARE_COLUMNS,
            when=last["created_at"],
            where=self.views.session_name(key, last["session_id"]),
            sessions=self.views.session_numbers(key),
            why=see_why.trace_html,
        )
        return {c.compare_row: gr.update(visible=True), c.compare_view: html}

    # --- graph search -------------------------------------------------------------------------------
    def find_memory(self, uid, query):
        """Search every memory (not only the drawn ones); the graph is drawn again with the matches,
        and the newest match opened with its source turns."""
        c = self.c
        try:
            key = self.views.key(uid)
            q = " ".join(str(query or "").split())[:200]
            if not q:
                return {c.graph: self.views.graph(key), c.graph_found: ""}
            if self.views.building(key):
                return {c.graph_found: panels.status_html("Memory is being built; search when it is done.", "info")}
            p = self.rooms.page(key)
            view = p.graph
            hits = find_memories(view, q)
            total = len(view.get("nodes") or [])
            if not hits:
                msg = f"No memory holds “{q}” (searched all {plural(total, 'memory', 'memories')})."
                return {c.graph_found: panels.status_html(msg, "info")}
            first = hits[0]
            where = self.views.session_name(key, str(first.get("session_id", "")))
            msg = (
                f"Found {plural(len(hits), 'memory', 'memories')} of {total} holding “{q}”; opened the newest"
                f"{' (' + where + ')' if where else ''}: {short_text(first.get('event'), 120)}"
            )
            return {
                c.graph: self.views.graph(key, found=[str(h["id"]) for h in hits], open_id=str(first["id"]), p=p),
                c.graph_found: panels.status_html(msg, "ok"),
            }
        except Exception as e:
            return self.views.fail(e, c.graph_found)
