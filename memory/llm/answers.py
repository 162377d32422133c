"""Reading JSON out of an LLM's answer.

Small and hurried models wrap JSON in code fences or prose, use single quotes, leave trailing commas
or stop at max_tokens in the middle of a value. `json-repair` mends all of these; what it cannot
turn into an object or a list is not an answer.
"""

from __future__ import annotations

import json
from typing import Any

import json_repair


def parse_json(text: str) -> tuple[Any, bool]:
    """(value, repaired): the JSON object or list in `text`; `repaired` is true when it needed mending.

    Raises ValueError when the answer holds no JSON object or list.
    """
    try:
        return json.loads(text), False
    except (json.JSONDecodeError, TypeError):
        pass
    text = text or ""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON value in the answer")
    # What the answer opens is what it must be: json-repair reads "{not json" as the list ["not json"].
    kind = dict if text[min(starts)] == "{" else list
    value = json_repair.loads(text)
    if not isinstance(value, kind):
        raise ValueError("no JSON value in the answer")
    return value, True
