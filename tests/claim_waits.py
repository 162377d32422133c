"""A deterministic sign that someone waits for a user's close claim (sessions/work.py), for tests that
check that the waiter has not got in: on PostgreSQL its advisory lock request shows in pg_locks as not
granted; on SQLite its flock on the user's lock file shows in /proc/locks as blocked ("->")."""

from __future__ import annotations

import os
import time
from pathlib import Path

import sqlalchemy as sa

from memory.userspace import user_key
from sessions.db import lock_key
from sessions.work import CLOSE_LOCK

PG_WAITERS = sa.text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND classid = :a AND objid = :b AND objsubid = 2"
)


def _pg_waiting(engine: sa.Engine, user_id: str) -> bool:
    a, b = lock_key(CLOSE_LOCK, user_key(user_id))
    with engine.connect() as c:
        return bool(c.execute(PG_WAITERS, {"a": a, "b": b & 0xFFFFFFFF}).scalar())


def _flock_waiting(lock_dir: Path, user_id: str) -> bool:
    path = lock_dir / f"{user_key(user_id)}.lock"
    if not path.exists():
        return False
    inode = f":{os.stat(path).st_ino} "
    with open("/proc/locks") as f:
        return any("->" in line and "FLOCK" in line and inode in line for line in f)


def wait_for_a_claim_waiter(
    user_id: str, *, engine: sa.Engine | None = None, lock_dir: Path | None = None, timeout: float = 60
) -> None:
    """Returns once a claimant of `user_id`'s close claim is blocked on it (PostgreSQL `engine`, or the
    SQLite store's `lock_dir`); fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (_pg_waiting(engine, user_id) if engine is not None else _flock_waiting(Path(str(lock_dir)), user_id)):
        assert time.monotonic() < deadline, "nobody is waiting for the close claim"
        time.sleep(0.05)
