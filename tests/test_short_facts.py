"""Every stated fact a memory, offline (issue 44, item 4): short first-person facts of every kind become
memories (memory.theanine.extract, personal_facts), small talk mostly does not, and a later "I quit my
job" is Changed against "I work at a bakery."."""

from __future__ import annotations

from memory.records import Turn
from memory.theanine.changes import stated_change
from memory.theanine.extract import extract_memories
from memory.theanine.graph import Memory

FACTS = {
    "likes": [
        "I love jazz.",
        "I hate running.",
        "I like sushi.",
        "I adore cats.",
        "I enjoy hiking.",
        "I prefer tea.",
        "I really love spicy food.",
        "We love camping.",
        "I don't like horror films.",
        "I'm into board games.",
    ],
    "pets": [
        "I have a dog.",
        "I have two cats.",
        "We have a parrot.",
        "I own a horse.",
        "My dog is old.",
        "My hamster died.",
        "I foster kittens.",
        "Our cat is deaf.",
    ],
    "family": [
        "My sister is pregnant.",
        "My brother is a pilot.",
        "I have three kids.",
        "My dad is retired.",
        "I have a twin.",
        "My wife is Dutch.",
        "My son plays football.",
        "My parents are divorced.",
        "I'm married.",
        "I'm single.",
        "We have a baby.",
        "I'm an only child.",
    ],
    "health": [
        "I am allergic to peanuts.",
        "I'm diabetic.",
        "I have asthma.",
        "I'm vegan.",
        "I don't eat meat.",
        "I'm pregnant.",
        "I take insulin.",
        "I have migraines.",
        "I'm lactose intolerant.",
        "I wear glasses.",
        "I broke my leg.",
        "I'm afraid of spiders.",
        "My mom has diabetes.",
    ],
    "work": [
        "I work at a bakery.",
        "I work nights.",
        "I work from home.",
        "I teach math.",
        "I study law.",
        "I'm unemployed.",
        "I'm retired.",
        "I drive a taxi.",
        "I run a cafe.",
    ],
    "home": [
        "I live alone.",
        "I live with my parents.",
        "We rent a flat.",
        "I live downtown.",
        "I own a house.",
        "Our house is small.",
        "I grew up on a farm.",
        "I share a flat.",
    ],
    "hobbies": [
        "I play guitar.",
        "I speak French.",
        "I knit.",
        "I swim every day.",
        "I collect stamps.",
        "I bake bread.",
        "I run marathons.",
        "I go climbing.",
        "I'm learning Spanish.",
        "I sing in a choir.",
        "I drink coffee.",
        "I meditate daily.",
        "Oh, and I paint.",
    ],
}

SMALL_TALK = [
    # greetings and goodbyes
    "Hi!",
    "Hey there!",
    "Good morning!",
    "Good night!",
    "See you tomorrow!",
    "Bye for now.",
    "Talk soon!",
    "Take care!",
    "Have a great day!",
    "I'm back!",
    "I have to go.",
    # thanks
    "Thanks!",
    "Thank you so much.",
    "Thanks a lot for the tip.",
    "I appreciate it.",
    "I really appreciate that.",
    "Much appreciated.",
    "My pleasure!",
    # reactions
    "That's awesome!",
    "Wow, cool.",
    "Nice!",
    "I love that!",
    "I love it.",
    "I like that idea.",
    "I see.",
    "I agree.",
    "I totally agree with you.",
    "I get it.",
    "I understand.",
    "I'm so happy for you!",
    "I'm glad to hear that.",
    "I'm sorry to hear that.",
    "I'm fine, thanks.",
    "I'm good.",
    "I'm doing well.",
    "I'm tired now.",
    "I can imagine.",
    "I feel you.",
    "I miss you!",
    "I hope so.",
    "I think so.",
    "I guess so.",
    "Me too!",
    "Same here.",
    "My bad.",
    "Oh my god!",
    "No way!",
    "Sounds fun!",
    "Good luck!",
    "Congrats!",
    "Haha, true.",
    "Fair enough.",
    "Of course.",
    "You're right.",
    "You got this!",
    "Way to go, Jon!",
    "I had a great time!",
    "My day was good.",
    "I have a question.",
    "I have no idea.",
    "I love your idea.",
    "I read that too.",
    "I'm so excited!",
    # questions
    "How are you?",
    "What do you do for work?",
    "Do you have any pets?",
    "Where do you live",
    "What's your favourite band?",
    "Have you tried yoga?",
    "Can you help me?",
    "Any plans for the weekend?",
    "What about you?",
    "Really?",
    "Do you like jazz?",
    "Is your sister pregnant?",
]


def is_memory(sentence: str) -> bool:
    return bool(extract_memories([Turn("user", sentence, "s1:0")]))


def test_short_first_person_facts_all_become_memories():
    facts = [s for kind in FACTS.values() for s in kind]
    missed = [s for s in facts if not is_memory(s)]
    print(f"short facts: {len(facts) - len(missed)} of {len(facts)} became memories; missed: {missed}")
    assert len(facts) >= 60 and all(len(v) >= 8 for v in FACTS.values())
    assert missed == []


def test_at_most_a_tenth_of_small_talk_becomes_a_memory():
    kept = [s for s in SMALL_TALK if is_memory(s)]
    print(f"small talk: {len(kept)} of {len(SMALL_TALK)} became memories: {kept}")
    assert len(SMALL_TALK) >= 60
    assert len(kept) <= 0.1 * len(SMALL_TALK), kept


def test_i_quit_my_job_is_changed_against_i_work_at_a_bakery():
    old, new = (
        Memory(f"s{i}:m0", extract_memories([Turn("user", t, f"s{i}:0")])[0]["event"], d, f"s{i}", speaker="user")
        for i, t, d in ((1, "I work at a bakery.", "2023-01-01"), (2, "I quit my job.", "2023-03-01"))
    )
    assert stated_change(old, new) == "job"
