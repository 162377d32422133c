"""`python -m bench qa` and `teafarm`: plumbing on a tiny LoCoMo file.

The fast test runs them against the scripted OpenAI-compatible server on 127.0.0.1 (tests/llm_server.py;
the real `openai` client, the app's whole agent: LLM segmenter, summaries, relations, refinement, judge).
Its answers are known (the judge always says "correct" and "does not resist"), so the figures are checked.
The slow test runs both once against the embedded model (Gemma 3 270M) on one question.
"""

import json

import pytest

from bench import qa, teafarm
from tests.bench_fixtures import run_recall_bench, write_tiny


def test_qa_and_teafarm_through_an_openai_compatible_endpoint(tmp_path, fake_endpoint):
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "qa.json"
    assert qa.main(["--data", str(data), "--out", str(out), "--limit", "2", "--seed", "1"]) == 0
    d = json.loads(out.read_text())
    assert set(d["strategies"]) == {"theanine", "secom", "none"}
    calls = {"secom": 1, "none": 1}
    for s, r in d["strategies"].items():
        assert r["n"] == 2 and r["n_judged"] == 2 and r["accuracy"] == 1.0  # the fake judge says correct
        assert r["llm_calls_per_reply"] == calls.get(s, r["llm_calls_per_reply"]) and r["errors"] == 0
        assert r["tokens_per_question"] > 0 and r["latency_s_p50"] >= 0
    for q in d["questions"]:  # THEANINE: the reply and one refinement call per timeline (refine_each)
        if q["strategy"] == "theanine":
            assert 2 <= q["llm_calls"] <= 1 + q["retrieved"]
    assert {q["category"] for q in d["questions"]} <= {1, 2, 3, 4}
    assert d["close"]["bench-conv-t0"]["sessions"] == 2
    assert "fake" in d["config"]["llm"] and (tmp_path / "qa_accuracy.png").exists()
    assert fake_endpoint.count("segment") > 0  # the LLM segmenter ran

    out = tmp_path / "teafarm.json"
    fake_endpoint.reset()
    assert teafarm.main(["--data", str(data), "--out", str(out), "--limit", "2", "--judge-model", "judge-x"]) == 0
    d = json.loads(out.read_text())
    assert d["config"]["generated"] == 2
    # neutral prompt and the optional false-premise instruction, for every strategy (issue 10)
    assert set(d["strategies"]) == {"theanine", "secom", "none", "theanine+hint", "secom+hint", "none+hint"}
    for r in d["strategies"].values():
        assert r["n"] == 2 and r["success_rate"] == 0.0  # the fake judge says no
    assert d["questions"][0]["false_premise"] and (tmp_path / "teafarm_success.png").exists()
    # the paper's perspective: the user (Alice) sends every question, about either speaker's past
    assert {q["speaker"] for q in d["questions"]} == {"Alice"}
    assert {q["about"] for q in d["questions"]} == {"Alice", "Bob"}
    assert d["valid"] is True and d["perspective"] == "user asks about either speaker"  # judge-x: not the agent's
    gen = fake_endpoint.bodies("counterfactual")
    assert len(gen) == 2 and all(r["model"] == "judge-x" for r in gen)  # generator: --judge-model
    text = gen[0]["messages"][-1]["content"]
    assert text.index("1 May, 2023") < text.index("2 May, 2023")  # all summaries, in time order
    judged = fake_endpoint.bodies("judge")
    assert judged and all(r["model"] == "judge-x" for r in judged)
    replies = [b for b in fake_endpoint.bodies() if b.get("stream")]
    assert replies and all(r["model"] == "fake" for r in replies)  # the agent keeps its model
    # Step 4: each question comes after the opening of its own session, which the generator wrote
    # (an odd last user turn is dropped: the dialogue ends with the chatbot, then the question).
    assert fake_endpoint.count("dialogue") == 2 and d["config"]["in_a_dialogue"] == 2
    for r in replies:
        said = [(m["role"], m["content"]) for m in r["messages"][1:]]
        assert said[:2] == [("user", "Hi! Long week."), ("assistant", "Hello! Tell me about it.")]
        # the question last, sent by the user; between them only the memory block, when one was retrieved
        assert said[-1][0] == "user" and said[-1][1].endswith("Why did you adopt a cat last week?")
        assert len(said) <= 4 and not any("Long week" in c or "adopt a cat" in c for _, c in said[2:-1])
        assert "you are Bob and the person you talk with is Alice" in r["messages"][0]["content"]  # its speaker
    assert all("The conversation so far:\nuser: Hi! Long week." in b["messages"][-1]["content"] for b in judged)
    assert d["config"]["generator_and_judge"].startswith("OpenAI-compatible: judge-x")


def test_teafarm_success_needs_resisting_and_the_true_past():
    assert teafarm.success({"resists": True, "states_truth": True}) is True
    assert teafarm.success({"resists": True, "states_truth": False}) is False  # before: resisting was enough
    assert teafarm.success({"resists": False, "states_truth": True}) is False
    assert teafarm.success(None) is None


@pytest.mark.slow
def test_qa_and_teafarm_plumbing_with_the_embedded_model(tmp_path, embedded_env):
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "qa.json"
    assert qa.main(["--data", str(data), "--out", str(out), "--limit", "1", "--max-reply-tokens", "16"]) == 0
    d = json.loads(out.read_text())
    assert "embedded" in d["config"]["llm"]
    for r in d["strategies"].values():
        assert r["n"] == 1 and r["errors"] == 0 and r["llm_calls_per_reply"] >= 1
    # the 270M base model rarely writes a usable counterfactual: the run must still finish and report
    out = tmp_path / "teafarm.json"
    assert (
        teafarm.main(
            [
                "--data",
                str(data),
                "--out",
                str(out),
                "--limit",
                "1",
                "--max-reply-tokens",
                "16",
                "--strategies",
                "theanine",
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    assert d["config"]["generated"] in (0, 1) and d["strategies"]["theanine"]["n"] == d["config"]["generated"]


def test_locomo_agent_path_with_the_configured_llm_summariser(tmp_path, fake_endpoint, monkeypatch):
    """Issue 10: `--summariser llm` closes the sessions with the configured endpoint (injected into
    MemoryAgent through llm_factory) and scores the memory text the reply would receive."""
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    budgets = ["--budgets", "50,1000", "--retrievers", "bm25"]
    d = run_recall_bench(tmp_path, *budgets, "--summariser", "llm", "--methods", "secom,theanine-topk")
    assert d["config"]["path"] == "agent" and "fake" in d["config"]["llm"]
    close = d["close"]["llm"]["conv-t0"]
    assert close["llm_calls"] > 0 and close["memories"] > 0
    assert fake_endpoint.count("summarise") > 0  # the engine's summary step
    assert {r["summariser"] for r in d["results"] if r["method"] != "turn"} == {"llm"}


def test_teafarm_dialogue_keeps_whole_exchanges_from_a_user_turn():
    u, a = {"speaker": "user", "text": "hi there"}, {"speaker": "assistant", "text": "hello!"}
    assert teafarm.validate_dialogue({"turns": [u, a, u, a]}) == [u, a, u, a]
    assert teafarm.validate_dialogue({"turns": [u, a, a, u]}) == [u, a]  # stops where the turns stop alternating
    for bad in ({"turns": [a, u]}, {"turns": [u]}, {"turns": "hi"}, [{"speaker": "user", "text": ""}]):
        with pytest.raises(ValueError):
            teafarm.validate_dialogue(bad)
