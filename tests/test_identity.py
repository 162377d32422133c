"""Identity: only ids this server issued are served (a chosen id is refused everywhere), issuing is
rate-limited per client, so per-user limits hold per real client; private UI events refuse
without saying they succeeded. In-process with the scripted agent, plus the running app over its API."""

from __future__ import annotations

import json

import pytest

from memory.settings import Settings
from sessions import UserError, open_service
from sessions.users import IdentityConfig, InvalidUserId
from sessions.work import LimitReached, Limits
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from tests.reliability_app import handlers

CHOSEN = ["a" * 20, "my-favourite-user-id-123"]
HISTORY = json.dumps({"sessions": [{"date": "2023-05-01", "turns": [{"speaker": "user", "text": "hello there"}]}]})


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def service(tmp_path, **cfg) -> FlatService:
    conf = IdentityConfig(**{"issued_only": True, **cfg})
    return FlatService(
        open_service(Settings(data_dir=tmp_path), ScriptedAgent(), limits=Limits(imports_per_hour=1), identity=conf)
    )


@pytest.mark.parametrize("chosen", CHOSEN)
def test_a_chosen_id_is_refused_by_every_entry(tmp_path, chosen):
    svc = service(tmp_path)
    calls = {
        "send": lambda: list(svc.send(chosen, "hi")),
        "history": lambda: svc.sessions(chosen),
        "messages": lambda: svc.messages(chosen),
        "export": lambda: svc.export(chosen),
        "import": lambda: svc.import_history(chosen, HISTORY),
        "end": lambda: svc.end_session(chosen),
        "new session": lambda: svc.new_session(chosen, "2023-05-02"),
        "settings": lambda: svc.save_settings(chosen, {"k": 3}),
        "graph": lambda: svc.graph(chosen),
        "forget": lambda: svc.forget(chosen),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidUserId, match="Unknown user id"):
            call()
        assert not svc.store.user_exists(chosen), name  # nothing was created for it


def test_an_issued_id_works_and_a_forgotten_one_is_refused(tmp_path):
    svc = service(tmp_path)
    uid = svc.new_user("198.51.100.7")
    assert svc.is_known(uid) and not svc.is_known("b" * 32)
    list(svc.send(uid, "hello"))
    assert next(m.text for m in svc.messages(uid)) == "hello"
    svc.forget(uid)
    with pytest.raises(InvalidUserId):
        svc.sessions(uid)


def test_new_users_are_rate_limited_per_client_so_limits_hold_per_client(tmp_path):
    clock = Clock()
    svc = service(tmp_path, new_users_per_hour=2)
    svc.identity.clock = clock
    ids = [svc.new_user("203.0.113.5") for _ in range(2)]
    with pytest.raises(LimitReached, match="new users in the last hour"):
        svc.new_user("203.0.113.5")
    assert svc.new_user("203.0.113.6")  # another client is not affected
    # One import per id per hour and two ids per client per hour: this client imports twice, not six times.
    done = 0
    for uid in ids:
        svc.import_history(uid, HISTORY)
        done += 1
        with pytest.raises(LimitReached):
            svc.import_history(uid, HISTORY)
    assert done == 2
    clock.t += 3601
    assert svc.new_user("203.0.113.5")  # an hour later


def test_the_page_gets_an_issued_id_and_private_events_refuse_plainly(tmp_path):
    svc = service(tmp_path)
    h = handlers(svc)
    out = h.load("a" * 20)  # a chosen id in the browser's storage is replaced by an issued one
    uid = out[h.c.uid]
    assert uid != "a" * 20 and svc.is_known(uid)
    assert h.load(uid)[h.c.uid] == uid  # and kept afterwards
    llm = svc.llm_public(uid)
    options = [0.5, 3, 3, 1, 2, "tuned", 0.5, "bm25", 256]  # sessions.users.OPTION_FIELDS, in order
    fields = [llm["backend"], llm["model"], llm["base_url"], *options]
    res = h.side.save_settings("a" * 20, *fields)  # a private event called with a chosen id
    assert "Unknown user id" in res[h.c.settings_status] and "Settings saved" not in res[h.c.settings_status]
    h.side.allow_llm_change = False
    res = h.side.save_settings(uid, "openai", "gpt-x", "http://example.com/v1", *fields[3:])
    assert "does not let visitors change the LLM" in res[h.c.settings_status]
    with pytest.raises(UserError):
        svc.new_session("a" * 20, "2023-05-02")


@pytest.mark.slow
def test_the_running_app_refuses_a_chosen_id_over_the_api(tmp_path, llm_server):
    from gradio_client import Client

    from tests.llm_server import app_llm_env
    from tests.ui_fixtures import RunningApp

    app = RunningApp(tmp_path / "data", tmp_path / "app.log", **app_llm_env(llm_server), MEMORY_NEW_USERS_PER_HOUR="2")
    try:
        c = Client(app.url, verbose=False)
        with pytest.raises(Exception, match="Unknown user id"):
            c.predict("a" * 20, api_name="/history")
        uid = c.predict(api_name="/new_user")
        assert c.predict(uid, api_name="/history")["sessions"]
        c.predict(api_name="/new_user")
        with pytest.raises(Exception, match="new users in the last hour"):
            c.predict(api_name="/new_user")
    finally:
        app.stop()
