"""The settings form's option fields come from one list, sessions.users.OPTION_FIELDS."""

from dataclasses import fields
from typing import Any

from memory.settings import Options, Settings
from sessions import new_user_id, open_service
from sessions.users import INT_FIELDS, OPTION_FIELDS
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from tests.reliability_app import components
from ui import build_demo
from ui.handlers import FIELD_LABELS, Handlers


def test_every_option_field_is_an_option_with_a_label():
    types = {f.name: f.type for f in fields(Options)}
    assert set(OPTION_FIELDS) <= set(types)
    # The whole-number fields are exactly the int options of the form (they are read back as int).
    assert set(INT_FIELDS) == {f for f in OPTION_FIELDS if types[f] in (int, "int")}
    assert all(FIELD_LABELS.get(f) for f in OPTION_FIELDS)


def test_the_form_saves_and_shows_each_value_in_its_own_field(tmp_path):
    settings = Settings(data_dir=tmp_path)
    svc = FlatService(open_service(settings, ScriptedAgent()))
    c = components("<{}>")
    h = Handlers(svc, c, allow_llm_change=False)
    uid = new_user_id()
    values = {"temperature": 0.3, "j": 2, "k": 5, "n": 2, "compression_rate": 0.5, "retriever": "bm25"}
    values["theanine_mode"], values["whole_timelines"] = "paper", 1
    values["max_reply_tokens"] = 300
    llm = svc.llm_public(uid)
    out = h.side.save_settings(uid, llm["backend"], llm["model"], llm["base_url"], *(values[f] for f in OPTION_FIELDS))
    assert {f: out[f"<{f}>"] for f in OPTION_FIELDS} == values, out
    # the form names the model replies come from (the bundled one here), not the endpoint's default model
    assert out["<model_in_use>"].startswith("In use: embedded llama.cpp") and "gpt" not in out["<model_in_use>"]
    assert "Memory per reply: 200 tokens on a bundled model, 1,000 on an endpoint" in out["<model_in_use>"]
    o = svc.options(uid)
    assert {f: getattr(o, f) for f in OPTION_FIELDS} == values


def test_the_layout_wires_the_option_inputs_in_that_order(tmp_path):
    settings = Settings(data_dir=tmp_path)
    demo = build_demo(open_service(settings, ScriptedAgent()), settings, "fake-secret-0123456789")
    by_id: dict[int, Any] = {b._id: b for b in demo.blocks.values()}
    saves = [d for d in demo.fns.values() if getattr(d.fn, "__name__", "") == "save_settings"]
    assert len(saves) == 1
    labels = [by_id[b._id].label for b in saves[0].inputs][4:]
    assert len(labels) == len(OPTION_FIELDS)
    assert all(lb.startswith(FIELD_LABELS[f]) for lb, f in zip(labels, OPTION_FIELDS, strict=True)), labels
