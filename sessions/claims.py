"""The cross-process claim on a user's session closes: one process builds them, the others wait.

PostgreSQL: a session-level advisory lock held on a connection of its own for the whole
build. It needs no row, no lease and no clean-up: if the holder dies (even kill -9) the
server drops its connection and with it the lock, and the next replica proceeds.

SQLite: the database is a file on one machine, so the processes sharing it share that
machine's file locks: an exclusive flock on a per-user lock file (released by the kernel when
the holder dies). A write transaction held for the whole build would do the same but block
every other user's messages for its duration (the build waits on the LLM for seconds).

Whoever gets the claim re-reads the pending sessions, so a session the previous holder built
is skipped; the graph commit also refuses to build a session twice (graph_store.py).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager

import sqlalchemy as sa

from memory.userspace import user_key

from . import db

CLOSE_LOCK = 7302  # advisory lock namespace of session closes


@contextmanager
def close_claim(store, user_id: str):
    if store.postgres:
        with _advisory(store.engine, user_id):
            yield
    elif store.lock_dir is not None:
        with _flock(store.lock_dir / f"{user_key(user_id)}.lock"):
            yield
    else:
        yield


@contextmanager
def _advisory(engine, user_id: str):
    a, b = db.lock_key(CLOSE_LOCK, user_key(user_id))  # by key, as the lock file: ids and keys meet
    conn = engine.connect()
    try:
        conn.execute(sa.text("SELECT pg_advisory_lock(:a, :b)"), {"a": a, "b": b})
        conn.commit()  # the lock is the session's, not the transaction's: no idle transaction
        try:
            yield
        finally:
            try:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:a, :b)"), {"a": a, "b": b})
                conn.commit()
            except Exception:
                conn.invalidate()
                raise
    finally:
        conn.close()


@contextmanager
def _flock(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
