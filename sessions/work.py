"""Per-user work and the order of its locks: the lanes of running work, the cross-process close claim, and
fair sharing of memory builds between users.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa

from memory.locks import UserLocks
from memory.records import Progress
from memory.userspace import user_key

from . import db
from .db import UserError
from .settings import Limits as Limits  # declared with the app's other settings; named here too

# --- jobs --------------------------------------------------------
# Fair sharing between users: a bounded pool for memory builds, and per-user limits.
#
# * `BuildPool`: memory builds (session closes, imports) run on their own few worker
#   threads, at a lower CPU priority, so replies of other users never queue behind
#   them. A build waiting for a worker reports its place in line through the
#   progress callback.
# * `ImportRate`: the per-user bound on imports per hour (the bounds themselves are
#   `Limits`, declared in sessions/settings.py with the other settings of the app).

log = logging.getLogger(__name__)

T = TypeVar("T")


class LimitReached(UserError):
    """A per-user bound (imports per hour, stored sessions or memories) would be exceeded."""


def _lower_priority(nice: int) -> None:
    # Linux schedules threads one by one: renicing this worker thread leaves the reply threads alone.
    # Relative to the process's own priority: an app started under `nice` still puts builds below replies.
    if nice > 0 and hasattr(os, "setpriority"):
        tid = threading.get_native_id()
        with suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


def _builds_compute_on_their_own_thread() -> None:
    """Torch's intra-op workers (and tokenizers' pool) are shared by the process and keep the priority
    of the thread that made them, so a build fanning out onto them would compete with replies at full
    priority. With one intra-op thread a build computes on its own reniced thread; replies embed one
    short query, which one thread does as fast. (The tokenizers' pool is turned off by app.load_env.)"""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


class BuildPool:
    """A few worker threads for memory builds; callers wait for the result and see their place in line."""

    def __init__(self, workers: int = 1, nice: int = 10, poll: float = 0.25):
        self.workers = max(1, workers)
        if nice > 0:
            _builds_compute_on_their_own_thread()
        self._executor = ThreadPoolExecutor(
            self.workers, thread_name_prefix="memory-build", initializer=_lower_priority, initargs=(nice,)
        )
        self._waiting: deque = deque()
        self._lock = threading.Lock()
        self._poll = poll
        self._durations: deque = deque(maxlen=20)

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def ahead_of(self, ticket) -> int | None:
        with self._lock:
            try:
                return list(self._waiting).index(ticket)
            except ValueError:
                return None  # started

    def _wait_text(self, ahead: int) -> str:
        typical = sorted(self._durations)[len(self._durations) // 2] if self._durations else None
        est = f", about {max(1, round(typical * (ahead + 1) / self.workers))} s" if typical else ""
        if ahead == 0:
            return f"Waiting for a memory-build slot: yours is next{est}."
        return f"Waiting for a memory-build slot: {ahead} build(s) of other users ahead of yours{est}."

    def run(self, fn: Callable[[Progress], T], progress: Progress | None = None) -> T:
        """Run fn(progress) on a build worker; block until it is done. Progress calls are relayed to
        the caller's own thread (Gradio's progress belongs to the event's thread)."""
        step = progress or (lambda f, s: None)
        ticket = object()
        latest: list = []

        def relay(f: float, text: str) -> None:
            latest.append((f, text))

        def task() -> T:
            with self._lock:
                self._waiting.remove(ticket)
            t0 = time.monotonic()
            try:
                return fn(relay)
            finally:
                self._durations.append(time.monotonic() - t0)

        with self._lock:
            self._waiting.append(ticket)
        fut: Future = self._executor.submit(task)
        shown = None
        while True:
            try:
                result = fut.result(timeout=self._poll)
            except FutureTimeout:
                result = ticket
            ahead = self.ahead_of(ticket)
            if ahead is not None and ahead != shown:
                step(0.0, self._wait_text(ahead))
                shown = ahead
            while latest:
                step(*latest.pop(0))
            if result is not ticket:
                return result

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class ImportRate:
    """Imports started per user in the last hour (kept in memory: a restart forgets them)."""

    WINDOW = 3600.0

    def __init__(self, per_hour: int, clock: Callable[[], float] = time.monotonic):
        self.per_hour, self.clock = per_hour, clock
        self._starts: dict[str, deque] = {}
        self._lock = threading.Lock()

    def take(self, user_id: str) -> None:
        """Count one import, or LimitReached (with when the next one is possible)."""
        if not self.per_hour:
            return
        now = self.clock()
        with self._lock:
            q = self._starts.setdefault(user_id, deque())
            while q and now - q[0] >= self.WINDOW:
                q.popleft()
            if len(q) >= self.per_hour:
                wait = int(self.WINDOW - (now - q[0])) // 60 + 1
                raise LimitReached(
                    f"You can import at most {self.per_hour} histories per hour; "
                    f"the next import is possible in about {wait} minutes."
                )
            q.append(now)

    def give_back(self, user_id: str) -> None:
        """An import refused before it stored anything (bad file, over a bound) does not count."""
        with self._lock:
            q = self._starts.get(user_id)
            if q:
                q.pop()


# --- claims ------------------------------------------------------
# The cross-process claim on a user's session closes: one process builds them, the others wait.
#
# PostgreSQL: a session-level advisory lock held on a connection of its own for the whole
# build. It needs no row, no lease and no clean-up: if the holder dies (even kill -9) the
# server drops its connection and with it the lock, and the next replica proceeds.
#
# SQLite: the database is a file on one machine, so the processes sharing it share that
# machine's file locks: an exclusive flock on a per-user lock file (released by the kernel when
# the holder dies). A write transaction held for the whole build would do the same but block
# every other user's messages for its duration (the build waits on the LLM for seconds).
#
# Whoever gets the claim re-reads the pending sessions, so a session the previous holder built
# is skipped; the graph commit also refuses to build a session twice (graph_store.py).

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


# --- work --------------------------------------------------------
# The one registry of a user's running work, and the one order of the per-user locks.
#
# A user's work runs in lanes, one piece of work per lane (LANES): the chat (a reply or a compare),
# the memory (a build, an import, deleting a memory, Forget me) and evaluations. So the chat stays usable while the
# user's memory is built (a build can take minutes), and still no user runs more than one piece of
# work of a kind. A second piece for a busy lane is refused at once with `Busy`, before anything is
# stored, so nothing the user typed is half-saved or stored twice. The page, the API and the service
# all ask this registry what a user is running (`running`); background work (`start`) reports its
# progress on its `Work` record, and whoever needs its end waits for it (`Work.wait`).
#
# Lock order. Every per-user lock is a level of one owner, memory.locks.UserLocks, which the app
# makes once and gives to the agent and this registry; whoever holds one may take a later one, never an
# earlier one:
#
# 1. The user's lanes (`UserWork.hold`, `stream`, `start`, on `UserLocks.take`): never waits (a busy
#    lane raises `Busy`).
# 2. The close claim (`Store.close_claim`, `close_claim` here): across processes (replicas), so it
#    cannot be a lock of the owner, which lives in one process; waits. Held while the user's memory
#    is built (`Lifecycle.close_pending`), deleted (Forget me) or a memory is deleted.
# 3. The user's writer lock (`UserLocks.writer`, taken by `MemoryAgent`): one build or deletion of the
#    user's memory at a time, also where the library runs without this registry (the benchmarks).
# 4. The user's data lock (`UserLocks.data`, taken by THEANINE's graph cache), reentrant, never held
#    across an LLM call.
#
# Not per-user, and so not levels: the tables' own guards (SeCom's BM25 cache, the build pool's queue,
# this registry's finished work), each held for a dictionary update only.


# What each kind of work is, for people ("Busy with ...").
WORK_NAMES = {
    "reply": "answering your message",
    "compare": "comparing the strategies",
    "close": "building the memory of your session",
    "import": "importing your history",
    "forget": "deleting your data",
    "delete": "deleting a memory",
    "evaluate": "evaluating memory designs",
}
# The lanes each kind of work holds. Forget takes both the chat and the memory lane. An evaluation
# (sessions.evaluation) builds scratch memory only, so it has a lane of its own.
LANES = {
    "reply": ("chat",),
    "compare": ("chat",),
    "close": ("memory",),
    "import": ("memory",),
    "forget": ("chat", "memory"),
    "delete": ("memory",),
    "evaluate": ("evaluate",),
}
TITLES = {"close": "Building memory", "import": "Importing your history", "evaluate": "Evaluating memory designs"}


class Busy(UserError):
    """The user already runs work in this lane; this work was not started."""

    def __init__(self, kind: str):
        self.kind = kind
        super().__init__(
            f"Busy with {WORK_NAMES.get(kind, kind)}: this request was not started and nothing "
            "was stored. Try again when it has finished."
        )


@dataclass
class Progressing:
    """Progress of long work as a fraction and a line for people, with an estimate of the time left.

    The estimate comes from the measured throughput between the first step and the latest one, so
    the start-up before the first step (loading a model, opening a store) does not inflate it, and
    it counts down between steps instead of jumping with every poll."""

    started: float = field(default_factory=time.time)
    fraction: float = 0.0
    text: str = ""
    _first: tuple[float, float] | None = field(default=None, repr=False)  # (time, fraction) of step one
    _last: tuple[float, float] | None = field(default=None, repr=False)  # ... of the latest step

    def progress(self, fraction: float, text: str, now: float | None = None) -> None:
        fraction = max(self.fraction, min(1.0, max(0.0, float(fraction))))
        if fraction > self.fraction:
            point = (time.time() if now is None else now, fraction)
            self._first = self._first or point
            self._last = point
        self.fraction = fraction
        self.text = text or self.text

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the measured pace (None until two steps have given a pace)."""
        if self._first is None or self._last is None or self._last[1] <= self._first[1]:
            return None
        (t0, f0), (t1, f1) = self._first, self._last
        per_fraction = (t1 - t0) / (f1 - f0)
        since_last = (time.time() if now is None else now) - t1
        return max(0.0, (1.0 - f1) * per_fraction - since_last)


@dataclass(kw_only=True)
class Work(Progressing):
    """One piece of a user's work: what it is, its progress, and (background work) how it ended."""

    kind: str
    result: Any = None
    error: BaseException | None = None
    ended: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def title(self) -> str:
        return TITLES.get(self.kind, WORK_NAMES.get(self.kind, self.kind).capitalize())

    @property
    def done(self) -> bool:
        return self.ended.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait until the work has ended (its lanes are free); False when `timeout` passed first."""
        return self.ended.wait(timeout)


class UserWork:
    """Which user runs which work right now: one piece per lane (LANES) per user. A user is known by
    key (memory.userspace), so the page's id and the server's own key name the same lanes."""

    def __init__(self, locks: UserLocks):
        # The lanes are the first level of the one owner of per-user locks (memory.locks.UserLocks): the
        # agent's, so one object holds every level.
        self.locks = locks
        self._finished: dict[tuple[str, str], Work] = {}  # background work whose end is not yet shown
        self._lock = threading.Lock()

    def running(self, user_id: str, lane: str | None = None) -> Work | None:
        """The user's work in `lane` (any lane when None), or None."""
        work = self.locks.holder(user_key(user_id), lane)
        return work if isinstance(work, Work) else None

    def _take(self, user_id: str, kind: str) -> Work:
        work = Work(kind=kind)
        busy = self.locks.take(user_key(user_id), _lanes(kind), work)
        if busy is not None:
            raise Busy(getattr(busy, "kind", "work"))
        return work

    def _free(self, user_id: str, work: Work) -> None:
        self.locks.release(user_key(user_id), _lanes(work.kind), work)  # not a later holder's (after Stop)
        work.ended.set()

    @contextmanager
    def hold(self, user_id: str, kind: str) -> Iterator[Work]:
        """Run the `with` block as the user's work of `kind`; Busy when one of its lanes is taken."""
        work = self._take(user_id, kind)
        try:
            yield work
        finally:
            self._free(user_id, work)

    def stream(self, user_id: str, kind: str, make: Callable[[], Iterator[T]]) -> Iterator[T]:
        """A generator as the user's work: the lanes are taken at its first step (Busy raised there)
        and freed when it ends, fails or is closed (the browser went away)."""
        with self.hold(user_id, kind):
            yield from make()

    def start(self, user_id: str, kind: str, fn: Callable[[Work], Any]) -> Work:
        """Run fn(work) in a background thread as the user's work of `kind` (Busy, at once, when a lane
        is taken). Its end is kept for `take_finished`, so the page shows it once, even after a reload."""
        work = self._take(user_id, kind)
        user_id = user_key(user_id)

        def run() -> None:
            try:
                work.result = fn(work)
            except BaseException as e:
                log.exception("background work failed")
                work.error = e
            finally:
                with self._lock:
                    self._finished[(user_id, _lanes(kind)[0])] = work
                self._free(user_id, work)

        threading.Thread(target=run, name=f"work-{kind}", daemon=True).start()
        return work

    def finished(self, user_id: str, lane: str) -> Work | None:
        """The user's background work in `lane` that ended and was not taken yet."""
        user_id = user_key(user_id)
        with self._lock:
            return self._finished.get((user_id, lane))

    def take_finished(self, user_id: str, lane: str) -> Work | None:
        """The user's ended background work in `lane`, removed (its result is shown once)."""
        user_id = user_key(user_id)
        with self._lock:
            return self._finished.pop((user_id, lane), None)

    def stop(self, user_id: str, lane: str, wait: float) -> None:
        """The user abandoned the work in `lane` (Stop): wait up to `wait` seconds for it to end (a
        cancelled reply records its interruption as it ends), then free the lane in any case, so a
        reply stuck in a slow call does not keep the user from sending again."""
        work = self.running(user_id, lane)
        if work is None or work.wait(wait):
            return
        self.locks.release(user_key(user_id), _lanes(work.kind), work)


def _lanes(kind: str) -> tuple[str, ...]:
    return LANES.get(kind, ("memory",))
