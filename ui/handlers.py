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

from sessions import InvalidUserId, SessionService, UserError, check_user_id
from sessions.db import NOT_STORED, outage_as
from sessions.service import user_message
from sessions.transfer import ExportFiles
from sessions.users import Accounts, UserKey, is_account_id
from sessions.work import Busy

from . import html_text, panels, see_why
from .chat_view import PENDING, as_text, chat_messages, shown_text
from .components import Page
from .data_handlers import DataActions, DataHandlers
from .explore import ExploreHandlers
from .form_fields import FIELD_LABELS, SETTING_FIELDS, field_message
from .side_handlers import SideHandlers
from .views import Views, damage_note, needs_retry

log = logging.getLogger(__name__)
# A draft is read ahead from this many words on: the memory found for one word is seldom the message's.
READ_AHEAD_MIN_WORDS = 3
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
        self.rooms, self.c = service.rooms, c
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
                self.rooms.users.sign_in(account)
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
            users = self.rooms.users
            try:
                key = users.user(uid)  # the one check of this event
            except InvalidUserId:  # a browser without an id this server issued
                uid = users.new_user(request)
                key = users.user(uid)
            p = self.rooms.page(key, last_trace=True)
            out = {
                c.uid: uid,
                **self.views.view(key, use_last_trace=True, p=p),
                **self.views.settings_values(key),
                c.status: "",
            }
            out.update(self.explore.last_compare(key))
            job = p.building
            out[c.timer] = gr.Timer(active=job is not None or self.rooms.sessions.memory_work_finished(key) is not None)
            out[c.job] = panels.job_html(job) if job else ""
            pending = [s for s in p.sessions if s.status == "closing"]
            rows = p.messages
            if rows and rows[-1].role == "user" and not self.rooms.chat.running(key):
                out[c.status] = panels.status_html(
                    "Your last message has no reply yet (the app was interrupted?). It is saved; press Retry.", "info"
                )
            if pending and not job:
                out[c.status] = panels.status_html(
                    f"{len(pending)} ended session(s) still have memory to build; it is being built in the "
                    "background, or press End session to build it now.",
                    "info",
                )
            out[c.status] = damage_note(self.rooms.data, key) or out[c.status]
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
        done = self.rooms.sessions.take_memory_work_finished(uid)
        out = {c.timer: gr.Timer(active=False), c.job: ""}
        if done is None:
            return out
        out.update(self.views.view(self.views.key(uid), use_last_trace=True))
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
    def _stream(self, key: UserKey, updates, chat: list[dict], ids: list[int]):
        c = self.c
        writing = False
        for up in updates:
            if up.kind == "stored":
                if not ids or ids[-1] != up.message_id:
                    msg = self.rooms.sessions.message(key, up.message_id)
                    chat.append({"role": "user", "content": shown_text(msg.text if msg else "")})
                chat.append({"role": "assistant", "content": PENDING})
                yield {
                    c.chatbot: chat,
                    c.msg: "",
                    c.retry: gr.update(visible=False),
                    c.stop: gr.update(visible=True),
                    c.session_header: self.views.header(key),
                    c.sessions: self.views.session_list(key),
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
                view = self.views.view(key, up.trace)
                view[c.status] = panels.status_html(up.error, "error") if up.error else ""
                view[c.stop] = gr.update(visible=False)
                yield view

    def _run_reply(self, uid, start):
        """A reply, one per user at a time: a second message while one runs is refused with a word
        (and stays in the box: nothing typed is lost)."""
        c = self.c
        try:
            with outage_as(NOT_STORED):  # nothing stored: the text stays in the box
                key = self.views.key(uid)  # the one check of this event
        except Exception as e:
            yield self.views.fail(e, c.status)
            return
        try:
            yield from start(key)
        except Exception as e:
            if isinstance(e, Busy) and e.kind == "reply":
                # A reply of this user is running (sessions/work.py): nothing was stored, the text stays in the box.
                yield {c.status: panels.status_html(BUSY_REPLY, "info")}
            else:
                yield {**self.views.fail(e, c.status), c.stop: gr.update(visible=False)}

    def send(self, uid, message, strategy):
        def start(key: UserKey):
            with outage_as(NOT_STORED):  # nothing stored: the text stays in the box
                chat, ids = chat_messages(self.rooms.sessions.messages(key))
            yield from self._stream(key, self.rooms.chat.send(key, message, strategy), chat, ids)

        yield from self._run_reply(uid, start)

    def read_ahead(self, uid, draft, strategy):
        """The person is typing: the memory for the draft and its prompt are read into the embedded
        model's cache, so Send waits less (ChatRoom.prepare). Nothing is shown; a failure only costs
        the head start."""
        if len(str(draft or "").split()) < READ_AHEAD_MIN_WORDS:
            return
        try:
            if n := self.rooms.chat.prepare(self.views.key(uid), str(draft), strategy):
                log.info("read ahead: %d prompt tokens", n)  # a count only: never what was typed
        except Exception as e:  # the reply reads its prompt itself
            log.warning("read-ahead failed: %s", type(e).__name__, exc_info=log.isEnabledFor(logging.DEBUG))

    def retry(self, uid, strategy):
        def start(key: UserKey):
            rows = [m for m in self.rooms.sessions.messages(key) if not (m.role == "assistant" and m.status == "error")]
            chat, ids = chat_messages(rows)
            yield from self._stream(key, self.rooms.chat.retry(key, strategy), chat, ids)

        yield from self._run_reply(uid, start)

    def stopped(self, uid):
        """After Stop cancelled a reply: the message is saved; Retry answers it."""
        c = self.c
        try:
            key = self.views.key(uid)
        except Exception as e:
            return self.views.fail(e, c.status)
        self.rooms.chat.stop(key)  # returns once the cancelled reply has recorded its interruption
        view = self.views.view(key)
        view[c.stop] = gr.update(visible=False)
        view[c.retry] = gr.update(visible=True)
        view[c.status] = panels.status_html("Stopped. Your message is saved; press Retry for a reply.", "info")
        return view

    def select(self, uid, ids, evt: gr.SelectData):
        """Clicking a message shows the stored trace of that reply (or of the reply to it)."""
        c = self.c
        try:
            index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
            if not isinstance(index, int) or not 0 <= index < len(ids or []):
                return {}
            key = self.views.key(uid)
            reply = self.rooms.chat.reply_for(key, int(ids[index]))
            if reply is None or not reply.trace:
                return {c.why: see_why.trace_html(None)}
            p = self.rooms.page(key)
            title = self._reply_title(key, reply, p.sessions)
            why = see_why.trace_html(reply.trace, title=title, sessions=html_text.session_numbers(p.sessions))
            return {c.why: why, c.graph: self.views.graph(key, reply.trace, p=p)}
        except Exception as e:
            return self.views.fail(e, c.status)

    def _reply_title(self, key: UserKey, reply, sessions) -> str:
        """ "Why this reply" named as people see it: the session, the reply's number in it, its opening words."""
        msgs = self.rooms.sessions.messages(key, reply.session_id)
        rows = [m for m in msgs if m.role == "assistant" and m.status == "ok"]
        n = next((i + 1 for i, m in enumerate(rows) if m.id == reply.id), None)
        s = next((s for s in sessions if s.session_id == reply.session_id), None)
        words = " ".join((reply.text or "").split())
        words = words if len(words) <= 40 else words[:39] + "…"
        where = f"reply {n} of session {s.label}" if n and s else "this reply"
        return f"Why {where}" + (f" (“{words}”)" if words else "")

    def set_strategy(self, uid, strategy):
        c = self.c
        try:
            key = self.views.key(uid)
            self.rooms.users.set_strategy(key, strategy)
            return {c.session_header: self.views.header(key, strategy), c.status: ""}
        except Exception as e:
            return self.views.fail(e, c.status)
