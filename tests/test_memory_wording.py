"""The memory as the reply model reads it (memory.wording): facts about the person, dates in words,
what is no longer true marked as past; and the reply prompt that carries it."""

from memory.reply_prompts import memory_block, reply_messages
from memory.wording import for_reader, spoken_date, third_person

CHANGED = (
    "now: [2026-10-20: user: We moved to Grenoble because Tom got a job there.] "
    "before: [2026-10-01 until 2026-10-20: user: I live in Lyon with my partner Tom.]"
)


def test_the_persons_statements_become_facts_about_them():
    assert third_person("I'm allergic to peanuts, so I have to be careful.") == (
        "They're allergic to peanuts, so they have to be careful."
    )
    assert third_person("I was sad and my mom helped me.") == "They were sad and their mom helped them."
    assert third_person("We adopted a puppy; our vet loves him.") == "They adopted a puppy; their vet loves him."
    assert third_person("Rex chewed the shoes.") == "Rex chewed the shoes."  # nothing of the person: unchanged


def test_a_changed_fact_reads_current_first_and_the_old_one_as_past():
    text = for_reader(CHANGED)
    assert text.startswith("Now: (20 Oct 2026) They moved to Grenoble")
    assert "Before that: (1 Oct 2026; no longer true since 20 Oct 2026) They live in Lyon with their partner Tom." in text
    assert "user:" not in text and "[" not in text


def test_each_date_once_and_the_agents_own_words_as_its_own():
    line = "[2026-10-01: user: I have a dog.] -(SameTopic)- [2026-10-01: assistant: I'll ask about him.]"
    assert for_reader(line) == "(1 Oct 2026) They have a dog. -(SameTopic)- You said: I'll ask about him."


def test_a_segment_keeps_its_turns_with_roles_named():
    seg = "(2026-10-20)\nuser: I love jazz.\nassistant: Chet Baker is perfect for that"
    assert for_reader(seg) == "(20 Oct 2026) They love jazz. You said: Chet Baker is perfect for that."


def test_what_it_does_not_recognise_passes_unchanged():
    refined = "Maya moved to Grenoble in October; she used to live in Lyon."
    assert for_reader(refined) == refined
    assert for_reader("[8 May 2023: Caroline: I went to a support group.]") == (
        "[8 May 2023: Caroline: I went to a support group.]"
    )  # not an ISO date: not a stored memory line
    assert spoken_date("sometime") == "sometime" and spoken_date("2023-05-08 13:56") == "8 May 2023"


def test_the_reply_prompt_reads_the_reworded_memory_and_todays_date_in_words():
    msgs = reply_messages("theanine", [CHANGED], [], "Where do I live now?", "2026-10-28")
    assert "Today is Wednesday 28 October 2026." in msgs[0]["content"]
    block = msgs[-2]["content"]
    assert block == memory_block("theanine", [CHANGED]) and "They moved to Grenoble" in block
    assert "no longer true" in block and msgs[-1] == {"role": "user", "content": "Where do I live now?"}
