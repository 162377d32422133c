"""What a memory design is to the agent. `MemoryDesign`: the operations THEANINE (memory/theanine) and
SeCom (memory/secom) both implement under the same names; `MemoryClients`: the shared parts every design
is built from, made once and passed whole; `RecallRequest` / `Recalled`: what a reply asks of a design
and gets back. memory/registry.py names the designs the agent can pick.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .tokens import count_tokens

if TYPE_CHECKING:  # types only
    from .embeddings import Embedder
    from .llm import LLM, LLMSession
    from .locks import UserLocks
    from .protocols import GraphStore, VectorStore, Versions
    from .records import ReplyEvent, SessionRecord, Turn
    from .settings import LLMConfig, Options
    from .steps_policy import StepPlan
    from .trace import Trace


@dataclass(frozen=True)
class MemoryClients:
    """The parts every design shares: the vector store, the embedder, where THEANINE's graphs live,
    the per-user versions replicas bump (None: one process), the one owner of per-user locks and the
    LLM factory (a scripted LLM in benchmarks and tests)."""

    store: VectorStore
    embedder: Embedder
    graphs: GraphStore
    locks: UserLocks
    llm_factory: Callable[[LLMConfig], LLM]
    versions: Versions | None = None


# At most three timelines are refined per reply, as the official code does (one per top-3 retrieved
# memory): refining every timeline that reached the reply made 26.5 calls per reply (max 32) at the
# app's options, 3 make 3 (`python -m bench refinecalls`, docs/memory.md "Refinement").
REFINE_TIMELINES = 3


@dataclass(frozen=True)
class RefinePlan:
    """How a reply refines its THEANINE timelines (Phase II-2): the `first` timelines that reached the
    reply (None = every one), one call each, `workers` calls at once (an endpoint serves them in
    parallel), `per_timeline` answer tokens each, reading the open session's last `turns` turns (None =
    every turn the reply holds: memory.agent.recent_history)."""

    first: int | None = REFINE_TIMELINES
    workers: int = 1
    per_timeline: int = 120
    turns: int | None = None


# MiniLM reads a text's first 256 word pieces and drops the rest; a retrieval query is kept within
# this many tokens (cl100k; English text takes a few more word pieces than cl100k tokens) so that
# the message is always read, whatever the order of the turns beside it.
QUERY_WINDOW_TOKENS = 180


def retrieval_query(history: list[Turn], message: str, opts: Options) -> str:
    """What both memories are searched with: the new message alone (`opts.query_turns` 0, the default),
    or with the last `query_turns` turns, in time order (the message last, as the paper's dialogue) or
    the message first and the turns newest first (`query_order`). The oldest turns are dropped until
    the query fits QUERY_WINDOW_TOKENS, so the embedder never loses the message (docs/defaults.md)."""
    turns = history[-opts.query_turns :] if opts.query_turns else []
    lines = [f"{t.speaker}: {t.text}" for t in turns]
    mine = f"user: {message}" if lines else message
    budget = QUERY_WINDOW_TOKENS - count_tokens(mine)
    kept: list[str] = []
    for line in reversed(lines):  # newest first, while they fit
        n = count_tokens(line) + 1
        if n > budget:
            break
        kept.append(line)
        budget -= n
    if not kept:
        return message
    return "\n".join([mine, *kept] if opts.query_order == "message-first" else [*kept[::-1], mine])


@dataclass(frozen=True)
class RecallRequest:
    """What a reply asks of a design: the dialogue so far and the new message; `sessions` limits the
    memory to those sessions (as it stood then; None: all of it); `llm` None skips any LLM step at reply
    time, else `refine` says how; `timelines` False asks for the retrieved memories alone, without what a
    design grows around them (THEANINE's timelines: a benchmark ablation)."""

    history: list[Turn]
    message: str
    sessions: set[str] | None = None
    llm: LLMSession | None = None
    refine: RefinePlan = RefinePlan()
    timelines: bool = True

    def query(self, options: Options) -> str:
        return retrieval_query(self.history, self.message, options)


@dataclass
class Recalled:
    """The memory a reply reads: one line per retrieved item; `covers[i]` the turn ids line i carries
    whole; `note` a notice for the user about how it was read ("" none)."""

    lines: list[str]
    covers: list[tuple[str, ...]]
    note: str = ""


@dataclass(frozen=True)
class Forgetting:
    """One memory the user deletes: its id (where a design holds it by id) and the turns it was made
    from (where a design holds the turns themselves)."""

    memory_id: str = ""
    turns: tuple[str, ...] = ()


SessionOf = Callable[[str], "SessionRecord | None"]  # a session's transcript by id, None when gone
Recall = Generator["ReplyEvent", None, Recalled]  # status events, then what the reply reads


class MemoryDesign(Protocol):
    """A long-term memory of every user, built at each session close and read at each reply.

    `export_key` names the design's part of a user's export ("theanine_graph", "secom_segments")."""

    export_key: str

    def use_clients(self, clients: MemoryClients) -> None:
        """Keep the bundle's shared graph store and versions from now on (the app's database)."""

    def build_step(self, plan: StepPlan) -> tuple[bool, str]:
        """Whether this design's build gets the close's LLM under `plan`, and the progress line shown."""

    def build(
        self, user_id: str, session: SessionRecord, llm: LLMSession | None, options: Options, trace: Trace, /
    ) -> list[str] | None:
        """Close `session` into the user's memory: the new ids, or None when it was built already."""

    def retrieve(
        self, user_id: str, query: str, options: Options, trace: Trace, /, *, sessions: set[str] | None = None
    ) -> Sequence[Mapping[str, object]]:
        """The design's own retrieved items for `query` (timelines, segments), filling the trace."""

    def recall(self, user_id: str, options: Options, trace: Trace, ask: RecallRequest) -> Recall:
        """Retrieve (and whatever the design does at reply time) for one reply."""

    def forget(
        self, user_id: str, memory: Forgetting, session_of: SessionOf, options: Options | None = None, /
    ) -> dict[str, Any]:
        """Take one memory out of this design's representation; what was removed."""

    def drop_user(self, user_id: str) -> None:
        """Everything of this user."""

    def export(self, user_id: str) -> dict[str, Any] | list[dict[str, Any]]:
        """The user's memory as JSON-ready data."""

    def view(self, user_id: str) -> dict[str, Any]:
        """The user's memory as the page draws it (THEANINE's graph, SeCom's segments)."""
