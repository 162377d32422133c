"""Issue 19, item 6: a reasoning model's thinking never reaches the chat or the JSON parser.

Through the real `openai` client against the scripted server: `<think>...</think>` in the answer
(whole or streamed in 5-character pieces, so tags arrive split) and the `reasoning_content` field.
The trace keeps the thinking; "See why" shows it folded.
"""

import json

import pytest

from memory.llm import LLMSession, OpenAIChat
from memory.llm.reasoning import ThinkFilter, split_reasoning
from memory.settings import LLMConfig
from memory.theanine import prompts
from memory.trace import Trace
from tests.llm_server import ok, think
from ui.see_why import trace_html

MSGS = [{"role": "user", "content": "hello"}]


def session(server) -> LLMSession:
    cfg = LLMConfig(backend="openai", model="m", base_url=server.url, api_key="sk-test-x", timeout=5)
    return LLMSession(OpenAIChat(cfg), Trace("theanine"))


@pytest.mark.parametrize(
    "text, answer, thoughts",
    [
        ("<think>plan it</think>\n\nHello.", "Hello.", "plan it"),
        ("Hello.", "Hello.", ""),
        ("<THINK>a</THINK>Hi <think>b</think>there", "Hi there", "a\nb"),
        ("the template opened it</think>Answer", "Answer", "the template opened it"),
        ("<think>cut off while thinking", "", "cut off while thinking"),
    ],
)
def test_split_reasoning(text, answer, thoughts):
    assert split_reasoning(text) == (answer, thoughts)


def test_the_stream_filter_handles_tags_split_across_pieces():
    text = "<think>weigh the options</think>Rex is your dog. 1 < 2 and <b> stays."
    for size in (1, 2, 3, 5, 7):
        f = ThinkFilter()
        shown = "".join(f.feed(text[i : i + size]) for i in range(0, len(text), size)) + f.finish()
        assert shown == "Rex is your dog. 1 < 2 and <b> stays." and f.thoughts == "weigh the options"


def test_a_streamed_reply_shows_no_thinking_and_the_trace_keeps_it(llm_server):
    llm_server.script("reply", ok("<think>The user asks about Rex; keep it short.</think>Rex is your beagle."))
    s = session(llm_server)
    pieces = list(s.stream("reply", MSGS))
    assert "".join(pieces) == "Rex is your beagle." and not any("<" in p for p in pieces)
    assert s.trace.llm_calls[0].reasoning == "The user asks about Rex; keep it short."
    html = trace_html(s.trace.to_dict())
    assert '<details class="mc-reasoning">' in html and "keep it short" in html


def test_reasoning_content_stays_out_of_the_streamed_reply(llm_server):
    llm_server.script("reply", think("Hello there.", "first I consider the greeting"))
    s = session(llm_server)
    assert "".join(s.stream("reply", MSGS)) == "Hello there."
    assert s.trace.llm_calls[0].reasoning == "first I consider the greeting"


def test_json_steps_parse_the_answer_not_the_thinking(llm_server):
    answer = {"relation": "Cause"}
    thinking = '<think>Maybe {"relation": "None"}? No: A causes B.</think>'
    llm_server.script("relation", ok(thinking + json.dumps(answer)), think(json.dumps(answer), "{not json"))
    for _ in range(2):
        s = session(llm_server)
        got = s.json(
            "relation",
            prompts.relation_messages({"time": "t1", "event": "a"}, {"time": "t2", "event": "b"}, []),
            prompts.RELATION_SCHEMA,
            prompts.validate_relation,
            lambda: "fallback",
        )
        call = s.trace.llm_calls[0]
        assert got == "Cause" and call.status == "ok" and call.reasoning  # not mended, not fallen back


def test_plain_text_steps_drop_the_thinking(llm_server):
    llm_server.script("judge", think("<think>hmm</think>yes", "and more"))
    s = session(llm_server)
    assert s.text("judge", MSGS) == "yes" and s.trace.llm_calls[0].reasoning == "and more\nhmm"
