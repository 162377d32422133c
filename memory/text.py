"""Text from outside (typed, imported, sent through the API, written by an LLM) made safe to store.

Lone UTF-16 surrogates ("\\ud800") cannot be encoded as UTF-8, so SQLite, JSON
files written as UTF-8 and Chroma would all fail on them: they become U+FFFD.
Control characters other than tab and newline (NUL, escape sequences, ...) are
dropped; "\\r\\n" and "\\r" become "\\n". Right-to-left text, emoji and every
other printable character are kept as they are.

Secrets registered with `register_secret` (the API key of the process settings) are replaced by
"[redacted]" in everything cleaned here, so a server that echoes the key in an error message
cannot put it in a trace, a stored message, an export or the page.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SECRETS: set[str] = set()
REDACTED = "[redacted]"


def register_secret(secret: str | None) -> None:
    if secret and len(secret) >= 8:
        _SECRETS.add(secret)


def redact(text: str) -> str:
    for s in _SECRETS:
        if s in text:
            text = text.replace(s, REDACTED)
    return text


def clean_text(value) -> str:
    text = "" if value is None else str(value)
    text = _SURROGATE.sub("\ufffd", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return redact(_CONTROL.sub("", text))


def clean_obj(value):
    """clean_text on every string inside a JSON-like value (dict keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_obj(k) if isinstance(k, str) else k: clean_obj(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_obj(v) for v in value]
    return value


def plural(n: int, word: str, many: str = "") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"
