"""The service's upkeep of stored data: correcting a session's date, listing and repairing damaged
values (sessions/quarantine.py, sessions/repair.py), and purging deleted text from the stores' files.

A part of `SessionService` (mixed in); it uses the service's store, agent, work, lifecycle and checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory.dates import iso_key
from memory.theanine.strategy import KIND as THEANINE_KIND
from memory.userspace import user_key

from . import db, quarantine, repair
from .errors import UserError
from .graph_store import SqlGraphStore
from .lifecycle import Progress, check_date, human_date

if TYPE_CHECKING:
    from .lifecycle import Lifecycle
    from .store import Store
    from .work import UserWork


class Upkeep:
    store: Store
    agent: Any
    work: UserWork
    lifecycle: Lifecycle
    user: Any
    build_pending: Any

    def set_session_date(
        self, user_id: str, session_id: str, date: str, progress: Progress | None = None, build: bool = True
    ) -> str:
        """Correct the date of a session (memory.dates' rule, as for new sessions). The open session keeps
        the order rule; an ended one's memories take the new date (THEANINE at once, SeCom by a rebuild;
        build=False leaves that to `build_pending`)."""
        user_id = self.user(user_id)
        new = check_date(date)
        row = self.store.session(user_id, str(session_id or ""))
        if row is None:
            raise UserError("Choose a session whose date to correct.")
        if row.status == "open":
            self.lifecycle.check_order(user_id, new, row)
            self.store.set_session_date(user_id, row.session_id, new)
            return f"Session {row.seq} is now dated {human_date(new)}."
        with self.work.hold(user_id, "close"), self.store.close_claim(user_id):
            self.store.correct_session_date(user_id, row.session_id, new)
            graphs = getattr(getattr(self.agent, "theanine", None), "graphs", None)
            if isinstance(graphs, SqlGraphStore):
                graphs.set_session_time(user_id, row.session_id, new, iso_key(new))
        done = f"Session {row.seq} is now dated {human_date(new)}."
        return f"{done} {self.build_pending(user_id, progress).message}" if build else done

    def _purge_deleted(self) -> None:
        """No deleted text left in the files of the embedded stores (free pages, logs)."""
        purge = getattr(getattr(self.agent, "store", None), "purge_deleted", None)
        if purge is not None:
            purge()
        db.purge_deleted(self.store.engine)

    # --- damaged stored values (sessions/quarantine.py) -------------------------------------------
    def damage(self, user_id: str) -> list[dict]:
        """The user's damaged stored values found so far: {"item", "kind", "session_id", "message"}."""
        user_id = self.user(user_id)
        nums = repair.session_numbers(self.store.engine, user_id)
        return [
            {
                "item": d.item,
                "kind": d.table,
                "session_id": d.session_id,
                "message": repair.describe(d, nums.get(d.session_id)),
            }
            for d in quarantine.items(self.store.engine, user_key(user_id))
        ]

    def repair(self, user_id: str, item: str, action: str, progress: Progress | None = None, build: bool = True) -> str:
        """Rebuild or drop one damaged value (`item` as listed by `damage`); a rebuilt session's memory
        is built at once (build=False: left to `build_pending`). Returns what was done, for people."""
        user_id = self.user(user_id)
        if action not in repair.ACTIONS:
            raise UserError("Choose rebuild or drop.")
        d = repair.find(self.store.engine, user_key(user_id), str(item or ""))
        if d is None:
            raise UserError("Nothing damaged by that name (already repaired?).")
        with self.work.hold(user_id, "close"), self.store.close_claim(user_id):
            done = repair.repair(self.store.engine, user_id, user_key(user_id), d, action)
            theanine = getattr(self.agent, "theanine", None)
            if d.table == "graph_memories" and action == "drop" and theanine is not None:
                theanine.store.delete(user_id, THEANINE_KIND, ids=[d.row_key])  # its vector, too
        message = f"Repaired: {done}."
        if build and self.store.sessions(user_id, status="closing"):
            message += " " + self.build_pending(user_id, progress).message
        return message
