"""The page's "Your data" handlers: import a history, export it, delete a memory, Forget me; and those for
damaged data, corrected dates and downloaded exports.

`DataHandlers` and `DataActions` are parts of `ui.handlers.Handlers`, which makes them on the shared views
and checks of `ui.views.Views` (passed in) and gives `DataHandlers` its `DataActions`. Damaged stored
values (sessions/damage.py) appear in Memory → Delete as "rebuild" and "drop" choices (`REPAIR`); a
rebuild runs in the background like any memory build.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr

from sessions import SessionService, UserError, UserKey
from sessions.service import forgotten
from sessions.transfer import MAX_FILE_BYTES, ExportFiles

from . import panels
from .components import REPAIR, Page

if TYPE_CHECKING:
    from .views import Views  # made by ui.handlers.Handlers and passed in


class DataActions:
    def __init__(self, service: SessionService, c: Page, views: Views, exports: ExportFiles) -> None:
        self.rooms, self.c, self.views, self.exports = service.rooms, c, views, exports

    def set_session_date(self, uid, session_id, date):
        """Correct the date of the session chosen in the list (an ended one's memory is rebuilt in the background)."""
        c, v = self.c, self.views
        try:
            key = v.key(uid)
            if v.building(key):
                raise UserError("Memory is being built; correct the date when the progress bar finishes.")
            msg = self.rooms.sessions.set_date(key, session_id, date, build=False)
            out = {}
            if any(s.status == "closing" for s in self.rooms.sessions.in_order(key)):
                out = v.start_build(key)
            return {**v.view(key), **out, c.status: panels.status_html(msg, "ok")}
        except Exception as e:
            return v.fail(e, c.status)

    def repair(self, key: UserKey, choice: str) -> dict:
        """A damaged value rebuilt (its session's memory built again in the background) or dropped."""
        action, _, item = choice.partition(":")
        msg = self.rooms.data.repair(key, item, action, build=False)
        if any(s.status == "closing" for s in self.rooms.sessions.in_order(key)):
            self.views.start_build(key)  # its progress shows at the next poll of the page's timer
        out = {c: v for c, v in self.views.view(key).items() if c in (self.c.graph, self.c.memory)}
        out[self.c.data_status] = panels.status_html(msg, "ok")
        return out

    def export_downloaded(self, uid):
        """The export was downloaded: its file is deleted a minute later (sessions.transfer)."""
        try:
            self.exports.downloaded(self.views.key(uid))
        except UserError as e:
            return self.views.fail(e, self.c.data_status)
        return {self.c.data_status: panels.status_html("Downloaded. The server deletes its copy in a minute.", "ok")}


class DataHandlers:
    def __init__(
        self, service: SessionService, c: Page, views: Views, actions: DataActions, exports: ExportFiles
    ) -> None:
        self.rooms, self.c, self.views, self.actions, self.exports = service.rooms, c, views, actions, exports
        # The stored comparison as shown (ExploreHandlers.last_compare): an import renumbers the sessions by
        # date, and Compare's header names the session it ran in.
        self.compare_view: Callable[[UserKey], dict] = lambda key: {}

    def import_history(self, uid, path, sample_id):
        c = self.c
        try:
            key = self.views.key(uid)
            if not path:
                raise UserError("Choose a JSON file to import first.")
            if self.views.building(key):
                raise UserError("Memory is still being built; import again when the progress bar finishes.")
            if Path(path).stat().st_size > MAX_FILE_BYTES:
                raise UserError(
                    f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; import a smaller history."
                )
            data = Path(path).read_bytes()
            result = self.rooms.data.import_history(key, data, sample_id or "", build=False)
            started = self.views.start_build(key, "import")
            view = self.views.view(key)
            view.update(started)
            view[c.data_status] = panels.status_html(result.message, "ok")
            return {**view, **self.compare_view(key), c.import_file: None}
        except Exception as e:
            return {**self.views.fail(e, c.data_status), c.import_file: None}

    def export(self, uid):
        c = self.c
        try:
            key = self.views.key(uid)
            data = self.rooms.data.export(key)
            # One private copy (sessions.transfer): inside Gradio's cache, so Gradio serves it without copying.
            path = self.exports.write(key, json.dumps(data, ensure_ascii=False, indent=2))
            return {
                c.export_file: gr.update(value=str(path), visible=True),
                c.data_status: panels.status_html("Your export is ready to download.", "ok"),
            }
        except Exception as e:
            return self.views.fail(e, c.data_status)

    def ask_delete(self, uid, memory_id, redact=False):
        """The first click on Delete: which memory, and what goes with it; the second click deletes."""
        c = self.c
        try:
            key = self.views.key(uid)
            if not memory_id:
                raise UserError("Choose a memory to delete.")
            if str(memory_id).startswith(REPAIR):  # a damaged value: rebuild or drop it, no question
                return {
                    c.delete_ask: gr.update(visible=True),
                    c.data_status: panels.status_html("Repair this damaged item as chosen?", "info"),
                }
            node = next((n for n in self.rooms.memory.graph(key).get("nodes") or [] if str(n["id"]) == memory_id), None)
            if node is None:
                raise UserError("That memory no longer exists.")
            also = " and blank its source turns in the transcript" if redact else ""
            event = " ".join(str(node.get("event") or "").split())[:120]
            return {
                c.delete_ask: gr.update(visible=True),
                c.data_status: panels.status_html(
                    f"Delete “{event}” from THEANINE and SeCom{also}? This cannot be undone.", "info"
                ),
            }
        except Exception as e:
            return {**self.views.fail(e, c.data_status), c.delete_ask: gr.update(visible=False)}

    def keep_memory(self):
        return {self.c.delete_ask: gr.update(visible=False), self.c.data_status: ""}

    def delete_memory(self, uid, memory_id, redact=False):
        c = self.c
        try:
            key = self.views.key(uid)
            if not memory_id:
                raise UserError("Choose a memory to delete.")
            if self.views.building(key):
                raise UserError("Memory is being built; delete when the progress bar finishes.")
            if str(memory_id).startswith(REPAIR):
                return {
                    **self.actions.repair(key, str(memory_id)[len(REPAIR) :]),
                    c.delete_ask: gr.update(visible=False),
                }
            gone = self.rooms.memory.delete(key, memory_id, redact=bool(redact))
            msg = gone["message"] if gone else "That memory no longer exists."
            view = self.views.view(key)
            out = {
                c.graph: view[c.graph],
                c.memory: view[c.memory],
                c.data_status: panels.status_html(msg, "ok" if gone else "info"),
                c.delete_ask: gr.update(visible=False),
            }
            if gone and gone.get("redacted"):
                out.update({k: v for k, v in view.items() if k in (c.chatbot, c.msg_ids)})
            return out
        except Exception as e:
            return self.views.fail(e, c.data_status)

    def forget(self, uid, confirmed, request: gr.Request = None):  # type: ignore[assignment]  # Gradio passes the request
        """Delete everything, then continue as a brand-new user with a new id."""
        c = self.c
        try:
            key = self.views.key(uid)
            if not confirmed:
                raise UserError("Tick the box to confirm that everything should be deleted.")
            if self.views.building(key):
                raise UserError("Memory is being built; forget me when the progress bar finishes.")
            gone = self.rooms.data.forget(key)
            self.exports.forget(key)
            fresh = self.rooms.users.new_user(request)
            new = self.views.key(fresh)
            return {
                c.uid: fresh,
                **self.views.view(new),
                **self.views.settings_values(new),
                c.forget_confirm: False,
                c.compare_row: gr.update(visible=False),
                c.compare_view: "",
                c.export_file: gr.update(value=None, visible=False),
                c.data_status: panels.status_html(forgotten(gone), "ok"),
            }
        except Exception as e:
            return self.views.fail(e, c.data_status)
