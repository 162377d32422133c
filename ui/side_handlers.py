"""Handlers of the sidebar (reading an earlier session, ending and starting sessions) and of the
settings form. A part of ui.handlers.Handlers (on the shared views of ui.views.Views)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr

from sessions import SessionService, UserError

from . import panels, session_list
from .chat_view import chat_messages
from .components import Page
from .form_fields import FIELD_LABELS, SETTING_FIELDS

if TYPE_CHECKING:
    from .views import Views


class SideHandlers:
    def __init__(
        self, service: SessionService, c: Page, views: Views, allow_llm_change: bool = True, has_api_key: bool = False
    ) -> None:
        self.rooms, self.c, self.views = service.rooms, c, views
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
            key = self.views.key(uid)
            if str(session_id or "").startswith(session_list.FOLD):  # a run of imported sessions: fold or list it
                self.views.unfolded ^= {key}
                return {c.sessions: self.views.session_list(key, self.reading.get(key))}
            self.reading[key] = session_id
            rows = {s.session_id: s for s in self.rooms.sessions.in_order(key)}
            s = rows.get(session_id)
            if s is None or s.status == "open":
                view = self.views.view(key)
                view.pop(c.sessions)
                return view
            msgs, ids = chat_messages([m for m in self.rooms.sessions.messages(key, s.session_id) if m.status == "ok"])
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
            key = self.views.key(uid)
            if self.views.building(key):
                raise UserError(
                    "Memory is still being built; wait until the progress bar finishes, then start the next session."
                )
            if what == "new":
                result = self.rooms.sessions.new(key, date, build=False)
            else:
                result = self.rooms.sessions.end(key, date or None, build=False)
            building = {}
            if any(s.status == "closing" for s in self.rooms.sessions.in_order(key)):
                building = self.views.start_build(key)  # first: the views drawn next show it running
            view = {**self.views.view(key), **building}
            view[c.status] = panels.status_html(result.message, "ok")
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
            key = self.views.key(uid)
            options = dict(zip(SETTING_FIELDS, values, strict=False))
            empty = [FIELD_LABELS[k] for k, v in options.items() if v is None or (isinstance(v, str) and not v.strip())]
            if empty:
                raise UserError(f"{', '.join(empty)}: the field is empty; give a value (nothing was saved).")
            llm = {"backend": backend, "model": model, "base_url": base_url} if self.allow_llm_change else None
            current = self.rooms.users.llm_public(key)
            if llm is None and (backend, model, base_url) != tuple(
                current[k] for k in ("backend", "model", "base_url")
            ):
                # A request the page cannot make (the fields are locked): refused, not half-saved.
                raise UserError("This server does not let visitors change the LLM; nothing was saved.")
            self.rooms.users.save_settings(key, options, llm)
            note = self.backend_note(backend, base_url)[c.settings_status] if self.allow_llm_change else ""
            return {
                **self.views.settings_values(key),
                c.settings_status: note or panels.status_html("Settings saved; they apply from the next reply.", "ok"),
            }
        except Exception as e:
            try:
                old = self.views.settings_values(self.views.key(uid))
            except Exception:
                old = {}
            return {**old, **self.views.fail(e, c.settings_status)}
