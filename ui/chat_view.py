"""Stored messages as gr.Chatbot messages (role/content dicts), with every text shown as text.

The Chatbot renders Markdown and HTML; escaping <, > and & makes typed or
generated HTML appear literally, and "![" is escaped so a Markdown image in a
reply cannot make the browser fetch a URL (a way to leak memory through a
prompt-injected reply).
"""
from __future__ import annotations

from html import escape

PENDING = "…"


def as_text(text: str | None) -> str:
    return escape(text or "", quote=False).replace("![", "!\\[")


def chat_messages(rows) -> tuple[list[dict], list[int]]:
    """(messages for gr.Chatbot, the stored message id behind each one, for .select)."""
    msgs, ids = [], []
    for m in rows:
        if m.role == "user":
            content = as_text(m.text)
        elif m.status == "ok":
            content = as_text(m.text) or "*(empty reply)*"
        else:
            partial = f"{as_text(m.text)}\n\n" if m.text else ""
            content = f"{partial}⚠️ {as_text(m.error or 'The reply failed.')}"
        msgs.append({"role": m.role, "content": content})
        ids.append(m.id)
    return msgs, ids
