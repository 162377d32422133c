"""Event handlers: read the user id from the browser state, call the session service, return views.

Handlers return {component: value} dicts so each updates only what changed.
The user id comes from gr.BrowserState only (never from a text field) and is
validated before use; an invalid one gets a fresh id on load. Exceptions
become a status line with what to do, never a stack trace.

Memory builds (end of a session, imports) run in the background (ui.jobs): the
event returns at once and a timer shows one progress bar, so the chat and the
other panels stay usable and a reload during a build shows the history at once.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
from gradio.utils import get_upload_folder

from memory.errors import InvalidOptions
from memory.settings import STRATEGIES
from sessions import SessionService, UserError, check_user_id
from sessions.exports import ExportFiles
from sessions.identity import client_of
from sessions.importer import MAX_FILE_BYTES
from sessions.lifecycle import date_positions, human_date
from sessions.prefs import OPTION_FIELDS
from sessions.service import user_message

from . import panels
from .chat_view import PENDING, as_text, chat_messages
from .data_actions import REPAIR, DataActions
from .graph_view import busy_html, graph_html
from .jobs import Jobs

log = logging.getLogger(__name__)

# The option inputs of the settings form, in this order (layout.py: one component per field, named like it).
SETTING_FIELDS = OPTION_FIELDS
# The settings form's labels, for messages about a field (people see labels, not option names).
FIELD_LABELS = {
    "temperature": "Temperature",
    "j": "THEANINE j (links per new memory)",
    "k": "k (memories / segments retrieved)",
    "n": "THEANINE n (timelines per memory)",
    "compression_rate": "SeCom compression rate",
    "retriever": "SeCom retriever",
    "max_reply_tokens": "Max reply tokens",
    "backend": "LLM backend",
    "model": "Model",
    "base URL": "Base URL",
    "strategy": "Memory strategy",
}
LLM_KEYS = ("backend", "model", "base_url")
REPLY_STALE_S = 900  # a reply marker older than this is ignored (a cancelled stream never cleared it)
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


def field_message(exc: BaseException) -> str:
    """An InvalidOptions message with the field's label in place of its option name."""
    return re.sub(
        r"^([A-Za-z_ ]+?) (must|is)\b",
        lambda m: f"{FIELD_LABELS.get(m.group(1), m.group(1))} {m.group(2)}",
        user_message(exc),
    )


class Handlers(DataActions):
    def __init__(
        self,
        service: SessionService,
        c: SimpleNamespace,
        allow_llm_change: bool = True,
        jobs: Jobs | None = None,
        has_api_key: bool = False,
        exports: ExportFiles | None = None,
    ):
        self.svc, self.c, self.allow_llm_change = service, c, allow_llm_change
        self.jobs = jobs or Jobs()
        self.has_api_key = has_api_key
        self.exports = exports or ExportFiles(Path(get_upload_folder()) / "memory-chat-exports")
        self._replying: dict[str, float] = {}
        self._replying_lock = threading.Lock()

    # --- shared views ---------------------------------------------------------------------------
    def _session_positions(self, uid: str) -> list[tuple[str, str, float]]:
        """(id, label, position 0..1 by date) of every session in time order: the graph's colour scale."""
        rows = self.svc.sessions(uid)
        positions = date_positions([s.date for s in rows])
        return [
            (s.session_id, f"Session {s.seq} · {human_date(s.date)}", p) for s, p in zip(rows, positions, strict=True)
        ]

    def _turn_texts(self, uid: str):
        def lookup(turn_ids: list[str]) -> dict[str, tuple[str, str]]:
            return self.svc.turn_texts(uid, turn_ids)

        return lookup

    def _graph(self, uid: str, trace: dict | None = None) -> str:
        job = self.jobs.running(uid)
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
            )
        except Exception as e:
            log.exception("graph view failed")
            return panels.status_html(user_message(e), "error")

    def _memory_choices(self, uid: str):
        if self.jobs.running(uid):
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
        return panels.session_header_html(s.seq, s.date, s.n_messages, strategy or self.svc.options(uid).strategy)

    def _session_list(self, uid: str, selected: str | None = None):
        rows = self.svc.sessions(uid)
        job = self.jobs.running(uid)
        choices = [(panels.session_choice_label(s, building=bool(job)), s.session_id) for s in rows]
        open_id = next((s.session_id for s in rows if s.status == "open"), None)
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
            c.why: panels.trace_html(trace),
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
            **{getattr(c, f): getattr(o, f) for f in SETTING_FIELDS},
        }

    def _fail(self, exc: BaseException, where) -> dict:
        if not isinstance(exc, (UserError, InvalidOptions)):
            log.exception("handler failed")
        return {where: panels.status_html(field_message(exc), "error")}

    # --- page load ------------------------------------------------------------------------------
    def load(self, uid, request: gr.Request = None):  # type: ignore[assignment]  # Gradio passes the request
        """A browser without an id this server issued gets a new one, kept in its localStorage."""
        c = self.c
        try:
            if not self.svc.is_known(uid):
                uid = self.svc.new_user(client_of(request))
            self.svc.current_session(uid)
            out = {c.uid: uid, **self._view(uid, use_last_trace=True), **self._settings_values(uid), c.status: ""}
            job = self.jobs.running(uid)
            out[c.timer] = gr.Timer(active=job is not None or self.jobs.get(uid) is not None)
            out[c.job] = panels.job_html(job) if job else ""
            pending = [s for s in self.svc.sessions(uid) if s.status == "closing"]
            rows = self.svc.messages(uid)
            if rows and rows[-1].role == "user" and not self._is_replying(uid):
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
    def _start_build(self, uid: str, kind: str, fn) -> dict:
        """Start a memory build in the background; the timer shows its progress."""
        c = self.c
        job = self.jobs.start(uid, kind, fn)
        if job is None:
            raise UserError(
                "Memory is still being built from an earlier step; wait until the progress bar "
                "finishes (the chat works meanwhile)."
            )
        return {c.timer: gr.Timer(active=True), c.job: panels.job_html(job)}

    def poll(self, uid):
        """Timer tick: the progress of the user's build; when it is done, its result and fresh views."""
        c = self.c
        try:
            uid = check_user_id(uid)
        except UserError:
            return {c.timer: gr.Timer(active=False), c.job: ""}
        job = self.jobs.running(uid)
        if job is not None:
            return {c.job: panels.job_html(job)}
        done = self.jobs.take_finished(uid)
        out = {c.timer: gr.Timer(active=False), c.job: ""}
        if done is None:
            return out
        out.update(self._view(uid, use_last_trace=True))
        if done.error is not None:
            out[c.status] = panels.status_html(user_message(done.error), "error")
        else:
            res = done.result
            out[c.status] = panels.status_html(res.message, "error" if res.errors else "ok")
        return out

    # --- chat ---------------------------------------------------------------------------------------
    def _is_replying(self, uid: str) -> bool:
        with self._replying_lock:
            t = self._replying.get(uid)
            return t is not None and time.time() - t < REPLY_STALE_S

    def _claim(self, uid: str) -> bool:
        with self._replying_lock:
            t = self._replying.get(uid)
            if t is not None and time.time() - t < REPLY_STALE_S:
                return False
            self._replying[uid] = time.time()
            return True

    def _release(self, uid: str) -> None:
        with self._replying_lock:
            self._replying.pop(uid, None)

    def _stream(self, uid: str, updates, chat: list[dict], ids: list[int]):
        c = self.c
        for up in updates:
            if up.kind == "stored":
                if not ids or ids[-1] != up.message_id:
                    msg = self.svc.store.message(uid, up.message_id)
                    chat.append({"role": "user", "content": as_text(msg.text if msg else "")})
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
                yield {c.status: panels.status_html(up.status, "busy")}
            elif up.kind == "delta":
                chat[-1] = {"role": "assistant", "content": as_text(up.text) or PENDING}
                yield {c.chatbot: chat}
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
        if not self._claim(uid):
            yield {c.status: panels.status_html(BUSY_REPLY, "info")}
            return
        try:
            yield from start(uid)
        except Exception as e:
            yield {**self._fail(e, c.status), c.stop: gr.update(visible=False)}
        finally:
            self._release(uid)

    def send(self, uid, message, strategy):
        def start(uid):
            chat, ids = chat_messages(self.svc.messages(uid))
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
        self._release(uid)
        self.svc.stop_reply(uid)
        time.sleep(0.3)  # let the cancelled stream record its interruption
        view = self._view(uid)
        view[c.stop] = gr.update(visible=False)
        view[c.retry] = gr.update(visible=True)
        view[c.status] = panels.status_html("Stopped. Your message is saved; press Retry for a reply.", "info")
        return view

    def compare(self, uid, message):
        c = self.c
        try:
            uid = check_user_id(uid)
            for results in self.svc.compare(uid, message):
                out = {
                    c.compare_row: gr.update(visible=True),
                    c.status: panels.status_html("Comparing: each strategy answers in turn…", "busy"),
                }
                for s, col in zip(STRATEGIES, c.compare_cols, strict=False):
                    out[col] = panels.compare_column_html(s, results[s])
                yield out
            yield {c.status: panels.status_html("Compared: the same message, every strategy, same history.", "ok")}
        except Exception as e:
            yield self._fail(e, c.status)

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
            return {c.why: panels.trace_html(reply.trace, title=title), c.graph: self._graph(uid, reply.trace)}
        except Exception as e:
            return self._fail(e, c.status)

    def _reply_title(self, uid: str, reply) -> str:
        """ "Why this reply" named as people see it: the session, the reply's number in it, its opening words."""
        rows = [m for m in self.svc.messages(uid, reply.session_id) if m.role == "assistant" and m.status == "ok"]
        n = next((i + 1 for i, m in enumerate(rows) if m.id == reply.id), None)
        s = next((s for s in self.svc.sessions(uid) if s.session_id == reply.session_id), None)
        words = " ".join((reply.text or "").split())
        words = words if len(words) <= 40 else words[:39] + "…"
        where = f"reply {n} of session {s.seq}" if n and s else "this reply"
        return f"Why {where}" + (f" (“{words}”)" if words else "")

    def set_strategy(self, uid, strategy):
        c = self.c
        try:
            uid = check_user_id(uid)
            self.svc.set_strategy(uid, strategy)
            return {c.session_header: self._header(uid, strategy), c.status: ""}
        except Exception as e:
            return self._fail(e, c.status)

    # --- sessions -----------------------------------------------------------------------------------
    def view_session(self, uid, session_id):
        """The sidebar: show an earlier session's transcript (its replies clickable for their traces),
        or the open session again."""
        c = self.c
        try:
            uid = check_user_id(uid)
            rows = {s.session_id: s for s in self.svc.sessions(uid)}
            s = rows.get(session_id)
            if s is None or s.status == "open":
                view = self._view(uid)
                view.pop(c.sessions)
                return view
            msgs, ids = chat_messages([m for m in self.svc.messages(uid, s.session_id) if m.status == "ok"])
            return {
                c.chatbot: msgs,
                c.msg_ids: ids,
                c.session_header: panels.past_session_header_html(s),
                c.retry: gr.update(visible=False),
                c.status: "",
            }
        except Exception as e:
            return self._fail(e, c.status)

    def _end(self, uid, date, what: str):
        c = self.c
        try:
            uid = check_user_id(uid)
            if self.jobs.running(uid):
                raise UserError(
                    "Memory is still being built; wait until the progress bar finishes, then start the next session."
                )
            if what == "new":
                result = self.svc.new_session(uid, date, build=False)
            else:
                result = self.svc.end_session(uid, date or None, build=False)
            view = self._view(uid)
            view[c.status] = panels.status_html(result.message, "ok")
            if any(s.status == "closing" for s in self.svc.sessions(uid)):
                view.update(self._start_build(uid, "Building memory", lambda p: self.svc.build_pending(uid, p)))
                view[c.graph] = self._graph(uid)
                view[c.sessions] = self._session_list(uid)
            return view
        except Exception as e:
            return self._fail(e, c.status)

    def end_session(self, uid, date=""):
        return self._end(uid, date, "end")

    def new_session(self, uid, date):
        return self._end(uid, date, "new")

    # --- settings -------------------------------------------------------------------------------------
    def backend_note(self, backend, base_url):
        """Before the first failed call: the OpenAI backend without a key and without a base URL."""
        c = self.c
        if backend == "openai" and not self.has_api_key and not (base_url or "").strip():
            return {
                c.settings_status: panels.status_html(
                    "No API key is set (OPENAI_API_KEY or HF_TOKEN in the environment or .env), so api.openai.com will "
                    "refuse every call. Set a key and restart, or give the base URL of a server that needs none "
                    "(e.g. Ollama: http://localhost:11434/v1).",
                    "error",
                )
            }
        return {c.settings_status: ""}

    def save_settings(self, uid, backend, model, base_url, *values):
        c = self.c
        try:
            uid = check_user_id(uid)
            options = dict(zip(SETTING_FIELDS, values, strict=False))
            empty = [FIELD_LABELS[k] for k, v in options.items() if v is None or (isinstance(v, str) and not v.strip())]
            if empty:
                raise UserError(f"{', '.join(empty)}: the field is empty; give a value (nothing was saved).")
            llm = {"backend": backend, "model": model, "base_url": base_url} if self.allow_llm_change else None
            if llm is None and (backend, model, base_url) != tuple(self.svc.llm_public(uid)[k] for k in LLM_KEYS):
                # A request the page cannot make (the fields are locked): refused, not half-saved.
                raise UserError("This server does not let visitors change the LLM; nothing was saved.")
            self.svc.save_settings(uid, options, llm)
            note = self.backend_note(backend, base_url)[c.settings_status] if self.allow_llm_change else ""
            return {
                **self._settings_values(uid),
                c.settings_status: note or panels.status_html("Settings saved; they apply from the next reply.", "ok"),
            }
        except Exception as e:
            try:
                old = self._settings_values(check_user_id(uid))
            except Exception:
                old = {}
            return {**old, **self._fail(e, c.settings_status)}

    # --- your data ------------------------------------------------------------------------------------
    def import_history(self, uid, path, sample_id):
        c = self.c
        try:
            uid = check_user_id(uid)
            if not path:
                raise UserError("Choose a JSON file to import first.")
            if self.jobs.running(uid):
                raise UserError("Memory is still being built; import again when the progress bar finishes.")
            if Path(path).stat().st_size > MAX_FILE_BYTES:
                raise UserError(
                    f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; import a smaller history."
                )
            data = Path(path).read_bytes()
            result = self.svc.import_history(uid, data, sample_id or "", build=False)
            started = self._start_build(uid, "Building memory", lambda p: self.svc.build_pending(uid, p))
            view = self._view(uid)
            view.update(started)
            view[c.data_status] = panels.status_html(result.message, "ok")
            return {**view, c.import_file: None}
        except Exception as e:
            return {**self._fail(e, c.data_status), c.import_file: None}

    def export(self, uid):
        c = self.c
        try:
            uid = check_user_id(uid)
            data = self.svc.export(uid)
            # One private copy (sessions.exports): inside Gradio's cache, so Gradio serves it without copying.
            path = self.exports.write(uid, json.dumps(data, ensure_ascii=False, indent=2))
            return {
                c.export_file: gr.update(value=str(path), visible=True),
                c.data_status: panels.status_html("Your export is ready to download.", "ok"),
            }
        except Exception as e:
            return self._fail(e, c.data_status)

    def delete_memory(self, uid, memory_id, redact=False):
        c = self.c
        try:
            uid = check_user_id(uid)
            if not memory_id:
                raise UserError("Choose a memory to delete.")
            if self.jobs.running(uid):
                raise UserError("Memory is being built; delete when the progress bar finishes.")
            if str(memory_id).startswith(REPAIR):
                return self._repair(uid, str(memory_id)[len(REPAIR) :])
            gone = self.svc.delete_memory(uid, memory_id, redact=bool(redact))
            msg = gone["message"] if gone else "That memory no longer exists."
            out = {
                c.graph: self._graph(uid),
                c.memory: self._memory_choices(uid),
                c.data_status: panels.status_html(msg, "ok" if gone else "info"),
            }
            if gone and gone.get("redacted"):
                out.update({k: v for k, v in self._view(uid).items() if k in (c.chatbot, c.msg_ids)})
            return out
        except Exception as e:
            return self._fail(e, c.data_status)

    def forget(self, uid, confirmed, request: gr.Request = None):  # type: ignore[assignment]
        """Delete everything, then continue as a brand-new user with a new id."""
        c = self.c
        try:
            uid = check_user_id(uid)
            if not confirmed:
                raise UserError("Tick the box to confirm that everything should be deleted.")
            if self.jobs.running(uid):
                raise UserError("Memory is being built; forget me when the progress bar finishes.")
            self.svc.forget(uid)
            self.exports.forget(uid)
            fresh = self.svc.new_user(client_of(request))
            return {
                c.uid: fresh,
                **self._view(fresh),
                **self._settings_values(fresh),
                c.forget_confirm: False,
                c.compare_row: gr.update(visible=False),
                c.export_file: gr.update(value=None, visible=False),
                c.data_status: panels.status_html("All your sessions and memory were deleted.", "ok"),
            }
        except Exception as e:
            return self._fail(e, c.data_status)
