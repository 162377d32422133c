"""Ids are stored hashed: the database and the data dir hold each user's key (memory.userspace), never
the id, which is the browser's credential; a key sent as an id is refused; a database from before
(ids in its rows) is moved to keys at start and its users keep their history and memory; the server
still acts for users it knows only by key (start-up recovery of a close).

Real parts: MiniLM, embedded Chroma, SQLite, the `openai` client on the scripted server.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory.userspace import user_key
from sessions.users import InvalidUserId, UserKey
from tests.reliability_app import make_service
from tests.test_delete_gone import files_with

USER_TABLES = ("users", "sessions", "messages", "compares")
HISTORY = '{"sessions": [{"date": "2023-04-01", "turns": [{"speaker": "user", "text": "I grow tomatoes."}]}]}'


def stored_user_ids(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {r[0] for t in USER_TABLES for r in con.execute(f"SELECT user_id FROM {t}")}
    finally:
        con.close()


def _use_everything(svc, uid: str) -> None:
    svc.save_settings(uid, {"k": 4})
    svc.import_history(uid, HISTORY)
    svc.new_session(uid, "2023-05-08")
    list(svc.send(uid, "My dog is called Rex.", "theanine"))
    list(svc.compare(uid, "What is my dog called?"))
    svc.end_session(uid, "2023-05-09")


@pytest.mark.slow
def test_the_database_and_files_hold_the_key_never_the_id(tmp_path, llm_server):
    data = tmp_path / "data"
    svc = make_service(data, llm_server)
    uid = svc.new_user()
    _use_everything(svc, uid)
    assert stored_user_ids(data / "sessions.sqlite3") == {user_key(uid)}
    assert files_with(data, uid) == []  # no table, WAL, Chroma file or folder name holds the id
    # ... and the id still opens everything.
    assert svc.sessions(uid)[-2].n_messages == 2 and svc.graph(uid)["nodes"] and svc.segments(uid)

    key = user_key(uid)  # what a copy of the database shows
    for call in (lambda: svc.sessions(key), lambda: svc.export(key), lambda: list(svc.send(key, "hi"))):
        with pytest.raises(InvalidUserId, match="Unknown user id"):
            call()
    assert svc.sessions(UserKey(key))  # the server itself acts by key


@pytest.mark.slow
def test_a_database_of_ids_is_moved_to_keys_at_start_and_nothing_is_lost(tmp_path, llm_server):
    data, db = tmp_path / "data", tmp_path / "data" / "sessions.sqlite3"
    svc = make_service(data, llm_server)
    uid = svc.new_user()
    _use_everything(svc, uid)
    before = svc.export(uid)
    # The same data as an install before version 6 left it: every user row names the id.
    con = sqlite3.connect(db)
    with con:
        for t in USER_TABLES:
            con.execute(f"UPDATE {t} SET user_id = ? WHERE user_id = ?", (uid, user_key(uid)))
        con.execute("DELETE FROM schema_version WHERE version = 6")
    con.close()
    assert stored_user_ids(db) == {uid}

    svc = make_service(data, llm_server)  # the restart runs migration 6
    assert stored_user_ids(db) == {user_key(uid)}
    assert files_with(data, uid) == []  # the old rows are not left in free pages or the log
    assert svc.export(uid) == before  # sessions, both memories and settings, as they were
    assert [u for u in svc.send(uid, "What is my dog called?", "secom")][-1].error is None


@pytest.mark.slow
def test_a_close_left_undone_is_finished_by_key_at_start(tmp_path, llm_server):
    data = tmp_path / "data"
    svc = make_service(data, llm_server)
    uid = svc.new_user()
    svc.new_session(uid, "2023-05-08")
    list(svc.send(uid, "I moved to Lisbon last spring.", "theanine"))
    svc.end_session(uid, "2023-05-09", build=False)  # ended; its memory not built (a crash here)
    svc = make_service(data, llm_server)
    assert svc.store.users_with_pending_closes() == [user_key(uid)]  # all the server knows at start
    assert svc.recover_pending_closes() == 1
    assert [s.status for s in svc.sessions(uid)][-2:] == ["closed", "open"]
    assert any("Lisbon" in n["event"] for n in svc.graph(uid)["nodes"])
