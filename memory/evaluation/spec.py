"""What one evaluation run measures (`RunSpec`): the CLI's flags, or the choices made in the tab."""

from __future__ import annotations

import dataclasses

SUMMARISERS = ("offline", "reference", "llm")
AGENT_METHODS = ("turn", "session", "secom", "theanine-topk", "theanine-timeline", "theanine-paper", "app-defaults")
# "app-defaults": SeCom and THEANINE exactly as a fresh install replies (its k, retrievers, query form),
# beside the per-method rows, which retrieve BENCH_K items so that the budget decides.
# "theanine-paper": THEANINE in the paper's setting (Options.for_theanine: k = 3, dense, whole timelines).
DEFAULT_RETRIEVERS = ("bm25", "dense", "hybrid")
DEFAULT_BUDGETS = (250, 500, 1000, 2000)
MIN_BUDGET = 50  # the app's lowest setting


@dataclasses.dataclass
class RunSpec:
    """What one agent-path run measures: the CLI's flags, or the choices made in the evaluation tab."""

    methods: list[str] = dataclasses.field(default_factory=lambda: list(AGENT_METHODS))
    retrievers: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_RETRIEVERS))
    budgets: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_BUDGETS))
    summarisers: list[str] = dataclasses.field(default_factory=lambda: ["offline"])
    dates: bool = True
    segment_max_len: int | None = None
    seed: int = 0
    contexts: bool = False  # keep each strategy's packed context in the per-question rows
    embedder: str | None = None  # None: the configured one
    # Each question is asked after this many real dialogue turns of another conversation of the file
    # (agent_run.chat_before: never a session of the memory searched), as in a chat that was about
    # something else; 0: the question alone.
    after_turns: int = 4

    def problems(self, has_llm: bool) -> list[str]:
        """What makes this run impossible, in words for people (empty: it can run)."""
        out = []
        bad = [m for m in self.methods if m not in AGENT_METHODS]
        if bad or not self.methods:
            out.append(f"strategies must be some of {', '.join(AGENT_METHODS)} (got {', '.join(bad) or 'none'})")
        bad = [r for r in self.retrievers if r not in DEFAULT_RETRIEVERS]
        if bad or not self.retrievers:
            out.append(f"retrievers must be some of {', '.join(DEFAULT_RETRIEVERS)} (got {', '.join(bad) or 'none'})")
        bad = [s for s in self.summarisers if s not in SUMMARISERS]
        if bad or not self.summarisers:
            out.append(f"unknown summariser: {', '.join(bad) or 'none'} (choose from {', '.join(SUMMARISERS)})")
        if not self.budgets or any(not isinstance(b, int) or b < MIN_BUDGET for b in self.budgets):
            out.append(f"budgets start at {MIN_BUDGET} tokens (the app's lowest setting)")
        if not isinstance(self.after_turns, int) or not 0 <= self.after_turns <= 20:
            out.append("the turns before each question must be a whole number from 0 to 20")
        if "llm" in self.summarisers and not has_llm:
            out.append("summariser llm needs a configured endpoint (OPENAI_BASE_URL / OPENAI_API_KEY / LLM_BACKEND)")
        return out
