"""Who holds which user id: ids are issued by this server, and only issued ids are served.

A user id is the bearer credential of a browser or an API client (sessions/ids.py). With
`issued_only` (the app's default), an id the server did not issue (a chosen "aaaa...", one of a
forgotten user) is refused, so per-user limits are per issued id; issuing is rate-limited per
client address on public deployments, so one client cannot mint ids to multiply those limits.
The database stores only each id's key (memory.userspace): an id shaped like a key is refused, so
the keys in a copy of the database are no credentials.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from memory.userspace import is_user_key

from .ids import InvalidUserId, UserKey, check_user_id, new_user_id
from .jobs import LimitReached

UNKNOWN = "Unknown user id: ids are given by this server. Reload the page (or call /new_user) to get one."


@dataclass(frozen=True)
class IdentityConfig:
    issued_only: bool = False  # the library default; the app turns it on (from_env)
    new_users_per_hour: int = 0  # per client address; 0: no bound

    @classmethod
    def from_env(cls, env: dict | None = None) -> IdentityConfig:
        """MEMORY_ISSUED_IDS_ONLY (default 1) and MEMORY_NEW_USERS_PER_HOUR (default 10 on a public
        deployment: a Space or a non-loopback listen address; 0 = no bound elsewhere)."""
        from memory.settings import listens_publicly

        e = os.environ if env is None else env
        public = bool(e.get("SPACE_ID")) or listens_publicly(e.get("GRADIO_SERVER_NAME", ""))
        try:
            per_hour = max(0, int(e.get("MEMORY_NEW_USERS_PER_HOUR", 10 if public else 0)))
        except ValueError:
            raise ValueError("MEMORY_NEW_USERS_PER_HOUR must be a whole number") from None
        return cls(issued_only=e.get("MEMORY_ISSUED_IDS_ONLY", "1") != "0", new_users_per_hour=per_hour)


class Identity:
    WINDOW = 3600.0

    def __init__(self, store, config: IdentityConfig | None = None, clock: Callable[[], float] = time.monotonic):
        self.store, self.config, self.clock = store, config or IdentityConfig(), clock
        self._issued: dict[str, deque] = {}
        self._lock = threading.Lock()

    def issue(self, client: str = "") -> str:
        """A new user id, registered; LimitReached when `client` asked for too many this hour."""
        self._take(client or "?")
        uid = new_user_id()
        self.store.ensure_user(UserKey.of(uid))
        return uid

    def register(self, user_id: str) -> str:
        """Serve `user_id` from now on (an id the server derived itself, e.g. a signed-in account's)."""
        uid = check_user_id(user_id)
        self.store.ensure_user(UserKey.of(uid))
        return uid

    def check(self, user_id: object) -> UserKey:
        """The id's key if the id may be used: well formed, not a key itself and, with `issued_only`,
        issued by this server."""
        if isinstance(user_id, UserKey):  # checked already, or read from the database by the server
            return user_id
        uid = check_user_id(user_id)
        if is_user_key(uid):
            raise InvalidUserId(UNKNOWN)
        key = UserKey.of(uid)
        if self.config.issued_only and not self.store.user_exists(key):
            raise InvalidUserId(UNKNOWN)
        return key

    def known(self, user_id: object) -> bool:
        try:
            self.check(user_id)
        except InvalidUserId:
            return False
        return True

    def _take(self, client: str) -> None:
        per_hour = self.config.new_users_per_hour
        if not per_hour:
            return
        now = self.clock()
        with self._lock:
            q = self._issued.setdefault(client, deque())
            while q and now - q[0] >= self.WINDOW:
                q.popleft()
            if len(q) >= per_hour:
                wait = int(self.WINDOW - (now - q[0])) // 60 + 1
                raise LimitReached(
                    f"This address has started {per_hour} new users in the last hour; try again in about "
                    f"{wait} minutes, or keep using the id you have."
                )
            q.append(now)
            if len(self._issued) > 100_000:  # bounded memory: forget the quietest clients
                for k in [k for k, v in self._issued.items() if not v or now - v[-1] >= self.WINDOW]:
                    del self._issued[k]


def client_of(request) -> str:
    """The client's address of a Gradio request (on a Space: the first X-Forwarded-For hop)."""
    if request is None:
        return ""
    headers = getattr(request, "headers", None) or {}
    forwarded = headers.get("x-forwarded-for", "") if os.environ.get("SPACE_ID") else ""
    if forwarded:
        return forwarded.split(",")[0].strip()
    client = getattr(request, "client", None)
    return str(getattr(client, "host", "") or "")
