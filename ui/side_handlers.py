"""Handlers of the sidebar (reading an earlier session, ending and starting sessions) and of the
settings form. A part of ui.handlers.Handlers (on the shared views of ui.views.Views)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import gradio as gr

from sessions import SessionService, UserError, check_user_id
from sessions.service import user_message
from sessions.users import OPTION_FIELDS

from . import panels, session_list
from .chat_view import chat_messages
from .components import Page

if TYPE_CHECKING:
    from .views import Views

# The option inputs of the settings form, in this order (layout.py: one component per field, named like it).
SETTING_FIELDS = OPTION_FIELDS
# The settings form's labels, for messages about a field (people see labels, not option names).
FIELD_LABELS = {
    "temperature": "Temperature",
    "j": "THEANINE j (links per new memory)",
    "k": "k (memories / segments retrieved)",
    "n": "THEANINE n (timelines per memory)",
    "whole_timelines": "THEANINE whole timelines first",
    "theanine_mode": "THEANINE setting",
    "compression_rate": "SeCom compression rate",
    "retriever": "SeCom retriever",
    "max_reply_tokens": "Max reply tokens",
    "backend": "LLM backend",
    "model": "Model",
    "base URL": "Base URL",
    "strategy": "Memory strategy",
}


def field_message(exc: BaseException) -> str:
    """An InvalidOptions message with the field's label in place of its option name."""
    return re.sub(
        r"^([A-Za-z_ ]+?) (must|is)\b",
        lambda m: f"{FIELD_LABELS.get(m.group(1), m.group(1))} {m.group(2)}",
        user_message(exc),
    )


class SideHandlers:
    def __init__(
        self, service: SessionService, c: Page, views: Views, allow_llm_change: bool = True, has_api_key: bool = False
    ) -> None:
        self.svc, self.c, self.views = service, c, views
        self.allow_llm_change, self.has_api_key = allow_llm_change, has_api_key
        # The session last chosen in the sidebar by each user in this process (it stays chosen when a run of
        # imported sessions folds or opens).
        self.reading: dict[str, str] = {}

    # --- sessions -----------------------------------------------------------------------------------
    def view_session(self, uid, session_id):
        """The sidebar: show an earlier session's transcript (its replies clickable for their traces),
        or the open session again."""
        c = self.c
        try:
            uid = check_user_id(uid)
            if str(session_id or "").startswith(session_list.FOLD):  # a run of imported sessions: fold or list it
                self.views.unfolded ^= {uid}
                return {c.sessions: self.views.session_list(uid, self.reading.get(uid))}
            self.reading[uid] = session_id
            rows = {s.session_id: s for s in self.svc.sessions(uid)}
            s = rows.get(session_id)
            if s is None or s.status == "open":
                view = self.views.view(uid)
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
            return self.views.fail(e, c.status)

    def _end(self, uid, date, what: str):
        c = self.c
        try:
            uid = check_user_id(uid)
            if self.views.building(uid):
                raise UserError(
                    "Memory is still being built; wait until the progress bar finishes, then start the next session."
                )
            if what == "new":
                result = self.svc.new_session(uid, date, build=False)
            else:
                result = self.svc.end_session(uid, date or None, build=False)
            view = self.views.view(uid)
            view[c.status] = panels.status_html(result.message, "ok")
            if any(s.status == "closing" for s in self.svc.sessions(uid)):
                view.update(self.views.start_build(uid))
                view[c.graph] = self.views.graph(uid)
                view[c.sessions] = self.views.session_list(uid)
            return view
        except Exception as e:
            return self.views.fail(e, c.status)

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
            current = self.svc.llm_public(uid)
            if llm is None and (backend, model, base_url) != tuple(
                current[k] for k in ("backend", "model", "base_url")
            ):
                # A request the page cannot make (the fields are locked): refused, not half-saved.
                raise UserError("This server does not let visitors change the LLM; nothing was saved.")
            self.svc.save_settings(uid, options, llm)
            note = self.backend_note(backend, base_url)[c.settings_status] if self.allow_llm_change else ""
            return {
                **self.views.settings_values(uid),
                c.settings_status: note or panels.status_html("Settings saved; they apply from the next reply.", "ok"),
            }
        except Exception as e:
            try:
                old = self.views.settings_values(check_user_id(uid))
            except Exception:
                old = {}
            return {**old, **self.views.fail(e, c.settings_status)}
