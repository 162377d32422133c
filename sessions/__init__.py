"""Users, sessions, messages and per-reply traces: persistence and the session lifecycle.

The UI talks to the front door only (`open_service` builds a `SessionService`, whose typed rooms take a
user resolved once per event); this package talks to `memory.agent.MemoryAgent` and never imports Gradio.
"""

from .service import Rooms, SessionService, UserError, open_service
from .users import InvalidUserId, check_user_id, new_user_id

__all__ = ["InvalidUserId", "Rooms", "SessionService", "UserError", "check_user_id", "new_user_id", "open_service"]
