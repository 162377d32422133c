"""Stored messages as gr.Chatbot messages (role/content dicts), with every text shown as text.

The Chatbot renders Markdown and HTML; escaping <, > and & makes typed or
generated HTML appear literally, and "![" is escaped so a Markdown image in a
reply cannot make the browser fetch a URL (a way to leak memory through a
prompt-injected reply). A line Markdown would turn into nothing visible (a rule
of underscores, dashes or stars, a lone code fence, a bare heading mark) has
every character backslash-escaped, so it shows as the text it is.

A long message is folded: its first lines, then the rest inside a closed <details> ("Show all"),
so a 50,000-character message is a bubble of a few lines until someone opens it.
"""

from __future__ import annotations

import re
from html import escape

PENDING = "…"
FOLD_LINES = 6  # a message longer than this many lines, or than FOLD_CHARS, is folded
FOLD_CHARS = 320
_INVISIBLE_LINE = re.compile(r"^[ \t]*[-_*=~`#+>|:.](?:[ \t]*[-_*=~`#+>|:.])*[ \t]*$", re.M)
_MD_CHARS = re.compile(r"([-_*=~`#+>|:.\\])")


def _literal(line: re.Match) -> str:
    return _MD_CHARS.sub(r"\\\1", line.group(0))


def as_text(text: str | None) -> str:
    t = escape(text or "", quote=False).replace("![", "!\\[")
    return _INVISIBLE_LINE.sub(_literal, t)


def _fold_point(text: str) -> int:
    """Where a long text is cut for its folded view (0: short enough to show whole): after FOLD_LINES
    lines or FOLD_CHARS characters, at a line end or a space when there is one near."""
    if len(text) <= FOLD_CHARS and text.count("\n") < FOLD_LINES:
        return 0
    cut = min(len(text), FOLD_CHARS)
    nl = -1
    for _ in range(FOLD_LINES):
        nl = text.find("\n", nl + 1)
        if nl < 0 or nl >= cut:
            break
    else:
        cut = nl
    space = text.rfind(" ", cut // 2, cut)
    if cut < len(text) and text[cut] not in "\n " and space > 0:
        cut = space
    return cut if text[cut:].strip() else 0


def shown_text(text: str | None) -> str:
    """A message as the chat shows it: as text, folded after a few lines when it is long."""
    text = text or ""
    cut = _fold_point(text)
    if not cut:
        return as_text(text)
    rest = text[cut:]
    return (
        f'{as_text(text[:cut].rstrip())} …\n\n<details class="mc-fold"><summary>Show all '
        f"({len(text):,} characters)</summary>\n\n{as_text(rest.strip())}\n\n</details>"
    )


def visible_rows(rows) -> list:
    """The messages to show: a failed reply that a later reply to the same message replaced
    (Retry answered it) disappears; the last failed one stays, with its Retry."""
    answered_later: set = set()
    out = []
    for m in reversed(rows):
        to = getattr(m, "reply_to", None)
        if m.role == "assistant" and to is not None:
            if m.status != "ok" and to in answered_later:
                continue
            answered_later.add(to)
        out.append(m)
    return out[::-1]


def chat_messages(rows) -> tuple[list[dict], list[int]]:
    """(messages for gr.Chatbot, the stored message id behind each one, for .select)."""
    msgs, ids = [], []
    for m in visible_rows(rows):
        if m.role == "user":
            content = shown_text(m.text) or "*(empty message)*"
        elif m.status == "ok":
            content = shown_text(m.text) or "*(empty reply)*"
        else:
            partial = f"{as_text(m.text)}\n\n" if m.text else ""
            content = f"{partial}⚠️ {as_text(m.error or 'The reply failed.')}"
        msgs.append({"role": m.role, "content": content})
        ids.append(m.id)
    return msgs, ids
