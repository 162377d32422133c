"""The documented API through gradio_client, against the real app (embedded defaults; slow).

Assertions are about the plumbing (stored, built, retrieved, traced), never about what the
bundled 135M model writes.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import LOCOMO_SMALL

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(live_app):
    from gradio_client import Client

    return Client(live_app.url, verbose=False)


def test_api_lists_the_documented_endpoints(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {
        "/new_user",
        "/send_message",
        "/end_session",
        "/new_session",
        "/history",
        "/import_history",
        "/export_memory",
    } <= names
    # UI events are private: none of them is offered to API clients.
    assert not any(n.startswith(("/load", "/send", "/retry", "/forget")) and n != "/send_message" for n in names)


def test_send_end_and_new_session(client):
    uid = client.predict(api_name="/new_user")
    assert isinstance(uid, str) and len(uid) >= 32
    client.predict(uid, "2023-05-08", api_name="/new_session")  # date the story (sessions run forward)

    reply, trace = client.predict(uid, "I adopted a puppy named Rex last week.", "theanine", api_name="/send_message")
    assert isinstance(reply, str)
    assert trace["strategy"] == "theanine" and trace["n_llm_calls"] == 1 and "timings" in trace
    assert trace["llm_calls"][0]["purpose"] == "reply" and trace["memory_path"] == "offline"

    ended = client.predict(uid, "", api_name="/end_session")
    assert ended["errors"] == [] and len(ended["closed"]) == 1
    assert ended["closed"][0]["new_memories"], ended  # the statement became a memory, without an LLM
    assert ended["session"]["status"] == "open" and ended["session"]["messages"] == 0

    started = client.predict(uid, "2023-05-15", api_name="/new_session")
    assert started["session"]["date"] == "2023-05-15" and started["closed"] == []

    reply, trace = client.predict(uid, "What is my puppy called?", "theanine", api_name="/send_message")
    assert trace["memories"], trace  # the first session is remembered
    assert trace["timelines_raw"]

    assert any("Rex" in m["event"] for m in trace["memories"])
    assert trace["llm_calls"][-1]["purpose"] == "reply"

    hist = client.predict(uid, api_name="/history")
    assert [s["status"] for s in hist["sessions"]] == ["closed", "open"]
    assert hist["sessions"][0]["turns"][0]["text"] == "I adopted a puppy named Rex last week."


def test_import_locomo_keeps_dia_ids_and_export_names_them(client):
    data = json.loads(LOCOMO_SMALL.read_text())
    sample = next(s for s in data if s["sample_id"] == "conv-30")
    conv = {
        k: v for k, v in sample["conversation"].items() if not k.startswith("session_") or k.split("_")[1] in ("1", "2")
    }  # two sessions: fast
    uid = client.predict(api_name="/new_user")
    built = client.predict(uid, json.dumps([{**sample, "conversation": conv}]), "conv-30", api_name="/import_history")
    assert built["errors"] == [] and len(built["closed"]) == 2
    assert built["memories"] > 10 and built["segments"] >= 2
    export = client.predict(uid, api_name="/export_memory")
    memories = export["memory"]["theanine_graph"]["memories"]
    assert len(memories) == built["memories"]
    dia_ids = {t["dia_id"] for n in ("1", "2") for t in sample["conversation"][f"session_{n}"]}
    assert all(m["turns"] and set(m["turns"]) <= dia_ids for m in memories)  # provenance = LoCoMo turn ids
    assert {m["built_by"] for m in memories} == {"extracted"}
    assert not any(m["event"].rstrip().endswith("?") for m in memories)
    assert [t["id"] for t in export["sessions"][0]["turns"]] == [
        t["dia_id"] for t in sample["conversation"]["session_1"]
    ]


def test_api_rejects_bad_user_ids_and_keeps_users_apart(client):
    from gradio_client.exceptions import AppError

    for bad in ["", "../../etc/passwd", "short"]:
        with pytest.raises(AppError, match="user id"):
            client.predict(bad, "hi", "", api_name="/send_message")
    other = client.predict(api_name="/new_user")
    assert [s["messages"] for s in client.predict(other, api_name="/history")["sessions"]] == [0]
