"""Phase II-2: the retrieved timelines rewritten for the current dialogue.

As the official code does it, one call per timeline (`each`), concurrent where the backend serves
calls in parallel (an endpoint: `workers` > 1); or as few batched calls as the context window
allows. A timeline the LLM did not rewrite as text keeps its raw text.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

from ..llm import LLMSession
from ..llm.window import calls_that_fit
from ..tokens import count_tokens
from . import prompts

ANSWER_PER_TIMELINE = 120


def _answer(n: int, per_timeline: int = ANSWER_PER_TIMELINE) -> int:
    return per_timeline * n + 32


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


def _batches(llm: LLMSession, dialogue: str, texts: list[str], per_timeline: int) -> list[list[int]]:
    base = llm.prompt_tokens(prompts.refine_messages(dialogue, []))
    # Numbered by the timeline's place in the list: never fewer digits than its place in its call.
    costs = [llm.count(f"Timeline {i}: {t}") + 1 for i, t in enumerate(texts)]
    return calls_that_fit(costs, base, lambda n: llm.room(_answer(n, per_timeline)))


def refine(
    llm: LLMSession,
    dialogue: str,
    texts: list[str],
    each: bool = False,
    workers: int = 1,
    per_timeline: int = ANSWER_PER_TIMELINE,
    sentences: str = "",
) -> list[str]:
    """One refined text per timeline of `texts`, in order. `each`: one call per timeline, `workers`
    of them at a time; `per_timeline`: answer tokens allowed per timeline; `sentences` ("" = as the
    official instruction, no length asked) sizes the answer in words."""
    dialogue = _end_of(dialogue, llm.window // 4)
    out = list(texts)
    batches = [[i] for i in range(len(texts))] if each else _batches(llm, dialogue, texts, per_timeline)

    def call(batch: list[int]) -> list[str]:
        raw = [texts[i] for i in batch]
        return llm.json(
            "refine",
            prompts.refine_messages(dialogue, raw, sentences),
            prompts.REFINE_SCHEMA,
            functools.partial(prompts.validate_refined, n=len(raw)),
            functools.partial(list, raw),
            max_tokens=_answer(len(raw), per_timeline),
        )

    if workers > 1 and len(batches) > 1:
        with ThreadPoolExecutor(max_workers=min(workers, len(batches))) as pool:
            answers = list(pool.map(call, batches))
    else:
        answers = [call(b) for b in batches]
    for batch, got in zip(batches, answers, strict=True):
        for i, text in zip(batch, got, strict=False):
            out[i] = text or texts[i]
    return out
