"""The context window: how many tokens a prompt may take, and fitting a reply's prompt into it.

Every LLM step sizes its prompt to the window (LLMConfig.n_ctx: the embedded model's context, or the one
configured for an endpoint with LLM_CONTEXT_WINDOW) before it asks: the relation step asks for its pairs
in as many calls as fit, long sessions and long timeline lists go in parts, and a reply's memory and
dialogue are trimmed (`fit_messages`). A backend that knows its tokenizer counts exactly
(`count_tokens`); otherwise cl100k counts get a margin, since another model's tokenizer may need more.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..tokens import count_tokens, truncate

DEFAULT_WINDOW = 8192
PER_MESSAGE = 8  # chat-template tokens around each message (role markers, separators)
MARGIN = 1.15  # cl100k tokens -> an unknown model's tokens
RESERVE = 32  # tokens kept free besides the answer (the template's closing, a stop token)

Counter = Callable[[str], int]


def calls_that_fit(costs: list[int], base: int, room: Callable[[int], int], cap: int | None = None) -> list[list[int]]:
    """Items (their prompt tokens, `costs`) grouped in order into as few calls as fit: a call of n items
    takes `base` + their costs <= room(n) (the window less the answer n items need), and at most `cap`
    item tokens. An item too large for any call goes alone (its caller falls back)."""
    out: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for i, n in enumerate(costs):
        if cur and (base + used + n > room(len(cur) + 1) or (cap is not None and used + n > cap)):
            out.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += n
    return [*out, cur] if cur else out


def estimated(text: str) -> int:
    return math.ceil(count_tokens(text) * MARGIN)


def messages_tokens(messages: list[dict], count: Counter = estimated) -> int:
    return sum(count(str(m.get("content", ""))) + PER_MESSAGE for m in messages)


def fit_messages(
    messages: list[dict], budget: int, count: Counter = estimated, keep_last: int = 2
) -> tuple[list[dict], list[str]]:
    """`messages` ([system, dialogue..., user]) cut to at most `budget` tokens, and what was cut.

    In order: the oldest dialogue messages except the latest `keep_last`; then the system message's
    last lines (a reply's memory lines are there, best ranked first); then the rest of the dialogue;
    then the end of the last message. The system message's first line (the instructions) stays."""
    msgs = [dict(m) for m in messages]
    cut: list[str] = []

    def over() -> bool:
        return messages_tokens(msgs, count) > budget

    if not over():
        return msgs, cut
    has_system = bool(msgs) and msgs[0].get("role") == "system"
    first = 1 if has_system else 0

    def drop_dialogue(keep: int) -> None:
        n = 0
        while over() and len(msgs) - first > keep + 1:
            del msgs[first]
            n += 1
        if n:
            cut.append(f"{n} earlier message{'s' * (n != 1)} of this conversation")

    drop_dialogue(keep_last)
    if over() and has_system:
        lines = str(msgs[0]["content"]).split("\n")
        n = 0
        while over() and len(lines) > 1:
            lines.pop()
            n += 1
            msgs[0]["content"] = "\n".join(lines).rstrip()
        if n:
            cut.append(f"{n} line{'s' * (n != 1)} of memory")
    drop_dialogue(0)
    if over():
        cut.append("the end of the message")
        text = str(msgs[-1]["content"])
        keep = count_tokens(text)
        while over() and text:  # truncate() counts cl100k tokens; the backend's count may differ
            keep = int(keep * 0.9)
            text = truncate(text, keep) if keep else ""
            msgs[-1]["content"] = text
    return msgs, cut
