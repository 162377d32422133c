"""Fair sharing: one running job per user, memory builds in their own pool, per-user bounds."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator
from typing import cast

import pytest

from app import AppSettings
from memory.locks import UserLocks
from memory.settings import Settings
from sessions import new_user_id, open_service
from sessions.work import BuildPool, Busy, ImportRate, LimitReached, Limits, UserWork
from tests.fakes import WAIT, GatedAgent
from tests.flat_service import FlatService


def make(tmp_path, agent=None, **limits):
    agent = agent or GatedAgent()
    return FlatService(open_service(Settings(data_dir=tmp_path), agent, limits=Limits(**limits))), agent


def history(n_sessions: int) -> str:
    return json.dumps(
        {
            "sessions": [
                {
                    "date": f"2023-05-{i + 1:02d}",
                    "turns": [{"speaker": "user", "text": f"fact {i}"}, {"speaker": "assistant", "text": "ok"}],
                }
                for i in range(n_sessions)
            ]
        }
    )


def test_ten_sends_at_once_one_answered_nine_refused_nothing_stored_twice(tmp_path):
    svc, agent = make(tmp_path)
    uid = new_user_id()
    svc.current_session(uid)
    start = threading.Barrier(10)
    results: list = [None] * 10
    refused = threading.Semaphore(0)

    def fire(i):
        start.wait(WAIT)
        try:
            results[i] = list(svc.send(uid, f"message {i}"))
        except Busy as e:
            results[i] = e
            refused.release()

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for _ in range(9):  # nine refusals arrive while the first reply is held
        assert refused.acquire(timeout=WAIT)
    agent.reply_gate.set()
    for t in threads:
        t.join(WAIT)
    answered = [r for r in results if isinstance(r, list)]
    busy = [r for r in results if isinstance(r, Busy)]
    assert len(answered) == 1 and len(busy) == 9
    assert answered[0][-1].kind == "done" and answered[0][-1].error is None
    assert all("Busy with answering your message" in str(b) and "nothing was stored" in str(b) for b in busy)
    msgs = svc.messages(uid)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert len([c for c in agent.calls if c[0] == "reply"]) == 1
    assert list(svc.send(uid, "and now?"))[-1].error is None  # the slot is free again


def test_a_second_build_of_the_same_user_is_refused_while_the_chat_stays_usable(tmp_path):
    svc, agent = make(tmp_path)
    uid = new_user_id()
    agent.reply_gate.set()
    list(svc.send(uid, "I adopted a puppy."))
    ending = threading.Thread(target=svc.end_session, args=(uid,))
    ending.start()
    assert agent.in_close.wait(WAIT)
    for job in (
        lambda: svc.import_history(uid, history(1)),
        lambda: svc.new_session(uid, "2023-06-01"),
        lambda: svc.forget(uid),
        lambda: svc.delete_memory(uid, "m1"),  # deleting a memory holds the memory lane too
    ):
        with pytest.raises(Busy) as e:
            job()
        assert "building the memory of your session" in str(e.value)
    # The chat lane is free: a message sent while the memory builds is answered (in the next session).
    assert list(svc.send(uid, "hello?"))[-1].error is None
    agent.close_gate.set()
    ending.join(WAIT)
    assert [s.status for s in svc.sessions(uid)] == ["closed", "open"]
    assert [m.text for m in svc.messages(uid, "s1") if m.role == "user"] == ["I adopted a puppy."]


def test_other_users_reply_while_a_build_runs(tmp_path):
    svc, agent = make(tmp_path)
    a, b = new_user_id(), new_user_id()
    agent.reply_gate.set()
    list(svc.send(a, "A talks."))
    builder = threading.Thread(target=svc.import_history, args=(a, history(3)))
    builder.start()
    assert agent.in_close.wait(WAIT)  # A's build holds the only build worker
    done = list(svc.send(b, "B is not queued behind A."))
    assert done[-1].kind == "done" and done[-1].error is None
    assert builder.is_alive()  # ... and A's import is still running
    agent.close_gate.set()
    builder.join(WAIT)
    assert [s.status for s in svc.sessions(a)].count("closed") == 3


def test_a_waiting_build_is_told_its_place_in_line():
    pool = BuildPool(workers=1, poll=0.01)
    release, started = threading.Event(), threading.Event()

    def slow(progress):
        started.set()
        assert release.wait(WAIT)
        progress(1.0, "built")
        return "first"

    first = threading.Thread(target=pool.run, args=(slow,))
    first.start()
    assert started.wait(WAIT)
    seen = []
    second = threading.Thread(target=lambda: seen.append(pool.run(lambda p: "second", lambda f, t: seen.append(t))))
    second.start()
    while not seen:  # the waiting build reports its place before it runs
        second.join(0.01)
    assert seen[0].startswith("Waiting for a memory-build slot: yours is next")
    release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert seen[-1] == "second"
    pool.shutdown()


def test_build_progress_reaches_the_callers_thread(tmp_path):
    svc, agent = make(tmp_path)
    agent.reply_gate.set()
    agent.close_gate.set()
    uid = new_user_id()
    list(svc.send(uid, "hello"))
    threads, texts = set(), []

    def progress(f, text):
        threads.add(threading.get_ident())
        texts.append(text)

    svc.end_session(uid, progress=progress)
    assert threads == {threading.get_ident()} and any("summarising" in t for t in texts)


def test_imports_per_hour_are_bounded_and_refused_ones_do_not_count(tmp_path):
    svc, agent = make(tmp_path, imports_per_hour=2)
    agent.close_gate.set()
    uid = new_user_id()
    with pytest.raises(Exception):  # noqa: B017  (any refusal will do: the point is what is not counted)
        svc.import_history(uid, "{not json")  # refused: not counted
    svc.import_history(uid, history(1))
    svc.import_history(uid, history(1))
    with pytest.raises(LimitReached) as e:
        svc.import_history(uid, history(1))
    assert "at most 2 histories per hour" in str(e.value)
    assert len([s for s in svc.sessions(uid) if s.source == "import"]) == 2
    svc.import_history(new_user_id(), history(1))  # another user has their own allowance


def test_import_rate_window_slides():
    now = [1000.0]
    rate = ImportRate(1, clock=lambda: now[0])
    rate.take("u")
    with pytest.raises(LimitReached):
        rate.take("u")
    now[0] += 3601
    rate.take("u")


def test_stored_sessions_and_memories_are_bounded(tmp_path):
    svc, agent = make(tmp_path, sessions=5, memories=3)
    agent.reply_gate.set()
    agent.close_gate.set()
    uid = new_user_id()
    with pytest.raises(LimitReached) as e:
        svc.import_history(uid, history(6))
    assert "at most 5" in str(e.value) and svc.sessions(uid) == []
    svc.import_history(uid, history(3))  # 3 sessions, 3 memories
    list(svc.send(uid, "one more thing"))
    with pytest.raises(LimitReached) as e:
        svc.end_session(uid)
    assert "at most 3 per user" in str(e.value)
    assert svc.messages(uid)[-1].role == "assistant"  # the open session and its messages are kept
    assert svc.current_session(uid).n_messages == 2


def test_limits_from_env():
    lim = AppSettings.from_env(
        {
            "MEMORY_MAX_IMPORTS_PER_HOUR": "0",
            "MEMORY_MAX_SESSIONS": "7",
            "MEMORY_MAX_MEMORIES": "9",
            "MEMORY_BUILD_WORKERS": "2",
        }
    ).limits
    assert (lim.imports_per_hour, lim.sessions, lim.memories, lim.build_workers) == (0, 7, 9, 2)
    assert AppSettings.from_env({}).limits == Limits()


def test_gate_frees_the_slot_when_a_stream_is_abandoned():
    work = UserWork(UserLocks())
    it = work.stream("u", "reply", lambda: iter([1, 2, 3]))
    assert next(it) == 1
    running = work.running("u")
    assert running is not None and running.kind == "reply"
    cast(Generator, it).close()  # the browser went away mid-reply
    assert work.running("u") is None
