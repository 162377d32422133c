"""Issue 32, item 3: THEANINE's relation labels scored by the model's log-probabilities
(`LlamaCppChat.label_probabilities`, `linking.score_pairs`), through the real bundled Qwen 0.5B.

Only the structure is asserted (a label from the allowed set for every pair, probabilities that sum to
one, the relation guide evaluated once and then reused from the KV cache), never the model's choice.
"""

from __future__ import annotations

import math

import pytest

from memory.errors import LLMError
from memory.llm import LLMSession, bundled_gguf_path, make_llm
from memory.settings import LLMConfig
from memory.steps_policy import StepPlan
from memory.theanine import linking, prompts
from memory.theanine.graph import Memory, MemoryGraph
from memory.trace import Trace

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def qwen():
    try:
        bundled_gguf_path("qwen0.5b")
    except LLMError as e:
        pytest.skip(f"the bundled Qwen 0.5B part packages are not installed ({e})")
    return make_llm(LLMConfig(backend="embedded", bundled_model="qwen0.5b", n_ctx=2048))


def mem(mid: str, event: str, date: str) -> Memory:
    return Memory(
        id=mid, event=event, time=date, session_id=mid.split(":")[0], ts=date, speaker="Ann", excerpt=f"Ann: {event}"
    )


def test_each_label_gets_a_probability_and_the_guide_is_evaluated_once(qwen):
    labels = list(prompts.RELATION_LABELS)
    a = {"time": "2023-01-01", "event": "Ann lives in Porto", "speaker": "Ann", "excerpt": "Ann: I live in Porto."}
    firsts = []
    for event in ("Ann moved to Lyon last week", "Ann bought a red bicycle"):
        b = {"time": "2023-03-01", "event": event, "speaker": "Ann", "excerpt": f"Ann: {event}."}
        convs = [(prompts.dialogue_heading(m["time"], w), m["excerpt"]) for w, m in (("A", a), ("B", b))]
        probs, evaluated = qwen.label_probabilities(prompts.relation_score_messages(a, b, convs), labels)
        assert len(probs) == len(labels) and all(0.0 <= p <= 1.0 for p in probs)
        assert math.isclose(sum(probs), 1.0, abs_tol=1e-6)
        firsts.append(evaluated)
    guide = qwen.count_tokens(prompts.RELATION_GUIDE)
    # the second pair's prompt shares the system message and the guide: only its pair and question are new
    assert firsts[1] < firsts[0] - guide // 2


def test_classify_scores_every_pair_through_the_session(qwen):
    g = MemoryGraph()
    old = [
        mem("s1:m0", "Ann lives in Porto with two roommates", "2023-01-01"),
        mem("s1:m1", "Ann has a cat", "2023-01-01"),
    ]
    for m in old:
        g.add_memory(m)
    new = {"s2:m0": mem("s2:m0", "Ann moved to Lyon for a new job", "2023-03-01")}
    cands = [linking.Candidate("s2:m0", m.id, 0.5) for m in old]
    trace = Trace("close")
    session = LLMSession(qwen, trace, temperature=0.0)
    session.plan = StepPlan(relations="score")
    labels = linking.classify(g, cands, new, session)
    assert set(labels) == {(m.id, "s2:m0") for m in old}
    assert all(label in prompts.RELATION_LABELS for label in labels.values())
    calls = [c for c in trace.llm_calls if c.purpose == "relation_score"]
    assert len(calls) == len(cands) and all(c.status == "ok" for c in calls)
    for c in calls:  # the trace keeps every label's probability
        shown = dict(part.rsplit(" ", 1) for part in c.detail.removeprefix("probabilities: ").split(", "))
        assert list(shown) == list(prompts.RELATION_LABELS)
        assert math.isclose(sum(map(float, shown.values())), 1.0, abs_tol=0.01)
    assert not any(c.purpose.startswith("relation") and c.purpose != "relation_score" for c in trace.llm_calls)
