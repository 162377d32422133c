"""The declared shape of a trace as JSON: what `Trace.to_dict()` returns, the database stores, and See
why, Compare, forget's scrubbing, recall and the benchmarks read.

Every TypedDict is total=False: a trace stored by an earlier version lacks the keys added since
(a timeline's "chain", "answer_use"), so readers `.get` them; mypy still checks each key's name and
type. `Trace.to_dict()` fills every key (tests/test_trace_types.py checks a real trace against these).
"""

from __future__ import annotations

from typing import TypedDict


class MemoryRef(TypedDict, total=False):
    """A memory named by another part: the one that replaced a retrieved memory, or a stale value's."""

    id: str
    event: str
    time: str


class RetrievedMemory(TypedDict, total=False):
    """THEANINE: one of the top-k memories retrieved for the reply."""

    id: str
    event: str
    time: str
    session_id: str
    score: float
    built_by: str  # how it was made, in words (memory.theanine.extract.BUILT_BY); "" when not known
    superseded_by: MemoryRef  # only when a later memory replaced it (a Changed edge)


class ChainMemory(TypedDict, total=False):
    """THEANINE: one memory of a timeline as See why draws it."""

    id: str
    event: str
    time: str
    session_id: str
    relation: str  # of the arrow into it ("" for the first, "Changed" for an earlier version)
    used: bool  # it reached the reply (packing may cut a timeline)
    anchor: bool  # the retrieved memory the timeline runs through
    history: bool  # an earlier version of the anchor, given with it


class Timeline(TypedDict, total=False):
    """THEANINE: one raw timeline packed into the reply prompt (its refined text is in
    `TraceDict.timelines_refined`, at the same index)."""

    anchor: str  # the retrieved memory's id
    nodes: list[str]  # the ids of the memories that reached the reply, in the prompt's order
    text: str  # the raw text the reply (or the refine step) read
    covers: list[str]  # the source turn ids of those memories
    chain: list[ChainMemory]  # the whole timeline, memories cut by packing included
    whole: bool  # every memory of the timeline reached the reply


class Segment(TypedDict, total=False):
    """SeCom: one retrieved segment; `key` is what retrieval read (compressed unless `compressed` is False)."""

    id: str
    session_id: str
    date: str
    key: str
    summary: str
    score: float
    start: int  # the segment's first and last exchange in its session
    end: int
    turn_ids: list[str]
    compressed: bool
    cut: bool  # packing cut it to the turns around its best-matching exchange
    text: str  # the original turns that reached the reply
    context: str  # the text the reply read (date heading and turns)
    covers: list[str]  # the source turn ids of those turns
    tokens: int  # of `context`


class LLMCallDict(TypedDict, total=False):
    """One LLM call (memory.trace.LLMCall as JSON)."""

    purpose: str  # "reply", "refine", "relation", "summarise", "segment", ...
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    status: str  # ok | repaired | retried | fallback | error
    detail: str  # what went wrong, never a secret
    reasoning: str  # a reasoning model's thinking, kept out of the answer


class AnswerSource(TypedDict, total=False):
    """memory.answer_use: a memory line the reply's words came from."""

    kind: str  # "memory" | "segment"
    id: str
    text: str
    time: str
    session_id: str
    covers: list[str]
    shared: list[str]  # the words (and named date) it shares with the reply beyond the person's own
    values: list[str]  # those that are names, figures or dates
    span: str  # the longest run of words it shares with the reply
    score: int
    superseded_by: MemoryRef  # a memory line a later memory replaced


class StaleValue(TypedDict, total=False):
    """memory.answer_use: a value the reply named that a later memory replaced."""

    old: MemoryRef
    current: MemoryRef
    named: list[str]  # the old memory's values the reply names
    current_values: list[str]  # the current memory's values it does not


class AnswerUse(TypedDict, total=False):
    """memory.answer_use: whether the reply used its memory ({} for a reply without memory)."""

    checked: int  # the memory lines that reached the reply
    sources: list[AnswerSource]
    stale: list[StaleValue]


class TraceDict(TypedDict, total=False):
    """One reply's (or one session close's) trace as JSON: `memory.trace.Trace.to_dict()`."""

    strategy: str  # theanine | secom | none (a close: "close")
    memories: list[RetrievedMemory]
    timelines_raw: list[Timeline]
    timelines_refined: list[str]  # "" where a timeline went to the reply unrefined
    segments: list[Segment]
    llm_calls: list[LLMCallDict]
    timings: dict[str, float]  # seconds per step ("total", "first_token", "theanine_retrieve", ...)
    notices: list[str]
    counts: dict[str, int]  # the size of a step's work, e.g. {"relation_pairs": 12}
    answer_use: AnswerUse
    memory_path: str  # "llm" | "offline": whether LLM memory steps ran
    error: str | None  # a user-facing message, never a stack trace
    n_llm_calls: int
    tokens: int  # prompt and completion tokens of every call


class CloseReportDict(TypedDict, total=False):
    """A session close's report as stored with the session (sessions.lifecycle.report_dict)."""

    session_id: str
    already_built: bool
    new_memories: list[str]
    new_segments: list[str]
    trace: TraceDict
