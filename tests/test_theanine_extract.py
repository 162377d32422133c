"""LLM-free memory extraction: statements, one per sentence, with speaker and provenance."""

from __future__ import annotations

import json

from memory.records import Turn
from memory.theanine.extract import extract_memories, is_statement, sentences
from tests.conftest import LOCOMO_SMALL


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


def test_locomo_observations_are_covered_and_no_question_is_kept():
    from memory.locomo_format import load_sessions, observations

    sample = next(s for s in json.loads(LOCOMO_SMALL.read_text()) if s["sample_id"] == "conv-30")
    covered, events = set(), []
    for s in load_sessions(sample)[0][1]:
        for m in extract_memories(s.turns):
            covered |= {s.turns[i].turn_id for i in m["turns"]}
            events.append(m["event"])
    obs = observations(sample)
    recall = sum(1 for o in obs if set(o.dia_ids) & covered) / len(obs)
    assert recall >= 0.9
    assert sum("?" in e for e in events) / len(events) < 0.02


# A scripted 5-message chat with the replies a chat model gives (small talk, claims about itself, echoes).
CHAT = [
    ("user", "Hi! I have a grey cat called Pixel."),
    ("assistant", "Hello! I'm Max, the AI assistant. A grey cat called Pixel sounds like a wonderful companion."),
    ("user", "I started surfing lessons in Lisbon last month."),
    ("assistant", "Surfing in Lisbon sounds amazing! The waves there are great for beginners like you."),
    ("user", "My sister Ana is visiting me from Porto next week."),
    ("assistant", "How lovely that your sister Ana is visiting from Porto next week, you must be excited."),
    ("user", "Please remind me to book the vet for Pixel on Friday."),
    ("assistant", "Of course. I'll remind you on Friday to book the vet appointment for Pixel."),
    ("user", "I work as a nurse at the children's hospital."),
    ("assistant", "Being a nurse at a children's hospital is such meaningful work, it must be rewarding."),
]


def chat_turns() -> list[Turn]:
    return [Turn(sp, text, f"s1:{i}") for i, (sp, text) in enumerate(CHAT)]


def test_in_a_user_assistant_chat_the_memories_are_the_users_and_the_assistants_promises():
    mems = extract_memories(chat_turns())
    by = [m["speaker"] for m in mems]
    assert by.count("assistant") == 1 and "remind you on Friday" in next(
        m["event"] for m in mems if m["speaker"] == "assistant"
    )
    assert {m["event"] for m in mems if m["speaker"] == "user"} >= {
        "user: I have a grey cat called Pixel.",
        "user: I started surfing lessons in Lisbon last month.",
        "user: I work as a nurse at the children's hospital.",
    }


def test_two_named_speakers_both_keep_their_statements():
    turns = [
        Turn("Jon", "I lost my job as a banker last week.", "D1:1"),
        Turn("Gina", "I opened my own dance studio downtown.", "D1:2"),
    ]
    assert [m["speaker"] for m in extract_memories(turns)] == ["Jon", "Gina"]


def test_an_llm_summary_of_the_assistants_words_is_not_kept():
    from memory.llm import LLMSession
    from memory.records import SessionRecord
    from memory.theanine import linking
    from memory.trace import Trace
    from tests.fakes import ScriptedLLM

    answer = {
        "memories": [
            {"speaker": "user", "event": "The user has a grey cat called Pixel.", "turns": [0]},
            {"speaker": "assistant", "event": "The assistant is called Max, an AI assistant.", "turns": [1]},
            {
                "speaker": "user",
                "event": "Surfing in Lisbon is great for beginners.",
                "turns": [3],
            },  # said by the assistant
            {
                "speaker": "assistant",
                "event": "The assistant will remind the user on Friday to book the vet.",
                "turns": [7],
            },
        ]
    }
    session = LLMSession(ScriptedLLM(answer), Trace("close"), 0.0, 0)
    mems = linking.summarise(SessionRecord("s1", "2026-12-01", chat_turns()), session)
    assert [m.event for m in mems] == [
        "The user has a grey cat called Pixel.",
        "The assistant will remind the user on Friday to book the vet.",
    ]


def test_a_title_or_abbreviation_ends_no_sentence():
    from memory.theanine.extract import sentences

    said = "I just started a new job as a nurse at St. Mary's hospital. Dr. Green is my boss!"
    assert sentences(said) == ["I just started a new job as a nurse at St. Mary's hospital.", "Dr. Green is my boss!"]
