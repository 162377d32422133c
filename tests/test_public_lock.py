"""Safe defaults on a public deployment: visitors get no choice of LLM backend, model or URL."""

from __future__ import annotations

import pytest

from app import AppSettings, listens_publicly, llm_change_allowed
from memory.errors import InvalidOptions
from sessions import new_user_id, open_service
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from tests.reliability_app import components


@pytest.mark.parametrize(
    "env,allowed",
    [
        ({}, True),
        ({"GRADIO_SERVER_NAME": "127.0.0.1"}, True),
        ({"GRADIO_SERVER_NAME": "localhost"}, True),
        ({"GRADIO_SERVER_NAME": "::1"}, True),
        ({"SPACE_ID": "someone/memory-chat"}, False),
        ({"GRADIO_SERVER_NAME": "0.0.0.0"}, False),
        ({"GRADIO_SERVER_NAME": "::"}, False),
        ({"GRADIO_SERVER_NAME": "192.168.1.20"}, False),
        ({"GRADIO_SERVER_NAME": "myhost.example"}, False),
        ({"SPACE_ID": "a/b", "MEMORY_ALLOW_LLM_CHANGE": "1"}, True),
        ({"GRADIO_SERVER_NAME": "0.0.0.0", "MEMORY_ALLOW_LLM_CHANGE": "1"}, True),
        ({"MEMORY_LOCK_LLM": "1"}, False),  # the old switch keeps working
        ({"MEMORY_LOCK_LLM": "1", "MEMORY_ALLOW_LLM_CHANGE": "1"}, False),  # an explicit lock wins
    ],
)
def test_llm_choice_locked_on_public_deployments(env, allowed):
    assert llm_change_allowed(env) is allowed
    assert AppSettings.from_env({**env, "MEMORY_DATA_DIR": "/tmp/x"}).allow_llm_change is allowed


def test_listen_addresses():
    assert not listens_publicly("") and not listens_publicly("127.0.0.2") and not listens_publicly("[::1]")
    assert listens_publicly("0.0.0.0") and listens_publicly("10.0.0.5")


def space_service(tmp_path, **env):
    a = AppSettings.from_env({"SPACE_ID": "someone/memory-chat", "MEMORY_DATA_DIR": str(tmp_path), **env})
    return FlatService(open_service(a.memory, ScriptedAgent(), allow_llm_change=a.allow_llm_change)), a.memory


def test_space_refuses_a_changed_llm_through_the_service(tmp_path):
    svc, settings = space_service(tmp_path)
    uid = new_user_id()
    for choice in (
        {"backend": "openai", "model": "m", "base_url": "https://api.example.com/v1"},
        {"backend": "openai", "model": "gpt-4o-mini", "base_url": "http://169.254.169.254/v1"},
    ):
        with pytest.raises(InvalidOptions) as e:
            svc.save_settings(uid, {"temperature": 0.3}, choice)
        assert "fixed by this deployment" in str(e.value)
    assert "llm" not in svc.prefs(uid) and svc.options(uid).temperature == settings.options.temperature
    # The form showing the deployer's own LLM saves the memory settings and no LLM choice.
    svc.save_settings(uid, {"temperature": 0.3}, svc.llm_public(uid))
    assert svc.options(uid).temperature == 0.3 and "llm" not in svc.prefs(uid)


def test_space_ignores_an_llm_choice_saved_before_the_lock(tmp_path):
    svc, _ = space_service(tmp_path)
    uid = new_user_id()
    svc.store.set_prefs(uid, {"llm": {"backend": "openai", "model": "m", "base_url": "http://10.0.0.1/v1"}})
    assert svc.llm(uid) is None
    assert svc.llm_public(uid)["base_url"] == ""


def _find(config, elem_id: str) -> dict:
    return next(c for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)


def _inside(config, parent_id: int) -> set[int]:
    """Ids of every component under the layout node `parent_id`."""

    def walk(node, under):
        out = set()
        for ch in node.get("children", []) or []:
            if under:
                out.add(ch["id"])
            out |= walk(ch, under or ch["id"] == parent_id)
        return out

    return walk(config["layout"], False)


@pytest.mark.parametrize("env,offered", [({}, False), ({"MEMORY_ALLOW_LLM_CHANGE": "1"}, True)])
def test_space_settings_panel_offers_no_backend_or_url_choice(tmp_path, env, offered):
    from ui import build_demo

    svc, settings = space_service(tmp_path, **env)
    demo = build_demo(svc, settings, "test-secret-0123456789")
    cfg = demo.get_config_file()
    row = _find(cfg, "llm-choice")
    assert row["props"]["visible"] is offered
    labels = {c["id"]: c["props"].get("label") for c in cfg["components"]}
    inside = {labels[i] for i in _inside(cfg, row["id"])}
    assert {"LLM backend", "Model (OpenAI-compatible backend only)"} <= inside
    assert any(str(lab).startswith("Base URL") for lab in inside)


def test_space_settings_handler_never_saves_an_llm_choice(tmp_path):
    """A crafted event for the (hidden) settings form still changes no LLM."""
    from ui.handlers import Handlers

    svc, settings = space_service(tmp_path)
    c = components()  # stand-ins for the Gradio components
    h = Handlers(svc, c, allow_llm_change=svc.allow_llm_change)
    uid = new_user_id()
    values = (0.5, 3, 3, 1, 2, "tuned", 0.75, "hybrid", 256)
    out = h.side.save_settings(uid, "openai", "m", "http://127.0.0.1:9/v1", *values)
    assert "llm" not in svc.prefs(uid) and svc.llm(uid) is None
    assert out["base_url"] == "" and out["backend"] == settings.llm.backend
