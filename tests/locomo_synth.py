"""A small synthetic conversation in LoCoMo's file format (snap-research/LoCoMo), for UI tests.

Two named speakers, one topic per session, dated in 2023 like LoCoMo's ("1:56 pm on 8 May, 2023"),
turn ids "D{session}:{turn}", and a `qa` list with a question about the oldest session. Written
here (not taken from LoCoMo) so the tests run without ../shared.
"""

from __future__ import annotations

import json
from pathlib import Path

TOPICS = [
    ("surfing", "I went surfing at Ocean Beach for the first time this morning.", "How were the waves?"),
    ("pottery", "I signed up for a pottery class on Thursdays.", "What will you make first?"),
    ("garden", "My tomatoes in the garden finally turned red.", "Do you grow anything else?"),
    ("violin", "I started taking violin lessons with my neighbour.", "Is it hard to learn?"),
    ("marathon", "I am training for the city marathon in October.", "How far do you run now?"),
    ("bakery", "I found a tiny bakery that makes cardamom buns.", "Where is it?"),
    ("chess", "I joined a chess club at the library.", "Do you play online too?"),
    ("kayak", "We paddled a kayak across the lake on Sunday.", "Was the water calm?"),
    ("painting", "I painted a portrait of my grandmother.", "Will you show it somewhere?"),
    ("camping", "We went camping in the mountains for three nights.", "Did you see any wildlife?"),
]
# A phrase only each session's first fact holds (a search for it finds that one memory's session).
KEYS = [
    "Ocean Beach",
    "Thursdays",
    "tomatoes",
    "neighbour",
    "October",
    "cardamom",
    "library",
    "lake",
    "grandmother",
    "mountains",
]
QUESTION = "When did Mara go surfing for the first time?"


def conversation(n_sessions: int = len(TOPICS)) -> dict:
    conv: dict = {"speaker_a": "Mara", "speaker_b": "Tobi"}
    for i, (topic, fact, ask) in enumerate(TOPICS[:n_sessions], start=1):
        conv[f"session_{i}_date_time"] = f"{1 + i % 12}:{10 + i:02d} pm on {1 + 2 * i} May, 2023"
        conv[f"session_{i}"] = [
            {"speaker": "Mara", "dia_id": f"D{i}:1", "text": fact},
            {"speaker": "Tobi", "dia_id": f"D{i}:2", "text": ask},
            {"speaker": "Mara", "dia_id": f"D{i}:3", "text": f"It was great; {topic} makes my week better."},
            {"speaker": "Tobi", "dia_id": f"D{i}:4", "text": f"I am glad {topic} is going well."},
        ]
    return {
        "sample_id": "synth-1",
        "conversation": conv,
        "qa": [{"question": QUESTION, "answer": "3 May 2023", "evidence": ["D1:1"], "category": 2}],
    }


def write(folder: Path, n_sessions: int = len(TOPICS)) -> Path:
    path = folder / "locomo_synth.json"
    path.write_text(json.dumps([conversation(n_sessions)]), encoding="utf-8")
    return path
