"""Issue 32, item 3: which of THEANINE's LLM steps a session close runs (memory.steps_policy), and
`MemoryAgent.close_session` running exactly those (scripted LLM, hashed embedder, in-memory store).

`MEMORY_LLM_STEPS=auto` on a bundled model gets the plan docs/models.md measured for the session's
size; a long session (an import) stays offline; on/off and `llm_steps` True/False still force every
step or none.
"""

from __future__ import annotations

import json
import re

from memory import steps_policy
from memory.agent import OFFLINE_CLOSE, MemoryAgent
from memory.records import SessionRecord, Turn
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.strategy import SecomMemory
from memory.settings import LLMConfig, Settings
from memory.steps_policy import EVERY_STEP, StepPlan, plan_for
from memory.theanine import prompts
from tests.fakes import MemoryStore, ScriptedLLM
from tests.test_secom_strategy import S1, S2

BUNDLED = LLMConfig()  # the default bundled model
ENDPOINT = LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1")

# A long session, as an import of a LoCoMo conversation brings (39 turns, like conv-26 session 8).
LONG = SessionRecord(
    "s3",
    "2023-07-01",
    [
        Turn("user" if i % 2 == 0 else "assistant", f"My dog Biscuit learned trick number {i} at training.", f"s3:{i}")
        for i in range(39)
    ],
)


def chat(n: int) -> SessionRecord:
    """A typed chat of `n` turns."""
    return SessionRecord(
        "c1", "2023-08-01", [Turn(S2.turns[i % 12].speaker, S2.turns[i % 12].text, f"c1:{i}") for i in range(n)]
    )


def test_the_measured_plan_for_a_chat_session_on_the_bundled_model():
    """What docs/models.md chose ("THEANINE's LLM steps on chat-sized sessions"): on 2 cores no step of
    the bundled Qwen 0.5B closed a chat session within the budget and labelled as well as the offline
    rule, so `auto` keeps every step off, for every session size, and says why."""
    for turns in (5, 10, 15):
        plan = plan_for(Settings(), BUNDLED, turns)
        assert plan.same_steps(steps_policy.auto_plan(BUNDLED, turns))
        assert not plan.any and "60 s" in plan.reason and "offline rule" in plan.reason
    assert steps_policy.AUTO == {}


def test_a_long_session_stays_offline_on_every_bundled_model():
    for model in ("qwen0.5b", "qwen1.5b", "smollm2", "gemma3"):
        assert not plan_for(Settings(), LLMConfig(bundled_model=model), len(LONG.turns)).any


def test_a_size_list_gives_its_plan_up_to_its_size_and_nothing_beyond(monkeypatch):
    scored = StepPlan(relations="score", reason="measured")
    monkeypatch.setitem(steps_policy.AUTO, BUNDLED.bundled_model, (steps_policy.Measured(10, scored),))
    assert plan_for(Settings(), BUNDLED, 5) == scored and plan_for(Settings(), BUNDLED, 10) == scored
    beyond = plan_for(Settings(), BUNDLED, 11)
    assert not beyond.any and "11 turns" in beyond.reason and "import" in beyond.reason
    other = "qwen0.5b" if BUNDLED.bundled_model != "qwen0.5b" else "qwen1.5b"
    assert not plan_for(Settings(), LLMConfig(bundled_model=other), 5).any  # another model: not measured


def test_on_off_and_the_callers_choice_still_force_every_step_or_none():
    for session_turns in (5, 39):
        assert plan_for(Settings(llm_steps="on"), BUNDLED, session_turns).same_steps(EVERY_STEP)
        assert not plan_for(Settings(llm_steps="off"), ENDPOINT, session_turns).any
        assert plan_for(Settings(), BUNDLED, session_turns, llm_steps=True).same_steps(EVERY_STEP)
        assert not plan_for(Settings(llm_steps="on"), ENDPOINT, session_turns, llm_steps=False).any
        assert plan_for(Settings(), ENDPOINT, session_turns).same_steps(EVERY_STEP)  # auto with an endpoint
        # a user's own GGUF is not bundled: auto runs every step, as before
        assert plan_for(Settings(), LLMConfig(gguf_path="/models/mine.gguf"), session_turns).same_steps(EVERY_STEP)


# --- close_session runs exactly the plan ---------------------------------------------------------


def one_memory_per_turn(messages):
    turns = re.findall(r"^\[(\d+)\] ([^:\n]+): (.*)$", messages[-1]["content"], re.M)
    return json.dumps(
        {
            "memories": [
                {"speaker": sp, "event": f"{sp} said that {text[:60]}", "turns": [int(i)]}
                for i, sp, text in turns
                if sp != "Bot"
            ]
        }
    )


class Scorer(ScriptedLLM):
    """A scripted LLM that also scores labels (as the embedded llama.cpp does): SameTopic most likely."""

    def __init__(self, *script):
        super().__init__(*script)
        self.scored: list[list[dict]] = []

    def label_probabilities(self, messages, labels):
        self.scored.append(messages)
        return [0.7 if lb == "SameTopic" else 0.3 / (len(labels) - 1) for lb in labels], 42


def agent(tmp_path, fake_embedder, llm, settings: Settings | None = None) -> MemoryAgent:
    store = MemoryStore()
    return MemoryAgent.from_parts(
        settings or Settings(data_dir=tmp_path),
        store,
        fake_embedder,
        llm_factory=lambda cfg: llm,
        secom=SecomMemory(store, fake_embedder, None, "", EmbeddingSegmenter(fake_embedder)),
    )


def test_summary_alone_leaves_the_relations_to_the_offline_rule(tmp_path, fake_embedder):
    llm = ScriptedLLM(one_memory_per_turn)
    a = agent(tmp_path, fake_embedder, llm)
    a.close_session("u", S1, llm_steps=False)
    rep = a.close_session("u", S2, steps=StepPlan(summary=True, reason="a test"))
    assert [c.purpose for c in rep.trace.llm_calls] == ["summarise"]  # no relation, no segmentation call
    assert rep.trace.memory_path == "llm"
    graph = a.theanine.graph("u")
    assert all(graph.memory(m).built_by == "llm" for m in rep.new_memories)
    assert any(
        "summary by the LLM; relations by the offline rule; segmentation by embeddings" in n and "a test" in n
        for n in rep.trace.notices
    )


def test_scored_relations_label_every_pair_without_generating(tmp_path, fake_embedder):
    llm = Scorer(RuntimeError("no generation expected"))
    a = agent(tmp_path, fake_embedder, llm)
    a.close_session("u", S1, llm_steps=False)
    rep = a.close_session("u", S2, steps=StepPlan(relations="score"))
    calls = rep.trace.llm_calls
    pairs = rep.trace.counts["relation_pairs"]
    assert pairs and [c.purpose for c in calls] == ["relation_score"] * pairs and len(llm.scored) == pairs
    assert not llm.prompts  # nothing generated: the summary took the offline path
    assert all(prompts.SCORE_ASK in m[-1]["content"] for m in llm.scored)
    graph = a.theanine.graph("u")
    edges = [d["relation"] for *_, d in graph.g.edges(data=True)]
    assert edges and set(edges) == {"SameTopic"}  # the scorer's most likely label, for every pair


def test_auto_on_the_bundled_model_closes_as_measured_and_says_why(tmp_path, fake_embedder):
    llm = ScriptedLLM(RuntimeError("no LLM call expected"))
    a = agent(tmp_path, fake_embedder, llm, Settings(data_dir=tmp_path))
    for session in (chat(10), LONG):
        rep = a.close_session("u", session)
        assert not rep.trace.llm_calls and rep.trace.memory_path == "offline"
        assert OFFLINE_CLOSE in rep.trace.notices
        assert any(n.startswith("No LLM step at this close:") for n in rep.trace.notices)


def test_forced_steps_close_as_before_without_a_policy_notice(tmp_path, fake_embedder):
    llm = ScriptedLLM(RuntimeError("no LLM call expected"))
    a = agent(tmp_path, fake_embedder, llm, Settings(data_dir=tmp_path, llm_steps="off"))
    rep = a.close_session("u", chat(10))
    assert not rep.trace.llm_calls and OFFLINE_CLOSE in rep.trace.notices
    assert not any(n.startswith(("LLM steps at this close", "No LLM step")) for n in rep.trace.notices)
    on = agent(tmp_path / "on", fake_embedder, ScriptedLLM(one_memory_per_turn), Settings(data_dir=tmp_path / "on"))
    rep = on.close_session("u", chat(10), llm_steps=True)
    assert "summarise" in [c.purpose for c in rep.trace.llm_calls] and rep.trace.memory_path == "llm"
    assert not any(n.startswith(("LLM steps at this close", "No LLM step")) for n in rep.trace.notices)
