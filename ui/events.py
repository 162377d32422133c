"""The keyword arguments the page's events share, typed for Gradio's listeners (`.click(..., **FAST)`)."""

from __future__ import annotations

from typing import Literal, TypedDict


class EventOptions(TypedDict, total=False):
    """A subset of the keyword arguments of a Gradio event listener (Button.click, Timer.tick, ...)."""

    api_visibility: Literal["public", "private", "undocumented"]
    show_progress: Literal["full", "minimal", "hidden"]
    concurrency_limit: int | Literal["default"] | None
    concurrency_id: str | None


# Private (the documented API is in api.py); no Gradio overlay (the page shows its own status line and
# one progress bar).
QUIET: EventOptions = {"api_visibility": "private", "show_progress": "hidden"}
# Cheap views: never wait behind a running reply.
FAST: EventOptions = {**QUIET, "concurrency_limit": None}
