"""Prompt tokens of the replies that follow a 50,000-character message, by the cap on a history turn.

The real service stack in-process (MemoryAgent, MiniLM, embedded Chroma, SQLite); the LLM is the
scripted server (tests/llm_server.py), which records every request, so the figure is the tokens the
reply step really sent. For each cap (memory.agent.MAX_HISTORY_TURN_TOKENS): a short message, the
long one, then three short ones; printed: the median prompt of the three later replies.

Run: python -m tests.long_message_bench
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import memory.agent as agent_module
from memory.tokens import count_tokens
from sessions.users import new_user_id
from tests.llm_server import LLMServer
from tests.reliability_app import make_service

LONG_CHARS = 50_000
LATER = ["What should I cook tonight?", "And for the weekend?", "Anything with tea?"]


def prompt_tokens(body: dict) -> int:
    return sum(count_tokens(m["content"]) for m in body["messages"] if isinstance(m.get("content"), str))


def run(cap: int, server: LLMServer, folder: Path) -> tuple[int, list[int]]:
    agent_module.MAX_HISTORY_TURN_TOKENS = cap
    svc = make_service(folder / f"cap-{cap}", server)
    uid = new_user_id()
    words = "a very long message about my week and my plans "
    list(svc.send(uid, "Hi, I like green tea."))
    short = prompt_tokens(server.bodies("reply")[-1])
    list(svc.send(uid, (words * (LONG_CHARS // len(words) + 1))[:LONG_CHARS]))
    later = []
    for q in LATER:
        list(svc.send(uid, q))
        later.append(prompt_tokens(server.bodies("reply")[-1]))
    return short, later


def main() -> None:
    default = agent_module.MAX_HISTORY_TURN_TOKENS
    with LLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        for cap in (agent_module.MAX_MESSAGE_TOKENS, default):
            short, later = run(cap, server, Path(tmp))
            print(
                f"history turn cap {cap:>4} tokens: a short chat's prompt {short} tokens; after a "
                f"{LONG_CHARS:,}-character message, later prompts {later} (median {statistics.median(later):.0f})"
            )
    agent_module.MAX_HISTORY_TURN_TOKENS = default


if __name__ == "__main__":
    main()
