"""LLM-free memory extraction: statements, one per sentence, with speaker and provenance."""

from __future__ import annotations

import json

import pytest

from memory.records import Turn
from memory.theanine.extract import extract_memories, is_statement, sentences
from tests.conftest import SHARED_DATA


def test_questions_greetings_and_cheers_are_not_memories():
    for s in [
        "What is my cat's name?",
        "Hi Jon!",
        "Thanks so much!",
        "That's awesome, Caroline!",
        "Way to go, Jon!",
        "How was your weekend",
        "Wow, cool.",
    ]:
        assert not is_statement(s), s
    for s in [
        "I adopted a puppy named Rex last week.",
        "My sister Anna is getting married in June!",
        "Unfortunately, I also lost my job at Door Dash this month.",
    ]:
        assert is_statement(s), s


def test_one_memory_per_sentence_with_speaker_and_turn():
    turns = [
        Turn("Gina", "Hey Jon! I lost my job this month. I am opening my own clothing store. How are you?", "D1:1"),
        Turn("Jon", "Sorry to hear that! I started a dance studio downtown.", "D1:2"),
    ]
    mems = extract_memories(turns)
    assert [m["event"] for m in mems] == [
        "Gina: I lost my job this month.",
        "Gina: I am opening my own clothing store.",
        "Jon: I started a dance studio downtown.",
    ]
    assert [m["turns"] for m in mems] == [[0], [0], [1]]
    assert [m["speaker"] for m in mems] == ["Gina", "Gina", "Jon"]


def test_near_duplicates_are_merged_keeping_both_turns():
    turns = [
        Turn("user", "I adopted a puppy named Rex.", "a"),
        Turn("assistant", "Nice.", "b"),
        Turn("user", "I adopted a puppy named Rex!", "c"),
    ]
    mems = extract_memories(turns)
    assert len(mems) == 1 and mems[0]["turns"] == [0, 2]


def test_sentences_split_on_ends_and_line_breaks():
    assert sentences("One two. Three four!\nFive six? Seven") == ["One two.", "Three four!", "Five six?", "Seven"]


@pytest.mark.skipif(not (SHARED_DATA / "locomo" / "locomo_dev.json").exists(), reason="shared data not present")
def test_locomo_observations_are_covered_and_no_question_is_kept():
    from memory.locomo_format import load_sessions, observations

    sample = next(
        s for s in json.loads((SHARED_DATA / "locomo" / "locomo_dev.json").read_text()) if s["sample_id"] == "conv-30"
    )
    covered, events = set(), []
    for s in load_sessions(sample)[0][1]:
        for m in extract_memories(s.turns):
            covered |= {s.turns[i].turn_id for i in m["turns"]}
            events.append(m["event"])
    obs = observations(sample)
    recall = sum(1 for o in obs if set(o.dia_ids) & covered) / len(obs)
    assert recall >= 0.9
    assert sum("?" in e for e in events) / len(events) < 0.02
