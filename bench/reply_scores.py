"""How `bench replies` scores one reply, and how two runs are compared question by question."""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import dataclass
from difflib import SequenceMatcher

from memory.reply_prompts import is_refusal

from .answer_score import has_all_words, normalise, token_f1


@dataclass(frozen=True)
class Question:
    qid: str  # stable across runs: the pairing key
    text: str
    answers: list[str]  # acceptable answers: right when the reply holds every content word of one
    old: str = ""  # a changed fact's earlier value: naming it first is wrong
    kind: str = ""  # LoCoMo category, "ku-home", or fact / changed / reason


def _first_mention(text: str, value: str) -> int:
    m = re.search(rf"(?<![\w-]){re.escape(normalise(value))}(?![\w-])", normalise(text))
    return m.start() if m else -1


def score(reply: str, q: Question) -> dict:
    """strict: a gold answer's every content word in the reply (and, for a changed fact, the new value
    named before the old one); f1: LoCoMo's token F1 against the best gold answer; refusal."""
    hit = next((g for g in q.answers if has_all_words(reply, g)), None)
    strict = hit is not None
    if hit is not None and q.old:
        old_at = _first_mention(reply, q.old)
        new_at = min((i for w in normalise(hit).split() if (i := _first_mention(reply, w)) >= 0), default=-1)
        strict = old_at < 0 or 0 <= new_at < old_at
    return {
        "strict": strict,
        "f1": round(max((token_f1(reply, g) for g in q.answers), default=0.0), 4),
        "refusal": is_refusal(reply),
    }


def parrots(reply: str, message: str) -> bool:
    """The reply repeats the message: holds it whole (a message of three words or more), or opens with
    a sentence that is nearly the message."""
    r, m = normalise(reply), normalise(message)
    if not r or not m:
        return False
    if len(m.split()) >= 3 and m in r:
        return True
    first = normalise(re.split(r"(?<=[.!?])\s", reply.strip(), maxsplit=1)[0])
    return SequenceMatcher(None, first, m).ratio() >= 0.85


def _bootstrap(diffs: list[float], n: int = 4000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def paired(rows: list[dict], other: list[dict], label: str, other_label: str) -> str:
    """Per-question differences (this run minus the other) on the questions both runs asked: the mean
    with a 95% paired-bootstrap interval, and how many questions each run alone got right."""
    theirs = {r["id"]: r for r in other}
    both = [(r, theirs[r["id"]]) for r in rows if r["id"] in theirs]
    common = [(a, b) for a, b in both if a["set"] != "chat"]
    chat = [(a, b) for a, b in both if a["set"] == "chat"]
    if not both:
        return f"paired: no question in common with {other_label}"
    out = [f"paired, {label} minus {other_label}, {len(common)} questions (95% bootstrap interval):"]
    if chat:  # ordinary chat has no gold answer: the parroting it says back, message by message
        d = [float(a["parrot"]) - float(b["parrot"]) for a, b in chat]
        lo, hi = _bootstrap(d)
        out.append(f"  chat parroting {statistics.fmean(d):+.3f} [{lo:+.3f}, {hi:+.3f}] over {len(chat)} messages")
    if not common:
        return "\n".join(out)
    for key in ("strict", "f1"):
        d = [float(a[key]) - float(b[key]) for a, b in common]
        lo, hi = _bootstrap(d)
        verdict = "better" if lo > 0 else "worse" if hi < 0 else "no difference shown"
        extra = ""
        if key == "strict":
            extra = f"; right only here {sum(x > 0 for x in d)}, only there {sum(x < 0 for x in d)}"
        out.append(f"  {key:6} {statistics.fmean(d):+.3f} [{lo:+.3f}, {hi:+.3f}] {verdict}{extra}")
    for s in sorted({a["set"] for a, _ in common}):
        mine = [(a, b) for a, b in common if a["set"] == s]
        d = [float(a["strict"]) - float(b["strict"]) for a, b in mine]
        out.append(f"  {s:8} strict {statistics.fmean(d):+.3f} over {len(mine)}")
    return "\n".join(out)
