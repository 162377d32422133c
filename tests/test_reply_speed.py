"""Reply speed: the first token in the trace, the prompt laid out so the model keeps what it read, the
reading status shown before the reply, Compare in parallel on an endpoint, and the refusal count of
`bench refusals`. A scripted LLM throughout (no assertion on a model's wording)."""

from __future__ import annotations

import threading

import pytest

from bench.refusals import DATA, is_refusal, load
from memory.agent import MemoryAgent
from memory.llm import LLMSession
from memory.llm.session import Reading, reading_rate
from memory.records import Turn
from memory.reply_prompts import RefusalGuard, fit_reply, memory_of, reply_messages, stable_history
from memory.settings import Options
from memory.trace import Trace
from sessions.db import CompareReply
from sessions.lifecycle import _in_parallel
from tests.fakes import WAIT, MemoryStore, ScriptedLLM, offline_agent
from tests.test_secom_strategy import S1, S2


def make_agent(tmp_path, embedder, llm) -> MemoryAgent:
    return offline_agent(tmp_path, embedder, llm, store=MemoryStore())


@pytest.fixture
def agent_llm(tmp_path, fake_embedder):
    llm = ScriptedLLM("A friendly reply about it.")
    agent = make_agent(tmp_path, fake_embedder, llm)
    for s in (S1, S2):
        agent.close_session("u", s, llm_steps=False)
    return agent, llm


def test_the_trace_holds_the_seconds_to_the_first_token(agent_llm):
    agent, _ = agent_llm
    for strategy in ("theanine", "secom", "none"):
        events = list(agent.reply("u", [], "How is Biscuit the puppy?", "2023-07-01", Options(strategy=strategy)))
        trace = events[-1].trace
        assert trace is not None and trace.error is None and events[-1].text
        assert 0 < trace.timings["first_token"] <= trace.timings["total"]
        assert trace.counts["prompt_tokens"] > 0 and "prompt_tokens_cached" in trace.counts


def test_the_reading_status_comes_before_the_first_piece_of_the_reply(agent_llm):
    agent, _ = agent_llm
    events = list(agent.reply("u", [], "What is my dog called?", "2023-07-01", Options(strategy="theanine")))
    kinds = [(e.kind, e.text) for e in events]
    first_delta = next(i for i, (k, _) in enumerate(kinds) if k == "delta")
    reading = [i for i, (k, t) in enumerate(kinds) if k == "status" and t.startswith("Reading ")]
    assert reading and reading[-1] < first_delta
    assert "tokens of memory" in kinds[reading[-1]][1]


def test_a_later_message_reads_only_what_follows_the_previous_prompt(agent_llm):
    """The memory stays before the message it was retrieved for (memory.shown_memory): the second
    message's prompt starts with the whole first prompt, and its own block lists only new lines."""
    agent, llm = agent_llm
    history = [Turn("user", "Hi there!"), Turn("assistant", "Hello! How are you?")]
    opts = Options(strategy="theanine")
    first = list(agent.reply("u", history, "Tell me about the puppy Biscuit", "2023-07-01", opts))
    p1 = llm.prompts[-1]
    history += [Turn("user", "Tell me about the puppy Biscuit"), Turn("assistant", first[-1].text)]
    second = list(agent.reply("u", history, "And the puppy Biscuit on the hike?", "2023-07-01", opts))
    p2 = llm.prompts[-1]
    assert p1[-1]["content"] == "Tell me about the puppy Biscuit"
    assert p2[: len(p1)] == p1  # the system prompt, the dialogue, the first memory block and the message
    assert p1[0]["role"] == "system" and "Biscuit" not in p1[0]["content"]  # no memory in the system prompt
    assert p2[len(p1)]["role"] == "assistant" and p2[-1]["content"] == "And the puppy Biscuit on the hike?"
    m1 = {ln for ln in memory_of(p1).split("\n") if ln.startswith("- ")}
    m2 = {ln for ln in memory_of(p2).split("\n") if ln.startswith("- ")}
    assert m1 and not (m1 & m2)  # a line already in the prompt is not shown again
    retrieved = second[-1].trace.memories
    assert retrieved and second[-1].trace.counts["memory_lines_new"] == len(m2)


def test_a_forgotten_memory_leaves_the_session_prompt(agent_llm):
    agent, llm = agent_llm
    opts = Options(strategy="theanine")
    first = list(agent.reply("u", [], "Tell me about the puppy Biscuit", "2023-07-01", opts))
    shown = memory_of(llm.prompts[-1])
    assert "Biscuit" in shown
    agent.forget_user("u")
    history = [Turn("user", "Tell me about the puppy Biscuit"), Turn("assistant", first[-1].text)]
    list(agent.reply("u", history, "What else?", "2023-07-01", opts))
    assert not any("Biscuit" in m["content"] for m in llm.prompts[-1] if m["role"] == "system")


def test_the_layout_keeps_the_prefix_for_every_strategy():
    history = [Turn("user", "I moved to Bristol."), Turn("assistant", "How exciting!")]
    for strategy in ("theanine", "secom", "none"):
        a = reply_messages(strategy, ["2024-03-20: moved to Bristol"], history, "How is the flat?", "2024-04-01")
        b = reply_messages(strategy, ["2024-03-02: a cat named Pebble"], history, "And Pebble?", "2024-04-01")
        assert a[:-2] == b[:-2] and a[-2:] != b[-2:]
        assert [m["role"] for m in a] == ["system", "user", "assistant", "system", "user"]
        assert a[-1]["content"] == "How is the flat?" and "Bristol" in memory_of(a)
    bare = reply_messages("none", [], [], "hi", "2024-04-01")
    assert bare[-1]["content"] == "hi" and memory_of(bare) == ""


def test_memory_items_are_one_line_each():
    msgs = reply_messages("secom", ["Ann: I moved.\nBob: Where to?", "one fact"], [], "hi", "")
    block = memory_of(msgs)
    items = [ln for ln in block.split("\n") if ln.startswith("- ")]
    assert items == ["- Ann: I moved. Bob: Where to?", "- one fact"]


def test_the_dialogue_start_moves_in_steps():
    turns = [Turn("user" if i % 2 == 0 else "assistant", f"turn {i}") for i in range(30)]
    starts = [stable_history(turns[:n], 12, 6)[0].text for n in range(13, 31)]
    assert len(set(starts)) <= 4  # not a new start at every turn
    for n in range(0, 31):
        kept = stable_history(turns[:n], 12, 6)
        assert len(kept) <= 12 and kept == turns[n - len(kept) : n]
        assert not kept or kept[0].speaker == "user"


def test_fitting_cuts_old_dialogue_then_memory_and_keeps_the_message():
    history = [Turn("user" if i % 2 == 0 else "assistant", f"old turn {i} " + "word " * 40) for i in range(8)]
    lines = [f"memory line {i} " + "fact " * 30 for i in range(6)]

    def fits(msgs):
        return sum(len(m["content"].split()) for m in msgs) <= 300

    msgs, cut, _ = fit_reply("theanine", lines, history, "What now?", "2024-01-01", "", fits)
    assert fits(msgs) and msgs[-1]["content"] == "What now?"
    assert cut[0].startswith("6 earlier messages") and "of memory" in cut[1]
    kept = [ln for ln in memory_of(msgs).split("\n") if ln.startswith("- ")]
    assert kept and all(k.startswith(f"- memory line {i} ") for i, k in enumerate(kept))  # best ranked first


def test_reading_describes_tokens_and_seconds():
    assert Reading(1000, 0, 8.2).describe() == "Reading 1,000 tokens of memory and dialogue, about 8 s…"
    assert Reading(1400, 1000, 0.4).describe("memory") == (
        "Reading 400 new tokens of memory (1,000 already read), under a second…"
    )
    assert Reading(50).describe("your message") == "Reading 50 tokens of your message…"


def test_an_endpoint_reading_speed_is_learnt_from_its_replies():
    llm = ScriptedLLM("ok")
    session = LLMSession(llm, Trace("t"))
    msgs = [{"role": "user", "content": "word " * 300}]
    assert reading_rate(llm) is None and session.reading(msgs).seconds is None
    assert "".join(session.stream("reply", msgs))
    assert reading_rate(llm) and session.reading(msgs).seconds is not None


def test_compare_runs_the_strategies_at_once_on_an_endpoint():
    """Each run waits for the other to start: one after the other, this would never finish."""
    started = {s: threading.Event() for s in ("a", "b")}

    def run(me: str, other: str):
        yield type("Ev", (), {"kind": "status", "text": "reading"})()
        started[me].set()
        assert started[other].wait(WAIT)
        yield type("Ev", (), {"kind": "delta", "text": f"reply {me}"})()

    results: dict[str, CompareReply] = {
        s: {"text": "", "status": "waiting", "trace": None, "error": None, "done": False} for s in started
    }
    snapshots = list(_in_parallel(results, {"a": run("a", "b"), "b": run("b", "a")}))
    assert all(results[s]["done"] and results[s]["text"] == f"reply {s}" for s in started)
    assert not any(results[s]["error"] for s in started)
    assert snapshots[-1] == results


def test_a_stock_refusal_is_asked_again_and_other_openings_stream_at_once():
    refusal = "I'm sorry, but I can't assist with that."
    llm = ScriptedLLM(refusal, "Oh, how lovely! Tell me more.")
    session = LLMSession(llm, Trace("t"), temperature=0.0)
    assert "".join(session.stream("reply", [{"role": "user", "content": "hi"}], guard=RefusalGuard())) == (
        "Oh, how lovely! Tell me more."
    )
    assert len(llm.prompts) == 2 and session.trace.counts["reply_refusals_retried"] == 1
    assert session.trace.llm_calls[0].status == "retried" and "refused" in session.trace.llm_calls[0].detail

    # "I'm sorry to hear that" is no refusal: shown as soon as it cannot become one, then piece by piece
    pieces = list(
        LLMSession(ScriptedLLM("I'm sorry to hear that."), Trace("t")).stream(
            "reply", [{"role": "user", "content": "hi"}], guard=RefusalGuard()
        )
    )
    assert pieces[0] == "I'm sorry to" and "".join(pieces) == "I'm sorry to hear that."

    # a model that always refuses: asked twice more, then its answer is shown
    stubborn = ScriptedLLM(refusal)
    session = LLMSession(stubborn, Trace("t"))
    assert "".join(session.stream("reply", [{"role": "user", "content": "hi"}], guard=RefusalGuard())) == refusal
    assert len(stubborn.prompts) == 3 and session.trace.counts["reply_refusals_retried"] == 2


def test_the_guard_knows_the_stock_openings_the_bundled_model_was_seen_to_use():
    guard = RefusalGuard()
    for seen in (
        "I am sorry, but I can't assist with that.",
        "I apologize, but I can't assist with that.",
        "I'm sorry, but as an AI, I cannot",
        "I’m sorry, but I cannot help",
    ):
        assert guard.rejects(seen), seen
    assert not guard.rejects("I am sorry to hear about the noise.")


def test_the_refusal_pattern_counts_refusals_and_not_replies():
    assert is_refusal("I'm sorry, but I can't assist with that.")
    assert is_refusal("As an AI language model, I do not have the capability to remember anything.")
    assert is_refusal("That sounds lovely! I don’t have personal experiences, but I hope you enjoy it.")
    assert not is_refusal("Congratulations on the new job! I can't wait to hear how your first day goes.")
    assert not is_refusal("I'm sorry to hear that your knee hurts. Rest it for a day or two.")


def test_the_refusal_messages_are_companion_chat():
    sessions, messages = load(DATA)
    assert len(messages) >= 50 and len(set(messages)) == len(messages)
    assert sessions and all(s.turns for s in sessions)


def test_the_guard_knows_the_small_models_stock_openings_and_lets_sympathy_through():
    guard = RefusalGuard()
    for text in (
        "I'm sorry, but I can't assist with that.",
        "I'm sorry, but as an AI language model, I don't have the ability to attend meetings.",
        "As an AI, I don't have feelings.",
    ):
        assert guard.rejects(text), text
    for text in ("I'm sorry to hear that, it sounds hard.", "I'm so glad you told me!"):
        assert not guard.rejects(text) and not guard.undecided(text), text
    assert guard.undecided("I'm sorry, but")  # held back until it can no longer become a refusal
