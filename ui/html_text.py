"""Text for the page's HTML: escaping, messages without Python's names, names, dates and
durations written as the sidebar writes them, the colour of each relation, and the small pieces See
why is made of (notices, tables, scores, a raw timeline cut into its memories, their styles). Shared
by the panels, See why, Compare and the graph; it imports nothing of ui/.

Every text that a person typed or an LLM wrote goes through `esc` (html.escape)
before it reaches the page: gr.HTML inserts its value with innerHTML, where an
unescaped `<img onerror=...>` would run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape

from memory.dates import human_date
from memory.dates import parse as parse_date

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


_DETAIL = re.compile(r"^(?P<head>[^(]{8,}?) \((?P<detail>.+)\)(?P<tail>[;,.][^()]*)?$")
NOTICE_CHARS = 130


def notice_html(text) -> str:
    """A trace's notice on one line; a long one's detail (the parenthesised cause, or the rest) folded."""
    t = plain(text)
    if len(t) <= NOTICE_CHARS:
        return f'<div class="mc-notice">ℹ {esc(t)}</div>'
    m = _DETAIL.match(t)
    head = (m["head"] + (m["tail"] or "")).strip() if m else t[: NOTICE_CHARS - 1] + "…"
    if len(head) > NOTICE_CHARS:
        head = head[: NOTICE_CHARS - 1] + "…"
    return f'<details class="mc-notice"><summary>ℹ {esc(head)}</summary><div>{esc(t)}</div></details>'


def table_html(headers: list[str], rows: list[list], cls: str) -> str:
    """A table whose cells carry their column's name (data-label): on a phone each row is a card."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td data-label="{esc(h)}">{esc(c)}</td>' for h, c in zip(headers, r, strict=False)) + "</tr>"
        for r in rows
    )
    return f'<table class="mc-table {cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("-inf")


def score_text(x) -> str:
    try:
        return f"{float(x):.3f}"
    except (TypeError, ValueError):
        return "" if x is None else str(x)


# See why's look (gr.HTML keeps a <style> it is given): whether a reply used its memory, and the timelines' chains.
ANSWER_STYLE = (
    "<style>"
    ".mc-answer q{quotes:'“' '”'}"
    ".mc-answer mark{background:#fff1a8;padding:0 1px}"
    ".mc-answer .mc-also{font-size:.9em}"
    "</style>"
)
# The chain's look (gr.HTML keeps a <style> it is given). Stacked memories joined by labelled arrows; the
# refined text beside the chain on a wide panel, under it on a narrow one (each column at least 200 px).
CHAIN_CSS = (
    "<style>"
    ".mc-tl{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:flex-start}"
    ".mc-tl>div{flex:1 1 200px;min-width:0}"
    ".mc-tl-note{font-size:.8em;color:#666;margin:2px 0}"
    ".mc-chain{display:flex;flex-direction:column;margin-top:2px}"
    ".mc-node{border:1px solid #7b8494;border-radius:6px;padding:2px 6px;font-size:.9em}"
    ".mc-node.mc-anchor{border:2px solid #d62728}"
    ".mc-node.mc-unused{border-style:dashed;opacity:.55}"
    ".mc-node.mc-history{border-style:dotted}"
    ".mc-meta{font-size:.8em;color:#666}"
    ".mc-star{color:#d62728}"
    ".mc-cut{font-size:.8em;font-style:italic;color:#8a5300}"
    ".mc-link{margin-left:12px;padding:1px 0 1px 8px;border-left:3px solid #9d9d9d;font-size:.8em;color:#333}"
    ".mc-link.mc-off{border-left-style:dashed;opacity:.55}"
    ".mc-tl .mc-refined{border-left:3px solid #1d4f91;padding-left:8px}"
    "</style>"
)
_PIECE = re.compile(r"(?:^|(?<=\]\s))(?:-\((?P<rel>[A-Za-z]+)\)-\s)?(?:(?P<tag>now|history|before):\s)?\[")


def timeline_pieces(text: str) -> list[dict[str, str]]:
    """A raw timeline's text ("[time: event] -(Cause)- [time: event]", with "now: [...]" on a memory that
    replaced earlier ones and "history: [...]" or "before: [...]" on those) cut into its memories; []
    when it does not read so."""
    found = list(_PIECE.finditer(text))
    if not found or found[0].start() != 0:
        return []
    out = []
    for i, m in enumerate(found):
        body = text[m.end() : found[i + 1].start() if i + 1 < len(found) else len(text)].rstrip()
        body = body[:-1] if body.endswith("]") else body
        when, sep, event = body.partition(": ")
        if not (sep and all(parse_date(p) for p in when.split(" until "))):
            when, event = "", body
        out.append(
            {"rel": m.group("rel") or "", "tag": m.group("tag") or "", "body": body, "time": when, "event": event}
        )
    return out
