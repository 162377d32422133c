"""The protocol every LLM backend implements, and what a call returns."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: str = ""  # a server's `reasoning_content` (a reasoning model's thinking), never the answer


class LLM(Protocol):
    """A chat model. `purpose` names the step ("reply", "summarise", "relation", "segment", ...): a
    server-side proxy or a test can route by it; it never changes what the model is asked."""

    def chat(
        self,
        messages: list[dict],
        *,
        temperature: float,
        max_tokens: int,
        json_schema: dict | None = None,
        purpose: str = "",
    ) -> Completion: ...

    def stream(
        self, messages: list[dict], *, temperature: float, max_tokens: int, seed: int | None = None, purpose: str = ""
    ) -> Iterator[str]: ...
