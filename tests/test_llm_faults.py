"""The real `openai` client against a scripted misbehaving server: retries, timeouts, cut streams."""

import json

import pytest
from fault_server import FaultServer

from memory.errors import LLMError
from memory.llm import LLMSession, OpenAIChat
from memory.settings import LLMConfig
from memory.theanine import prompts
from memory.trace import Trace

MSG = [{"role": "user", "content": "hi"}]


def session(srv, timeout=5.0):
    cfg = LLMConfig(backend="openai", model="m", base_url=srv.url, api_key="sk-test-not-a-real-key", timeout=timeout)
    return LLMSession(OpenAIChat(cfg), Trace("t"), max_retries=2, backoff=0.01)


def test_429_and_500_are_retried_with_backoff():
    with FaultServer(("status", 429), ("status", 500), ("ok", "fine")) as srv:
        s = session(srv)
        assert s.text("x", MSG) == "fine"
        assert len(srv.requests) == 3 and s.trace.llm_calls[0].status == "retried"


def test_persistent_errors_and_hangs_end_in_a_clear_error():
    with FaultServer(("status", 503)) as srv:
        s = session(srv)
        with pytest.raises(LLMError):
            s.text("x", MSG)
        assert len(srv.requests) == 3 and s.trace.llm_calls[0].status == "error"
    with FaultServer(("hang", 3)) as srv:
        s = session(srv, timeout=0.5)
        with pytest.raises(LLMError, match="Timeout"):
            s.text("x", MSG)


def test_a_stream_cut_midway_is_an_error_and_keeps_what_arrived():
    with FaultServer(("cut", "Hello there, this reply will be cut")) as srv:
        s = session(srv)
        got = []
        with pytest.raises(LLMError):
            for p in s.stream("reply", MSG):
                got.append(p)
        assert "".join(got).startswith("Hello") and s.trace.llm_calls[0].status == "error"


@pytest.mark.parametrize("answer", ["", "not json", json.dumps({"relations": [{"pair": 0, "relation": "Destroys"}]})])
def test_bad_structured_answers_fall_back(answer):
    with FaultServer(("ok", answer)) as srv:
        s = session(srv)
        pairs = [({"time": "t1", "event": "a"}, {"time": "t2", "event": "b"})]
        out = s.json(
            "relation",
            prompts.relation_messages(pairs),
            prompts.RELATION_SCHEMA,
            lambda raw: prompts.validate_relations(raw, 1),
            lambda: {0: "None"},
        )
        assert out == {0: "None"} and s.trace.llm_calls[0].status == "fallback"


def test_an_empty_choice_list_is_retried_then_reported():
    with FaultServer(("empty", None)) as srv:
        s = session(srv)
        with pytest.raises(LLMError):
            s.text("x", MSG)
        assert len(srv.requests) == 3


def test_the_key_never_reaches_the_trace():
    with FaultServer(("status", 401)) as srv:
        s = session(srv)
        with pytest.raises(LLMError):
            s.text("x", MSG)
        assert "sk-test" not in json.dumps(s.trace.to_dict())
