"""Users, sessions, messages and per-reply traces: persistence and the session lifecycle.

The UI talks to `SessionService` only; this package talks to `memory.agent.MemoryAgent`
and never imports Gradio.
"""

from .service import SessionService, UserError
from .users import InvalidUserId, check_user_id, new_user_id

__all__ = ["InvalidUserId", "SessionService", "UserError", "check_user_id", "new_user_id"]
