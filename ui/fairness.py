"""How events share the server between users (Gradio concurrency), and the settings panel's lock.

Replies (send, retry, compare) of all users share one pool of `settings.concurrency`
(MEMORY_CONCURRENCY) workers. Memory builds (end/new session, import) run as the page's background work
(sessions/work.py) or, through the API, in their own events pool, and then wait in the
service's BuildPool (sessions.work), which shows their place in line. So a long
import never takes a worker that another user's reply needs. Gradio shows a queued
event's position in the browser by itself.
"""

from __future__ import annotations

from memory.settings import Settings


def reply_events(settings: Settings) -> dict:
    return {"concurrency_id": "reply", "concurrency_limit": settings.concurrency}


def build_events(settings: Settings) -> dict:
    # Waiting builds hold a Gradio worker thread each while they wait in BuildPool: bounded (MEMORY_BUILD_WAITING).
    return {"concurrency_id": "memory_build", "concurrency_limit": settings.build_waiting}


def llm_choice_allowed(service, settings, requested: bool | None) -> bool:
    """The settings panel shows the backend/model/URL choice only where the service accepts one."""
    allowed = bool(getattr(service, "allow_llm_change", True)) and settings.allow_llm_change
    return allowed if requested is None else (allowed and requested)
