"""Knowledge update (issue 22): a changed fact is found offline, the current one is given first with
the old one as its history, memory can be recalled as of a session or date, and /recall keeps users apart.

Real parts: MiniLM, embedded Chroma, the real SQLite session store; no LLM (memory is built offline,
as on the bundled model).
"""

from __future__ import annotations

import json

import pytest

from bench import knowledge_update as ku
from bench.ku_histories import histories
from memory.errors import InvalidOptions
from memory.locks import UserLocks
from memory.records import SessionRecord, Turn
from memory.settings import Options
from memory.theanine.changes import ChangeRule
from memory.theanine.graph import Memory
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace
from memory.trace_types import MemoryRef, RetrievedMemory
from tests.flat_service import FlatService

PORTO = "I live in Porto with my two roommates."
LISBON = "I live in Lisbon now, the move went smoothly."


def sess(sid: str, date: str, *user_lines: str) -> SessionRecord:
    turns = []
    for i, line in enumerate(user_lines):
        turns += [Turn("user", line, f"{sid}:{2 * i}"), Turn("assistant", "I see.", f"{sid}:{2 * i + 1}")]
    return SessionRecord(sid, date, turns)


def mem(mid: str, text: str, speaker: str = "user") -> Memory:
    return Memory(mid, f"{speaker}: {text}", "2023-01-01", mid.split(":")[0], speaker=speaker)


def test_the_probe_is_deterministic_and_covers_every_kind_of_change():
    a, b = histories(), histories()
    assert len(a) >= 30 and [h.sessions for h in a] == [h.sessions for h in b]
    assert {h.kind for h in a} == {"home", "job", "partner", "pet", "plan", "preference"}
    for h in a:
        assert h.old != h.new and set(h.questions) == {"current", "old", "when"}
        dates = [s.date for s in h.sessions]
        assert dates == sorted(dates) and h.change_date in dates and h.ask_date > dates[-1]
        texts = {t.turn_id: t.text for s in h.sessions for t in s.turns}
        assert h.new in texts[h.change_turn] and all(h.old in texts[t] for t in h.old_turns)


def test_the_probe_reader_takes_the_first_value_outside_superseded_history():
    line = "[2023-04-03: user: I live in Lisbon now.] history: [2023-01-05 until 2023-04-03: user: I live in Porto.]"
    assert ku.first_value(line, "Porto", "Lisbon") == "new"
    assert ku.first_value("(2023-01-05) user: I live in Porto.\n(2023-04-03) I moved to Lisbon", "Porto", "Lisbon") == (
        "old"
    )
    assert ku.names_date("You moved on April 3rd.", "2023-04-03", spoken=True)
    assert not ku.names_date("You moved in April.", "2023-04-03", spoken=True)


def test_the_rule_finds_a_replaced_fact_and_not_a_restatement_or_someone_elses():
    rule = ChangeRule()
    pairs = [
        (mem("s1:m0", PORTO), mem("s3:m0", LISBON)),  # a change
        (mem("s1:m0", PORTO), mem("s3:m1", "I live in Porto now, still with my roommates.")),  # same value
        (mem("s1:m0", PORTO), mem("s3:m2", "My cousin lives in Lisbon now.")),  # someone else
        (mem("s1:m0", PORTO), mem("s3:m3", LISBON, speaker="Jon")),  # another speaker
    ]
    assert rule.changed(pairs) == [True, False, False, False]


@pytest.fixture
def moved(tmp_path, chroma_store, minilm):
    """Three sessions built offline: Porto, a distractor, then the move to Lisbon."""
    tm = TheanineMemory(chroma_store, minilm, tmp_path, UserLocks())
    for s in (
        sess("s1", "2023-01-05", PORTO, "I baked banana bread for my colleagues."),
        sess("s2", "2023-02-10", "I started learning Spanish with a phone app."),
        sess("s3", "2023-04-03", LISBON),
    ):
        tm.build("u1", s, None, Options(), Trace("close"))
    return tm


def test_a_changed_fact_is_current_first_with_its_history_kept(moved):
    g = moved.graph("u1")
    porto = next(m.id for m in g.memories() if "Porto" in m.event)
    lisbon = next(m.id for m in g.memories() if "Lisbon" in m.event)
    assert g.g.edges[porto, lisbon]["relation"] == "Changed" and g.found_by(porto, lisbon) == "rule"
    assert g.superseded_by(porto) == lisbon and g.current(porto) == lisbon and g.replaced(lisbon) == [porto]
    view = moved.view("u1")
    assert {n["id"]: n["superseded_by"] for n in view["nodes"]}[porto] == lisbon  # never deleted, marked
    assert any(e["relation"] == "Changed" and e.get("found_by") == "rule" for e in view["edges"])

    for timelines in (False, True):
        trace = Trace("theanine")
        raw = moved.retrieve("u1", "Where did I live in Porto?", Options(), trace, timelines=timelines)
        text = "\n".join(t["text"] for t in raw)
        # The current memory comes before the superseded one, which says until when it held.
        assert text.index("Lisbon") < text.index("Porto"), text
        assert "2023-01-05 until 2023-04-03: user: I live in Porto" in text
        hit = next(m for m in trace.memories if m["id"] == porto)
        assert hit["superseded_by"]["id"] == lisbon  # what See why shows


def test_offline_a_stated_change_reaches_the_fact_beyond_its_nearest_memories(tmp_path, chroma_store, minilm):
    """The change does not share words with the old job, and closer distractors fill its j nearest: the
    offline close still links it, reading every earlier memory of that subject (and nothing else)."""
    tm = TheanineMemory(chroma_store, minilm, tmp_path, UserLocks())
    distractors = [
        "My friend Paul just got hired at Vantara.",
        "My brother left his old company last spring.",
        "My colleague Maria joined a startup as a team lead.",
        "The team lead at my gym is really strict.",
    ]
    for s in (
        sess("s1", "2023-01-14", "My job at Brightwave keeps me busy with quarterly reports."),
        sess("s2", "2023-03-20", *distractors),
        sess("s3", "2023-04-14", "I left my old company and joined Tessaro as a team lead."),
    ):
        tm.build("u1", s, None, Options(j=2), Trace("close"))
    g = tm.graph("u1")
    old = next(m.id for m in g.memories() if "Brightwave" in m.event)
    new = next(m.id for m in g.memories() if "Tessaro" in m.event)
    assert g.superseded_by(old) == new and g.found_by(old, new) == "rule"
    assert [m.id for m in g.memories() if g.superseded_by(m.id) is not None] == [old]


def test_recall_as_of_a_session_or_date_sees_the_memory_as_it_stood(moved):
    for as_of in ("2023-02-10", {"s1", "s2"}):
        sessions = as_of if isinstance(as_of, set) else moved.sessions_as_of("u1", as_of)
        assert sessions == {"s1", "s2"}
        raw = moved.retrieve("u1", "Which city do I live in?", Options(), Trace("theanine"), sessions=sessions)
        text = "\n".join(t["text"] for t in raw)
        assert "Porto" in text and "Lisbon" not in text and "until" not in text
    assert moved.sessions_as_of("u1", "s1") == {"s1"}
    with pytest.raises(InvalidOptions):
        moved.sessions_as_of("u1", "not a date")


@pytest.fixture
def service(tmp_path):
    from memory.agent import MemoryAgent
    from memory.settings import Settings
    from sessions import open_service

    settings = Settings(data_dir=tmp_path)  # the bundled model: memory is built offline
    return FlatService(open_service(settings, MemoryAgent.from_settings(settings)))


def _import(svc, *sessions: SessionRecord) -> str:
    from sessions import new_user_id

    uid = new_user_id()
    data = {
        "sessions": [
            {"date": s.date, "turns": [{"speaker": t.speaker, "text": t.text, "id": t.turn_id} for t in s.turns]}
            for s in sessions
        ]
    }
    svc.import_history(uid, json.dumps(data), "")
    return uid


def test_recall_returns_lines_with_sources_and_scores_and_keeps_users_apart(service):
    from sessions.recall import recall

    alice = _import(service, sess("a1", "2023-01-05", PORTO), sess("a2", "2023-04-03", LISBON))
    bob = _import(service, sess("b1", "2023-01-07", "I live in Vienna with my sister and her cat."))
    got = recall(service.rooms.memory, service.user(alice), "Which city do I live in?", "theanine")
    text = json.dumps(got)
    assert got["lines"] and "Lisbon" in got["lines"][0]["text"] and "Vienna" not in text
    assert got["lines"][0]["score"] is not None
    assert any(t["text"] == LISBON for t in got["lines"][0]["turns"])  # the source turn, from the transcript
    assert got["superseded"] == [] or got["superseded"][0]["superseded_by"]["event"].endswith(LISBON)
    first = service.sessions(alice)[0].session_id
    then = recall(service.rooms.memory, service.user(alice), "Which city do I live in?", "theanine", first)
    assert "Porto" in json.dumps(then["lines"]) and "Lisbon" not in json.dumps(then["lines"])
    for strategy in ("theanine", "secom"):
        theirs = json.dumps(
            recall(service.rooms.memory, service.user(bob), "Which city do I live in? Porto or Lisbon?", strategy)
        )
        assert "Porto" not in theirs and "Lisbon" not in theirs and "Vienna" in theirs
    with pytest.raises(InvalidOptions):
        recall(service.rooms.memory, service.user(alice), "Where?", "theanine", "no-such-session")


def test_the_graph_and_see_why_name_the_superseded_memory():
    from ui.graph_view import graph_data
    from ui.see_why import trace_html

    view = {
        "nodes": [
            {
                "id": "s1:m0",
                "event": "user: " + PORTO,
                "time": "2023-01-05",
                "session_id": "s1",
                "superseded_by": "s3:m0",
            },
            {
                "id": "s3:m0",
                "event": "user: " + LISBON,
                "time": "2023-04-03",
                "session_id": "s3",
                "superseded_by": None,
            },
        ],
        "edges": [{"source": "s1:m0", "target": "s3:m0", "relation": "Changed", "found_by": "rule"}],
    }
    data = graph_data(view, retrieved={"s1:m0"})
    assert [n["sup"] for n in data["n"]] == ["s3:m0", ""]
    assert [(e["from"], e["to"], e["title"]) for e in data["e"]] == [("s1:m0", "s3:m0", "Changed")]
    by: MemoryRef = {"id": "s3:m0", "event": "user: " + LISBON, "time": "2023-04-03"}
    mem: RetrievedMemory = {
        "id": "s1:m0",
        "event": "user: " + PORTO,
        "time": "2023-01-05",
        "score": 0.5,
        "superseded_by": by,
    }
    html = trace_html({"strategy": "theanine", "memories": [mem], "timelines_raw": []})
    # dated as the sidebar writes dates, the stored date in the title
    assert "Superseded" in html and LISBON.rstrip(".") in html
    assert 'replaced on <span class="mc-date" title="2023-04-03">Mon 3 Apr 2023</span>' in html


def test_time_travel_asks_as_of_a_session(service):
    from tests.reliability_app import stand_ins
    from ui.timetravel import TimePanel, TimeTravel

    alice = _import(service, sess("a1", "2023-01-05", PORTO), sess("a2", "2023-04-03", LISBON))
    tt = TimeTravel(service, stand_ins(TimePanel))
    then, now = tt.ask(alice, 1, "Which city do I live in?"), tt.ask(alice, 2, "Which city do I live in?")
    assert "Porto" in then and "Lisbon" not in then
    assert now.index("Lisbon") < now.index("Porto") and "Superseded by then" in now
    assert "nothing was remembered" in tt.ask(alice, 0, "Which city?")
