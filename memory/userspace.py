"""Where a user's files live, and the key a user is stored under.

Paths, collection names and database rows come from a hash of the id, never from the id itself:
no user id can reach outside the data directory or collide with another's, and a copy of the
stored data holds no credential (the id is the browser's bearer secret, sessions/users.py).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_KEY = re.compile(r"[0-9a-f]{40}")


def is_user_key(value: object) -> bool:
    return isinstance(value, str) and _KEY.fullmatch(value) is not None


def user_key(user_id: str) -> str:
    """sha256 of the id, 40 hex digits. A key is its own key: the server stores only keys and acts for
    users it knows by key alone (start-up recovery, the idle sweep), and those land in the same
    collections, folders and rows as the requests that carried the id. Issued ids never look like a
    key, and the entry points refuse one that does (sessions/users.py)."""
    if is_user_key(user_id):
        return user_id
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def user_dir(data_dir: Path, user_id: str) -> Path:
    return Path(data_dir) / "users" / user_key(user_id)
