"""Agent keys (issue 46) without a server: made, shown once and listed in Settings (the panel's handlers),
stored as a hash, revoked; whose memory a call may use (sessions/agent_keys.py's `user_for`); turn ids
numbered per session. The real app with the real MCP client is tests/test_mcp_keys.py."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa

from memory.settings import Settings
from sessions import open_service, schema
from sessions.agent_keys import (
    KEY_AS_ID,
    KEYS_ONLY,
    NO_KEY,
    NOT_A_KEY,
    OTHERS,
    PAGE_ID_ALONE,
    UNKNOWN_KEY,
    AgentKeys,
    KeyRefused,
)
from sessions.users import IdentityConfig, InvalidUserId
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from ui.agent_keys_panel import KeyHandlers


@pytest.fixture
def svc(tmp_path):
    return FlatService(
        open_service(Settings(data_dir=tmp_path), ScriptedAgent(), identity=IdentityConfig(issued_only=True))
    )


def _rows(svc) -> list[dict]:
    with svc.store.engine.connect() as c:
        return [dict(r._mapping) for r in c.execute(sa.select(schema.agent_keys))]


def test_settings_shows_a_new_key_once_lists_it_with_its_last_use_and_revokes_it(svc):
    page = svc.new_user()  # the page's own id (Handlers.load issues it the same way)
    h = KeyHandlers(svc)
    shown, listing, menu, status = h.show(page)
    assert shown == "" and "No agent keys yet" in listing and menu["choices"] == []

    shown, listing, menu, status = h.make(page, "Claude Desktop")
    key = shown.split('class="mc-agent-key"')[1].split(">", 1)[1].split("<", 1)[0]
    assert key.startswith("mem.") and len(key) > 40
    assert "Authorization: Bearer" in shown and "not shown again" in shown
    assert "Claude Desktop" in listing and key[:12] in listing and key not in listing
    assert "never" in listing.split("Claude Desktop")[1]  # last use: never
    assert menu["choices"] == [(f"Claude Desktop ({key[:12]}…)", key[:12])]

    # Shown once: the next view of the panel has the list, never the key.
    shown, listing, _, _ = h.show(page)
    assert shown == "" and key not in listing

    keys = AgentKeys(svc.store.engine)
    assert keys.user_for("", f"Bearer {key}", svc.user, False) == svc.user(page)
    _, listing, _, _ = h.show(page)
    assert "never" not in listing.split("Claude Desktop")[1].split("</tr>")[0]  # last use: now

    # Only the hash and the shown prefix are stored.
    (row,) = _rows(svc)
    assert row["key_hash"] == hashlib.sha256(key.encode()).hexdigest() and row["prefix"] == key[:12]
    assert key not in repr(row)

    shown, listing, menu, status = h.revoke(page, key[:12])
    assert "Revoked" in status and "revoked" in listing and menu["choices"] == []
    with pytest.raises(KeyRefused, match="revoked on"):
        keys.user_for("", f"Bearer {key}", svc.user, False)


def test_a_key_is_named_and_a_page_cannot_revoke_another_persons_key(svc):
    alice, bob = svc.new_user(), svc.new_user()
    h = KeyHandlers(svc)
    _, _, _, status = h.make(alice, "   ")
    assert "Name the key" in status
    keys = AgentKeys(svc.store.engine)
    key, row = keys.create(svc.user(alice), "script")
    assert keys.revoke(svc.user(bob), row.prefix) == 0  # Bob's page names Alice's prefix: nothing happens
    assert keys.user_for("", f"Bearer {key}", svc.user, False) == svc.user(alice)
    _, _, _, status = h.show(None)  # a page without an id yet: a readable refusal, no traceback
    assert "user id" in status


def test_whose_memory_a_call_may_use(svc):
    keys = AgentKeys(svc.store.engine)
    page, other = svc.new_user(), svc.new_user()
    script = svc.new_user()
    keys.mark_api_client(svc.user(script))  # what /new_user does (ui/api.py)
    key, _ = keys.create(svc.user(page), "agent")
    others_key, _ = keys.create(svc.user(other), "theirs")

    def user(uid, auth="", require=False):
        return keys.user_for(uid, auth, svc.user, require)

    assert user("", f"Bearer {key}") == svc.user(page)
    assert user(page, f"bearer {key}") == svc.user(page)  # the owner's id beside the key
    assert user(script) == svc.user(script)  # an API client's id alone
    refusals = {
        "no key, no id": (("", ""), NO_KEY),
        "the page's id alone": ((page, ""), PAGE_ID_ALONE),
        "another person's key against this memory": ((page, f"Bearer {others_key}"), OTHERS),
        "a key given as user_id": ((key, ""), KEY_AS_ID),
        "an unknown key": (("", "Bearer mem." + "x" * 43), UNKNOWN_KEY),
        "not a key": (("", "Bearer something-else"), NOT_A_KEY),
        "a Hugging Face token is no key": ((page, "Bearer hf_abcdef"), PAGE_ID_ALONE),
    }
    for what, ((uid, auth), message) in refusals.items():
        with pytest.raises(KeyRefused) as e:
            user(uid, auth)
        assert str(e.value) == message, what
    with pytest.raises(KeyRefused, match="Bearer <agent key>"):
        user("", key)  # the key without "Bearer"
    with pytest.raises(InvalidUserId):
        user("A" * 40)  # an id this server never issued
    # Keys required: an API client's id alone is refused too; a key still works.
    with pytest.raises(KeyRefused) as e:
        user(script, "", require=True)
    assert str(e.value) == KEYS_ONLY
    assert user("", f"Bearer {key}", require=True) == svc.user(page)


def test_forget_me_deletes_the_persons_keys(svc):
    page = svc.new_user()
    keys = AgentKeys(svc.store.engine)
    key, _ = keys.create(svc.user(page), "agent")
    svc.forget(page)
    assert _rows(svc) == []
    with pytest.raises(KeyRefused, match="Unknown agent key"):
        keys.user_for("", f"Bearer {key}", svc.user, False)


def test_turn_ids_are_numbered_per_session_not_by_a_counter_shared_by_users(svc):
    alice, bob = svc.new_user(), svc.new_user()
    for i in range(3):
        list(svc.send(alice, f"Alice says {i}"))
    list(svc.send(bob, "Bob's first words"))
    bobs = [m.turn_id() for m in svc.messages(bob)]
    s = svc.current_session(bob).session_id
    assert bobs == [f"{s}:1", f"{s}:2"]  # his first turns, whatever Alice said before
    alices = [m.turn_id() for m in svc.messages(alice)]
    assert alices == [f"{svc.current_session(alice).session_id}:{n}" for n in range(1, 7)]


def test_rows_stored_before_numbering_keep_their_turn_ids(svc):
    """Migration 8 numbered stored rows by their id: memory built from them still names its turns."""
    page = svc.new_user()
    list(svc.send(page, "Hello"))
    (first, _) = svc.messages(page)
    with svc.store.engine.begin() as c:  # a row as an older version stored it
        c.execute(sa.update(schema.messages).where(schema.messages.c.id == first.id).values(turn_no=None))
    again = svc.messages(page)[0]
    assert again.turn_id() == f"{first.session_id}:{first.id}"
    list(svc.send(page, "Again"))  # numbering goes on after it, never reusing a number of the session
    ids = [m.turn_id() for m in svc.messages(page)]
    assert len(set(ids)) == len(ids) == 4


def test_an_imported_export_with_the_apps_own_turn_ids_never_meets_a_later_chat_turn(svc):
    import json

    page = svc.new_user()
    data = {"sessions": [{"date": "2023-05-08", "turns": [{"speaker": "user", "text": "Hi", "id": "s2:1"}]}]}
    svc.import_history(page, json.dumps(data))
    list(svc.send(page, "Hello"))
    ids = [t["id"] for s in svc.export(page)["sessions"] for t in s["turns"]]
    assert len(set(ids)) == len(ids) == 3 and "s2:1" in ids, ids  # kept; the chat turns numbered past it
    svc.import_history(page, json.dumps(svc.export(page)))  # an own export imported again: prefixed
    ids = [t["id"] for s in svc.export(page)["sessions"] for t in s["turns"]]
    assert len(set(ids)) == len(ids) == 6, ids


def test_keys_only_refuses_every_call_without_a_key_and_new_user_through_the_real_api(tmp_path):
    """MEMORY_REQUIRE_AGENT_KEYS=1 (app.AppSettings.require_agent_keys) through Gradio's own API server."""
    from gradio_client import Client

    import app
    from tests.servers import free_port
    from ui import build_demo

    assert app.AppSettings.from_env({"MEMORY_REQUIRE_AGENT_KEYS": "1"}).require_agent_keys
    assert not app.AppSettings.from_env({}).require_agent_keys
    settings = Settings(data_dir=tmp_path)
    svc = FlatService(open_service(settings, ScriptedAgent(), identity=IdentityConfig(issued_only=True)))
    demo = build_demo(svc, settings, "test-secret-0123456789", require_agent_keys=True)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        page = svc.new_user()
        key, _ = svc.agent_keys.create(svc.user(page), "script")
        bare = Client(url, verbose=False)
        with pytest.raises(Exception, match="agent key only"):
            bare.predict(api_name="/new_user")
        with pytest.raises(Exception, match="agent key only"):
            bare.predict(page, api_name="/history")
        keyed = Client(url, verbose=False, headers={"Authorization": f"Bearer {key}"})
        reply, _trace = keyed.predict("", "Hello there", "", api_name="/send_message")
        assert reply and svc.messages(page)[0].text == "Hello there"
    finally:
        demo.close()
