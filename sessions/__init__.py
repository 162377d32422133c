"""Users, sessions, messages and per-reply traces: persistence and the session lifecycle.

The UI talks to the front door only (`open_service` builds a `SessionService`, whose typed rooms take a
user resolved once per event); this package talks to `memory.agent.MemoryAgent` and never imports Gradio.
"""

from .data_room import DataRoom
from .rooms import PageData, Rooms
from .service import SessionService, UserError, open_service
from .store import SessionRow
from .users import InvalidUserId, UserKey, check_user_id, new_user_id

__all__ = [
    "DataRoom",
    "InvalidUserId",
    "PageData",
    "Rooms",
    "SessionRow",
    "SessionService",
    "UserError",
    "UserKey",
    "check_user_id",
    "new_user_id",
    "open_service",
]
