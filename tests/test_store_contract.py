"""One contract for memory.protocols.VectorStore, run against the fake (tests/fakes.py MemoryStore) and the real
Chroma store (memory.store.ChromaStore, embedded): same calls, same answers. A fake that drifts fails here.

The protocol conformance of every fake and real part is checked by mypy (`conformance` below is typed, not run).
"""

from __future__ import annotations

import numpy as np
import pytest

from memory.agent import MemoryAgent
from memory.protocols import Agent, GraphStore, VectorStore
from memory.store import ChromaStore
from memory.theanine.graph import JsonGraphStore
from sessions.graph_store import SqlGraphStore
from tests.fakes import GatedAgent, MemoryStore, ScriptedAgent

KIND = "contract"


def conformance(
    real_agent: MemoryAgent,
    fake_agent: ScriptedAgent,
    gated: GatedAgent,
    chroma: ChromaStore,
    fake_store: MemoryStore,
    sql: SqlGraphStore,
    files: JsonGraphStore,
) -> tuple[list[Agent], list[VectorStore], list[GraphStore]]:
    """mypy refuses this function if a part or a fake does not implement its protocol."""
    return [real_agent, fake_agent, gated], [chroma, fake_store], [sql, files]


@pytest.fixture(params=["fake", "chroma"])
def store(request, tmp_path) -> VectorStore:
    return MemoryStore() if request.param == "fake" else ChromaStore(path=tmp_path / "chroma")


def vecs(*rows) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32)


def fill(store: VectorStore, user: str = "u") -> None:
    # b and a point the same way (a tie), c is orthogonal; c's metadata has every allowed value type.
    store.add(
        user,
        KIND,
        ["b", "a", "c"],
        ["doc b", "doc a", "doc c"],
        vecs([1, 0], [3, 0], [0, 2]),
        [{"s": "1"}, {"s": "1"}, {"s": "2", "n": 3, "f": 0.5, "t": True}],
    )


def ids(hits) -> list[str]:
    return [h.id for h in hits]


def test_records_come_back_as_stored_in_insertion_order(store):
    fill(store)
    got = store.get("u", KIND)
    assert ids(got) == ["b", "a", "c"] and all(h.score == 0.0 for h in got)
    assert [h.document for h in got] == ["doc b", "doc a", "doc c"]
    assert got[2].metadata == {"s": "2", "n": 3, "f": 0.5, "t": True}
    assert ids(store.get("u", KIND, ids=["c", "zz", "b"])) == ["b", "c"]  # stored order; a missing id is skipped
    assert store.get("u", KIND, ids=[]) == [] and store.count("u", KIND) == 3


def test_an_add_with_a_known_id_replaces_the_record_in_place(store):
    fill(store)
    store.add("u", KIND, ["a"], ["doc a, again"], vecs([0, 1]), [{"s": "2"}])
    assert ids(store.get("u", KIND)) == ["b", "a", "c"] and store.count("u", KIND) == 3
    assert store.get("u", KIND, ids=["a"])[0].document == "doc a, again"
    assert ids(store.get("u", KIND, where={"s": "2"})) == ["a", "c"]


def test_query_ranks_by_cosine_and_breaks_ties_by_id(store):
    fill(store)
    hits = store.query("u", KIND, np.array([2.0, 0.0]), 5)
    assert ids(hits) == ["a", "b", "c"]  # a and b tie at 1.0: by id, whatever the insertion order
    assert [round(h.score, 5) for h in hits] == [1.0, 1.0, 0.0]
    assert hits[2].document == "doc c" and hits[2].metadata["n"] == 3
    assert ids(store.query("u", KIND, np.array([1.0, 0.0]), 1)) == ["a"]
    assert store.query("u", KIND, np.array([1.0, 0.0]), 0) == []


def test_where_filters_query_get_and_delete_by_one_field(store):
    fill(store)
    assert ids(store.query("u", KIND, np.array([0.0, 1.0]), 5, where={"s": "1"})) == ["a", "b"]
    assert ids(store.get("u", KIND, where={"t": True})) == ["c"]
    assert store.get("u", KIND, where={"missing": "x"}) == []
    with pytest.raises(ValueError):
        store.get("u", KIND, where={"s": "1", "n": 3})  # two fields need Chroma's $and: refused by both
    store.delete("u", KIND, where={"s": "1"})
    assert ids(store.get("u", KIND)) == ["c"]


def test_delete_without_a_selection_deletes_nothing(store):
    fill(store)
    store.delete("u", KIND)
    store.delete("u", KIND, ids=None, where=None)
    store.delete("u", KIND, ids=[])
    store.delete("u", KIND, ids=[], where={"s": "1"})  # an empty id list selects nothing, whatever the filter
    store.delete("u", KIND, ids=["zz"])
    assert store.count("u", KIND) == 3
    store.delete("u", KIND, ids=["a", "c"], where={"s": "1"})  # both must hold
    assert ids(store.get("u", KIND)) == ["b", "c"]
    store.delete("u", KIND, ids=["b"])
    assert ids(store.get("u", KIND)) == ["c"]


def test_each_user_sees_only_their_own_records(store):
    fill(store, "alice")
    store.add("bob", KIND, ["a"], ["bob's a"], vecs([1, 0]), [{"s": "1"}])
    assert ids(store.get("bob", KIND)) == ["a"] and store.get("bob", KIND)[0].document == "bob's a"
    assert ids(store.query("bob", KIND, np.array([1.0, 0.0]), 10)) == ["a"]
    assert store.get("carol", KIND) == [] and store.query("carol", KIND, np.array([1.0, 0.0]), 3) == []
    assert store.count("carol", KIND) == 0
    store.delete("carol", KIND, where={"s": "1"})  # a user without records: nothing happens
    store.delete("bob", KIND, where={"s": "1"})
    assert store.count("bob", KIND) == 0 and store.count("alice", KIND) == 3
    store.drop_user("alice", (KIND,))
    store.drop_user("alice", (KIND,))  # twice: nothing left, no error
    assert store.count("alice", KIND) == 0 and store.get("alice", KIND) == []
    store.add("alice", KIND, ["z"], ["new"], vecs([1, 1]), [{"s": "3"}])  # a dropped user starts again
    assert ids(store.get("alice", KIND)) == ["z"]
