"""The THEANINE graph in the app's relational database (memory.protocols.GraphStore).

Rows are keyed by the hash of the user id (memory.userspace.user_key), as the data dir and
the Chroma collections are. A save replaces whole session parts (memories + the edges that
session's close made + the built mark) and bumps the user's version, all in one
transaction: a crash leaves a session unbuilt, never half-built, and every replica sees
the new version on its next read and reloads its cached graph.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from memory.theanine.graph import load_parts
from memory.userspace import user_key

from . import damage, db
from .db import Damage
from .schema import graph_edges as E
from .schema import graph_memories as GM
from .schema import graph_sessions as GS
from .schema import graph_versions as GV

log = logging.getLogger(__name__)

MEMORY_FIELDS = ("id", "event", "time", "session_id", "ts", "seq", "turns", "speaker", "built_by", "excerpt")
IMPORTED_SUFFIX = ".imported"  # a migrated JSON folder is renamed, never deleted


class SqlGraphStore:
    def __init__(self, engine):
        self.engine = engine

    # --- GraphStore -----------------------------------------------------------
    def version(self, user_id: str) -> int:
        with db.read(self.engine) as c:
            return int(c.execute(sa.select(GV.c.version).where(GV.c.user_key == user_key(user_id))).scalar() or 0)

    def load(self, user_id: str) -> tuple[list[dict], int]:
        return self.load_key(user_key(user_id))

    def user_keys(self) -> list[str]:
        """Whose graphs are stored (hashes; for maintenance and checks)."""
        with db.read(self.engine) as c:
            return list(c.execute(sa.select(GS.c.user_key).distinct().order_by(GS.c.user_key)).scalars())

    def load_key(self, k: str) -> tuple[list[dict], int]:
        """The user's graph parts. A memory whose stored turns cannot be read is left out, with its
        edges, and quarantined: the rest of the graph loads (sessions/damage.py)."""
        damaged: list[Damage] = []
        with db.read(self.engine) as c:
            if c.dialect.name == "postgresql":  # one snapshot for the four reads
                c.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            version = int(c.execute(sa.select(GV.c.version).where(GV.c.user_key == k)).scalar() or 0)
            parts = {
                sid: {"version": 2, "session_id": sid, "memories": [], "edges": []}
                for sid in c.execute(sa.select(GS.c.session_id).where(GS.c.user_key == k)).scalars()
            }
            for r in c.execute(sa.select(GM).where(GM.c.user_key == k).order_by(GM.c.seq)):
                turns, bad = db.read_json("graph_memories", "turns", r.turns)
                if bad:
                    damaged.append(Damage("graph_memories", r.memory_id, "turns", r.session_id, r.turns))
                elif r.session_id in parts:
                    parts[r.session_id]["memories"].append(
                        {
                            "id": r.memory_id,
                            "event": r.event,
                            "time": r.time,
                            "session_id": r.session_id,
                            "ts": r.ts,
                            "seq": r.seq,
                            "turns": turns,
                            "speaker": r.speaker,
                            "built_by": r.built_by,
                            "excerpt": r.excerpt,
                        }
                    )
            left_out = {d.row_key for d in damaged}
            for r in c.execute(sa.select(E).where(E.c.user_key == k).order_by(E.c.src, E.c.dst)):
                if r.owner in parts and r.src not in left_out and r.dst not in left_out:
                    parts[r.owner]["edges"].append([r.src, r.dst, r.relation])
        if damaged:
            damage.flag(self.engine, k, damaged)
        return list(parts.values()), version

    def save(self, user_id: str, parts: list[dict], new_session: str | None = None) -> int | None:
        try:
            return self._save(user_key(user_id), parts, new_session)
        except _Rollback:
            return None

    def _save(self, k: str, parts: list[dict], new_session: str | None) -> int:
        with db.write(self.engine) as c:
            version = self._bump(c, k)  # on PostgreSQL this row lock also orders the user's writers
            if (
                new_session is not None
                and c.execute(
                    sa.select(GS.c.session_id).where(GS.c.user_key == k, GS.c.session_id == new_session)
                ).first()
                is not None
            ):
                raise _Rollback()
            for part in parts:
                self._write_part(c, k, part)
            return version

    def drop(self, user_id: str) -> None:
        k = user_key(user_id)
        with db.write(self.engine) as c:
            for t in (GM, E, GS):
                c.execute(t.delete().where(t.c.user_key == k))
            damage.clear(c, k, "graph_memories")
            self._bump(c, k)  # the counter row stays (a hash and a number) so no replica mistakes an old cache

    def set_session_time(self, user_id: str, session_id: str, time_text: str, ts: str) -> None:
        """A session's date was corrected: its memories carry the new date (text and sortable key)."""
        k = user_key(user_id)
        with db.write(self.engine) as c:
            c.execute(
                GM.update().where(GM.c.user_key == k, GM.c.session_id == session_id).values(time=time_text, ts=ts)
            )
            self._bump(c, k)

    # --- repair of damaged rows (sessions/damage.py) ------------------------------
    def unbuild(self, c: Connection, k: str, session_id: str) -> None:
        """Mark a session's memory as not built: its part (memories, the edges its close made, the
        built mark) and its quarantine flags go, so the next close builds it again from its turns."""
        mids = sa.select(GM.c.memory_id).where(GM.c.user_key == k, GM.c.session_id == session_id)
        # Edges touching its memories go too, whichever close made them: the rebuild links them anew.
        touching = sa.or_(E.c.owner == session_id, E.c.src.in_(mids), E.c.dst.in_(mids))
        c.execute(E.delete().where(E.c.user_key == k, touching))
        for t in (GM, GS):
            c.execute(t.delete().where(t.c.user_key == k, t.c.session_id == session_id))
        for mid in damage.quarantined_memories(c, k, session_id):
            damage.clear(c, k, "graph_memories", mid)
        self._bump(c, k)

    def drop_memory_row(self, c: Connection, k: str, memory_id: str) -> None:
        """Delete one (damaged) memory row and its edges; the rest of its session stays built."""
        c.execute(GM.delete().where(GM.c.user_key == k, GM.c.memory_id == memory_id))
        c.execute(E.delete().where(E.c.user_key == k, sa.or_(E.c.src == memory_id, E.c.dst == memory_id)))
        damage.clear(c, k, "graph_memories", memory_id)
        self._bump(c, k)

    # --- helpers --------------------------------------------------------------
    @staticmethod
    def _bump(c: Connection, k: str) -> int:
        return db.bump_version(c, GV, {"user_key": k})

    @staticmethod
    def _write_part(c: Connection, k: str, part: dict) -> None:
        sid = part["session_id"]
        # A quarantined memory is not in the loaded graph, so not in `part`: its row is kept for repair.
        kept = damage.quarantined_memories(c, k, sid)
        c.execute(GM.delete().where(GM.c.user_key == k, GM.c.session_id == sid, GM.c.memory_id.not_in(kept)))
        c.execute(E.delete().where(E.c.user_key == k, E.c.owner == sid))
        c.execute(GS.delete().where(GS.c.user_key == k, GS.c.session_id == sid))
        mems = [m for m in part.get("memories") or [] if m["id"] not in kept]
        if mems:
            c.execute(
                GM.insert(),
                [
                    {
                        "user_key": k,
                        "memory_id": m["id"],
                        "session_id": m["session_id"],
                        "seq": int(m.get("seq") or 0),
                        "event": m["event"],
                        "time": m.get("time", ""),
                        "ts": m.get("ts", ""),
                        "turns": json.dumps(m.get("turns") or []),
                        "speaker": m.get("speaker", ""),
                        "built_by": m.get("built_by", ""),
                        "excerpt": m.get("excerpt", ""),
                    }
                    for m in mems
                ],
            )
        edges = {(a, b): r for a, b, r in part.get("edges") or []}
        if edges:
            c.execute(
                E.insert(),
                [{"user_key": k, "src": a, "dst": b, "relation": r, "owner": sid} for (a, b), r in edges.items()],
            )
        c.execute(GS.insert().values(user_key=k, session_id=sid, built_at=time.time()))

    # --- migration of JSON graph folders ----------------------------------------
    def import_json_folders(self, data_dir: Path | str) -> dict[str, int]:
        """Move every users/<key>/theanine_graph folder of a data dir into the database.

        Per user, one transaction; sessions the database already has are kept as they are (so a
        rerun after a crash between commit and rename changes nothing). The folder is then
        renamed to theanine_graph.imported: the files stay, nothing is lost.
        Returns {user_key: sessions imported}.
        """
        out = {}
        for folder in sorted(Path(data_dir).glob("users/*/theanine_graph")):
            if not folder.is_dir():
                continue
            k = folder.parent.name
            parts = load_parts(folder)
            with db.write(self.engine) as c:
                have = set(c.execute(sa.select(GS.c.session_id).where(GS.c.user_key == k)).scalars())
                todo = [p for p in parts if p["session_id"] not in have]
                for p in todo:
                    self._write_part(c, k, p)
                if todo:
                    self._bump(c, k)
            out[k] = len(todo)
            target = folder.with_name(folder.name + IMPORTED_SUFFIX)
            if target.exists():
                target = folder.with_name(f"{folder.name}{IMPORTED_SUFFIX}-{int(time.time())}")
            folder.rename(target)
            log.info("graph of user %s...: %d session(s) moved from JSON files into the database", k[:8], len(todo))
        return out


class _Rollback(Exception):
    """Raised inside a transaction to roll it back (the session was already built)."""
