"""Issue 19, item 5: the whole chat (reply, session close, refined reply) through a real
`python -m llama_cpp.server` serving the bundled Qwen2.5-Coder 0.5B Instruct, with the app's
`openai` client, as a Spaces user with an endpoint meets it; every answer checked by type and meaning.

The model's wording is never asserted: only that each step's answer has the type the step needs
(memories are statements about the user, refined timelines are text, not an object's repr) and that
no reasoning markup reaches the chat. A few short calls keep it well under a minute on a quiet CPU.
"""

import re

import pytest

from memory.agent import MemoryAgent
from memory.errors import LLMError
from memory.llm import LLMSession, bundled_gguf_path
from memory.records import SessionRecord, Turn
from memory.settings import LLMConfig, Options, Settings
from memory.trace import Trace
from memory.trace_types import Timeline
from tests.servers import free_port, llama_server_cmd, running

pytestmark = pytest.mark.slow

OPTS = Options(max_reply_tokens=40, temperature=0.0, k=2)


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory):
    try:
        path = bundled_gguf_path("qwen0.5b")
    except LLMError as e:
        pytest.skip(f"the bundled Qwen 0.5B part packages are not installed ({e})")
    port = free_port()
    log = tmp_path_factory.mktemp("qwen") / "llama_server.log"
    with running(llama_server_cmd(path, port), f"http://127.0.0.1:{port}/v1/models", timeout=180, log=log):
        yield f"http://127.0.0.1:{port}/v1"


def test_reply_close_and_refine_through_a_real_server(qwen_server, tmp_path):
    cfg = LLMConfig(backend="openai", model="qwen", base_url=qwen_server, timeout=240, max_retries=1, n_ctx=4096)
    settings = Settings(data_dir=tmp_path, llm=cfg, llm_steps="on", segmenter="llm", options=OPTS)
    agent = MemoryAgent.from_settings(settings)

    first = "I adopted a beagle puppy named Rex today. My friend Ana wants to meet him."
    events = list(agent.reply("u", [], first, "2024-03-02", OPTS))
    reply, first_trace = events[-1].text, events[-1].trace
    assert first_trace is not None and first_trace.error is None and reply.strip() and "<think>" not in reply

    session = SessionRecord("s1", "2024-03-02", [Turn("user", first, "s1:0"), Turn("assistant", reply, "s1:1")])
    report = agent.close_session("u", session, OPTS)
    calls = {c.purpose: c for c in report.trace.llm_calls}
    # (one exchange: SeCom's segmenter needs no call for it)
    assert "summarise" in calls and calls["summarise"].prompt_tokens > 0  # the server answered
    nodes = agent.graph_view("u")["nodes"]
    assert nodes and report.new_segments
    for n in nodes:  # third-person statements about a speaker; the assistant's words never filed as the user's
        memory = agent.theanine.graph("u").memory(n["id"])
        assert memory.speaker in ("user", "assistant"), (memory.speaker, memory.event)
        assert memory.speaker == "assistant" or memory.turns != ["s1:1"], memory.event
        if memory.built_by == "llm":  # (a fallback memory is a sentence of the dialogue as it was said)
            assert not re.search(r"\byou(r|'ve|'re)?\b", memory.event, re.I), memory.event

    events = list(agent.reply("u", [], "What is my dog's name, and who wants to meet him?", "2024-03-09", OPTS))
    trace = events[-1].trace
    assert trace is not None and trace.error is None and events[-1].text.strip()
    # every timeline that reached the reply is refined through the server, a lone memory too (one call each)
    purposes = [c.purpose for c in trace.llm_calls]
    assert purposes == ["refine"] * len(trace.timelines_raw) + ["reply"], purposes
    assert len(trace.timelines_refined) == len(trace.timelines_raw)
    # a timeline of two memories is refined through the server
    timeline: Timeline = {
        "text": "[2024-03-02: user adopted a beagle puppy named Rex] -(Cause)- [2024-03-09: Ana met Rex]",
        "nodes": ["a", "b"],
    }
    trace = Trace("refine")
    refined = agent.theanine.refine(
        LLMSession(agent.llm_factory(cfg), trace, 0.0, 1), "user: how is Rex?", [timeline], trace
    )
    assert [c.purpose for c in trace.llm_calls] == ["refine"] and trace.llm_calls[0].prompt_tokens > 0
    raw = {timeline["text"]}
    for text in refined:  # text (or the raw timeline kept), never an object's repr
        assert isinstance(text, str) and text.strip(), text
        assert text in raw or not text.lstrip().startswith(("{", "[{", "['", '["')), text
