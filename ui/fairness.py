"""How events share the server between users (Gradio concurrency), and the settings panel's lock.

Replies (send, retry, compare) of all users share one pool of MEMORY_CONCURRENCY
workers. Memory builds (end/new session, import) run as the page's background work
(sessions/work.py) or, through the API, in their own events pool, and then wait in the
service's BuildPool (sessions.jobs), which shows their place in line. So a long
import never takes a worker that another user's reply needs. Gradio shows a queued
event's position in the browser by itself.
"""

from __future__ import annotations

import os


def reply_events() -> dict:
    return {"concurrency_id": "reply", "concurrency_limit": int(os.environ.get("MEMORY_CONCURRENCY", "4"))}


def build_events() -> dict:
    # Waiting builds hold a Gradio worker thread each while they wait in BuildPool: bounded.
    return {"concurrency_id": "memory_build", "concurrency_limit": int(os.environ.get("MEMORY_BUILD_WAITING", "8"))}


def llm_choice_allowed(service, settings, requested: bool | None) -> bool:
    """The settings panel shows the backend/model/URL choice only where the service accepts one."""
    allowed = bool(getattr(service, "allow_llm_change", True)) and settings.allow_llm_change
    return allowed if requested is None else (allowed and requested)
