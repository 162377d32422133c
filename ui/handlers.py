"""Event handlers: read the user id from the browser state, call the session service, return views.

Handlers return {component: value} dicts so each updates only what changed.
The user id comes from gr.BrowserState only (never from a text field) and is
validated before use; an invalid one gets a fresh id on load. Exceptions
become a status line with what to do, never a stack trace.

`Handlers` holds the chat's own handlers (page load, the progress timer, replies) and the other groups
of the page's handlers, each made with what it needs: `views` (ui/views.py, the views and checks they
share), `data` and `actions` (the data panel), `explore` (Compare, the graph search) and `side` (the
sidebar and the settings form). layout.py wires the events to their methods.

Memory builds (end of a session, imports) run in the background as the user's
work (sessions/work.py, the one registry of what each user runs): the event
returns at once and a timer shows one progress bar, so the chat and the other
panels stay usable and a reload during a build shows the history at once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.blocks import Block
from gradio.utils import get_upload_folder

from sessions import SessionService, UserError, check_user_id
from sessions.db import NOT_STORED, DatabaseUnavailable, database_down
from sessions.service import user_message
from sessions.transfer import ExportFiles
from sessions.users import Accounts, is_account_id
from sessions.work import Busy

from . import panels, see_why
from .chat_view import PENDING, as_text, chat_messages, shown_text
from .components import Page
from .data_actions import DataActions, damage_note
from .data_handlers import DataHandlers
from .explore import ExploreHandlers
from .side_handlers import FIELD_LABELS, SETTING_FIELDS, SideHandlers, field_message
from .views import Views, needs_retry

log = logging.getLogger(__name__)
__all__ = ["FIELD_LABELS", "SETTING_FIELDS", "Handlers", "field_message", "needs_retry"]

BUSY_REPLY = (
    "Still answering your previous message: this one stays in the box. Send it when the reply is done, or press Stop."
)


class Handlers:
    def __init__(
        self,
        service: SessionService,
        c: Page,
        allow_llm_change: bool = True,
        has_api_key: bool = False,
        exports: ExportFiles | None = None,
        accounts: Accounts | None = None,
    ) -> None:
        self.svc, self.c = service, c
        self.accounts = accounts  # sign-in as the identity (sessions/users.py), when the deployer enables it
        self.exports = exports or ExportFiles(Path(get_upload_folder()) / "memory-chat-exports")
        self.views = Views(service, c)
        self.actions = DataActions(service, c, self.views, self.exports)
        self.data = DataHandlers(service, c, self.views, self.actions, self.exports)
        self.explore = ExploreHandlers(service, c, self.views)
        self.data.compare_view = self.explore.last_compare  # an import renumbers sessions: Compare's header too
        self.side = SideHandlers(service, c, self.views, allow_llm_change, has_api_key)

    # --- page load ------------------------------------------------------------------------------
    def load_signed_in(
        self,
        uid,
        request: gr.Request = None,  # type: ignore[assignment]  # Gradio passes the request
        profile: gr.OAuthProfile | None = None,
    ):
        """The page load with "Sign in with Hugging Face": a signed-in account's own id (the same in
        every browser) replaces the browser's; signed out, the browser's copy of an account id is
        dropped (a new anonymous id is issued), so the next person at this browser does not get it."""
        account = self.accounts.user_id(profile) if self.accounts is not None else None
        if account is not None:
            try:
                self.svc.sign_in(account)
            except Exception as e:
                return {self.c.uid: uid, **self.views.fail(e, self.c.status)}
            uid = account
        elif is_account_id(uid):
            uid = None
        return self.load(uid, request)

    def load(self, uid, request: gr.Request = None):  # type: ignore[assignment]  # Gradio passes the request
        """A browser without an id this server issued gets a new one, kept in its localStorage."""
        c = self.c
        try:
            if not self.svc.is_known(uid):
                uid = self.svc.new_user(request)
            self.svc.current_session(uid)
            out = {
                c.uid: uid,
                **self.views.view(uid, use_last_trace=True),
                **self.views.settings_values(uid),
                c.status: "",
            }
            out.update(self.explore.last_compare(uid))
            job = self.views.building(uid)
            out[c.timer] = gr.Timer(active=job is not None or self.svc.memory_work_finished(uid) is not None)
            out[c.job] = panels.job_html(job) if job else ""
            pending = [s for s in self.svc.sessions(uid) if s.status == "closing"]
            rows = self.svc.messages(uid)
            if rows and rows[-1].role == "user" and not self.svc.chat_running(uid):
                out[c.status] = panels.status_html(
                    "Your last message has no reply yet (the app was interrupted?). It is saved; press Retry.", "info"
                )
            if pending and not job:
                out[c.status] = panels.status_html(
                    f"{len(pending)} ended session(s) still have memory to build; it is being built in the "
                    "background, or press End session to build it now.",
                    "info",
                )
            out[c.status] = damage_note(self.svc, uid) or out[c.status]
            return out
        except Exception as e:
            return {c.uid: uid, **self.views.fail(e, c.status)}

    # --- background builds ------------------------------------------------------------------------
    def poll(self, uid):
        """Timer tick: the progress of the user's build; when it is done, its result and fresh views."""
        c = self.c
        try:
            uid = check_user_id(uid)
        except UserError:
            return {c.timer: gr.Timer(active=False), c.job: ""}
        job = self.views.building(uid)
        if job is not None:
            return {c.job: panels.job_html(job)}
        done = self.svc.take_memory_work_finished(uid)
        out = {c.timer: gr.Timer(active=False), c.job: ""}
        if done is None:
            return out
        out.update(self.views.view(uid, use_last_trace=True))
        if done.error is not None:
            out[c.status] = panels.status_html(user_message(done.error), "error")
        else:
            res = done.result
            out[c.status] = panels.status_html(res.message, "error" if res.errors else "ok")
        if done.kind == "import":  # the import's own line no longer says "building their memory"
            failed = done.error is not None or bool(done.result.errors)
            text = user_message(done.error) if done.error is not None else done.result.message
            out[c.data_status] = panels.status_html(f"Import finished. {text}", "error" if failed else "ok")
        return out

    # --- chat ---------------------------------------------------------------------------------------
    def _stream(self, uid: str, updates, chat: list[dict], ids: list[int]):
        c = self.c
        writing = False
        for up in updates:
            if up.kind == "stored":
                if not ids or ids[-1] != up.message_id:
                    msg = self.svc.message(uid, up.message_id)
                    chat.append({"role": "user", "content": shown_text(msg.text if msg else "")})
                chat.append({"role": "assistant", "content": PENDING})
                yield {
                    c.chatbot: chat,
                    c.msg: "",
                    c.retry: gr.update(visible=False),
                    c.stop: gr.update(visible=True),
                    c.session_header: self.views.header(uid),
                    c.sessions: self.views.session_list(uid),
                    c.status: panels.status_html("Thinking…", "busy"),
                }
            elif up.kind == "status":
                out: dict[Block, Any] = {c.status: panels.status_html(up.status, "busy")}
                if not up.text:  # nothing written yet: the reply's bubble says what the model is doing
                    chat[-1] = {"role": "assistant", "content": f"{PENDING} {as_text(up.status)}"}
                    out[c.chatbot] = chat
                yield out
            elif up.kind == "delta":
                chat[-1] = {"role": "assistant", "content": as_text(up.text) or PENDING}
                if writing:
                    yield {c.chatbot: chat}
                else:  # the first piece: the model has read its prompt
                    writing = True
                    yield {c.chatbot: chat, c.status: panels.status_html("Writing the reply…", "busy")}
            elif up.kind == "done":
                view = self.views.view(uid, up.trace)
                view[c.status] = panels.status_html(up.error, "error") if up.error else ""
                view[c.stop] = gr.update(visible=False)
                yield view

    def _run_reply(self, uid, start):
        """A reply, one per user at a time: a second message while one runs is refused with a word
        (and stays in the box: nothing typed is lost)."""
        c = self.c
        try:
            uid = check_user_id(uid)
        except UserError as e:
            yield self.views.fail(e, c.status)
            return
        try:
            yield from start(uid)
        except Exception as e:
            if isinstance(e, Busy) and e.kind == "reply":
                # A reply of this user is running (sessions/work.py): nothing was stored, the text stays in the box.
                yield {c.status: panels.status_html(BUSY_REPLY, "info")}
            else:
                yield {**self.views.fail(e, c.status), c.stop: gr.update(visible=False)}

    def send(self, uid, message, strategy):
        def start(uid):
            try:
                chat, ids = chat_messages(self.svc.messages(uid))
            except Exception as e:
                if database_down(e):  # nothing stored: the text stays in the box
                    raise DatabaseUnavailable(NOT_STORED) from None
                raise
            yield from self._stream(uid, self.svc.send(uid, message, strategy), chat, ids)

        yield from self._run_reply(uid, start)

    def retry(self, uid, strategy):
        def start(uid):
            rows = [m for m in self.svc.messages(uid) if not (m.role == "assistant" and m.status == "error")]
            chat, ids = chat_messages(rows)
            yield from self._stream(uid, self.svc.retry(uid, strategy), chat, ids)

        yield from self._run_reply(uid, start)

    def stopped(self, uid):
        """After Stop cancelled a reply: the message is saved; Retry answers it."""
        c = self.c
        try:
            uid = check_user_id(uid)
        except UserError as e:
            return self.views.fail(e, c.status)
        self.svc.stop_reply(uid)  # returns once the cancelled reply has recorded its interruption
        view = self.views.view(uid)
        view[c.stop] = gr.update(visible=False)
        view[c.retry] = gr.update(visible=True)
        view[c.status] = panels.status_html("Stopped. Your message is saved; press Retry for a reply.", "info")
        return view

    def select(self, uid, ids, evt: gr.SelectData):
        """Clicking a message shows the stored trace of that reply (or of the reply to it)."""
        c = self.c
        try:
            uid = check_user_id(uid)
            index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
            if not isinstance(index, int) or not 0 <= index < len(ids or []):
                return {}
            reply = self.svc.reply_for(uid, int(ids[index]))
            if reply is None or not reply.trace:
                return {c.why: see_why.trace_html(None)}
            title = self._reply_title(uid, reply)
            why = see_why.trace_html(reply.trace, title=title, sessions=self.views.session_numbers(uid))
            return {c.why: why, c.graph: self.views.graph(uid, reply.trace)}
        except Exception as e:
            return self.views.fail(e, c.status)

    def _reply_title(self, uid: str, reply) -> str:
        """ "Why this reply" named as people see it: the session, the reply's number in it, its opening words."""
        rows = [m for m in self.svc.messages(uid, reply.session_id) if m.role == "assistant" and m.status == "ok"]
        n = next((i + 1 for i, m in enumerate(rows) if m.id == reply.id), None)
        s = next((s for s in self.svc.sessions(uid) if s.session_id == reply.session_id), None)
        words = " ".join((reply.text or "").split())
        words = words if len(words) <= 40 else words[:39] + "…"
        where = f"reply {n} of session {s.label}" if n and s else "this reply"
        return f"Why {where}" + (f" (“{words}”)" if words else "")

    def set_strategy(self, uid, strategy):
        c = self.c
        try:
            uid = check_user_id(uid)
            self.svc.set_strategy(uid, strategy)
            return {c.session_header: self.views.header(uid, strategy), c.status: ""}
        except Exception as e:
            return self.views.fail(e, c.status)
