"""The front door's flat names, for the tests only (the app, bench/ and `python -m sessions` call the rooms)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memory.records import Progress
from memory.settings import LLMConfig, Options
from sessions.db import NOT_STORED, outage_as
from sessions.lifecycle import ChatUpdate, EndResult
from sessions.service import SessionService
from sessions.store import MessageRow, SessionRow
from sessions.work import Work


class FlatService(SessionService):
    """The tests' shorthand for the front door: `svc.send(user_id, text)` stands for
    `service.rooms.chat.send(service.user(user_id), text)`, each method resolving the id first and calling
    its room as the flat names of `SessionService` did before issue 45. It wraps a service `open_service`
    built and is one (what the page's handlers and the API take): its state stays the wrapped service's,
    read through `__getattr__` (`rooms`, `store`, `agent`, `work` ...), and `.service` is the service itself."""

    def __init__(self, service: SessionService):  # the wrapped service was built: nothing to build again
        self.service = service

    def __getattr__(self, name: str) -> Any:
        if name == "service":  # not set yet (a copy being made): no wrapped service to ask
            raise AttributeError(name)
        return getattr(self.service, name)

    def new_user(self, request=None) -> str:
        return self.service.rooms.users.new_user(request)

    def sign_in(self, account_id: str) -> str:
        return self.service.rooms.users.sign_in(account_id)

    def is_known(self, user_id: object) -> bool:
        return self.service.rooms.users.is_known(user_id)

    def prefs(self, user_id: str) -> dict:
        return self.service.rooms.users.prefs(self.service.user(user_id))

    def options(self, user_id: str, strategy: str | None = None) -> Options:
        return self.service.rooms.users.options(self.service.user(user_id), strategy)

    def llm(self, user_id: str) -> LLMConfig | None:
        return self.service.rooms.users.llm(self.service.user(user_id))

    def llm_public(self, user_id: str) -> dict:
        return self.service.rooms.users.llm_public(self.service.user(user_id))

    def save_settings(self, user_id: str, options: dict, llm: dict | None = None) -> Options:
        return self.service.rooms.users.save_settings(self.service.user(user_id), options, llm)

    def set_strategy(self, user_id: str, strategy: str) -> Options:
        return self.service.rooms.users.set_strategy(self.service.user(user_id), strategy)

    def current_session(self, user_id: str) -> SessionRow:
        return self.service.rooms.sessions.current(self.service.user(user_id))

    def messages(self, user_id: str, session_id: str | None = None) -> list[MessageRow]:
        return self.service.rooms.sessions.messages(self.service.user(user_id), session_id)

    def message(self, user_id: str, message_id: int) -> MessageRow | None:
        return self.service.rooms.sessions.message(self.service.user(user_id), message_id)

    def send(self, user_id: str, message: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        with outage_as(NOT_STORED):  # nothing was stored: the sender keeps the text
            key = self.service.user(user_id)
        return self.service.rooms.chat.send(key, message, strategy)

    def retry(self, user_id: str, strategy: str | None = None) -> Iterator[ChatUpdate]:
        return self.service.rooms.chat.retry(self.service.user(user_id), strategy)

    def stop_reply(self, user_id: str) -> None:
        self.service.rooms.chat.stop(self.service.user(user_id))

    def compare(self, user_id: str, message: str) -> Iterator[dict]:
        return self.service.rooms.chat.compare(self.service.user(user_id), message)

    def last_compare(self, user_id: str) -> dict | None:
        return self.service.rooms.chat.last_compare(self.service.user(user_id))

    def reply_for(self, user_id: str, message_id: int) -> MessageRow | None:
        return self.service.rooms.chat.reply_for(self.service.user(user_id), message_id)

    def last_reply(self, user_id: str) -> MessageRow | None:
        return self.service.rooms.chat.last_reply(self.service.user(user_id))

    def chat_running(self, user_id: str) -> bool:
        return self.service.work.running(user_id, "chat") is not None  # this process's state: no id to check

    def memory_work_running(self, user_id: str) -> Work | None:
        return self.service.rooms.sessions.memory_work_running(user_id)

    def memory_work_finished(self, user_id: str) -> Work | None:
        return self.service.rooms.sessions.memory_work_finished(user_id)

    def take_memory_work_finished(self, user_id: str) -> Work | None:
        return self.service.rooms.sessions.take_memory_work_finished(user_id)

    def end_session(
        self, user_id: str, next_date: str | None = None, progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        return self.service.rooms.sessions.end(self.service.user(user_id), next_date, progress, build)

    def new_session(self, user_id: str, date: str, progress: Progress | None = None, build: bool = True) -> EndResult:
        return self.service.rooms.sessions.new(self.service.user(user_id), date, progress, build)

    def build_pending(self, user_id: str, progress: Progress | None = None) -> EndResult:
        return self.service.rooms.sessions.build_pending(self.service.user(user_id), progress)

    def start_build(self, user_id: str, kind: str = "close") -> Work:
        return self.service.rooms.sessions.start_build(self.service.user(user_id), kind)

    def default_next_date(self, user_id: str) -> str:
        return self.service.rooms.sessions.default_next_date(self.service.user(user_id))

    def sessions(self, user_id: str) -> list[SessionRow]:
        return self.service.rooms.sessions.in_order(self.service.user(user_id))

    def recover_pending_closes(self) -> int:
        return self.service.rooms.sessions.recover_pending_closes()

    def latest_new_memories(self, user_id: str) -> list[str]:
        return self.service.rooms.sessions.latest_new_memories(self.service.user(user_id))

    def set_session_date(
        self, user_id: str, session_id: str, date: str, progress: Progress | None = None, build: bool = True
    ) -> str:
        return self.service.rooms.sessions.set_date(self.service.user(user_id), session_id, date, progress, build)

    def graph(self, user_id: str) -> dict:
        return self.service.rooms.memory.graph(self.service.user(user_id))

    def segments(self, user_id: str) -> list[dict]:
        return self.service.rooms.memory.segments(self.service.user(user_id))

    def turn_texts(self, user_id: str, turn_ids) -> dict[str, tuple[str, str]]:
        return self.service.rooms.memory.turn_texts(self.service.user(user_id), turn_ids)

    def delete_memory(self, user_id: str, memory_id: str, redact: bool = False) -> dict | None:
        return self.service.rooms.memory.delete(self.service.user(user_id), memory_id, redact)

    def export(self, user_id: str) -> dict:
        return self.service.rooms.data.export(self.service.user(user_id))

    def import_history(
        self, user_id: str, data: bytes | str, sample_id: str = "", progress: Progress | None = None, build: bool = True
    ) -> EndResult:
        return self.service.rooms.data.import_history(self.service.user(user_id), data, sample_id, progress, build)

    def forget(self, user_id: str) -> dict[str, int]:
        return self.service.rooms.data.forget(self.service.user(user_id))

    def damage(self, user_id: str) -> list[dict]:
        return self.service.rooms.data.damage(self.service.user(user_id))

    def repair(self, user_id: str, item: str, action: str, progress: Progress | None = None, build: bool = True) -> str:
        return self.service.rooms.data.repair(self.service.user(user_id), item, action, progress, build)
