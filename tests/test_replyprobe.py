"""bench.replyprobe: the LoCoMo probe's items and scores (a scripted model; the real models are
measured by the command, docs/models.md)."""

from bench import replyprobe
from memory.reply_prompts import memory_of
from tests.fakes import ScriptedLLM

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a beagle named Rex yesterday."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I am learning the violin."},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "I work at the city bakery."},
        ],
        "session_2_date_time": "2:00 pm on 1 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "My violin teacher moved to Lisbon."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Rex chewed my shoes."},
        ],
    },
    "qa": [
        {"question": "What is Ana's dog called?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "When did Ana adopt Rex?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What does Ben learn?", "answer": "violin", "evidence": ["D1:2", "D2:1"], "category": 1},
        {"question": "Adversarial?", "answer": "x", "evidence": ["D1:1"], "category": 5},
    ],
}


def test_items_hold_evidence_and_distractors_in_time_order_dated():
    items = replyprobe.locomo_items(SAMPLE, n=3, distractors=2, seed=1)
    assert sorted(i.category for i in items) == [1, 2, 4]  # in turn from each category, no adversarial
    for it in items:
        assert len(it.memory) == len({*it.memory}) and it.date == "2:00 pm on 1 June, 2023"
        assert all(line.startswith(("(1:00 pm on 8 May, 2023)", "(2:00 pm on 1 June, 2023)")) for line in it.memory)
    multi = next(i for i in items if i.category == 1)
    assert multi.memory[0].startswith("(1:00") and multi.memory[-1].startswith("(2:00")
    assert any("learning the violin" in m for m in multi.memory) and any("Lisbon" in m for m in multi.memory)
    assert len(multi.memory) == 4  # two evidence turns and two distractors


def test_run_model_scores_each_reply_through_the_reply_path():
    items = replyprobe.locomo_items(SAMPLE, n=3, distractors=1, seed=0)
    llm = ScriptedLLM("Her dog is called Rex.", "Ben is learning the violin. " * 4)
    r = replyprobe.run_model("scripted", items, 0.0, 64, llm=llm)
    assert r["n"] == 3 and 0 < r["f1"] < 1 and 0 < r["all_words"] < 1
    assert set(r["per_category"]) == {"single-hop", "temporal", "multi-hop"}
    assert r["loops"] == 2 / 3  # the same sentence four times
    system, memory = llm.prompts[0][0]["content"], memory_of(llm.prompts[0])
    assert "Today is 2:00 pm on 1 June, 2023" in system and items[0].memory[0] in memory  # after the dialogue
    assert "scripted" in replyprobe.table([r])
