"""Where a user's files live. Paths come from a hash of the id, never from the id itself,
so no user id can reach outside the data directory or collide with another's."""

from __future__ import annotations

import hashlib
from pathlib import Path


def user_key(user_id: str) -> str:
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def user_dir(data_dir: Path, user_id: str) -> Path:
    return Path(data_dir) / "users" / user_key(user_id)
