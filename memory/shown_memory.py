"""The memory lines each reply of a session was shown, so that the next reply's prompt keeps them where
they were and only grows at its end.

A reply prompt used to end with the memory retrieved for its message, and the next message's prompt
replaced that block with its own: the model (llama.cpp's KV cache of the previous call's longest common
prefix, a server's prompt cache) read the whole memory block again at every message. Kept in place
before the message it was retrieved for, a block is read once; a later message's block lists only the
lines not already in the prompt. A session's prompt then holds the memory of all its messages.

Kept in process, newest first out (an LRU of `max_entries` replies): after a restart the model's cache
is gone anyway, and an earlier message without a remembered block simply has none before it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from .records import Turn


def _digest(text: str) -> str:
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


class ShownMemory:
    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._blocks: OrderedDict[tuple[str, str, str, str], tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(user_id: str, strategy: str, before: Turn | None, message: str) -> tuple[str, str, str, str]:
        # A message is known by its text and the turn before it (a session's first message by its text alone):
        # the turn ids of a reply's own message are not known yet when it is answered.
        return (user_id, strategy, _digest(before.text) if before else "", _digest(message))

    def blocks(self, user_id: str, strategy: str, history: list[Turn]) -> list[list[str]]:
        """For each turn of `history`, the memory lines shown before it ([] for a reply's turn and for a
        message this process did not answer)."""
        out: list[list[str]] = []
        with self._lock:
            for i, t in enumerate(history):
                lines: tuple[str, ...] = ()
                if t.speaker != "assistant":
                    key = self._key(user_id, strategy, history[i - 1] if i else None, t.text)
                    lines = self._blocks.get(key, ())
                out.append(list(lines))
        return out

    def remember(self, user_id: str, strategy: str, history: list[Turn], message: str, lines: list[str]) -> None:
        """The lines shown before `message`, the turn that follows `history`."""
        key = self._key(user_id, strategy, history[-1] if history else None, message)
        with self._lock:
            self._blocks[key] = tuple(lines)
            self._blocks.move_to_end(key)
            while len(self._blocks) > self.max_entries:
                self._blocks.popitem(last=False)

    def forget_user(self, user_id: str) -> None:
        """Drop a user's blocks (Forget me, a forgotten memory: a removed line must not come back)."""
        with self._lock:
            for key in [k for k in self._blocks if k[0] == user_id]:
                del self._blocks[key]
