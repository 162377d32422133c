"""The one object the UI and the API talk to: every method takes a user id and checks it first.

It joins the store (what was said), the lifecycle (when memory is built), the
chat (replies) and the agent (what is remembered).
"""
from __future__ import annotations

import json
from typing import Iterator

from memory.errors import InvalidOptions, MemoryLibError
from memory.settings import LLMConfig, Options, Settings

from . import prefs as _prefs
from .chat import Chat, ChatUpdate
from .errors import UserError
from .ids import check_user_id
from .importer import MAX_FILE_BYTES, ImportFormatError, parse_history
from .lifecycle import EndResult, Lifecycle, Progress, check_date
from .graph_store import SqlGraphStore
from .store import MessageRow, SessionRow, Store, open_store
from .versions import MemoryVersions
from .text import clean_text, register_secret

EXPORT_FORMAT = "memory-chat-export/1"
MAX_MEMORY_ID_CHARS = 200

__all__ = ["SessionService", "UserError", "ChatUpdate", "EndResult"]


class SessionService:
    def __init__(self, settings: Settings, agent, store: Store | None = None):
        self.settings, self.agent = settings, agent
        register_secret(settings.llm.api_key)      # never stored or shown (sessions.text)
        self.store = store or open_store(settings.data_dir)
        if hasattr(agent, "use_graph_store"):      # the graph lives next to the sessions, shared by replicas
            graphs = SqlGraphStore(self.store.engine)
            graphs.import_json_folders(settings.data_dir)      # a data dir from before: JSON graph files
            agent.use_graph_store(graphs, MemoryVersions(self.store.engine))
        self.lifecycle = Lifecycle(self.store, agent, self.options, self.llm)
        self.chat = Chat(self.store, agent, self.lifecycle)

    # --- settings of a user ---------------------------------------------------------------
    def prefs(self, user_id: str) -> dict:
        return self.store.get_prefs(check_user_id(user_id))

    def options(self, user_id: str, strategy: str | None = None) -> Options:
        return _prefs.options_for(self.settings.options, self.prefs(user_id), strategy)

    def llm(self, user_id: str) -> LLMConfig | None:
        return _prefs.llm_for(self.settings.llm, self.prefs(user_id))

    def llm_public(self, user_id: str) -> dict:
        return _prefs.llm_public(self.settings.llm, self.prefs(user_id))

    def save_settings(self, user_id: str, options: dict, llm: dict | None = None) -> Options:
        """Validate and save; raises InvalidOptions (message for people) and keeps the old values."""
        p = self.prefs(user_id)
        new = dict(p, options=dict(p.get("options") or {}, **_prefs.validated_options(self.settings.options, options)))
        if llm is not None:
            new["llm"] = _prefs.validated_llm(llm)
        self.store.set_prefs(user_id, new)
        return self.options(user_id)

    def set_strategy(self, user_id: str, strategy: str) -> Options:
        opts = self.options(user_id, strategy)        # raises InvalidOptions on an unknown strategy
        self.store.set_prefs(user_id, dict(self.prefs(user_id), strategy=strategy))
        return opts

    # --- chat -------------------------------------------------------------------------------
    def current_session(self, user_id: str) -> SessionRow:
        return self.lifecycle.current(check_user_id(user_id))

    def messages(self, user_id: str, session_id: str | None = None) -> list[MessageRow]:
        user_id = check_user_id(user_id)
        sid = session_id or self.lifecycle.current(user_id).session_id
        return self.store.messages(user_id, sid)

    def send(self, user_id: str, message: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        user_id = check_user_id(user_id)
        return self.chat.send(user_id, message, self.options(user_id, strategy), self.llm(user_id))

    def retry(self, user_id: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        user_id = check_user_id(user_id)
        return self.chat.retry(user_id, self.options(user_id, strategy), self.llm(user_id))

    def compare(self, user_id: str, message: str) -> Iterator[dict]:
        user_id = check_user_id(user_id)
        return self.chat.compare(user_id, message, self.options(user_id), self.llm(user_id))

    def reply_for(self, user_id: str, message_id: int) -> MessageRow | None:
        """The reply a chat message stands for: itself if it is a reply, else the reply to it."""
        user_id = check_user_id(user_id)
        m = self.store.message(user_id, int(message_id))
        if m is None or m.role == "assistant":
            return m
        return self.store.reply_to(user_id, m.id)

    def last_reply(self, user_id: str) -> MessageRow | None:
        return self.store.last_reply(check_user_id(user_id))

    # --- sessions -----------------------------------------------------------------------------
    def end_session(self, user_id: str, next_date: str | None = None, progress: Progress | None = None) -> EndResult:
        return self.lifecycle.end(check_user_id(user_id), next_date, progress)

    def new_session(self, user_id: str, date: str, progress: Progress | None = None) -> EndResult:
        """Start a session on `date`; the open one is ended first if it has messages."""
        return self.lifecycle.end(check_user_id(user_id), check_date(date), progress)

    def sessions(self, user_id: str) -> list[SessionRow]:
        return self.store.sessions(check_user_id(user_id))

    def recover_pending_closes(self) -> int:
        return self.lifecycle.recover_all()

    def latest_new_memories(self, user_id: str) -> list[str]:
        """Memory ids added by the most recent completed close (marked "new" in the graph)."""
        for s in reversed(self.sessions(user_id)):
            if s.status == "closed" and s.report and not s.report.get("already_built"):
                return list(s.report.get("new_memories") or [])
        return []

    # --- memory views and management -------------------------------------------------------------
    def graph(self, user_id: str) -> dict:
        return self.agent.graph_view(check_user_id(user_id))

    def delete_memory(self, user_id: str, memory_id: str) -> bool:
        user_id = check_user_id(user_id)
        if not isinstance(memory_id, str) or not memory_id.strip() or len(memory_id) > MAX_MEMORY_ID_CHARS:
            raise UserError("Choose a memory to delete.")
        with self.store.close_claim(user_id):      # not while a replica links new memories to it
            return bool(self.agent.delete_memory(user_id, memory_id.strip()))

    def export(self, user_id: str) -> dict:
        """Everything kept about the user, as JSON: sessions (importable format) and both memories.

        The user id itself is left out: it is the browser's credential and a shared file must not leak it.
        """
        user_id = check_user_id(user_id)
        sessions = []
        for s in self.store.sessions(user_id):
            msgs = self.store.messages(user_id, s.session_id, include_errors=False)
            sessions.append({"date": s.date, "status": s.status, "source": s.source,
                             "turns": [{"speaker": m.role, "name": m.speaker, "text": m.text} for m in msgs]})
        return {"format": EXPORT_FORMAT, "sessions": [s for s in sessions if s["turns"]],
                "memory": self.agent.export_user(user_id), "settings": self.prefs(user_id)}

    def import_history(self, user_id: str, data: bytes | str, sample_id: str = "",
                       progress: Progress | None = None) -> EndResult:
        """Store a history (see sessions.importer) as closed sessions and build their memory at once."""
        user_id = check_user_id(user_id)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise ImportFormatError(f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
        if not data.strip():
            raise ImportFormatError("the file is empty")
        try:
            obj = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ImportFormatError(f"the file is not valid JSON ({e})") from None
        except RecursionError:
            raise ImportFormatError("the file is nested too deeply to be a history") from None
        try:
            parsed = parse_history(obj, clean_text(sample_id or "")[:200])
        except RecursionError:
            raise ImportFormatError("the file is nested too deeply to be a history") from None
        self.store.add_imported_sessions(user_id, [(s.date, s.turns) for s in parsed])
        result = EndResult(closed=self.lifecycle.close_pending(user_id, progress))
        result.session = self.lifecycle.current(user_id)
        built = [c for c in result.closed if c.report]
        n_turns = sum(len(s.turns) for s in parsed)
        result.message = (f"Imported {len(parsed)} sessions ({n_turns} turns); memory built for {len(built)} "
                          f"of {len(result.closed)}.")
        if result.errors:
            result.message += " " + result.errors[0]
        return result

    def forget(self, user_id: str) -> None:
        """Delete everything about the user: memory in every store first, then sessions and messages."""
        user_id = check_user_id(user_id)
        # The claim: no replica is building this user's memory while it is deleted.
        with self.lifecycle.lock(user_id), self.store.close_claim(user_id):
            self.agent.forget_user(user_id)
            self.store.delete_user(user_id)


def user_message(exc: BaseException) -> str:
    """What to show for an exception: its own text when written for people, else a generic line."""
    if isinstance(exc, (UserError, InvalidOptions)):
        return clean_text(str(exc))
    if isinstance(exc, MemoryLibError):
        return clean_text(f"The memory store had a problem: {exc}. Please try again.")
    return "Something went wrong. Please try again."
