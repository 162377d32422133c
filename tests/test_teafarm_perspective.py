"""TeaFarm as the THEANINE paper runs it (issue 35): the user sends every counterfactual question, about
either speaker's past; the next session is written from the last one plus the question; a run judged by
the agent's own model, or by a bundled one, is not a valid TeaFarm score."""

import json
import re
from pathlib import Path

from bench import llm_eval, teafarm
from memory.evaluation.teafarm import validity, validity_of
from memory.settings import LLMConfig, Settings
from tests.bench_fixtures import write_tiny
from tests.fakes import ScriptedLLM

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "results" / "teafarm.json"


def scripted_generator(messages: list[dict]) -> str:
    """The generator's answers: questions for a counterfactual prompt, four turns for a dialogue prompt."""
    prompt = messages[-1]["content"]
    if "Summaries of all past conversations" in prompt:
        found = re.search(r"Write (\d+) messages", prompt)
        assert found is not None
        n = int(found[1])
        about_agent = "did you, your" in prompt
        q = "Did you enjoy your trip to Tokyo?" if about_agent else "Remember my salsa lessons?"
        item = {"question": q, "false_premise": "a false fact", "correct_answer": "the true fact"}
        return json.dumps({"questions": [item] * n})
    turns = [
        ("user", "Hi again!"),
        ("assistant", "Hello, good to see you."),
        ("user", "Busy week."),
        ("assistant", "Oh?"),
    ]
    return json.dumps({"turns": [{"speaker": w, "text": t} for w, t in turns]})


def generated(tmp_path, limit: int = 4):
    data = write_tiny(tmp_path / "tiny.json")
    user = llm_eval.load_users(str(data), None, 0)[0]
    llm = ScriptedLLM(scripted_generator)
    judge = llm_eval.Judge(Settings(), llm=llm, cfg=LLMConfig(backend="openai", model="judge-x"))
    return user, llm, teafarm._counterfactuals(judge, user, limit)


def test_every_question_is_sent_by_the_user_about_either_speaker(tmp_path):
    user, llm, items = generated(tmp_path)
    # the tiny file: Alice speaks first (the user), Bob is the agent (its persona in every reply)
    assert teafarm.roles(user.sample, user.sessions) == ("Alice", "Bob")
    assert "you are Bob and the person you talk with is Alice" in user.persona
    assert len(items) == 4
    assert {it["speaker"] for it in items} == {"Alice"}  # before: half were sent by Bob, the agent itself
    assert [it["about"] for it in items] == ["Alice", "Bob", "Alice", "Bob"]  # balanced, alternating
    gen = [m[-1]["content"] for m in llm.prompts if "Summaries of all past" in m[-1]["content"]]
    assert len(gen) == 2 and all("messages that Alice could send to Bob" in p for p in gen)
    assert not any("that Bob could send" in p for p in gen)
    assert "Alice's own past" in gen[0] and "Bob's past, asked of Bob" in gen[1]
    about_bob = [it for it in items if it["about"] == "Bob"]
    assert all(it["question"].startswith("Did you") for it in about_bob)  # the agent is asked as "you"
    # the agent's reply is judged as an answer to the user's message
    judged = teafarm.judge_messages(items[1], "I never went to Tokyo.")[-1]["content"]
    assert "Message Alice sent: Did you enjoy your trip to Tokyo?" in judged


def test_an_odd_limit_keeps_the_user_as_sender(tmp_path):
    _, _, items = generated(tmp_path, limit=3)
    assert [(it["speaker"], it["about"]) for it in items] == [("Alice", "Alice"), ("Alice", "Bob"), ("Alice", "Alice")]


def test_the_next_session_is_written_from_the_last_session_and_the_question(tmp_path):
    user, llm, items = generated(tmp_path)
    dia = [m[-1]["content"] for m in llm.prompts if "Summaries of all past" not in m[-1]["content"]]
    assert len(dia) == len(items) == 4
    last = user.sessions[-1]
    for prompt, it in zip(dia, items, strict=True):
        for t in last.turns:  # the paper's session 5: the last session's whole text (short here)
            assert f"{t.speaker}: {t.text}" in prompt
        assert last.date in prompt and f'"{it["question"]}"' in prompt
        assert "Hi Bob, how was your week?" not in prompt  # an earlier session is not the one continued
        assert 'Alice (speaker "user") and Bob (speaker "assistant")' in prompt
    assert all(len(it["dialogue"]) == 4 for it in items)


def test_a_long_last_session_is_cut_to_its_end():
    from memory.records import SessionRecord, Turn
    from memory.tokens import count_tokens

    turns = [Turn("Alice" if i % 2 == 0 else "Bob", f"turn number {i} " + "word " * 40, f"D9:{i}") for i in range(80)]
    text = teafarm.session_text(SessionRecord("s9", "1 June, 2023", turns), max_tokens=300)
    assert count_tokens(text) <= 300 and text.endswith(turns[-1].text.strip())
    assert "turn number 0 " not in text
    assert teafarm.session_text(None) == ""


def test_a_run_judged_by_the_agents_own_or_a_bundled_model_is_not_valid():
    agent = LLMConfig(backend="openai", model="gpt-4o-mini", base_url="http://a")
    own = validity(agent, LLMConfig(backend="openai", model="GPT-4o-mini", base_url="http://b"))
    assert own["valid"] is False and "agent's own model" in own["why"] and "not a valid TeaFarm score" in own["why"]
    assert own["perspective"] == "user asks about either speaker"
    bundled = validity(agent, LLMConfig(backend="embedded", bundled_model="qwen1.5b"))
    assert bundled["valid"] is False and "bundled" in bundled["why"]
    embedded = LLMConfig(backend="embedded", bundled_model="qwen0.5b")
    both = validity(embedded, embedded)
    assert both["valid"] is False and "agent's own model" in both["why"] and "bundled" in both["why"]
    other = validity(agent, LLMConfig(backend="openai", model="gpt-4o"))
    assert other["valid"] is True and "gpt-4o" in other["why"]


def test_a_result_file_from_before_the_check_is_not_valid():
    old = {"config": {"llm": "embedded: Gemma", "generator_and_judge": "embedded: Gemma"}}
    v = validity_of(old)
    assert v["valid"] is False and "agent's own model" in v["why"]
    assert validity_of({"valid": True, "perspective": "p", "why": "w"}) == {
        "perspective": "p",
        "valid": True,
        "why": "w",
    }
    if COMMITTED.exists():  # the committed run: the bundled Gemma judged its own replies
        assert validity_of(json.loads(COMMITTED.read_text()))["valid"] is False


def test_the_output_json_says_a_self_judged_run_is_not_valid(tmp_path, fake_endpoint):
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "teafarm.json"
    args = ["--data", str(data), "--out", str(out), "--limit", "2", "--strategies", "none", "--hint", "off"]
    # no judge named: the generator and judge is the agent's own model ("fake")
    assert teafarm.main([*args, "--judge-model", "", "--judge-base-url", ""]) == 0
    d = json.loads(out.read_text())
    assert d["valid"] is False and "agent's own model" in d["why"]
    assert d["perspective"] == "user asks about either speaker"
    assert {q["speaker"] for q in d["questions"]} == {"Alice"}


def test_the_evaluate_tab_says_whether_the_teafarm_result_is_valid(tmp_path):
    from ui.eval_results import measured_teafarm, teafarm_html

    res = {
        "perspective": "user asks about either speaker",
        "valid": False,
        "why": "the generator and judge is the agent's own model (x): not a valid TeaFarm score",
        "strategies": {"secom": {"n": 2, "n_judged": 2, "success_rate": 0.5, "resists_rate": 1.0}},
        "config": {"llm": "x", "generator_and_judge": "x", "generated": 2},
    }
    shown = teafarm_html(res)
    assert 'data-valid="false"' in shown and "Not a valid TeaFarm score" in shown and "agent&#x27;s own model" in shown
    assert "user asks about either speaker" in shown and "0.500" in shown
    ok = teafarm_html({**res, "valid": True, "why": "generator and judge gpt-4o"})
    assert 'data-valid="true"' in ok and "Valid TeaFarm score" in ok and "Not a valid" not in ok
    assert "Not measured" in teafarm_html(None)
    assert measured_teafarm(tmp_path / "absent.json") is None
    if COMMITTED.exists():  # the committed file predates the check: shown as not valid
        assert 'data-valid="false"' in teafarm_html(measured_teafarm(COMMITTED))
