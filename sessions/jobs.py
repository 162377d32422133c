"""Fair sharing between users: a bounded pool for memory builds, and per-user limits.
(Which work each user runs, one piece per lane, is sessions/work.py.)

* `BuildPool`: memory builds (session closes, imports) run on their own few worker
  threads, at a lower CPU priority, so replies of other users never queue behind
  them. A build waiting for a worker reports its place in line through the
  progress callback.
* `ImportRate`: the per-user bound on imports per hour (the bounds themselves are
  memory.settings.Limits, read with the other settings).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import suppress
from typing import TypeVar

from .errors import UserError

log = logging.getLogger(__name__)

T = TypeVar("T")
Progress = Callable[[float, str], None]


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
    short query, which one thread does as fast."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
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
