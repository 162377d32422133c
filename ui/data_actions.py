"""Handlers for damaged data, corrected dates and downloaded exports (a part of ui.handlers.Handlers).

Damaged stored values (sessions/damage.py) appear in Memory → Delete as "rebuild" and "drop"
choices; a rebuild runs in the background like any memory build.
"""

from __future__ import annotations

from sessions import SessionService, UserError, UserKey
from sessions.transfer import ExportFiles

from . import panels
from .components import Page
from .views import REPAIR, Views

__all__ = ["REPAIR", "DataActions"]


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
