"""sessions.work: the one registry of a user's running work (lanes, background work, Stop)."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import cast

import pytest

from memory.locks import UserLocks
from memory.settings import Settings
from sessions import new_user_id, open_service
from sessions.lifecycle import INTERRUPTED
from sessions.work import Busy, UserWork
from tests.fakes import WAIT, GatedAgent, ScriptedAgent
from tests.flat_service import FlatService


def test_stop_returns_once_the_cancelled_reply_has_recorded_its_interruption(tmp_path):
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))
    uid = new_user_id()
    reply = svc.send(uid, "A question that will be stopped")
    assert next(reply).kind == "stored" and next(reply).kind == "status"  # inside the agent's reply
    work = svc.work.running(uid, "chat")
    assert work is not None
    waiting = threading.Event()
    real_wait = work.wait

    def wait(timeout):
        waiting.set()  # Stop is now waiting for the reply to end
        return real_wait(timeout)

    work.wait = wait  # type: ignore[method-assign]
    seen: list = []

    def stop():
        svc.stop_reply(uid)
        seen.extend((m.role, m.error) for m in svc.messages(uid))  # what the page shows right after Stop

    stopper = threading.Thread(target=stop)
    stopper.start()
    assert waiting.wait(WAIT)
    cast(Generator, reply).close()  # the cancelled stream ends: its interruption is recorded
    stopper.join(WAIT)
    assert seen == [("user", None), ("assistant", INTERRUPTED)]
    assert svc.work.running(uid) is None


def test_stop_frees_the_lane_of_a_reply_stuck_in_a_slow_call():
    work = UserWork(UserLocks())
    stuck = work.stream("u", "reply", lambda: iter([1, 2]))
    assert next(stuck) == 1
    work.stop("u", "chat", wait=0.01)  # the stream never ends by itself here
    assert work.running("u") is None
    with work.hold("u", "reply"):  # the user can send again
        cast(Generator, stuck).close()  # the old stream ending later does not free the new reply's lane
        running = work.running("u", "chat")
        assert running is not None and running.kind == "reply"


def test_background_work_reports_progress_and_its_end_once():
    work = UserWork(UserLocks())
    go = threading.Event()

    def build(w):
        w.progress(0.5, "halfway")
        assert go.wait(WAIT)
        return "built"

    w = work.start("u", "close", build)
    with pytest.raises(Busy, match="building the memory"):
        work.start("u", "import", lambda w: None)  # the memory lane is taken
    with work.hold("u", "reply"):  # the chat lane is not
        pass
    go.set()
    assert w.wait(WAIT) and w.result == "built" and w.text == "halfway" and w.title == "Building memory"
    assert work.take_finished("u", "memory") is w and work.take_finished("u", "memory") is None


def test_recovery_at_start_leaves_a_user_who_is_building_to_that_build(tmp_path):
    agent = GatedAgent()
    svc = FlatService(open_service(Settings(data_dir=tmp_path), agent))
    uid = new_user_id()
    agent.reply_gate.set()
    list(svc.send(uid, "I adopted a puppy."))
    svc.end_session(uid, build=False)  # left "closing", as after a crash
    with svc.work.hold(uid, "close"):  # the user's own build runs
        assert svc.recover_pending_closes() == 0
    agent.close_gate.set()
    assert svc.recover_pending_closes() == 1


def test_time_left_comes_from_the_pace_of_steps_not_the_start_up():
    """A run that loads for 20 s and then does 5% a second says 18 s left at 10%, not minutes."""
    from sessions.work import Progressing

    run = Progressing(started=0.0)
    assert run.eta(now=20.0) is None  # no step yet: no estimate
    run.progress(0.05, "step 1", now=20.0)
    assert run.eta(now=20.5) is None  # one step: no pace yet
    run.progress(0.10, "step 2", now=21.0)
    assert run.eta(now=21.0) == pytest.approx(18.0)  # 0.05 per second, 0.9 left
    assert run.eta(now=25.0) == pytest.approx(14.0)  # counts down between steps
    assert run.eta(now=60.0) == 0.0
