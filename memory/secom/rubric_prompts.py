"""SeCom's rubric slot: the project's own segmentation guidance, and the reflection prompt that
rewrites a rubric from labelled dialogues (paper, section 4.2)."""

from __future__ import annotations

from memory.secom.prompts import format_exchanges, neutralise
from memory.settings import PROJECT_RUBRIC  # the value of SECOM_PROJECT_RUBRIC, declared with it

__all__ = ["MAX_RUBRIC_CHARS", "PROJECT_RUBRIC", "REFLECT_SCHEMA", "reflect_messages", "validate_rubric"]

MAX_RUBRIC_CHARS = 3000

REFLECT_SCHEMA = {
    "type": "object",
    "properties": {"reflection": {"type": "string"}, "rubric": {"type": "string"}},
    "required": ["rubric"],
}


def _ranges(ranges: list[tuple[int, int]]) -> str:
    return ", ".join(f"[{s}-{e}]" for s, e in ranges)


def reflect_messages(rubric: str, examples: list[dict]) -> list[dict]:
    """`examples`: {"texts": [...], "predicted": [(s, e)], "reference": [(s, e)]} for the hardest dialogues."""
    blocks = []
    for i, ex in enumerate(examples):
        blocks.append(
            f"### Example {i}\n{format_exchanges(ex['texts'], 80)}\n"
            f"Predicted segments: {_ranges(ex['predicted'])}\n"
            f"Reference segments: {_ranges(ex['reference'])}"
        )
    current = neutralise(rubric) if rubric else "(none yet: the official zero-shot instruction alone)"
    return [
        {
            "role": "system",
            "content": "You improve guidelines for segmenting conversations by topic. Answer in JSON only.",
        },
        {
            "role": "user",
            "content": "A model segmented the conversations below by topic, following the current guidelines. "
            "Compare its "
            "segments with the reference segments, reflect on where and why it cut too often or too rarely, and "
            "rewrite the guidelines so it matches the references better on new conversations. The guidelines "
            "are advice on where topics change; they must not describe the output format. At most 200 words.\n\n"
            f"Current guidelines:\n{current}\n\n"
            + "\n\n".join(blocks)
            + '\n\nAnswer as {"reflection": "...", "rubric": "..."}',
        },
    ]


def validate_rubric(raw) -> str:
    if not isinstance(raw, dict) or not isinstance(raw.get("rubric"), str):
        raise ValueError("expected {'rubric': str}")
    text = " ".join(raw["rubric"].split()) if "\n" not in raw["rubric"] else raw["rubric"].strip()
    if len(text) < 20:
        raise ValueError("rubric too short")
    return text[:MAX_RUBRIC_CHARS]
