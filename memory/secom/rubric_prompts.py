"""SeCom's rubric slot: the project's own segmentation guidance, and the reflection prompt that
rewrites a rubric from labelled dialogues (paper, section 4.2)."""

from __future__ import annotations

from memory.secom.prompts import format_exchanges, neutralise

MAX_RUBRIC_CHARS = 3000

# The guidance the project's earlier prompt gave beside the official instruction. It is advice on where
# topics change, so it goes where the paper puts learned guidance (SECOM_PROJECT_RUBRIC turns it on;
# a learned rubric, SECOM_RUBRIC, takes its place). It leans towards fewer, longer segments.
PROJECT_RUBRIC = (
    "Start a new segment only when the conversation clearly moves to a different topic. "
    "A small follow-up, a clarification, a joke or a short aside stays in the segment of the topic it belongs to."
)

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
