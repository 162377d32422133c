"""Event handlers: read the user id from the browser state, call the session service, return views.

Handlers return {component: value} dicts so each updates only what changed.
The user id comes from gr.BrowserState only (never from a text field) and is
validated before use; an invalid one gets a fresh id on load. Exceptions
become a status line with what to do, never a stack trace.

Memory builds (end of a session, imports) run in the background as the user's
work (sessions/work.py, the one registry of what each user runs): the event
returns at once and a timer shows one progress bar, so the chat and the other
panels stay usable and a reload during a build shows the history at once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
from gradio.utils import get_upload_folder

from memory.dates import date_positions, human_date
from memory.errors import InvalidOptions
from sessions import SessionService, UserError, check_user_id
from sessions.db import NOT_STORED, DatabaseUnavailable, database_down
from sessions.service import user_message
from sessions.transfer import ExportFiles
from sessions.users import Accounts, is_account_id
from sessions.work import Busy, Work

from . import panels, session_list
from .chat_view import PENDING, as_text, chat_messages, shown_text
from .data_actions import DataActions
from .data_handlers import DataHandlers
from .explore import ExploreHandlers
from .graph_view import busy_html, graph_html
from .side_handlers import FIELD_LABELS, SETTING_FIELDS, SideHandlers, field_message

log = logging.getLogger(__name__)
__all__ = ["FIELD_LABELS", "SETTING_FIELDS", "Handlers", "field_message", "needs_retry"]

BUSY_REPLY = (
    "Still answering your previous message: this one stays in the box. Send it when the reply is done, or press Stop."
)


def needs_retry(rows) -> bool:
    """The last message of the open session has no good reply: its reply failed, or there is none
    (the app stopped while answering). Retry answers it again."""
    return bool(rows) and (rows[-1].status == "error" or rows[-1].role == "user")


def _retrieved_ids(trace: dict | None) -> set[str]:
    if not trace:
        return set()
    ids = {str(m.get("id")) for m in trace.get("memories") or []}
    for t in trace.get("timelines_raw") or []:
        ids.update(str(n) for n in t.get("nodes") or [])
    return ids


class Handlers(DataHandlers, DataActions, ExploreHandlers, SideHandlers):
    def __init__(
        self,
        service: SessionService,
        c: SimpleNamespace,
        allow_llm_change: bool = True,
        has_api_key: bool = False,
        exports: ExportFiles | None = None,
        accounts: Accounts | None = None,
    ):
        self.svc, self.c, self.allow_llm_change = service, c, allow_llm_change
        self.accounts = accounts  # sign-in as the identity (sessions/users.py), when the deployer enables it
        self.has_api_key = has_api_key
        self.exports = exports or ExportFiles(Path(get_upload_folder()) / "memory-chat-exports")
        # The sidebar's view of each user in this process: imported runs listed (not folded), and the
        # session last chosen in the list (it stays chosen when a run folds or opens).
        self.unfolded: set[str] = set()
        self.reading: dict[str, str] = {}

    def building(self, uid: str) -> Work | None:
        """The user's running memory work (a build, an import, deleting a memory, Forget me), or None."""
        return self.svc.work.running(uid, "memory")

    # --- shared views ---------------------------------------------------------------------------
    def _session_positions(self, uid: str) -> list[tuple[str, str, float]]:
        """(id, label, position 0..1 by date) of every session in time order: the graph's colour scale."""
        rows = self.svc.sessions(uid)
        positions = date_positions([s.date for s in rows])
        return [
            (s.session_id, f"Session {s.label} · {human_date(s.date)}", p) for s, p in zip(rows, positions, strict=True)
        ]

    def _session_numbers(self, uid: str) -> dict[str, str]:
        """{session id: its number in the sidebar}: See why names memories by it."""
        return panels.session_numbers(self.svc.sessions(uid))

    def _turn_texts(self, uid: str):
        def lookup(turn_ids: list[str]) -> dict[str, tuple[str, str]]:
            return self.svc.turn_texts(uid, turn_ids)

        return lookup

    def _graph(self, uid: str, trace: dict | None = None, found=(), open_id: str = "") -> str:
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
                _retrieved_ids(trace),
                self.svc.latest_new_memories(uid),
                self._session_positions(uid),
                self._turn_texts(uid),
                found=found,
                open_id=open_id,
            )
        except Exception as e:
            log.exception("graph view failed")
            return panels.status_html(user_message(e), "error")

    def _memory_choices(self, uid: str):
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
        return gr.update(choices=self._repair_choices(uid) + choices, value=None)

    def _header(self, uid: str, strategy: str | None = None) -> str:
        s = self.svc.current_session(uid)
        return panels.session_header_html(s.label, s.date, s.n_messages, strategy or self.svc.options(uid).strategy)

    def _session_list(self, uid: str, selected: str | None = None):
        rows = self.svc.sessions(uid)
        job = self.building(uid)
        choices = session_list.choices(
            rows, lambda s: panels.session_choice_label(s, building=bool(job)), uid in self.unfolded
        )
        open_id = next((s.session_id for s in rows if s.status == "open"), None)
        if selected not in {v for _, v in choices}:
            selected = None  # a session folded away: none chosen
        return gr.update(choices=choices, value=selected or open_id)

    def _view(self, uid: str, trace: dict | None = None, use_last_trace: bool = False) -> dict:
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
            c.session_header: self._header(uid),
            c.sessions: self._session_list(uid),
            c.graph: self._graph(uid, trace),
            c.why: panels.trace_html(trace, sessions=self._session_numbers(uid)),
            c.memory: self._memory_choices(uid),
            c.retry: gr.update(visible=needs_retry(rows)),
            c.date: self.svc.default_next_date(uid),
        }

    def _settings_values(self, uid: str) -> dict:
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

    def _fail(self, exc: BaseException, where) -> dict:
        if database_down(exc):  # an outage, not a bug: one line in the log
            log.warning("handler failed: the database cannot be reached")
        elif not isinstance(exc, (UserError, InvalidOptions)):
            log.exception("handler failed")
        return {where: panels.status_html(field_message(exc), "error")}

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
                return {self.c.uid: uid, **self._fail(e, self.c.status)}
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
            out = {c.uid: uid, **self._view(uid, use_last_trace=True), **self._settings_values(uid), c.status: ""}
            out.update(self._last_compare(uid))
            job = self.building(uid)
            out[c.timer] = gr.Timer(active=job is not None or self.svc.work.finished(uid, "memory") is not None)
            out[c.job] = panels.job_html(job) if job else ""
            pending = [s for s in self.svc.sessions(uid) if s.status == "closing"]
            rows = self.svc.messages(uid)
            if rows and rows[-1].role == "user" and self.svc.work.running(uid, "chat") is None:
                out[c.status] = panels.status_html(
                    "Your last message has no reply yet (the app was interrupted?). It is saved; press Retry.", "info"
                )
            if pending and not job:
                out[c.status] = panels.status_html(
                    f"{len(pending)} ended session(s) still have memory to build; it is being built in the "
                    "background, or press End session to build it now.",
                    "info",
                )
            out[c.status] = self._damage_note(uid) or out[c.status]
            return out
        except Exception as e:
            return {c.uid: uid, **self._fail(e, c.status)}

    # --- background builds ------------------------------------------------------------------------
    def _start_build(self, uid: str, kind: str = "close") -> dict:
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

    def poll(self, uid):
        """Timer tick: the progress of the user's build; when it is done, its result and fresh views."""
        c = self.c
        try:
            uid = check_user_id(uid)
        except UserError:
            return {c.timer: gr.Timer(active=False), c.job: ""}
        job = self.building(uid)
        if job is not None:
            return {c.job: panels.job_html(job)}
        done = self.svc.work.take_finished(uid, "memory")
        out = {c.timer: gr.Timer(active=False), c.job: ""}
        if done is None:
            return out
        out.update(self._view(uid, use_last_trace=True))
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
                    msg = self.svc.store.message(uid, up.message_id)
                    chat.append({"role": "user", "content": shown_text(msg.text if msg else "")})
                chat.append({"role": "assistant", "content": PENDING})
                yield {
                    c.chatbot: chat,
                    c.msg: "",
                    c.retry: gr.update(visible=False),
                    c.stop: gr.update(visible=True),
                    c.session_header: self._header(uid),
                    c.sessions: self._session_list(uid),
                    c.status: panels.status_html("Thinking…", "busy"),
                }
            elif up.kind == "status":
                out = {c.status: panels.status_html(up.status, "busy")}
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
                view = self._view(uid, up.trace)
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
            yield self._fail(e, c.status)
            return
        try:
            yield from start(uid)
        except Exception as e:
            if isinstance(e, Busy) and e.kind == "reply":
                # A reply of this user is running (sessions/work.py): nothing was stored, the text stays in the box.
                yield {c.status: panels.status_html(BUSY_REPLY, "info")}
            else:
                yield {**self._fail(e, c.status), c.stop: gr.update(visible=False)}

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
            return self._fail(e, c.status)
        self.svc.stop_reply(uid)  # returns once the cancelled reply has recorded its interruption
        view = self._view(uid)
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
                return {c.why: panels.trace_html(None)}
            title = self._reply_title(uid, reply)
            why = panels.trace_html(reply.trace, title=title, sessions=self._session_numbers(uid))
            return {c.why: why, c.graph: self._graph(uid, reply.trace)}
        except Exception as e:
            return self._fail(e, c.status)

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
            return {c.session_header: self._header(uid, strategy), c.status: ""}
        except Exception as e:
            return self._fail(e, c.status)
