"""Sign in with Hugging Face as the identity (MEMORY_HF_LOGIN=1; sessions/users.py).

Hugging Face cannot be reached here, so the profile is constructed: a gr.OAuthProfile made from the
OpenID userinfo that Gradio's OAuth callback stores. The mapping is checked (stable, keyed, never the
username), then the page load with and without a signed-in profile, then that without the setting
the page and the app are as before (no login button, no OAuth routes).
"""

from __future__ import annotations

import gradio as gr
import pytest

from memory.settings import Settings
from sessions import open_service
from sessions.users import ACCOUNT_PREFIX, USER_ID_RE, Accounts, IdentityConfig, is_account_id, new_user_id
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from tests.reliability_app import handlers

SECRET = "deployer-secret-0123456789abcdef"


def profile(sub="64f1c0ffee0000000000abcd", username="mirela", name="Mirela P.") -> gr.OAuthProfile:
    return gr.OAuthProfile(
        {
            "sub": sub,
            "name": name,
            "preferred_username": username,
            "profile": f"https://huggingface.co/{username}",
            "picture": "https://example.invalid/avatar.png",
        }
    )


def test_an_account_maps_to_one_id_derived_with_the_secret():
    a = Accounts(SECRET)
    uid = a.user_id(profile())
    assert uid and USER_ID_RE.fullmatch(uid) and uid.startswith(ACCOUNT_PREFIX)
    assert a.user_id(profile()) == uid == Accounts(SECRET).user_id(profile())  # any browser, any restart
    assert a.user_id(profile(username="mirela-renamed", name="M")) == uid  # the account's id, not its name
    assert a.user_id(profile(sub="someone-else")) != uid
    assert Accounts("another-secret-0123456789").user_id(profile()) != uid  # keyed: needs the secret
    assert "mirela" not in uid.lower() and "64f1c0ffee" not in uid
    no_sub = gr.OAuthProfile({"name": "", "preferred_username": "ana", "profile": "", "picture": ""})
    assert a.user_id(no_sub) == a.user_id(gr.OAuthProfile(dict(no_sub))) != a.user_id(profile())
    assert a.user_id(None) is None
    with pytest.raises(ValueError, match="MEMORY_HF_ID_SECRET"):
        Accounts("short")


def test_anonymous_ids_never_look_like_account_ids():
    assert not any(is_account_id(new_user_id()) for _ in range(2000))


@pytest.fixture
def page(tmp_path):
    svc = FlatService(
        open_service(Settings(data_dir=tmp_path), ScriptedAgent(), identity=IdentityConfig(issued_only=True))
    )
    h = handlers(svc)
    h.accounts = Accounts(SECRET)
    return svc, h


def test_the_same_account_gets_the_same_memory_in_any_browser(page):
    svc, h = page
    first = h.load_signed_in(None, None, profile())[h.c.uid]  # a new browser
    assert first == Accounts(SECRET).user_id(profile())
    list(svc.send(first, "My cat Miso hates thunderstorms."))
    anonymous = svc.new_user()
    second = h.load_signed_in(anonymous, None, profile())[h.c.uid]  # another browser, with its own id
    assert second == first
    assert [m.text for m in svc.messages(second) if m.role == "user"] == ["My cat Miso hates thunderstorms."]
    other = h.load_signed_in(None, None, profile(sub="someone-else", username="ana"))[h.c.uid]
    assert other != first and svc.messages(other) == []  # another account: its own memory


def test_signed_out_the_browser_does_not_keep_the_account(page):
    svc, h = page
    account = h.load_signed_in(None, None, profile())[h.c.uid]
    out = h.load_signed_in(account, None, None)  # the page loads again after "Logout"
    assert out[h.c.uid] != account and not is_account_id(out[h.c.uid]) and svc.is_known(out[h.c.uid])
    anonymous = svc.new_user()
    assert h.load_signed_in(anonymous, None, None)[h.c.uid] == anonymous  # not signed in: as before


def test_forget_me_then_signing_in_again_starts_empty(page):
    svc, h = page
    account = h.load_signed_in(None, None, profile())[h.c.uid]
    list(svc.send(account, "My cat Miso hates thunderstorms."))
    svc.forget(account)
    assert not svc.is_known(account)
    again = h.load_signed_in(None, None, profile())[h.c.uid]
    assert again == account and svc.messages(again) == []


@pytest.fixture
def on_a_space(monkeypatch):
    """What a Space with `hf_oauth: true` gives the app: SYSTEM, SPACE_ID and the OAuth client's variables
    (Gradio reads the latter at import, so they are set on its module)."""
    from gradio import oauth

    monkeypatch.setenv("SYSTEM", "spaces")
    monkeypatch.setenv("SPACE_ID", "someone/memory-chat")
    for name, value in {
        "OAUTH_CLIENT_ID": "client-id",
        "OAUTH_CLIENT_SECRET": "client-secret",
        "OAUTH_SCOPES": "openid profile",
        "OPENID_PROVIDER_URL": "https://huggingface.co",
    }.items():
        monkeypatch.setattr(oauth, name, value)


def signed_in_env(data_dir) -> dict:
    return {"MEMORY_DATA_DIR": str(data_dir), "MEMORY_HF_LOGIN": "1", "MEMORY_HF_ID_SECRET": SECRET}


def test_sign_in_is_off_where_gradio_oauth_cannot_work(tmp_path):
    import app

    on = app.AppSettings.from_env(
        {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_HF_LOGIN": "1", "MEMORY_HF_ID_SECRET": SECRET}
    )
    assert app.accounts(on) is None  # not a Space: the app starts as without the setting


def test_without_the_setting_nothing_changes(tmp_path, on_a_space):
    import app
    from ui import build_demo

    settings = app.AppSettings.from_env({"MEMORY_DATA_DIR": str(tmp_path)})
    assert settings.hf_login is False and app.accounts(settings) is None
    svc = open_service(settings.memory, ScriptedAgent())
    plain = build_demo(svc, settings.memory, "test-secret-0123456789", accounts=app.accounts(settings))
    assert not plain.expects_oauth
    assert not any(isinstance(b, gr.LoginButton) for b in plain.blocks.values())
    assert "load_signed_in" not in {getattr(f.fn, "__name__", "") for f in plain.fns.values()}

    on = app.AppSettings.from_env(
        {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_HF_LOGIN": "1", "MEMORY_HF_ID_SECRET": SECRET}
    )
    accounts = app.accounts(on)
    assert accounts is not None and accounts.user_id(profile()) == Accounts(SECRET).user_id(profile())
    assert SECRET not in repr(on) and SECRET not in str(on.memory.public())
    signed = build_demo(
        open_service(on.memory, ScriptedAgent()), on.memory, "test-secret-0123456789", accounts=accounts
    )
    assert signed.expects_oauth and any(isinstance(b, gr.LoginButton) for b in signed.blocks.values())
    assert "load_signed_in" in {getattr(f.fn, "__name__", "") for f in signed.fns.values()}


def test_without_a_secret_a_kept_one_is_used(tmp_path, on_a_space):
    import app

    on = app.AppSettings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_HF_LOGIN": "1"})
    a, b = app.accounts(on), app.accounts(on)
    assert a is not None and b is not None and a.user_id(profile()) == b.user_id(profile())  # kept across restarts
    assert (tmp_path / "hf_login.secret").stat().st_mode & 0o077 == 0


def test_gradio_passes_the_signed_in_profile_to_the_page_load(page):
    """Gradio's own argument injection (helpers.special_args, what an event runs through) reads the
    OAuth session that its login callback stored and hands load_signed_in the profile."""
    import time

    from gradio.helpers import special_args
    from starlette.requests import Request

    _svc, h = page
    info = {"userinfo": dict(profile()), "expires_at": time.time() + 3600, "access_token": "t", "scope": "openid"}

    def request(session: dict) -> gr.Request:
        return gr.Request(Request({"type": "http", "headers": [], "session": session}))

    args, *_ = special_args(h.load_signed_in, [None], request({"oauth_info": info}))
    assert isinstance(args[2], gr.OAuthProfile) and args[2]["sub"] == profile()["sub"]
    assert h.load_signed_in(*args)[h.c.uid] == Accounts(SECRET).user_id(profile())
    args, *_ = special_args(h.load_signed_in, [None], request({}))  # not signed in
    assert args[2] is None
