"""Documented API endpoints for gradio_client.

Whose memory a call uses: the owner of the agent key the client sends as `Authorization: Bearer <key>`
(made in the page's Settings → Agent keys; sessions/agent_keys.py), with user_id "" (or the owner's id).
Without a key, the first parameter is a user id that /new_user issued to an API client: a bearer secret,
to keep private. A page's own id is refused alone (the browser's storage does not protect it), and so is
every call without a key where the deployment requires keys (MEMORY_REQUIRE_AGENT_KEYS).

    from gradio_client import Client
    c = Client("http://127.0.0.1:7860/", headers={"Authorization": f"Bearer {key}"})
    uid = ""                                                    # "": the key's owner
    # (a script's own memory, without a key: c = Client(url); uid = c.predict(api_name="/new_user"))
    reply, trace = c.predict(uid, "I adopted a puppy named Rex.", "theanine", api_name="/send_message")
    if trace.get("error"):                                       # the model failed; the message is saved
        reply, trace = c.predict(uid, "theanine", api_name="/reply_again")
    c.predict(uid, "", api_name="/end_session")                # build memory from the session
    c.predict(uid, "2023-05-15", api_name="/new_session")      # start the next one, a week later
    reply, trace = c.predict(uid, "What is my dog's name?", "theanine", api_name="/send_message")
    built = c.predict(uid, open("locomo10.json").read(), "conv-30", api_name="/import_history")
    export = c.predict(uid, api_name="/export_memory")         # sessions, both memories, settings
    mem = c.predict(uid, "Where do I live?", "theanine", "", api_name="/recall")  # memory lines, no reply

The memory endpoints are also MCP tools (`MCP_TOOLS`, Gradio's MCP server at /gradio_api/mcp/; docs/mcp.md):
their docstrings, in the Args:/Returns: form Gradio parses (one line per parameter), are the tools' descriptions.
"""

import contextlib
import functools
import json
import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

import gradio as gr

from memory.errors import InvalidOptions
from memory.trace_types import TraceDict
from sessions import SessionService, UserError, UserKey
from sessions.agent_keys import KEYS_ONLY, KeyRefused
from sessions.db import NOT_STORED, database_down, outage_as
from sessions.lifecycle import ChatUpdate, EndResult
from sessions.recall import recall as recall_memory
from sessions.service import user_message

from . import fairness

T = TypeVar("T")
log = logging.getLogger(__name__)

# The endpoints an MCP client sees as tools (memory_tools_only); the others stay HTTP API only.
MCP_TOOLS = ("send_message", "recall", "end_session", "import_history", "export_memory")


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


def _answer(updates: Iterator[ChatUpdate]) -> tuple[str, dict]:
    """The final reply text and trace of a stream of chat updates. The trace leaves as a plain JSON
    object: Gradio builds the endpoint's API schema from its annotation."""
    done = None
    for up in updates:
        if up.kind == "done":
            done = up
    trace: TraceDict = done.trace.copy() if done and done.trace else {}
    if done and done.error:
        trace["error"] = done.error
    return (done.text if done else ""), dict(trace)


def _turn(m) -> dict:
    return {"id": m.id, "speaker": m.role, "name": m.speaker, "text": m.text, "status": m.status, "error": m.error}


def _with_sessions(service: SessionService, user_id: UserKey, out: dict) -> dict:
    """Each recalled turn with the session it was said in (id and date): provenance an agent can cite.
    Read from this user's own sessions only."""
    wanted = {t["id"] for line in out["lines"] for t in line["turns"]}
    where: dict[str, tuple[str, str]] = {}
    for s in service.rooms.sessions.in_order(user_id):
        if not wanted - where.keys():
            break
        if s.status == "open":
            continue  # memory is built from ended sessions only
        for m in service.rooms.sessions.messages(user_id, s.session_id):
            where.setdefault(m.turn_id(), (s.session_id, s.date))
    for line in out["lines"]:
        for t in line["turns"]:
            if t["id"] in where:
                t["session_id"], t["date"] = where[t["id"]]
    return out


def memory_tools_only(server) -> None:
    """Gradio's MCP server (gradio.mcp.GradioMCPServer) made for every API endpoint, kept to `MCP_TOOLS`:
    the tool list, /gradio_api/mcp/schema and tool calls know no other endpoint. Tool results (the endpoints'
    dicts and tuples) are JSON text rather than Python reprs. Gradio is pinned (requirements.txt);
    tests/test_mcp.py checks the tool list."""
    kept = {tool: ep for tool, ep in server.tool_to_endpoint.items() if ep.lstrip("/") in MCP_TOOLS}
    missing = set(MCP_TOOLS) - {ep.lstrip("/") for ep in kept.values()}
    if missing:
        raise RuntimeError(f"MCP: no API endpoint for {sorted(missing)}")
    server.tool_to_endpoint = kept
    plain = server.postprocess_output_data

    def as_json(data, root_url):
        return plain(
            [json.dumps(d, ensure_ascii=False, default=str) if isinstance(d, (dict, list, tuple)) else d for d in data],
            root_url,
        )

    server.postprocess_output_data = as_json


def mcp_lifespan(demo: gr.Blocks):
    """For `launch(app_kwargs={"lifespan": mcp_lifespan(demo)})`: Gradio makes its MCP server during launch();
    this runs at the app's startup, before the first request, and keeps that server to `MCP_TOOLS`."""

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        server = getattr(demo, "mcp_server_obj", None)
        if server is not None:
            memory_tools_only(server)
        yield

    return lifespan


def register_api(service: SessionService, serving: fairness.Serving, require_keys: bool = False) -> None:
    """Add the endpoints to the Blocks being built (call inside `with gr.Blocks()`). Each call's user is the
    owner of its agent key (sessions/agent_keys.py), or an id /new_user issued; `require_keys`
    (MEMORY_REQUIRE_AGENT_KEYS) refuses every call without a key."""
    reply, build = fairness.reply_events(serving), fairness.build_events(serving)  # ui.fairness
    keys, rooms = service.agent_keys, service.rooms

    def user(user_id: str, request: gr.Request | None) -> UserKey:
        headers = getattr(request, "headers", None) or {}
        return keys.user_for(user_id, headers.get("authorization", ""), rooms.users.user, require_keys)

    @refused_for_people
    def new_user(request: gr.Request) -> str:
        """Create a new user and return its id (a secret: whoever holds it reads that user's memory), for a
        script without a page. Only ids made here are accepted; on a public deployment each address may make
        a few per hour. Refused where the server takes agent keys only (MEMORY_REQUIRE_AGENT_KEYS)."""
        if require_keys:
            raise KeyRefused(KEYS_ONLY)
        uid = rooms.users.new_user(request)
        keys.mark_api_client(rooms.users.user(uid))  # an API client's id: served alone (a page's id is not)
        return uid

    @refused_for_people
    def send_message(
        user_id: str, message: str, strategy: str = "", request: gr.Request | None = None
    ) -> tuple[str, dict]:
        """Say `message` to the memory chat as the user, in their open session, and get the assistant's reply,
        written with what it recalled from the user's earlier sessions. The message and reply are stored;
        end_session turns the session into long-term memory. To look memory up without replying, use recall.

        Args:
            user_id: "" when the client sends its agent key (Authorization: Bearer); else a secret id from /new_user
            message: the user's message, as they would type it in the chat
            strategy: the memory to reply with: "theanine", "secom" or "none"; "" (default) = the user's saved choice

        Returns:
            [reply text, trace]; the trace names the memory the reply read (memories, timelines or segments)
            the LLM calls, tokens and timings; trace["error"] is set when the model failed (the message stays saved)
        """
        with outage_as(NOT_STORED):  # the key check met the outage before anything was stored: the sender keeps it
            who = user(user_id, request)
        return _answer(rooms.chat.send(who, message, strategy or None))

    @refused_for_people
    def reply_again(user_id: str, strategy: str = "", request: gr.Request | None = None) -> tuple[str, dict]:
        """Answer again the last message of the open session when its reply failed or never came
        (the Retry button of the page). Returns (reply text, trace dict) like /send_message."""
        return _answer(rooms.chat.retry(user(user_id, request), strategy or None))

    @refused_for_people
    def end_session(user_id: str, next_date: str = "", request: gr.Request | None = None) -> dict:
        """End the user's open session: build its long-term memory (THEANINE's memory graph and SeCom's
        segments, from the stored turns) and open the next session. Call it when a conversation is over, so
        that later sessions (and recall) can use what was said; it can take a while.

        Args:
            user_id: "" when the client sends its agent key (Authorization: Bearer); else a secret id from /new_user
            next_date: the next session's date, e.g. "2023-05-15" (not before the session just ended); "" = today

        Returns:
            {"message", "errors", "closed": [{"session_id", "error", "new_memories", "new_segments"}], "session"}
        """
        return _end(rooms.sessions.end(user(user_id, request), next_date or None))

    @refused_for_people
    def new_session(user_id: str, date: str, request: gr.Request | None = None) -> dict:
        """Start a session dated `date` (e.g. "2023-05-15"; not before the previous session); the open one
        is ended first if it has messages."""
        return _end(rooms.sessions.new(user(user_id, request), date))

    @refused_for_people
    def history(user_id: str, request: gr.Request | None = None) -> dict:
        """The user's sessions (oldest first), each with its messages; "damaged" lists stored values that
        could not be read (left out; /repair_damage rebuilds or drops them)."""
        user_id = user(user_id, request)
        sessions = rooms.sessions.in_order(user_id)
        return {
            "sessions": [
                {**_session(s), "turns": [_turn(m) for m in rooms.sessions.messages(user_id, s.session_id)]}
                for s in sessions
            ],
            "damaged": rooms.data.damage(user_id),
        }

    @refused_for_people
    def import_history(user_id: str, data: str, sample_id: str = "", request: gr.Request | None = None) -> dict:
        """Import past conversations as the user's earlier sessions (closed, dated before the open one) and build
        their long-term memory, as end_session does for each; it can take minutes. The app's format is
        {"sessions": [{"date": "2023-05-08", "turns": [{"speaker": "user", "text": "I adopted a puppy."},
        {"speaker": "assistant", "text": "..."}]}]} (a turn's optional "id" is kept, and recalled memory names it);
        a LoCoMo file is read too (turns keep their ids, "D3:7"). Up to 20 MB.

        Args:
            user_id: "" when the client sends its agent key (Authorization: Bearer); else a secret id from /new_user
            data: the JSON text of the history: the app's format (export_memory's result is one) or LoCoMo's
            sample_id: the conversation to import from a LoCoMo file with several, e.g. "conv-30"; "" = the only one

        Returns:
            {"closed": [per session: "session_id", "new_memories", "new_segments"], "memories", "segments", "errors"}
        """
        out = _end(rooms.data.import_history(user(user_id, request), data, sample_id or ""))
        out["memories"] = sum(len(c["new_memories"]) for c in out["closed"])
        out["segments"] = sum(len(c["new_segments"]) for c in out["closed"])
        return out

    @refused_for_people
    def export_memory(user_id: str, request: gr.Request | None = None) -> dict:
        """Everything the app keeps about the user, as JSON: every session with its turns (importable again by
        import_history), the THEANINE memory graph (memories with their source turns, and the edges between
        them), the SeCom segments, and the user's settings. Large for a long history: to answer a question,
        use recall.

        Args:
            user_id: "" when the client sends its agent key (Authorization: Bearer); else a secret id from /new_user

        Returns:
            {"format", "sessions", "memory": {"theanine_graph", "secom_segments"}, "settings", "damaged"}
        """
        return rooms.data.export(user(user_id, request))

    @refused_for_people
    def recall(
        user_id: str, query: str, strategy: str = "", as_of: str = "", request: gr.Request | None = None
    ) -> dict:
        """Search the user's long-term memory (their ended sessions) for what is relevant to `query`, without
        replying: the memory lines a reply would read, each with its score and its provenance, the turns it
        came from (turn id, session id and date, speaker, text). Memories a later one superseded (a changed
        fact) are listed with what replaced them. Use it to answer from what the user said in past sessions.

        Args:
            user_id: "" when the client sends its agent key (Authorization: Bearer); else a secret id from /new_user
            query: what to look up, e.g. "Where does the user live?" or "the user's dog"
            strategy: "theanine" (memories and their timelines), "secom" (segments) or "" (the user's choice)
            as_of: "" (now), a session id (memory as it stood after that session ended) or a date ("2023-05-02")

        Returns:
            {"strategy", "as_of", "lines": [{"text", "score", "turns": [{"id", "session_id", "date", "speaker"
            "text"}]}], "superseded": [{"id", "event", "time", "superseded_by"}]}
        """
        who = user(user_id, request)
        return _with_sessions(service, who, recall_memory(service.rooms.memory, who, query, strategy, as_of))

    @refused_for_people
    def repair_damage(user_id: str, item: str, action: str = "rebuild", request: gr.Request | None = None) -> str:
        """Repair a damaged stored value listed under "damaged" by /history or /export_memory: "rebuild"
        (a memory: its session's memory is built again from the stored turns) or "drop" it."""
        return rooms.data.repair(user(user_id, request), item, action)

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
