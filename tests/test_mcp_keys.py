"""Agent keys against the real app (issue 46): `python app.py` (tests/ui_fixtures.py's `live_app`) and the real
`mcp` client over streamable HTTP, sending the key as `Authorization: Bearer <key>` as mcp-remote does.

A page's user is made the way the page makes it (`Identity.issue`, not /new_user), and its key the way
Settings makes it (`AgentKeys.create`, what ui/agent_keys_panel.py calls), both in the running app's own
database; Settings itself is tests/test_ui_agent_keys.py (Chromium) and tests/test_agent_keys.py (handlers).
Every refusal is checked by what it says, so a person (or their agent) knows what to do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sessions.agent_keys import KEY_AS_ID, NO_KEY, OTHERS, PAGE_ID_ALONE, AgentKeys
from sessions.store import Store
from sessions.users import Identity, IdentityConfig, UserKey


def call(url: str, name: str, key: str = "", **args) -> tuple[bool, str]:
    """(is_error, text) of one tool call, with the key in the Authorization header when given."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    headers = {"Authorization": f"Bearer {key}"} if key else None

    async def run():
        async with (
            streamablehttp_client(url, headers=headers, timeout=60) as (read, write, _),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            res = await s.call_tool(name, args)
            return bool(res.isError), "".join(getattr(c, "text", "") for c in res.content)

    # A thread of its own: a caller may run an event loop already (Playwright's sync API does).
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(run())).result()


@pytest.fixture(scope="module")
def people(live_app) -> Iterator[dict[str, Any]]:
    """Alice and Bob as their pages made them, each with an agent key made in Settings; Alice's second key
    is revoked."""
    store = Store(live_app.data_dir / "sessions.sqlite3")
    identity, keys = Identity(store, IdentityConfig(issued_only=True)), AgentKeys(store.engine)
    alice, bob = identity.issue(), identity.issue()
    alice_key, _ = keys.create(UserKey.of(alice), "Claude Desktop")
    old_key, old = keys.create(UserKey.of(alice), "old laptop")
    keys.revoke(UserKey.of(alice), old.prefix)
    bob_key, _ = keys.create(UserKey.of(bob), "Bob's agent")
    yield {"alice": alice, "bob": bob, "alice_key": alice_key, "old_key": old_key, "bob_key": bob_key, "keys": keys}
    store.engine.dispose()


@pytest.mark.slow
def test_an_agent_key_opens_its_owners_memory_and_nothing_else_does(live_app, people):
    url = live_app.url + "/gradio_api/mcp/"
    alice, alice_key = people["alice"], people["alice_key"]

    # A valid key works: the key's owner, with user_id left empty (or given as the owner's own id).
    err, text = call(url, "send_message", alice_key, user_id="", message="I keep bees on my roof in Lyon.")
    assert not err, text
    reply, trace = json.loads(text)
    assert isinstance(reply, str) and trace["llm_calls"][-1]["purpose"] == "reply"
    err, text = call(url, "export_memory", alice_key, user_id=alice)
    assert not err and "bees on my roof" in text, text
    # Her turn ids count her own session's messages, whatever other users said on this server before.
    turn_ids = [t["id"] for s in json.loads(text)["sessions"] for t in s["turns"]]
    assert turn_ids == ["s1:1", "s1:2"], turn_ids
    print(f"\nvalid key: send_message answered ({len(reply)} characters); export_memory holds it, turns {turn_ids}")

    refused = {
        "no key": call(url, "export_memory", user_id=""),
        "the browser's id alone": call(url, "export_memory", user_id=alice),
        "a revoked key": call(url, "export_memory", people["old_key"], user_id=""),
        "another person's key against this person's memory": call(
            url, "recall", people["bob_key"], user_id=alice, query="Where are the bees?"
        ),
        "the key given as user_id": call(url, "recall", user_id=alice_key, query="bees"),
    }
    expected = {
        "no key": NO_KEY,
        "the browser's id alone": PAGE_ID_ALONE,
        "a revoked key": "This agent key was revoked on ",
        "another person's key against this person's memory": OTHERS,
        "the key given as user_id": KEY_AS_ID,
    }
    for what, (err, text) in refused.items():
        print(f"{what}: refused={err}: {text}")
        assert err and expected[what] in text, (what, text)
        assert "bees" not in text and "Traceback" not in text, (what, text)

    # Bob's key opens Bob's memory, which holds none of Alice's.
    err, text = call(url, "export_memory", people["bob_key"], user_id="")
    assert not err and "bees" not in text, text


@pytest.mark.slow
def test_the_http_api_takes_the_key_in_the_same_header(live_app, people):
    from gradio_client import Client

    with_key = Client(live_app.url, verbose=False, headers={"Authorization": f"Bearer {people['alice_key']}"})
    history = with_key.predict("", api_name="/history")
    assert history["sessions"], history
    bare = Client(live_app.url, verbose=False)
    with pytest.raises(Exception, match="browser's user id alone"):
        bare.predict(people["alice"], api_name="/history")
    # A script's own id from /new_user is still served alone (it was never in a browser).
    script = bare.predict(api_name="/new_user")
    assert bare.predict(script, api_name="/history")["sessions"]


@pytest.mark.slow
def test_the_database_holds_only_the_keys_hash_and_their_last_use(live_app, people):
    call(live_app.url + "/gradio_api/mcp/", "export_memory", people["alice_key"], user_id="")
    db = live_app.data_dir / "sessions.sqlite3"
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT key_hash, prefix, name, last_used_at, revoked_at FROM agent_keys").fetchall()
    finally:
        con.close()
    by_hash = {r[0]: r for r in rows}
    for name in ("alice_key", "old_key", "bob_key"):
        key = people[name]
        row = by_hash[hashlib.sha256(key.encode()).hexdigest()]
        assert key not in repr(row) and key.startswith(row[1]) and len(row[1]) < len(key) / 3
    assert by_hash[hashlib.sha256(people["alice_key"].encode()).hexdigest()][3]  # its last use is recorded
    # Nor anywhere in the database's files (the file and its write-ahead log).
    for path in db.parent.glob("sessions.sqlite3*"):
        blob = path.read_bytes()
        for name in ("alice_key", "old_key", "bob_key"):
            assert people[name].encode() not in blob, (path.name, name)
    print(f"\nagent_keys rows: {len(rows)}; every stored key_hash = sha256(key); no key in {db.name}*")
