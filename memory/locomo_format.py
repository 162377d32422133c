"""LoCoMo's format (snap-research/LoCoMo): conversations as SessionRecords, observations as
memories, and questions with cleaned evidence ids. Used by the importer and the benchmarks."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .records import SessionRecord, Turn

_DIA = re.compile(r"D(\d+):(\d+)")


def _session_numbers(conv: dict) -> list[int]:
    return sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))


def load_sessions(data) -> list[tuple[str, list[SessionRecord]]]:
    """[(sample_id, sessions)] for a LoCoMo file's content (a list of samples or one sample)."""
    samples = data if isinstance(data, list) else [data]
    out: list[tuple[str, list]] = []
    for s in samples:
        if not isinstance(s, dict) or not isinstance(s.get("conversation"), dict):
            raise ValueError("not LoCoMo format: each sample needs a 'conversation' object")
        conv = s["conversation"]
        sessions = []
        for n in _session_numbers(conv):
            turns = [
                Turn(str(t.get("speaker", "")), str(t.get("text", "")), str(t.get("dia_id", f"D{n}:{i}")))
                for i, t in enumerate(conv[f"session_{n}"])
                if isinstance(t, dict)
            ]
            if turns:
                sessions.append(SessionRecord(f"D{n}", str(conv.get(f"session_{n}_date_time", "")), turns))
        out.append((str(s.get("sample_id", f"sample-{len(out)}")), sessions))
    return out


def clean_evidence(ev) -> list[str]:
    """LoCoMo evidence ids, some malformed ("D8:6; D9:17", "D:11:26"): every Dn:m found."""
    items = ev if isinstance(ev, list) else [ev]
    out = []
    for it in items:
        for m in _DIA.finditer(str(it).replace("D:", "D")):
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return list(dict.fromkeys(out))


@dataclass
class Observation:
    session: str  # "D3"
    date: str
    speaker: str
    text: str
    dia_ids: list[str]


def observations(sample: dict) -> list[Observation]:
    conv, obs = sample["conversation"], sample.get("observation", {})
    out = []
    for n in _session_numbers(conv):
        per_speaker = obs.get(f"session_{n}_observation", {}) or {}
        for speaker, facts in per_speaker.items():
            for f in facts:
                if isinstance(f, list) and f:
                    out.append(
                        Observation(
                            f"D{n}",
                            str(conv.get(f"session_{n}_date_time", "")),
                            speaker,
                            str(f[0]),
                            clean_evidence(f[1:] if len(f) > 1 else []),
                        )
                    )
    return out


@dataclass
class Question:
    question: str
    answer: str
    category: int
    evidence: list[str]


def questions(sample: dict, skip_adversarial: bool = True) -> list[Question]:
    out = []
    for q in sample.get("qa", []):
        cat = int(q.get("category", 0))
        ev = clean_evidence(q.get("evidence", []))
        if (skip_adversarial and cat == 5) or not ev:
            continue
        out.append(Question(str(q.get("question", "")), str(q.get("answer", q.get("adversarial_answer", ""))), cat, ev))
    return out
