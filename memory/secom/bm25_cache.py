"""SeCom's per-user BM25 index over the segment keys, kept until the user's segments change."""

from __future__ import annotations

import threading
from typing import Any

from ..bm25 import BM25Index


class BM25Cache:
    """Per-user BM25 over the segment keys, rebuilt from the store after a change. Thread-safe.

    `shared` (optional, e.g. the app's database): a per-user counter every process bumps after it
    changed segments, so a replica rebuilds its index when another one wrote.
    """

    def __init__(self, kind: str):
        self.kind = kind  # the records' kind, as `shared` counts it
        self._lock = threading.Lock()
        self._by_user: dict[str, tuple[BM25Index, list[Any], int]] = {}
        self._version: dict[str, int] = {}
        self.shared = None

    def invalidate(self, user_id: str) -> None:
        with self._lock:
            self._by_user.pop(user_id, None)
            self._version[user_id] = self._version.get(user_id, 0) + 1
        if self.shared is not None:
            self.shared.bump(user_id, self.kind)

    def get(self, user_id: str, load) -> tuple[BM25Index, list[Any]]:
        shared = self.shared.version(user_id, self.kind) if self.shared is not None else 0  # read before loading
        with self._lock:
            hit = self._by_user.get(user_id)
            version = self._version.get(user_id, 0)
        if hit is not None and hit[2] == shared:
            return hit[0], hit[1]
        hits = sorted(load(), key=lambda h: h.id)
        idx = BM25Index([h.document for h in hits])
        with self._lock:
            if self._version.get(user_id, 0) == version:  # not invalidated while we were loading
                self._by_user[user_id] = (idx, hits, shared)
        return idx, hits
