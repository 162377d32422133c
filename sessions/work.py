"""The one registry of a user's running work, and the one order of the per-user locks.

A user's work runs in lanes, one piece of work per lane (LANES): the chat (a reply or a compare),
the memory (a build, an import, deleting a memory, Forget me) and evaluations. So the chat stays usable while the
user's memory is built (a build can take minutes), and still no user runs more than one piece of
work of a kind. A second piece for a busy lane is refused at once with `Busy`, before anything is
stored, so nothing the user typed is half-saved or stored twice. The page, the API and the service
all ask this registry what a user is running (`running`); background work (`start`) reports its
progress on its `Work` record, and whoever needs its end waits for it (`Work.wait`).

Lock order. These are all the per-user locks; whoever holds one may take a later one, never an
earlier one:

1. The user's lanes, here (`UserWork.hold`, `stream`, `start`): in this process; never waits
   (a busy lane raises `Busy`).
2. The close claim (`Store.close_claim`, sessions/claims.py): across processes (replicas); waits.
   Held while the user's memory is built (`Lifecycle.close_pending`), deleted (Forget me) or a
   memory is deleted.
3. The memory library's writer lock of the user (`MemoryAgent`): one build or deletion of the
   user's memory at a time, also where the library runs without this registry (the benchmarks).
4. Short data locks, never held across an LLM call: THEANINE's graph lock of the user
   (`TheanineMemory.lock`, reentrant), SeCom's BM25 cache lock, this registry's table lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memory.userspace import user_key

from .errors import UserError

log = logging.getLogger(__name__)

T = TypeVar("T")

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

    def __init__(self):
        self._held: dict[tuple[str, str], Work] = {}  # (user, lane) -> the work holding it
        self._finished: dict[tuple[str, str], Work] = {}  # background work whose end is not yet shown
        self._lock = threading.Lock()

    def running(self, user_id: str, lane: str | None = None) -> Work | None:
        """The user's work in `lane` (any lane when None), or None."""
        user_id = user_key(user_id)
        with self._lock:
            return next((w for (u, ln), w in self._held.items() if u == user_id and lane in (None, ln)), None)

    def _take(self, user_id: str, kind: str) -> Work:
        user_id = user_key(user_id)
        lanes = [(user_id, lane) for lane in _lanes(kind)]
        work = Work(kind=kind)
        with self._lock:
            for lane in lanes:
                if lane in self._held:
                    raise Busy(self._held[lane].kind)
            for lane in lanes:
                self._held[lane] = work
        return work

    def _free(self, user_id: str, work: Work) -> None:
        user_id = user_key(user_id)
        with self._lock:
            for lane in _lanes(work.kind):
                if self._held.get((user_id, lane)) is work:  # not a later holder's lane (after Stop)
                    del self._held[(user_id, lane)]
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
        user_id = user_key(user_id)
        work = self.running(user_id, lane)
        if work is None or work.wait(wait):
            return
        with self._lock:
            for ln in _lanes(work.kind):
                if self._held.get((user_id, ln)) is work:
                    del self._held[(user_id, ln)]


def _lanes(kind: str) -> tuple[str, ...]:
    return LANES.get(kind, ("memory",))
