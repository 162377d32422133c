"""Fair sharing between users: one running job per user, a bounded pool for memory builds, limits.

* `JobGate`: a user runs at most one chat job (reply, compare) and one memory job
  (close, import) at a time. A second one of the same lane is refused at once with
  `Busy` ("busy with X"), before anything is stored, so nothing the user typed is
  half-saved or stored twice.
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
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager, suppress
from typing import TypeVar

from .errors import UserError

log = logging.getLogger(__name__)

T = TypeVar("T")
Progress = Callable[[float, str], None]

JOB_NAMES = {
    "reply": "answering your message",
    "compare": "comparing the strategies",
    "close": "building the memory of your session",
    "import": "importing your history",
    "forget": "deleting your data",
    "evaluate": "evaluating memory designs",
}


class Busy(UserError):
    """The user already has a job running; this one was not started."""

    def __init__(self, kind: str):
        self.kind = kind
        super().__init__(
            f"Busy with {JOB_NAMES.get(kind, kind)}: this request was not started and nothing "
            "was stored. Try again when it has finished."
        )


class LimitReached(UserError):
    """A per-user bound (imports per hour, stored sessions or memories) would be exceeded."""


# A user's jobs run in two lanes, one job per lane: the chat (a reply or a compare) and the memory
# (a build: close or import). So the chat stays usable while the user's memory is being built (a
# build can take minutes), and still no user can run more than two jobs at once. Forget takes both.
# An evaluation (sessions.evaluation) builds scratch memory only, so it has a lane of its own.
LANES = {
    "reply": ("chat",),
    "compare": ("chat",),
    "close": ("memory",),
    "import": ("memory",),
    "forget": ("chat", "memory"),
    "evaluate": ("evaluate",),
}


class JobGate:
    """Which user runs which job right now: one per lane (LANES) per user."""

    def __init__(self):
        self._running: dict[tuple[str, str], tuple[str, object]] = {}  # (user, lane) -> (kind, holder)
        self._lock = threading.Lock()

    def running(self, user_id: str) -> str | None:
        with self._lock:
            return next((k for (u, _), (k, _) in self._running.items() if u == user_id), None)

    @contextmanager
    def hold(self, user_id: str, kind: str) -> Iterator[None]:
        lanes = [(user_id, lane) for lane in LANES.get(kind, ("memory",))]
        token = object()
        with self._lock:
            for lane in lanes:
                if lane in self._running:
                    raise Busy(self._running[lane][0])
            for lane in lanes:
                self._running[lane] = (kind, token)
        try:
            yield
        finally:
            with self._lock:
                for lane in lanes:
                    if self._running.get(lane, (None, None))[1] is token:  # not a later holder's slot
                        self._running.pop(lane, None)

    def release(self, user_id: str, lane: str) -> None:
        """Free a lane whose job was abandoned (Stop: the cancelled reply may still be finishing)."""
        with self._lock:
            self._running.pop((user_id, lane), None)

    def stream(self, user_id: str, kind: str, make: Callable[[], Iterator[T]]) -> Iterator[T]:
        """A generator job: the slot is taken at the first step (Busy raised there) and freed when it
        ends, fails or is closed (the browser went away)."""
        with self.hold(user_id, kind):
            yield from make()


def _lower_priority(nice: int) -> None:
    # Linux schedules threads one by one: renicing this worker thread leaves the reply threads alone.
    if nice > 0 and hasattr(os, "setpriority"):
        with suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


class BuildPool:
    """A few worker threads for memory builds; callers wait for the result and see their place in line."""

    def __init__(self, workers: int = 1, nice: int = 10, poll: float = 0.25):
        self.workers = max(1, workers)
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
