"""The settings form's fields: the option inputs in order, their labels, and messages that name a field by
its label (people see labels, not option names)."""

from __future__ import annotations

import re

from sessions.service import user_message
from sessions.users import OPTION_FIELDS

# The option inputs of the settings form, in this order (layout.py: one component per field, named like it).
SETTING_FIELDS = OPTION_FIELDS
# The settings form's labels, for messages about a field (people see labels, not option names).
FIELD_LABELS = {
    "temperature": "Temperature",
    "j": "THEANINE j (links per new memory)",
    "k": "k (memories / segments retrieved)",
    "n": "THEANINE n (timelines per memory)",
    "whole_timelines": "THEANINE whole timelines first",
    "theanine_mode": "THEANINE setting",
    "compression_rate": "SeCom compression rate",
    "retriever": "SeCom retriever",
    "max_reply_tokens": "Max reply tokens",
    "backend": "LLM backend",
    "model": "Model",
    "base URL": "Base URL",
    "strategy": "Memory strategy",
}


def field_message(exc: BaseException) -> str:
    """An InvalidOptions message with the field's label in place of its option name."""
    return re.sub(
        r"^([A-Za-z_ ]+?) (must|is)\b",
        lambda m: f"{FIELD_LABELS.get(m.group(1), m.group(1))} {m.group(2)}",
        user_message(exc),
    )
