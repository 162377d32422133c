"""Per-user exclusion: `UserLocks`, its one owner (and the order of its levels), on `KeyedLocks`, the one
place that keeps a dict of locks by key."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any


class KeyedLocks:
    """A lock per key, made on first use and kept. Thread-safe.

    `with locks.hold(key): ...` or `with locks[key]: ...`; `reentrant=True` gives RLocks (a holder
    may take its own key's lock again).
    """

    def __init__(self, reentrant: bool = False):
        self._make = threading.RLock if reentrant else threading.Lock
        self._locks: dict[Hashable, Any] = {}
        self._guard = threading.Lock()

    def __getitem__(self, key: Hashable) -> Any:
        """The key's lock (a `threading.Lock`, or `RLock` when reentrant)."""
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = self._make()
            return lock

    @contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        """Hold the key's lock for the `with` block."""
        with self[key]:
            yield

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)


class UserLocks:
    """The one owner of per-user exclusion in a process: every per-user lock that the app and the memory
    library take is one of these. A holder may take a later level, never an earlier one:

    1. Lanes (`take`, `release`, `holder`): which work the user runs, one holder per named lane. Never
       waits: a busy lane is reported at once (sessions.work.UserWork keeps its work records on them).
    2. The close claim is not here: it excludes other replicas, which no lock of this process can
       (sessions.work.close_claim: an advisory lock of the database server, or a file lock).
    3. `writer(user)`: one build or deletion of the user's memory at a time (MemoryAgent); waits. It is
       taken by the benchmarks too, which run the library without the app's lanes.
    4. `data(user)`: short sections over the user's cached memory (THEANINE's graph); reentrant, never
       held across an LLM call.
    """

    def __init__(self) -> None:
        self._writers = KeyedLocks()
        self._data = KeyedLocks(reentrant=True)
        self._lanes: dict[tuple[str, str], object] = {}  # (user, lane) -> its holder
        self._lanes_guard = threading.Lock()

    def take(self, user: str, lanes: tuple[str, ...], holder: object) -> object | None:
        """Give `holder` every one of the user's `lanes`, or none: None when taken, else whoever holds
        one of them."""
        with self._lanes_guard:
            for lane in lanes:
                if (user, lane) in self._lanes:
                    return self._lanes[(user, lane)]
            for lane in lanes:
                self._lanes[(user, lane)] = holder
        return None

    def release(self, user: str, lanes: tuple[str, ...], holder: object) -> None:
        """Free those of the user's `lanes` that `holder` still holds (not a later holder's)."""
        with self._lanes_guard:
            for lane in lanes:
                if self._lanes.get((user, lane)) is holder:
                    del self._lanes[(user, lane)]

    def holder(self, user: str, lane: str | None = None) -> object | None:
        """Who holds the user's `lane` (any lane when None), or None."""
        with self._lanes_guard:
            return next((h for (u, ln), h in self._lanes.items() if u == user and lane in (None, ln)), None)

    def writer(self, user: str) -> Any:
        """The user's writer lock (a `threading.Lock`)."""
        return self._writers[user]

    def data(self, user: str) -> Any:
        """The user's data lock (a `threading.RLock`)."""
        return self._data[user]
