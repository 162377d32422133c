"""The sessions layer: persistence, reload, user isolation, pending-close recovery, import validation."""

from __future__ import annotations

import json

import pytest

from memory.dates import today
from memory.errors import InvalidOptions
from memory.settings import LLMConfig, Options, Settings
from memory.userspace import user_key
from sessions import UserError, new_user_id, open_service
from sessions.service import forgotten
from sessions.transfer import ImportFormatError
from sessions.users import InvalidUserId, check_user_id, llm_for
from tests.conftest import LOCOMO_SMALL
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService


def make(tmp_path, agent=None, **settings):
    agent = agent or ScriptedAgent()
    return FlatService(open_service(Settings(data_dir=tmp_path, **settings), agent)), agent


def say(svc, uid, text, strategy=None):
    return list(svc.send(uid, text, strategy))


def test_user_ids_are_random_and_validated():
    a, b = new_user_id(), new_user_id()
    assert a != b and check_user_id(a) == a and len(a) >= 32
    for bad in ["", "short", "../../etc/passwd-aaaaaaaaaaaaaaaa", "a" * 65, None, 42, "x" * 19 + "/", "é" * 30]:
        with pytest.raises(InvalidUserId):
            check_user_id(bad)


def test_bad_user_id_never_reaches_store_or_agent(tmp_path):
    svc, agent = make(tmp_path)
    with pytest.raises(InvalidUserId):
        say(svc, "../../../tmp/evil-user-id-xxxx", "hi")
    with pytest.raises(InvalidUserId):
        svc.forget("nope")
    assert agent.calls == []


def test_messages_and_traces_persist_across_restart(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    updates = say(svc, uid, "I adopted a puppy named Rex.")
    assert next(u.kind for u in updates) == "stored"
    assert updates[-1].kind == "done" and updates[-1].error is None
    assert any(u.kind == "delta" for u in updates)

    svc2, _ = make(tmp_path)  # a new process on the same data dir
    msgs = svc2.messages(uid)
    assert [(m.role, m.status) for m in msgs] == [("user", "ok"), ("assistant", "ok")]
    assert msgs[0].text == "I adopted a puppy named Rex."
    assert msgs[1].trace["strategy"] == "theanine"
    assert svc2.reply_for(uid, msgs[0].id).id == msgs[1].id
    assert svc2.last_reply(uid).id == msgs[1].id


def test_users_are_isolated(tmp_path):
    svc, _ = make(tmp_path)
    alice, bob = new_user_id(), new_user_id()
    say(svc, alice, "alice's secret")
    svc.end_session(alice)
    assert svc.messages(bob) == []
    assert [s.n_messages for s in svc.sessions(bob)] == [0]
    assert svc.graph(bob)["nodes"] == []
    alice_msg = svc.store.sessions(alice)[0]
    alice_first = svc.store.messages(alice, alice_msg.session_id)[0]
    assert svc.reply_for(bob, alice_first.id) is None  # ids of another user's rows lead nowhere
    assert svc.store.message(bob, alice_first.id) is None
    assert "alice" not in json.dumps(svc.export(bob))
    svc.forget(bob)
    assert svc.messages(alice, alice_msg.session_id)[0].text == "alice's secret"
    assert svc.graph(alice)["nodes"]


def test_user_message_is_stored_before_a_failing_llm_and_retry_answers_it(tmp_path):
    svc, agent = make(tmp_path, ScriptedAgent(fail_replies=1))
    uid = new_user_id()
    done = say(svc, uid, "remember my cat Tom")[-1]
    assert done.error and "Retry" in done.error
    msgs = svc.messages(uid)
    assert [(m.role, m.status) for m in msgs] == [("user", "ok"), ("assistant", "error")]
    retried = list(svc.retry(uid))
    assert retried[-1].error is None and "remember my cat Tom" in retried[-1].text
    with pytest.raises(UserError):
        list(svc.retry(uid))  # nothing left to retry
    # The failed attempt is kept for the record but never reaches the memory or the LLM history.
    say(svc, uid, "and my dog")
    assert agent.calls[-1][2] == ["remember my cat Tom", "[theanine] you said: remember my cat Tom"]
    svc.end_session(uid)
    close = next(c for c in agent.calls if c[0] == "close")
    assert close[3] == [
        "remember my cat Tom",
        "[theanine] you said: remember my cat Tom",
        "and my dog",
        "[theanine] you said: and my dog",
    ]


def test_interrupted_stream_keeps_the_message_and_records_the_interruption(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    gen = svc.send(uid, "a long question")
    next(gen), next(gen), next(gen)
    gen.close()  # the browser went away
    msgs = svc.messages(uid)
    assert msgs[0].text == "a long question" and msgs[1].status == "error"
    assert list(svc.retry(uid))[-1].error is None


def test_empty_or_huge_messages_are_refused_before_storing(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    from sessions.lifecycle import MAX_MESSAGE_CHARS  # 200,000: longer ones are stored whole, cut for the LLM

    for bad in ["", "   ", "x" * (MAX_MESSAGE_CHARS + 1)]:
        with pytest.raises(UserError):
            say(svc, uid, bad)
    assert svc.messages(uid) == []


def test_end_session_builds_memory_and_opens_the_next(tmp_path):
    svc, _agent = make(tmp_path)
    uid = new_user_id()
    svc.new_session(uid, "2023-05-08")  # an empty session only takes the date
    first = svc.current_session(uid)
    say(svc, uid, "I moved to Lisbon")
    assert svc.default_next_date(uid) == "2023-05-09"  # the last session's date plus one day
    res = svc.end_session(uid, "2023-05-15")
    assert res.errors == [] and len(res.closed) == 1
    assert res.session.date == "2023-05-15" and res.session.session_id != first.session_id
    rows = svc.sessions(uid)
    assert [r.status for r in rows] == ["closed", "open"]
    assert rows[0].report["new_memories"] == [f"{first.session_id}:m0"]
    assert svc.latest_new_memories(uid) == [f"{first.session_id}:m0"]
    assert [n["event"] for n in svc.graph(uid)["nodes"]] == ["I moved to Lisbon"]
    # Ending an empty session changes nothing but its date.
    res = svc.new_session(uid, "2023-05-22")
    assert res.closed == [] and svc.current_session(uid).date == "2023-05-22"
    assert len(svc.sessions(uid)) == 2


def test_a_message_never_lands_in_a_session_that_was_just_ended(tmp_path):
    svc, _agent = make(tmp_path)
    uid = new_user_id()
    say(svc, uid, "first")
    old = svc.current_session(uid)
    svc.store.end_open_session(uid, old.session_id, "2023-06-01")  # another tab ended it
    assert svc.store.add_user_message(uid, old.session_id, "late") is None
    say(svc, uid, "second")
    assert [m.text for m in svc.messages(uid) if m.role == "user"] == ["second"]
    assert [m.text for m in svc.store.messages(uid, old.session_id) if m.role == "user"] == ["first"]


def test_dates_are_validated(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    for bad in ["", "next tuesday", "<img src=x onerror=alert(1)>", "2023-13-45"]:
        with pytest.raises(UserError):
            svc.new_session(uid, bad)
    for bad in ["9999-12-31", "1066-10-14"]:  # a typo, not a session date
        with pytest.raises(UserError, match="out of range"):
            svc.new_session(uid, bad)
    # Stored normalised (ISO), whatever the form typed.
    assert svc.new_session(uid, "8 May 2023").session.date == "2023-05-08"
    assert svc.new_session(uid, "May 9, 2023").session.date == "2023-05-09"
    say(svc, uid, "hello")
    with pytest.raises(UserError, match="before session"):  # not before the session just held
        svc.end_session(uid, "2023-05-01")
    assert svc.end_session(uid, "2023-05-09").session.date == "2023-05-09"  # the same day is fine
    say(svc, uid, "again")
    svc.end_session(uid, "2023-06-01")
    assert [s.date for s in svc.sessions(uid)] == ["2023-05-09", "2023-05-09", "2023-06-01"]
    assert svc.default_next_date(uid) == "2023-06-02"  # the day after the open session, never its own date


def test_sessions_are_listed_in_time_order_imports_by_their_own_dates(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    svc.new_session(uid, "2023-06-01")
    say(svc, uid, "chatting in June")
    svc.end_session(uid, "2023-06-02")
    data = {"sessions": [{"date": "8 May 2023", "turns": [{"speaker": "user", "text": "May, imported"}]}]}
    svc.import_history(uid, json.dumps(data))
    rows = svc.sessions(uid)
    assert [(s.seq, s.source) for s in rows] == [(2, "import"), (1, "chat"), (3, "chat")]
    # Numbered by date whatever the source: what the list and the header show.
    assert [s.label for s in rows] == ["1", "2", "3"] and svc.current_session(uid).label == "3"


def test_pending_sessions_are_built_in_date_order_not_file_order(tmp_path):
    svc, agent = make(tmp_path)
    uid = new_user_id()
    data = {
        "sessions": [
            {"date": "2023-05-15", "turns": [{"speaker": "user", "text": "Rex is sick"}]},
            {"date": "2023-05-08", "turns": [{"speaker": "user", "text": "I adopted Rex"}]},
        ]
    }
    svc.import_history(uid, json.dumps(data), build=False)
    closed = []
    close = agent.close_session

    def recording(user, record, *a, **kw):
        closed.append(record.date)
        return close(user, record, *a, **kw)

    agent.close_session = recording
    res = svc.build_pending(uid)
    assert closed == ["2023-05-08", "2023-05-15"] and len(res.closed) == 2
    assert [n["event"] for n in svc.graph(uid)["nodes"]] == ["I adopted Rex", "Rex is sick"]


def test_failed_close_stays_pending_and_is_recovered_after_restart(tmp_path):
    svc, _agent = make(tmp_path, ScriptedAgent(fail_closes=1))
    uid = new_user_id()
    say(svc, uid, "my sister is called Ana")
    res = svc.end_session(uid)
    assert res.errors and "saved" in res.errors[0]
    assert [s.status for s in svc.sessions(uid)] == ["closing", "open"]
    assert svc.sessions(uid)[0].close_error

    svc2, _agent2 = make(tmp_path)  # restart with a working model
    assert svc2.recover_pending_closes() == 1
    assert [s.status for s in svc2.sessions(uid)] == ["closed", "open"]
    assert [n["event"] for n in svc2.graph(uid)["nodes"]] == ["my sister is called Ana"]
    assert svc2.recover_pending_closes() == 0


def test_a_crash_between_end_and_build_is_recovered(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    say(svc, uid, "I play the cello")
    cur = svc.current_session(uid)
    svc.store.end_open_session(uid, cur.session_id, "2023-06-01")  # what end_session does before building
    svc2, agent2 = make(tmp_path)
    svc2.recover_pending_closes()
    ended = next(s for s in svc2.sessions(uid) if s.session_id == cur.session_id)
    assert ended.status == "closed"
    # Close is idempotent: building again reports it was already built.
    report = agent2.close_session(uid, svc2.lifecycle.record(uid, ended), Options(), lambda f, m: None, None)
    assert report.already_built


def test_import_own_format_builds_memory(tmp_path):
    svc, _agent = make(tmp_path)
    uid = new_user_id()
    data = {
        "sessions": [
            {
                "date": "2023-05-08",
                "turns": [{"speaker": "user", "text": "I adopted Rex"}, {"speaker": "assistant", "text": "Nice!"}],
            },
            {"date": "2023-05-15", "turns": [{"speaker": "user", "text": "Rex is sick"}]},
        ]
    }
    progress = []
    res = svc.import_history(uid, json.dumps(data), progress=lambda f, t: progress.append(f))
    assert res.errors == [] and len(res.closed) == 2
    # The empty open session moves after the imported history, so numbers follow time.
    assert [(s.seq, s.status, s.source, s.date) for s in svc.sessions(uid)][:3] == [
        (1, "closed", "import", "2023-05-08"),
        (2, "closed", "import", "2023-05-15"),
        (3, "open", "chat", today()),
    ]
    assert progress and max(progress) <= 1.0
    assert [n["event"] for n in svc.graph(uid)["nodes"]] == ["I adopted Rex", "Rex is sick"]
    # The export's sessions can be imported again.
    exported = svc.export(uid)
    first = exported["sessions"][0]["turns"][0]
    assert first == {"speaker": "user", "name": "user", "text": "I adopted Rex", "id": first["id"]} and first["id"]
    other = new_user_id()
    svc.import_history(other, json.dumps(exported))
    assert len(svc.graph(other)["nodes"]) == 2
    # ... keeping the turn ids, so provenance still names the same turns.
    assert svc.export(other)["sessions"][0]["turns"][0]["id"] == first["id"]


def test_imported_turn_ids_stay_unique_when_a_file_is_imported_twice(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    data = json.dumps(
        {"sessions": [{"date": "2023-05-08", "turns": [{"speaker": "user", "text": "I adopted Rex", "id": "D1:1"}]}]}
    )
    svc.import_history(uid, data)
    svc.import_history(uid, data)
    ids = [t["id"] for s in svc.export(uid)["sessions"] for t in s["turns"]]
    assert ids[0] == "D1:1" and len(set(ids)) == len(ids) == 2


@pytest.mark.parametrize(
    "bad",
    [
        "not json",
        "[]",
        json.dumps({"sessions": []}),
        json.dumps({"sessions": [{"date": "2023-05-08", "turns": []}]}),
        json.dumps({"sessions": [{"date": "", "turns": [{"speaker": "user", "text": "x"}]}]}),
        json.dumps({"sessions": [{"date": "2023-05-08", "turns": [{"speaker": "bot", "text": "x"}]}]}),
        json.dumps({"sessions": [{"date": "2023-05-08", "turns": [{"speaker": "user", "text": 3}]}]}),
        json.dumps({"sessions": [{"date": "2023-05-08", "turns": [{"speaker": "user", "text": "ok"}]}, "oops"]}),
        json.dumps([{"conversation": "not an object"}]),
    ],
)
def test_malformed_import_is_refused_and_changes_nothing(tmp_path, bad):
    svc, agent = make(tmp_path)
    uid = new_user_id()
    say(svc, uid, "before the import")
    before = [(s.session_id, s.status) for s in svc.sessions(uid)]
    with pytest.raises(ImportFormatError) as e:
        svc.import_history(uid, bad)
    assert str(e.value)
    assert [(s.session_id, s.status) for s in svc.sessions(uid)] == before
    assert not [c for c in agent.calls if c[0] == "close"]


def test_import_locomo_needs_a_sample_id_when_several(tmp_path):
    svc, _agent = make(tmp_path)
    uid = new_user_id()
    raw = LOCOMO_SMALL.read_bytes()
    with pytest.raises(ImportFormatError, match="conv-26"):
        svc.import_history(uid, raw)
    with pytest.raises(ImportFormatError, match="no conversation"):
        svc.import_history(uid, raw, "conv-999")
    sample = json.loads(raw)[0]
    res = svc.import_history(uid, raw, sample["sample_id"])
    n_sessions = len([k for k in sample["conversation"] if k.startswith("session_") and not k.endswith("date_time")])
    assert len(res.closed) == n_sessions and not res.errors
    first = svc.sessions(uid)[0]
    msgs = svc.store.messages(uid, first.session_id)
    assert msgs[0].speaker == sample["conversation"]["speaker_a"] and msgs[0].role == "user"
    assert first.date == sample["conversation"]["session_1_date_time"]


def test_settings_are_validated_and_bad_values_keep_the_old_ones(tmp_path):
    svc, _ = make(tmp_path)
    uid = new_user_id()
    svc.save_settings(uid, {"temperature": 0.2, "k": 5.0})
    assert svc.options(uid).temperature == 0.2 and svc.options(uid).k == 5
    with pytest.raises(InvalidOptions, match="temperature"):
        svc.save_settings(uid, {"temperature": 7})
    with pytest.raises(InvalidOptions, match="base URL"):
        svc.save_settings(uid, {}, {"backend": "openai", "model": "m", "base_url": "file:///etc/passwd"})
    assert svc.options(uid).temperature == 0.2
    assert svc.options(uid, "secom").strategy == "secom"
    svc.set_strategy(uid, "none")
    assert svc.options(uid).strategy == "none"
    with pytest.raises(InvalidOptions):
        svc.set_strategy(uid, "bogus")


def test_api_key_only_goes_to_the_endpoint_it_was_configured_for():
    default = LLMConfig(
        backend="openai", model="gpt-4o-mini", base_url="https://router.huggingface.co/v1", api_key="secret-key"
    )
    same = llm_for(default, {"llm": {"backend": "openai", "model": "other", "base_url": default.base_url}})
    assert same is not None
    assert same.api_key == "secret-key" and same.model == "other"
    elsewhere = llm_for(default, {"llm": {"backend": "openai", "model": "m", "base_url": "http://evil.example/v1"}})
    assert elsewhere is not None and elsewhere.api_key == ""
    assert llm_for(default, {}) is None
    embedded = llm_for(default, {"llm": {"backend": "embedded"}})
    assert embedded is not None and embedded.backend == "embedded"


def test_compare_answers_with_every_strategy_without_touching_the_session(tmp_path):
    svc, agent = make(tmp_path)
    uid = new_user_id()
    say(svc, uid, "hello")
    final = list(svc.compare(uid, "what do you know?"))[-1]
    assert set(final) == {"theanine", "secom", "none", "theanine-paper"}
    assert all(r["done"] and r["trace"]["strategy"] == s.removesuffix("-paper") for s, r in final.items())
    # the paper column is THEANINE at the paper's own setting, whatever the chat's setting
    asked = {(c[4], c[5]) for c in agent.calls if c[0] == "reply" and c[3] == "what do you know?"}
    assert asked == {("theanine", "tuned"), ("theanine", "paper"), ("secom", "tuned"), ("none", "tuned")}
    assert len(svc.messages(uid)) == 2
    assert svc.store.compares(uid)[0]["message"] == "what do you know?"


def test_delete_memory_and_forget(tmp_path):
    svc, agent = make(tmp_path)
    uid, other = new_user_id(), new_user_id()
    say(svc, uid, "fact one")
    say(svc, uid, "fact two")
    say(svc, other, "other's fact")
    svc.end_session(uid)
    svc.end_session(other)
    ids = [n["id"] for n in svc.graph(uid)["nodes"]]
    assert svc.delete_memory(uid, ids[0])  # now a report of what was removed
    assert [n["id"] for n in svc.graph(uid)["nodes"]] == ids[1:]
    assert svc.delete_memory(uid, "no-such-memory") is None
    with pytest.raises(UserError):
        svc.delete_memory(uid, "")
    left = len(svc.graph(uid)["nodes"])
    gone = svc.forget(uid)
    assert gone == {"sessions": 1, "messages": 4, "memories": left, "segments": 0}  # what Forget me reports
    assert forgotten(gone).startswith(f"Deleted 1 session, 4 messages, {left} THEANINE memor")
    assert ("forget", user_key(uid)) in agent.calls
    assert not svc.store.user_exists(uid)
    assert svc.store.sessions(uid) == [] and svc.graph(uid)["nodes"] == []
    assert svc.graph(other)["nodes"] and svc.messages(other) == [] and svc.sessions(other)[0].status == "closed"


def test_build_workers_run_below_the_process_priority_even_under_nice():
    """MEMORY_BUILD_NICE lowers a build thread relative to the process, so an app started under `nice`
    still runs builds below its replies (an absolute nice 10 would equal the replies' nice 10)."""
    import os
    import threading

    from sessions.work import BuildPool

    def own_nice(_progress):
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    pool = BuildPool(1, nice=5)
    try:
        assert pool.run(own_nice) == min(19, base + 5)
    finally:
        pool.shutdown()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the caller's thread is unchanged
