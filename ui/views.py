"""The views the handlers share: what the page shows of a user's data, and the checks and status lines
every handler uses. `Views` is made once per page (ui.handlers.Handlers) and passed to each group of
handlers, which return {component: value} dicts built from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gradio as gr

from memory.dates import date_positions, human_date
from memory.errors import InvalidOptions
from memory.trace_types import TraceDict
from sessions import SessionService, UserError
from sessions.db import database_down
from sessions.service import user_message
from sessions.work import Busy, Work

from . import html_text, panels, see_why, session_list
from .chat_view import chat_messages
from .components import Page
from .data_actions import repair_choices
from .graph_view import busy_html, graph_html
from .side_handlers import SETTING_FIELDS, field_message

log = logging.getLogger(__name__)


def needs_retry(rows) -> bool:
    """The last message of the open session has no good reply: its reply failed, or there is none
    (the app stopped while answering). Retry answers it again."""
    return bool(rows) and (rows[-1].status == "error" or rows[-1].role == "user")


def retrieved_ids(trace: TraceDict | None) -> set[str]:
    """The memories a reply's trace gave the reply: those of the timelines packed into its prompt (starred in
    the graph)."""
    ids: set[str] = set()
    for t in (trace or {}).get("timelines_raw") or []:
        if isinstance(t, dict):
            ids.update(str(n) for n in t.get("nodes") or [])
    return ids


def ranked_ids(trace: TraceDict | None) -> set[str]:
    """The memories retrieval ranked for a reply that did not reach it (the budget cut them): drawn apart
    from those the reply read."""
    ranked = {str(m.get("id")) for m in (trace or {}).get("memories") or [] if isinstance(m, dict)}
    return ranked - retrieved_ids(trace)


class Views:
    def __init__(self, service: SessionService, c: Page) -> None:
        self.svc, self.c = service, c
        # The sidebar's view of each user in this process: imported runs listed (not folded).
        self.unfolded: set[str] = set()

    def building(self, uid: str) -> Work | None:
        """The user's running memory work (a build, an import, deleting a memory, Forget me), or None."""
        return self.svc.memory_work_running(uid)

    def session_positions(self, uid: str) -> list[tuple[str, str, float]]:
        """(id, label, position 0..1 by date) of every session in time order: the graph's colour scale."""
        rows = self.svc.sessions(uid)
        positions = date_positions([s.date for s in rows])
        return [
            (s.session_id, f"Session {s.label} · {human_date(s.date)}", p) for s, p in zip(rows, positions, strict=True)
        ]

    def session_numbers(self, uid: str) -> dict[str, str]:
        """{session id: its number in the sidebar}: See why names memories by it."""
        return html_text.session_numbers(self.svc.sessions(uid))

    def session_name(self, uid: str, session_id: str) -> str:
        s = next((s for s in self.svc.sessions(uid) if s.session_id == session_id), None)
        return f"Session {s.label} · {human_date(s.date)}" if s else ""

    def turn_texts(self, uid: str) -> Callable[[list[str]], dict[str, tuple[str, str]]]:
        def lookup(turn_ids: list[str]) -> dict[str, tuple[str, str]]:
            return self.svc.turn_texts(uid, turn_ids)

        return lookup

    def graph(self, uid: str, trace: TraceDict | None = None, found=(), open_id: str = "") -> str:
        job = self.building(uid)
        if job is not None:
            # The graph is being written; reading it would wait for the build.
            return busy_html(
                f"Memory is being built ({int(job.fraction * 100)}%): the graph appears when it "
                "is done. The chat works meanwhile."
            )
        try:
            view = self.svc.graph(uid)
            return graph_html(
                view,
                retrieved_ids(trace),
                self.svc.latest_new_memories(uid),
                self.session_positions(uid),
                self.turn_texts(uid),
                found=found,
                open_id=open_id,
                ranked=ranked_ids(trace),
            )
        except Exception as e:
            log.exception("graph view failed")
            return panels.status_html(user_message(e), "error")

    def memory_choices(self, uid: str) -> dict[str, Any]:
        if self.building(uid):
            return gr.update()
        try:
            nodes = self.svc.graph(uid).get("nodes") or []
        except Exception:
            nodes = []
        # Dropdown labels are rendered as text by Gradio; the value is the memory id.
        choices = [
            (f"{' '.join(str(n.get('event', '')).split())[:80]} ({n['id']})", str(n["id"])) for n in reversed(nodes)
        ]
        return gr.update(choices=repair_choices(self.svc, uid) + choices, value=None)

    def header(self, uid: str, strategy: str | None = None) -> str:
        s = self.svc.current_session(uid)
        return panels.session_header_html(s.label, s.date, s.n_messages, strategy or self.svc.options(uid).strategy)

    def session_list(self, uid: str, selected: str | None = None) -> dict[str, Any]:
        rows = self.svc.sessions(uid)
        job = self.building(uid)
        choices = session_list.choices(
            rows, lambda s: panels.session_choice_label(s, building=bool(job)), uid in self.unfolded
        )
        open_id = next((s.session_id for s in rows if s.status == "open"), None)
        if selected not in {v for _, v in choices}:
            selected = None  # a session folded away: none chosen
        return gr.update(choices=choices, value=selected or open_id)

    def view(self, uid: str, trace: TraceDict | None = None, use_last_trace: bool = False) -> dict:
        """Everything that depends on the user's data (showing the open session)."""
        c = self.c
        rows = self.svc.messages(uid)
        msgs, ids = chat_messages(rows)
        if use_last_trace and trace is None:
            last = self.svc.last_reply(uid)
            trace = last.trace if last else None
        return {
            c.chatbot: msgs,
            c.msg_ids: ids,
            c.session_header: self.header(uid),
            c.sessions: self.session_list(uid),
            c.graph: self.graph(uid, trace),
            c.why: see_why.trace_html(trace, sessions=self.session_numbers(uid)),
            c.memory: self.memory_choices(uid),
            c.retry: gr.update(visible=needs_retry(rows)),
            c.date: self.svc.default_next_date(uid),
        }

    def settings_values(self, uid: str) -> dict:
        c = self.c
        o = self.svc.options(uid)
        llm = self.svc.llm_public(uid)
        return {
            c.strategy: o.strategy,
            c.backend: llm["backend"],
            c.model: llm["model"],
            c.base_url: llm["base_url"],
            c.model_in_use: panels.model_in_use(llm["in_use"], o),
            **{getattr(c, f): getattr(o, f) for f in SETTING_FIELDS},
        }

    def fail(self, exc: BaseException, where) -> dict:
        if database_down(exc):  # an outage, not a bug: one line in the log
            log.warning("handler failed: the database cannot be reached")
        elif not isinstance(exc, (UserError, InvalidOptions)):
            log.exception("handler failed")
        return {where: panels.status_html(field_message(exc), "error")}

    def start_build(self, uid: str, kind: str = "close") -> dict:
        """Start building the pending memory in the background (`kind` "import" after an import); the
        timer shows its progress."""
        c = self.c
        try:
            job = self.svc.start_build(uid, kind)
        except Busy:
            raise UserError(
                "Memory is still being built from an earlier step; wait until the progress bar "
                "finishes (the chat works meanwhile)."
            ) from None
        return {c.timer: gr.Timer(active=True), c.job: panels.job_html(job)}
