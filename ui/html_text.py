"""Text for the page's HTML: escaping, messages without Python's names, and names, dates and
durations written as the sidebar writes them, with the colour of each relation. Shared by the panels,
See why, Compare and the graph; it imports nothing of ui/.

Every text that a person typed or an LLM wrote goes through `esc` (html.escape)
before it reaches the page: gr.HTML inserts its value with innerHTML, where an
unescaped `<img onerror=...>` would run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape

from memory.dates import human_date

# The colour of each relation between memories: the graph's arrows and See why's links.
RELATIONS = {
    "Changed": "#e15759",
    "Cause": "#f28e2b",
    "Reason": "#edc948",
    "HinderedBy": "#b07aa1",
    "React": "#59a14f",
    "Want": "#4e79a7",
    "SameTopic": "#9d9d9d",
}
STRATEGY_NAMES = {
    "theanine": "THEANINE",
    "theanine-paper": "THEANINE, paper settings",
    "secom": "SeCom",
    "none": "no memory",
}


def esc(value) -> str:
    return escape("" if value is None else str(value), quote=True)


# An exception's class name inside a message ("OSError: ...", "(APIConnectionError: ...)"): people
# read what happened, not Python's name for it. A few names say something and become words.
_EXC_NAME = re.compile(
    r"\b(?:[a-z_][a-z0-9_]*\.)*([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt|Timeout|Warning))\b:?[ \t]*"
)
_EXC_WORDS = {
    "APIConnectionError": "could not connect: ",
    "APITimeoutError": "timed out: ",
    "TimeoutError": "timed out: ",
    "RateLimitError": "rate limited: ",
    "AuthenticationError": "the key was refused: ",
    "PermissionDeniedError": "permission denied: ",
    "NotFoundError": "not found: ",
    "InternalServerError": "the server failed: ",
}
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):.*", re.S)


def plain(text) -> str:
    """A message as people read it: no traceback, no exception class names (memory/ and the LLM
    client write them into errors, notices and call details)."""
    t = _TRACEBACK.sub("", "" if text is None else str(text))
    t = _EXC_NAME.sub(lambda m: _EXC_WORDS.get(m.group(1), ""), t)
    t = re.sub(r"\(\s*[:;,]?\s*\)", "", t)
    t = re.sub(r":\s*:", ":", t)
    return " ".join(t.split())


def segment_title(segment: Mapping[str, object], n: int = 80) -> str:
    """A segment's title (a trace's `Segment` or a stored one): its summary, or (a segment rebuilt
    after a deletion has none) its opening words."""
    title = " ".join(str(segment.get("summary") or "").split())
    if not title:
        words = " ".join(str(segment.get("text") or segment.get("key") or "").split())
        title = words if len(words) <= n else words[: n - 1] + "…"
    return title or "(untitled segment)"


def seconds(x) -> str:
    try:
        return f"{float(x):.2f} s"
    except (TypeError, ValueError):
        return ""


def session_numbers(rows) -> dict[str, str]:
    """{session id: the number the sidebar gives it} (`SessionRow.label`: sessions numbered by date)."""
    return {str(s.session_id): str(s.label) for s in rows or ()}


_MEMORY_NO = re.compile(r":m(\d+)$")


def memory_name(mid, session_id=None, sessions: Mapping[str, str] | None = None) -> str:
    """A memory named as the sidebar numbers sessions ("Session 15 · memory 46" for "s18:m46"); its
    stored id when the session's number is not known."""
    mid = "" if mid is None else str(mid)
    number = (sessions or {}).get(str(session_id or "") or mid.rsplit(":", 1)[0])
    if number is None:
        return mid
    n = _MEMORY_NO.search(mid)
    return f"Session {number}" + (f" · memory {n.group(1)}" if n else "")


def date_text(value) -> str:
    """A stored date as the sidebar writes it ("Mon 8 May 2023"; "… until …" for a superseded fact): the one
    date style of See why and the graph."""
    t = " ".join(("" if value is None else str(value)).split())
    return " until ".join(human_date(p) for p in t.split(" until ")) if t else ""


def date_html(value) -> str:
    """A date as the sidebar writes it ("Mon 8 May 2023"), the stored text in its title when it differs."""
    t = " ".join(("" if value is None else str(value)).split())
    shown = date_text(t)
    title = f' title="{esc(t)}"' if shown != t else ""
    return f'<span class="mc-date"{title}>{esc(shown)}</span>'
