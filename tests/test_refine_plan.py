"""Refinement as stated (issue 44, item 5): with the LLM steps a reply refines at most REFINE_TIMELINES
(3, the official count) of the timelines that reached it, one call each, over the whole open session
(not its last six turns), and asks no length beyond the answer-token bound."""

from __future__ import annotations

import re

from memory.agent import MemoryAgent
from memory.design import REFINE_TIMELINES
from memory.records import SessionRecord, Turn
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.strategy import SecomMemory
from memory.settings import LLMConfig, Options, Settings
from tests.fakes import MemoryStore, ScriptedLLM

TOPICS = ["puppy Biscuit", "pottery class", "bakery job", "coast hike", "guitar lessons", "garden tomatoes"]


def sessions() -> list[SessionRecord]:
    out = []
    for s in range(6):
        turns = []
        for i, topic in enumerate(TOPICS):
            turns.append(
                Turn("user", f"Session {s}: I talked about my {topic} and event {s}-{i} at length.", f"s{s}:{i}")
            )
        out.append(SessionRecord(f"s{s}", f"2023-0{s + 1}-10", turns))
    return out


def test_a_reply_refines_at_most_three_timelines_over_the_whole_open_session(tmp_path, fake_embedder):
    def answer(messages):
        text = messages[-1]["content"]
        if '"timelines"' in text:
            return {"timelines": [f"refined: {t}" for t in re.findall(r"^Timeline \d+: (.*)$", text, re.M)]}
        return "A reply."

    llm = ScriptedLLM(answer)
    store = MemoryStore()
    cfg = LLMConfig(backend="openai", model="scripted", base_url="http://127.0.0.1:9/v1")
    agent = MemoryAgent.from_parts(
        Settings(data_dir=tmp_path, llm=cfg),
        store,
        fake_embedder,
        llm_factory=lambda c: llm,
        secom=SecomMemory(store, fake_embedder, None, "", EmbeddingSegmenter(fake_embedder)),
    )
    for s in sessions():
        agent.close_session("u", s, llm_steps=False)
    history = [
        Turn("user" if i % 2 == 0 else "assistant", f"turn {i}: the first words FIRSTTURN", f"h{i}") for i in range(1)
    ]
    history += [
        Turn("user" if i % 2 == 0 else "assistant", f"turn {i} about the puppy and pottery", f"h{i}")
        for i in range(1, 10)
    ]
    events = list(
        agent.reply("u", history, "Tell me about the puppy, pottery, bakery and hike.", "2024-01-01", Options())
    )
    trace = events[-1].trace
    assert trace is not None and trace.error is None
    assert len(trace.timelines_raw) > REFINE_TIMELINES  # more reached the reply
    refine = [p for p in llm.prompts if '"timelines"' in p[-1]["content"]]
    assert len(refine) == REFINE_TIMELINES == 3
    assert [bool(r) for r in trace.timelines_refined].count(True) == 3
    for p in refine:
        assert "FIRSTTURN" in p[-1]["content"]  # the open session's first turn, ten turns back
        assert "sentences per timeline" not in p[-1]["content"]  # no length asked, as the official prompt
