"""The trace of one reply or one session close: what was retrieved and what it cost.

The UI renders it and the benchmarks read it; `to_dict()` is JSON-safe, its shape declared in
memory.trace_types.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass, field

from .trace_types import AnswerUse, LLMCallDict, RetrievedMemory, Segment, Timeline, TraceDict


@dataclass
class LLMCall:
    purpose: str  # "reply", "refine", "relation", "summarise", "segment", ...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    status: str = "ok"  # ok | repaired | retried | fallback | error
    detail: str = ""  # what went wrong, never a secret
    reasoning: str = ""  # a reasoning model's thinking, kept out of the answer (See why shows it folded)

    def to_dict(self) -> LLMCallDict:
        return LLMCallDict(
            purpose=self.purpose,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            seconds=self.seconds,
            status=self.status,
            detail=self.detail,
            reasoning=self.reasoning,
        )


@dataclass
class Trace:
    strategy: str  # theanine | secom | none
    memories: list[RetrievedMemory] = field(default_factory=list)  # THEANINE: the top-k retrieved
    timelines_raw: list[Timeline] = field(default_factory=list)  # THEANINE: the timelines packed for the reply
    timelines_refined: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)  # SeCom: the segments packed for the reply
    llm_calls: list[LLMCall] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step
    notices: list[str] = field(default_factory=list)  # e.g. "compression unavailable: ..."
    counts: dict[str, int] = field(default_factory=dict)  # the size of a step's work, e.g. {"relation_pairs": 12}
    # memory.answer_use: the memory lines the reply's words came from, and stale values it named
    answer_use: AnswerUse = field(default_factory=AnswerUse)
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

    def to_dict(self) -> TraceDict:
        """A copy: changing it leaves the trace as it was."""
        return TraceDict(
            strategy=self.strategy,
            memories=deepcopy(self.memories),
            timelines_raw=deepcopy(self.timelines_raw),
            timelines_refined=list(self.timelines_refined),
            segments=deepcopy(self.segments),
            llm_calls=[c.to_dict() for c in self.llm_calls],
            timings=dict(self.timings),
            notices=list(self.notices),
            counts=dict(self.counts),
            answer_use=deepcopy(self.answer_use),
            memory_path=self.memory_path,
            error=self.error,
            n_llm_calls=len(self.llm_calls),
            tokens=self.tokens,
        )
