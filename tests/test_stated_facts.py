"""Every stated fact is a memory (issue 32, item 4): offline, a short fact sentence ("Her name is Mia.",
"I also changed jobs.") is a memory, one that refers back with a pronoun carries its referent, and a
stated change of job, home, relationship or habit gets `Changed` from the earlier memory it replaces.

The Changed tests go through the real path: MiniLM, embedded Chroma, sessions closed offline (no LLM).
"""

from __future__ import annotations

import json

import pytest

from memory.locks import UserLocks
from memory.records import SessionRecord, Turn
from memory.settings import Options
from memory.theanine.changes import stated_change
from memory.theanine.extract import MIN_CONTENT_WORDS, content_words, extract_memories, is_statement, sentences
from memory.theanine.graph import Memory, MemoryGraph
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace
from tests.conftest import LOCOMO_SMALL


def events(*texts: str, speaker: str = "user") -> list[str]:
    return [m["event"] for m in extract_memories([Turn(speaker, t, f"s1:{i}") for i, t in enumerate(texts)])]


def sess(sid: str, date: str, *user_lines: str) -> SessionRecord:
    turns = []
    for i, line in enumerate(user_lines):
        turns += [Turn("user", line, f"{sid}:{2 * i}"), Turn("assistant", "I see.", f"{sid}:{2 * i + 1}")]
    return SessionRecord(sid, date, turns)


def mem(mid: str, text: str) -> Memory:
    return Memory(mid, f"user: {text}", "2023-01-01", mid.split(":")[0], speaker="user")


def changed_edges(g: MemoryGraph) -> list[tuple[str, str]]:
    return [(g.memory(a).event, g.memory(b).event) for a, b, r in g.g.edges(data="relation") if r == "Changed"]


def test_a_short_fact_is_a_memory_and_a_pronoun_carries_its_referent():
    got = events("Last month we got a kitten. Her name is Mia. She is 3. Isn't she cute? It cost $40.")
    assert got == [
        "user: Last month we got a kitten.",
        "user: Last month we got a kitten. Her name is Mia.",
        "user: Last month we got a kitten. She is 3.",
        "user: Last month we got a kitten. It cost $40.",
    ]
    # Short facts without a pronoun are kept as said; a reference that opens a turn has no referent.
    assert events("I live in Lyon now.", "We moved to Berlin.", "I'm a nurse.", "Mia is 3.", "Her name is Mia!") == [
        "user: I live in Lyon now.",
        "user: We moved to Berlin.",
        "user: I'm a nurse.",
        "user: Mia is 3.",
        "user: Her name is Mia!",
    ]
    # A bare reaction is no referent: the fact stays alone rather than borrow "That's awesome!".
    assert events("That's awesome! Her name is Mia.") == ["user: Her name is Mia."]
    # The referent need not be a memory itself ("We got a kitten." is too short and no fact); the same
    # fact again in a later turn is one memory with both source turns.
    mems = extract_memories(
        [Turn("user", "We got a kitten. Her name is Mia.", "a"), Turn("user", "Her name is Mia.", "b")]
    )
    assert [(m["event"], m["turns"]) for m in mems] == [("user: We got a kitten. Her name is Mia.", [0, 1])]


def test_i_also_changed_jobs_is_a_memory():
    assert events("I also changed jobs.") == ["user: I also changed jobs."]
    for s in ["I quit smoking.", "I don't smoke anymore.", "I'm not a teacher anymore.", "We got married!"]:
        assert is_statement(s), s


def test_greetings_questions_thanks_reactions_cheers_and_hedges_are_still_not_memories():
    for s in [
        "Hi Jon!",
        "Hey Mel!",
        "What is her name?",
        "How old is she",
        "Thanks so much!",
        "That's awesome!",
        "Wow, cool.",
        "Way to go, Jon!",
        "Yeah, Maria.",
        "Sure thing, John.",
        "I 100% agree, Mel.",
        "I love it.",
        "I'm tired now.",
        "I won't quit.",
        "I might move to Lyon.",
        "I didn't move.",
        "Thankfully it's over now.",
    ]:
        assert not is_statement(s), s
    assert events("Hi! How are you? Thanks so much!", "That's awesome! Way to go!") == []


def test_short_facts_add_few_memories_on_locomo_and_no_question():
    """LoCoMo's chit-chat is full of short sentences ("Yeah, Maria.", "We rock!"): few are facts."""
    from memory.locomo_format import load_sessions

    short, total = [], 0
    for _, sessions in load_sessions(json.loads(LOCOMO_SMALL.read_text())):
        for s in sessions:
            for m in extract_memories(s.turns):
                total += 1
                said = sentences(m["event"].split(": ", 1)[1])[-1]  # a referent comes before the fact
                if len(content_words(said)) < MIN_CONTENT_WORDS:
                    short.append(m["event"])
    assert total > 50 and len(short) <= 0.02 * total, short
    assert not any("?" in e for e in short), short


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work as a teacher at the local school.", "I also changed jobs."),
        ("I live in Porto with my two roommates.", "We moved to Berlin last month."),
        ("My boyfriend Tom and I adopted a cat together.", "Tom and I broke up in the spring."),
        ("I smoke about ten cigarettes a day.", "I quit smoking, it has been two weeks."),
    ],
    ids=["job", "home", "relationship", "habit"],
)
def test_a_stated_change_across_two_sessions_is_changed(old, new, tmp_path, chroma_store, minilm):
    tm = TheanineMemory(chroma_store, minilm, tmp_path, UserLocks())
    for s in (
        sess("s1", "2023-01-05", old, "I baked banana bread for my colleagues."),
        sess("s2", "2023-03-10", "I started learning Spanish with a phone app.", new),
    ):
        tm.build("u1", s, None, Options(), Trace("close"))
    g = tm.graph("u1")
    assert changed_edges(g) == [(f"user: {old}", f"user: {new}")]
    a = next(m.id for m in g.memories() if m.event == f"user: {old}")
    b = next(m.id for m in g.memories() if m.event == f"user: {new}")
    assert g.found_by(a, b) == "rule" and g.superseded_by(a) == b


def test_the_users_change_of_job_is_changed_through_the_agent(tmp_path):
    """The user's report: "I'm not a teacher anymore, I now work as a nurse" got no Changed link."""
    from memory.agent import MemoryAgent
    from memory.settings import Settings

    agent = MemoryAgent.from_settings(Settings(data_dir=tmp_path))  # the bundled model: memory built offline
    agent.close_session(
        "u1", sess("s1", "2023-01-05", "I'm a teacher.", "My garden is full of tomatoes."), llm_steps=False
    )
    agent.close_session(
        "u1", sess("s2", "2023-06-01", "I'm not a teacher anymore, I now work as a nurse."), llm_steps=False
    )
    g = agent.theanine.graph("u1")
    assert changed_edges(g) == [("user: I'm a teacher.", "user: I'm not a teacher anymore, I now work as a nurse.")]


def test_a_plan_a_denial_someone_else_or_the_same_value_is_no_stated_change():
    teacher, porto = mem("s1:m0", "I work as a teacher at the local school."), mem("s1:m1", "I live in Porto.")
    assert stated_change(teacher, mem("s2:m0", "I'm not a teacher anymore, I now work as a nurse.")) == "job"
    for new in [
        "I might change jobs next year.",
        "I want a new job.",
        "My sister changed jobs.",
        "I started a new project at work.",
        "I'm at work now.",
    ]:
        assert stated_change(teacher, mem("s2:m0", new)) is None, new
    for new in [
        "I didn't move to Lisbon after all.",
        "I moved to Porto three years ago.",
        "My cousin moved to Lisbon.",
    ]:
        assert stated_change(porto, mem("s2:m0", new)) is None, new
    # A change told again with nothing new is not a second change.
    assert stated_change(mem("s1:m0", "I also changed jobs."), mem("s2:m0", "My new job is great.")) is None
    # Another speaker's statement is not the user's fact.
    jon = Memory("s2:m0", "Jon: I also changed jobs.", "2023-02-01", "s2", speaker="Jon")
    assert stated_change(teacher, jon) is None
