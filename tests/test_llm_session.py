from memory.errors import LLMError, TransientLLMError
from memory.llm import LLMSession, extract_json
from memory.trace import Trace

from conftest import ScriptedLLM

import pytest


def session(llm):
    return LLMSession(llm, Trace("t"), max_retries=2, sleep=lambda s: None)


def test_transient_errors_are_retried_then_succeed():
    s = session(ScriptedLLM(TransientLLMError("429"), TransientLLMError("500"), "hello"))
    assert s.text("x", [{"role": "user", "content": "hi"}]) == "hello"
    assert s.trace.llm_calls[0].status == "retried"


def test_json_is_repaired_validated_and_falls_back():
    schema = {"type": "object"}
    def validate(raw):
        if not isinstance(raw.get("n"), int):
            raise ValueError("n must be an int")
        return raw["n"]
    s = session(ScriptedLLM('Sure! ```json\n{"n": 3}\n``` hope it helps'))
    assert s.json("p", [], schema, validate, lambda: -1) == 3
    assert s.trace.llm_calls[-1].status == "repaired"
    s = session(ScriptedLLM('{"n": "three"}', "not json at all"))
    assert s.json("p", [], schema, validate, lambda: -1) == -1
    assert s.trace.llm_calls[-1].status == "fallback"
    s = session(ScriptedLLM(TransientLLMError("down")))
    assert s.json("p", [], schema, validate, lambda: -1) == -1
    assert "unavailable" in s.trace.llm_calls[-1].detail


def test_stream_cut_midway_raises_a_clear_error():
    class Cut(ScriptedLLM):
        def stream(self, messages, *, temperature, max_tokens):
            yield "Hel"
            raise TransientLLMError("connection reset")
    s = session(Cut())
    got = []
    with pytest.raises(LLMError, match="cut off"):
        for piece in s.stream("reply", [{"role": "user", "content": "hi"}]):
            got.append(piece)
    assert got == ["Hel"] and s.trace.llm_calls[0].status == "error"


def test_extract_json_finds_embedded_object():
    assert extract_json('blah {"a": [1, 2]} blah') == {"a": [1, 2]}
    with pytest.raises(ValueError):
        extract_json("nothing here")
