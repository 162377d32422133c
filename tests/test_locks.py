"""memory.locks.KeyedLocks: one lock per key."""

import threading

import pytest

from memory.locks import KeyedLocks


def test_one_lock_per_key_made_once_under_contention():
    locks = KeyedLocks()
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(locks["u"])) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(x) for x in got}) == 1 and locks["u"] is got[0] and locks["v"] is not got[0]
    assert len(locks) == 2


def test_hold_excludes_others_of_the_same_key_only():
    locks = KeyedLocks()
    with locks.hold("u"):
        assert not locks["u"].acquire(blocking=False)
        assert locks["v"].acquire(blocking=False)
        locks["v"].release()
    assert locks["u"].acquire(blocking=False)
    locks["u"].release()


def test_reentrant_locks_can_be_taken_again_by_their_holder():
    locks = KeyedLocks(reentrant=True)
    with locks.hold("u"), locks.hold("u"):
        seen = []
        t = threading.Thread(target=lambda: seen.append(locks["u"].acquire(blocking=False)))
        t.start()
        t.join()
        assert seen == [False]


# --- UserLocks: the one owner of per-user exclusion -----------------------------------------------


def test_lanes_are_taken_all_or_none_and_freed_only_by_their_holder():
    from memory.locks import UserLocks

    locks, a, b = UserLocks(), object(), object()
    assert locks.take("u", ("chat",), a) is None
    assert locks.take("u", ("memory", "chat"), b) is a  # one lane busy: none taken
    assert locks.holder("u", "memory") is None and locks.holder("u") is a
    assert locks.take("v", ("chat",), b) is None  # another user's lanes are their own
    locks.release("u", ("chat",), b)  # not b's: nothing happens
    assert locks.holder("u", "chat") is a
    locks.release("u", ("chat",), a)
    assert locks.holder("u") is None


def test_the_agent_the_graph_and_the_work_registry_share_one_owner(tmp_path):
    """app.py makes one UserLocks: the agent's writer lock, THEANINE's data lock and the service's lanes
    are all its levels (the benchmarks, which run the agent without the service, take the same writer lock)."""
    from memory.agent import MemoryAgent
    from memory.locks import UserLocks
    from memory.settings import Settings
    from memory.userspace import user_key
    from sessions import open_service

    locks = UserLocks()
    agent = MemoryAgent.from_settings(Settings(data_dir=tmp_path), locks=locks)
    svc = open_service(agent.settings, agent, locks=locks)
    assert agent.locks is locks and svc.work.locks is locks
    assert agent.theanine.lock("u") is locks.data("u")
    with locks.writer("u"):  # a build of u holds the writer lock: another cannot start
        assert not agent._close_lock("u").acquire(blocking=False)
    with svc.work.hold("u", "reply") as work:
        assert locks.holder(user_key("u"), "chat") is work


def test_the_service_keeps_its_work_on_the_agents_locks_and_refuses_a_second_owner(tmp_path):
    from memory.locks import UserLocks
    from memory.settings import Settings
    from sessions import open_service
    from tests.fakes import ScriptedAgent

    agent = ScriptedAgent()
    assert open_service(Settings(data_dir=tmp_path), agent).work.locks is agent.locks
    with pytest.raises(ValueError, match="one owner"):
        open_service(Settings(data_dir=tmp_path / "second"), agent, locks=UserLocks())
