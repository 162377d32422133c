"""The memory's room of the front door: what the user's memory holds (the graph, the segments, the turns a
memory came from) and forgetting one memory everywhere. Recall and the memory's history read through it
(sessions/recall.py)."""

from __future__ import annotations

from memory.protocols import Agent
from memory.text import plural

from . import upkeep
from .db import UserError
from .lifecycle import Lifecycle
from .session_room import SessionRoom
from .store import Store
from .user_room import UserRoom
from .users import UserKey, own_key
from .work import UserWork

REDACTED = "(removed at the user's request)"
MAX_MEMORY_ID_CHARS = 200


class MemoryRoom:
    def __init__(
        self, users: UserRoom, sessions: SessionRoom, store: Store, lifecycle: Lifecycle, agent: Agent, work: UserWork
    ):
        self.users, self.sessions, self.store, self.lifecycle = users, sessions, store, lifecycle
        self.agent, self.work = agent, work

    def graph(self, key: UserKey) -> dict:
        return self.agent.graph_view(own_key(key))

    def segments(self, key: UserKey) -> list[dict]:
        """The user's SeCom segments (text, key, session)."""
        return list(self.agent.export_user(own_key(key)).get("secom_segments") or [])

    def turn_texts(self, key: UserKey, turn_ids) -> dict[str, tuple[str, str]]:
        """{turn id: (speaker, text)} for the given turn ids (a memory's provenance), from the transcript."""
        key = own_key(key)
        wanted = {str(t) for t in turn_ids or ()}
        out: dict[str, tuple[str, str]] = {}
        if not wanted:
            return out
        for s in self.store.sessions(key):
            if s.status == "open":
                continue
            for t in self.lifecycle.record(key, s).turns:
                if t.turn_id in wanted:
                    out[t.turn_id] = (t.speaker, t.text)
            if len(out) == len(wanted):
                break
        return out

    def delete(self, key: UserKey, memory_id: str, redact: bool = False) -> dict | None:
        """Forget one memory everywhere: THEANINE (graph and Chroma) and SeCom (the segments built from
        its source turns, rebuilt without them). With `redact`, those turns are also blanked in the
        transcript. Returns what was removed and kept ("message" says it for people), or None when
        the memory does not exist."""
        key = own_key(key)
        if not isinstance(memory_id, str) or not memory_id.strip() or len(memory_id) > MAX_MEMORY_ID_CHARS:
            raise UserError("Choose a memory to delete.")
        records: dict[str, tuple] = {}

        def session_of(session_id: str):
            if session_id not in records:
                row = self.store.session(key, session_id)
                msgs = self.store.messages(key, session_id, include_errors=False) if row else []
                rec = self.lifecycle.record(key, row) if row else None
                records[session_id] = (rec, msgs)
            return records[session_id][0]

        # The memory lane and the claim: not while this process or a replica builds the user's memory.
        with self.work.hold(key, "delete"), self.store.close_claim(key):
            gone = self.agent.forget_memory(key, memory_id.strip(), session_of)
        if gone is None:
            return None
        rec = session_of(gone["session_id"])  # the transcript as it is before any redaction
        source = {t.turn_id: (t.speaker, t.text) for t in (rec.turns if rec else []) if t.turn_id in set(gone["turns"])}
        gone["copies_scrubbed"] = upkeep.database(
            self.store.engine, key, upkeep.Forgotten.of(gone["memory"], gone["event"], source)
        )
        redacted = 0
        if redact and gone["turns"]:
            session_of(gone["session_id"])
            rec, msgs = records.get(gone["session_id"], (None, []))
            # record() lists the session's ok messages in order, one turn each: map turn ids back to rows.
            ids = [
                m.id for t, m in zip(rec.turns if rec else [], msgs, strict=False) if t.turn_id in set(gone["turns"])
            ]
            redacted = self.store.redact_messages(key, ids, REDACTED)
        gone["redacted"] = redacted
        gone["message"] = forget_message(gone)
        upkeep.purge_deleted(self.agent, self.store.engine)
        return gone


def forget_message(gone: dict) -> str:
    """What a deletion removed and what it kept, for people."""
    n_turns, rebuilt, removed = len(gone["turns"]), len(gone["segments_rebuilt"]), len(gone["segments_removed"])
    parts = [f"Deleted the memory “{gone['event']}” from THEANINE (graph and vector store)."]
    if n_turns:
        parts.append(
            f"SeCom: its {plural(n_turns, 'source turn')} taken out of "
            f"{plural(rebuilt + removed, 'segment')} ({rebuilt} rebuilt without them, {removed} removed)."
        )
    else:
        parts.append("It has no recorded source turns, so SeCom's segments are unchanged.")
    if gone.get("redacted"):
        parts.append(f"Transcript: {plural(gone['redacted'], 'turn')} redacted.")
    else:
        parts.append("Kept: the session's transcript (tick “also redact” to blank those turns).")
    if gone.get("copies_scrubbed"):
        parts.append(
            f"Also taken out of {plural(gone['copies_scrubbed'], 'stored copy', 'stored copies')} (traces, excerpts)."
        )
    return " ".join(parts)
