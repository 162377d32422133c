"""Phase III / SeCom reply prompts: the dialogue plus whatever memory the strategy retrieved."""
from __future__ import annotations

from .records import Turn

SYSTEM = ("You are a friendly assistant who talks with the same person across many conversations. "
          "Today is {date}. Use the memories of earlier conversations when they help, "
          "do not invent past events, and correct a false premise politely.")


def reply_messages(strategy: str, memory_lines: list[str], history: list[Turn], message: str, date: str) -> list[dict]:
    system = SYSTEM.format(date=date or "unknown")
    if memory_lines:
        title = {"theanine": "Memory timelines from earlier conversations",
                 "secom": "Excerpts of earlier conversations"}.get(strategy, "Memories")
        system += f"\n\n{title}:\n" + "\n".join(f"- {line}" for line in memory_lines)
    msgs = [{"role": "system", "content": system}]
    for t in history:
        msgs.append({"role": "assistant" if t.speaker == "assistant" else "user", "content": t.text})
    msgs.append({"role": "user", "content": message})
    return msgs


def dialogue_text(history: list[Turn], message: str, last: int = 6) -> str:
    lines = [f"{t.speaker}: {t.text}" for t in history[-last:]] + [f"user: {message}"]
    return "\n".join(lines)
