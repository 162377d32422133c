"""The session's memory blocks stay in the prompt (memory.shown_memory), so that the real bundled Qwen
0.5B, run by llama.cpp, keeps what it read: a later message reads only its own new tokens. Only token
counts are asserted, never the model's wording."""

from __future__ import annotations

import pytest

from memory.errors import LLMError
from memory.llm import bundled_gguf_path, make_llm
from memory.records import Turn
from memory.settings import Options
from tests.test_reply_speed import make_agent
from tests.test_secom_strategy import S1, S2

pytestmark = pytest.mark.slow


def _agent(tmp_path, fake_embedder):
    try:
        bundled_gguf_path("qwen0.5b")
    except LLMError as e:
        pytest.skip(f"the bundled Qwen 0.5B part packages are not installed ({e})")
    from memory.settings import LLMConfig

    llm = make_llm(LLMConfig(backend="embedded", bundled_model="qwen0.5b", n_ctx=4096))
    return make_agent(tmp_path, fake_embedder, llm), llm


def test_a_later_message_reuses_the_first_prompt_from_the_kv_cache(tmp_path, fake_embedder):
    agent, _ = _agent(tmp_path, fake_embedder)
    for s in (S1, S2):
        agent.close_session("u", s, llm_steps=False)
    opts = Options(strategy="theanine", max_reply_tokens=24)
    history: list[Turn] = []
    traces = []
    for message in ("Tell me about the puppy Biscuit", "And the hike in Norway?"):
        done = [e for e in agent.reply("u", history, message, "2023-07-01", opts) if e.kind == "done"][-1]
        assert done.trace is not None and done.trace.error is None
        traces.append(done.trace)
        history += [Turn("user", message), Turn("assistant", done.text)]
    first, second = (t.counts for t in traces)
    assert first["memory_lines_new"] > 0
    # everything the first reply read comes from the cache: the second reads its reply, block and message
    assert second["prompt_tokens_cached"] >= first["prompt_tokens"] - 1
    assert second["prompt_tokens"] - second["prompt_tokens_cached"] < first["prompt_tokens"]


def test_reading_ahead_while_typing_leaves_send_only_what_changed(tmp_path, fake_embedder):
    agent, llm = _agent(tmp_path, fake_embedder)
    for s in (S1, S2):
        agent.close_session("u", s, llm_steps=False)
    opts = Options(strategy="theanine", max_reply_tokens=16)

    def send(message: str):
        done = [e for e in agent.reply("u", [], message, "2023-07-01", opts) if e.kind == "done"][-1]
        assert done.trace is not None and done.trace.error is None
        return done.trace.counts

    cold = send("What did we talk about last time?")  # a prompt the model has not read: read whole
    ahead = agent.prepare("u", [], "How was the hike in Norway?", "2023-07-01", opts)
    assert ahead > 0
    warm = send("How was the hike in Norway?")  # the draft was the message: its whole prompt was read
    assert warm["prompt_tokens"] - warm["prompt_tokens_cached"] <= 1
    assert cold["prompt_tokens"] - cold["prompt_tokens_cached"] > 20
    # A reply that asks for the model stops a read-ahead at its next step: nothing is read meanwhile.
    llm._reply_waiting.set()
    try:
        assert agent.prepare("u", [], "Did Biscuit like the lake?", "2023-07-01", opts) == 0
    finally:
        llm._reply_waiting.clear()
    # The embedded model's switch (LLM_READ_AHEAD=0) turns it off.
    from dataclasses import replace

    off = replace(agent.settings.llm, read_ahead=False)
    assert agent.prepare("u", [], "Did Biscuit like the lake?", "2023-07-01", opts, off) == 0
