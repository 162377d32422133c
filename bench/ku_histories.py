"""Synthetic knowledge-update histories: one fact of a person changes across dated sessions.

Deterministic (one seeded RNG) and written for this probe: six kinds of fact (home, job,
partner, pet, plan, preference), each stated in the first session, sometimes restated, changed
in a later session, with distractor sessions between and after (including the same kind of
fact about someone else: "My cousin lives in Madrid"). Every history comes with three
questions: the current value, the old value, and when it changed (the change session's date).

The gold turns say which turns state the old value and which one states the change, so the
offline Changed rule can be scored on them (memory.theanine.changes).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta

from memory.records import SessionRecord, Turn


@dataclass(frozen=True)
class Kind:
    name: str
    values: tuple[str, ...]
    state: tuple[str, ...]  # the first statement of the fact ({v}: the old value)
    restate: tuple[str, ...]  # a later mention of the value in passing
    change: tuple[str, ...]  # the statement that replaces it ({v}: the new value)
    other: tuple[str, ...]  # the same kind of fact about someone else ({v}: another value)
    q_current: str
    q_old: str
    q_when: str


KINDS: tuple[Kind, ...] = (
    Kind(
        "home",
        ("Porto", "Lisbon", "Madrid", "Berlin", "Dublin", "Vienna", "Prague", "Oslo", "Lyon", "Turin", "Ghent"),
        (
            "I live in {v} with my two roommates.",
            "My flat is in {v}, close to the old harbour.",
            "I have been living in {v} for three years.",
        ),
        ("My neighbourhood in {v} has a great bakery.", "The trams in {v} were late again this morning."),
        (
            "I moved to {v} last week and the boxes are still everywhere.",
            "We finally relocated to {v} and the new apartment is lovely.",
            "I live in {v} now, the move went smoothly.",
        ),
        ("My cousin lives in {v} and keeps inviting me over.", "My best friend just bought a house in {v}."),
        "Which city do I live in?",
        "Where did I live before I moved?",
        "When did I move?",
    ),
    Kind(
        "job",
        ("Vantara", "Quillon", "Brightwave", "Corvex", "Halden", "Mirova", "Tessaro", "Zenfield", "Lumera", "Parvon"),
        (
            "I work at {v} as a data analyst.",
            "My job at {v} keeps me busy with quarterly reports.",
            "I have been an engineer at {v} since my graduation.",
        ),
        ("The canteen at {v} served terrible soup today.", "My manager at {v} praised my presentation."),
        (
            "I started a new job at {v} on Monday.",
            "I left my old company and joined {v} as a team lead.",
            "I work at {v} now and the commute is much shorter.",
        ),
        ("My friend Paul just got hired at {v}.", "My brother works at {v} in the finance team."),
        "Where do I work?",
        "Where did I work before my current job?",
        "When did I change jobs?",
    ),
    Kind(
        "partner",
        ("Anna", "Maria", "Sofia", "Elena", "Clara", "Lucas", "Daniel", "Marco", "Jonas", "Tomas", "Nina"),
        (
            "My partner {v} and I cooked a big dinner together.",
            "I have been dating {v} for two years.",
            "My partner {v} loves hiking with me on weekends.",
        ),
        ("{v} surprised me with concert tickets.", "{v} and I watched a documentary about whales."),
        (
            "I am seeing someone new, a kind person named {v}.",
            "My new partner {v} and I met at a concert.",
            "These days I am dating {v}, we met in spring.",
        ),
        ("My colleague {v} is getting married in June.", "My sister's partner {v} fixed my bike."),
        "What is my partner's name?",
        "Who was I dating before?",
        "When did I start dating someone new?",
    ),
    Kind(
        "pet",
        ("Rex", "Bruno", "Luna", "Milo", "Bella", "Oscar", "Daisy", "Teddy", "Pepper", "Rocky", "Biscuit"),
        (
            "My dog {v} loves long walks in the park.",
            "I have a dog called {v} who sleeps all day.",
            "Our dog {v} chewed my new shoes again.",
        ),
        ("{v} barked at the postman all morning.", "I bought {v} a squeaky toy shaped like a duck."),
        (
            "We adopted a new dog named {v} last weekend.",
            "Our new dog {v} already knows how to sit.",
            "I have a new dog now and his name is {v}.",
        ),
        ("My neighbour's dog {v} barks every night.", "My aunt has a grumpy old dog called {v}."),
        "What is my dog's name?",
        "What was my previous dog called?",
        "When did I get my new dog?",
    ),
    Kind(
        "plan",
        ("Japan", "Peru", "Iceland", "Kenya", "Norway", "Mexico", "Vietnam", "Canada", "Morocco", "Chile", "Greece"),
        (
            "I am planning a trip to {v} next summer.",
            "I booked flights to {v} for my summer holidays.",
            "My big plan this year is a long trip to {v}.",
        ),
        ("I bought a guidebook about {v} for the trip.", "I keep watching videos about hiking in {v}."),
        (
            "Change of plans: I am going to {v} this summer instead.",
            "I cancelled the old trip and will travel to {v} this summer.",
            "My holiday plan is {v} now because the flights are cheaper.",
        ),
        ("My parents travelled to {v} last year.", "My friend Tina is moving to {v} for work."),
        "Where am I travelling for my holidays?",
        "Where was I planning to travel before?",
        "When did I change my travel plans?",
    ),
    Kind(
        "preference",
        ("jazz", "techno", "reggae", "opera", "punk", "salsa", "blues", "folk", "metal", "disco", "gospel"),
        (
            "My favourite music is {v}, I listen to it every evening.",
            "I mostly listen to {v} while I cook dinner.",
            "Nothing relaxes me like {v} music after work.",
        ),
        ("I went to a small {v} concert downtown.", "I made a new {v} playlist for the car."),
        (
            "Lately my favourite music is {v}.",
            "I got tired of my old playlists and I listen to {v} now.",
            "These days I prefer {v} over any other music.",
        ),
        ("My brother only listens to {v} music.", "My roommate plays {v} records all weekend."),
        "What music do I like?",
        "What music did I like before?",
        "When did my taste in music change?",
    ),
)

DISTRACTORS = (
    "I went hiking in the hills on Saturday with friends.",
    "My sister is visiting next month for her birthday.",
    "I am reading a novel about a lighthouse keeper.",
    "I baked banana bread for my colleagues this morning.",
    "The gym near me opened a new swimming pool.",
    "I finally fixed the squeaky kitchen door.",
    "I started learning Spanish with a phone app.",
    "My knee hurts a little after the long run.",
    "I painted the bathroom walls a pale green.",
    "My grandmother taught me her lemon cake recipe.",
    "I watched a great documentary about volcanoes.",
    "The farmers market had amazing strawberries today.",
    "I signed up for a pottery class on Thursdays.",
    "My laptop battery died during an important call.",
    "I planted basil and tomatoes on the balcony.",
    "My brother got a promotion at his bank.",
    "I spent the whole weekend cleaning the garage.",
    "I lost my umbrella on the bus yesterday.",
    "I am training for a ten kilometre race in autumn.",
    "My friends and I played board games until midnight.",
    "I tried a new ramen place near the station.",
    "I have been sleeping badly because of the heat.",
    "I repaired my old bicycle with a new chain.",
    "My niece drew a funny picture of my car.",
)

REPLIES = ("That sounds lovely.", "Good to hear.", "Nice, tell me more.", "Oh, interesting.", "That's great.", "I see.")


@dataclass
class History:
    hid: str
    kind: str
    old: str
    new: str
    sessions: list[SessionRecord]
    change_date: str  # the change session's date (ISO)
    ask_date: str  # the date of the session the questions are asked in
    old_turns: list[str] = field(default_factory=list)  # turns that state the old value
    change_turn: str = ""  # the turn that states the change
    questions: dict[str, str] = field(default_factory=dict)  # current | old | when -> question


def _session(sid: str, day: date, lines: list[str], rng: random.Random) -> SessionRecord:
    turns: list[Turn] = []
    for i, line in enumerate(lines):
        turns.append(Turn("user", line, f"{sid}:{2 * i}"))
        turns.append(Turn("assistant", rng.choice(REPLIES), f"{sid}:{2 * i + 1}"))
    return SessionRecord(sid, day.isoformat(), turns)


def make_history(i: int, kind: Kind, rng: random.Random) -> History:
    hid = f"ku{i:02d}"
    old, new, other = rng.sample(kind.values, 3)
    n_sessions = rng.randint(6, 8)
    change_at = rng.randint(3, n_sessions - 2)
    restate_at = rng.randint(1, change_at - 1)
    other_at = rng.choice([s for s in range(1, n_sessions) if s != change_at])
    pool = list(DISTRACTORS)
    rng.shuffle(pool)
    day = date(2023, 1, 2) + timedelta(days=rng.randint(0, 60))
    sessions: list[SessionRecord] = []
    old_turns: list[str] = []
    change_turn = ""
    change_date = ""
    for s in range(n_sessions):
        sid = f"{hid}-s{s + 1}"
        lines = [pool.pop() for _ in range(2 if s in (0, change_at) else 3)]
        special = None
        if s == 0:
            special = ("old", rng.choice(kind.state).format(v=old))
        elif s == restate_at:
            special = ("old", rng.choice(kind.restate).format(v=old))
        elif s == change_at:
            special = ("change", rng.choice(kind.change).format(v=new))
        if s == other_at:
            lines.insert(rng.randint(0, len(lines)), rng.choice(kind.other).format(v=other))
        if special is not None:
            at = rng.randint(0, len(lines))
            lines.insert(at, special[1])
            tid = f"{sid}:{2 * at}"
            if special[0] == "old":
                old_turns.append(tid)
            else:
                change_turn, change_date = tid, day.isoformat()
        sessions.append(_session(sid, day, lines, rng))
        day += timedelta(days=rng.randint(7, 25))
    questions = {"current": kind.q_current, "old": kind.q_old, "when": kind.q_when}
    return History(hid, kind.name, old, new, sessions, change_date, day.isoformat(), old_turns, change_turn, questions)


def histories(n: int = 36, seed: int = 0) -> list[History]:
    """`n` histories, the kinds taken in turn (36: six of each)."""
    rng = random.Random(seed)
    return [make_history(i, KINDS[i % len(KINDS)], rng) for i in range(n)]
