"""Damage stays local: one corrupt stored JSON value costs that item only, is quarantined (kept,
flagged, left out), named to its owner, and can be rebuilt or dropped; `python -m sessions check`
finds and repairs it. Store-level tests run on SQLite and on a real PostgreSQL server; the fault
table runs the real service stack (MiniLM, embedded Chroma, SQLite, the scripted LLM server).
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from memory.userspace import user_key
from sessions import damage, db
from sessions.__main__ import main as cli
from sessions.graph_store import SqlGraphStore
from sessions.store import Store
from tests.fault_table import CORRUPTIONS, run_case
from tests.test_db_store import fresh_pg_db, pg_url  # noqa: F401  (the PostgreSQL fixture)

UID = "user_" + "d" * 24
OTHER = "user_" + "e" * 24


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return Store(tmp_path / "sessions.sqlite3")
    return Store(url=fresh_pg_db(request.getfixturevalue("pg_url")), lock_dir=tmp_path / "locks")


def corrupt(store: Store, sql: str, **params) -> None:
    with store.engine.begin() as c:
        assert c.execute(sa.text(sql), params).rowcount == 1


@pytest.mark.parametrize(
    "table,column,text",
    [
        ("messages", "trace", "{broken"),
        ("messages", "trace", "[1, 2]"),  # JSON, wrong shape
        ("sessions", "report", "nul"),
        ("users", "prefs", '"a string"'),
        ("users", "prefs", None),  # NOT NULL column
        ("compares", "results", "{"),
        ("graph_memories", "turns", '{"a": 1}'),
        ("graph_memories", "turns", "[1, 2]"),  # turn ids are strings
        ("graph_memories", "turns", "[" * 100_000),  # deeper than the parser goes
    ],
)
def test_the_checked_reader_calls_bad_values_damaged(table, column, text):
    value, bad = db.read_json(table, column, text)
    assert bad and value == db.COLUMNS[(table, column)].empty


def test_the_checked_reader_passes_good_values():
    assert db.read_json("messages", "trace", None) == (None, False)  # no trace: not damage
    assert db.read_json("messages", "trace", '{"a": 1}') == ({"a": 1}, False)
    assert db.read_json("graph_memories", "turns", '["s1:1"]') == (["s1:1"], False)
    assert db.read_json("users", "prefs", "{}") == ({}, False)


def _chat(store: Store, uid: str) -> list[int]:
    s = store.open_session(uid, "2023-05-08")
    ids = []
    for i in range(3):
        m = store.add_user_message(uid, s.session_id, f"message {i}")
        assert m is not None
        ids.append(store.add_reply(uid, s.session_id, m, f"reply {i}", "theanine", {"tokens": i}))
    return ids


def test_a_corrupt_trace_costs_that_trace_only_and_is_quarantined(store):
    ids = _chat(store, UID)
    _chat(store, OTHER)
    corrupt(store, "UPDATE messages SET trace='{broken' WHERE id=:i", i=ids[1])
    rows = store.messages(UID, "s1")
    assert [m.text for m in rows] == ["message 0", "reply 0", "message 1", "reply 1", "message 2", "reply 2"]
    bad = next(m for m in rows if m.id == ids[1])
    assert bad.trace is None and bad.damaged == "trace"
    assert [m.trace for m in rows if m.role == "assistant" and m.id != ids[1]] == [{"tokens": 0}, {"tokens": 2}]
    assert store.last_reply(UID).trace == {"tokens": 2}
    [d] = damage.items(store.engine, user_key(UID))
    assert (d.table, d.row_key, d.column, d.session_id, d.raw) == ("messages", str(ids[1]), "trace", "s1", "{broken")
    assert damage.items(store.engine, user_key(OTHER)) == []  # another user sees nothing of it
    store.delete_user(UID)  # Forget me takes the quarantine rows too
    assert damage.items(store.engine, user_key(UID)) == []


def test_corrupt_settings_report_and_compare_are_left_out(store):
    _chat(store, UID)
    store.set_prefs(UID, {"strategy": "secom"})
    store.add_compare(UID, "s1", "q1", {"theanine": {"text": "a"}})
    store.add_compare(UID, "s1", "q2", {"theanine": {"text": "b"}})
    corrupt(store, "UPDATE users SET prefs='nul' WHERE user_id=:u", u=user_key(UID))
    corrupt(store, "UPDATE sessions SET report='[1,' WHERE user_id=:u", u=user_key(UID))
    corrupt(store, "UPDATE compares SET results='{' WHERE message='q1'")
    assert store.get_prefs(UID) == {}
    assert store.session(UID, "s1").damaged == "report" and store.session(UID, "s1").report is None
    assert [c["message"] for c in store.compares(UID)] == ["q2"]
    kinds = {d.table for d in damage.items(store.engine, user_key(UID))}
    assert kinds == {"users", "sessions", "compares"}
    store.set_prefs(UID, {"strategy": "none"})  # saving settings again replaces the damaged ones
    assert {d.table for d in damage.items(store.engine, user_key(UID))} == {"sessions", "compares"}


def _graph(graphs: SqlGraphStore, uid: str) -> None:
    def mem(i, sid):
        return {"id": f"{sid}:m{i}", "event": f"event {sid} {i}", "session_id": sid, "seq": i + 1, "turns": [f"t{i}"]}

    graphs.save(uid, [{"session_id": "s1", "memories": [mem(0, "s1"), mem(1, "s1")], "edges": []}])
    graphs.save(
        uid,
        [
            {
                "session_id": "s2",
                "memories": [mem(2, "s2")],
                "edges": [["s1:m0", "s2:m2", "Cause"], ["s1:m1", "s2:m2", "React"]],
            }
        ],
    )


def test_a_corrupt_memory_is_left_out_with_its_edges_and_survives_a_rewrite_of_its_session(store):
    graphs = SqlGraphStore(store.engine)
    _graph(graphs, UID)
    corrupt(store, "UPDATE graph_memories SET turns='{not json' WHERE memory_id='s1:m0'")
    parts, _ = graphs.load(UID)
    by = {p["session_id"]: p for p in parts}
    assert [m["id"] for m in by["s1"]["memories"]] == ["s1:m1"]
    assert by["s2"]["edges"] == [["s1:m1", "s2:m2", "React"]]
    [d] = damage.items(store.engine, user_key(UID))
    assert (d.table, d.row_key, d.session_id) == ("graph_memories", "s1:m0", "s1")
    # A later save of the session (e.g. another of its memories deleted) keeps the damaged row.
    graphs.save(UID, [{"session_id": "s1", "memories": [], "edges": []}])
    with store.engine.connect() as c:
        kept = c.execute(sa.text("SELECT turns FROM graph_memories WHERE memory_id='s1:m0'")).scalar()
    assert kept == "{not json"


def test_check_reports_then_repairs_on_both_databases(store):
    ids = _chat(store, UID)
    graphs = SqlGraphStore(store.engine)
    _graph(graphs, UID)
    with store.engine.begin() as c:  # s1 closed (its memory is the graph's s1 part)
        c.execute(sa.text("UPDATE sessions SET status='closed' WHERE session_id='s1'"))
    corrupt(store, "UPDATE messages SET trace='{broken' WHERE id=:i", i=ids[0])
    corrupt(store, "UPDATE graph_memories SET turns='{not json' WHERE memory_id='s1:m0'")
    rep = damage.scan(store.engine)
    assert {(f.damage.table, f.damage.row_key) for f in rep.findings} == {
        ("messages", str(ids[0])),
        ("graph_memories", "s1:m0"),
    }
    assert rep.scanned["messages.trace"] == 6 and rep.scanned["graph_memories.turns"] == 3
    assert "DAMAGED graph_memories.turns row s1:m0 (session s1)" in damage.render(rep)
    damage.repair_all(store.engine, graphs, rep)
    assert damage.scan(store.engine).findings == []
    assert damage.items(store.engine, user_key(UID)) == []
    assert store.message(UID, ids[0]).trace is None and store.message(UID, ids[0]).text == "reply 0"
    # The memory's session is unbuilt and waits for its build (the app's start or next End session).
    assert store.session(UID, "s1").status == "closing" and user_key(UID) in store.users_with_pending_closes()
    assert {p["session_id"] for p in graphs.load(UID)[0]} == {"s2"}


def test_check_command_exit_status(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    store = Store(tmp_path / "sessions.sqlite3")
    ids = _chat(store, UID)
    assert cli(["check", "--data-dir", str(tmp_path)]) == 0
    assert "No damaged stored values." in capsys.readouterr().out
    corrupt(store, "UPDATE messages SET trace='{broken' WHERE id=:i", i=ids[2])
    assert cli(["check", "--data-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "integrity_check: ok" in out and f"DAMAGED messages.trace row {ids[2]}" in out and "{broken" not in out
    assert cli(["check", "--data-dir", str(tmp_path), "--repair"]) == 0
    assert "trace dropped" in capsys.readouterr().out
    assert cli(["check", "--data-dir", str(tmp_path)]) == 0


# --- the real stack: the fault table's cases -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("column", list(CORRUPTIONS))
def test_one_corrupt_row_leaves_everything_else_working(tmp_path, llm_server, column):
    r = run_case(column, tmp_path / "data", llm_server)
    for what in ("page load", "history", "export", "send", "graph", "compares", "end session"):
        assert r[what], (what, r)
    before, after = r["before"], r["after"]
    assert after["turns"] == before["turns"] and after["segments"] == before["segments"]
    assert after["memories"] == before["memories"] - (column == "graph_memories.turns")
    [d] = r["damaged"]
    assert d["item"].startswith(column.split(".")[0] + "/")
    assert ("session " in d["message"]) == (column != "users.prefs")  # names the damaged session
    assert json.dumps(r["damaged"])  # what the API returns


@pytest.mark.slow
@pytest.mark.parametrize("action", ["rebuild", "drop"])
def test_a_damaged_memory_is_rebuilt_from_its_turns_or_dropped(tmp_path, llm_server, action):
    from tests.reliability_app import handlers, make_service

    uid = run_case("graph_memories.turns", tmp_path / "data", llm_server)["user_id"]
    svc = make_service(tmp_path / "data", llm_server)
    [d] = svc.damage(uid)
    mid = d["item"].split("/")[1]
    h = handlers(svc)
    choices = h.views.memory_choices(svc.user(uid))["choices"]  # the views take the key an event resolved
    assert any(v == f"repair:{action}:{d['item']}" for _, v in choices)
    msg = svc.repair(uid, d["item"], action)
    assert "Repaired" in msg
    assert svc.damage(uid) == []
    ids = {n["id"] for n in svc.graph(uid)["nodes"]}
    if action == "rebuild":  # built again from the stored turns: the memory is back
        assert mid in ids
    else:
        assert mid not in ids
        assert mid not in _vector_ids(svc, uid)  # its vector went too
    assert all(s.status != "closing" for s in svc.sessions(uid))


def _vector_ids(svc, uid: str) -> set[str]:
    return {h.id for h in svc.agent.theanine.store.get(uid, "theanine_memories")}
