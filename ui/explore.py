"""Handlers for looking around: Compare (every strategy on one message, kept across a reload) and the
graph search over every memory. A part of ui.handlers.Handlers (on the shared views of ui.views.Views)."""

from __future__ import annotations

import logging

import gradio as gr

from memory.settings import COMPARE_COLUMNS
from memory.text import plural
from sessions import SessionService, check_user_id

from . import compare_view, html_text, panels
from .components import Page
from .graph_view import find_memories, short_text
from .views import Views

log = logging.getLogger(__name__)


class ExploreHandlers:
    def __init__(self, service: SessionService, c: Page, views: Views) -> None:
        self.svc, self.c, self.views = service, c, views

    # --- Compare ----------------------------------------------------------------------------------
    def compare(self, uid, message):
        c = self.c
        try:
            uid = check_user_id(uid)
            where = self.views.session_name(uid, self.svc.current_session(uid).session_id)
            numbers = html_text.session_numbers(self.svc.sessions(uid))
            for results in self.svc.compare(uid, message):
                yield {
                    c.compare_row: gr.update(visible=True),
                    c.compare_view: compare_view.compare_html(
                        message, results, COMPARE_COLUMNS, where=where, sessions=numbers
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

    def last_compare(self, uid: str) -> dict:
        """The latest comparison, shown again after a reload (it is stored per user)."""
        c = self.c
        last = self.svc.last_compare(uid)
        if not last:
            return {c.compare_row: gr.update(visible=False), c.compare_view: ""}
        html = compare_view.compare_html(
            last["message"],
            last["results"],
            COMPARE_COLUMNS,
            when=last["created_at"],
            where=self.views.session_name(uid, last["session_id"]),
            sessions=html_text.session_numbers(self.svc.sessions(uid)),
        )
        return {c.compare_row: gr.update(visible=True), c.compare_view: html}

    # --- graph search -------------------------------------------------------------------------------
    def find_memory(self, uid, query):
        """Search every memory (not only the drawn ones); the graph is drawn again with the matches,
        and the newest match opened with its source turns."""
        c = self.c
        try:
            uid = check_user_id(uid)
            q = " ".join(str(query or "").split())[:200]
            if not q:
                return {c.graph: self.views.graph(uid), c.graph_found: ""}
            if self.views.building(uid):
                return {c.graph_found: panels.status_html("Memory is being built; search when it is done.", "info")}
            view = self.svc.graph(uid)
            hits = find_memories(view, q)
            total = len(view.get("nodes") or [])
            if not hits:
                msg = f"No memory holds “{q}” (searched all {plural(total, 'memory', 'memories')})."
                return {c.graph_found: panels.status_html(msg, "info")}
            first = hits[0]
            where = self.views.session_name(uid, str(first.get("session_id", "")))
            msg = (
                f"Found {plural(len(hits), 'memory', 'memories')} of {total} holding “{q}”; opened the newest"
                f"{' (' + where + ')' if where else ''}: {short_text(first.get('event'), 120)}"
            )
            return {
                c.graph: self.views.graph(uid, found=[str(h["id"]) for h in hits], open_id=str(first["id"])),
                c.graph_found: panels.status_html(msg, "ok"),
            }
        except Exception as e:
            return self.views.fail(e, c.graph_found)
