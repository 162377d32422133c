"""Documented API endpoints for gradio_client.

An API client has no browser storage, so these endpoints take the user id as
their first parameter. The id is a bearer secret: get one from /new_user and
keep it private (the web page keeps its own id in the browser and never shows it).
Every id is validated before use: only ids this server issued (by /new_user or to a page) are served.

    from gradio_client import Client
    c = Client("http://127.0.0.1:7860/")
    uid = c.predict(api_name="/new_user")
    reply, trace = c.predict(uid, "I adopted a puppy named Rex.", "theanine", api_name="/send_message")
    if trace.get("error"):                                       # the model failed; the message is saved
        reply, trace = c.predict(uid, "theanine", api_name="/reply_again")
    c.predict(uid, "", api_name="/end_session")                # build memory from the session
    c.predict(uid, "2023-05-15", api_name="/new_session")      # start the next one, a week later
    reply, trace = c.predict(uid, "What is my dog's name?", "theanine", api_name="/send_message")
    built = c.predict(uid, open("locomo10.json").read(), "conv-30", api_name="/import_history")
    export = c.predict(uid, api_name="/export_memory")         # sessions, both memories, settings
    mem = c.predict(uid, "Where do I live?", "theanine", "", api_name="/recall")  # memory lines, no reply
"""

import functools
import logging
from collections.abc import Callable
from typing import TypeVar

import gradio as gr

from memory.errors import InvalidOptions
from sessions import SessionService, UserError
from sessions.errors import database_down
from sessions.identity import client_of
from sessions.lifecycle import EndResult
from sessions.recall import recall as recall_memory
from sessions.service import user_message

from . import fairness

T = TypeVar("T")
log = logging.getLogger(__name__)


def _error(e: BaseException) -> gr.Error:
    """The client's error: the readable message; a refusal written for people (busy, a limit, a bad
    value) is not logged with a traceback, unlike a failure."""
    if database_down(e):  # an outage, not a bug: one line in the log, no traceback
        log.warning("database unavailable: %s", type(e).__name__)
        return gr.Error(user_message(e), print_exception=False)
    return gr.Error(user_message(e), print_exception=not isinstance(e, (UserError, InvalidOptions)))


def _session(s) -> dict:
    return {
        "session_id": s.session_id,
        "number": s.number or s.seq,
        "date": s.date,
        "status": s.status,
        "messages": s.n_messages,
    }


def _end(result: EndResult) -> dict:
    return {
        "message": result.message,
        "errors": result.errors,
        "closed": [
            {
                "session_id": c.session_id,
                "error": c.error,
                "new_memories": (c.report or {}).get("new_memories", []),
                "new_segments": (c.report or {}).get("new_segments", []),
            }
            for c in result.closed
        ],
        "session": _session(result.session) if result.session else None,
    }


def refused_for_people(fn: Callable[..., T]) -> Callable[..., T]:
    """An endpoint whose failures reach the caller as a clear message (`_error`), never a traceback.
    The signature and docstring are kept: Gradio documents the endpoint from them."""

    @functools.wraps(fn)
    def endpoint(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise _error(e) from None

    return endpoint


def _answer(updates) -> tuple[str, dict]:
    """The final reply text and trace of a stream of chat updates."""
    done = None
    for up in updates:
        if up.kind == "done":
            done = up
    trace = dict(done.trace or {}) if done else {}
    if done and done.error:
        trace["error"] = done.error
    return (done.text if done else ""), trace


def _turn(m) -> dict:
    return {"id": m.id, "speaker": m.role, "name": m.speaker, "text": m.text, "status": m.status, "error": m.error}


def register_api(service: SessionService) -> None:
    """Add the endpoints to the Blocks being built (call inside `with gr.Blocks()`)."""
    reply, build = fairness.reply_events(service.settings), fairness.build_events(service.settings)  # ui.fairness

    @refused_for_people
    def new_user(request: gr.Request) -> str:
        """Create a new user and return its id (a secret: whoever holds it reads that user's memory).
        Only ids made here are accepted; on a public deployment each address may make a few per hour."""
        return service.new_user(client_of(request))

    @refused_for_people
    def send_message(user_id: str, message: str, strategy: str = "") -> tuple[str, dict]:
        """Send `message` in the user's open session; returns (reply text, trace dict).

        strategy: "theanine", "secom" or "none"; "" uses the user's saved choice. The trace holds
        what memory was retrieved (memories, timelines_raw, timelines_refined or segments), the
        LLM calls, tokens and timings; trace["error"] is set (and the reply may be empty) when
        the model failed; the message stays saved and /reply_again answers it again.
        """
        return _answer(service.send(user_id, message, strategy or None))

    @refused_for_people
    def reply_again(user_id: str, strategy: str = "") -> tuple[str, dict]:
        """Answer again the last message of the open session when its reply failed or never came
        (the Retry button of the page). Returns (reply text, trace dict) like /send_message."""
        return _answer(service.retry(user_id, strategy or None))

    @refused_for_people
    def end_session(user_id: str, next_date: str = "") -> dict:
        """End the user's open session: build its memory (THEANINE graph and SeCom segments) and open
        the next session, dated `next_date` (e.g. "2023-05-15" or "15 May 2023", stored as ISO; not before
        the session just ended) or, with "", today. Returns the new memory ids and the new session."""
        return _end(service.end_session(user_id, next_date or None))

    @refused_for_people
    def new_session(user_id: str, date: str) -> dict:
        """Start a session dated `date` (e.g. "2023-05-15"; not before the previous session); the open one
        is ended first if it has messages."""
        return _end(service.new_session(user_id, date))

    @refused_for_people
    def history(user_id: str) -> dict:
        """The user's sessions (oldest first), each with its messages; "damaged" lists stored values that
        could not be read (left out; /repair_damage rebuilds or drops them)."""
        sessions = service.sessions(user_id)
        return {
            "sessions": [
                {**_session(s), "turns": [_turn(m) for m in service.messages(user_id, s.session_id)]} for s in sessions
            ],
            "damaged": service.damage(user_id),
        }

    @refused_for_people
    def import_history(user_id: str, data: str, sample_id: str = "") -> dict:
        """Import a history (the JSON text of this app's format or of LoCoMo; `sample_id` picks one
        conversation of a LoCoMo file) as earlier closed sessions and build their memory. Turns keep the
        source's ids (LoCoMo "D3:7"). Returns what was built: sessions, turns, memories, segments."""
        out = _end(service.import_history(user_id, data, sample_id or ""))
        out["memories"] = sum(len(c["new_memories"]) for c in out["closed"])
        out["segments"] = sum(len(c["new_segments"]) for c in out["closed"])
        return out

    @refused_for_people
    def export_memory(user_id: str) -> dict:
        """Everything kept about the user: sessions (importable), the THEANINE graph (memories with their
        source turns, edges) and the SeCom segments, and the user's settings."""
        return service.export(user_id)

    @refused_for_people
    def recall(user_id: str, query: str, strategy: str = "", as_of: str = "") -> dict:
        """The memory lines a reply would read for `query`, without replying: each with its score and
        the source turns it came from, and the retrieved memories a later one superseded (and by what).
        strategy: "theanine", "secom" or "none" ("" = the user's choice). as_of: "" (now), a session id
        (the memory as it stood after that session ended) or a date ("2023-05-02": sessions up to it)."""
        return recall_memory(service, user_id, query, strategy, as_of)

    @refused_for_people
    def repair_damage(user_id: str, item: str, action: str = "rebuild") -> str:
        """Repair a damaged stored value listed under "damaged" by /history or /export_memory: "rebuild"
        (a memory: its session's memory is built again from the stored turns) or "drop" it."""
        return service.repair(user_id, item, action)

    gr.api(new_user, api_name="new_user")
    gr.api(send_message, api_name="send_message", **reply)
    gr.api(reply_again, api_name="reply_again", **reply)
    gr.api(end_session, api_name="end_session", **build)
    gr.api(new_session, api_name="new_session", **build)
    gr.api(history, api_name="history")
    gr.api(import_history, api_name="import_history", **build)
    gr.api(export_memory, api_name="export_memory")
    gr.api(recall, api_name="recall", **reply)
    gr.api(repair_damage, api_name="repair_damage", **build)
