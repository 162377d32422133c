"""Phase III / SeCom reply prompts: the dialogue plus whatever memory the strategy retrieved.

One neutral system prompt for every strategy ("none" included): what differs
between strategies is only the memory block, so a benchmark (TeaFarm, QA)
measures the memory and not an instruction aimed at the test. TeaFarm can add
the optional false-premise instruction (`FALSE_PREMISE_HINT`) and report both.
"""

from __future__ import annotations

from .records import Turn

SYSTEM = "You are a friendly assistant who talks with the same person across many conversations. Today is {date}."
FALSE_PREMISE_HINT = "Do not invent past events, and correct a false premise politely."
TITLES = {"theanine": "Memory timelines from earlier conversations", "secom": "Excerpts of earlier conversations"}
# How to use the memory (the official THEANINE response instructions, in our words); only with a memory.
USE_MEMORY = (
    "Use what helps with the current message; ignore a memory that does not fit it or could mislead. "
    "Do not recite everything you remember, and keep to the conversation's tone."
)


def memory_block(strategy: str, memory_lines: list[str]) -> str:
    """The memory text the reply prompt receives ("" when nothing was retrieved)."""
    if not memory_lines:
        return ""
    title = TITLES.get(strategy, "Memories")
    return f"{title}:\n" + "\n".join(f"- {line}" for line in memory_lines) + f"\n\n{USE_MEMORY}"


def reply_messages(
    strategy: str, memory_lines: list[str], history: list[Turn], message: str, date: str, hint: str = ""
) -> list[dict]:
    system = SYSTEM.format(date=date or "unknown") + (f" {hint}" if hint else "")
    block = memory_block(strategy, memory_lines)
    if block:
        system += "\n\n" + block
    msgs = [{"role": "system", "content": system}]
    for t in history:
        msgs.append({"role": "assistant" if t.speaker == "assistant" else "user", "content": t.text})
    msgs.append({"role": "user", "content": message})
    return msgs


def dialogue_text(history: list[Turn], message: str, last: int = 6) -> str:
    lines = [f"{t.speaker}: {t.text}" for t in (history[-last:] if last > 0 else [])] + [f"user: {message}"]
    return "\n".join(lines)
