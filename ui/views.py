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
from sessions import DataRoom, PageData, SessionRow, SessionService, UserError, UserKey
from sessions.db import database_down
from sessions.service import user_message
from sessions.work import Busy, Work

from . import html_text, panels, see_why, session_list
from .chat_view import chat_messages
from .components import REPAIR, Page
from .form_fields import SETTING_FIELDS, field_message
from .graph_view import busy_html, graph_html

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


def repair_choices(data: DataRoom, key: UserKey) -> list[tuple[str, str]]:
    """Damaged stored values (sessions/damage.py) as Delete choices: rebuild or drop each."""
    try:
        damaged = data.damage(key)
    except Exception:
        return []
    out = []
    for d in damaged:
        what = f"memory {d['item'].split('/')[1]}" if d["kind"] == "graph_memories" else d["kind"]
        if d["kind"] in ("graph_memories", "sessions"):
            out.append(
                (f"⚠ Rebuild session {d['session_id']}'s memory (damaged {what})", REPAIR + "rebuild:" + d["item"])
            )
        out.append((f"⚠ Drop the damaged {what} ({d['session_id'] or 'settings'})", REPAIR + "drop:" + d["item"]))
    return out


def damage_note(data: DataRoom, key: UserKey) -> str:
    """A status line naming the user's damaged stored values (empty when there are none)."""
    try:
        damaged = data.damage(key)
    except Exception:
        return ""
    if not damaged:
        return ""
    text = " ".join(d["message"] for d in damaged[:3]) + (f" (and {len(damaged) - 3} more)" if len(damaged) > 3 else "")
    return panels.status_html(text + " Choose “Rebuild” or “Drop” in Memory → Delete.", "info")


class Views:
    def __init__(self, service: SessionService, c: Page) -> None:
        self.rooms, self.c = service.rooms, c
        # The sidebar's view of each user in this process: imported runs listed (not folded).
        self.unfolded: set[str] = set()

    def key(self, uid) -> UserKey:
        """The user of an event, resolved once at its start (InvalidUserId for an id this server may not serve)."""
        return self.rooms.users.user(uid)

    def building(self, key: str) -> Work | None:
        """The user's running memory work (a build, an import, deleting a memory, Forget me), or None."""
        return self.rooms.sessions.memory_work_running(key)

    def session_positions(self, rows: list[SessionRow]) -> list[tuple[str, str, float]]:
        """(id, label, position 0..1 by date) of every session in time order: the graph's colour scale."""
        positions = date_positions([s.date for s in rows])
        return [
            (s.session_id, f"Session {s.label} · {human_date(s.date)}", p) for s, p in zip(rows, positions, strict=True)
        ]

    def session_numbers(self, key: UserKey) -> dict[str, str]:
        """{session id: its number in the sidebar}: See why names memories by it."""
        return html_text.session_numbers(self.rooms.sessions.in_order(key))

    def session_name(self, key: UserKey, session_id: str) -> str:
        s = next((s for s in self.rooms.sessions.in_order(key) if s.session_id == session_id), None)
        return f"Session {s.label} · {human_date(s.date)}" if s else ""

    def turn_texts(self, key: UserKey) -> Callable[[list[str]], dict[str, tuple[str, str]]]:
        def lookup(turn_ids: list[str]) -> dict[str, tuple[str, str]]:
            return self.rooms.memory.turn_texts(key, turn_ids)

        return lookup

    def graph(
        self, key: UserKey, trace: TraceDict | None = None, found=(), open_id: str = "", p: PageData | None = None
    ) -> str:
        """The graph of See why; `p` the page's snapshot when the caller has read it."""
        try:
            p = p or self.rooms.page(key)
            if p.building is not None:
                # The graph is being written; reading it would wait for the build.
                return busy_html(
                    f"Memory is being built ({int(p.building.fraction * 100)}%): the graph appears when it "
                    "is done. The chat works meanwhile."
                )
            if p.graph_error is not None:
                raise p.graph_error
            return graph_html(
                p.graph,
                retrieved_ids(trace),
                p.new_memories,
                self.session_positions(p.sessions),
                self.turn_texts(key),
                found=found,
                open_id=open_id,
                ranked=ranked_ids(trace),
            )
        except Exception as e:
            log.exception("graph view failed")
            return panels.status_html(user_message(e), "error")

    def memory_choices(self, key: UserKey, p: PageData | None = None) -> dict[str, Any]:
        if p is None and self.building(key):
            return gr.update()
        try:
            p = p or self.rooms.page(key)
            nodes = p.graph.get("nodes") or []
        except Exception:
            nodes = []
        if p is not None and p.building is not None:
            return gr.update()
        # Dropdown labels are rendered as text by Gradio; the value is the memory id.
        choices = [
            (f"{' '.join(str(n.get('event', '')).split())[:80]} ({n['id']})", str(n["id"])) for n in reversed(nodes)
        ]
        return gr.update(choices=repair_choices(self.rooms.data, key) + choices, value=None)

    def header(self, key: UserKey, strategy: str | None = None, p: PageData | None = None) -> str:
        if p is None:
            s, saved = self.rooms.sessions.current(key), (strategy or self.rooms.users.options(key).strategy)
        else:
            s, saved = p.current, p.strategy
        return panels.session_header_html(s.label, s.date, s.n_messages, strategy or saved)

    def session_list(self, key: UserKey, selected: str | None = None, p: PageData | None = None) -> dict[str, Any]:
        rows = p.sessions if p is not None else self.rooms.sessions.in_order(key)
        job = p.building if p is not None else self.building(key)
        choices = session_list.choices(
            rows, lambda s: panels.session_choice_label(s, building=bool(job)), key in self.unfolded
        )
        open_id = next((s.session_id for s in rows if s.status == "open"), None)
        if selected not in {v for _, v in choices}:
            selected = None  # a session folded away: none chosen
        return gr.update(choices=choices, value=selected or open_id)

    def view(
        self, key: UserKey, trace: TraceDict | None = None, use_last_trace: bool = False, p: PageData | None = None
    ) -> dict:
        """Everything that depends on the user's data (showing the open session), drawn from one snapshot
        (`p`, when the caller has read it)."""
        c = self.c
        p = p or self.rooms.page(key, last_trace=use_last_trace and trace is None)
        msgs, ids = chat_messages(p.messages)
        if use_last_trace and trace is None:
            trace = p.last_trace
        return {
            c.chatbot: msgs,
            c.msg_ids: ids,
            c.session_header: self.header(key, p=p),
            c.sessions: self.session_list(key, p=p),
            c.graph: self.graph(key, trace, p=p),
            c.why: see_why.trace_html(trace, sessions=html_text.session_numbers(p.sessions)),
            c.memory: self.memory_choices(key, p=p),
            c.retry: gr.update(visible=needs_retry(p.messages)),
            c.date: p.next_date,
        }

    def settings_values(self, key: UserKey) -> dict:
        c = self.c
        o = self.rooms.users.options(key)
        llm = self.rooms.users.llm_public(key)
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

    def start_build(self, key: UserKey, kind: str = "close") -> dict:
        """Start building the pending memory in the background (`kind` "import" after an import); the
        timer shows its progress."""
        c = self.c
        try:
            job = self.rooms.sessions.start_build(key, kind)
        except Busy:
            raise UserError(
                "Memory is still being built from an earlier step; wait until the progress bar "
                "finishes (the chat works meanwhile)."
            ) from None
        return {c.timer: gr.Timer(active=True), c.job: panels.job_html(job)}
