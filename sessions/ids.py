"""User ids: unguessable bearer tokens, validated before any use.

A user id is the only credential a browser (or an API client) holds, so it is
random (secrets), and its shape is checked at every entry point: an id that
does not match never reaches the database, the memory store or a file path.

Inside the server a user is its key (`UserKey`, a hash of the id: memory.userspace): the database,
the memory stores, the files and the per-user locks all hold the key, so a copy of the database
is no list of credentials.
"""

from __future__ import annotations

import re
import secrets

from memory.userspace import user_key

from .errors import UserError

USER_ID_RE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")


class InvalidUserId(UserError):
    """The user id is missing or has the wrong shape."""


class UserKey(str):
    """A user's key, as the server holds it: made from an id that passed the entry checks
    (`SessionService.user`), or read from the database by the server itself (start-up recovery, the
    idle sweep). Only this type is taken as already checked: a key a client sends as its id is a
    plain string, and refused."""

    __slots__ = ()

    @classmethod
    def of(cls, user_id: str) -> UserKey:
        return cls(user_key(user_id))


def new_user_id() -> str:
    while True:
        uid = secrets.token_urlsafe(24)  # 32 url-safe characters, 192 bits
        if not uid.startswith("hf-"):  # that prefix marks signed-in accounts (sessions/accounts.py)
            return uid


def check_user_id(value: object) -> str:
    if not isinstance(value, str) or not USER_ID_RE.fullmatch(value):
        raise InvalidUserId("Unknown or malformed user id. Reload the page to get a fresh one.")
    return value


def is_user_id(value: object) -> bool:
    return isinstance(value, str) and bool(USER_ID_RE.fullmatch(value))
