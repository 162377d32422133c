"""Issue 19, item 5: each LLM answer is checked for what its step needs (the real-server run is
tests/test_real_qwen.py)."""

import pytest

from memory.theanine import prompts

SPEAKERS = ["user", "assistant", "user", "assistant"]


def test_a_refined_timeline_object_gives_its_sentences_never_its_repr():
    raw = {
        "timelines": [
            {"relation": "None", "event1": "I adopted a beagle puppy named Rex", "event2": "Ana wants to meet Rex."},
            "The user adopted Rex, a beagle.",
            42,
        ]
    }
    out = prompts.validate_refined(raw, 3)
    assert out[0] == "I adopted a beagle puppy named Rex. Ana wants to meet Rex."
    assert out[1] == "The user adopted Rex, a beagle." and out[2] == ""  # "" keeps the raw timeline
    assert not any("{" in t or "'relation'" in t for t in out)
    with pytest.raises(ValueError):
        prompts.validate_refined({"timelines": [{"relation": "None"}, 7]}, 2)  # no text at all


def test_a_memory_is_a_statement_about_a_speaker():
    raw = {
        "memories": [
            {"speaker": "user", "event": "The user adopted a beagle named Rex.", "turns": [0]},
            {"speaker": "user", "event": "Great to hear that you've adopted Rex!", "turns": [0]},
            {"speaker": "user", "event": "The assistant congratulated them warmly on the puppy.", "turns": [1]},
            {"speaker": "assistant", "event": "The assistant promised to remind the user on Friday.", "turns": [3]},
            {"speaker": "User", "event": "Does the user want another dog soon?", "turns": [2]},
            {"speaker": "", "event": "The user's friend Ana wants to meet Rex.", "turns": [2]},
            {"speaker": "user", "event": {"text": "an object, not a statement"}, "turns": [0]},
        ]
    }
    out = prompts.validate_memories(raw, 4, turn_speakers=SPEAKERS)
    assert [(m["speaker"], m["event"]) for m in out] == [
        ("user", "The user adopted a beagle named Rex."),
        ("assistant", "The assistant promised to remind the user on Friday."),
        ("user", "The user's friend Ana wants to meet Rex."),
    ]
    with pytest.raises(ValueError):
        prompts.validate_memories({"memories": [raw["memories"][1]]}, 4, turn_speakers=SPEAKERS)


def test_a_memory_says_what_its_turns_say():
    """The 1.5B copied the prompt's worked example into a session about pottery."""
    texts = ["We made our own pots at the pottery workshop!", "Wow, lovely cups."]
    raw = {
        "memories": [
            {"speaker": "Melanie", "event": "Melanie made pots at a workshop.", "turns": [0]},
            {"speaker": "Caroline", "event": "Caroline booked a flight to Lisbon for June.", "turns": [1]},
            {"speaker": "Melanie", "event": "Melanie went to a pottery class.", "turns": []},
        ]
    }
    out = prompts.validate_memories(raw, 2, turn_speakers=["Melanie", "Caroline"], turn_texts=texts)
    assert [m["event"] for m in out] == ["Melanie made pots at a workshop.", "Melanie went to a pottery class."]
    with pytest.raises(ValueError):  # nothing grounded: the step falls back to the session's statements
        prompts.validate_memories(
            {"memories": raw["memories"][1:2]}, 2, turn_speakers=["Melanie", "Caroline"], turn_texts=texts
        )


def test_speakers_are_matched_to_the_sessions_people():
    speakers = ["Caroline", "Melanie"]
    raw = {
        "memories": [
            {"speaker": "caroline", "event": "Caroline went to a support group.", "turns": [0]},
            {"speaker": "Mel", "event": "Melanie painted a sunrise last year.", "turns": [1]},
            {"speaker": "Someone", "event": "Someone unnamed did something notable.", "turns": []},
        ]
    }
    out = prompts.validate_memories(raw, 2, turn_speakers=speakers)
    assert [m["speaker"] for m in out] == ["Caroline", "Melanie"]  # by name, else by the turn it cites
