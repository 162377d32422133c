"""The trace's declared shape (memory.trace_types) is the shape the agent writes: real traces, built
through the real reply and close paths (MiniLM, embedded Chroma, memory built offline, a scripted
LLM), hold exactly the declared keys with the declared types, at every depth.

mypy checks the readers (See why, Compare, forget's scrubbing, the benchmarks) against the same
TypedDicts, their `.get("key")` too (.ci/mypy_typeddict_get.py); this test checks the writer. A key
renamed on one side only fails one of the two.
"""

from __future__ import annotations

import json
import types
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from memory.settings import Options
from memory.trace_types import AnswerSource, AnswerUse, CloseReportDict, RetrievedMemory, TraceDict
from sessions.lifecycle import report_dict
from sessions.upkeep import Forgotten
from sessions.upkeep import trace as scrub
from tests.fakes import ScriptedLLM, exchanges, offline_agent
from ui.see_why import trace_html

# Keys a writer fills only sometimes: a memory that a later one replaced says by which.
SOMETIMES = {(RetrievedMemory, "superseded_by"), (AnswerSource, "superseded_by")}
MAY_BE_EMPTY = {AnswerUse}  # {} for a reply without memory (and a close)


def check(value: Any, hint: Any, path: str, seen: set[str]) -> None:
    """`value` has the shape `hint` declares: a TypedDict's keys all declared (and all there, but for
    SOMETIMES; MAY_BE_EMPTY may be {}), each value of its declared type; `seen` collects the TypedDicts met."""
    if is_typeddict(hint):
        assert isinstance(value, dict), f"{path}: {type(value).__name__}, not a dict"
        if not value and hint in MAY_BE_EMPTY:
            return
        hints = get_type_hints(hint)
        assert not set(value) - set(hints), f"{path}: keys {sorted(set(value) - set(hints))} not in {hint.__name__}"
        missing = {k for k in set(hints) - set(value) if (hint, k) not in SOMETIMES}
        assert not missing, f"{path}: {hint.__name__} keys {sorted(missing)} missing"
        seen.add(hint.__name__)
        for k, v in value.items():
            check(v, hints[k], f"{path}.{k}", seen)
        return
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        errors = []
        for a in args:
            try:
                check(value, a, path, seen)
                return
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{path}: {value!r} is none of {args}: {errors}")
    if origin is list:
        assert isinstance(value, list), f"{path}: {type(value).__name__}, not a list"
        for i, x in enumerate(value):
            check(x, args[0], f"{path}[{i}]", seen)
        return
    if origin is dict:
        assert isinstance(value, dict), f"{path}: {type(value).__name__}, not a dict"
        for k, v in value.items():
            check(k, args[0], f"{path} key", seen)
            check(v, args[1], f"{path}[{k!r}]", seen)
        return
    if hint is type(None):
        assert value is None, f"{path}: {value!r} is not None"
    elif hint is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: {value!r} is not a number"
    else:
        assert isinstance(value, hint), f"{path}: {value!r} is not {hint.__name__}"


@pytest.fixture(scope="module")
def built(tmp_path_factory, minilm):
    """Three sessions closed offline (the move from Porto to Lisbon makes a Changed edge); the close reports."""
    llm = ScriptedLLM("ok")
    agent = offline_agent(tmp_path_factory.mktemp("trace-types"), minilm, llm)
    reports = [
        agent.close_session("u", s, llm_steps=False)
        for s in (
            exchanges("s1", "2023-01-05", ("I live in Porto with my two roommates.", "Porto is lovely.")),
            exchanges("s2", "2023-02-10", ("Last month I adopted a beagle puppy. His name is Rex.", "A beagle!")),
            exchanges("s3", "2023-04-03", ("I live in Lisbon now, the move went smoothly.", "Congratulations!")),
        )
    ]
    return agent, llm, reports


def reply_trace(built, strategy: str, question: str, reply: str) -> TraceDict:
    agent, llm, _ = built
    llm.script = [reply]
    done = list(agent.reply("u", [], question, "2023-05-01", Options(strategy=strategy)))[-1]
    assert done.trace is not None and done.trace.error is None and done.text == reply
    return done.trace.to_dict()


def test_a_theanine_reply_trace_is_the_declared_shape_at_every_depth(built):
    t = reply_trace(built, "theanine", "Where do I live now?", "You live in Porto with your roommates.")
    seen: set[str] = set()
    check(t, TraceDict, "trace", seen)
    # the parts that only a THEANINE reply naming a replaced value has were there to check
    assert {"RetrievedMemory", "MemoryRef", "Timeline", "ChainMemory", "LLMCallDict"} <= seen
    assert {"AnswerUse", "AnswerSource", "StaleValue"} <= seen
    assert any("superseded_by" in m for m in t["memories"]) and t["answer_use"]["stale"]
    assert json.loads(json.dumps(t)) == t  # JSON-safe, as the database stores it
    check(scrub(t, Forgotten.of("s2:m0", "", {})), TraceDict, "scrubbed", set())  # forget keeps the shape


def test_a_secom_reply_trace_is_the_declared_shape(built):
    t = reply_trace(built, "secom", "What's my dog's name?", "Your beagle is called Rex.")
    seen: set[str] = set()
    check(t, TraceDict, "trace", seen)
    assert {"Segment", "AnswerSource"} <= seen and t["segments"]


def test_a_close_report_is_the_declared_shape(built):
    *_, reports = built
    for r in reports:
        check(report_dict(r), CloseReportDict, "report", set())


def test_see_why_draws_what_the_declared_keys_hold(built):
    """The page reads the keys the agent writes: a renamed key would leave a part empty."""
    t = reply_trace(built, "theanine", "Where do I live now?", "You live in Porto with your roommates.")
    html = trace_html(t)
    assert html.count('<li class="timeline"') == len(t["timelines_raw"]) > 0
    assert html.count('data-label="event"') == len(t["memories"]) > 0
    assert "Superseded" in html and 'data-stale="1"' in html and ">reply<" in html
