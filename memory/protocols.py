"""The interfaces between the parts: what the session layer needs of an agent, and what the memories
need of their stores. The real parts (memory.agent.MemoryAgent, memory.store.ChromaStore,
memory.theanine.graph.JsonGraphStore, sessions.graph_store.SqlGraphStore) and the test fakes
(tests/fakes.py) implement them; mypy checks both sides, and tests/test_store_contract.py runs the
same store contract against the fake and the real store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .records import CloseReport, Progress, ReplyEvent, SessionRecord, Turn

if TYPE_CHECKING:  # types only
    from .locks import UserLocks
    from .settings import LLMConfig, Options
    from .store import Hit


class VectorStore(Protocol):
    """Records (id, document, embedding, flat metadata) in one collection per (user, kind).

    A user's calls never see another user's records. `where` is one equality, {"field": value}.
    """

    def add(
        self, user_id: str, kind: str, ids: list[str], docs: list[str], vecs: np.ndarray, metas: list[dict]
    ) -> None:
        """Insert, or replace the records with these ids."""

    def query(self, user_id: str, kind: str, embedding: np.ndarray, n: int, where: dict | None = None) -> list[Hit]:
        """The n records most similar (cosine) to `embedding`, best first, equal scores by id."""

    def get(self, user_id: str, kind: str, ids: list[str] | None = None, where: dict | None = None) -> list[Hit]:
        """The records with these ids (None: all) that match `where`; scores are 0.0."""

    def delete(self, user_id: str, kind: str, ids: list[str] | None = None, where: dict | None = None) -> None:
        """Delete the records with these ids and/or matching `where`; with neither, nothing is deleted."""

    def count(self, user_id: str, kind: str) -> int: ...

    def drop_user(self, user_id: str, kinds: tuple[str, ...]) -> None:
        """Every record of the user in these kinds."""


class GraphStore(Protocol):
    """Where the per-session parts of each user's THEANINE graph live (`MemoryGraph.session_dict`)."""

    def version(self, user_id: str) -> int:
        """Changes whenever the user's graph changes (in any process sharing the store)."""

    def load(self, user_id: str) -> tuple[list[dict], int]:
        """Every stored part and the version they are at."""

    def save(self, user_id: str, parts: list[dict], new_session: str | None = None) -> int | None:
        """Replace these sessions' parts, all in one transaction; returns the new version.

        With `new_session` (a close): returns None and changes nothing if that session is
        already built (another process built it first).
        """

    def drop(self, user_id: str) -> None:
        """Everything of this user."""


class Versions(Protocol):
    """A per-user, per-kind counter every process bumps after it changed that kind of memory."""

    def version(self, user_id: str, kind: str) -> int: ...

    def bump(self, user_id: str, kind: str) -> int: ...


@runtime_checkable
class ReadsAhead(Protocol):
    """An agent that can read a reply's prompt ahead while the person types (MemoryAgent.prepare); the
    session layer asks only an agent that can."""

    def prepare(
        self, user_id: str, history: list[Turn], draft: str, date: str, options: Options, llm: LLMConfig | None
    ) -> int:
        """Read ahead for `draft` (nothing stored); the tokens read."""


class Agent(Protocol):
    """What the session layer (sessions/) asks of the memory agent. `locks`: the process's one owner of
    per-user exclusion; the session layer's lanes are its first level."""

    locks: UserLocks

    def reply(
        self, user_id: str, history: list[Turn], message: str, date: str, options: Options, llm: LLMConfig | None
    ) -> Iterator[ReplyEvent]:
        """Stream a reply: "status" and "delta" events, then one "done" (its trace says if it failed)."""

    def close_session(
        self, user_id: str, session: SessionRecord, options: Options, progress: Progress, llm: LLMConfig | None
    ) -> CloseReport:
        """Build both memories from one session; idempotent per session id. Raises LLMError / StoreUnavailable."""

    def use_graph_store(self, graphs: GraphStore, versions: Versions | None = None) -> None:
        """Keep the graphs in `graphs` (the app's database, shared by replicas) from now on."""

    def graph_view(self, user_id: str) -> dict:
        """{"nodes": [...], "edges": [...]} of the user's THEANINE graph."""

    def export_user(self, user_id: str) -> dict:
        """{"theanine_graph": ..., "secom_segments": [...]}."""

    def forget_memory(
        self, user_id: str, memory_id: str, session_of: Callable[[str], SessionRecord | None]
    ) -> dict | None:
        """Delete a memory from every representation; what was removed, or None if it does not exist."""

    def forget_user(self, user_id: str) -> None: ...
