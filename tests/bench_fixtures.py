"""A tiny LoCoMo-format conversation for the benchmark tests, with answers known by construction."""

from __future__ import annotations

import json
from pathlib import Path

TURNS = {
    1: [
        ("Alice", "Hi Bob, how was your week?"),
        ("Bob", "Busy! I adopted a beagle puppy named Biscuit from the Portland shelter."),
        ("Alice", "Lovely. I started pottery lessons at the community studio downtown."),
        ("Bob", "Pottery sounds relaxing, enjoy it."),
    ],
    2: [
        ("Alice", "Bob, is Biscuit settling in?"),
        ("Bob", "Biscuit chewed my red running shoes yesterday."),
        ("Alice", "My pottery teacher said my first bowl was lopsided."),
        ("Bob", "Keep practising, bowls get easier."),
    ],
}

OBSERVATIONS = {
    1: {
        "Bob": [["Bob adopted a beagle puppy named Biscuit from the Portland shelter.", "D1:2"]],
        "Alice": [["Alice started pottery lessons at the community studio downtown.", "D1:3"]],
    },
    2: {
        "Bob": [["Biscuit the puppy chewed Bob's red running shoes.", "D2:2"]],
        "Alice": [["Alice's pottery teacher said her first bowl was lopsided.", "D2:3"]],
    },
}

QA = [
    {
        "question": "Where did Bob adopt Biscuit the beagle?",
        "answer": "Portland shelter",
        "evidence": ["D1:2"],
        "category": 4,
    },
    # two evidence turns, malformed as in LoCoMo ("D1:3; D2:3"), one mentions the bowl only
    {
        "question": "What did Alice make in her pottery lessons?",
        "answer": "a lopsided bowl",
        "evidence": ["D1:3; D2:3"],
        "category": 1,
    },
    {
        "question": "Adversarial: what did Biscuit eat?",
        "adversarial_answer": "shoes",
        "evidence": ["D2:2"],
        "category": 5,
    },  # skipped (category 5)
    {"question": "No evidence here?", "answer": "none", "evidence": [], "category": 2},  # skipped
]


def tiny_locomo(sample_id: str = "conv-t") -> dict:
    conv: dict[str, object] = {"speaker_a": "Alice", "speaker_b": "Bob"}
    for n, turns in TURNS.items():
        conv[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
        conv[f"session_{n}"] = [
            {"speaker": sp, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (sp, t) in enumerate(turns)
        ]
    return {
        "sample_id": sample_id,
        "conversation": conv,
        "qa": QA,
        "observation": {f"session_{n}_observation": o for n, o in OBSERVATIONS.items()},
        "session_summary": {f"session_{n}_summary": " ".join(t for _, t in TURNS[n]) for n in TURNS},
        "event_summary": {},
    }


def write_tiny(path: Path, n_samples: int = 1) -> Path:
    path.write_text(json.dumps([tiny_locomo(f"conv-t{i}") for i in range(n_samples)]), encoding="utf-8")
    return path


def run_recall_bench(tmp_path: Path, *args: str) -> dict:
    """`python -m bench locomo` over the tiny conversation, with these options; its results file."""
    from bench import locomo_recall

    out = tmp_path / "res" / "locomo.json"
    assert locomo_recall.main(["--data", str(write_tiny(tmp_path / "tiny.json")), "--out", str(out), *args]) == 0
    return json.loads(out.read_text())


def small_locomo(source: str | Path, sample_id: str = "conv-30", n_sessions: int = 3) -> dict:
    """The first `n_sessions` sessions of one LoCoMo conversation, with the questions (and observation facts)
    whose evidence lies in them: a small real file for tests that run the whole benchmark."""
    data = json.loads(Path(source).read_text(encoding="utf-8"))
    sample = next(s for s in data if s.get("sample_id") == sample_id)
    keep = {f"D{n}" for n in range(1, n_sessions + 1)}
    conv = {k: v for k, v in sample["conversation"].items() if not k.startswith("session_")}
    obs = {}
    for n in range(1, n_sessions + 1):
        conv[f"session_{n}"] = sample["conversation"][f"session_{n}"]
        conv[f"session_{n}_date_time"] = sample["conversation"][f"session_{n}_date_time"]
        if f"session_{n}_observation" in sample.get("observation", {}):
            obs[f"session_{n}_observation"] = sample["observation"][f"session_{n}_observation"]
    from memory.locomo_format import clean_evidence

    qa = [
        q
        for q in sample["qa"]
        if (ev := clean_evidence(q.get("evidence", []))) and all(e.split(":")[0] in keep for e in ev)
    ]
    return {"sample_id": sample_id, "conversation": conv, "qa": qa, "observation": obs}


def long_locomo(source: str | Path, sample_id: str = "conv-41", n_sessions: int = 32) -> dict:
    """A long history for the UI tests: the sample's sessions repeated in order until there are `n_sessions`,
    a week apart, turn ids renumbered per session (D{session}:{turn}); no questions."""
    from datetime import datetime, timedelta

    sample = next(s for s in json.loads(Path(source).read_text(encoding="utf-8")) if s["sample_id"] == sample_id)
    c = sample["conversation"]
    base = [
        c[k] for k in sorted((k for k in c if k.startswith("session_") and k[8:].isdigit()), key=lambda k: int(k[8:]))
    ]
    conv = {"speaker_a": c["speaker_a"], "speaker_b": c["speaker_b"]}
    start = datetime(2023, 5, 8, 13, 56)
    for n in range(1, n_sessions + 1):
        when = start + timedelta(days=7 * (n - 1))
        conv[f"session_{n}_date_time"] = f"{when:%-I:%M} {when:%p}".lower() + f" on {when.day} {when:%B}, {when.year}"
        conv[f"session_{n}"] = [{**t, "dia_id": f"D{n}:{i + 1}"} for i, t in enumerate(base[(n - 1) % len(base)])]
    return {"sample_id": sample_id, "conversation": conv, "qa": []}
