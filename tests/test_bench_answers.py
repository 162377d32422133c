"""`python -m bench answers`: LoCoMo answers per strategy through the app's reply prompt.

The fast test runs it against the scripted OpenAI-compatible server (known replies, every request
recorded), so what each strategy put in the prompt is checked; the slow one runs the bundled model.
"""

import json

import pytest

from bench import answers
from bench.answer_score import token_f1
from memory.reply_prompts import memory_of
from tests.bench_fixtures import TURNS, write_tiny
from tests.llm_server import ok
from ui.eval_results import answers_html, measured_answers


@pytest.fixture
def endpoint(fake_endpoint, monkeypatch):
    monkeypatch.setenv("MEMORY_LLM_STEPS", "off")  # memory built offline, as on a bundled model
    return fake_endpoint


def test_every_strategy_answers_through_the_reply_prompt_and_is_scored(tmp_path, endpoint):
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "res" / "answers.json"
    endpoint.script("reply", *[ok("Bob adopted Biscuit at the Portland shelter.")] * (2 * len(answers.STRATEGIES)))
    assert answers.main(["--data", str(data), "--out", str(out), "--questions", "2"]) == 0
    d = json.loads(out.read_text())
    s = {r["strategy"]: r for r in d["summary"]}
    assert list(s) == list(answers.STRATEGIES) and all(r["n"] == 2 for r in s.values())
    # the same reply for every question: its F1 against each gold answer, per category
    golds = {r["question"]: r["gold"] for r in d["rows"]}
    want = sum(token_f1("Bob adopted Biscuit at the Portland shelter.", g) for g in golds.values()) / 2
    assert all(abs(r["f1"] - round(want, 3)) < 1e-3 for r in s.values())
    assert set(s["none"]["f1_by_category"]) == {"1", "4"} and s["none"]["memory_tokens"] == 0
    others = [v["memory_tokens"] for k, v in s.items() if k not in ("none", "full-context")]
    assert min(others) > 0 and s["full-context"]["memory_tokens"] >= max(others)  # the whole conversation
    replies = [b for b in endpoint.bodies("reply")]
    assert len(replies) == 2 * len(answers.STRATEGIES)
    systems = [b["messages"][0]["content"] for b in replies]
    assert all("you are Bob and the person you talk with is Alice" in x for x in systems)  # its speaker
    assert all(b["messages"][-1]["role"] == "user" and b["messages"][-1]["content"] in golds for b in replies)
    # full-context (the 3rd and 4th replies): every turn, in order, and the same memory for both questions
    full = [memory_of(b["messages"]) for b in replies[2:4]]
    said = [t for n in TURNS for _, t in TURNS[n]]
    pos = [full[0].index(t) for t in said]
    assert pos == sorted(pos) and full[0] == full[1]
    assert all(t not in str(replies[0]["messages"]) for t in said)  # none: no memory
    assert (tmp_path / "res" / "answers_f1.png").exists()
    # the Evaluate tab's table of the same file: a row per strategy with its F1
    shown = answers_html(measured_answers(out))
    assert all(f'data-strategy="{st}"><th>{st}</th><td>{s[st]["f1"]:.3f}</td>' in shown for st in s)


def test_the_tab_reads_no_file_or_a_bad_one_as_not_measured(tmp_path):
    assert measured_answers(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert measured_answers(tmp_path / "bad.json") is None
    (tmp_path / "empty.json").write_text(json.dumps({"summary": []}))
    assert measured_answers(tmp_path / "empty.json") is None
    assert "Not measured" in answers_html(None)


def test_the_goal_needs_full_context_f1_within_a_tenth_of_its_tokens():
    rows = [
        {"strategy": "full-context", "f1": 0.30, "memory_tokens": 10000},
        {"strategy": "secom", "f1": 0.31, "memory_tokens": 1000},
        {"strategy": "turn", "f1": 0.40, "memory_tokens": 1001},
        {"strategy": "none", "f1": 0.50, "memory_tokens": 0},
    ]
    assert answers.goal_line(rows).endswith("met by secom")
    rows[1]["f1"] = 0.29
    assert answers.goal_line(rows).endswith("not met")


def test_an_unknown_strategy_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        answers.main(["--data", str(write_tiny(tmp_path / "t.json")), "--strategies", "none,bogus"])
    assert "bogus" in capsys.readouterr().err


@pytest.mark.slow
def test_answers_on_the_bundled_model(tmp_path, embedded_env):
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "answers.json"
    args = ["--data", str(data), "--out", str(out), "--questions", "1", "--max-reply-tokens", "16"]
    assert answers.main([*args, "--strategies", "none,full-context,theanine-timeline"]) == 0
    d = json.loads(out.read_text())
    assert "embedded" in d["config"]["model"]
    assert [r["strategy"] for r in d["summary"]] == ["none", "full-context", "theanine-timeline"]
    assert all(r["reply"].strip() for r in d["rows"])
