"""THEANINE prompts, each next to the schema and validator of the answer it expects."""
from __future__ import annotations

import re

from .graph import RELATIONS

# --- Phase I-0: summarise a session into memories ------------------------------

SUMMARISE_SCHEMA = {
    "type": "object",
    "properties": {"memories": {"type": "array", "maxItems": 12, "items": {
        "type": "object",
        "properties": {"speaker": {"type": "string"}, "event": {"type": "string"},
                       "turns": {"type": "array", "items": {"type": "integer"}}},
        "required": ["speaker", "event"]}}},
    "required": ["memories"],
}


def summarise_messages(date: str, numbered_turns: list[str]) -> list[dict]:
    dialogue = "\n".join(numbered_turns)
    return [
        {"role": "system", "content": "You write long-term memories of a conversation. Answer in JSON only."},
        {"role": "user", "content":
            f"Conversation of {date}:\n{dialogue}\n\n"
            "List the facts about each speaker worth remembering in later conversations "
            "(events, plans, preferences, feelings, changes), one short third-person sentence each, "
            "with the numbers of the turns they come from. Answer as "
            '{"memories": [{"speaker": "...", "event": "...", "turns": [0]}]}'},
    ]


def validate_memories(raw, n_turns: int) -> list[dict]:
    items = raw.get("memories") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ValueError("expected a list of memories")
    out = []
    for it in items:
        if not isinstance(it, dict):
            continue
        event = " ".join(str(it.get("event", "")).split())[:400]
        if len(re.findall(r"[^\W\d_]{2,}", event)) < 3:     # placeholders like "..." are not memories
            continue
        turns = [t for t in it.get("turns", []) or [] if isinstance(t, int) and 0 <= t < n_turns]
        out.append({"speaker": str(it.get("speaker", ""))[:80], "event": event, "turns": sorted(set(turns))})
    if not out:
        raise ValueError("no usable memory in the answer")
    return out[:12]


# --- Phase I-2: relation between an earlier memory and a new one -------------------

RELATION_LABELS = RELATIONS + ("None",)
RELATION_SCHEMA = {
    "type": "object",
    "properties": {"relations": {"type": "array", "items": {
        "type": "object",
        "properties": {"pair": {"type": "integer"}, "relation": {"type": "string", "enum": list(RELATION_LABELS)}},
        "required": ["pair", "relation"]}}},
    "required": ["relations"],
}

RELATION_GUIDE = """Relations (from the earlier memory A to the later memory B):
- Changed: B is a change of A (a preference, state or plan that changed).
- Cause: A causes B.
- Reason: A is the reason for B.
- HinderedBy: B is hindered by A.
- React: B is a reaction to A.
- Want: B is something wanted because of A.
- SameTopic: same topic, and none of the above holds.
- None: not related."""


def relation_messages(pairs: list[tuple[dict, dict]]) -> list[dict]:
    lines = []
    for i, (a, b) in enumerate(pairs):
        lines.append(f"Pair {i}:\n  A ({a['time']}): {a['event']}\n  B ({b['time']}): {b['event']}")
    return [
        {"role": "system", "content": "You relate memories of a person across conversations. Answer in JSON only."},
        {"role": "user", "content":
            RELATION_GUIDE + "\n\n" + "\n".join(lines) + "\n\nFor every pair give one relation. Answer as "
            '{"relations": [{"pair": 0, "relation": "SameTopic"}]}'},
    ]


def validate_relations(raw, n_pairs: int) -> dict[int, str]:
    """Keep only labels from the fixed set (case-insensitive); anything else is no link."""
    items = raw.get("relations") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ValueError("expected a list of relations")
    canon = {r.lower(): r for r in RELATION_LABELS}
    out: dict[int, str] = {}
    for it in items:
        if not isinstance(it, dict):
            continue
        p, r = it.get("pair"), canon.get(str(it.get("relation", "")).strip().lower())
        if isinstance(p, int) and 0 <= p < n_pairs and r is not None and p not in out:
            out[p] = r
    if not out and n_pairs:
        raise ValueError("no valid relation label in the answer")
    return out


# --- Phase II-2: refine timelines for the current dialogue -------------------------

REFINE_SCHEMA = {
    "type": "object",
    "properties": {"timelines": {"type": "array", "items": {"type": "string"}}},
    "required": ["timelines"],
}


def refine_messages(dialogue: str, timelines: list[str]) -> list[dict]:
    numbered = "\n".join(f"Timeline {i}: {t}" for i, t in enumerate(timelines))
    return [
        {"role": "system", "content": "You prepare memories for a conversational agent. Answer in JSON only."},
        {"role": "user", "content":
            f"Current conversation:\n{dialogue}\n\nPast memory timelines (events linked by relations, oldest first):\n"
            f"{numbered}\n\nRewrite each timeline into one or two sentences with the information most useful "
            "for the agent's next reply, keeping dates and how things changed. Answer as "
            '{"timelines": ["...", "..."]} with one entry per timeline, in order.'},
    ]


def validate_refined(raw, n: int) -> list[str]:
    items = raw.get("timelines") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise ValueError("expected a list of refined timelines")
    out = [" ".join(str(t).split())[:1200] for t in items[:n]]
    if not any(out):
        raise ValueError("empty refined timelines")
    return out
