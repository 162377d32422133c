"""`Changed` that a person would agree with (issue 44, item 3): the offline rule on representative
pairs of both kinds, the issue's three false changes among them, and its precision and recall on the
hand-labelled pairs of `python -m bench changed_pairs` (bench/changed_pairs.json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.changed_pairs import SOURCES, load_pairs, scores
from memory.theanine.changes import ChangeRule, change_of
from memory.theanine.graph import Memory


def mem(mid: str, text: str, speaker: str = "user") -> Memory:
    return Memory(mid, f"{speaker}: {text}", "2023-01-01", mid.split(":")[0], speaker=speaker)


CHANGES = [
    ("I work at a bakery.", "I quit my job."),
    ("I live in Porto with two roommates.", "We moved to Berlin last month."),
    ("I have a girlfriend named Priya.", "Priya and I split up, it was mutual."),
    ("I smoke about ten cigarettes a day.", "I quit smoking, it has been two weeks."),
    ("I eat meat pretty much every day.", "I'm vegetarian now."),
    ("I have a cat named Miso.", "Miso passed away last month, I miss her."),
    ("I drive a red Honda Civic.", "I sold the Civic and bought a Tesla."),
    ("My doctor is Dr. Patel.", "I have a new doctor, Dr. Green, since Dr. Patel retired."),
    ("My favourite band is Radiohead.", "My favourite band these days is Arctic Monkeys."),
    ("I'm 34.", "I turned 35 yesterday!"),
    ("I live with my parents.", "I finally moved out of my parents' house, I have my own flat now."),
    ("I'm really enjoying my new job.", "I lost my job at the mechanical engineering company."),
    # a month is no hedge ("in May"), another's denial is not the speaker's, an "I" dropped as people type,
    # a negated clause beside the fact
    ("I'm divorced.", "I got remarried in May!"),
    ("I have a dog named Rex.", "We had to rehome Rex, he didn't get along with the baby."),
    ("I drink four cups of coffee a day.", "Switched to herbal tea and haven't touched coffee since."),
    ("I go to Planet Fitness, it's cheap and never crowded.", "Cancelled my Planet Fitness membership."),
]
NOT_CHANGES = [
    # the three false changes of the issue
    ("I chill out and gain perspective when I do yoga.", "I've been into yoga and meditation lately."),
    ("I bought a console for my partner as a gift.", "We were given a new game for the console last week."),
    ("I adopted a puppy named Biscuit.", "My cat is called Miso and I live in Porto."),
    # a change said of someone else in the same sentence (a typed chat: the move is a change of home only)
    ("I just started a new job as a nurse.", "We moved to Grenoble because Tom got a job at the university."),
    # an addition, a restatement, someone else, a plan, a denial, the same change told again
    ("I have a cat named Luna.", "We got a new kitten last week, her name is Pip."),
    ("I do yoga on Mondays.", "I do yoga on Thursdays too now."),
    ("I moved to Berlin in 2019.", "I love living in Berlin now, it feels like home."),
    ("I live in Porto.", "My cousin just moved to Lisbon."),
    ("I live in Porto.", "I might move to Lisbon next year."),
    ("I didn't get the job at the bank.", "I got a job offer from another bank!"),
    ("Lost my job as a banker yesterday, so I'm starting my own business.", "Losing my job was hard."),
    ("I grew up in Texas.", "I live in Boston now."),
    ("I'm training for a marathon.", "I've been training with a new running group lately."),
    ("I work at a bakery.", "Baked bread all morning at work, my feet hurt."),
    ("I have a dog named Rex.", "Rex didn't get his walk today, he sulked all evening."),
    ("Can't wait to share with my customers.", "I got some new offers going on my online store for new customers."),
]


@pytest.mark.parametrize(("old", "new"), CHANGES)
def test_a_stated_replacement_is_changed(old, new):
    assert change_of(mem("s1:m0", old), mem("s2:m0", new)) is not None


@pytest.mark.parametrize(("old", "new"), NOT_CHANGES)
def test_a_look_alike_is_not_changed(old, new):
    assert change_of(mem("s1:m0", old), mem("s2:m0", new)) is None


def test_another_speaker_is_never_a_change():
    assert change_of(mem("s1:m0", "I work at a bakery."), mem("s2:m0", "I quit my job.", speaker="Jon")) is None


def test_precision_and_recall_on_the_hand_labelled_pairs():
    pairs = load_pairs(Path("no-such-file.json"))  # the chats only (no LoCoMo file needed)
    labels = ChangeRule().changed([(p["old"], p["new"]) for p in pairs])
    for src in SOURCES[1:]:
        idx = [i for i, p in enumerate(pairs) if p["source"] == src]
        r = scores([pairs[i] for i in idx], [labels[i] for i in idx])
        print(src, {k: r[k] for k in ("pairs", "changed_pairs", "precision", "recall")})
        assert r["pairs"] >= 50 and r["changed_pairs"] >= 20
    # pooled: the last blind set (chats-heldout3, run once) has 1 false Changed of 8 (a promotion), and
    # the rule finds only 7 of its 26 changes (docs/knowledge_update.md)
    r = scores(pairs, labels)
    assert r["precision"] >= 0.95, r["false_changed"]
    assert r["recall"] >= 0.7, r["missed"]
