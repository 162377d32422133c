"""One lock per key (per user): the one place that keeps such a dict of locks.

The order in which the app takes its per-user locks is written once, in sessions/work.py.
"""

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
