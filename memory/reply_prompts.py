"""Phase III / SeCom reply prompts: the dialogue plus whatever memory the strategy retrieved.

One neutral system prompt for every strategy ("none" included): what differs
between strategies is only the memory block, so a benchmark (TeaFarm, QA)
measures the memory and not an instruction aimed at the test. TeaFarm can add
the optional false-premise instruction (`FALSE_PREMISE_HINT`) and report both.

The layout puts what stays the same before what changes, so that a model which keeps what it
has read (llama.cpp's KV cache of the previous call's longest common prefix, a server's prompt
cache) reads each turn only what is new:

    system      the instructions and the session's date           same for the whole session
    dialogue    the session's earlier turns, each message after   grows at its end
                the memory retrieved for it
    system      the memory retrieved for this message that is     new every turn
                not already in the prompt
    user        the message

A memory block stays before the message it was retrieved for (memory.shown_memory keeps which lines
each reply was shown), so the next message reads only its own new lines: at the end of every block
the model's cache covers everything before it.

A memory block in the first system message (the layout before) changed the prompt's first lines at
every turn, so the model read the whole dialogue again each time. The memory goes in a system
message of its own rather than before the message in the user's turn: there the bundled Qwen 0.5B
repeated the user's message back far more often (docs/speed.md). The system prompt was chosen by
`python -m bench refusals` (docs/speed.md): the bundled Qwen2.5-*Coder* model turned
ordinary chat down ("I'm sorry, but I can't assist with that.") under an assistant's prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .records import Turn

SYSTEM = (
    "You are a warm, caring friend who chats with the same person across many conversations. "
    "Reply naturally and kindly in a few sentences, like a friend would: react to their news, "
    "share in their feelings and ask about what matters to them. Today is {date}."
)
FALSE_PREMISE_HINT = "Do not invent past events, and correct a false premise politely."
TITLES = {"theanine": "Memory timelines from earlier conversations", "secom": "Excerpts of earlier conversations"}
# How to use the memory (the official THEANINE response instructions, in our words); only with a memory.
USE_MEMORY = (
    "Use what helps with the current message; ignore a memory that does not fit it or could mislead. "
    "Do not recite everything you remember, and keep to the conversation's tone."
)
# Earlier turns kept in the prompt: at most HISTORY_TURNS; when the session grows past them, the
# oldest HISTORY_STEP are dropped at once, so the dialogue's start (the cached prefix) moves only
# every HISTORY_STEP turns instead of at every turn.
HISTORY_TURNS = 12
HISTORY_STEP = 6


# An assistant's stock refusals and disclaimers (`python -m bench refusals` counts them in
# replies). Apostrophes may be typographic; "can't" may be "cannot".
_NOT = r"(?:can['’]?t|cannot|can not|am not able to|['’]m not able to|am unable to|['’]m unable to)"
_HAVE_NOT = r"(?:don['’]?t|do not)"
REFUSAL = re.compile(
    "|".join(
        [
            rf"\bI['’]?m sorry,? but I {_NOT}",
            rf"\bI {_NOT} (?:assist|help) with (?:that|this|your request)",
            rf"\bI {_NOT} (?:assist|help|comply|fulfil|fulfill|provide)\b",
            r"\bas an AI\b",
            r"\bas a (?:large )?language model\b",
            r"\bI['’]?m (?:just |only )?an? (?:AI|artificial intelligence|language model)\b",
            r"\bI am (?:just |only )?an? (?:AI|artificial intelligence|language model)\b",
            rf"\bI {_HAVE_NOT} have (?:personal|any personal) (?:experience|experiences|feelings|emotions|opinions)",
            rf"\bI {_HAVE_NOT} have (?:feelings|emotions|a body|personal preferences)",
            rf"\bI {_HAVE_NOT} have (?:access to|the ability to) "
            r"(?:personal|your|previous|past|real-time|memory|remember)",
            rf"\bI {_HAVE_NOT} have (?:memory|memories) of (?:previous|past|our)",
            r"\bI (?:can['’]?t|cannot|am unable to|['’]m unable to) (?:remember|recall) (?:previous|past|our) "
            r"(?:conversations|interactions|chats)",
        ]
    ),
    re.IGNORECASE,
)
# How such a refusal opens a reply, in lower case with plain apostrophes: `RefusalGuard` holds a reply's
# first words back while they could still be one of these.
REFUSAL_OPENINGS = tuple(
    f"{a}{b}"
    for a, bs in {
        "i'm sorry, but i ": ("can't", "cannot", "can not", "am unable", "am not able"),
        "i am sorry, but i ": ("can't", "cannot", "can not", "am unable", "am not able"),  # seen: the 0.5B's
        "i'm sorry, i ": ("can't", "cannot"),
        "i am sorry, i ": ("can't", "cannot"),
        "sorry, but i ": ("can't", "cannot"),
        "sorry, i ": ("can't", "cannot"),
        "i apologize, but i ": ("can't", "cannot"),
        "as an ": ("ai",),
        "i'm sorry, but as an ": ("ai",),  # measured: the 0.5B's other stock refusal (docs/speed.md)
        "i'm sorry, as an ": ("ai",),
        "as a ": ("language model", "large language model"),
        "i'm ": ("an ai", "just an ai", "only an ai"),
        "i am ": ("an ai", "just an ai", "only an ai"),
        "i ": ("can't assist", "cannot assist", "can't help with", "cannot help with"),
        "i don't have ": ("personal", "feelings", "emotions", "access to", "the ability to"),
        "i do not have ": ("personal", "feelings", "emotions", "access to", "the ability to"),
    }.items()
    for b in bs
)


def is_refusal(text: str) -> bool:
    return bool(REFUSAL.search(text or ""))


class RefusalGuard:
    """Tells `LLMSession.stream` whether a reply's opening is a stock refusal (it then asks again) and
    whether it could still become one (its first words are held back meanwhile). A reply that opens
    otherwise, e.g. "I'm sorry to hear that", is shown at once."""

    @staticmethod
    def _norm(text: str) -> str:
        return " ".join(text.replace("’", "'").lower().split()).lstrip("\"'*_ ")

    def rejects(self, text: str) -> bool:
        t = self._norm(text)
        return any(t.startswith(o) for o in REFUSAL_OPENINGS)

    def undecided(self, text: str) -> bool:
        t = self._norm(text)
        return any(o.startswith(t) and o != t for o in REFUSAL_OPENINGS)


def one_line(text: str) -> str:
    """A memory item on one line: a small model reads a list of one fact per line best."""
    return " ".join(str(text).split())


def memory_block(strategy: str, memory_lines: list[str]) -> str:
    """The memory text the reply prompt receives ("" when nothing was retrieved)."""
    if not memory_lines:
        return ""
    title = TITLES.get(strategy, "Memories")
    return f"{title}:\n" + "\n".join(f"- {one_line(line)}" for line in memory_lines) + f"\n\n{USE_MEMORY}"


def system_prompt(date: str, hint: str = "") -> str:
    return SYSTEM.format(date=date or "unknown") + (f" {hint}" if hint else "")


def reply_messages(
    strategy: str,
    memory_lines: list[str],
    history: list[Turn],
    message: str,
    date: str,
    hint: str = "",
    earlier: list[list[str]] | None = None,
) -> list[dict]:
    """[system, the dialogue's turns..., system: the memory, user: the message] (the module's docstring);
    `earlier[i]`: the memory lines shown before history[i] (memory.shown_memory)."""
    msgs = [{"role": "system", "content": system_prompt(date, hint)}]
    for i, t in enumerate(history):
        if earlier and i < len(earlier) and (shown := memory_block(strategy, earlier[i])):
            msgs.append({"role": "system", "content": shown})
        msgs.append({"role": "assistant" if t.speaker == "assistant" else "user", "content": t.text})
    if block := memory_block(strategy, memory_lines):
        msgs.append({"role": "system", "content": block})
    msgs.append({"role": "user", "content": message})
    return msgs


def memory_of(messages: list[dict]) -> str:
    """The memory block of a reply prompt made by `reply_messages` ("" without one)."""
    if len(messages) >= 3 and messages[-2].get("role") == "system":
        return str(messages[-2].get("content", ""))
    return ""


def stable_history(history: list[Turn], max_turns: int = HISTORY_TURNS, step: int = HISTORY_STEP) -> list[Turn]:
    """The session's latest turns, at most `max_turns`, starting at a multiple of `step` (see HISTORY_STEP)."""
    extra = len(history) - max_turns
    if extra <= 0:
        return list(history)
    start = -(-extra // step) * step
    return history[start:]


def new_lines(memory_lines: list[str], earlier: list[list[str]]) -> list[str]:
    """The retrieved lines not already shown in the prompt's earlier blocks, in their rank order."""
    shown = {one_line(x) for block in earlier for x in block}
    return [x for x in memory_lines if one_line(x) not in shown]


def fit_reply(
    strategy: str,
    memory_lines: list[str],
    history: list[Turn],
    message: str,
    date: str,
    hint: str,
    fits: Callable[[list[dict]], bool],
    keep_turns: int = 2,
    earlier: list[list[str]] | None = None,
) -> tuple[list[dict], list[str], list[str]]:
    """`reply_messages` with the retrieved lines not shown before (`new_lines`) cut until
    `fits(messages)`; returns it, what was cut and the memory lines of its last block: first the
    dialogue's oldest turns (with the memory shown before them) but the latest `keep_turns`, then the
    memory's last lines (the lowest ranked), then the rest of the dialogue. The message stays (the LLM
    session cuts its end as the last resort)."""
    lines, turns = list(memory_lines), list(history)
    blocks = list(earlier or [[] for _ in history])
    cut: list[str] = []

    def build() -> list[dict]:
        return reply_messages(strategy, new_lines(lines, blocks), turns, message, date, hint, blocks)

    def drop_turns(keep: int) -> None:
        n = 0
        while len(turns) > keep and not fits(build()):
            turns.pop(0)
            blocks.pop(0)
            n += 1
        if n:
            cut.append(f"{n} earlier message{'s' * (n != 1)} of this conversation")

    drop_turns(keep_turns)
    n = 0
    while lines and not fits(build()):
        lines.pop()
        n += 1
    if n:
        cut.append(f"{n} line{'s' * (n != 1)} of memory")
    drop_turns(0)
    return build(), cut, new_lines(lines, blocks)


def dialogue_text(history: list[Turn], message: str, last: int = 6) -> str:
    lines = [f"{t.speaker}: {t.text}" for t in (history[-last:] if last > 0 else [])] + [f"user: {message}"]
    return "\n".join(lines)
