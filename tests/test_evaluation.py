"""sessions.evaluation: what the "Evaluate memory designs" tab sends is checked before anything runs
(bad file, bad budgets, unknown turn ids: a message for people, nothing started or changed), and a
run is the benchmark's own JSON, built on scratch data."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from memory.evaluation import agent_run
from memory.evaluation.spec import AGENT_METHODS
from memory.locks import UserLocks
from sessions import UserError, new_user_id
from sessions.evaluation import (
    Evaluations,
    conversations_from_file,
    make_spec,
    my_history_sample,
    my_turn_rows,
    parse_budgets,
)
from sessions.settings import Limits
from sessions.users import UserKey
from sessions.work import UserWork
from tests.bench_fixtures import tiny_locomo

ALL = list(AGENT_METHODS)


class FakeSessions:
    """The sessions' room as the evaluation reads it: a user's sessions in time order and their messages.

    It has no write method: an evaluation that tried to store anything would fail with AttributeError.
    """

    def __init__(self, sessions: dict[str, list[tuple[str, str]]]):
        self._sessions = sessions
        self.work = UserWork(UserLocks())
        self.limits = Limits()

    def in_order(self, key):
        return [SimpleNamespace(session_id=s, date=f"2023-05-0{i + 1}") for i, s in enumerate(self._sessions)]

    def messages(self, key, session_id):
        return [
            SimpleNamespace(role=r, speaker=r, text=t, status="ok", id=i)
            for i, (r, t) in enumerate(self._sessions[session_id])
        ]


@pytest.fixture
def svc() -> Any:  # stands in for sessions.session_room.SessionRoom
    return FakeSessions(
        {
            "s1": [("user", "I adopted a beagle named Biscuit."), ("assistant", "Lovely!")],
            "s2": [("user", "Biscuit chewed my shoes."), ("assistant", "Oh no.")],
        }
    )


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "at least one"),
        ("250, lots", "whole numbers"),
        ("10,1000", "between 50 and 32000"),
        ("1000,99999", "between 50 and 32000"),
        (",".join(str(50 + i) for i in range(9)), "At most 8"),
    ],
)
def test_bad_budgets_are_refused_with_a_message(text, words):
    with pytest.raises(UserError, match=words):
        parse_budgets(text)


def test_budgets_are_read_sorted_and_deduplicated():
    assert parse_budgets("1000, 250 250;500") == [250, 500, 1000]


def test_a_run_needs_a_strategy_a_retriever_and_a_summariser():
    assert make_spec(ALL, ["bm25"], "250", ["offline"], llm_configured=False).contexts is True
    for args, words in (
        (([], ["bm25"], "250", ["offline"]), "strategy"),
        ((ALL, [], "250", ["offline"]), "retriever"),
        ((ALL, ["bm25"], "250", []), "build memory"),
        ((ALL, ["bm25"], "250", ["llm"]), "configured endpoint"),
    ):
        with pytest.raises(UserError, match=words):
            make_spec(*args, llm_configured=False)


@pytest.mark.parametrize(
    "data, only, words",
    [
        (b"{not json", "", "not valid JSON"),
        (b"\xff\xfe\x00", "", "not valid JSON"),
        (json.dumps({"sessions": []}).encode(), "", "not in LoCoMo's format"),
        (json.dumps([tiny_locomo("conv-a")]).encode(), "conv-zzz", "no conversation conv-zzz"),
        (json.dumps([{**tiny_locomo(), "qa": []}]).encode(), "", "no question to evaluate"),
        (json.dumps([{"sample_id": "x", "conversation": {}, "qa": []}]).encode(), "", "no session with turns"),
    ],
)
def test_bad_files_are_refused_with_a_message(data, only, words):
    with pytest.raises(UserError, match=words):
        conversations_from_file(data, only)


def test_a_locomo_file_is_read_as_the_benchmark_reads_it():
    convs = conversations_from_file(json.dumps([tiny_locomo("conv-a"), tiny_locomo("conv-b")]), "conv-b")
    assert [c.sample_id for c in convs] == ["conv-b"]
    assert [q.evidence for q in convs[0].questions] == [["D1:2"], ["D1:3", "D2:3"]]  # category 5 skipped


def test_my_turns_have_locomo_ids(svc):
    rows = my_turn_rows(svc, UserKey.of(new_user_id()))
    assert [r[0] for r in rows] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert rows[0][1:] == ["2023-05-01", "user", "I adopted a beagle named Biscuit."]


@pytest.mark.parametrize(
    "rows, words",
    [
        ([["", "", ""]], "at least one question"),
        ([["What is my dog called?", "D9:1", "4"]], "no turn D9:1"),
        ([["What is my dog called?", "turn one", "4"]], "D<session>:<turn>"),
        ([["What is my dog called?", "D1:1 and D1:2", "4"]], "D<session>:<turn>"),
        ([["What is my dog called?", "D1:1", "7"]], "category must be one of"),
        ([["", "D1:1", "4"]], "question is empty"),
        ([["x" * 501, "D1:1", "4"]], "at most 500"),
    ],
)
def test_bad_questions_are_refused_with_a_message(svc, rows, words):
    with pytest.raises(UserError, match=words):
        my_history_sample(svc, UserKey.of(new_user_id()), rows)


def test_my_history_and_questions_become_one_locomo_sample(svc):
    rows = [["What is my dog called?", "D1:1", ""], ["What did Biscuit chew?", "D2:1, D1:1", "1"], ["", "", ""]]
    sample = my_history_sample(svc, UserKey.of(new_user_id()), rows)
    assert sample["conversation"]["session_2"][0] == {"speaker": "user", "dia_id": "D2:1", "text": rows_text(svc)}
    assert [(q["evidence"], q["category"]) for q in sample["qa"]] == [(["D1:1"], 4), (["D2:1", "D1:1"], 1)]


def rows_text(svc):
    return svc._sessions["s2"][0][1]


def test_refused_requests_start_nothing(svc, tmp_path):
    # A refused request reads no setting but whether an LLM is configured.
    bundled_only = SimpleNamespace(llm=SimpleNamespace(is_bundled=True))
    ev = Evaluations(svc, settings=bundled_only)  # type: ignore[arg-type]
    uid = UserKey.of(new_user_id())
    with pytest.raises(UserError):
        ev.request_file(b"[]", "", ALL, ["bm25"], "250", ["offline"], "x.json")
    with pytest.raises(UserError):
        ev.request_history(uid, [["q?", "D7:7", "4"]], ALL, ["bm25"], "250", ["offline"])
    with pytest.raises(UserError, match="reference"):
        ev.request_history(uid, [["q?", "D1:1", "4"]], ALL, ["bm25"], "250", ["reference"])
    assert ev.get(uid) is None and ev.finished(uid) is None and svc.work.running(uid) is None
    ev.shutdown()


def test_a_run_is_the_benchmarks_json_on_scratch_data(svc, tmp_path, monkeypatch):
    """The tab's run calls the benchmark (same JSON as `agent_run.run`), in the background, on its own
    scratch folder; a second run while one runs is refused."""
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "LLM_GGUF_PATH", "SECOM_SEGMENTER"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "user-data"))
    from memory.settings import Settings

    settings = Settings.from_env()
    ev = Evaluations(svc, settings=settings)
    uid = new_user_id()
    req = ev.request_file(json.dumps([tiny_locomo()]), "", ALL, ["bm25"], "50,1000", ["offline"], "tiny.json")
    run = ev.start(uid, req)
    with pytest.raises(UserError, match="Busy"):
        ev.start(uid, req)
    deadline = time.time() + 600
    while not run.done and time.time() < deadline:
        time.sleep(0.2)
    assert run.error is None and run.result is not None and ev.finished(uid) is run and run.path is not None
    assert json.loads(run.path.read_text()) == run.result
    direct = agent_run.run(req.convs, req.spec, settings=settings, data="tiny.json")
    assert run.result["results"] == direct["results"] and run.result["questions"] == direct["questions"]
    row = run.result["questions"][1]
    assert row["evidence"] == ["D1:3", "D2:3"] and row["strategies"]["turn (bm25)"]["1000"]["recall"] == 1.0
    assert row["strategies"]["turn (bm25)"]["1000"]["context"]  # the packed context, with the evidence marked
    assert not (tmp_path / "user-data").exists()  # nothing written where the user's data lives
    ev.forget(uid)  # Forget me: the run and its JSON go too
    assert ev.get(uid) is None and ev.finished(uid) is None and not run.path.exists()
    ev.shutdown()
