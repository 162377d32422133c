"""The documented API through gradio_client, against the real app (embedded defaults; slow)."""
from __future__ import annotations

import pytest

from ui_fixtures import live_app  # noqa: F401  (session fixture: the running app)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(live_app):
    from gradio_client import Client
    return Client(live_app.url, verbose=False)


def test_api_lists_the_documented_endpoints(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/new_user", "/send_message", "/end_session", "/new_session", "/history"} <= names
    # UI events are private: none of them is offered to API clients.
    assert not any(n.startswith(("/load", "/send", "/retry", "/forget")) and n != "/send_message" for n in names)


def test_send_end_and_new_session(client):
    uid = client.predict(api_name="/new_user")
    assert isinstance(uid, str) and len(uid) >= 32
    client.predict(uid, "2023-05-08", api_name="/new_session")      # date the story (sessions run forward)

    reply, trace = client.predict(uid, "I adopted a puppy named Rex last week.", "theanine",
                                  api_name="/send_message")
    assert isinstance(reply, str)
    assert trace["strategy"] == "theanine" and trace["n_llm_calls"] >= 1 and "timings" in trace
    assert trace.get("error") is None, trace.get("error")

    ended = client.predict(uid, "", api_name="/end_session")
    assert ended["errors"] == [] and len(ended["closed"]) == 1
    assert ended["closed"][0]["new_memories"], ended
    assert ended["session"]["status"] == "open" and ended["session"]["messages"] == 0

    started = client.predict(uid, "2023-05-15", api_name="/new_session")
    assert started["session"]["date"] == "2023-05-15" and started["closed"] == []

    reply, trace = client.predict(uid, "What is my puppy called?", "theanine", api_name="/send_message")
    assert trace["memories"], trace                     # the first session is remembered
    assert trace["timelines_raw"]

    hist = client.predict(uid, api_name="/history")
    assert [s["status"] for s in hist["sessions"]] == ["closed", "open"]
    assert hist["sessions"][0]["turns"][0]["text"] == "I adopted a puppy named Rex last week."


def test_api_rejects_bad_user_ids_and_keeps_users_apart(client):
    from gradio_client.exceptions import AppError
    for bad in ["", "../../etc/passwd", "short"]:
        with pytest.raises(AppError, match="user id"):
            client.predict(bad, "hi", "", api_name="/send_message")
    other = client.predict(api_name="/new_user")
    assert [s["messages"] for s in client.predict(other, api_name="/history")["sessions"]] == [0]
