"""The trace of one reply or one session close: what was retrieved and what it cost.

The UI renders it and the benchmarks read it; `to_dict()` is JSON-safe.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field


@dataclass
class LLMCall:
    purpose: str  # "reply", "refine", "relation", "summarise", "segment", ...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    status: str = "ok"  # ok | repaired | retried | fallback | error
    detail: str = ""  # what went wrong, never a secret
    reasoning: str = ""  # a reasoning model's thinking, kept out of the answer (See why shows it folded)


@dataclass
class Trace:
    strategy: str  # theanine | secom | none
    memories: list[dict] = field(default_factory=list)  # THEANINE: retrieved {id, event, time, session_id, score}
    timelines_raw: list[dict] = field(default_factory=list)  # {"anchor", "nodes": [ids], "text"}
    timelines_refined: list[str] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)  # SeCom: {id, session_id, date, text, key, summary, score}
    llm_calls: list[LLMCall] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step
    notices: list[str] = field(default_factory=list)  # e.g. "compression unavailable: ..."
    counts: dict[str, int] = field(default_factory=dict)  # the size of a step's work, e.g. {"relation_pairs": 12}
    # memory.answer_use: the memory lines the reply's words came from, and stale values it named
    answer_use: dict = field(default_factory=dict)
    memory_path: str = ""  # "llm" | "offline": whether LLM memory steps ran
    error: str | None = None  # a user-facing message, never a stack trace

    @contextmanager
    def timed(self, step: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[step] = self.timings.get(step, 0.0) + time.perf_counter() - t0

    def count(self, what: str, n: int) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def notice(self, text: str) -> None:
        if text not in self.notices:
            self.notices.append(text)

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.llm_calls)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["n_llm_calls"] = len(self.llm_calls)
        d["tokens"] = self.tokens
        return d
