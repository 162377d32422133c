"""Per-user change counters in the shared database (memory_versions): a process that changed a
user's memory of some kind bumps it; every replica compares it with the one its cache was built at."""

from __future__ import annotations

import sqlalchemy as sa

from memory.userspace import user_key

from . import db
from .schema import memory_versions as V


class MemoryVersions:
    def __init__(self, engine):
        self.engine = engine

    def version(self, user_id: str, kind: str) -> int:
        with db.read(self.engine) as c:
            return int(
                c.execute(sa.select(V.c.version).where(V.c.user_key == user_key(user_id), V.c.kind == kind)).scalar()
                or 0
            )

    def bump(self, user_id: str, kind: str) -> int:
        with db.write(self.engine) as c:
            return db.bump_version(c, V, {"user_key": user_key(user_id), "kind": kind})
