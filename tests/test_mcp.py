"""The memory as MCP tools: the real app.py (Gradio's MCP server, `launch(mcp_server=True)`) through the
real `mcp` client over streamable HTTP, and where MEMORY_MCP turns it on.

The app is tests/ui_fixtures.py's `live_app` (embedded defaults, listening on 127.0.0.1, so MCP is on by
default), shared with tests/test_app_api.py. Assertions are about the plumbing (tools, provenance, whose
data), never about what the bundled model writes.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest

from app import AppSettings
from memory.errors import InvalidSetting
from ui.api import MCP_TOOLS

HISTORY = {
    "sessions": [
        {
            "date": "2023-05-08",
            "turns": [
                {"speaker": "user", "text": "I moved to Lisbon and I work as a ceramicist.", "id": "D1:1"},
                {"speaker": "assistant", "text": "Lisbon is lovely. What do you make?", "id": "D1:2"},
                {"speaker": "user", "text": "I make blue glazed tiles for old houses.", "id": "D1:3"},
            ],
        }
    ]
}


# --- where it is on ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, on",
    [
        ({}, True),  # loopback (the default listen address)
        ({"GRADIO_SERVER_NAME": "localhost"}, True),
        ({"MEMORY_MCP": "0"}, False),
        ({"GRADIO_SERVER_NAME": "0.0.0.0"}, False),  # a public address: only when asked for
        ({"GRADIO_SERVER_NAME": "0.0.0.0", "MEMORY_MCP": "1"}, True),
        ({"SPACE_ID": "someone/memory-chat"}, False),
        ({"SPACE_ID": "someone/memory-chat", "MEMORY_MCP": "1"}, True),
    ],
)
def test_mcp_is_on_by_default_on_loopback_and_on_a_public_deployment_only_when_asked(env, on, tmp_path):
    import app

    s = app.AppSettings.from_env({"MEMORY_DATA_DIR": str(tmp_path), **env})
    assert s.mcp is on
    assert app.mcp_server(s) is on  # the mcp package is installed (requirements.txt: gradio[mcp])


@pytest.mark.parametrize("server_name, on", [("127.0.0.1", True), ("0.0.0.0", False)])
def test_app_py_launches_gradio_with_the_mcp_server_as_the_settings_say(server_name, on, monkeypatch, tmp_path):
    import app

    seen: dict[str, Any] = {}

    class Demo:  # what app.build() returns, minus the models: launch() records its arguments
        def launch(self, **kwargs):
            seen.update(kwargs)

    for name in ("MEMORY_MCP", "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORY_DOTENV", "0")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GRADIO_SERVER_NAME", server_name)
    monkeypatch.setattr(app, "build", lambda settings: Demo())
    app.main()
    assert seen["mcp_server"] is on  # always given: Gradio's own GRADIO_MCP_SERVER is not consulted
    assert "lifespan" in seen["app_kwargs"]  # keeps the MCP server to the memory tools (ui.api.mcp_lifespan)


def test_a_bad_memory_mcp_value_is_refused_by_name():
    with pytest.raises(InvalidSetting, match="MEMORY_MCP"):
        AppSettings.from_env({"MEMORY_MCP": "maybe"})


# --- through the real MCP client -----------------------------------------------------------------


class Tools:
    """Calls the app's MCP tools with the `mcp` package's client (one MCP session per call: the server is
    stateless, and a test reads plainly)."""

    def __init__(self, url: str):
        self.url = url

    async def _session(self, work):
        from mcp import ClientSession
        from mcp.client.streamable_http import streamablehttp_client

        async with streamablehttp_client(self.url, timeout=60) as (read, write, _), ClientSession(read, write) as s:
            await s.initialize()
            return await work(s)

    def list(self) -> list[Any]:
        async def work(s):
            return (await s.list_tools()).tools

        return asyncio.run(self._session(work))

    def call(self, name: str, **args) -> tuple[bool, str]:
        """(is_error, text) of a tool call."""

        async def work(s):
            return await s.call_tool(name, args)

        res = asyncio.run(self._session(work))
        return bool(res.isError), "".join(getattr(c, "text", "") for c in res.content)

    def json(self, name: str, **args) -> Any:
        err, text = self.call(name, **args)
        assert not err, f"{name}: {text}"
        return json.loads(text)  # results are JSON text (ui.api.memory_tools_only)


@pytest.fixture(scope="module")
def tools(live_app) -> Tools:
    return Tools(live_app.url + "/gradio_api/mcp/")


@pytest.fixture(scope="module")
def new_user(live_app):
    """MCP has no tool that makes users: ids come from the HTTP API's /new_user, as a person would get one."""
    from gradio_client import Client

    client = Client(live_app.url, verbose=False)
    return lambda: client.predict(api_name="/new_user")


@pytest.mark.slow
def test_the_five_memory_tools_and_only_they_are_listed_with_descriptions(tools, live_app):
    listed = {t.name: t for t in tools.list()}
    assert set(listed) == set(MCP_TOOLS)  # not new_user, history, new_session, reply_again, repair_damage
    for name, t in listed.items():
        assert len(t.description or "") > 80, name
        props = t.inputSchema["properties"]
        assert "secret" in props["user_id"].get("description", ""), name
        assert "user_id" in t.inputSchema["required"], name
    assert {"query", "strategy", "as_of"} <= set(listed["recall"].inputSchema["properties"])
    assert "provenance" in listed["recall"].description
    # Gradio's schema page (used by Hugging Face's MCP client) lists the same five.
    with urllib.request.urlopen(live_app.url + "/gradio_api/mcp/schema", timeout=30) as r:
        schema = json.load(r)
    assert {t["name"] for t in schema} == set(MCP_TOOLS)
    # Another endpoint is no tool, even when called by name.
    err, text = tools.call("history", user_id="x" * 40)
    assert err and "Unknown tool" in text


@pytest.mark.slow
def test_send_end_recall_carries_provenance_and_users_stay_apart(tools, new_user):
    alice, bob = new_user(), new_user()
    reply, trace = tools.json("send_message", user_id=alice, message="I adopted a puppy named Rex last week.")
    assert isinstance(reply, str) and trace["llm_calls"][-1]["purpose"] == "reply"
    ended = tools.json("end_session", user_id=alice)
    assert ended["errors"] == [] and ended["closed"][0]["new_memories"], ended
    session = ended["closed"][0]["session_id"]

    got = tools.json("recall", user_id=alice, query="What is my puppy called?", strategy="theanine")
    turns = [t for line in got["lines"] for t in line["turns"]]
    rex = [t for t in turns if "Rex" in t["text"]]
    assert rex, got
    assert all(t["session_id"] == session and t["id"].startswith(session + ":") and t["date"] for t in rex), rex
    assert {t["speaker"] for t in rex} == {"user"}

    # Bob imports his own history (turn ids kept), and neither sees the other's.
    built = tools.json("import_history", user_id=bob, data=json.dumps(HISTORY))
    assert built["errors"] == [] and built["memories"] >= 1, built
    his = tools.json("recall", user_id=bob, query="Where do I live and what do I make?", strategy="theanine")
    ids = {t["id"] for line in his["lines"] for t in line["turns"]}
    assert ids and ids <= {"D1:1", "D1:2", "D1:3"}, his
    assert {t["session_id"] for line in his["lines"] for t in line["turns"]} == {built["closed"][0]["session_id"]}
    assert "Rex" not in json.dumps(his)
    bobs_puppy = tools.json("recall", user_id=bob, query="What is my puppy called?", strategy="theanine")
    assert "Rex" not in json.dumps(bobs_puppy)
    for strategy in ("theanine", "secom"):
        theirs = tools.json("recall", user_id=alice, query="Where do I live? Lisbon tiles", strategy=strategy)
        assert "Lisbon" not in json.dumps(theirs) and "D1:" not in json.dumps(theirs), theirs
    exported = json.dumps(tools.json("export_memory", user_id=bob))
    assert "Lisbon" in exported and "Rex" not in exported


@pytest.mark.slow
def test_a_user_id_this_server_did_not_issue_is_refused(tools):
    for bad in ["", "../../etc/passwd", "A" * 40]:
        err, text = tools.call("recall", user_id=bad, query="What is my puppy called?")
        assert err and "user id" in text, text
        err, text = tools.call("export_memory", user_id=bad)
        assert err and "user id" in text, text
