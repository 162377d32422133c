"""The chat's room of the front door: replies (send, Retry, Stop), Compare, and the replies they stored."""

from __future__ import annotations

from collections.abc import Iterator

from .db import NOT_STORED, outage_as
from .lifecycle import Chat, ChatUpdate
from .store import MessageRow, Store
from .user_room import UserRoom
from .users import UserKey, own_key
from .work import UserWork

STOP_WAIT_S = 2.0  # Stop waits this long for the cancelled reply to record its interruption


class ChatRoom:
    def __init__(self, users: UserRoom, store: Store, chat: Chat, work: UserWork):
        self.users, self.store, self.chat, self.work = users, store, chat, work

    def send(self, key: UserKey, message: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        key = own_key(key)
        with outage_as(NOT_STORED):  # nothing was stored: the sender keeps the text
            opts, llm = self.users.choices(key, strategy)
        return self.work.stream(key, "reply", lambda: self.chat.send(key, message, opts, llm))

    def prepare(self, key: UserKey, draft: str, strategy: str | None = None) -> int:
        """The person is typing `draft`: the memory for it and its prompt are read into the embedded
        model's cache so that Send waits less (MemoryAgent.prepare). Skipped while a reply of the user
        runs; the tokens read ahead."""
        key = own_key(key)
        if self.running(key):
            return 0
        opts, llm = self.users.choices(key, strategy)
        return self.chat.prepare(key, draft, opts, llm)

    def retry(self, key: UserKey, strategy: str | None = None) -> Iterator[ChatUpdate]:
        key = own_key(key)
        opts, llm = self.users.choices(key, strategy)
        return self.work.stream(key, "reply", lambda: self.chat.retry(key, opts, llm))

    def stop(self, key: UserKey) -> None:
        """The user pressed Stop: once the cancelled reply has recorded its interruption (or after
        STOP_WAIT_S, when it is stuck in a slow call), the chat lane is free for Retry."""
        key = own_key(key)
        self.work.stop(key, "chat", STOP_WAIT_S)

    def running(self, key: UserKey) -> bool:
        """A reply (or a comparison) of the user is running now (this process's state, no database read)."""
        return self.work.running(key, "chat") is not None

    def compare(self, key: UserKey, message: str) -> Iterator[dict]:
        key = own_key(key)
        opts, llm = self.users.choices(key)
        return self.work.stream(key, "compare", lambda: self.chat.compare(key, message, opts, llm))

    def last_compare(self, key: UserKey) -> dict | None:
        """The user's latest comparison (message, results, session, time): the page shows it again after a reload."""
        key = own_key(key)
        rows = self.store.compares(key, last=1)
        return rows[0] if rows else None

    def reply_for(self, key: UserKey, message_id: int) -> MessageRow | None:
        """The reply a chat message stands for: itself if it is a reply, else the reply to it."""
        key = own_key(key)
        m = self.store.message(key, int(message_id))
        if m is None or m.role == "assistant":
            return m
        return self.store.reply_to(key, m.id)

    def last_reply(self, key: UserKey) -> MessageRow | None:
        key = own_key(key)
        return self.store.last_reply(key)
