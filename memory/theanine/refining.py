"""Phase II-2: the retrieved timelines rewritten for the current dialogue, in as few LLM calls as the
context window allows (many or long timelines go in several calls). A timeline the LLM did not
rewrite as text keeps its raw text."""

from __future__ import annotations

import functools

from ..llm import LLMSession
from ..llm.window import calls_that_fit
from ..tokens import count_tokens
from . import prompts

ANSWER_PER_TIMELINE = 120


def _answer(n: int) -> int:
    return ANSWER_PER_TIMELINE * n + 32


def _end_of(dialogue: str, max_tokens: int) -> str:
    """The latest part of the dialogue when it is long: its last lines within `max_tokens`."""
    lines, used = dialogue.split("\n"), 0
    kept: list[str] = []
    for line in reversed(lines):
        used += count_tokens(line) + 1
        if kept and used > max_tokens:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def _batches(llm: LLMSession, dialogue: str, texts: list[str]) -> list[list[int]]:
    base = llm.prompt_tokens(prompts.refine_messages(dialogue, []))
    # Numbered by the timeline's place in the list: never fewer digits than its place in its call.
    costs = [llm.count(f"Timeline {i}: {t}") + 1 for i, t in enumerate(texts)]
    return calls_that_fit(costs, base, lambda n: llm.room(_answer(n)))


def refine(llm: LLMSession, dialogue: str, texts: list[str], each: bool = False) -> list[str]:
    """One refined text per timeline of `texts`, in order; `each`: one call per timeline."""
    dialogue = _end_of(dialogue, llm.window // 4)
    out = list(texts)
    for batch in [[i] for i in range(len(texts))] if each else _batches(llm, dialogue, texts):
        raw = [texts[i] for i in batch]
        got = llm.json(
            "refine",
            prompts.refine_messages(dialogue, raw),
            prompts.REFINE_SCHEMA,
            functools.partial(prompts.validate_refined, n=len(raw)),
            functools.partial(list, raw),
            max_tokens=_answer(len(raw)),
        )
        for i, text in zip(batch, got, strict=False):
            out[i] = text or texts[i]
    return out
