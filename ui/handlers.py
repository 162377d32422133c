"""Event handlers: read the user id from the browser state, call the session service, return views.

Handlers return {component: value} dicts so each updates only what changed.
The user id comes from gr.BrowserState only (never from a text field) and is
validated before use; an invalid one gets a fresh id on load. Exceptions
become a status line with what to do, never a stack trace.
"""
from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from memory.errors import InvalidOptions
from memory.settings import STRATEGIES
from sessions import SessionService, UserError, check_user_id, new_user_id
from sessions.ids import is_user_id
from sessions.importer import MAX_FILE_BYTES
from sessions.lifecycle import today
from sessions.service import user_message

from . import panels
from .chat_view import PENDING, as_text, chat_messages
from .graph_view import graph_html

log = logging.getLogger(__name__)

SETTING_FIELDS = ("temperature", "j", "k", "n", "compression_rate", "retriever", "max_reply_tokens")


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


class Handlers:
    def __init__(self, service: SessionService, c: SimpleNamespace, allow_llm_change: bool = True):
        self.svc, self.c, self.allow_llm_change = service, c, allow_llm_change

    # --- shared views ---------------------------------------------------------------------------
    def _labels(self, uid: str) -> dict[str, str]:
        return {s.session_id: f"Session {s.seq} · {s.date}" for s in self.svc.sessions(uid)}

    def _graph(self, uid: str, trace: dict | None = None) -> str:
        try:
            view = self.svc.graph(uid)
        except Exception as e:  # noqa: BLE001 - the rest of the page must still load
            log.exception("graph view failed")
            return panels.status_html(user_message(e), "error")
        return graph_html(view, _retrieved_ids(trace), self.svc.latest_new_memories(uid), self._labels(uid))

    def _memory_choices(self, uid: str):
        try:
            nodes = self.svc.graph(uid).get("nodes") or []
        except Exception:  # noqa: BLE001
            nodes = []
        # Dropdown labels are rendered as text by Gradio; the value is the memory id.
        choices = [(f"{' '.join(str(n.get('event', '')).split())[:80]} ({n['id']})", str(n["id"]))
                   for n in reversed(nodes)]
        return gr.update(choices=choices, value=None)

    def _header(self, uid: str, strategy: str | None = None) -> str:
        s = self.svc.current_session(uid)
        return panels.session_header_html(s.seq, s.date, s.n_messages, strategy or self.svc.options(uid).strategy)

    def _sessions(self, uid: str) -> str:
        rows = [(s, self.svc.messages(uid, s.session_id)) for s in self.svc.sessions(uid) if s.status != "open"]
        return panels.sessions_html([(s, [m for m in msgs if m.status == "ok"]) for s, msgs in rows])

    def _view(self, uid: str, trace: dict | None = None, use_last_trace: bool = False) -> dict:
        """Everything that depends on the user's data."""
        c = self.c
        rows = self.svc.messages(uid)
        msgs, ids = chat_messages(rows)
        if use_last_trace and trace is None:
            last = self.svc.last_reply(uid)
            trace = last.trace if last else None
        return {c.chatbot: msgs, c.msg_ids: ids, c.session_header: self._header(uid), c.sessions: self._sessions(uid),
                c.graph: self._graph(uid, trace), c.why: panels.trace_html(trace), c.memory: self._memory_choices(uid),
                c.retry: gr.update(visible=needs_retry(rows))}

    def _settings_values(self, uid: str) -> dict:
        c = self.c
        o = self.svc.options(uid)
        llm = self.svc.llm_public(uid)
        return {c.strategy: o.strategy, c.backend: llm["backend"], c.model: llm["model"], c.base_url: llm["base_url"],
                c.temperature: o.temperature, c.j: o.j, c.k: o.k, c.n: o.n, c.compression_rate: o.compression_rate,
                c.retriever: o.retriever, c.max_reply_tokens: o.max_reply_tokens}

    def _fail(self, exc: BaseException, where) -> dict:
        if not isinstance(exc, (UserError, InvalidOptions)):
            log.exception("handler failed")
        return {where: panels.status_html(user_message(exc), "error")}

    # --- page load ------------------------------------------------------------------------------
    def load(self, uid):
        """A browser without a valid id gets a new random one, kept in its localStorage."""
        c = self.c
        if not is_user_id(uid):
            uid = new_user_id()
        try:
            self.svc.current_session(uid)
            out = {c.uid: uid, **self._view(uid, use_last_trace=True), **self._settings_values(uid),
                   c.date: today(), c.status: ""}
            pending = [s for s in self.svc.sessions(uid) if s.status == "closing"]
            rows = self.svc.messages(uid)
            if rows and rows[-1].role == "user":
                out[c.status] = panels.status_html(
                    "Your last message has no reply yet (the app was interrupted?). It is saved; press Retry.",
                    "info")
            if pending:
                out[c.status] = panels.status_html(
                    f"{len(pending)} ended session(s) still have memory to build; it is being built in the "
                    "background, or press End session to build it now.", "info")
            return out
        except Exception as e:  # noqa: BLE001
            return {c.uid: uid, **self._fail(e, c.status)}

    # --- chat ---------------------------------------------------------------------------------------
    def _stream(self, uid: str, updates, chat: list[dict], ids: list[int]):
        c = self.c
        for up in updates:
            if up.kind == "stored":
                if not ids or ids[-1] != up.message_id:
                    msg = self.svc.store.message(uid, up.message_id)
                    chat.append({"role": "user", "content": as_text(msg.text if msg else "")})
                chat.append({"role": "assistant", "content": PENDING})
                yield {c.chatbot: chat, c.msg: "", c.retry: gr.update(visible=False),
                       c.status: panels.status_html("Thinking…", "busy")}
            elif up.kind == "status":
                yield {c.status: panels.status_html(up.status, "busy")}
            elif up.kind == "delta":
                chat[-1] = {"role": "assistant", "content": as_text(up.text) or PENDING}
                yield {c.chatbot: chat}
            elif up.kind == "done":
                view = self._view(uid, up.trace)
                view[c.status] = (panels.status_html(up.error, "error") if up.error else "")
                yield view

    def send(self, uid, message, strategy):
        c = self.c
        try:
            uid = check_user_id(uid)
            chat, ids = chat_messages(self.svc.messages(uid))
            yield from self._stream(uid, self.svc.send(uid, message, strategy), chat, ids)
        except Exception as e:  # noqa: BLE001
            yield self._fail(e, c.status)

    def retry(self, uid, strategy):
        c = self.c
        try:
            uid = check_user_id(uid)
            rows = [m for m in self.svc.messages(uid) if not (m.role == "assistant" and m.status == "error")]
            chat, ids = chat_messages(rows)
            yield from self._stream(uid, self.svc.retry(uid, strategy), chat, ids)
        except Exception as e:  # noqa: BLE001
            yield self._fail(e, c.status)

    def compare(self, uid, message):
        c = self.c
        try:
            uid = check_user_id(uid)
            for results in self.svc.compare(uid, message):
                out = {c.compare_row: gr.update(visible=True),
                       c.status: panels.status_html("Comparing: each strategy answers in turn…", "busy")}
                for s, col in zip(STRATEGIES, c.compare_cols):
                    out[col] = panels.compare_column_html(s, results[s])
                yield out
            yield {c.status: panels.status_html("Compared: the same message, every strategy, same history.", "ok")}
        except Exception as e:  # noqa: BLE001
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
            return {c.why: panels.trace_html(reply.trace, title=f"Why reply #{reply.id}"),
                    c.graph: self._graph(uid, reply.trace)}
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.status)

    def set_strategy(self, uid, strategy):
        c = self.c
        try:
            uid = check_user_id(uid)
            self.svc.set_strategy(uid, strategy)
            return {c.session_header: self._header(uid, strategy), c.status: ""}
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.status)

    # --- sessions -----------------------------------------------------------------------------------
    def _after_close(self, uid: str, result) -> dict:
        c = self.c
        view = self._view(uid)
        view[c.status] = panels.status_html(result.message, "error" if result.errors else "ok")
        return view

    def end_session(self, uid, progress=gr.Progress()):
        c = self.c
        try:
            uid = check_user_id(uid)
            result = self.svc.end_session(uid, progress=lambda f, t: progress(f, desc=t))
            return self._after_close(uid, result)
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.status)

    def new_session(self, uid, date, progress=gr.Progress()):
        c = self.c
        try:
            uid = check_user_id(uid)
            result = self.svc.new_session(uid, date, progress=lambda f, t: progress(f, desc=t))
            return self._after_close(uid, result)
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.status)

    # --- settings -------------------------------------------------------------------------------------
    def save_settings(self, uid, backend, model, base_url, *values):
        c = self.c
        try:
            uid = check_user_id(uid)
            options = dict(zip(SETTING_FIELDS, values))
            llm = {"backend": backend, "model": model, "base_url": base_url} if self.allow_llm_change else None
            self.svc.save_settings(uid, options, llm)
            return {**self._settings_values(uid),
                    c.settings_status: panels.status_html("Settings saved; they apply from the next reply.", "ok")}
        except Exception as e:  # noqa: BLE001
            try:
                old = self._settings_values(check_user_id(uid))
            except Exception:  # noqa: BLE001
                old = {}
            return {**old, **self._fail(e, c.settings_status)}

    # --- your data ------------------------------------------------------------------------------------
    def import_history(self, uid, path, sample_id, progress=gr.Progress()):
        c = self.c
        try:
            uid = check_user_id(uid)
            if not path:
                raise UserError("Choose a JSON file to import first.")
            if Path(path).stat().st_size > MAX_FILE_BYTES:
                raise UserError(f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; "
                                "import a smaller history.")
            data = Path(path).read_bytes()
            result = self.svc.import_history(uid, data, sample_id or "", progress=lambda f, t: progress(f, desc=t))
            view = self._view(uid)
            view[c.data_status] = panels.status_html(result.message, "error" if result.errors else "ok")
            return {**view, c.import_file: None}
        except Exception as e:  # noqa: BLE001
            return {**self._fail(e, c.data_status), c.import_file: None}

    def export(self, uid):
        c = self.c
        try:
            uid = check_user_id(uid)
            data = self.svc.export(uid)
            # A fresh temporary folder per export; the file name never comes from user input.
            path = Path(tempfile.mkdtemp(prefix="memory-export-")) / "memory-export.json"
            path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
            return {c.export_file: gr.update(value=str(path), visible=True),
                    c.data_status: panels.status_html("Your export is ready to download.", "ok")}
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.data_status)

    def delete_memory(self, uid, memory_id):
        c = self.c
        try:
            uid = check_user_id(uid)
            if not memory_id:
                raise UserError("Choose a memory to delete.")
            ok = self.svc.delete_memory(uid, memory_id)
            msg = "Memory deleted." if ok else "That memory no longer exists."
            return {c.graph: self._graph(uid), c.memory: self._memory_choices(uid),
                    c.data_status: panels.status_html(msg, "ok" if ok else "info")}
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.data_status)

    def forget(self, uid, confirmed):
        """Delete everything, then continue as a brand-new user with a new id."""
        c = self.c
        try:
            uid = check_user_id(uid)
            if not confirmed:
                raise UserError("Tick the box to confirm that everything should be deleted.")
            self.svc.forget(uid)
            fresh = new_user_id()
            self.svc.current_session(fresh)
            return {c.uid: fresh, **self._view(fresh), **self._settings_values(fresh), c.forget_confirm: False,
                    c.compare_row: gr.update(visible=False), c.export_file: gr.update(value=None, visible=False),
                    c.data_status: panels.status_html("All your sessions and memory were deleted.", "ok")}
        except Exception as e:  # noqa: BLE001
            return self._fail(e, c.data_status)
