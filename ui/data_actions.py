"""Handlers for damaged data, corrected dates and downloaded exports (a part of ui.handlers.Handlers).

Damaged stored values (sessions/damage.py) appear in Memory → Delete as "rebuild" and "drop"
choices; a rebuild runs in the background like any memory build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessions import SessionService, UserError, check_user_id
from sessions.transfer import ExportFiles

from . import panels
from .components import Page

if TYPE_CHECKING:
    from .views import Views

REPAIR = "repair:"  # a Delete choice that repairs a damaged stored value: repair:<rebuild|drop>:<item>


def repair_choices(svc: SessionService, uid: str) -> list[tuple[str, str]]:
    """Damaged stored values (sessions/damage.py) as Delete choices: rebuild or drop each."""
    try:
        damaged = svc.damage(uid)
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


def damage_note(svc: SessionService, uid: str) -> str:
    """A status line naming the user's damaged stored values (empty when there are none)."""
    try:
        damaged = svc.damage(uid)
    except Exception:
        return ""
    if not damaged:
        return ""
    text = " ".join(d["message"] for d in damaged[:3]) + (f" (and {len(damaged) - 3} more)" if len(damaged) > 3 else "")
    return panels.status_html(text + " Choose “Rebuild” or “Drop” in Memory → Delete.", "info")


class DataActions:
    def __init__(self, service: SessionService, c: Page, views: Views, exports: ExportFiles) -> None:
        self.svc, self.c, self.views, self.exports = service, c, views, exports

    def set_session_date(self, uid, session_id, date):
        """Correct the date of the session chosen in the list (an ended one's memory is rebuilt in the background)."""
        c, v = self.c, self.views
        try:
            uid = check_user_id(uid)
            if v.building(uid):
                raise UserError("Memory is being built; correct the date when the progress bar finishes.")
            msg = self.svc.set_session_date(uid, session_id, date, build=False)
            out = {}
            if any(s.status == "closing" for s in self.svc.sessions(uid)):
                out = v.start_build(uid)
            return {**v.view(uid), **out, c.status: panels.status_html(msg, "ok")}
        except Exception as e:
            return v.fail(e, c.status)

    def repair(self, uid: str, choice: str) -> dict:
        """A damaged value rebuilt (its session's memory built again in the background) or dropped."""
        action, _, item = choice.partition(":")
        msg = self.svc.repair(uid, item, action, build=False)
        if any(s.status == "closing" for s in self.svc.sessions(uid)):
            self.views.start_build(uid)  # its progress shows at the next poll of the page's timer
        out = {c: v for c, v in self.views.view(uid).items() if c in (self.c.graph, self.c.memory)}
        out[self.c.data_status] = panels.status_html(msg, "ok")
        return out

    def export_downloaded(self, uid):
        """The export was downloaded: its file is deleted a minute later (sessions.transfer)."""
        try:
            self.exports.downloaded(check_user_id(uid))
        except UserError as e:
            return self.views.fail(e, self.c.data_status)
        return {self.c.data_status: panels.status_html("Downloaded. The server deletes its copy in a minute.", "ok")}
