"""Replies: store the user's message first, stream the agent's reply, store it (or its error).

The user message is committed before the LLM is called, so a failing or
interrupted model loses nothing: Retry answers the last stored message again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memory.records import Turn
from memory.settings import COMPARE_COLUMNS, LLMConfig, Options
from memory.text import clean_obj, clean_text

from .errors import NOT_STORED, DatabaseUnavailable, UserError, database_down
from .lifecycle import Lifecycle
from .store import MessageRow, SessionRow, Store

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 200_000  # stored whole; the agent cuts what the LLM reads (with a notice)
INTERRUPTED = "The reply was interrupted before it finished. Your message is saved; press Retry."
EMPTY_REPLY = "The language model gave an empty answer. Your message is saved; press Retry."
REPLY_NOT_STORED = (
    "The database cannot be reached just now: your message is saved, but its reply could not be stored. "
    "Press Retry in a moment."
)


@dataclass
class ChatUpdate:
    kind: str  # "stored" | "status" | "delta" | "done"
    text: str = ""  # the reply so far ("done": the whole reply)
    status: str = ""  # what the agent is doing
    message_id: int | None = None  # the stored user message
    reply_id: int | None = None  # the stored reply ("done")
    trace: dict | None = None  # the reply's trace ("done")
    error: str | None = None  # a message for people ("done" when the reply failed)


def check_message(text: str | None) -> str:
    """The message as stored: unencodable and control characters cleaned (memory.text), trimmed."""
    if text is not None and not isinstance(text, str):
        raise UserError("A message must be text.")
    text = clean_text(text).strip()
    if not text:
        raise UserError("Type a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise UserError(f"The message is longer than {MAX_MESSAGE_CHARS} characters; shorten it.")
    return text


def _follow(r: dict[str, Any], events: Iterator, lock: threading.Lock) -> Iterator[None]:
    """Consume one strategy's reply events into its result `r` (under `lock`), yielding after each change."""
    try:
        for ev in events:
            with lock:
                if ev.kind == "status":
                    r["status"] = clean_text(ev.text)
                elif ev.kind == "delta":
                    r["text"] += clean_text(ev.text)
                    r["status"] = "answering"
                elif ev.kind == "done":
                    r["text"] = clean_text(ev.text) or r["text"]
                    r["trace"] = clean_obj(ev.trace.to_dict()) if ev.trace is not None else None
                    r["error"] = (r["trace"] or {}).get("error")
            yield
    except Exception:
        log.exception("compare reply failed")
        r["error"] = "Something went wrong while replying with this strategy."
    with lock:
        r["done"], r["status"] = True, ("failed" if r["error"] else "done")
    yield


def _in_parallel(results: dict[str, dict[str, Any]], runs: dict[str, Iterator]) -> Iterator[dict]:
    """Every run in its own thread; yields a copy of `results` whenever some changed (changes that came
    together are shown together). Closing this generator stops the runs at their next event."""
    lock, stop = threading.Lock(), threading.Event()
    changed: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def work(s: str) -> None:
        try:
            for _ in _follow(results[s], runs[s], lock):
                changed.put(s)
                if stop.is_set():
                    if close := getattr(runs[s], "close", None):  # the agent's reply generator
                        close()
                    break
        finally:
            changed.put(None)

    for s in runs:
        threading.Thread(target=work, args=(s,), name=f"compare-{s}", daemon=True).start()
    running = len(runs)
    try:
        while running:
            item = changed.get()
            items = [item]
            while not changed.empty():
                items.append(changed.get())
            running -= items.count(None)
            with lock:
                snapshot = {s: dict(r) for s, r in results.items()}
            yield snapshot
    finally:
        stop.set()


def history_before(msgs: list[MessageRow], session: SessionRow, before_id: int | None = None) -> list[Turn]:
    return [
        Turn(m.speaker, m.text, m.turn_id())
        for m in msgs
        if m.status == "ok" and (before_id is None or m.id < before_id)
    ]


class Chat:
    def __init__(self, store: Store, agent, lifecycle: Lifecycle):
        self.store, self.agent, self.lifecycle = store, agent, lifecycle

    def send(self, user_id: str, message: str, options: Options, llm: LLMConfig | None) -> Iterator[ChatUpdate]:
        message = check_message(message)
        try:
            for _ in range(3):
                session = self.lifecycle.current(user_id)
                history = history_before(self.store.messages(user_id, session.session_id), session)
                msg_id = self.store.add_user_message(user_id, session.session_id, message)
                if msg_id is not None:
                    break
            else:
                raise UserError("The session changed while sending (ended in another tab?); send again.")
        except Exception as e:
            if database_down(e):  # said before anything is shown as sent: the sender keeps the text
                raise DatabaseUnavailable(NOT_STORED) from None
            raise
        yield ChatUpdate("stored", message_id=msg_id)
        yield from self._reply(user_id, session, history, message, msg_id, options, llm)

    def retry(self, user_id: str, options: Options, llm: LLMConfig | None) -> Iterator[ChatUpdate]:
        """Answer again the last user message of the open session if it has no good reply."""
        session = self.lifecycle.current(user_id)
        msgs = self.store.messages(user_id, session.session_id)
        users = [m for m in msgs if m.role == "user"]
        if not users:
            raise UserError("There is no message to retry in this session.")
        last = users[-1]
        if any(m.reply_to == last.id and m.status == "ok" for m in msgs):
            raise UserError("The last message already has a reply; nothing to retry.")
        yield ChatUpdate("stored", message_id=last.id)
        yield from self._reply(
            user_id, session, history_before(msgs, session, last.id), last.text, last.id, options, llm
        )

    def _reply(
        self,
        user_id: str,
        session: SessionRow,
        history: list[Turn],
        message: str,
        msg_id: int,
        options: Options,
        llm: LLMConfig | None,
    ) -> Iterator[ChatUpdate]:
        text, error = "", None
        trace: dict | None = None
        try:
            for ev in self.agent.reply(user_id, history, message, session.date, options, llm):
                # LLM text is cleaned like typed text: a lone surrogate would break SQLite and the page.
                if ev.kind == "status":
                    yield ChatUpdate("status", text, status=clean_text(ev.text), message_id=msg_id)
                elif ev.kind == "delta":
                    text += clean_text(ev.text)
                    yield ChatUpdate("delta", text, message_id=msg_id)
                elif ev.kind == "done":
                    text = clean_text(ev.text) or text
                    trace = clean_obj(ev.trace.to_dict()) if ev.trace is not None else None
                    error = (trace or {}).get("error")
            if trace is None and error is None:
                error = "The agent gave no answer. Your message is saved; press Retry."
            elif trace is not None and error is None and not text.strip():
                error = EMPTY_REPLY
                trace["error"] = error
            if error and "Retry" not in error:  # e.g. "the vector store ... cannot be reached"
                error = f"{error.rstrip('. ')}. Your message is saved; press Retry."
                if trace is not None:
                    trace["error"] = error
        except GeneratorExit:
            # The browser went away mid-stream: record it so the chat shows Retry next time.
            self.store.add_reply(user_id, session.session_id, msg_id, text, options.strategy, trace, INTERRUPTED)
            raise
        except Exception as e:
            if database_down(e):
                log.warning("reply failed: the database cannot be reached")
                error = REPLY_NOT_STORED
            else:
                log.exception("reply failed")
                error = "Something went wrong while replying. Your message is saved; press Retry."
        try:
            reply_id = self.store.add_reply(user_id, session.session_id, msg_id, text, options.strategy, trace, error)
        except Exception as e:
            if database_down(e):  # the message is stored and has no reply: Retry answers it
                raise DatabaseUnavailable(REPLY_NOT_STORED) from None
            raise
        yield ChatUpdate("done", text, message_id=msg_id, reply_id=reply_id, trace=trace, error=error)

    def compare(
        self,
        user_id: str,
        message: str,
        options: Options,
        llm: LLMConfig | None,
        strategies: tuple[str, ...] = COMPARE_COLUMNS,
    ) -> Iterator[dict]:
        """The same message answered by every strategy on the same history (and THEANINE at the paper's
        setting: `Options.for_column`): at once on an endpoint, one
        after the other on the embedded model (it answers one call at a time; each card is shown as
        soon as its reply is done).

        Yields {strategy: {"text", "status", "trace", "error", "done"}} as the replies stream. A
        comparison is an experiment beside the chat: it is saved, but it does not enter the session.
        """
        message = check_message(message)
        session = self.lifecycle.current(user_id)
        history = history_before(self.store.messages(user_id, session.session_id), session)
        results: dict[str, dict[str, Any]] = {
            s: {"text": "", "status": "waiting", "trace": None, "error": None, "done": False} for s in strategies
        }
        yield results
        runs = {
            s: self.agent.reply(user_id, history, message, session.date, options.for_column(s), llm) for s in strategies
        }
        cfg = llm or getattr(getattr(self.agent, "settings", None), "llm", None)
        if cfg is not None and getattr(cfg, "backend", "embedded") != "embedded" and len(runs) > 1:
            yield from _in_parallel(results, runs)
        else:
            for s, run in runs.items():
                for _ in _follow(results[s], run, threading.Lock()):
                    yield results
        self.store.add_compare(user_id, session.session_id, message, results)
