import pytest

from memory.errors import LLMError, TransientLLMError
from memory.llm import LLMSession, parse_json
from memory.trace import Trace
from tests.fakes import ScriptedLLM


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
        def stream(self, messages, *, temperature, max_tokens, **ignored):
            yield "Hel"
            raise TransientLLMError("connection reset")

    s = session(Cut())
    got = []
    with pytest.raises(LLMError, match="cut off"):
        for piece in s.stream("reply", [{"role": "user", "content": "hi"}]):
            got.append(piece)
    assert got == ["Hel"] and s.trace.llm_calls[0].status == "error"


def test_parse_json_finds_embedded_object():
    assert parse_json('blah {"a": [1, 2]} blah') == ({"a": [1, 2]}, True)
    with pytest.raises(ValueError):
        parse_json("nothing here")
    assert parse_json('["a", "b",') == (["a", "b"], True)  # cut off at max_tokens
    # A broken object is not mended into a list of its words (a "refined timeline" of garbage).
    for broken in ("{not json", "{oops, broken}", "Here: {no quotes at all"):
        with pytest.raises(ValueError):
            parse_json(broken)


def test_an_empty_stream_is_asked_again_with_another_seed_then_left_to_the_caller():
    seeds = []

    class Empty(ScriptedLLM):
        def stream(self, messages, *, temperature, max_tokens, seed=None, **ignored):
            seeds.append(seed)
            yield from (["  ", "\n"] if len(seeds) < 3 else ["Hi", " there"])

    s = session(Empty())
    assert "".join(s.stream("reply", [{"role": "user", "content": "hi"}])) == ""  # empty twice: nothing
    assert seeds[0] is None and seeds[1] is not None and s.trace.llm_calls[0].detail == "empty answer"
    # Leading whitespace is held back, so a retried answer does not start with the empty one's blanks.
    assert "".join(s.stream("reply", [{"role": "user", "content": "hi"}])) == "Hi there"


def test_bundled_models_and_llm_steps_from_the_environment():
    from memory.errors import InvalidOptions
    from memory.settings import Settings

    s = Settings.from_env({})
    assert s.llm.bundled_model == "qwen1.5b" and s.llm.is_bundled and not s.llm_steps_for()
    assert s.segmenter == "embedding"
    assert Settings.from_env({"LLM_EMBEDDED_MODEL": "gemma3"}).llm.bundled_model == "gemma3"
    on = Settings.from_env({"MEMORY_LLM_STEPS": "on"})
    assert on.llm_steps_for() and on.segmenter == "llm"
    assert Settings.from_env({"LLM_GGUF_PATH": "/models/mine.gguf"}).llm_steps_for()  # a user's GGUF
    assert Settings.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}).llm_steps_for()  # any endpoint
    assert not Settings.from_env({"OPENAI_API_KEY": "k", "MEMORY_LLM_STEPS": "off"}).llm_steps_for()
    for bad in ({"LLM_EMBEDDED_MODEL": "gpt5"}, {"MEMORY_LLM_STEPS": "maybe"}):
        with pytest.raises(InvalidOptions):
            Settings.from_env(bad)
