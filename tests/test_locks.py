"""memory.locks.KeyedLocks: one lock per key."""

import threading

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
