"""How events share the server between users (Gradio concurrency), and the settings panel's lock.

Replies (send, retry, compare) of all users share one pool of `Serving.concurrency`
(MEMORY_CONCURRENCY) workers. Memory builds (end/new session, import) run as the page's background work
(sessions/work.py) or, through the API, in their own events pool, and then wait in the
service's BuildPool (sessions.work), which shows their place in line. So a long
import never takes a worker that another user's reply needs. Gradio shows a queued
event's position in the browser by itself.
"""

from __future__ import annotations

from sessions.settings import Serving  # declared with the app's other settings

from .events import EventOptions


def reply_events(serving: Serving) -> EventOptions:
    return {"concurrency_id": "reply", "concurrency_limit": serving.concurrency}


def build_events(serving: Serving) -> EventOptions:
    return {"concurrency_id": "memory_build", "concurrency_limit": serving.build_waiting}


def llm_choice_allowed(service, requested: bool | None) -> bool:
    """The settings panel shows the backend/model/URL choice only where the service accepts one."""
    allowed = bool(getattr(service, "allow_llm_change", True))
    return allowed if requested is None else (allowed and requested)
