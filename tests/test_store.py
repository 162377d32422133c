"""The Chroma store, embedded and as a real `chroma run` server: user scoping and outages."""

import numpy as np
import pytest

from memory.errors import StoreUnavailable
from memory.store import ChromaStore, collection_name
from tests.servers import chroma_cmd, free_port, running


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def exercise(store: ChromaStore):
    store.add(
        "alice",
        "k",
        ["a1", "a2"],
        ["cats", "dogs"],
        np.stack([unit(1, 0, 0), unit(0, 1, 0)]),
        [{"session_id": "s1"}, {"session_id": "s2"}],
    )
    store.add("bob", "k", ["b1"], ["bob's cat"], np.stack([unit(1, 0, 0)]), [{"session_id": "s1"}])
    hits = store.query("alice", "k", unit(1, 0.1, 0), 5)
    assert [h.id for h in hits] == ["a1", "a2"] and hits[0].score > 0.9
    assert [h.id for h in store.query("bob", "k", unit(0, 1, 0), 5)] == ["b1"]  # never alice's
    assert store.query("carol", "k", unit(1, 0, 0), 5) == []
    assert [h.id for h in store.query("alice", "k", unit(1, 0, 0), 5, where={"session_id": {"$ne": "s1"}})] == ["a2"]
    store.delete("alice", "k", where={"session_id": "s1"})
    assert store.count("alice", "k") == 1 and store.count("bob", "k") == 1
    store.drop_user("alice", ("k",))
    assert store.count("alice", "k") == 0 and store.count("bob", "k") == 1


def test_embedded_store_scopes_every_query_to_its_user(tmp_path):
    exercise(ChromaStore(path=tmp_path / "c"))
    # and the data survives a reopen
    s = ChromaStore(path=tmp_path / "c")
    assert s.count("bob", "k") == 1


def test_collection_names_are_valid_and_distinct():
    names = {collection_name(u, "theanine_memories") for u in ["a", "A", "../../etc", "x" * 500, "é"]}
    assert len(names) == 5
    assert all(3 <= len(n) <= 512 and all(c.isalnum() or c in "._-" for c in n) for n in names)


@pytest.mark.slow
def test_chroma_server_mode_and_outage(tmp_path):
    port = free_port()
    cmd = chroma_cmd(tmp_path / "srv", port)
    url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
    with running(cmd, url, log=tmp_path / "chroma.log"):
        store = ChromaStore(host="127.0.0.1", port=port)
        exercise(store)
    # the server is down: a clear error, not a hang or a stack of library internals
    with pytest.raises(StoreUnavailable, match="cannot be reached"):
        store.query("bob", "k", unit(1, 0, 0), 3)
    with running(cmd, url, log=tmp_path / "chroma2.log"):
        assert [h.id for h in store.query("bob", "k", unit(1, 0, 0), 3)] == ["b1"]  # work resumes
