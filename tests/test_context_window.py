"""Issue 19, item 2: every LLM step fits the model's context window.

The scripted server plays a model with a small window (it refuses a request whose prompt and answer
exceed N tokens, as OpenAI and llama.cpp do); the app is told the window (LLMConfig.n_ctx, as
LLM_CONTEXT_WINDOW sets it) and closes long sessions, refines many timelines and replies with a long
history through the real `openai` client. No request may be refused, and every step still gets its
answers from the LLM (in parts), not from its fallback.
"""

import pytest

from memory.agent import MemoryAgent
from memory.llm import LLMSession, OpenAIChat
from memory.llm.window import fit_messages, messages_tokens
from memory.records import SessionRecord, Turn
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.llm_segmenter import LLMSegmenter
from memory.secom.strategy import SecomMemory
from memory.settings import LLMConfig, Options, Settings
from memory.theanine import refining
from memory.tokens import count_tokens
from memory.trace import Trace
from tests.fakes import MemoryStore

WINDOW = 2000
TOPICS = ["the garden", "the bakery", "a river trip", "the violin", "a marathon", "the new flat"]


def long_session(sid: str, date: str, n: int = 56) -> SessionRecord:
    turns = []
    for i in range(n):
        who = "Alice" if i % 2 == 0 else "Bob"
        topic = TOPICS[(i // 4) % len(TOPICS)]
        text = (
            f"On this day {who} talked at length about {topic}: it was number {i} of many stories, with "
            f"details about the weather, the neighbours, the prices and plans for {topic} next month."
        )
        turns.append(Turn(who, text, f"{sid}:{i}"))
    return SessionRecord(sid, date, turns)


def cfg(server, window=WINDOW) -> LLMConfig:
    return LLMConfig(backend="openai", model="m", base_url=server.url, api_key="sk-test-x", timeout=5, n_ctx=window)


def agent(tmp_path, fake_embedder, llm) -> MemoryAgent:
    store = MemoryStore()
    return MemoryAgent.from_parts(
        Settings(data_dir=tmp_path, llm_steps="on"),
        store,
        fake_embedder,
        llm_factory=lambda c: llm,
        secom=SecomMemory(store, fake_embedder, None, "", LLMSegmenter(EmbeddingSegmenter(fake_embedder))),
    )


def test_the_window_comes_from_the_environment():
    assert Settings.from_env({"LLM_CONTEXT_WINDOW": "4096"}).llm.n_ctx == 4096
    assert Settings.from_env({}).llm.n_ctx == 8192


def test_long_sessions_close_in_parts_without_a_request_over_the_window(llm_server, tmp_path, fake_embedder):
    llm_server.max_prompt_tokens = WINDOW
    a = agent(tmp_path, fake_embedder, OpenAIChat(cfg(llm_server)))
    s1, s2 = long_session("D1", "2023-05-01"), long_session("D2", "2023-06-01")
    assert sum(count_tokens(t.text) for t in s1.turns) > WINDOW  # one call per step could not hold it
    reports = [a.close_session("u", s, Options(j=3)) for s in (s1, s2)]
    assert llm_server.over_window == []
    for purpose in ("summarise", "segment"):
        assert llm_server.count(purpose) >= 4, purpose  # two sessions, each in parts
    assert reports[1].trace.counts["relation_pairs"] > 10 and llm_server.count("relation") >= 2
    calls = [c for r in reports for c in r.trace.llm_calls]
    bad = [(c.purpose, c.status, c.detail) for c in calls if c.status != "ok"]
    assert calls and not bad, bad
    assert not any("offline rule" in n for r in reports for n in r.trace.notices)
    assert all(m.built_by == "llm" for m in a.theanine.graph("u").memories())

    # The reply: a long history and the memory of both sessions, trimmed to the window.
    history = [Turn(t.speaker if t.speaker == "Alice" else "assistant", t.text) for t in s2.turns[:30]]
    opts = Options(budget=1500, max_reply_tokens=1000)
    events = list(a.reply("u", history, "What did I say about the bakery?", "2023-07-01", opts))
    trace = events[-1].trace
    assert trace is not None
    assert trace.error is None and events[-1].text
    assert llm_server.over_window == [] and llm_server.count("refine") >= 1
    assert any("context window" in n for n in trace.notices)
    reply = llm_server.bodies("reply")[-1]
    assert reply["messages"][-1]["content"] == "What did I say about the bakery?"  # the message itself stays


def test_many_timelines_are_refined_in_parts(llm_server):
    llm_server.max_prompt_tokens = 1200
    session = LLMSession(OpenAIChat(cfg(llm_server, 1200)), Trace("t"))
    texts = [f"[2023-05-0{i % 9 + 1}: Alice spoke about {TOPICS[i % 6]} again, story {i}]" * 3 for i in range(24)]
    out = refining.refine(session, "user: tell me everything\n" * 200, texts)
    assert out == texts  # the scripted refiner returns each timeline as it is, in order
    assert llm_server.count("refine") >= 2 and llm_server.over_window == []
    assert all(c.status == "ok" for c in session.trace.llm_calls)


def test_a_prompt_that_cannot_fit_is_never_sent(llm_server):
    llm_server.max_prompt_tokens = 300
    session = LLMSession(OpenAIChat(cfg(llm_server, 300)), Trace("t"))
    got = session.json("summarise", [{"role": "user", "content": "word " * 400}], {}, dict, lambda: "fallback")
    assert got == "fallback" and llm_server.count("summarise") == 0
    assert "context window" in session.trace.llm_calls[0].detail


@pytest.mark.parametrize("budget", [60, 120, 400])
def test_fit_messages_cuts_old_dialogue_then_memory_then_the_message(budget):
    system = "Instructions line.\n\nMemories:\n" + "\n".join(f"- memory line {i} " + "x " * 10 for i in range(8))
    msgs = [{"role": "system", "content": system}]
    msgs += [{"role": "user" if i % 2 else "assistant", "content": f"turn {i} " + "y " * 15} for i in range(10)]
    msgs.append({"role": "user", "content": "the question " + "z " * 20})
    out, cut = fit_messages(msgs, budget)
    assert messages_tokens(out) <= budget and cut
    assert out[0]["content"].startswith("Instructions line.")
    if budget >= 120:  # room for the question: kept whole, with the latest exchange before it
        assert out[-1] == msgs[-1]
    kept_memory = [ln for ln in out[0]["content"].split("\n") if ln.startswith("- memory")]
    assert kept_memory == [ln for ln in system.split("\n") if ln.startswith("- memory")][: len(kept_memory)]
    assert fit_messages(msgs, 10_000) == (msgs, [])
