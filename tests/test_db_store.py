"""The relational store on SQLite and on a real PostgreSQL: sessions, migrations, the graph store,
the cross-process close claim and the migration of an existing data directory."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid

import pytest
import sqlalchemy as sa

from memory.design import Forgetting
from memory.llm import LLMSession
from memory.locks import UserLocks
from memory.records import SessionRecord, Turn
from memory.settings import Options
from memory.theanine.graph import JsonGraphStore, Memory, MemoryGraph
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace
from memory.userspace import user_key
from sessions import migrations
from sessions.graph_store import SqlGraphStore
from sessions.store import Store, open_store
from tests.claim_waits import wait_for_a_claim_waiter
from tests.fakes import ScriptedLLM
from tests.pg_server import postgres, unavailable_reason

UID = "user_" + "a" * 24
OTHER = "user_" + "b" * 24


@pytest.fixture(scope="module")
def pg_url():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with postgres(fsync=False) as url:
        yield url


def fresh_pg_db(pg_url: str) -> str:
    """A new empty database on the test server (each test starts from nothing)."""
    name = "t" + uuid.uuid4().hex[:12]
    eng = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    eng.dispose()
    return pg_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return Store(tmp_path / "sessions.sqlite3")
    return Store(url=fresh_pg_db(request.getfixturevalue("pg_url")), lock_dir=tmp_path / "locks")


def test_sessions_messages_and_isolation(store):
    s = store.open_session(UID, "2023-05-08")
    assert (s.session_id, s.seq, s.status) == ("s1", 1, "open")
    mid = store.add_user_message(UID, "s1", "I adopted a puppy named Rex.")
    rid = store.add_reply(UID, "s1", mid, "Congratulations!", "theanine", {"tokens": 3})
    assert rid > mid and store.reply_to(UID, mid).trace == {"tokens": 3}
    assert store.end_open_session(UID, "s1", "2023-05-15") == "s2"
    assert store.end_open_session(UID, "s1", "2023-05-15") is None  # a second end: no-op
    assert store.add_user_message(UID, "s1", "late") is None  # not the open session any more
    assert [(r.session_id, r.status, r.n_messages) for r in store.sessions(UID)] == [
        ("s1", "closing", 2),
        ("s2", "open", 0),
    ]
    assert store.users_with_pending_closes() == [user_key(UID)]  # stored by key, not by id
    ids = store.add_imported_sessions(UID, [("2023-01-01", [("user", "Caroline", "Hi"), ("assistant", "Mel", "Yo")])])
    assert ids == ["s2"] and store.open_session(UID, "x").session_id == "s3"  # the empty open one moved after
    store.mark_closed(UID, "s1", {"new_memories": ["s1:m0"]})
    assert store.session(UID, "s1").report == {"new_memories": ["s1:m0"]}
    store.set_prefs(UID, {"strategy": "secom"})
    assert store.get_prefs(UID) == {"strategy": "secom"} and store.get_prefs(OTHER) == {}
    assert store.messages(OTHER, "s1") == [] and store.message(OTHER, mid) is None
    assert store.add_compare(UID, "s2", "m", {"a": 1}) > 0 and store.compares(UID)[0]["results"] == {"a": 1}
    store.delete_user(UID)
    assert not store.user_exists(UID) and store.sessions(UID) == []


def test_concurrent_writers_number_sessions_without_gaps_or_duplicates(store):
    store.open_session(UID, "2023-05-08")
    errors = []

    def end_and_import(i):
        try:
            store.add_imported_sessions(UID, [(f"2023-01-{i + 1:02d}", [("user", "u", f"turn {i}")])])
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=end_and_import, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    seqs = [r.seq for r in store.sessions(UID)]
    assert seqs == list(range(1, 10))


def test_migrations_are_numbered_and_run_once(store):
    assert migrations.version(store.engine) == migrations.LATEST
    assert migrations.upgrade(store.engine) == []  # a second start: nothing to do
    with store.engine.connect() as c:
        rows = c.exec_driver_sql("SELECT version FROM schema_version ORDER BY version").scalars().all()
    assert rows == [v for v, _, _ in migrations.MIGRATIONS]


def test_close_claim_serialises_two_holders(store):
    """Two claimants of one user's closes (as two replicas would be): the second waits for the first."""
    order, first_in = [], threading.Event()
    release = threading.Event()

    def first():
        with store.close_claim(UID):
            order.append("first in")
            first_in.set()
            release.wait(30)
            order.append("first out")

    def second():
        first_in.wait(30)
        with store.close_claim(UID):
            order.append("second in")

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    b.start()
    first_in.wait(30)
    # The second is blocked on the claim: it cannot get in while the first holds it.
    wait_for_a_claim_waiter(UID, engine=store.engine if store.postgres else None, lock_dir=store.lock_dir)
    assert order == ["first in"]
    release.set()
    a.join(30)
    b.join(30)
    assert order == ["first in", "first out", "second in"]
    with store.close_claim(OTHER):  # another user's claim is independent
        pass


def part(sid, *events, edges=()):
    return {
        "version": 2,
        "session_id": sid,
        "edges": [list(e) for e in edges],
        "memories": [
            {
                "id": f"{sid}:m{i}",
                "event": e,
                "time": "2023-05-08",
                "session_id": sid,
                "ts": "2023-05-08",
                "seq": int(sid[1:]) * 10 + i,
                "turns": [f"{sid}:{i}"],
                "speaker": "user",
            }
            for i, e in enumerate(events)
        ],
    }


def test_graph_store_saves_parts_atomically_and_versions(store):
    gs = SqlGraphStore(store.engine)
    assert gs.load(UID) == ([], 0)
    v1 = gs.save(UID, [part("s1", "adopted a puppy", "named it Rex")], new_session="s1")
    assert v1 == 1 and gs.version(UID) == 1
    assert gs.save(UID, [part("s1", "a second build")], new_session="s1") is None  # already built: unchanged
    v2 = gs.save(UID, [part("s2", "Rex chewed shoes", edges=[("s1:m1", "s2:m0", "Cause")])], new_session="s2")
    parts, version = gs.load(UID)
    g = MemoryGraph.from_sessions(parts)
    assert version == v2 == 2 and g.built_sessions == {"s1", "s2"} and len(g) == 3
    assert g.g.edges["s1:m1", "s2:m0"]["relation"] == "Cause"
    assert gs.load(OTHER) == ([], 0)
    gs.drop(UID)
    assert gs.load(UID)[0] == [] and gs.version(UID) > v2  # never back to an old version number


def sess(sid, date, *texts):
    return SessionRecord(sid, date, [Turn("user", t, f"{sid}:{i}") for i, t in enumerate(texts)])


def summaries(messages):
    prompt = messages[-1]["content"]
    if "relation of B to A" in prompt:  # one pair per call
        return json.dumps({"relation": "Cause"})
    first = next(line for line in prompt.splitlines() if line.startswith("[0] "))
    return json.dumps({"memories": [{"speaker": "user", "event": first[9:], "turns": [0]}]})


def test_a_replica_sees_the_graph_another_wrote(store, chroma_store, fake_embedder, tmp_path):
    """Two TheanineMemory objects on one database (two replicas): B's cached graph reloads after A builds."""
    a = TheanineMemory(chroma_store, fake_embedder, tmp_path / "a", UserLocks(), graphs=SqlGraphStore(store.engine))
    b = TheanineMemory(chroma_store, fake_embedder, tmp_path / "b", UserLocks(), graphs=SqlGraphStore(store.engine))
    opts, llm = Options(), LLMSession(ScriptedLLM(summaries), Trace("close"))
    assert a.build(UID, sess("s1", "2023-05-01", "I adopted a puppy named Biscuit"), llm, opts, Trace("close"))
    assert len(b.graph(UID)) == 1  # B caches the graph now
    assert a.build(UID, sess("s2", "2023-05-08", "My puppy Biscuit chewed my shoes"), llm, opts, Trace("close"))
    assert b.graph(UID).built_sessions == {"s1", "s2"}  # reloaded: the version changed
    assert b.build(UID, sess("s2", "2023-05-08", "x"), llm, opts, Trace("close")) is None  # built once
    assert b.forget(UID, Forgetting("s1:m0"))["removed"] and "s1:m0" not in a.graph(UID)
    assert not list(tmp_path.glob("*/users/*/theanine_graph"))  # no JSON files with a database store


# --- migration of an existing data directory ------------------------------------------------

LEGACY_SCHEMA = migrations.V1.format(id="INTEGER PRIMARY KEY AUTOINCREMENT", float="REAL")


def legacy_data_dir(root):
    """A data dir as the app wrote it before the database store: sessions.sqlite3 + JSON graph files."""
    db = sqlite3.connect(root / "sessions.sqlite3")
    db.executescript(LEGACY_SCHEMA.replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS "))
    db.execute("INSERT INTO users VALUES (?, 1.0, ?)", (UID, json.dumps({"strategy": "secom"})))
    db.execute(
        "INSERT INTO sessions (user_id, session_id, seq, date, status, source, created_at, report) "
        "VALUES (?, 's1', 1, '2023-05-08', 'closed', 'chat', 1.0, '{}')",
        (UID,),
    )
    db.execute(
        "INSERT INTO sessions (user_id, session_id, seq, date, status, source, created_at) "
        "VALUES (?, 's2', 2, '2023-05-15', 'open', 'chat', 2.0)",
        (UID,),
    )
    for i, (role, text) in enumerate([("user", "I adopted a puppy named Rex."), ("assistant", "Lovely!")]):
        db.execute(
            "INSERT INTO messages (user_id, session_id, role, speaker, text, created_at) VALUES (?, 's1', ?, ?, ?, ?)",
            (UID, role, role, text, float(i)),
        )
    db.commit()
    db.close()
    g = MemoryGraph()
    g.add_memory(Memory("s1:m0", "The user adopted a puppy named Rex", "2023-05-08", "s1", "2023-05-08"))
    g.add_memory(Memory("s1:m1", "The puppy is called Rex", "2023-05-08", "s1", "2023-05-08"))
    g.link("s1:m0", "s1:m1", "SameTopic")
    g.built_sessions.add("s1")
    JsonGraphStore(root).save(UID, [g.session_dict("s1")])
    return g.to_dict()


def test_existing_data_dir_is_migrated_on_first_start_nothing_lost(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    before = legacy_data_dir(data)
    store = open_store(data)
    moved = SqlGraphStore(store.engine).import_json_folders(data)
    assert moved == {user_key(UID): 1}
    assert migrations.version(store.engine) == migrations.LATEST
    assert [m.text for m in store.messages(UID, "s1")] == ["I adopted a puppy named Rex.", "Lovely!"]
    assert store.get_prefs(UID) == {"strategy": "secom"} and store.open_session(UID, "x").session_id == "s2"
    parts, _ = SqlGraphStore(store.engine).load(UID)
    assert MemoryGraph.from_sessions(parts).to_dict() == before
    assert list(data.glob("users/*/theanine_graph.imported/*.json"))  # the files are kept, renamed
    assert SqlGraphStore(store.engine).import_json_folders(data) == {}  # a second start: nothing to move
    assert (store.add_user_message(UID, "s2", "still works") or 0) > 2


def test_existing_data_dir_is_copied_into_postgres(tmp_path, pg_url):
    data = tmp_path / "data"
    data.mkdir()
    before = legacy_data_dir(data)
    url = fresh_pg_db(pg_url)
    store = open_store(data, url)
    SqlGraphStore(store.engine).import_json_folders(data)
    assert store.postgres and next(m.text for m in store.messages(UID, "s1")) == "I adopted a puppy named Rex."
    assert (data / "sessions.sqlite3.migrated").exists() and not (data / "sessions.sqlite3").exists()
    assert MemoryGraph.from_sessions(SqlGraphStore(store.engine).load(UID)[0]).to_dict() == before
    assert (store.add_user_message(UID, "s2", "new") or 0) > 2  # identity moved past the copied ids
    assert migrations.copy_sqlite_into(Store(data / "sessions.sqlite3.migrated"), Store(url=url)) is None  # never twice


def test_secom_bm25_of_a_replica_is_rebuilt_when_another_wrote(store, chroma_store, fake_embedder):
    """Two SecomMemory objects (two replicas) on one Chroma and one database: B's cached BM25 index
    sees the segments A adds afterwards (the shared counter changed)."""
    from memory.secom.embedding_segmenter import EmbeddingSegmenter
    from memory.secom.strategy import SecomMemory
    from sessions.db import MemoryVersions

    a, b = (SecomMemory(chroma_store, fake_embedder, None, "", EmbeddingSegmenter(fake_embedder)) for _ in "ab")
    for m in (a, b):
        m.use_versions(MemoryVersions(store.engine))
    opts = Options(strategy="secom", retriever="bm25")
    one = SessionRecord(
        "s1",
        "2023-05-01",
        [
            Turn("user", "I planted tomatoes in the garden", "s1:0"),
            Turn("assistant", "Nice, tomatoes need sun", "s1:1"),
        ],
    )
    two = SessionRecord(
        "s2",
        "2023-05-08",
        [Turn("user", "My violin lesson moved to Tuesday", "s2:0"), Turn("assistant", "Practice the scales", "s2:1")],
    )
    a.build(UID, one, None, opts, Trace("close"))
    assert {s["session_id"] for s in b.retrieve(UID, "tomatoes in the garden", opts, Trace("secom"))} == {"s1"}
    assert b.retrieve(UID, "violin lesson Tuesday", opts, Trace("secom")) == []  # B's index is cached now
    a.build(UID, two, None, opts, Trace("close"))
    assert "s2" in {s["session_id"] for s in b.retrieve(UID, "violin lesson Tuesday", opts, Trace("secom"))}


def test_migrate_command_prints_what_moved(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    data = tmp_path / "data"
    data.mkdir()
    legacy_data_dir(data)
    env = {k: v for k, v in __import__("os").environ.items() if k != "DATABASE_URL"}
    out = subprocess.run(
        [sys.executable, "-m", "sessions", "migrate", str(data)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    assert f"schema version {migrations.LATEST}" in out.stdout
    assert "1 session part(s) moved from JSON into the database" in out.stdout
    assert "messages=2" in out.stdout and "theanine_graph.imported" in out.stdout
